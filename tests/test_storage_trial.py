"""Two processes on one warehouse and kill -9, where the older tests do not reach: a locked SQLite
catalog, an array dropped (and created again) under another process's handle, two processes
creating and dropping one name, uncertain inserts and relayouts racing each other, inserts racing
compact() and expire_versions(), and kill -9 inside compaction, deletion and uncertain writes.
References are Python sets and dicts of what each process was told was committed."""

from __future__ import annotations

import collections
import datetime as dt
import sqlite3

import numpy as np
import pandas as pd
import pytest

import arrayviews
from arrayviews.model import faults
from arrayviews.model.errors import AlreadyExistsError, CatalogBusyError, ConflictError, NotFoundError
from arrayviews.storage import catalog as catalog_module
from cell_frames import content, frame
from processes import fork

SCHEMA = "A<v:int64>[i=0:31:4; j=0:31:4]"
UNCERTAIN = "U<flux:float64>[x=0:19:5; y=0:19:5]"


def tuples(ids) -> dict[str, np.ndarray]:
    ids = np.asarray(list(ids), np.int64)
    return {
        "id": ids,
        "x": (ids * 7 % 19).astype(float) + 0.5,
        "y": (ids * 3 % 19).astype(float) + 0.25,
        "x_sigma": np.full(len(ids), 0.4),
        "y_sigma": np.full(len(ids), 0.6),
        "flux": ids * 1.5,
    }


def folders(location: str) -> list[str]:
    import os

    root = os.path.join(location, "arrays.db")
    return sorted(os.listdir(root)) if os.path.isdir(root) else []


# -- the SQLite catalog under contention ------------------------------------------------------------
def test_a_locked_catalog_gives_a_clear_retryable_error_and_changes_nothing(spark, tmp_path, monkeypatch):
    """Before: ``sqlite3.OperationalError: database is locked`` (an insert) and a raw
    ``sqlalchemy.exc.OperationalError`` with its SQL (a creation)."""
    monkeypatch.setattr(catalog_module, "BUSY_TIMEOUT_SECONDS", 0.2)
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark)
    array = db.create_array(SCHEMA)
    array.insert(frame({(1, 1): 5}))
    holder = sqlite3.connect(str(tmp_path / "warehouse" / "catalog.db"), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process holding the catalog's write lock
    try:
        with pytest.raises(CatalogBusyError, match=r"array A.*catalog .*catalog\.db.*retry"):
            array.insert(frame({(2, 2): 6}))
        with pytest.raises(CatalogBusyError, match=r"table b\b.*retry"):
            db.create_array("B<v:int64>[i=0:15:4]")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    db = arrayviews.connect(location, spark=spark)
    array = db.array("A")
    assert db.arrays() == ["A"] and array.version == 1 and content(array) == {(1, 1): 5}
    array.insert(frame({(2, 2): 6}))  # the retry succeeds
    db.create_array("B<v:int64>[i=0:15:4]")
    assert content(array) == {(1, 1): 5, (2, 2): 6} and array.version == 2
    assert db.arrays() == ["A", "B"]


# -- an array dropped, or dropped and created again, under another process's handle ----------------------
def test_a_write_through_a_handle_of_a_dropped_array_names_it_and_touches_nothing(spark, tmp_path):
    """Before: pyiceberg's ``NoSuchTableError: Table does not exist: arrays.a`` and
    ``ValueError: Table UUID does not match`` reached the user."""
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark)
    db.create_array(SCHEMA).insert(frame({(1, 1): 1}))
    stale = db.array("A")
    stale.to_pandas()

    def drop_and_create():
        other = arrayviews.connect(location, spark=spark)
        other.drop_array("A")
        other.create_array(SCHEMA).insert(frame({(3, 3): 3}))

    outcome = fork(spark, tmp_path / "runs", drop_and_create).wait()
    assert outcome.code == 0, outcome.error
    with pytest.raises(NotFoundError, match="array A was dropped and created again by another process"):
        stale.insert(frame({(2, 2): 2}))
    with pytest.raises(NotFoundError, match="array A was dropped and created again"):
        stale.compact()
    with pytest.raises(NotFoundError, match="array A was dropped and created again"):
        stale.expire_versions()
    fresh = arrayviews.connect(location, spark=spark).array("A")
    assert content(fresh) == {(3, 3): 3} and fresh.version == 1

    stale = fresh
    outcome = fork(
        spark, tmp_path / "runs", lambda: arrayviews.connect(location, spark=spark).drop_array("A")
    ).wait()
    assert outcome.code == 0, outcome.error
    with pytest.raises(NotFoundError, match="array A was dropped by another process"):
        stale.insert(frame({(2, 2): 2}))
    db = arrayviews.connect(location, spark=spark)
    assert db.arrays() == []
    with pytest.raises(NotFoundError, match="no array named A"):
        db.drop_array("A")


