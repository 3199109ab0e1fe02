"""Names as an adversary writes them, for every kind of relation, through the Python API and the
statements: the longest name works end to end, a longer one is refused with its length and nothing
created (before, a name of 245 characters or more failed with a bare ``OSError: File name too
long`` from the file system, its table's folder being named after it); names compared without
regard to case; the name of a dropped relation taken by another kind."""

from __future__ import annotations

import pandas as pd
import pytest

import arrayviews
from arrayviews.model.errors import AlreadyExistsError, ArrayViewsError, ValidationError
from arrayviews.model.shapes import L1
from arrayviews.storage.creation import MAX_NAME_LENGTH
from arrayviews.views.definition import similarity

STREAM_SCHEMA = "ts timestamp, src string, loss int"
LONGEST = "L" + "o" * (MAX_NAME_LENGTH - 2) + "g"


@pytest.fixture(scope="module")
def ndb(spark, tmp_path_factory):
    db = arrayviews.connect(str(tmp_path_factory.mktemp("names") / "warehouse"), spark=spark, execution="local")
    base = db.create_array("Base<v:float64>[i=0:9:5; j=0:9:5]")
    base.insert({"i": [1, 2], "j": [3, 3], "v": [1.0, 2.0]})
    return db


def _state(db) -> list[tuple[str, str, int]]:
    return sorted((r.name, r.kind, r.version) for r in db.relations(helpers=True).itertuples())


def _rows(minutes: list[int], losses: list[int]) -> pd.DataFrame:
    stamps = pd.to_datetime([f"2026-01-01T00:{m:02d}:05" for m in minutes], utc=True)
    return pd.DataFrame({"ts": stamps, "src": ["a"] * len(minutes), "loss": losses})


CREATORS = {
    "array": lambda db, name: db.create_array(f"{name}<v:float64>[i=0:9:5]"),
    "array statement": lambda db, name: db.sql(f"CREATE ARRAY {name} <v:float64>[i=0:9:5]"),
    "uncertain array": lambda db, name: db.create_uncertain_array(f"{name}<f:gaussian>[x=0:99:10]", step=1),
    "store": lambda db, name: db.array("Base").regrid([5, 5], "sum(v)").store(name),
    "array view": lambda db, name: db.create_view(name, similarity("Base", "Base", L1(1), ["count(*) as c"])),
    "stream": lambda db, name: db.create_stream(name, STREAM_SCHEMA, 60, "ts"),
    "stream statement": lambda db, name: db.sql(
        f"CREATE STREAM {name} (ts timestamp, src string, loss int) PARTITION LENGTH 60 TIME COLUMN ts"
    ),
}


@pytest.mark.parametrize("kind", sorted(CREATORS))
def test_a_name_one_character_too_long_is_refused_naming_its_length(ndb, kind) -> None:
    before = _state(ndb)
    for name in [LONGEST + "x", "A" * 300]:
        with pytest.raises(ValidationError) as raised:
            CREATORS[kind](ndb, name)
        message = str(raised.value)
        assert f"({len(name)} characters) is too long" in message, message
        assert f"at most {MAX_NAME_LENGTH} characters" in message and "nothing was created" in message
        assert _state(ndb) == before


