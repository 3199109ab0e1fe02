"""The warehouse stays usable and safe: ``connect`` refuses folders that hold something else, a broken
table neither hides nor blocks the healthy ones and ``check`` finds and repairs it, no relation with
dependents can be dropped (views over views included), and the Spark SQL pass-through reads only
registered relations (no files, no Java reflection) unless explicitly allowed."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import arrayviews
from arrayviews.model.errors import NotFoundError, ValidationError
from arrayviews.model.shapes import L1
from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate, WindowViewDefinition
from test_stream_views import SCHEMA, helper_text, network

COUNT = (ViewAggregate("count", None, None, "cnt"),)


def cells(pairs: list[tuple[int, int]], value: int = 1) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "i": np.array([p[0] for p in pairs], np.int64),
            "j": np.array([p[1] for p in pairs], np.int64),
            "v": np.full(len(pairs), value, np.int64),
        }
    )


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


# -- connect ----------------------------------------------------------------------------------------
def test_connect_makes_or_opens_warehouses_and_refuses_other_folders(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    db = arrayviews.connect(str(fresh), spark=object())
    db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    assert arrayviews.connect(str(fresh), spark=object()).arrays() == ["A"]  # an existing warehouse opens
    empty = tmp_path / "empty"
    empty.mkdir()
    assert arrayviews.connect(str(empty), spark=object()).arrays() == []

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("my thesis")
    with pytest.raises(ValidationError, match="not empty") as error:
        arrayviews.connect(str(busy), spark=object())
    assert "notes.txt" in str(error.value) and "create_in_existing_folder" in str(error.value)
    assert files_under(busy) == {"notes.txt"}, "a refused folder must be left untouched"
    assert arrayviews.connect(str(busy), spark=object(), create_in_existing_folder=True).arrays() == []
    assert (busy / "notes.txt").read_text() == "my thesis"

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    connection = sqlite3.connect(foreign / "catalog.db")
    connection.execute("CREATE TABLE invoices (id INTEGER, amount REAL)")
    connection.commit()
    connection.close()
    before = (foreign / "catalog.db").read_bytes()
    for flag in (False, True):
        with pytest.raises(ValidationError, match="not an arrayviews catalog"):
            arrayviews.connect(str(foreign), spark=object(), create_in_existing_folder=flag)
    assert (foreign / "catalog.db").read_bytes() == before
    assert files_under(foreign) == {"catalog.db"}


def test_a_warehouse_made_before_the_marker_still_opens(tmp_path: Path) -> None:
    folder = tmp_path / "old"
    db = arrayviews.connect(str(folder), spark=object())
    db.create_array("A<v:int64>[i=0:9:5]")
    (folder / "arrayviews-warehouse.json").unlink()
    assert arrayviews.connect(str(folder), spark=object()).arrays() == ["A"]


# -- broken tables and the check ----------------------------------------------------------------------
def break_metadata(array) -> None:
    """Delete every metadata.json of the array (an accident, or a half-copied warehouse)."""
    folder = Path(urlparse(array.source.table.table.location()).path) / "metadata"
    for path in folder.glob("*.metadata.json"):
        path.unlink()


def test_a_table_without_metadata_neither_hides_nor_blocks_the_others(db) -> None:
    for name in "ABC":
        db.create_array(f"{name}<v:int64>[i=0:9:5; j=0:9:5]").insert(cells([(1, 1)]))
    break_metadata(db.array("B"))
    assert db.arrays() == ["A", "C"]
    assert db.describe()["name"].tolist() == ["A", "C"]
    assert "C" in str(db.sql("SHOW ARRAYS")) and "B" not in str(db.sql("SHOW ARRAYS"))
    with pytest.raises(NotFoundError, match="check"):
        db.array("B")
    db.drop_array("C")
    assert db.arrays() == ["A"]
    report = db.check()
    assert not report.healthy
    assert [(p.relation, p.repaired) for p in report.problems] == [("b", False)]
    assert "metadata" in report.problems[0].problem
    repaired = db.check(repair=True)
    assert repaired.healthy and repaired.problems[0].repaired
    assert "dropped" in repaired.problems[0].repair
    assert db.check().problems == []
    assert db.arrays() == ["A"]
    db.create_array("B<v:int64>[i=0:9:5]")  # the name can be used again
    assert db.arrays() == ["A", "B"]


def test_check_restores_the_newest_intact_metadata_and_versions(db) -> None:
    array = db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    array.insert(cells([(1, 1)], 1))
    array.insert(cells([(2, 2)], 2))
    # the newest metadata file is lost: the one before it is intact
    folder = Path(urlparse(array.source.table.table.location()).path)
    newest = max((folder / "metadata").glob("*.metadata.json"))
    newest.unlink()
    repaired = db.check(repair=True, orphans_older_than=dt.timedelta(0))
    assert repaired.healthy and "restored" in repaired.problems[0].repair
    restored = db.array("A")
    assert restored.version == 1 and restored.to_pandas()["v"].tolist() == [1]
    restored.insert(cells([(3, 3)], 3))
    assert restored.versions()["version"].tolist() == [1, 2]
    # a data file of the current version is lost: rolled back to the newest intact version
    current = restored.source.file_uris()
    newest_file = max(current, key=lambda uri: Path(urlparse(uri).path).stat().st_mtime)
    Path(urlparse(newest_file).path).unlink()
    report = db.check()
    assert [p.relation for p in report.problems] == ["A"] and "missing" in report.problems[0].problem
    assert db.check(repair=True).healthy
    assert db.array("A").to_pandas()["v"].tolist() == [1]
    assert db.array("A").versions()["version"].tolist() == [1]


def test_check_finds_and_deletes_orphans(db) -> None:
    array = db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    array.insert(cells([(1, 1)]))
    table_folder = Path(urlparse(array.source.table.table.location()).path)
    (table_folder / "data" / "left-by-a-crash.parquet").write_bytes(b"x")
    crashed = table_folder.parent / "b-0123456789"
    (crashed / "data").mkdir(parents=True)
    (crashed / "data" / "part.parquet").write_bytes(b"y")
    assert db.check().problems == []  # within the grace period: maybe a write in progress
    report = db.check(orphans_older_than=dt.timedelta(0))
    assert sorted(p.relation for p in report.problems) == ["A", "b-0123456789"]
    assert db.check(repair=True, orphans_older_than=dt.timedelta(0)).healthy
    assert not crashed.exists() and not (table_folder / "data" / "left-by-a-crash.parquet").exists()
    assert db.check(orphans_older_than=dt.timedelta(0)).problems == []
    assert db.array("A").count() == 1


def test_check_command(db) -> None:
    from arrayviews.cli import main

    db.create_array("A<v:int64>[i=0:9:5]").insert(pd.DataFrame({"i": [1], "v": [2]}))
    db.create_array("B<v:int64>[i=0:9:5]").insert(pd.DataFrame({"i": [1], "v": [2]}))
    break_metadata(db.array("B"))
    runner = CliRunner()
    where = ["--warehouse", urlparse(db.warehouse.location).path]
    result = runner.invoke(main.cli, [*where, "check"])
    assert result.exit_code == 1 and "b:" in result.output.lower() and "metadata" in result.output
    result = runner.invoke(main.cli, [*where, "check", "--repair"])
    assert result.exit_code == 0, result.output
    assert "dropped" in result.output
    result = runner.invoke(main.cli, [*where, "check"])
    assert result.exit_code == 0 and "no problems" in result.output
    assert db.arrays() == ["A"]


# -- dependents -------------------------------------------------------------------------------------
def test_nothing_with_dependents_can_be_dropped_views_over_views_included(db) -> None:
    array = db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    array.insert(cells([(1, 1), (1, 2)]))
    db.create_view("V", SimilarityViewDefinition("A", "A", L1(1), COUNT))
    db.create_view("W", SimilarityViewDefinition("V", "A", L1(1), COUNT))  # a view over a view
    db.create_view("X", WindowViewDefinition("V", (1, 1), (1, 1), ("count(*)",)))
    with pytest.raises(ValidationError, match="cannot read itself"):
        db.create_view("Y", WindowViewDefinition("Y", (1, 1), (1, 1), ("count(*)",)))
    assert db.views() == ["V", "W", "X"] and not db.warehouse.exists("Y")
    with pytest.raises(ValidationError, match="drop them first"):
        db.drop_array("A")
    with pytest.raises(ValidationError, match="W"):
        db.drop_view("V")
    assert db.arrays() == ["A"] and db.views() == ["V", "W", "X"]

    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(network(range(2)))
    db.sql(helper_text())
    db.sql(
        """CREATE VIEW Over AS