def test_a_creation_losing_the_race_for_its_name_is_already_exists_and_leaves_no_folder(spark, tmp_path):
    """Before: pyiceberg's ``CommitFailedException: Table already exists``."""
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark)

    def other_creates():
        arrayviews.connect(location, spark=spark).create_array(SCHEMA).insert(frame({(4, 4): 4}))

    with (
        faults.interleave("create.before-commit", other_creates),
        pytest.raises(AlreadyExistsError, match="an array named A already exists"),
    ):
        db.create_array(SCHEMA)
    assert len(folders(location)) == 1  # the loser's folder is gone
    assert content(db.array("A")) == {(4, 4): 4}


def test_two_processes_creating_inserting_and_dropping_one_name(spark, tmp_path):
    """Each of two processes creates, fills and drops array B ten times. Every failure is one of
    arrayviews' own clear errors (before: CommitFailedException, NoSuchTableError, ValueError
    'Table UUID does not match', FileNotFoundError, and an OSError from the drop's folder deletion).
    Afterwards B's content is what the inserts committed after its last creation, and nothing is
    left behind once the orphans are swept."""
    location = str(tmp_path / "warehouse")
    arrayviews.connect(location, spark=spark)
    results = tmp_path / "results"

    def worker(w: int):
        def run():
            db = arrayviews.connect(location, spark=spark)
            log = []
            for n in range(10):
                for op in ("create", "insert", "drop"):
                    try:
                        if op == "create":
                            db.create_array("B<v:int64>[i=0:15:4; j=0:15:4]")
                        elif op == "insert":
                            db.array("B").insert(frame({(w, n): w * 100 + n}))
                        else:
                            db.drop_array("B")
                        log.append([op, n, "ok", ""])
                    except (AlreadyExistsError, NotFoundError) as error:
                        log.append([op, n, type(error).__name__, str(error)])
                    except Exception as error:  # noqa: BLE001 - reported as the failure
                        log.append([op, n, type(error).__name__, repr(error)[:300]])
            return log

        return run

    children = [fork(spark, results, worker(w), label=f"w{w}") for w in (0, 1)]
    logs = []
    for child in children:
        outcome = child.wait()
        assert outcome.code == 0, outcome.error
        logs.append(outcome.value)
    unclear = [
        entry
        for log in logs
        for entry in log
        if entry[2] not in ("ok", "AlreadyExistsError", "NotFoundError")
    ]
    assert unclear == []
    counts = collections.Counter((entry[0], entry[2]) for log in logs for entry in log)
    assert counts[("create", "ok")] >= 1 and counts[("drop", "ok")] >= 1
    # the last drop of each worker ran after its last insert; B exists only if a creation came after
    db = arrayviews.connect(location, spark=spark)
    if "B" in db.arrays():
        b = db.array("B")
        assert len(content(b)) == b.count() == len(b.to_pandas().drop_duplicates(["i", "j"]))
    db.check(repair=True, orphans_older_than=dt.timedelta(0))
    assert len(folders(location)) == len(db.arrays())


