"""kill -9 at every step: a process doing an insert, a store, a create_view, a refresh or a stream
append (with maintenance) SIGKILLs itself at its k-th fault checkpoint (no handler, ``finally`` or
cleanup runs), 20 times per kind, k cycling over every checkpoint the operation passes (storage
commit steps included: files staged, manifests written, metadata file written before the catalog
swap, after the swap). After each kill the warehouse is opened afresh: every relation equals a
committed prefix (the killed operation is entirely there or not at all), and redoing the operation
completes it. References are pandas/brute-force recomputations."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import arrayviews
from arrayviews.model.errors import AlreadyExistsError
from arrayviews.model.shapes import L1
from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate
from processes import fork
from test_commits import assert_versions_sound, brute_force_view, view_rows

KILLS = 20
AGGREGATES = (ViewAggregate("count", None, None, "cnt"), ViewAggregate("sum", "right", "v", "total"))
DEFINITION = SimilarityViewDefinition("A", "A", L1(1), AGGREGATES)
SCHEMA = "A<v:int64>[i=0:63:8; j=0:15:8]"
STREAM_SCHEMA = "ts timestamp, src string, dest string, loss int"
EPOCH = 1_420_070_400
RECENT = """CREATE VIEW Recent AS
INITIALIZE Recent[i] AS SELECT src, sum(loss) AS total, count(*) AS n FROM M[i-1 .. i] GROUP BY src
UPDATE Recent[j] AS SELECT src, sum(loss) AS total, count(*) AS n FROM M[j-1 .. j] GROUP BY src
PARTITION LENGTH 60"""


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


def trial_cells(trial: int) -> dict[tuple[int, int], int]:
    return {(trial * 3 % 64, (trial * 5 + k) % 16): trial * 10 + k for k in range(3)}


def content(array) -> dict[tuple[int, int], int]:
    return {(int(r.i), int(r.j)): int(r.v) for r in array.to_pandas().itertuples()}


def kill_points(spark, tmp_path, operation) -> int:
    """How many checkpoints ``operation`` passes when nothing kills it (it then completes)."""
    outcome = fork(spark, tmp_path / "dry", operation, kill_at=10**9).wait()
    assert outcome.code == 0, outcome.error
    assert outcome.reached >= 3
    return outcome.reached


def run_trials(spark, tmp_path, operation_for, after) -> dict:
    """KILLS trials: trial t runs ``operation_for(t)`` killed at checkpoint (t mod n) + 1, then
    ``after(t, killed)`` checks the warehouse and completes the work."""
    points = kill_points(spark, tmp_path, operation_for(-1))
    after(-1, False)
    killed = 0
    for trial in range(KILLS):
        outcome = fork(spark, tmp_path / "runs", operation_for(trial), kill_at=trial % points + 1).wait()
        assert outcome.killed or outcome.code == 0, outcome.error
        killed += outcome.killed
        after(trial, outcome.killed)
    assert killed >= KILLS - 2, f"only {killed} of {KILLS} runs were killed"
    return {"checkpoints": points, "kills": killed}


@pytest.mark.slow
def test_kill_9_during_inserts(spark, tmp_path) -> None:
    location = str(tmp_path / "warehouse")
    arrayviews.connect(location, spark=spark).create_array(SCHEMA)
    model: dict[tuple[int, int], int] = {}

    def operation_for(trial: int):
        def insert():
            array = arrayviews.connect(location, spark=spark).array("A")
            replace = trial % 4 == 3 and trial > 0
            cells = trial_cells(trial) if not replace else {c: -trial for c in trial_cells(trial - 1)}
            array.insert(frame(cells), on_conflict="replace" if replace else "error")

        return insert

    def after(trial: int, killed: bool) -> None:
        array = arrayviews.connect(location, spark=spark).array("A")
        replace = trial % 4 == 3 and trial > 0
        cells = trial_cells(trial) if not replace else {c: -trial for c in trial_cells(trial - 1)}
        stored = content(array)
        done = {**model, **cells}
        assert stored in (model, done), "the array is not a committed prefix"
        assert_versions_sound(array, len(stored))
        if stored == model:  # redo: it completes
            array.insert(frame(cells), on_conflict="replace" if replace else "error")
        model.update(cells)
        assert content(array) == model

    figures = run_trials(spark, tmp_path, operation_for, after)
    print("insert kills:", json.dumps(figures))


@pytest.mark.slow
def test_kill_9_during_store_and_create_view(spark, tmp_path) -> None:
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark)
    base = {(i, j): i * 16 + j for i in range(0, 64, 5) for j in range(0, 16, 3)}
    db.create_array(SCHEMA).insert(frame(base))
    expected_filter = {c: v for c, v in base.items() if v > 100}

    def store_for(trial: int):
        return lambda: (
            arrayviews.connect(location, spark=spark).array("A").filter("v > 100").store(f"S{trial + 1}")
        )

    def after_store(trial: int, killed: bool) -> None:
        db = arrayviews.connect(location, spark=spark)
        name = f"S{trial + 1}"
        if name in db.arrays():
            assert content(db.array(name)) == expected_filter
            assert db.array(name).versions()["version"].tolist() == [1]
        else:
            assert not db.warehouse.exists(name)
            db.array("A").filter("v > 100").store(name)  # the retry succeeds
        assert content(db.array(name)) == expected_filter
        with pytest.raises(AlreadyExistsError):
            db.array("A").filter("v > 100").store(name)

    store_figures = run_trials(spark, tmp_path / "store", store_for, after_store)
    reference = brute_force_view(base)

    def create_for(trial: int):
        return lambda: arrayviews.connect(location, spark=spark).create_view(f"V{trial + 1}", DEFINITION)

    def after_create(trial: int, killed: bool) -> None:
        db = arrayviews.connect(location, spark=spark)
        name = f"V{trial + 1}"
        if name in db.views():
            assert view_rows(db.view(name)) == reference
        else:
            assert not db.warehouse.exists(name)
            db.create_view(name, DEFINITION)
        assert view_rows(db.view(name)) == reference

    create_figures = run_trials(spark, tmp_path / "create", create_for, after_create)
    db = arrayviews.connect(location, spark=spark)
    assert db.check().problems == []  # crashed creations left only folders younger than the grace
    print("store kills:", json.dumps(store_figures), "create_view kills:", json.dumps(create_figures))


@pytest.mark.slow
def test_kill_9_during_refresh(spark, tmp_path) -> None:
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark)
    model = {(i, j): i + j for i in range(0, 64, 7) for j in range(0, 16, 4)}
    db.create_array(SCHEMA).insert(frame(model))
    db.create_view("V", DEFINITION)

    def refresh_for(trial: int):
        # the parent inserted a new batch before each trial: the refresh has work to do
        array = arrayviews.connect(location, spark=spark).array("A")
        cells = {c: v for c, v in trial_cells(trial + 40).items() if c not in model}
        array.insert(frame(cells))
        model.update(cells)
        return lambda: arrayviews.connect(location, spark=spark).view("V").refresh("baseline")

    def after(trial: int, killed: bool) -> None:
        db = arrayviews.connect(location, spark=spark)
        view = db.view("V")
        reflected = {row["base"]: row["reflected"] for row in view.status()["bases"]}["A"]
        at_reflected = content(db.array("A").at_version(reflected))
        assert view_rows(view) == brute_force_view(at_reflected), "the view is not a committed state"
        assert view.versions()["version"].tolist() == list(range(1, view.version + 1))
        view.refresh("baseline")
        assert view_rows(view) == brute_force_view(model)

    figures = run_trials(spark, tmp_path / "refresh", refresh_for, after)
    assert arrayviews.connect(location, spark=spark).view("V").verify() is True
    print("refresh kills:", json.dumps(figures))


def readings(number: int) -> pd.DataFrame:
    minute = number // 2 if number % 3 else max(0, number // 2 - 3)  # every third batch is late
    stamps = pd.to_datetime([EPOCH + 60 * minute + 11 * k for k in range(3)], unit="s", utc=True)
    return pd.DataFrame(
        {
            "ts": stamps,
            "src": [f"10.0.0.{k}" for k in range(3)],
            "dest": [f"b{number}"] * 3,
            "loss": [number * 10 + k for k in range(3)],
        }
    )


@pytest.mark.slow
def test_kill_9_during_appends_and_their_maintenance(spark, tmp_path) -> None:
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark)
    stream = db.create_stream("M", STREAM_SCHEMA, 60, "ts")
    stream.append(readings(0), batch_id="b0")
    db.sql(RECENT)
    appended = {"b0"}

    def append_for(trial: int):
        number = trial + 2
        return lambda: (
            arrayviews.connect(location, spark=spark)
            .stream("M")
            .append(readings(number), batch_id=f"b{number}")
        )

    def after(trial: int, killed: bool) -> None:
        number = trial + 2
        db = arrayviews.connect(location, spark=spark)
        stream = db.stream("M")
        counts = stream.read().toPandas().groupby("dest").size().to_dict()
        assert set(counts) in (appended, appended | {f"b{number}"}), "not a committed prefix"
        assert all(c == 3 for c in counts.values()), counts
        result = stream.append(readings(number), batch_id=f"b{number}")  # the retry
        assert result.duplicate == (f"b{number}" in counts)
        assert not result.failed, result.failed
        appended.add(f"b{number}")
        rows = stream.read().toPandas()
        assert sorted(rows["dest"].unique()) == sorted(appended) and len(rows) == 3 * len(appended)
        rows = rows.assign(part=minute_of(rows["ts"]))
        recent = db.stream_view("Recent").to_pandas()
        parts = pd.to_datetime(recent["PART_TIMESTAMP"])
        for part in range(int(rows["part"].min()), int(rows["part"].max()) + 1):
            window = rows[(rows["part"] > part - 2) & (rows["part"] <= part)]
            expected = sorted((s, int(g.loss.sum()), len(g)) for s, g in window.groupby("src"))
            mine = recent[parts == pd.Timestamp(part * 60, unit="s")]
            assert sorted(zip(mine.src, mine.total.astype(int), mine.n.astype(int), strict=True)) == expected

    figures = run_trials(spark, tmp_path / "append", append_for, after)
    print("append kills:", json.dumps(figures))


def _die_at(names: tuple[str, ...]) -> None:
    """In this (child) process, end abruptly (no cleanup) when reaching one of the checkpoints
    ``names``: patches every module's reference to ``checkpoint``."""
    import os
    import sys

    def die(name: str) -> None:
        if name in names:
            os._exit(17)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("arrayviews") and hasattr(module, "checkpoint"):
            module.checkpoint = die


