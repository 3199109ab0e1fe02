"""Arrays, views and streams share one namespace through the Python API as through statements:
a relation cannot be created under a name that a relation of another kind holds (names compared
without regard to case), and the refusal creates nothing. Before, ``create_array`` and ``store``
made an array beside a stream of the same name, and ``create_stream`` a stream beside an array,
so ``relations()`` listed two relations called ``st``."""

from __future__ import annotations

import pytest

import arrayviews
from arrayviews.model.errors import AlreadyExistsError
from arrayviews.model.shapes import L1
from arrayviews.views.definition import similarity

STREAM_SCHEMA = "ts timestamp, src string, loss int"
PATTERN = """CREATE VIEW {name} AS
SELECT src, count(*) AS ct FROM st PATTERN [a, b+] WHERE a.loss > 1 AND b.loss > 1 GROUP BY src"""


@pytest.fixture(scope="module")
def ndb(spark, tmp_path_factory):
    db = arrayviews.connect(
        str(tmp_path_factory.mktemp("names") / "warehouse"), spark=spark, execution="local"
    )
    grid = db.create_array("Grid<v:float64>[i=0:9:5; j=0:9:5]")
    grid.insert({"i": [1, 2], "j": [3, 3], "v": [1.0, 2.0]})
    db.create_stream("St", STREAM_SCHEMA, 60, "ts")
    return db


def _listing(db) -> list[tuple[str, str]]:
    return sorted((r.name.lower(), r.kind) for r in db.relations(helpers=True).itertuples())


CREATIONS = {
    "create_array over a stream": lambda db: db.create_array("ST<v:float64>[i=0:9:5]"),
    "store over a stream": lambda db: db.array("Grid").regrid([5, 5], "avg(v)").store("st"),
    "create_view over a stream": lambda db: db.create_view(
        "sT", similarity("Grid", "Grid", L1(1), ["count(*) as c"])
    ),
    "create_stream over an array": lambda db: db.create_stream("GRID", STREAM_SCHEMA, 60, "ts"),
    "stream view over an array": lambda db: db.create_stream_view(PATTERN.format(name="grid")),
}
HOLDER = {
    "create_array over a stream": "a stream named",
    "store over a stream": "a stream named",
    "create_view over a stream": "a stream named",
    "create_stream over an array": "an array named",
    "stream view over an array": "an array named",
}


@pytest.mark.parametrize("case", sorted(CREATIONS))
def test_a_name_held_by_another_kind_is_refused_and_nothing_is_created(ndb, case) -> None:
    before = _listing(ndb)
    with pytest.raises(AlreadyExistsError) as raised:
        CREATIONS[case](ndb)
    message = str(raised.value)
    assert HOLDER[case] in message and "share one namespace" in message, message
    assert _listing(ndb) == before == [("grid", "array"), ("st", "stream")]


def test_storing_over_an_uncertain_array_names_its_kind(db) -> None:
    grid = db.create_array("G<v:float64>[i=0:9:5; j=0:9:5]")
    grid.insert({"i": [1], "j": [2], "v": [1.0]})
    db.create_uncertain_array("Unc<flux:gaussian>[x=0:9:5; y=0:9:5]")
    with pytest.raises(AlreadyExistsError, match="an uncertain array named unc already exists"):
        grid.regrid([5, 5], "avg(v)").store("unc")
    assert sorted(db.relations().kind) == ["array", "uncertain array"]