# -- uncertain inserts and relayouts at once -----------------------------------------------------------
def test_uncertain_inserts_and_relayouts_from_three_processes_all_commit_once(spark, tmp_path):
    """Before: a concurrent uncertain insert or relayout failed with 'array U changed while writing
    (... Requirement failed: branch main has changed ...)' instead of being planned again (here
    4 of 6 inserts of one process and 6 of 6 relayouts failed)."""
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark)
    db.create_uncertain_array(UNCERTAIN, step=1).insert(tuples(range(10)))
    results = tmp_path / "results"

    def inserter(w: int):
        def run():
            target = arrayviews.connect(location, spark=spark).uncertain_array("U")
            done = []
            for n in range(5):
                ids = [100 * (w + 1) + 3 * n + k for k in range(3)]
                done.append([ids, target.insert(tuples(ids)).version])
            return done

        return run

    def relayouter():
        target = arrayviews.connect(location, spark=spark).uncertain_array("U")
        return [target.relayout(step=1 + n % 2).version for n in range(4)]

    children = [fork(spark, results, inserter(w), label=f"u{w}") for w in (0, 1)]
    children.append(fork(spark, results, relayouter, label="relayout"))
    outcomes = [child.wait() for child in children]
    for outcome in outcomes:
        assert outcome.code == 0, outcome.error
    expected = set(range(10)) | {i for o in outcomes[:2] for ids, _ in o.value for i in ids}
    reported = [v for o in outcomes[:2] for _, v in o.value] + outcomes[2].value
    assert len(reported) == len(set(reported)) == 14, "two writes reported one version"
    u = arrayviews.connect(location, spark=spark).uncertain_array("U")
    stored = u.to_pandas()
    assert sorted(stored["id"].tolist()) == sorted(expected)
    assert np.allclose(stored.sort_values("id")["flux"].to_numpy(), np.array(sorted(expected)) * 1.5)
    versions = u.versions()
    assert versions["version"].tolist() == list(range(1, 16))
    # time travel: each version holds what the writes committed up to it
    inserted_by = {v: ids for o in outcomes[:2] for ids, v in o.value}
    held = set(range(10))
    for version in range(1, 16):
        held |= set(inserted_by.get(version, []))
        assert set(u.at_version(version).to_pandas()["id"]) == held, version


# -- inserts racing compaction and expiry ------------------------------------------------------------------
def test_inserts_racing_compact_and_expire_store_every_cell_once(spark, tmp_path):
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark)
    seed = {(i, 0): i for i in range(10)}
    db.create_array(SCHEMA).insert(frame(seed))
    results = tmp_path / "results"

    def batch(w: int, n: int) -> dict[tuple[int, int], int]:
        cells = {(2 * n + w, 5 + w): 100 * w + n}
        if n % 2 == 0:
            cells[(n, 20)] = 100 * w + n  # both writers offer it: one commits, one conflicts
        return cells

    def inserter(w: int):
        def run():
            target = arrayviews.connect(location, spark=spark).array("A")
            log = []
            for n in range(8):
                try:
                    log.append([n, target.insert(frame(batch(w, n))).version])
                except ConflictError:
                    log.append([n, None])
            return log

        return run

    def maintainer():
        target = arrayviews.connect(location, spark=spark).array("A")
        for k in range(12):
            if k % 2:
                target.expire_versions(older_than=dt.timedelta(seconds=0.3))
            else:
                target.compact()
        return target.version

    children = [fork(spark, results, inserter(w), label=f"i{w}") for w in (0, 1)]
    children.append(fork(spark, results, maintainer, label="maintain"))
    outcomes = [child.wait() for child in children]
    for outcome in outcomes:
        assert outcome.code == 0, outcome.error
    expected = dict(seed)
    committed_at = {}
    for w, outcome in enumerate(outcomes[:2]):
        for n, version in outcome.value:
            if version is not None:
                expected.update(batch(w, n))
                committed_at[version] = batch(w, n)
    for n in range(0, 8, 2):
        assert sum(1 for o in outcomes[:2] for m, v in o.value if m == n and v is not None) == 1
    array = arrayviews.connect(location, spark=spark).array("A")
    stored = array.to_pandas()
    assert not stored.duplicated(["i", "j"]).any()
    assert content(array) == expected
    assert array.count() == len(expected)
    # every surviving version reads what was committed up to it (a compaction adds no cell)
    held = dict(seed)
    survivors = set(array.versions()["version"].tolist())
    for version in range(2, array.version + 1):
        held.update(committed_at.get(version, {}))
        if version in survivors:
            assert content(array.at_version(version)) == held, version