def test_a_store_killed_before_its_commit_leaves_nothing_and_the_retry_succeeds(spark, tmp_path) -> None:
    location = str(tmp_path / "warehouse")
    base = {(i, j): i * 16 + j for i in range(0, 64, 9) for j in range(0, 16, 5)}
    arrayviews.connect(location, spark=spark).create_array(SCHEMA).insert(frame(base))

    def store():
        _die_at(("store.before-commit",))
        arrayviews.connect(location, spark=spark).array("A").filter("v > 100").store("B")

    outcome = fork(spark, tmp_path / "runs", store).wait()
    assert outcome.code == 17
    db = arrayviews.connect(location, spark=spark)
    assert db.arrays() == ["A"]
    stored = db.array("A").filter("v > 100").store("B")  # before: AlreadyExistsError on an empty B
    assert content(stored) == {c: v for c, v in base.items() if v > 100}


def test_a_create_view_killed_before_its_commit_leaves_nothing_and_the_retry_succeeds(
    spark, tmp_path
) -> None:
    location = str(tmp_path / "warehouse")
    base = {(i, j): i - j for i in range(0, 64, 9) for j in range(0, 16, 5)}
    arrayviews.connect(location, spark=spark).create_array(SCHEMA).insert(frame(base))

    def create():
        _die_at(("refresh.before-commit",))
        arrayviews.connect(location, spark=spark).create_view("V", DEFINITION)

    outcome = fork(spark, tmp_path / "runs", create).wait()
    assert outcome.code == 17
    db = arrayviews.connect(location, spark=spark)
    assert db.views() == []  # before: an empty view at version 0, reading as zero rows
    view = db.create_view("V", DEFINITION)
    assert view_rows(view) == brute_force_view(base)
