"""One contract for every SQL catalog arrayviews runs on (SQLite embedded, PostgreSQL shared) and
every relation kind it stores (array, array view, uncertain array, stream, stream view).

The PostgreSQL cases run when ``ARRAYVIEWS_TEST_POSTGRES_URL`` names a database (``scripts/test.sh``
starts a local server and sets it when the machine has PostgreSQL). Without it they are skipped,
saying why, unless ``ARRAYVIEWS_TEST_POSTGRES=required``: then they fail.
"""

from __future__ import annotations

import os
import uuid

import numpy as np
import pandas as pd
import pytest
import sqlalchemy

import arrayviews
from arrayviews import (
    ARRAY,
    ARRAY_VIEW,
    L1,
    STREAM,
    STREAM_VIEW,
    UNCERTAIN_ARRAY,
    AlreadyExistsError,
    NotFoundError,
    ValidationError,
    similarity,
)

POSTGRES = os.environ.get("ARRAYVIEWS_TEST_POSTGRES_URL")
POSTGRES_REQUIRED = os.environ.get("ARRAYVIEWS_TEST_POSTGRES") == "required"


def _fresh_postgres_schema_url() -> str:
    """A PostgreSQL URL whose catalog tables live in a new, empty schema (tests stay independent)."""
    schema = "av_" + uuid.uuid4().hex[:12]
    engine = sqlalchemy.create_engine(POSTGRES)
    with engine.begin() as connection:
        connection.execute(sqlalchemy.text(f'CREATE SCHEMA "{schema}"'))
    engine.dispose()
    separator = "&" if "?" in POSTGRES else "?"
    return f"{POSTGRES}{separator}options=-csearch_path%3D{schema}"


@pytest.fixture(params=["sqlite", "postgresql"])
def catalog_db(request, spark, tmp_path):
    if request.param == "sqlite":
        return arrayviews.connect(str(tmp_path / "warehouse"), spark=spark)
    if not POSTGRES:
        message = "set ARRAYVIEWS_TEST_POSTGRES_URL to test the PostgreSQL catalog"
        if POSTGRES_REQUIRED:
            pytest.fail(f"PostgreSQL is required (ARRAYVIEWS_TEST_POSTGRES=required): {message}")
        pytest.skip(message)
    return arrayviews.connect(
        str(tmp_path / "warehouse"), spark=spark, catalog_uri=_fresh_postgres_schema_url()
    )


def test_catalog_contract(catalog_db) -> None:
    db = catalog_db
    assert db.arrays() == []
    array = db.create_array("A<v:float64>[i=0:9:4; j=0:9:4]")
    with pytest.raises(AlreadyExistsError):
        db.create_array("A<w:int64>[i=0:1:1]")
    data = np.arange(100.0).reshape(10, 10)
    array.write_dense(data[:5], origin=(0, 0))
    array.write_dense(data[5:], origin=(5, 0))
    assert db.arrays() == ["A"]
    assert array.versions()["version"].tolist() == [1, 2]
    np.testing.assert_array_equal(array.to_numpy(), data)
    np.testing.assert_array_equal(array.at_version(1).to_numpy(masked=True).mask[5:], True)
    reopened = db.array("a")  # names are case-insensitive
    np.testing.assert_array_equal(
        reopened.regrid([5, 5], "sum(v)").to_numpy(), data.reshape(2, 5, 2, 5).sum(axis=(1, 3))
    )
    db.drop_array("A")
    assert db.arrays() == []
    with pytest.raises(NotFoundError):
        db.array("A")


# -- every relation kind ------------------------------------------------------------------------------
STREAM_SCHEMA = "ts timestamp, src string, loss int"
MINUTE_ROWS = pd.DataFrame(
    {
        "ts": pd.to_datetime(["2015-01-01 00:00:10", "2015-01-01 00:00:50", "2015-01-01 00:01:20"]),
        "src": ["x", "y", "x"],
        "loss": np.array([12, 3, 15], dtype=np.int32),
    }
)
TOTALS = """CREATE VIEW Totals AS
INITIALIZE Totals[i] AS SELECT src, sum(loss) AS total FROM Events[i] GROUP BY src
UPDATE Totals[j] AS SELECT src, sum(loss) AS total FROM Events[j] GROUP BY src
PARTITION LENGTH 60"""


def _make_array(db) -> tuple[str, object]:
    array = db.create_array("Grid<v:int64>[i=0:3:2; j=0:3:2]")
    array.write_dense(np.arange(16).reshape(4, 4))
    return "Grid", lambda: int(db.array("grid").to_numpy().sum()) == sum(range(16))


