"""Manifest merging in geometric runs (storage/snapshots.py ``merge_run``) and the part tables made
with it: the rule's bounds against a plain-Python simulation, and a table's files, manifest lists
and column metrics after many commits against pyiceberg's own scan and a fresh decode."""

from __future__ import annotations

import math
import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

import arrayviews
from arrayviews.model.names import PART
from arrayviews.storage import manifest_cache
from arrayviews.storage.part_table import PartTable
from arrayviews.storage.snapshots import merge_run

MIN_COUNT = 16  # pyiceberg's default commit.manifest.min-count-to-merge


@given(st.lists(st.integers(min_value=0, max_value=10**6), max_size=40))
def test_a_run_takes_at_least_the_newest_two_and_never_more_than_there_are(entries):
    run = merge_run(entries)
    assert min(2, len(entries)) <= run <= len(entries)
    # the rule as stated: each older manifest joins while it holds at most twice those gathered
    gathered = sum(entries[:run])
    if run < len(entries) and run >= 2:
        assert entries[run] > 2 * gathered


def _simulate(added: list[int]) -> tuple[list[int], int, int]:
    """Manifests (entries, newest first) after one commit per count in ``added``, each commit's own
    manifest merged with the newest run once the table holds MIN_COUNT manifests; the most
    manifests seen and the entries rewritten in all."""
    manifests: list[int] = []
    most = rewritten = 0
    for count in added:
        manifests.insert(0, count)
        if len(manifests) >= MIN_COUNT:
            run = merge_run(manifests)
            merged = sum(manifests[:run])
            rewritten += merged
            manifests[:run] = [merged]
        most = max(most, len(manifests))
    return manifests, most, rewritten


@pytest.mark.parametrize("commits", [1, 15, 16, 17, 100, 1000, 5000])
def test_one_entry_commits_keep_few_manifests_and_rewrite_each_entry_about_log2_times(commits):
    manifests, most, rewritten = _simulate([1] * commits)
    assert sum(manifests) == commits  # no entry lost or doubled
    log = math.log2(max(commits, 1))
    assert most <= MIN_COUNT + 2 * log + 2
    assert rewritten <= commits * (log + 3)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=600))
def test_small_commits_of_any_size_keep_the_bounds(added):
    manifests, most, rewritten = _simulate(added)
    entries = sum(added)
    assert sum(manifests) == entries
    log = math.log2(entries)
    assert most <= MIN_COUNT + 2 * log + 2
    assert rewritten <= entries * (log + 3)


# -- a part table over many commits -----------------------------------------------------------------
SCHEMA = T.StructType([T.StructField("x", T.LongType())])


def _entries_of(table: PartTable):
    snapshot = table.table.current_snapshot()
    io = table.table.io
    for manifest in snapshot.manifests(io):
        yield manifest, manifest.fetch_manifest_entry(io, discard_deleted=True)


def _check(table: PartTable, live: dict[str, int], part_field_id: int) -> None:
    """The table against the reference ``live`` (uri -> part)."""
    planned = {task.file.file_path: task.file for task in table.table.scan().plan_files()}
    assert set(planned) == set(live)
    for path, data_file in planned.items():
        assert data_file.partition[0] == live[path]
    snapshot = table.table.current_snapshot()
    if snapshot is None:
        return
    kept = manifest_cache._lists.get(snapshot.manifest_list)
    assert kept is not None, "the list this process wrote is kept"
    assert list(kept) == list(manifest_cache._decode_list(table.table.io, snapshot.manifest_list))
    for _manifest, entries in _entries_of(table):
        for entry in entries:
            data_file = entry.data_file
            for metric in (
                data_file.column_sizes,
                data_file.value_counts,
                data_file.null_value_counts,
                data_file.nan_value_counts,
                data_file.lower_bounds,
                data_file.upper_bounds,
            ):
                assert set(metric or {}) <= {part_field_id}
            assert part_field_id in (data_file.lower_bounds or {})


