"""The files of a part range found by bisection in a per-snapshot part-sorted index
(storage/part_table.py ``files_of_parts``, ``sized_files_of_parts``) against pyiceberg's own scan of
that snapshot filtered by part in plain Python, for random ranges, current and older versions,
after drops and replacements."""

from __future__ import annotations

import itertools
import os
from urllib.parse import urlparse

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from arrayviews.model.names import PART
from arrayviews.storage import part_index
from arrayviews.storage.part_table import PartTable

SCHEMA = T.StructType([T.StructField("x", T.LongType())])
_names = itertools.count()

operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.integers(0, 12), min_size=1, max_size=6)),
        st.tuples(st.just("replace"), st.lists(st.integers(0, 12), min_size=1, max_size=3)),
        st.tuples(st.just("drop"), st.integers(0, 12)),
    ),
    min_size=1,
    max_size=10,
)
ranges = st.lists(st.tuples(st.integers(-2, 14), st.integers(-2, 14)), min_size=1, max_size=6)


def _scan(table: PartTable, version: int) -> list[tuple[str, int, int, int]]:
    """(uri, part, rows, bytes) of every file of a version, from pyiceberg's scan of its snapshot;
    bytes from the file system."""
    snapshot_id = table.snapshot_of(version)
    if snapshot_id is None:
        return []
    found = []
    for task in table.table.scan(snapshot_id=snapshot_id).plan_files():
        data_file = task.file
        size = os.path.getsize(urlparse(data_file.file_path).path)
        found.append((data_file.file_path, data_file.partition[0], data_file.record_count, size))
    return found


def _check_order(found: list[str], part_of: dict[str, int]) -> None:
    parts = [part_of[uri] for uri in found]
    assert parts == sorted(parts)


def _build(db, steps, checks: list[tuple[int, int]]) -> tuple[PartTable, dict[str, int]]:
    table = PartTable.create(db.warehouse.catalog, "ranges", f"t{next(_names)}", SCHEMA, 60, "viewdf", {})
    part_of: dict[str, int] = {}
    x = 0
    for kind, argument in steps:
        version = table.current_version()
        if kind == "append":
            batch = pa.table(
                {
                    "x": pa.array(range(x, x + len(argument)), pa.int64()),
                    PART: pa.array(argument, pa.int64()),
                }
            )
            x += len(argument)
            staged = table.stage_local(batch.cast(table.arrow_schema))
            table.commit(staged, operation="append", expected_version=version)
        elif kind == "replace":
            batch = pa.table(
                {"x": pa.array([x] * len(argument), pa.int64()), PART: pa.array(argument, pa.int64())}
            )
            x += 1
            staged = table.stage_local(batch.cast(table.arrow_schema))
            table.commit(staged, replace_parts=argument, operation="replace", expected_version=version)
        else:
            staged = []
            table.commit([], drop_below=argument, operation="drop", expected_version=version)
        for file in staged:
            part_of[file.uri] = file.part
        for low, high in checks:  # the current version, after each commit
            found = table.files_of_parts(low, high)
            reference = [u for u, p, _, _ in _scan(table, table.current_version()) if low <= p <= high]
            assert sorted(found) == sorted(reference)
            _check_order(found, part_of)
    return table, part_of


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=operations, checks=ranges, data=st.data())
def test_files_of_a_range_equal_a_filter_of_the_scan_in_every_version(db, steps, checks, data) -> None:
    table, part_of = _build(db, steps, checks)
    current = table.current_version()
    versions = data.draw(st.lists(st.integers(0, current), min_size=1, max_size=4))
    for version, (low, high) in itertools.product(versions, checks):
        scanned = _scan(table, version)
        for uri, part, _, _ in scanned:
            assert part_of[uri] == part  # the partition value is the part the rows were staged with
        reference = [u for u, p, _, _ in scanned if low <= p <= high]
        found = table.files_of_parts(low, high, version)
        assert sorted(found) == sorted(reference)
        _check_order(found, part_of)
        # and the code's own listing, filtered plainly (the path the index replaces)
        listed = [f.file_path for f in table.live_files(version) if low <= f.partition[0] <= high]
        assert sorted(found) == sorted(listed)
    for low, high in checks:
        sized = table.sized_files_of_parts(low, high)
        reference = [r for r in _scan(table, current) if low <= r[1] <= high]
        assert sorted(sized) == sorted(reference)
        assert [r[1] for r in sized] == sorted(r[1] for r in sized)


@pytest.mark.parametrize(("kept", "paths_kept"), [(1, 1), (2, 3)])
def test_small_caches_give_the_same_files(db, monkeypatch, kept, paths_kept) -> None:
    """With room for one or two snapshot indexes and a few file parts (dropped and cleared as they
    overflow) old and current versions asked in turn still give the scan's files."""
    monkeypatch.setattr(part_index, "BY_PART_KEPT", kept)
    monkeypatch.setattr(part_index, "PARTS_BY_PATH_KEPT", paths_kept)
    steps = [("append", [1, 2, 3]), ("append", [3, 4]), ("replace", [2]), ("drop", 2), ("append", [5, 1])]
    table, part_of = _build(db, steps, [(0, 10), (3, 3)])
    for _ in range(2):
        for version in range(table.current_version() + 1):
            for low, high in [(0, 10), (2, 4), (5, 5), (6, 1)]:
                reference = [u for u, p, _, _ in _scan(table, version) if low <= p <= high]
                found = table.files_of_parts(low, high, version)
                assert sorted(found) == sorted(reference)
                _check_order(found, part_of)


def test_a_second_handle_sees_the_other_handles_commits(db) -> None:
    """Two handles on one table: each one's ranges follow the other's commits once refreshed."""
    table, part_of = _build(db, [("append", [1, 2])], [(0, 5)])
    other = PartTable.open(db.warehouse.catalog, "ranges", table.name)
    assert sorted(other.files_of_parts(0, 5)) == sorted(table.files_of_parts(0, 5))
    batch = pa.table({"x": pa.array([9, 9], pa.int64()), PART: pa.array([2, 3], pa.int64())})
    staged = other.stage_local(batch.cast(other.arrow_schema))
    other.commit(staged, replace_parts=[2], operation="replace", expected_version=other.current_version())
    table.refresh()
    reference = [u for u, p, _, _ in _scan(table, table.current_version()) if 0 <= p <= 5]
    assert sorted(table.files_of_parts(0, 5)) == sorted(reference)
    assert {s.uri for s in staged} <= set(table.files_of_parts(2, 3))
    assert len(table.files_of_parts(1, 1)) == 1 and len(table.files_of_parts(2, 2)) == 1
