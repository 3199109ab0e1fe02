"""A read asks the catalog for the array's metadata location every time and keeps the table it holds
only while that location is unchanged (storage/array_table.py ArrayTable.refresh with
catalog.current_metadata_location): commits through another connection, another thread and another
process are seen by the next read, pinned older versions keep their cells, a dropped array is not
read from the table held. Every read is checked against numpy slicing of the arrays the test wrote."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import arrayviews
from arrayviews.model.errors import NotFoundError
from arrayviews.storage.catalog import current_metadata_location

SHAPE = (12, 17)  # chunks of 5 x 7: the last row and column of chunks are clipped
SCHEMA = f"A<v:float64>[i=0:{SHAPE[0] - 1}:5; j=0:{SHAPE[1] - 1}:7]"
BOX = {"i": (2, 10), "j": (3, 15)}


def window(values: np.ndarray) -> np.ndarray:
    return values[2:11, 3:16]


@pytest.fixture
def folder(tmp_path):
    return str(tmp_path / "warehouse")


def written(folder: str) -> tuple[arrayviews.Database, object, np.ndarray]:
    db = arrayviews.connect(folder, spark=object())  # reads and small writes need no Spark
    values = np.random.default_rng(5).normal(size=SHAPE)
    array = db.create_array(SCHEMA)
    array.write_dense(values)
    return db, array, values


def counting_loads(db, monkeypatch) -> list:
    """Record every full table load (catalog query, metadata file check, new Table) of ``db``."""
    catalog = db.warehouse.catalog
    loads = []
    load = catalog.load_table

    def counted(identifier):
        loads.append(identifier)
        return load(identifier)

    monkeypatch.setattr(catalog, "load_table", counted)
    return loads


def test_an_unchanged_table_is_kept_and_another_connections_commit_is_seen(folder, monkeypatch) -> None:
    db, array, values = written(folder)
    loads = counting_loads(db, monkeypatch)
    table = array.source.table.table
    metadata, location = table.metadata, table.metadata_location
    for _ in range(3):
        np.testing.assert_array_equal(array.subarray(**BOX).to_numpy(), window(values))
    assert loads == [] and table.metadata is metadata and table.metadata_location == location
    other = arrayviews.connect(folder, spark=object()).array("A")
    other.insert({"i": [4, 9], "j": [5, 14], "v": [100.0, -3.5]}, on_conflict="replace")
    newer = values.copy()
    newer[[4, 9], [5, 14]] = [100.0, -3.5]
    np.testing.assert_array_equal(array.subarray(**BOX).to_numpy(), window(newer))
    assert len(loads) == 1 and table.metadata_location != location
    assert table.metadata_location == other.source.table.table.metadata_location
    # a pinned older version read after the newer one keeps its cells
    np.testing.assert_array_equal(array.at_version(1).subarray(**BOX).to_numpy(), window(values))
    np.testing.assert_array_equal(array.subarray(**BOX).to_numpy(), window(newer))


def test_a_commit_by_another_process_is_seen_by_the_next_read(folder) -> None:
    db, array, values = written(folder)
    np.testing.assert_array_equal(array.subarray(**BOX).to_numpy(), window(values))
    script = textwrap.dedent(
        f"""
        import arrayviews
        a = arrayviews.connect({folder!r}, spark=object()).array("A")
        a.delete(box={{"i": (3, 5), "j": (4, 8)}})
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, env=dict(os.environ), timeout=300)
    newer = values.copy()
    newer[3:6, 4:9] = np.nan
    np.testing.assert_array_equal(array.subarray(**BOX).to_numpy(), window(newer))
    np.testing.assert_array_equal(array.to_numpy(), newer)


def test_each_thread_sees_the_commits_made_before_its_read(folder) -> None:
    db, array, values = written(folder)
    other = arrayviews.connect(folder, spark=object()).array("A")
    expected = values.copy()
    with ThreadPoolExecutor(max_workers=1) as pool:  # one other thread, with its own connection
        for step in range(3):
            np.testing.assert_array_equal(array.subarray(**BOX).to_numpy(), window(expected))
            got = pool.submit(lambda: array.subarray(**BOX).to_numpy()).result()
            np.testing.assert_array_equal(got, window(expected))
            other.insert({"i": [2 + step], "j": [3], "v": [float(step)]}, on_conflict="replace")
            expected[2 + step, 3] = float(step)
    np.testing.assert_array_equal(array.subarray(**BOX).to_numpy(), window(expected))


def test_a_dropped_array_is_not_read_from_the_table_held(folder) -> None:
    db, array, values = written(folder)
    np.testing.assert_array_equal(array.subarray(**BOX).to_numpy(), window(values))
    identifier = array.source.table.table.name()
    arrayviews.connect(folder, spark=object()).drop_array("A")
    assert current_metadata_location(db.warehouse.catalog, identifier) is None
    with pytest.raises(NotFoundError, match="array A was dropped by another process"):
        array.subarray(**BOX).to_numpy()


def test_the_location_is_the_one_a_load_finds(folder) -> None:
    db, array, _ = written(folder)
    catalog = db.warehouse.catalog
    identifier = array.source.table.table.name()
    for _ in range(2):
        assert (
            current_metadata_location(catalog, identifier) == catalog.load_table(identifier).metadata_location
        )
        array.insert({"i": [0], "j": [0], "v": [1.0]}, on_conflict="replace")
    assert current_metadata_location(catalog, (identifier[0], "no_such_array")) is None
