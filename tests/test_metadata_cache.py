"""Reads reuse parsed table metadata while the catalog's entry is unchanged, and never serve a
stale version: two handles on one warehouse see each other's writes at once."""

from __future__ import annotations

import numpy as np
import pytest
from pyiceberg.serializers import FromInputFile

import arrayviews


@pytest.fixture
def handles(spark, tmp_path):
    location = str(tmp_path / "warehouse")
    first = arrayviews.connect(location, spark=spark, execution="local")
    second = arrayviews.connect(location, spark=spark, execution="local")
    return first, second


def test_write_through_one_handle_is_read_through_the_other(handles) -> None:
    first, second = handles
    array = first.create_array("A<v:int64>[i=0:99:10; j=0:99:10]")
    expected = np.zeros((100, 100), dtype=np.int64)
    present = np.zeros((100, 100), dtype=bool)
    for step in range(4):
        i, j = np.array([step, 50 + step]), np.array([7 * step, 99 - step])
        (first if step % 2 == 0 else second).array("A").insert({"i": i, "j": j, "v": i * 1000 + j})
        expected[i, j] = i * 1000 + j
        present[i, j] = True
        for reader in (second, first):  # read right after the write, through both handles
            frame = reader.array("A").subarray(i=(0, 60), j=(0, 99)).to_pandas()
            got = {(int(r.i), int(r.j)): int(r.v) for r in frame.itertuples(index=False)}
            want = {(int(a), int(b)): int(expected[a, b]) for a, b in zip(*np.nonzero(present), strict=True)}
            assert got == want, (step, reader is first)
    assert array.name == "A"


def test_unchanged_table_metadata_is_parsed_once(handles, monkeypatch) -> None:
    first, second = handles
    first.create_array("B<v:float64>[i=0:9:5]").insert({"i": [1, 2], "v": [0.5, 1.5]})
    parsed = []
    original = FromInputFile.table_metadata

    def counted(input_file, *args, **kwargs):
        parsed.append(input_file.location)
        return original(input_file, *args, **kwargs)

    monkeypatch.setattr(FromInputFile, "table_metadata", staticmethod(counted))
    second.array("B").subarray(i=(0, 9)).to_pandas()
    loads = len(parsed)
    for _ in range(5):
        frame = second.array("B").subarray(i=(0, 9)).to_pandas()
        assert sorted(frame.v) == [0.5, 1.5]
    assert len(parsed) == loads  # the catalog was asked, the metadata file not parsed again
    first.array("B").insert({"i": [3], "v": [2.5]})
    assert sorted(second.array("B").subarray(i=(0, 9)).to_pandas().v) == [0.5, 1.5, 2.5]
    assert len(parsed) > loads  # the new commit's metadata was read


def test_a_snapshot_is_planned_once_across_loads(handles, monkeypatch) -> None:
    """Reading one region again through a new handle of the table plans its files once; a new commit
    is planned anew (and its cell is read). A plan is a listing of a version's files (chunk
    pruning then works on the bounds kept per snapshot)."""
    from arrayviews.storage.versioned import VersionedTable

    first, second = handles
    first.create_array("C<v:int64>[i=0:19:5]").insert({"i": [1, 12], "v": [10, 120]})
    plans = []
    original = VersionedTable.live_files

    def counted(table, version=None, row_filter=None):
        plans.append(version)
        return original(table, version, row_filter)

    monkeypatch.setattr(VersionedTable, "live_files", counted)
    for _ in range(4):
        assert list(second.array("C").subarray(i=(0, 19)).to_pandas().v) == [10, 120]
    planned = len(plans)
    assert planned <= 2  # the estimate and the read may plan different filters, once each
    first.array("C").insert({"i": [7], "v": [70]})
    assert list(second.array("C").subarray(i=(0, 19)).to_pandas().v) == [10, 70, 120]
    assert len(plans) > planned
