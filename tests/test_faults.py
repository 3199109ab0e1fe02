"""Crash safety: a fault at any checkpoint of a write leaves the array unchanged and no staged files
behind, the same write then succeeds; a hard crash leaves only orphaned files, which expiry removes."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arrayviews.model.errors import NotFoundError
from arrayviews.model.faults import InjectedFault, inject

SCHEMA = "A<v:float64, k:int64>[i=0:19:5; j=0:19:5]"


def cells(i: list[int], j: list[int], value: float) -> pd.DataFrame:
    n = len(i)
    return pd.DataFrame(
        {
            "i": np.asarray(i, np.int64),
            "j": np.asarray(j, np.int64),
            "v": np.full(n, value),
            "k": np.arange(n, dtype=np.int64),
        }
    )


FIRST = cells([0, 1, 7, 12, 19], [0, 9, 3, 12, 19], 1.0)
SECOND = cells([2, 8, 15], [2, 8, 1], 2.0)
NEW = cells([3, 4, 16], [17, 5, 6], 3.0)
OVERLAPPING = cells([0, 7, 5], [0, 3, 5], 4.0)  # two existing cells, one new


def spark_rows(spark, frame: pd.DataFrame):
    rows = list(frame.itertuples(index=False, name=None))  # Python scalars
    return spark.createDataFrame(rows, "i long, j long, v double, k long")


def write_parquet(tmp: Path, frame: pd.DataFrame) -> str:
    path = tmp / "cells.parquet"
    pq.write_table(pa.table({c: pa.array(frame[c].to_numpy()) for c in frame.columns}), path)
    return str(path)


def data_folder(array) -> Path:
    return Path(urlparse(array.source.table.data_directory).path)


def listing(array) -> list[str]:
    folder = data_folder(array)
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def state(array):
    return array.versions(), array.to_pandas(), listing(array)


def assert_unchanged(array, before) -> None:
    versions, content, files = before
    pd.testing.assert_frame_equal(array.versions(), versions)
    pd.testing.assert_frame_equal(array.to_pandas(), content)
    assert listing(array) == files, "staged files were left in the data folder"


# Each write: the checkpoint to arm, and the write itself (array, db, tmp_path).
WRITES: dict[str, tuple[str, Callable]] = {
    "insert-staged": ("insert.staged", lambda a, db, tmp: a.insert(NEW)),
    "insert-before-commit": ("insert.before-commit", lambda a, db, tmp: a.insert(NEW)),
    "insert-replace-before-commit": (
        "insert.before-commit",
        lambda a, db, tmp: a.insert(OVERLAPPING, on_conflict="replace"),
    ),
    "insert-spark-staged": ("insert.staged", lambda a, db, tmp: a.insert(spark_rows(db.spark, NEW))),
    "insert-spark-replace-before-commit": (
        "insert.before-commit",
        lambda a, db, tmp: a.insert(spark_rows(db.spark, OVERLAPPING), on_conflict="replace"),
    ),
    "write-dense-staged": (
        "write_dense.staged",
        lambda a, db, tmp: a.write_dense(
            {"v": np.ones((3, 4)), "k": np.ones((3, 4), np.int64)}, origin=(16, 1)
        ),
    ),
    "write-dense-before-commit": (
        "write_dense.before-commit",
        lambda a, db, tmp: a.write_dense(
            {"v": np.ones((3, 4)), "k": np.ones((3, 4), np.int64)}, origin=(16, 1)
        ),
    ),
    "write-dense-large-block-before-commit": (
        "write_dense.before-commit",
        lambda a, db, tmp: a.write_dense(
            {"v": np.zeros((10, 20)), "k": np.zeros((10, 20), np.int64)}, origin=(0, 0), on_conflict="replace"
        ),
    ),
    "delete-cells-before-commit": (
        "delete.before-commit",
        lambda a, db, tmp: a.delete(pd.DataFrame({"i": [0, 8, 3], "j": [0, 8, 3]})),
    ),
    "delete-box-before-commit": ("delete.before-commit", lambda a, db, tmp: a.delete(box={"i": (1, 12)})),
    "compact-before-commit": ("compact.before-commit", lambda a, db, tmp: a.compact()),
    "load-staged": ("load.staged", lambda a, db, tmp: a.load(write_parquet(tmp, NEW))),
    "load-before-commit": ("load.before-commit", lambda a, db, tmp: a.load(write_parquet(tmp, NEW))),
}


@pytest.fixture
def target(db):
    array = db.create_array(SCHEMA)
    array.insert(FIRST)
    array.insert(SECOND)
    return array


@pytest.mark.parametrize("write", list(WRITES))
def test_fault_at_checkpoint_changes_nothing(db, target, tmp_path: Path, write: str) -> None:
    checkpoint, run = WRITES[write]
    before = state(target)
    assert target.version == 2 and len(before[2]) == 2
    with inject(checkpoint), pytest.raises(InjectedFault, match=checkpoint):
        run(target, db, tmp_path)
    assert_unchanged(target, before)
    # the fault is disarmed after the block: the identical write now succeeds
    result = run(target, db, tmp_path)
    assert result.committed and result.version == 3 and target.version == 3
    assert target.versions().iloc[-1]["operation"] == checkpoint.split(".")[0]


def test_fault_with_another_exception_type_is_raised_and_cleans_up(db, target) -> None:
    before = state(target)
    with inject("insert.before-commit", KeyboardInterrupt()), pytest.raises(KeyboardInterrupt):
        target.insert(NEW)
    assert_unchanged(target, before)


def test_fault_before_store_commit_leaves_no_array(db, target) -> None:
    before = state(target)
    result = target.filter("v > 1.5")
    with inject("store.before-commit"), pytest.raises(InjectedFault):
        result.store("B")
    assert db.arrays() == ["A"]
    with pytest.raises(NotFoundError):
        db.array("B")
    warehouse = data_folder(target).parent.parent
    assert sorted(p.name for p in warehouse.iterdir()) == [data_folder(target).parent.name]  # A's only
    assert_unchanged(target, before)
    stored = result.store("B")
    assert db.arrays() == ["A", "B"]
    assert stored.version == 1 and stored.versions()["operation"].tolist() == ["store"]
    pd.testing.assert_frame_equal(stored.to_pandas(), SECOND.reset_index(drop=True))


CRASHING_INSERT = textwrap.dedent(
    """
    import os
    import sys

    import numpy as np
    import pandas as pd

    import arrayviews
    from arrayviews.model import faults
    from arrayviews.operators import writes

    def die(name):
        if name == "insert.before-commit":
            os._exit(17)  # the process dies here: no cleanup, no exception handlers

    faults.checkpoint = die
    writes.checkpoint = die
    # A driver-side insert of new cells runs no Spark job; no session is needed in this process.
    db = arrayviews.connect(sys.argv[1], spark=object())
    array = db.array("A")
    batch = pd.DataFrame({"i": [3, 4, 16], "j": [17, 5, 6], "v": [3.0, 3.0, 3.0], "k": [0, 1, 2]})
    array.insert(batch)
    print("not reached")
    """
)


def test_hard_crash_before_commit_leaves_only_orphans_that_expiry_removes(db, target, tmp_path: Path) -> None:
    before = state(target)
    warehouse = urlparse(db.warehouse.location).path
    child = subprocess.run(
        [sys.executable, "-c", CRASHING_INSERT, warehouse],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert child.returncode == 17, child.stderr[-3000:]
    assert "not reached" not in child.stdout
    # the staged files are there, but nothing refers to them: the array is unchanged
    orphans = sorted(set(listing(target)) - set(before[2]))
    assert len(orphans) >= 1
    pd.testing.assert_frame_equal(target.versions(), before[0])
    pd.testing.assert_frame_equal(target.to_pandas(), before[1])
    assert db.array("A").count() == len(FIRST) + len(SECOND)
    # the crashed write can be redone (its cells do not exist)
    redo = target.insert(NEW)
    assert redo.committed and redo.version == 3
    content = target.to_pandas()
    result = target.expire_versions()
    assert result.versions == [1, 2]
    # within the grace period the orphans stay: a concurrent writer could own such files
    assert set(orphans) <= set(listing(target))
    target.expire_versions(orphans_older_than=dt.timedelta(0))
    remaining = set(listing(target))
    assert not remaining & set(orphans), "orphaned files survived expire_versions"
    assert {"file://" + str(data_folder(target) / n) for n in remaining} == set(target.source.file_uris())
    pd.testing.assert_frame_equal(target.to_pandas(), content)
    assert target.versions()["version"].tolist() == [3]


@pytest.mark.parametrize("operation", ["insert", "delete", "compact", "store"])
def test_a_fault_after_the_commit_keeps_the_committed_files(db, operation: str) -> None:
    """An exception raised once the catalog has swapped the metadata (here at ``commit.done``)
    reaches the caller, but the write is committed: its files must stay, or the array's newest
    version points at deleted files (before the fix, the writer's cleanup deleted them and every
    later read failed). Reference: the cells as a dict, written with plain Python."""
    array = db.create_array(SCHEMA)
    array.insert(FIRST)
    array.insert(SECOND)
    expected = {(i, j): v for i, j, v in zip(FIRST.i, FIRST.j, FIRST.v, strict=True)}
    expected.update({(i, j): v for i, j, v in zip(SECOND.i, SECOND.j, SECOND.v, strict=True)})
    with pytest.raises(InjectedFault), inject("commit.done" if operation != "store" else "create.before-commit"):
        if operation == "insert":
            array.insert(NEW)
        elif operation == "delete":
            array.delete(box={"i": (0, 9), "j": (0, 19)})
        elif operation == "compact":
            array.compact()
        else:
            array.filter("v > 1.5").store("B")
    if operation == "insert":
        expected.update({(i, j): v for i, j, v in zip(NEW.i, NEW.j, NEW.v, strict=True)})
    elif operation == "delete":
        expected = {c: v for c, v in expected.items() if c[0] > 9}
    if operation == "store":  # a fault before the create commit: nothing exists, and no folder is left
        assert "B" not in db.arrays()
        return
    table = db.array("A").to_pandas()
    got = {(int(r.i), int(r.j)): float(r.v) for r in table.itertuples()}
    assert got == expected
    assert db.array("A").version == array.version
