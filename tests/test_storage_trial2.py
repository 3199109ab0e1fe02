"""Two processes on one warehouse and kill -9, second trial round: the create/insert/drop race of
one name (a table seen by the catalog while another process drops it), time-axis writes racing and
killed, stream appends racing maintenance, compaction and expiry racing inserts and refreshes, and
the catalog under contention. References are Python sets and dicts of what each process was told
was committed."""

from __future__ import annotations

import logging
import os
import uuid

import numpy as np
import pandas as pd
import pytest
import sqlalchemy
from pyiceberg.table import CreateTableTransaction

import arrayviews
from arrayviews.model import faults
from arrayviews.model.errors import AlreadyExistsError, ConflictError, NotFoundError
from arrayviews.storage.catalog import _Catalog
from cell_frames import content, frame
from processes import fork

SCHEMA = "B<v:int64>[i=0:15:4; j=0:15:4]"


#: A PostgreSQL database for the catalog races too, when one is named (scripts/test.sh starts one).
POSTGRES = os.environ.get("ARRAYVIEWS_TEST_POSTGRES_URL")
CATALOGS = ["sqlite", "postgresql"] if POSTGRES else ["sqlite"]


def connector(kind: str, location: str, spark):
    """``connect(location)`` on the warehouse's SQLite catalog, or on a fresh schema of the
    PostgreSQL test database (every process of one test opening the same one)."""
    uri = None
    if kind == "postgresql":
        schema = f"av_{uuid.uuid4().hex[:12]}"
        engine = sqlalchemy.create_engine(POSTGRES)
        with engine.begin() as connection:
            connection.execute(sqlalchemy.text(f'CREATE SCHEMA "{schema}"'))
        engine.dispose()
        uri = f"{POSTGRES}{'&' if '?' in POSTGRES else '?'}options=-csearch_path%3D{schema}"
    return lambda: arrayviews.connect(location, spark=spark, execution="local", catalog_uri=uri)


# -- the third cause of the create/insert/drop race ----------------------------------------------------
def test_a_table_dropped_between_its_catalog_row_and_its_metadata_file_is_not_there(
    spark, tmp_path, monkeypatch
):
    """Another process drops B between this process's read of B's catalog row and its read of the
    metadata file the row names. Before: FileNotFoundError of the metadata file from
    ``create_array`` (its check that the name is free) and "array B cannot be read ... run
    `arrayviews check`" from ``db.array`` (1 run in 7 of the two-process create/insert/drop race)."""
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    original = _Catalog._convert_orm_to_iceberg
    armed = []

    def dropped_meanwhile(self, row):
        if armed and row.table_name == "b":
            armed.clear()
            arrayviews.connect(location, spark=spark, execution="local").drop_array("B")
        return original(self, row)

    monkeypatch.setattr(_Catalog, "_convert_orm_to_iceberg", dropped_meanwhile)
    db.create_array(SCHEMA).insert(frame({(1, 1): 1}))
    armed.append(True)
    with pytest.raises(NotFoundError, match="no array named B"):
        db.array("B")
    assert db.arrays() == []
    db.create_array(SCHEMA).insert(frame({(2, 2): 2}))
    armed.append(True)
    created = db.create_array(SCHEMA)  # the name fell free while the check looked at it
    assert created.version == 0 and content(db.array("B")) == {}
    db.array("B").insert(frame({(3, 3): 3}))
    armed.append(True)
    assert db.arrays() == []  # a listing leaves out a table dropped while it was listed
    assert not armed


def test_a_creation_losing_to_a_table_created_and_dropped_at_once_is_already_exists(
    spark, tmp_path, monkeypatch
):
    """Another process creates B after this creation's check that the name is free, and drops it
    again before this one's commit failure is looked at. Before: pyiceberg's raw
    ``CommitFailedException: Table already exists``."""
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    original = CreateTableTransaction.commit_transaction

    def raced(self):
        other = arrayviews.connect(location, spark=spark, execution="local")
        monkeypatch.setattr(CreateTableTransaction, "commit_transaction", original)
        other.create_array(SCHEMA)
        try:
            return original(self)
        finally:
            other.drop_array("B")

    monkeypatch.setattr(CreateTableTransaction, "commit_transaction", raced)
    with pytest.raises(AlreadyExistsError, match="an array named B already exists"):
        db.create_array(SCHEMA)
    assert db.arrays() == []
    assert list((tmp_path / "warehouse" / "arrays.db").iterdir()) == []  # the loser's folder is gone
    db.create_array(SCHEMA).insert(frame({(1, 1): 1}))  # the retry succeeds
    assert content(db.array("B")) == {(1, 1): 1}