def test_the_longest_names_work_end_to_end_for_every_kind(ndb) -> None:
    array = ndb.create_array(f"{LONGEST}<v:float64>[i=0:9:5]")
    array.insert({"i": [2, 7], "v": [1.5, 2.5]})
    assert ndb.sql(f"SELECT * FROM {LONGEST.lower()}").to_pandas().v.sort_values().tolist() == [1.5, 2.5]
    with pytest.raises(AlreadyExistsError, match="an array named"):
        ndb.create_stream(LONGEST.upper(), STREAM_SCHEMA, 60, "ts")
    ndb.drop_array(LONGEST.upper())
    # the dropped array's name taken by a stream, with a pattern view (and its helper) of the longest name
    stream = ndb.create_stream(LONGEST, STREAM_SCHEMA, 60, "ts")
    view = "V" + LONGEST[1:]
    ndb.sql(
        f"CREATE VIEW {view} AS INITIALIZE {view}[i] AS SELECT src, sum(loss) AS total FROM {LONGEST}[i] "
        f"GROUP BY src UPDATE {view}[j] AS SELECT src, sum(loss) AS total FROM {LONGEST}[j] GROUP BY src "
        "PARTITION LENGTH 60"
    )
    rows = _rows([2, 2, 2], [12, 15, 30])  # one part (the view holds its newest part)
    stream.append(rows)
    ndb.maintain_streams()
    assert ndb.kind_of(view) == "stream view"
    frame = ndb.stream_view(view).to_pandas()
    got = {(pd.Timestamp(t).minute, int(total)) for t, total in zip(frame.PART_TIMESTAMP, frame.total, strict=True)}
    expected = {}
    for stamp, loss in zip(rows.ts, rows.loss, strict=True):  # plain Python: the sum of each minute
        expected[stamp.minute] = expected.get(stamp.minute, 0) + int(loss)
    assert got == set(expected.items())
    # drop the view and the stream, and the names are free for an array view and an array again
    ndb.drop_stream_view(view)
    ndb.drop_stream(LONGEST)
    ndb.create_view(view.lower(), similarity("Base", "Base", L1(1), ["count(*) as c"]))
    again = ndb.create_array(f"{LONGEST.lower()}<v:float64>[i=0:9:5]")
    again.insert({"i": [4], "v": [3.0]})
    assert again.to_pandas().v.tolist() == [3.0]
    assert ndb.kind_of(view) == "array view" and ndb.kind_of(LONGEST) == "array"


def test_every_error_of_a_name_is_an_arrayviews_error(ndb) -> None:
    before = _state(ndb)
    for bad in ["1abc", "a-b", "a b", "ä", "_hidden", "a__b", "", "K\u212a"]:
        for kind, create in CREATORS.items():
            with pytest.raises(ArrayViewsError):
                create(ndb, bad)
            assert _state(ndb) == before, (kind, bad)
    # names given apart from a schema text: any value that is not a name (before, create_view(None)
    # failed with AttributeError: 'NoneType' object has no attribute 'lower')
    given = {
        "array": lambda name: ndb.create_array("X<v:float64>[i=0:9:5]", name=name),
        "store": lambda name: ndb.array("Base").regrid([5, 5], "sum(v)").store(name),
        "array view": lambda name: ndb.create_view(name, similarity("Base", "Base", L1(1), ["count(*) as c"])),
        "stream": lambda name: ndb.create_stream(name, STREAM_SCHEMA, 60, "ts"),
    }
    for bad in [None, 5, b"x", "a\n", "a b", ""]:
        for kind, create in given.items():
            if bad is None and kind == "array":  # the name of the schema text
                continue
            with pytest.raises(ArrayViewsError):
                create(bad)
            assert _state(ndb) == before, (kind, bad)


def test_a_view_over_a_name_another_relation_holds_names_that_relation(ndb) -> None:
    """(Before, create_view over an uncertain array or an array view said "an array named ...".)"""
    ndb.create_uncertain_array("Unc<f:gaussian>[x=0:99:10]", step=1)
    ndb.create_view("Vw", similarity("Base", "Base", L1(1), ["count(*) as c"]))
    before = _state(ndb)
    for name, holder in [("unc", "an uncertain array"), ("VW", "an array view")]:
        with pytest.raises(AlreadyExistsError, match=f"^{holder} named {name} already exists"):
            ndb.create_view(name, similarity("Base", "Base", L1(1), ["count(*) as c"]))
    assert _state(ndb) == before
    ndb.drop_view("vw")
    ndb.drop_uncertain_array("UNC")