INITIALIZE Over[i] AS SELECT src FROM Helper[i]
UPDATE Over[j] AS SELECT src FROM Helper[j]
PARTITION LENGTH 60"""
    )
    with pytest.raises(ValidationError, match="read by"):
        db.drop_stream("M")
    with pytest.raises(ValidationError, match="read by"):
        db.drop_stream_view("Helper")
    assert db.stream_views() == ["Helper", "Over"] and db.streams() == ["M"]
    db.drop_stream_view("Over")
    db.drop_stream_view("Helper")
    db.drop_stream("M")
    db.drop_view("W")
    db.drop_view("X")
    db.drop_view("V")
    db.drop_array("A")
    assert db.arrays() == [] and db.views() == [] and db.streams() == []


# -- the Spark SQL pass-through ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "query",
    [
        "SELECT reflect('java.lang.System', 'getProperty', 'user.home') FROM M",
        "SELECT java_method('java.lang.System', 'getenv', 'HOME') AS x FROM M",
        "SELECT * FROM text.`/etc/hostname` JOIN M ON true",
        "SELECT src FROM M UNION ALL SELECT value FROM text.`/etc/hostname`",
        "SELECT * FROM M WHERE src IN (SELECT value FROM text.`/etc/hostname`)",
        "SELECT * FROM read_files('/etc/hostname') JOIN M ON true",
        "SELECT TRANSFORM(src) USING 'cat' AS (x) FROM M",
        # a script is parsed statement by statement (one grammar), and each query is checked
        "SELECT * FROM M; SELECT reflect('java.lang.System', 'getProperty', 'user.home')",
    ],
)
def test_the_pass_through_refuses_reflection_and_path_reads(db, query: str) -> None:
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(network(range(1)))
    with pytest.raises(ValidationError, match="not accepted"):
        db.sql(query).collect()


def test_the_pass_through_runs_queries_over_relations_and_unsafe_ones_when_allowed(db, spark) -> None:
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(network(range(2)))
    db.sql(helper_text())
    rows = db.sql(
        "WITH high AS (SELECT src, loss FROM M WHERE loss > 10) "
        "SELECT h.src, count(*) AS n FROM high h JOIN Helper v ON h.src = v.src GROUP BY h.src ORDER BY h.src"
    ).collect()
    assert [r["src"] for r in rows] == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    unsafe = arrayviews.connect(db.warehouse.location, spark=spark, allow_unsafe_sql=True)
    value = unsafe.sql("SELECT reflect('java.lang.Math', 'abs', -3) AS x FROM M LIMIT 1").collect()[0]["x"]
    assert value == "3"