def test_a_creation_whose_table_is_dropped_at_once_returns_a_handle_that_names_the_drop(
    spark, tmp_path, monkeypatch
):
    """Another process drops B right after this process created it. Before: pyiceberg's
    ``NoSuchTableError: Table does not exist: arrays.b`` from ``create_array`` (which had
    succeeded); now the creation returns its array, and writing to it says it was dropped."""
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    original = CreateTableTransaction.commit_transaction

    def dropped_at_once(self):
        created = original(self)
        monkeypatch.setattr(CreateTableTransaction, "commit_transaction", original)
        arrayviews.connect(location, spark=spark, execution="local").drop_array("B")
        return created

    monkeypatch.setattr(CreateTableTransaction, "commit_transaction", dropped_at_once)
    array = db.create_array(SCHEMA)
    with pytest.raises(NotFoundError, match="array B was dropped by another process"):
        array.insert(frame({(1, 1): 1}))
    assert db.arrays() == []


def test_an_insert_losing_to_a_drop_logs_no_traceback_of_manifests_already_gone(spark, tmp_path, caplog):
    """Another process drops B between an insert's staging and its commit. Before: besides the
    clear NotFoundError, pyiceberg logged two warnings with full tracebacks ("Failed to delete
    uncommitted manifest ... FileNotFoundError"): the manifests it cleans up went with the folder."""
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    array = db.create_array(SCHEMA)
    array.insert(frame({(1, 1): 1}))

    def other_drops():
        arrayviews.connect(location, spark=spark, execution="local").drop_array("B")

    with (
        faults.interleave("commit.staged", other_drops),
        pytest.raises(NotFoundError, match="array B was dropped by another process"),
    ):
        array.insert(frame({(2, 2): 2}))
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert db.arrays() == []


# -- stream appends with and without batch ids, maintenance, compaction and expiry at once -------------
STREAM_COLUMNS = "ts timestamp, src string, dest string, loss int"
EPOCH = 1_420_070_400
RECENT = """CREATE VIEW Recent AS
INITIALIZE Recent[i] AS SELECT src, sum(loss) AS total, count(*) AS n FROM M[i-1 .. i] GROUP BY src
UPDATE Recent[j] AS SELECT src, sum(loss) AS total, count(*) AS n FROM M[j-1 .. j] GROUP BY src
PARTITION LENGTH 60"""


def readings(tag: str, minute: int, loss: int) -> pd.DataFrame:
    """Three rows at minute ``minute`` tagged ``tag`` in ``dest``."""
    stamps = pd.to_datetime([EPOCH + 60 * minute + 5 * k for k in range(3)], unit="s", utc=True)
    return pd.DataFrame(
        {"ts": stamps, "src": ["a", "b", "c"], "dest": [tag] * 3, "loss": [loss + k for k in range(3)]}
    )


