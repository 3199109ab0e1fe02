"""Several processes on one warehouse at once: two insert overlapping and disjoint cells into one
array, two refresh the same view, two append (with batch ids, one batch offered by both) to one
stream and maintain its view. Afterwards: no cell stored twice and every cell from exactly one
committed insert, no version number reused and cell totals right, the view verifies, every
committed batch present exactly once, the stream view equals a pandas recomputation.

The figures (commits tried and lost) are printed and written to ``concurrency-figures.json`` in
the test's temporary folder."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest

import arrayviews
from arrayviews.model.errors import CommitConflictError, ConflictError
from arrayviews.model.shapes import L1
from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate
from processes import fork
from test_commits import assert_versions_sound

BATCHES = 8
AGGREGATES = (ViewAggregate("count", None, None, "cnt"), ViewAggregate("sum", "right", "v", "total"))
RECENT = """CREATE VIEW Recent AS
INITIALIZE Recent[i] AS SELECT src, sum(loss) AS total, count(*) AS n FROM M[i-2 .. i] GROUP BY src
UPDATE Recent[j] AS SELECT src, sum(loss) AS total, count(*) AS n FROM M[j-2 .. j] GROUP BY src
PARTITION LENGTH 60"""
EPOCH = 1_420_070_400


def batch_cells(writer: int, number: int) -> dict[tuple[int, int], int]:
    """Batch ``number`` of ``writer``: even batches share three cells with the other writer's batch
    of the same number (only one of the two can be committed), odd batches are disjoint."""
    value = writer * 1000 + number
    own = {(number * 4 + k, 20 + writer * 8 + k): value for k in range(3)}
    shared = {(number * 4 + k, k): value for k in range(3)} if number % 2 == 0 else {}
    return {**own, **shared}


def minute_of(times: pd.Series) -> pd.Series:
    """Minutes since 1970 of timestamps read back from Spark (naive, in the session's UTC)."""
    times = pd.to_datetime(times)
    times = times.dt.tz_localize("UTC") if times.dt.tz is None else times.dt.tz_convert("UTC")
    return (times - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(minutes=1)


def frame(cells: dict[tuple[int, int], int]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "i": np.array([c[0] for c in cells], np.int64),
            "j": np.array([c[1] for c in cells], np.int64),
            "v": np.array(list(cells.values()), np.int64),
        }
    )


def readings(appender: int, number: int) -> pd.DataFrame:
    """Batch ``a{appender}-b{number}``: four sources at minute ``number``, tagged in ``dest``."""
    stamps = pd.to_datetime([EPOCH + 60 * number + 7 * k for k in range(4)], unit="s", utc=True)
    return pd.DataFrame(
        {
            "ts": stamps,
            "src": [f"10.0.0.{k}" for k in range(4)],
            "dest": [f"a{appender}-b{number}"] * 4,
            "loss": [appender * 100 + number * 10 + k for k in range(4)],
        }
    )


@pytest.mark.slow
def test_processes_inserting_refreshing_and_appending_at_once(spark, tmp_path) -> None:
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark)
    array = db.create_array("A<v:int64>[i=0:39:8; j=0:39:8]")
    array.insert(frame({(39, 39): 7}))
    db.create_view("V", SimilarityViewDefinition("A", "A", L1(1), AGGREGATES))
    stream = db.create_stream("M", "ts timestamp, src string, dest string, loss int", 60, "ts")
    stream.append(readings(9, 0), batch_id="seed")
    db.sql(RECENT)
    results = tmp_path / "results"

    def inserter(writer: int):
        mine = arrayviews.connect(location, spark=spark).array("A")
        outcomes = []
        for number in range(BATCHES):
            try:
                result = mine.insert(frame(batch_cells(writer, number)))
                outcomes.append(("committed", number, result.version, result.attempts))
            except ConflictError:
                outcomes.append(("conflict", number, None, 1))
            except CommitConflictError:
                outcomes.append(("gave-up", number, None, 8))
        return outcomes

    def refresher():
        """Refreshes the view again and again while the inserts go on (and once after)."""
        view = arrayviews.connect(location, spark=spark).view("V")
        outcomes = []
        for _ in range(12):
            finished = (results / "inserts-done").exists()
            result = view.refresh("baseline")
            outcomes.append((result.committed, result.version, result.message))
            if finished:
                break
        return outcomes

    def appender(index: int):
        target = arrayviews.connect(location, spark=spark).stream("M")
        outcomes = []
        offered = [(index, n) for n in range(1, 4)] + ([(0, 1)] if index == 1 else [(1, 3)])
        for owner, number in offered:
            result = target.append(readings(owner, number), batch_id=f"a{owner}-b{number}")
            outcomes.append(
                (f"a{owner}-b{number}", result.duplicate, result.version, result.attempts, result.failed)
            )
        return outcomes

    started = time.perf_counter()
    children = [
        ("insert-0", fork(spark, results, lambda: inserter(0), label="insert-0")),
        ("insert-1", fork(spark, results, lambda: inserter(1), label="insert-1")),
        ("refresh-0", fork(spark, results, refresher, label="refresh-0")),
        ("refresh-1", fork(spark, results, refresher, label="refresh-1")),
        ("append-0", fork(spark, results, lambda: appender(0), label="append-0")),
        ("append-1", fork(spark, results, lambda: appender(1), label="append-1")),
    ]
    outcomes = {}
    for label, child in children:
        outcome = child.wait()
        assert outcome.code == 0 and not outcome.killed, f"{label} failed:\n{outcome.error}"
        outcomes[label] = outcome.value
        if label == "insert-1":
            (results / "inserts-done").touch()
    seconds = time.perf_counter() - started

    # -- the array: every stored cell from exactly one committed insert, nothing twice ------------
    db = arrayviews.connect(location, spark=spark)
    array = db.array("A")
    stored = array.to_pandas()
    assert not stored.duplicated(["i", "j"]).any(), "a cell is stored twice"
    expected = {(39, 39): 7}
    committed = {0: set(), 1: set()}
    for writer in (0, 1):
        for status, number, _, _ in outcomes[f"insert-{writer}"]:
            if status == "committed":
                committed[writer].add(number)
                expected.update(batch_cells(writer, number))
    for number in range(0, BATCHES, 2):
        assert not (number in committed[0] and number in committed[1]), (
            f"both writers committed batch {number}"
        )
    for number in range(1, BATCHES, 2):
        assert number in committed[0] and number in committed[1], "a disjoint insert was lost"
    got = {(int(r.i), int(r.j)): int(r.v) for r in stored.itertuples()}
    assert got == expected
    assert_versions_sound(array, len(expected))
    versions = sorted(v for w in (0, 1) for s, _, v, _ in outcomes[f"insert-{w}"] if s == "committed")
    assert len(versions) == len(set(versions)), "two inserts reported the same version"

    # -- the view: versions unique, refreshes never went backwards, and it verifies -------------------
    view = db.view("V")
    view_versions = view.versions()["version"].tolist()
    assert view_versions == list(range(1, len(view_versions) + 1))
    view.refresh("baseline")
    assert view.verify() is True

    # -- the stream: each batch exactly once, the view equal to the reference ----------------------------
    rows = db.stream("M").read().toPandas()
    counts = rows.groupby("dest").size().to_dict()
    offered = {f"a{a}-b{n}" for a in (0, 1) for n in range(1, 4)} | {"a9-b0"}
    assert set(counts) == offered and all(c == 4 for c in counts.values()), counts
    duplicates = [o for label in ("append-0", "append-1") for o in outcomes[label] if o[1]]
    assert len(duplicates) == 2, "each batch offered twice must be appended once and refused once"
    assert all(not o[4] for label in ("append-0", "append-1") for o in outcomes[label]), "a view failed"
    db.maintain_streams()
    recent = db.stream_view("Recent").to_pandas()
    rows = rows.assign(part=minute_of(rows["ts"]))
    first = int(rows["part"].min())
    for part in range(first, int(rows["part"].max()) + 1):
        window = rows[(rows["part"] > part - 3) & (rows["part"] <= part)]
        reference = sorted((src, int(g.loss.sum()), len(g)) for src, g in window.groupby("src"))
        stamp = pd.Timestamp(part * 60, unit="s")
        mine = recent[pd.to_datetime(recent["PART_TIMESTAMP"]) == stamp]
        assert sorted(zip(mine.src, mine.total.astype(int), mine.n.astype(int), strict=True)) == reference

    # -- figures ---------------------------------------------------------------------------------------
    insert_attempts = [o[3] for w in (0, 1) for o in outcomes[f"insert-{w}"]]
    append_attempts = [o[3] for label in ("append-0", "append-1") for o in outcomes[label]]
    refreshes = [o for label in ("refresh-0", "refresh-1") for o in outcomes[label]]
    figures = {
        "seconds": round(seconds, 1),
        "inserts": len(insert_attempts),
        "insert_commits_tried": sum(insert_attempts),
        "insert_commits_lost": sum(a - 1 for a in insert_attempts),
        "insert_conflicts": sum(1 for w in (0, 1) for o in outcomes[f"insert-{w}"] if o[0] == "conflict"),
        "appends": len(append_attempts),
        "append_commits_lost": sum(a - 1 for a in append_attempts),
        "appends_refused_as_duplicates": len(duplicates),
        "refreshes": len(refreshes),
        "refreshes_committed": sum(1 for r in refreshes if r[0]),
        "refreshes_already_fresher": sum(1 for r in refreshes if not r[0] and "already fresher" in r[2]),
        "refreshes_up_to_date": sum(1 for r in refreshes if not r[0] and "up to date" in r[2]),
        "view_versions": len(view_versions),
    }
    print("concurrency figures:", json.dumps(figures))
    (tmp_path / "concurrency-figures.json").write_text(json.dumps(figures, indent=2))