def _make_array_view(db) -> tuple[str, object]:
    base = db.create_array("Base<v:int64>[i=0:3:2; j=0:3:2]")
    base.write_dense(np.ones((4, 4), dtype=np.int64))
    db.create_view("Near", similarity("Base", "Base", L1(1), ["count(*) as cnt"]))

    def check() -> bool:  # L1(1) neighbours inside a full 4x4 grid, counted by hand
        counts = np.array([[3, 4, 4, 3], [4, 5, 5, 4], [4, 5, 5, 4], [3, 4, 4, 3]])
        return np.array_equal(db.view("near").to_numpy("cnt"), counts)

    return "Near", check


def _make_uncertain_array(db) -> tuple[str, object]:
    sky = db.create_uncertain_array("Sky<>[x=0:9:5; y=0:9:5]", scheme="store-all")
    sky.insert({"x": [1.0, 7.0], "y": [2.0, 8.0], "x_sigma": [0.1, 0.1], "y_sigma": [0.1, 0.1]})
    return "Sky", lambda: db.uncertain_array("sky").count() == 2


def _make_stream(db) -> tuple[str, object]:
    db.create_stream("Events", STREAM_SCHEMA, 60, "ts").append(MINUTE_ROWS)
    return "Events", lambda: db.stream("events").read().count() == len(MINUTE_ROWS)


def _make_stream_view(db) -> tuple[str, object]:
    _make_stream(db)
    db.sql(TOTALS)

    def check() -> bool:  # a hand-written ViewDF starts at the newest part (minute 1): x lost 15
        rows = db.stream_view("totals").to_pandas()
        return rows[["src", "total"]].values.tolist() == [["x", 15]]

    return "Totals", check


MAKERS = {
    ARRAY: _make_array,
    ARRAY_VIEW: _make_array_view,
    UNCERTAIN_ARRAY: _make_uncertain_array,
    STREAM: _make_stream,
    STREAM_VIEW: _make_stream_view,
}
#: The relation each maker builds first, which the relation of that kind reads (None: none).
BASES = {ARRAY_VIEW: ("Base", ARRAY), STREAM_VIEW: ("Events", STREAM)}
DROPS = {
    ARRAY: "drop_array",
    ARRAY_VIEW: "drop_view",
    UNCERTAIN_ARRAY: "drop_uncertain_array",
    STREAM: "drop_stream",
    STREAM_VIEW: "drop_stream_view",
}
LISTS = {
    ARRAY: "arrays",
    ARRAY_VIEW: "views",
    UNCERTAIN_ARRAY: "uncertain_arrays",
    STREAM: "streams",
    STREAM_VIEW: "stream_views",
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(MAKERS))
def test_every_relation_kind_is_listed_read_and_dropped_through_one_catalog(catalog_db, kind) -> None:
    db = catalog_db
    name, holds_its_data = MAKERS[kind](db)
    assert holds_its_data()

    # one listing, every kind in it; each per-kind listing is a filter of it
    listing = db.relations()
    assert listing.name.str.lower().tolist() == sorted(listing.name.str.lower())
    row = listing[listing.name.str.lower() == name.lower()]
    assert row.kind.tolist() == [kind] and row.version.tolist() == [1]
    assert row.pending.tolist() == ([False] if kind in (ARRAY_VIEW, STREAM_VIEW) else [None])
    for other, method in LISTS.items():
        expected = sorted(listing[listing.kind == other].name)
        assert [n.lower() for n in getattr(db, method)()] == [n.lower() for n in expected]
    assert db.kind_of(name.upper()) == kind
    shown = db.sql("SHOW RELATIONS")
    assert dict(zip(shown.name, shown.kind, strict=True)) == dict(
        zip(listing.name, listing.kind, strict=True)
    )

    # the one drop path: the wrong kind is refused, a relation a view reads is refused (naming the
    # view), and nothing changes either way
    wrong = ARRAY if kind != ARRAY else STREAM
    with pytest.raises(ValidationError, match=f"is an? {kind}, not an? {wrong}"):
        db.drop(name, wrong)
    if kind in BASES:
        base, base_kind = BASES[kind]
        with pytest.raises(ValidationError, match=rf"(?i){base_kind} {base} is .* view\(s\) {name}"):
            getattr(db, DROPS[base_kind])(base)
        assert db.kind_of(base) == base_kind
    assert holds_its_data()

    getattr(db, DROPS[kind])(name)
    assert db.kind_of(name) is None
    assert name.lower() not in db.relations().name.str.lower().tolist()
    with pytest.raises(NotFoundError):
        db.drop(name)
    if kind in BASES:  # its base can go now
        base, base_kind = BASES[kind]
        assert db.drop(base) == [base]
    assert db.relations().empty