def minute_of(times: pd.Series) -> pd.Series:
    times = pd.to_datetime(times)
    times = times.dt.tz_localize("UTC") if times.dt.tz is None else times.dt.tz_convert("UTC")
    return (times - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(minutes=1)


def assert_recent_is_the_reference(db) -> None:
    """Recent (a two-minute window per source) equals a pandas recomputation from the stream."""
    rows = db.stream("M").read().toPandas()
    rows = rows.assign(part=minute_of(rows["ts"]))
    recent = db.stream_view("Recent").to_pandas()
    parts = pd.to_datetime(recent["PART_TIMESTAMP"])
    for part in range(int(rows["part"].min()), int(rows["part"].max()) + 1):
        window = rows[(rows["part"] > part - 2) & (rows["part"] <= part)]
        expected = sorted((s, int(g.loss.sum()), len(g)) for s, g in window.groupby("src"))
        mine = recent[parts == pd.Timestamp(part * 60, unit="s")]
        assert sorted(zip(mine.src, mine.total.astype(int), mine.n.astype(int), strict=True)) == expected, (
            part
        )


def test_appends_with_and_without_batch_ids_beside_maintenance_compaction_and_expiry(spark, tmp_path):
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    db.create_stream("M", STREAM_COLUMNS, 60, "ts").append(readings("seed", 0, 0), batch_id="seed")
    db.sql(RECENT)
    results = tmp_path / "results"

    def with_ids():
        stream = arrayviews.connect(location, spark=spark, execution="local").stream("M")
        log = []
        for n in (1, 2, 1):  # batch 1 is offered twice
            result = stream.append(readings(f"id-{n}", n, 10 * n), batch_id=f"id-{n}")
            log.append([f"id-{n}", result.duplicate, [str(f) for f in result.failed]])
        return log

    def without_ids():
        stream = arrayviews.connect(location, spark=spark, execution="local").stream("M")
        log = []
        for n in (2, 1):  # late rows too (minute 1 after minute 2)
            result = stream.append(readings(f"plain-{n}", n, 100 * n))
            log.append([f"plain-{n}", result.duplicate, [str(f) for f in result.failed]])
        return log

    def maintainer():
        other = arrayviews.connect(location, spark=spark, execution="local")
        errors = []
        for k in range(2):
            errors += [r.error for r in other.maintain_streams() if r.error]
            if k % 2:
                other.stream("M").expire_versions()
                other.stream_view("Recent").expire_versions()
            else:
                other.stream("M").compact()
                other.stream_view("Recent").compact()
        return errors

    children = [
        fork(spark, results, with_ids, label="ids"),
        fork(spark, results, without_ids, label="plain"),
        fork(spark, results, maintainer, label="maintain"),
    ]
    outcomes = [child.wait() for child in children]
    for outcome in outcomes:
        assert outcome.code == 0, outcome.error
    ids, plain, errors = (o.value for o in outcomes)
    assert errors == [] and [e for e in ids + plain if e[2]] == []
    assert [entry[1] for entry in ids] == [False, False, True]
    db = arrayviews.connect(location, spark=spark, execution="local")
    counts = db.stream("M").read().toPandas().groupby("dest").size().to_dict()
    offered = {"seed", "id-1", "id-2", "plain-1", "plain-2"}
    assert counts == dict.fromkeys(offered, 3)
    assert db.stream_view("Recent").status()["failed"] is None
    assert [r.error for r in db.maintain_streams() if r.error] == []
    assert_recent_is_the_reference(db)


def test_a_maintenance_step_whose_input_files_are_compacted_and_expired_meanwhile_plans_again(
    spark, tmp_path, monkeypatch
):
    """Another process maintains the view, compacts the stream and expires its old versions while
    this process's maintenance step (after its append) reads the stream files it planned on: they
    are gone. Before: the view was marked failed ("FileNotFoundError: ...parquet"; on Spark
    "AnalysisException: [PATH_NOT_FOUND]") and skipped until maintain_streams(retry_failed=True);
    now the step plans again from the view's new state."""
    from arrayviews.storage import recent_parts
    from arrayviews.streams import maintainer

    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    stream = db.create_stream("M", STREAM_COLUMNS, 60, "ts")
    stream.append(readings("seed", 0, 0), batch_id="seed")
    db.sql(RECENT)
    for n in (1, 2):  # two small files in part 1: something to compact
        stream.append(readings(f"b{n}", 1, 10 * n), maintain=False)
    raced = []

    def other_maintains_compacts_and_expires():
        other = arrayviews.connect(location, spark=spark, execution="local")
        other.maintain_streams()
        assert other.stream("M").compact() is not None
        assert other.stream("M").expire_versions().data_files > 0

    original = maintainer.maintain_view

    def raced_once(spark_, world, name, fusion=None):
        if not raced:
            raced.append(True)
            world.relation("M")  # the step's plan reads the stream as it is now
            recent_parts.forget()  # the files are read from disk, as in another process
            outcome = fork(spark, tmp_path / "runs", other_maintains_compacts_and_expires).wait()
            assert outcome.code == 0, outcome.error
        return original(spark_, world, name, fusion)

    monkeypatch.setattr(maintainer, "maintain_view", raced_once)
    result = stream.append(readings("b3", 2, 30))
    assert raced and result.failed == {}
    assert db.stream_view("Recent").status()["failed"] is None
    assert_recent_is_the_reference(db)


def test_a_busy_catalog_during_maintenance_after_an_append_neither_raises_nor_fails_the_view(
    spark, tmp_path, monkeypatch
):
    """Another process holds the SQLite catalog's write lock while the maintenance after an append
    commits. The batch is committed, so the append must not raise (a retry without a batch id would
    append it twice), and a busy catalog is contention, not a failure of the view."""
    import sqlite3

    from arrayviews.storage import catalog as catalog_module

    monkeypatch.setattr(catalog_module, "BUSY_TIMEOUT_SECONDS", 0.2)
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    stream = db.create_stream("M", STREAM_COLUMNS, 60, "ts")
    stream.append(readings("seed", 0, 0))
    db.sql(RECENT)
    holder = sqlite3.connect(str(tmp_path / "warehouse" / "catalog.db"), isolation_level=None)

    def lock():
        holder.execute("BEGIN EXCLUSIVE")

    try:
        with faults.interleave("viewdf.before-commit", lock):
            result = stream.append(readings("b1", 1, 10))
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
    assert result.rows == 3 and "Recent" in result.failed and "busy" in result.failed["Recent"]
    db = arrayviews.connect(location, spark=spark, execution="local")
    assert db.stream_view("Recent").status()["failed"] is None
    assert [r.error for r in db.maintain_streams() if r.error] == []
    assert_recent_is_the_reference(db)


# -- time-axis writes: insert by times, write_xarray and delete(labels=...) racing and killed --------------
TIMED = "T<v:float64>[time=0:*:4 SCALE 6 HOURS OFFSET '2026-01-01'; x=0:3:4]"


def day_cells(day: int, writer: int) -> dict[tuple[int, int], float]:
    """The 16 cells (time step, x) of January ``day`` as ``writer`` writes them."""
    return {
        ((day - 1) * 4 + h, x): float(writer * 1000 + day * 10 + h + x / 10)
        for h in range(4)
        for x in range(4)
    }


def day_as_xarray(day: int, writer: int):
    import xarray as xr

    cells = day_cells(day, writer)
    values = np.array([[cells[((day - 1) * 4 + h, x)] for x in range(4)] for h in range(4)])
    times = pd.date_range(f"2026-01-{day:02d}", periods=4, freq="6h")
    return xr.Dataset({"v": (("time", "x"), values)}, coords={"time": times, "x": np.arange(4)})


def day_as_times(day: int, writer: int) -> dict[str, np.ndarray]:
    cells = day_cells(day, writer)
    origin = np.datetime64("2026-01-01T00:00", "us")
    return {
        "time": np.array([origin + np.timedelta64(6 * c[0], "h") for c in cells]),
        "x": np.array([c[1] for c in cells]),
        "v": np.array(list(cells.values())),
    }


def timed_content(array) -> dict[tuple[int, int], float]:
    return {(int(r.time), int(r.x)): float(r.v) for r in array.to_pandas().itertuples()}


@pytest.mark.parametrize("catalog", CATALOGS)
def test_time_axis_writes_from_three_processes_replay_in_version_order(spark, tmp_path, catalog):
    """One process writes days with write_xarray, one inserts days given as times, one deletes days
    by label, overlapping. Every version (time travel included) equals the committed writes
    replayed in version order on a dict; a write refused for a conflict met a stored cell."""
    connect = connector(catalog, str(tmp_path / "warehouse"), spark)
    connect().create_array(TIMED)

    def writer(kind: str, days: tuple[int, ...]):
        def run():
            T = connect().array("T")
            log = []
            for day in days:
                try:
                    if kind == "xarray":
                        result = T.write_xarray(day_as_xarray(day, 1))
                    elif kind == "times":
                        result = T.insert(day_as_times(day, 2))
                    else:
                        result = T.delete(labels={"time": f"2026-01-{day:02d}"})
                    log.append([kind, day, result.version if result.committed else None])
                except ConflictError:
                    log.append([kind, day, "conflict"])
            return log

        return run

    plans = (("xarray", (1, 2, 3, 4)), ("times", (4, 3, 5)), ("delete", (2, 4, 1)))
    children = [fork(spark, tmp_path / "runs", writer(k, d), label=k) for k, d in plans]
    logs = []
    for child in children:
        outcome = child.wait()
        assert outcome.code == 0, outcome.error
        logs += outcome.value
    committed = sorted((e for e in logs if isinstance(e[2], int)), key=lambda e: e[2])
    assert [e[2] for e in committed] == list(range(1, len(committed) + 1))
    T = connect().array("T")
    model: dict[tuple[int, int], float] = {}
    for kind, day, version in committed:
        if kind == "delete":
            model = {c: v for c, v in model.items() if c[0] // 4 != day - 1}
        else:
            model.update(day_cells(day, 1 if kind == "xarray" else 2))
        assert timed_content(T.at_version(version)) == model, (kind, day, version)
    assert timed_content(T) == model and T.count() == len(model)
    for _kind, day, version in logs:  # a day written by both: one of them conflicted
        if version == "conflict":
            assert day in {d for k, d, v in logs if k in ("xarray", "times") and isinstance(v, int)}


@pytest.mark.parametrize("operation", ["write_xarray", "insert-times", "delete-labels"])
def test_kill_9_at_every_checkpoint_of_a_time_axis_write(spark, tmp_path, operation):
    """A time-axis write killed at its k-th checkpoint leaves the array as before or as after, and
    its retry completes it; nothing is left but orphans the sweep deletes."""
    import datetime as dt

    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    T = db.create_array(TIMED)
    T.write_xarray(day_as_xarray(1, 1))
    model = day_cells(1, 1)
    trial = [0]

    def act():
        day = 2 + trial[0]
        target = arrayviews.connect(location, spark=spark, execution="local").array("T")
        if operation == "write_xarray":
            target.write_xarray(day_as_xarray(day, 1))
        elif operation == "insert-times":
            target.insert(day_as_times(day, 2))
        else:
            target.delete(labels={"time": "2026-01-01", "x": trial[0] % 4})

    def effect(state: dict) -> dict:
        day = 2 + trial[0]
        if operation == "write_xarray":
            return {**state, **day_cells(day, 1)}
        if operation == "insert-times":
            return {**state, **day_cells(day, 2)}
        return {c: v for c, v in state.items() if not (c[0] < 4 and c[1] == trial[0] % 4)}

    dry = fork(spark, tmp_path / "runs", act, kill_at=10**9).wait()
    assert dry.code == 0, dry.error
    model = effect(model)
    for k in range(1, dry.reached + 1):
        trial[0] = k
        outcome = fork(spark, tmp_path / "runs", act, kill_at=k).wait()
        assert outcome.killed or outcome.code == 0, outcome.error
        T = arrayviews.connect(location, spark=spark, execution="local").array("T")
        after = effect(model)
        assert timed_content(T) in (model, after), k
        if timed_content(T) == model:
            act()  # the retry completes it
        model = after
        assert timed_content(T) == model and T.count() == len(model)
        assert T.versions()["version"].tolist() == list(range(1, T.version + 1))
    db = arrayviews.connect(location, spark=spark, execution="local")
    assert db.check().problems == []
    db.check(repair=True, orphans_older_than=dt.timedelta(0))
    assert timed_content(db.array("T")) == model


def test_kill_9_at_every_checkpoint_of_a_maintenance_step_then_every_part_is_built_once(spark, tmp_path):
    """An append (with its batch id) whose maintenance is killed at each of its checkpoints, the
    view's own storage commit included; the warehouse is reopened and maintained. Every part of the
    view is built by exactly one committed step (the maintenance history), and the view equals a
    pandas recomputation."""
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    db.create_stream("M", STREAM_COLUMNS, 60, "ts").append(readings("seed", 0, 0), batch_id="seed")
    db.sql(RECENT)
    minute = [1]

    def append(maintain: bool = True):
        def run():
            stream = arrayviews.connect(location, spark=spark, execution="local").stream("M")
            n = minute[0]
            return stream.append(readings(f"b{n}", n, 10 * n), maintain=maintain, batch_id=f"b{n}").rows

        return run

    own = fork(spark, tmp_path / "runs", append(maintain=False), kill_at=10**9).wait()
    minute[0] = 2
    whole = fork(spark, tmp_path / "runs", append(), kill_at=10**9).wait()
    assert own.code == 0 and whole.code == 0, own.error or whole.error
    assert whole.reached > own.reached + 2  # the maintenance step's checkpoints follow the append's
    for k in range(own.reached + 1, whole.reached + 1):
        minute[0] += 1
        outcome = fork(spark, tmp_path / "runs", append(), kill_at=k).wait()
        assert outcome.killed, (k, outcome.error)
        db = arrayviews.connect(location, spark=spark, execution="local")
        assert [r.error for r in db.maintain_streams() if r.error] == []
    view = db.stream_view("Recent")
    first = EPOCH // 60  # the seed's minute
    assert view.status()["failed"] is None and view.status()["next"] == first + minute[0] + 1
    history = view.maintenance_history()
    built = [p["part"] for parts in history[history["operation"] == "maintain"]["parts"] for p in parts]
    assert sorted(built) == list(range(first, first + minute[0] + 1)), "a part was built twice or never"
    assert_recent_is_the_reference(db)


def test_a_spark_refresh_whose_planned_files_are_compacted_and_expired_meanwhile_plans_again(spark, tmp_path):
    """Another process compacts the base and expires its old versions after a refresh on Spark
    planned which files to read. Before: "ExecutionError: a Spark job failed: [PATH_NOT_FOUND] Path
    does not exist" (the in-process refresh already planned again); now it plans again and the view
    equals a brute-force neighbourhood count and sum."""
    from arrayviews.model.shapes import L1
    from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate

    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="spark")
    array = db.create_array(SCHEMA)
    cells = {(1, 1): 3, (2, 2): 4}
    array.insert(frame(cells))
    aggregates = (ViewAggregate("count", None, None, "cnt"), ViewAggregate("sum", "right", "v", "total"))
    view = db.create_view("V", SimilarityViewDefinition("B", "B", L1(1), aggregates))
    for batch in ({(3, 3): 5}, {(1, 2): 7}):
        array.insert(frame(batch))
        cells.update(batch)

    def other_compacts_and_expires():
        other = arrayviews.connect(location, spark=spark, execution="local").array("B")
        other.compact()
        assert other.expire_versions().data_files > 0

    with faults.interleave("refresh.planned", other_compacts_and_expires):
        assert view.refresh("baseline").committed
    reference = {}
    for i, j in cells:
        near = [c for c in cells if abs(c[0] - i) + abs(c[1] - j) <= 1]
        reference[(i, j)] = (len(near), sum(cells[c] for c in near))
    got = {(int(r.i), int(r.j)): (int(r.cnt), int(r.total)) for r in view.to_pandas().itertuples()}
    assert got == reference


@pytest.mark.parametrize("catalog", CATALOGS)
def test_compact_and_expire_racing_inserts_and_refreshes_keep_every_view_version_exact(
    spark, tmp_path, catalog
):
    """One process inserts into B, one refreshes view V over B, one compacts and expires B and V.
    Every cell of B is stored once (a Python dict of the committed inserts), and every surviving
    version of V equals a brute-force neighbourhood count and sum over B as of the base version it
    records (replayed from the inserts' versions): a view records exactly what it reflects."""
    import datetime as dt

    from arrayviews.model.shapes import L1
    from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate

    connect = connector(catalog, str(tmp_path / "warehouse"), spark)
    db = connect()
    seed = {(1, 1): 3, (2, 2): 4}
    db.create_array(SCHEMA).insert(frame(seed))
    aggregates = (ViewAggregate("count", None, None, "cnt"), ViewAggregate("sum", "right", "v", "total"))
    db.create_view("V", SimilarityViewDefinition("B", "B", L1(1), aggregates))
    results = tmp_path / "results"

    def inserter():
        target = connect().array("B")
        return [[n, target.insert(frame({(n % 16, 3 + n // 16): 10 + n})).version] for n in range(6)]

    def refresher():
        view = connect().view("V")
        return [view.refresh("baseline").committed for _ in range(5)]

    def maintainer():
        other = connect()
        for k in range(6):
            for target in (other.array("B"), other.view("V")):
                if k % 2:
                    target.expire_versions(older_than=dt.timedelta(seconds=0.2))
                else:
                    target.compact()

    children = [fork(spark, results, f, label=f.__name__) for f in (inserter, refresher, maintainer)]
    outcomes = [child.wait() for child in children]
    for outcome in outcomes:
        assert outcome.code == 0, outcome.error
    by_version = {1: dict(seed)}
    for n, version in outcomes[0].value:
        by_version[version] = {(n % 16, 3 + n // 16): 10 + n}
    held, at = {}, {}
    for version in range(1, max(by_version) + 1):  # compactions add no cell
        held = {**held, **by_version.get(version, {})}
        at[version] = held
    B = connect().array("B")
    assert not B.to_pandas().duplicated(["i", "j"]).any() and content(B) == held and B.count() == len(held)

    def brute_force(cells):
        return {
            (i, j): (
                sum(1 for c in cells if abs(c[0] - i) + abs(c[1] - j) <= 1),
                sum(v for c, v in cells.items() if abs(c[0] - i) + abs(c[1] - j) <= 1),
            )
            for i, j in cells
        }

    view = connect().view("V")
    view.refresh("baseline")
    history = view.refresh_history()
    assert len(history) >= 2
    for version, reflected in zip(history["version"], history["reflected"], strict=True):
        got = view.at_version(int(version)).to_pandas()
        got = {(int(r.i), int(r.j)): (int(r.cnt), int(r.total)) for r in got.itertuples()}
        assert got == brute_force(at[max(v for v in at if v <= reflected["B"])]), version


def test_a_view_dropped_by_another_process_during_the_maintenance_after_an_append_does_not_raise(
    spark, tmp_path
):
    """Another process drops the stream view while the maintenance after an append builds it.
    Before: the append raised "NotFoundError: viewdf recent was dropped by another process" (from
    marking the dropped view failed) although its batch was committed."""
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    stream = db.create_stream("M", STREAM_COLUMNS, 60, "ts")
    stream.append(readings("seed", 0, 0))
    db.sql(RECENT)

    def other_drops():
        arrayviews.connect(location, spark=spark, execution="local").sql("DROP VIEW Recent")

    with faults.interleave("viewdf.before-commit", other_drops):
        result = stream.append(readings("b1", 1, 10))
    assert result.rows == 3 and result.failed == {}
    db = arrayviews.connect(location, spark=spark, execution="local")
    assert db.stream_views() == [] and db.streams() == ["M"]
    assert sorted(db.stream("M").read().toPandas()["dest"]) == ["b1"] * 3 + ["seed"] * 3


def test_a_stream_read_racing_compaction_and_expiry_reads_the_newest_version(spark, tmp_path, monkeypatch):
    """Another process compacts the stream and expires its old versions after this handle was
    loaded and before it reads. Before: "ExecutionError: a Spark job failed: [PATH_NOT_FOUND] Path
    does not exist" from ``stream.read()``; now the read finds the files of the newest version."""
    from arrayviews.execution.part_jobs import SparkPartTable

    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    stream = db.create_stream("M", STREAM_COLUMNS, 60, "ts")
    for n in (1, 2):  # two small files in one part: something to compact
        stream.append(readings(f"b{n}", 1, 10 * n))
    original = SparkPartTable.read_parts
    raced = []

    def racing(self, spark_, low, high, *args):
        if not raced:
            raced.append(True)

            def other_compacts_and_expires():
                other = arrayviews.connect(location, spark=spark, execution="local").stream("M")
                assert other.compact() is not None and other.expire_versions().data_files > 0

            assert fork(spark, tmp_path / "runs", other_compacts_and_expires).wait().code == 0
        return original(self, spark_, low, high, *args)

    monkeypatch.setattr(SparkPartTable, "read_parts", racing)
    rows = stream.read().toPandas()
    assert raced and sorted(zip(rows["dest"], rows["loss"], strict=True)) == [
        (f"b{n}", 10 * n + k) for n in (1, 2) for k in range(3)
    ]