# -- kill -9 inside compaction, deletion and uncertain writes ----------------------------------------------
@pytest.mark.parametrize("operation", ["compact", "delete", "uncertain-insert", "relayout"])
def test_kill_9_at_every_checkpoint_of_compact_delete_and_uncertain_writes(spark, tmp_path, operation):
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark)
    array = db.create_array(SCHEMA)
    model: dict[tuple[int, int], int] = {}
    for n in range(3):  # three small files per chunk: something to compact
        cells = {(i, n): 10 * i + n for i in range(0, 12, 3)}
        array.insert(frame(cells))
        model.update(cells)
    db.create_uncertain_array(UNCERTAIN, step=1).insert(tuples(range(6)))
    ids = set(range(6))
    trial = [0]

    def act():
        target = arrayviews.connect(location, spark=spark)
        if operation == "compact":
            target.array("A").compact()
        elif operation == "delete":
            target.array("A").delete(frame({(0, trial[0] % 3): 0})[["i", "j"]])
        elif operation == "uncertain-insert":
            target.uncertain_array("U").insert(tuples([50 + trial[0]]))
        else:
            target.uncertain_array("U").relayout(step=1 + trial[0] % 2)

    dry = fork(spark, tmp_path / "runs", act, kill_at=10**9).wait()
    assert dry.code == 0, dry.error
    points = dry.reached
    assert points >= 2
    # the dry run's effect
    if operation == "delete":
        model.pop((0, 0), None)
    if operation == "uncertain-insert":
        ids.add(50)
    for k in range(1, points + 1):
        trial[0] = k
        outcome = fork(spark, tmp_path / "runs", act, kill_at=k).wait()
        assert outcome.killed or outcome.code == 0, outcome.error
        db = arrayviews.connect(location, spark=spark)
        a, u = db.array("A"), db.uncertain_array("U")
        if operation == "delete":
            gone = (0, k % 3)
            stored = content(a)
            assert stored in (model, {c: v for c, v in model.items() if c != gone})
            model.pop(gone, None)
            act()  # the retry completes it
        elif operation == "uncertain-insert":
            stored_ids = set(u.to_pandas()["id"])
            assert stored_ids in (ids, ids | {50 + k})
            if stored_ids == ids:
                act()
            ids.add(50 + k)
        else:
            act()
        assert content(a) == model and a.count() == len(model)
        assert set(u.to_pandas()["id"]) == ids and u.count() == len(ids)
        assert a.versions()["version"].tolist() == list(range(1, a.version + 1))
    # what crashed writes left is only orphans younger than the grace period; the sweep clears them
    db = arrayviews.connect(location, spark=spark)
    assert db.check().problems == []
    db.check(repair=True, orphans_older_than=dt.timedelta(0))
    assert content(db.array("A")) == model and set(db.uncertain_array("U").to_pandas()["id"]) == ids


def test_a_view_whose_base_is_dropped_while_it_is_created_is_not_created(spark, tmp_path):
    """Before: the drop found no view reading A yet and the creation committed V over the dropped
    A: a view over nothing (refresh: 'no array named A')."""
    from arrayviews.model.shapes import L1
    from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate

    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark)
    db.create_array(SCHEMA).insert(frame({(1, 1): 3, (2, 2): 4}))
    definition = SimilarityViewDefinition("A", "A", L1(1), (ViewAggregate("count", None, None, "cnt"),))

    def other_drops():
        arrayviews.connect(location, spark=spark).drop_array("A")

    with (
        faults.interleave("create.before-commit", other_drops),
        pytest.raises(NotFoundError, match="view V was not created: its base A was dropped"),
    ):
        db.create_view("V", definition)
    db = arrayviews.connect(location, spark=spark)
    assert db.arrays() == [] and db.views() == []
    db.create_array(SCHEMA).insert(frame({(1, 1): 3}))
    assert db.create_view("V", definition).to_pandas()["cnt"].tolist() == [1]


