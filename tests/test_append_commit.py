"""An append committed by storage/append_commit.py (no pyiceberg transaction) makes the snapshot
pyiceberg's own merging append makes: twin tables fed the same parts, one through each path,
agree snapshot by snapshot on the summary, the manifest list and every manifest entry (as
pyiceberg decodes the files, without this package's kept decoders), and read back the same rows;
a merge due, a removal or a stale handle leave the commit to pyiceberg's path or to
BaseMovedError with no file left behind."""

from __future__ import annotations

import itertools
import os
import tempfile

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from arrayviews.model.names import PART
from arrayviews.storage import append_commit, manifest_cache, snapshots, versioned
from arrayviews.storage.catalog import open_catalog
from arrayviews.storage.part_table import PartTable
from arrayviews.storage.snapshots import BaseMovedError

WAREHOUSE = tempfile.mkdtemp(prefix="append-commit-")
CATALOG = open_catalog(WAREHOUSE)
SCHEMA = T.StructType([T.StructField("k", T.IntegerType()), T.StructField("s", T.StringType())])
NAMES = itertools.count()
#: summary keys whose values name the commit itself (never equal between two tables)
OWN = {"arrayviews.version"}


def _create() -> PartTable:
    return PartTable.create(
        CATALOG, "views", f"appends_{next(NAMES)}", SCHEMA, 60, "viewdf", {"definition": "SELECT 1"}
    )


def _rows(part: int, count: int) -> pa.Table:
    return pa.table(
        {
            "k": pa.array(range(count), pa.int32()),
            "s": pa.array([f"p{part}-{i % 7}" for i in range(count)], pa.string()),
            PART: pa.array([part] * count, pa.int64()),
        }
    )


def _entries(table: PartTable, snapshot) -> list[tuple]:
    """Every entry of the snapshot's manifests, decoded from the files by pyiceberg."""
    io = table.table.io
    found = []
    for manifest in manifest_cache._decode_list(io, snapshot.manifest_list):
        for entry in manifest_cache._decode(manifest, io, discard_deleted=False):
            data = entry.data_file
            found.append(
                (
                    manifest.added_snapshot_id == snapshot.snapshot_id,
                    manifest.sequence_number - snapshot.sequence_number,
                    manifest.min_sequence_number - snapshot.sequence_number,
                    manifest.added_files_count,
                    manifest.existing_files_count,
                    manifest.deleted_files_count,
                    manifest.added_rows_count,
                    manifest.existing_rows_count,
                    manifest.content,
                    manifest.partition_spec_id,
                    entry.status,
                    entry.snapshot_id == snapshot.snapshot_id,
                    entry.sequence_number - snapshot.sequence_number,
                    entry.file_sequence_number - snapshot.sequence_number,
                    os.path.basename(data.file_path).split("-", 1)[1],
                    data.record_count,
                    data.file_size_in_bytes,
                    dict(data.column_sizes or {}),
                    dict(data.value_counts or {}),
                    dict(data.null_value_counts or {}),
                    dict(data.lower_bounds or {}),
                    dict(data.upper_bounds or {}),
                    list(data.split_offsets or []),
                    data.spec_id,
                    tuple(data.partition),
                )
            )
    return found


def _snapshot_facts(table: PartTable) -> list[tuple]:
    facts = []
    metadata = table.table.metadata
    for snapshot in metadata.snapshots:
        summary = {k: v for k, v in snapshot.summary.additional_properties.items() if k not in OWN}
        parent = metadata.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
        facts.append(
            (
                snapshot.summary.operation,
                summary,
                snapshot.sequence_number,
                snapshot.schema_id,
                None if parent is None else parent.sequence_number,
                sorted(_entries(table, snapshot)),
            )
        )
    return facts


def _file_names_alike(monkeypatch) -> None:
    """Data files named by part and a counter, the same in both twins (their basenames are in the
    compared entries after the first dash)."""
    from arrayviews.storage import part_table

    counter = itertools.count()
    monkeypatch.setattr(
        part_table,
        "new_data_file_uri",
        lambda directory, prefix="": f"{directory}/{prefix}{next(counter) // 2}.parquet",
    )