@pytest.mark.slow
@pytest.mark.parametrize(
    ("seed", "min_count", "settings"),
    [
        (7, MIN_COUNT, {}),
        (2026, MIN_COUNT, {}),
        (11, 2, {"commit.manifest.min-count-to-merge": "2"}),  # a merge every commit
        # manifests that do not fit one bin: pyiceberg's own merging decides
        (13, MIN_COUNT, {"commit.manifest.target-size-bytes": "20000"}),
    ],
)
def test_a_part_table_over_many_mixed_commits_matches_a_plain_reference(
    spark, tmp_path, seed, min_count, settings
):
    """~80 commits of appends, replacements and drops: after each, pyiceberg's scan names exactly the
    live files of a plain-Python reference, each with its part; the kept manifest list equals a
    fresh decode; manifests hold metrics of ``_part`` only; manifests are merged (their number stays
    bounded); a second connection reads the same rows."""
    location = str(tmp_path / "w")
    db = arrayviews.connect(location, spark=spark)
    catalog = db.warehouse.catalog
    table = PartTable.create(catalog, "benchmark", "runs", SCHEMA, 60, "viewdf", {"definition": "t"})
    if settings:
        table.set_properties(**settings)
        assert all(table.table.metadata.properties[k] == v for k, v in settings.items())
    part_field_id = table.table.schema().find_field(PART).field_id
    live: dict[str, int] = {}  # uri -> part
    rows: dict[str, list[int]] = {}  # uri -> x values
    next_x, newest, low = 0, 0, 0
    most_manifests = 0
    rng = random.Random(seed)
    for _ in range(80):
        kind = rng.choices(["append", "replace", "drop"], weights=[6, 3, 1])[0]
        replace, drop_below = [], None
        if kind == "append":
            newest += 1
            parts = [newest] * rng.randint(1, 3) + ([newest - 1] if newest > low + 1 else [])
        elif kind == "replace" and live:
            replace = rng.sample(sorted(set(live.values())), k=min(2, len(set(live.values()))))
            parts = list(replace)
        else:
            low = min(low + rng.randint(1, 3), newest)
            drop_below, parts = low, []
        parts = [p for p in parts if p >= low]
        xs = list(range(next_x, next_x + len(parts)))
        next_x += len(parts)
        batch = pa.table({"x": pa.array(xs, pa.int64()), PART: pa.array(parts, pa.int64())})
        staged = table.stage_local(batch.cast(table.arrow_schema)) if parts else []
        table.commit(
            staged,
            replace_parts=replace,
            drop_below=drop_below,
            operation=kind,
            expected_version=table.current_version(),
        )
        for path in [
            p for p, part in live.items() if part in replace or (drop_below is not None and part < drop_below)
        ]:
            del live[path], rows[path]
        written = dict(zip(xs, parts, strict=True))
        for file in staged:
            live[file.uri] = file.part
            rows[file.uri] = [x for x, part in written.items() if part == file.part]
        _check(table, live, part_field_id)
        if table.table.current_snapshot() is not None:
            most_manifests = max(
                most_manifests, len(table.table.current_snapshot().manifests(table.table.io))
            )
    if "commit.manifest.target-size-bytes" not in settings:
        assert most_manifests >= min_count - 1  # the table reached the merging count
    assert most_manifests <= min_count + 2 * math.log2(max(len(live), 2) * 80) + 2
    expected = sorted((x, live[uri]) for uri, xs in rows.items() for x in xs)
    mine = table.table.scan().to_arrow()
    assert sorted(zip(mine["x"].to_pylist(), mine[PART].to_pylist(), strict=True)) == expected
    other = arrayviews.connect(location, spark=spark)
    reopened = PartTable.open(other.warehouse.catalog, "benchmark", "runs")
    theirs = reopened.table.scan().to_arrow()
    assert sorted(zip(theirs["x"].to_pylist(), theirs[PART].to_pylist(), strict=True)) == expected
    assert set(reopened.all_files()) == set(live)


def test_a_new_part_table_keeps_column_sizes_of_part_only(db):
    table = PartTable.create(db.warehouse.catalog, "benchmark", "sizes", SCHEMA, 60, "viewdf", {})
    part_field_id = table.table.schema().find_field(PART).field_id
    batch = pa.table({"x": pa.array([1, 2], pa.int64()), PART: pa.array([1, 1], pa.int64())})
    table.commit(table.stage_local(batch.cast(table.arrow_schema)), operation="a", expected_version=0)
    ((_manifest, entries),) = list(_entries_of(table))
    assert set(entries[0].data_file.value_counts) == {part_field_id}  # the mode is honoured here
    assert set(entries[0].data_file.column_sizes) <= {part_field_id}