@pytest.mark.parametrize("point", ["refresh.start", "refresh.delta"])
def test_a_refresh_racing_compact_and_expire_of_its_base_plans_again(spark, tmp_path, point):
    """Another process compacts A and expires its old versions after the refresh pinned A's
    versions: the files the refresh planned to read are gone. Before: FileNotFoundError of a
    Parquet file; now it plans again (a full refresh: the reflected version was expired) and the
    view equals a brute-force neighbourhood count."""
    from arrayviews.model.shapes import L1
    from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate

    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark)
    array = db.create_array(SCHEMA)
    cells = {(1, 1): 3, (2, 2): 4}
    array.insert(frame(cells))
    aggregates = (ViewAggregate("count", None, None, "cnt"), ViewAggregate("sum", "right", "v", "total"))
    view = db.create_view("V", SimilarityViewDefinition("A", "A", L1(1), aggregates))
    for batch in ({(3, 3): 5}, {(1, 2): 7}):
        array.insert(frame(batch))
        cells.update(batch)

    def other_compacts_and_expires():
        other = arrayviews.connect(location, spark=spark).array("A")
        other.compact()
        assert other.expire_versions().data_files > 0

    with faults.interleave(point, other_compacts_and_expires):
        result = view.refresh("baseline")
    assert result.committed
    reference = {}
    for i, j in cells:
        near = [c for c in cells if abs(c[0] - i) + abs(c[1] - j) <= 1]
        reference[(i, j)] = (len(near), sum(cells[c] for c in near))
    got = {(int(r.i), int(r.j)): (int(r.cnt), int(r.total)) for r in view.to_pandas().itertuples()}
    assert got == reference
    assert (
        view.status()["bases"][0]["reflected"] == arrayviews.connect(location, spark=spark).array("A").version
    )


def test_a_read_racing_compact_and_expire_reads_the_newest_version(spark, tmp_path, monkeypatch):
    """Another process compacts A and expires every older version between a read's choice of
    version and its reading of the files. Before: FileNotFoundError of a Parquet file (1 in 75
    reads of a reader looping beside a compact+expire loop); now a handle following the newest
    version reads again, and a pinned one says its version was expired."""
    from arrayviews.operators import reads

    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark)
    array = db.create_array(SCHEMA)
    cells: dict[tuple[int, int], int] = {}
    for n in range(3):
        batch = {(4 * n + k, n): 10 * n + k for k in range(3)}
        array.insert(frame(batch))
        cells.update(batch)
    original = reads.to_pandas
    raced = []

    def racing(source, sort=True):
        if not raced:
            raced.append(True)
            other = fork(spark, tmp_path / "runs", lambda: compact_and_expire(location, spark))
            assert other.wait().code == 0
        return original(source, sort)

    monkeypatch.setattr(reads, "to_pandas", racing)
    assert content(array) == {**cells, (30, 30): 1}  # the newest version, read whole
    pinned = array.at_version(array.version)
    raced.clear()
    with pytest.raises(
        NotFoundError, match=f"array A: version {pinned.version} was expired by another process"
    ):
        pinned.to_pandas()


def compact_and_expire(location: str, spark) -> None:
    other = arrayviews.connect(location, spark=spark).array("A")
    other.insert(frame({(30, 30): 1}), on_conflict="replace")
    other.compact()
    other.expire_versions()


def test_a_drop_does_not_drop_the_array_created_again_under_its_name_meanwhile(spark, tmp_path, monkeypatch):
    """Between a drop's check that no view reads B and its removal of B from the catalog, another
    process drops B, creates it again and defines view W over the new B. Before: the drop (by name)
    removed the new B, leaving W over nothing; now nothing is dropped and the error says why."""
    from arrayviews.model.shapes import L1
    from arrayviews.views.catalog import RelationCatalog
    from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate

    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark)
    db.create_array(SCHEMA.replace("A<", "B<")).insert(frame({(1, 1): 1}))
    definition = SimilarityViewDefinition("B", "B", L1(1), (ViewAggregate("count", None, None, "cnt"),))
    checked = RelationCatalog.refuse_if_read

    def other_recreates():
        other = arrayviews.connect(location, spark=spark)
        other.drop_array("B")
        other.create_array(SCHEMA.replace("A<", "B<")).insert(frame({(2, 2): 2, (2, 3): 3}))
        other.create_view("W", definition)

    raced = []

    def check_then_race(self, entry):
        checked(self, entry)
        if not raced:  # once (the other process's own drop checks too)
            raced.append(True)
            outcome = fork(spark, tmp_path / "runs", other_recreates).wait()
            assert outcome.code == 0, outcome.error

    monkeypatch.setattr(RelationCatalog, "refuse_if_read", check_then_race)
    with pytest.raises(NotFoundError, match="array B was dropped and created again .* nothing was dropped"):
        db.drop_array("B")
    monkeypatch.setattr(RelationCatalog, "refuse_if_read", checked)
    db = arrayviews.connect(location, spark=spark)
    assert db.arrays() == ["B"] and content(db.array("B")) == {(2, 2): 2, (2, 3): 3}
    assert sorted(db.view("W").to_pandas()["cnt"].tolist()) == [2, 2]


