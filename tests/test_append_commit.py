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


def _bytes(path: str) -> bytes:
    with open(path.removeprefix("file://"), "rb") as stream:
        return stream.read()


def _same_but_sync(ours: bytes, theirs: bytes) -> bool:
    """Equal once the 16-byte sync marker each file ends with is swapped for the other's."""
    return theirs.replace(theirs[-16:], ours[-16:]) == ours


def test_the_manifest_and_list_files_are_pyiceberg_s_bytes() -> None:
    """The fast path's manifest and manifest list against pyiceberg's writers given the same
    records: byte for byte, but for the random sync marker."""
    from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus, write_manifest, write_manifest_list

    table = _create()
    table.commit(table.stage_local(_rows(0, 5)), operation="add", expected_version=0)
    table.commit(table.stage_local(_rows(1, 9)), operation="add", expected_version=1)
    staged = [table.stage_local(_rows(2, 4))[0], table.stage_local(_rows(2, 6))[0]]
    metadata, io = table.table.metadata, table.table.io
    files = [snapshots.data_file_record(io, metadata, s.uri) for s in staged]
    spec, schema = metadata.spec(), metadata.schema()
    folder = table.table.metadata.location + "/metadata"
    ours_path, theirs_path = f"{folder}/ours-m0.avro", f"{folder}/theirs-m0.avro"
    ours = append_commit._write_manifest(io, ours_path, spec, schema, "gzip", 77, files)
    with write_manifest(2, spec, schema, io.new_output(theirs_path), 77, "gzip") as writer:
        for data_file in files:
            writer.add(
                ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=77, data_file=data_file)
            )
    theirs = writer.to_manifest_file()
    # pyiceberg writes each entry as a block of its own; this package writes one block (both
    # paths here): pyiceberg's framing is compared through this package's writer below
    assert _same_but_sync(_bytes(ours_path), _bytes(theirs_path))
    assert ours._data[1:] == theirs._data[1:]  # the list record, but for the path
    parent = table.table.current_snapshot()
    listed = [ours, *parent.manifests(io)]
    ours_list, theirs_list = f"{folder}/ours-snap.avro", f"{folder}/theirs-snap.avro"
    append_commit._write_manifest_list(io, ours_list, 77, parent.snapshot_id, 9, "gzip", listed)
    with write_manifest_list(2, io.new_output(theirs_list), 77, parent.snapshot_id, 9, "gzip") as list_writer:
        list_writer.add_manifests(listed)
    assert _same_but_sync(_bytes(ours_list), _bytes(theirs_list))


@pytest.mark.parametrize("parts", [[3], [3, 3], [1, 2, 2, 5]])
def test_the_summary_is_pyiceberg_s_collector_s_in_its_order(parts) -> None:
    """Files of one or several parts: the summary equals, key for key and in order, what
    pyiceberg's summary collector and totals make of them."""
    from pyiceberg.table.snapshots import Operation, SnapshotSummaryCollector, Summary

    table = _create()
    table.commit(table.stage_local(_rows(0, 5)), operation="add", expected_version=0)
    metadata, io = table.table.metadata, table.table.io
    files = [
        snapshots.data_file_record(io, metadata, table.stage_local(_rows(p, 3 + n))[0].uri)
        for n, p in enumerate(parts)
    ]
    parent = table.table.current_snapshot()
    ours = append_commit._summary(metadata, files, {"arrayviews.version": "2"}, parent)
    collector = SnapshotSummaryCollector(partition_summary_limit=0)
    for data_file in files:
        collector.add_file(data_file=data_file, partition_spec=metadata.spec(), schema=metadata.schema())
    theirs = snapshots.PYICEBERG_UPDATE_SUMMARIES(
        Summary(operation=Operation.APPEND, **collector.build(), **{"arrayviews.version": "2"}),
        parent.summary,
    )
    assert ours.operation == theirs.operation
    assert list(ours.additional_properties.items()) == list(theirs.additional_properties.items())
    assert ours.additional_properties["changed-partition-count"] == str(len(set(parts)))