def test_appends_through_both_paths_make_the_same_snapshots(monkeypatch) -> None:
    """40 appends of parts of 1 to 60 rows (manifests merge from 16): the twin committed through
    pyiceberg's merging append is the reference. The fast path takes every append but the merges."""
    _file_names_alike(monkeypatch)
    ours, reference = _create(), _create()
    taken = {"append": 0, "pyiceberg": 0}
    real_append, real_snapshot = append_commit.commit_append, snapshots.commit_snapshot

    def counted_append(*args, **kwargs):
        result = real_append(*args, **kwargs)
        taken["append"] += result is not None
        return result

    def counted_snapshot(*args, **kwargs):
        taken["pyiceberg"] += 1
        return real_snapshot(*args, **kwargs)

    monkeypatch.setattr(versioned, "commit_snapshot", counted_snapshot)
    for part in range(40):
        rows = _rows(part, 1 + (part * 7) % 60)
        for twin in (ours, reference):
            monkeypatch.setattr(
                versioned, "commit_append", counted_append if twin is ours else lambda *a, **k: None
            )
            twin.commit(twin.stage_local(rows), operation="add", expected_version=twin.current_version())
    assert taken["append"] + taken["pyiceberg"] == 80
    assert 34 <= taken["append"] <= 38  # all but the merges (one in fifteen, from the sixteenth)
    ours_facts, reference_facts = _snapshot_facts(ours.refresh()), _snapshot_facts(reference.refresh())
    assert len(ours_facts) == len(reference_facts) == 40
    for number, (mine, theirs) in enumerate(zip(ours_facts, reference_facts, strict=True)):
        assert mine == theirs, f"snapshot {number} differs"
    # the rows read back through pyiceberg's scan, against the rows appended
    scanned = ours.table.scan().to_arrow().sort_by([(PART, "ascending"), ("k", "ascending")])
    expected = pa.concat_tables(_rows(p, 1 + (p * 7) % 60) for p in range(40))
    assert scanned.select(["k", "s", PART]).equals(expected.cast(scanned.select(["k", "s", PART]).schema))


def test_a_stale_handle_appends_nothing_and_leaves_no_file() -> None:
    table = _create()
    table.commit(table.stage_local(_rows(0, 3)), operation="add", expected_version=0)
    other = PartTable.open(open_catalog(WAREHOUSE), "views", table.name)
    other.commit(other.stage_local(_rows(1, 3)), operation="add", expected_version=1)
    metadata_folder = table.table.metadata.location + "/metadata"
    before = set(os.listdir(metadata_folder.removeprefix("file://")))
    staged = table.stage_local(_rows(2, 3))
    base = table.table.metadata.current_snapshot_id
    # the handle is still at version 1: the catalog's swap refuses its append
    with pytest.raises(BaseMovedError, match="another writer committed first"):
        append_commit.commit_append(table.table, base, [s.uri for s in staged], {"x": "1"}, "view t")
    assert set(os.listdir(metadata_folder.removeprefix("file://"))) == before
    assert other.refresh().current_version() == 2


def test_a_removal_or_a_moved_base_is_not_taken_by_the_fast_path() -> None:
    table = _create()
    table.commit(table.stage_local(_rows(0, 3)), operation="add", expected_version=0)
    staged = table.stage_local(_rows(1, 3))
    current = table.table.metadata.current_snapshot_id
    with pytest.raises(BaseMovedError, match="planned on snapshot"):
        append_commit.commit_append(table.table, current + 1, [s.uri for s in staged], {}, "view t")
    assert append_commit.commit_append(table.table, current, [], {}, "view t") is None
    # a replacement removes files: pyiceberg's overwrite commits it
    version = table.commit(staged, replace_parts=[0], operation="replace", expected_version=1)
    assert version == 2
    assert table.table.current_snapshot().summary.operation.value == "overwrite"