def test_an_append_through_a_handle_of_a_dropped_stream_names_it(spark, tmp_path):
    """Before: pyiceberg's 'Table UUID does not match' (stream dropped and created again) and
    NoSuchTableError (stream dropped) reached the user; the new stream is untouched."""
    location = str(tmp_path / "warehouse")
    columns = "ts timestamp, src string, dest string, loss int"

    def readings(number: int) -> pd.DataFrame:
        stamps = pd.to_datetime([1_420_070_400 + 60 * number + k for k in range(3)], unit="s", utc=True)
        return pd.DataFrame(
            {"ts": stamps, "src": ["a", "b", "c"], "dest": [f"b{number}"] * 3, "loss": [number] * 3}
        )

    db = arrayviews.connect(location, spark=spark)
    db.create_stream("M", columns, 60, "ts").append(readings(0), batch_id="b0")
    stale = db.stream("M")

    def drop_and_create():
        other = arrayviews.connect(location, spark=spark)
        other.drop_stream("M")
        other.create_stream("M", columns, 60, "ts").append(readings(5), batch_id="b5")

    assert fork(spark, tmp_path / "runs", drop_and_create).wait().code == 0
    with pytest.raises(NotFoundError, match="stream M was dropped and created again by another process"):
        stale.append(readings(1), batch_id="b1")
    fresh = arrayviews.connect(location, spark=spark).stream("M")
    assert fresh.read().toPandas()["dest"].tolist() == ["b5"] * 3
    assert (
        fork(spark, tmp_path / "runs", lambda: arrayviews.connect(location, spark=spark).drop_stream("M"))
        .wait()
        .code
        == 0
    )
    with pytest.raises(NotFoundError, match="stream M was dropped by another process"):
        fresh.append(readings(2))


def test_an_insert_whose_conflict_check_finds_the_array_dropped_names_the_drop(spark, tmp_path, monkeypatch):
    """Before: when another process dropped the array while an insert checked its conflicts, the
    insert failed with "TypeError: '>' not supported between instances of 'NoneType' and 'int'" (the
    size of a data file that was gone), seen in the two-process create/insert/drop race above."""
    from arrayviews.operators import staging

    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    A = db.create_array(SCHEMA)
    A.insert(frame({(1, 1): 1}))
    staging._cells_cache.clear()
    original = staging.read_chunk_rows

    def dropped_meanwhile(*args, **kwargs):
        arrayviews.connect(location, spark=spark).drop_array("A")
        return original(*args, **kwargs)

    monkeypatch.setattr(staging, "read_chunk_rows", dropped_meanwhile)
    with pytest.raises(NotFoundError, match="array A was dropped by another process"):
        A.insert(frame({(1, 2): 2}))


def test_a_file_gone_as_soon_as_written_is_not_committed_with_no_size(spark, tmp_path, monkeypatch):
    """Before: when a drop by another process removed the folder right after a data file was
    written, the file's size was None and the commit failed inside the Avro writer ("TypeError:
    unsupported operand type(s) for <<: 'NoneType' and 'int'"), seen in the create/insert/drop race."""
    from arrayviews.storage import files

    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    A = db.create_array(SCHEMA)
    original = files.pq.write_table

    def written_then_dropped(table, path, *args, **kwargs):
        original(table, path, *args, **kwargs)
        arrayviews.connect(location, spark=spark).drop_array("A")

    monkeypatch.setattr(files.pq, "write_table", written_then_dropped)
    with pytest.raises(NotFoundError, match="array A was dropped by another process"):
        A.insert(frame({(1, 2): 2}))
