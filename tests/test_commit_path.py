"""The short cuts of a commit give what pyiceberg's own path gives: manifests and manifest lists
kept per process, written with kept Avro writers, equal a decode of the files by pyiceberg alone
(no kept schemas or readers) at every snapshot (merges included), a data
file's record built from the footer its writer kept equals pyiceberg's record read from the file,
and the catalog's swap on the metadata at hand fails cleanly on a stale handle (nothing committed,
no file left) while a stale handle behind a property-only commit still commits, keeping it."""

from __future__ import annotations

import itertools
import json
import tempfile

import pyarrow as pa
import pyiceberg.avro.file as avro_file
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.io.pyarrow import parquet_file_to_data_file
from pyiceberg.utils.schema_conversion import AvroSchemaConversion
from pyspark.sql import types as T

from arrayviews.model.names import PART
from arrayviews.storage import avro_schemas, manifest_cache
from arrayviews.storage.catalog import open_catalog
from arrayviews.storage.files import filesystem, written_footer
from arrayviews.storage.part_table import PartTable
from arrayviews.storage.snapshots import BaseMovedError, data_file_record

WAREHOUSE = tempfile.mkdtemp(prefix="commit-path-")
CATALOGS = (open_catalog(WAREHOUSE), open_catalog(WAREHOUSE))  # two processes' catalog objects
SCHEMA = T.StructType(
    [
        T.StructField("k", T.IntegerType()),
        T.StructField("v", T.DoubleType()),
        T.StructField("s", T.StringType()),
    ]
)
NAMES = itertools.count()


def _create() -> PartTable:
    name = f"commits_{next(NAMES)}"
    return PartTable.create(CATALOGS[0], "views", name, SCHEMA, 60, "viewdf", {"definition": "SELECT 1"})


def _rows(parts: list[int], tag: int) -> pa.Table:
    return pa.table(
        {
            "k": pa.array([tag] * len(parts), pa.int32()),
            "v": pa.array([float(p) for p in parts], pa.float64()),
            "s": pa.array([f"t{tag}"] * len(parts), pa.string()),
            PART: pa.array(parts, pa.int64()),
        }
    )


def _entry(entry) -> tuple:
    data = entry.data_file
    return (
        entry.status,
        entry.snapshot_id,
        entry.sequence_number,
        entry.file_sequence_number,
        data.file_path,
        data.record_count,
        data.spec_id,
    )


def _manifest(manifest) -> tuple:
    return (
        manifest.manifest_path,
        manifest.added_snapshot_id,
        manifest.sequence_number,
        manifest.min_sequence_number,
        manifest.added_files_count,
        manifest.existing_files_count,
        manifest.deleted_files_count,
    )


def _assert_kept_equal_fresh(table: PartTable) -> None:
    """Every snapshot held: the kept manifest list and entries against pyiceberg's decoders."""
    io = table.table.io
    for snapshot in table.table.metadata.snapshots:
        kept = snapshot.manifests(io)
        fresh = list(manifest_cache._decode_list(io, snapshot.manifest_list))
        assert [_manifest(m) for m in kept] == [_manifest(m) for m in fresh]
        for manifest in fresh:
            for live in (True, False):
                assert [_entry(e) for e in manifest.fetch_manifest_entry(io, discard_deleted=live)] == [
                    _entry(e) for e in manifest_cache._decode(manifest, io, discard_deleted=live)
                ]


def _pyiceberg_alone(monkeypatch) -> None:
    """pyiceberg's own Avro schema parsing and reader/writer building, as it is without arrayviews
    (for a reference decode)."""
    monkeypatch.setattr(avro_file.AvroFileHeader, "get_schema", _original_get_schema)
    monkeypatch.setattr(avro_file, "resolve_reader", avro_schemas._resolve_reader)
    monkeypatch.setattr(avro_file.AvroFile, "_read_header", _original_read_header)


def _original_read_header(self):
    return avro_file.construct_reader(avro_file.META_SCHEMA, {-1: avro_file.AvroFileHeader}).read(
        self.decoder
    )


def _original_get_schema(header):
    return AvroSchemaConversion().avro_to_iceberg(json.loads(header.meta[avro_file._SCHEMA_KEY]))


def test_kept_manifests_equal_a_fresh_decode_through_merges_and_drops(monkeypatch) -> None:
    """Forty commits (appends, replacements, drops) through two catalogs, which make pyiceberg
    rewrite and merge manifests (reading some in the commit that writes them, before their
    sequence numbers are assigned); at every snapshot the kept lists and entries equal a fresh
    decode."""
    table = _create()
    handles = [table, PartTable.open(CATALOGS[1], "views", table.name)]
    for step in range(40):
        handle = handles[step % 2].refresh()
        version = handle.current_version()
        if step % 7 == 6:
            handle.commit([], drop_below=step // 3, operation="drop", expected_version=version)
        else:
            staged = handle.stage_local(_rows([step % 5, step], step))
            replaced = [step % 5] if step % 3 == 0 else []
            handle.commit(staged, replace_parts=replaced, operation="add", expected_version=version)
    sequence_numbers = {
        m.sequence_number for m in table.refresh().table.current_snapshot().manifests(table.table.io)
    }
    assert len(sequence_numbers) > 1
    kept = {id(h): h.refresh() for h in handles}
    with monkeypatch.context() as patched:
        _pyiceberg_alone(patched)
        for handle in kept.values():
            _assert_kept_equal_fresh(handle)
    written = [m for s in table.table.metadata.snapshots for m in s.manifests(table.table.io)]
    assert len({m.manifest_path for m in written}) > 20  # many manifests written with kept writers
    manifests = table.table.current_snapshot().manifests(table.table.io)
    assert len(manifests) < 16  # merged as commits went (every table merges from 16 manifests)


RECORD_FIELDS = (
    "file_path",
    "record_count",
    "file_size_in_bytes",
    "value_counts",
    "null_value_counts",
    "nan_value_counts",
    "lower_bounds",
    "upper_bounds",
    "split_offsets",
)


def _assert_same_part_record(table: PartTable, ours, read, more: tuple[str, ...] = ()) -> None:
    """A part file's record against pyiceberg's read from the file. pyiceberg's reader keeps every
    column's size; Iceberg keeps none where a column's metrics mode is "none", which in a part
    table is every column but _part."""
    part_field = table.table.schema().find_field(PART).field_id
    assert ours.column_sizes == {f: size for f, size in read.column_sizes.items() if f == part_field}
    for field in (*RECORD_FIELDS, *more):
        assert getattr(ours, field) == getattr(read, field), field


values = st.one_of(
    st.none(), st.floats(allow_nan=True, allow_infinity=True, width=64), st.sampled_from([0.0, -0.0])
)
texts = st.one_of(st.none(), st.text(max_size=6))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1) | st.none(), values, texts), min_size=1, max_size=30)
)
def test_a_file_record_from_the_kept_footer_equals_the_record_read_from_the_file(rows) -> None:
    table = _create()
    rows_table = pa.table(
        {
            "k": pa.array([r[0] for r in rows], pa.int32()),
            "v": pa.array([r[1] for r in rows], pa.float64()),
            "s": pa.array([r[2] for r in rows], pa.string()),
            PART: pa.array([7] * len(rows), pa.int64()),
        }
    )
    (staged,) = table.stage_local(rows_table)
    metadata, io = table.table.metadata, table.table.io
    kept = data_file_record(io, metadata, staged.uri)  # takes the footer this process kept
    assert written_footer(staged.uri) is None  # ... and forgets it
    read = parquet_file_to_data_file(io, metadata, staged.uri)
    _assert_same_part_record(table, kept, read)
    assert kept.partition == read.partition
    assert kept.record_count == len(rows)
    # a file written elsewhere (its footer not kept here) gets the same record from the file
    from_file = data_file_record(io, metadata, staged.uri)
    for field in ("column_sizes", "value_counts", "lower_bounds", "upper_bounds", "file_size_in_bytes"):
        assert getattr(from_file, field) == getattr(kept, field), field
    assert from_file.partition == kept.partition
    table.discard([staged])


def _metadata_files(table: PartTable) -> set[str]:
    fs, path = filesystem(table.location.rstrip("/") + "/metadata")
    from pyarrow.fs import FileSelector

    return {i.path for i in fs.get_file_info(FileSelector(path)) if i.path.endswith(".metadata.json")}


def test_a_stale_handle_commits_nothing_and_leaves_no_metadata_file() -> None:
    table = _create()
    table.commit(table.stage_local(_rows([0], 0)), operation="add", expected_version=0)
    stale = PartTable.open(CATALOGS[1], "views", table.name)
    table.commit(table.stage_local(_rows([1], 1)), operation="add", expected_version=1)
    before = _metadata_files(table)
    staged = stale.stage_local(_rows([2], 2))
    with pytest.raises(BaseMovedError):
        stale.commit(staged, operation="add", expected_version=1)  # it still thinks version 1 is current
    stale.discard(staged)
    assert _metadata_files(table) == before
    assert table.refresh().current_version() == 2
    assert sorted(table.files_by_part()) == [0, 1]


def test_a_handle_behind_a_property_commit_still_commits_and_keeps_the_property() -> None:
    """Another process set a table property (no new snapshot): the version is unchanged, so a
    commit planned on the handle loaded before it is valid; it lands on the newest metadata."""
    table = _create()
    table.commit(table.stage_local(_rows([0], 0)), operation="add", expected_version=0)
    other = PartTable.open(CATALOGS[1], "views", table.name)
    other.update_properties({"note": "set elsewhere"})
    table.commit(table.stage_local(_rows([1], 1)), operation="add", expected_version=1)
    fresh = PartTable.open(CATALOGS[1], "views", table.name)
    assert fresh.current_version() == 2
    assert fresh.properties["note"] == "set elsewhere"
    assert sorted(fresh.files_by_part()) == [0, 1]


def test_pyiceberg_runs_inline_for_local_warehouses_and_keeps_threads_once_a_remote_one_opened(
    monkeypatch,
) -> None:
    """A local warehouse runs pyiceberg's metadata work in the calling thread; once a warehouse on
    a remote file system is opened in the process, pyiceberg keeps its thread pool (network waits
    overlap there), even if a local one is opened again."""
    import threading

    from pyiceberg.utils.concurrent import ExecutorFactory

    from arrayviews.storage import inline_executor

    monkeypatch.setattr(inline_executor, "_remote_opened", False)
    monkeypatch.setattr(ExecutorFactory, "_instance", ExecutorFactory._instance)
    open_catalog(tempfile.mkdtemp(prefix="inline-"))
    worker = ExecutorFactory.get_or_create().submit(threading.get_ident).result()
    assert worker == threading.get_ident()
    inline_executor.use_threads()  # what open_catalog does for hdfs://, s3://...
    open_catalog(tempfile.mkdtemp(prefix="inline-"))
    executor = ExecutorFactory.get_or_create()
    assert not isinstance(executor, inline_executor.InlineExecutor)
    assert executor.submit(threading.get_ident).result() != threading.get_ident()
    inline_executor._remote_opened = False  # restored by monkeypatch too; reinstall for the rest
    inline_executor.install()


def test_a_catalog_reads_while_another_connection_holds_the_write_lock() -> None:
    """The SQLite catalog runs in write-ahead-log mode: a writer in the middle of a commit does not
    block a reader (with a rollback journal the load below waits out the busy timeout and fails
    with "database is locked")."""
    import sqlite3
    import time

    table = _create()
    table.commit(table.stage_local(_rows([0], 0)), operation="add", expected_version=0)
    writer = sqlite3.connect(f"{WAREHOUSE}/catalog.db", timeout=0.1)
    try:
        writer.execute("BEGIN EXCLUSIVE")
        writer.execute("UPDATE iceberg_tables SET previous_metadata_location = previous_metadata_location")
        started = time.perf_counter()
        reader = PartTable.open(CATALOGS[1], "views", table.name)
        assert reader.current_version() == 1
        assert time.perf_counter() - started < 2.0
    finally:
        writer.rollback()
        writer.close()
    with CATALOGS[0].engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


class _NoMerging:
    """A snapshot producer stand-in that fails the test if the merge manager writes a manifest."""

    snapshot_id = 1

    def spec(self, spec_id):
        raise AssertionError("pyiceberg merged")

    def new_manifest_writer(self, spec):
        raise AssertionError("pyiceberg merged")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 4_000), st.sampled_from([0, 0, 0, 1])), min_size=1, max_size=60),
    st.integers(2, 70),
    st.sampled_from([5_000, 20_000, 200_000]),
)
def test_merge_is_skipped_only_when_pyiceberg_would_return_the_manifests_unchanged(
    manifests, min_count, target
) -> None:
    """``snapshots.merge_keeps`` against pyiceberg's own merge manager: whenever it says the
    manifests stay as they are, pyiceberg's merging returns exactly them, in their order, without
    writing a manifest."""
    from pyiceberg.manifest import ManifestContent, ManifestFile
    from pyiceberg.table.update.snapshot import _ManifestMergeManager

    from arrayviews.storage.snapshots import merge_keeps

    data = [
        ManifestFile.from_args(
            manifest_path=f"m{i}.avro",
            manifest_length=length,
            partition_spec_id=spec,
            content=ManifestContent.DATA,
            sequence_number=i,
            min_sequence_number=i,
            added_snapshot_id=i,
        )
        for i, (length, spec) in enumerate(manifests)
    ]
    manager = _ManifestMergeManager(target, min_count, True, _NoMerging())
    if merge_keeps(data, target, min_count, True):
        assert [m.manifest_path for m in manager.merge_manifests(data)] == [m.manifest_path for m in data]
    elif (
        len({spec for _, spec in manifests}) == 1
        and len(data) >= min_count
        and sum(length for length, _ in manifests) <= target
    ):
        with pytest.raises(AssertionError, match="pyiceberg merged"):
            manager.merge_manifests(data)  # one bin of min_count or more manifests is merged
    assert merge_keeps(data, target, min_count, False)


def _versions_after_by_scan(metadata, after: int) -> list[int]:
    """The reference: every snapshot's version above ``after`` by walking the list, in version
    order (ties in list order), as versioned() did before the index."""
    found = []
    for position, snapshot in enumerate(metadata.snapshots):
        number = snapshot.summary.additional_properties.get("arrayviews.version")
        if number is not None and int(number) > after:
            found.append((int(number), position, snapshot.snapshot_id))
    return [snapshot_id for _, _, snapshot_id in sorted(found)]


def test_snapshot_lookups_through_the_kept_index_equal_a_scan_of_the_list() -> None:
    """Appends, replacements, drops, an expiry, a load by another catalog (new objects) and a
    repair that moves the current snapshot back (versions then repeat): at every step, lookups by
    id and by version equal a walk of the snapshot list."""
    import pyiceberg.table.metadata as table_metadata

    from arrayviews.storage import snapshot_index

    table = _create()
    extended = {"count": 0}
    original = snapshot_index._Index._extended

    def counting(self, key):
        extended["count"] += 1
        return original(self, key)

    def check(handle: PartTable) -> None:
        metadata = handle.table.metadata
        for snapshot in metadata.snapshots:
            assert metadata.snapshot_by_id(snapshot.snapshot_id) is snapshot
        assert metadata.snapshot_by_id(12345) is None
        assert (
            snapshot_index._scan_by_id(metadata, metadata.current_snapshot_id)
            is handle.table.current_snapshot()
        )
        held = [int(s.summary.additional_properties["arrayviews.version"]) for s in metadata.snapshots]
        for after in range(-1, max(held) + 2):
            assert [
                s.snapshot_id for s in snapshot_index.snapshots_after(metadata, "arrayviews.version", after)
            ] == (_versions_after_by_scan(metadata, after))

    assert table_metadata.TableMetadataCommonFields.snapshot_by_id is snapshot_index.snapshot_by_id
    snapshot_index._Index._extended = counting
    try:
        _commit_and_check(table, check, extended)
    finally:
        snapshot_index._Index._extended = original


def _commit_and_check(table, check, extended) -> None:
    import datetime as dt

    from pyiceberg.table.update.snapshot import ManageSnapshots

    version = 0
    for step in range(12):
        parts = [step] if step % 3 else [step, step - 1]
        version = table.commit(
            table.stage_local(_rows(parts, step)),
            replace_parts=parts,
            drop_below=step - 4 if step % 4 == 0 else None,
            operation="add",
            expected_version=version,
        )
        if step % 2:
            check(PartTable.open(CATALOGS[1], "views", table.name))  # parsed from the file: new objects
        check(table)  # the next commit's metadata extends this one's index
    assert extended["count"] >= 4  # lookups after a commit extended the index before it
    now = dt.datetime.now(dt.UTC)
    table.expire(now + dt.timedelta(seconds=1), now - dt.timedelta(hours=1), keep_after=version - 5)
    check(table)
    # a repair: the current snapshot moved back; the next commits repeat versions of abandoned ones
    older = [s for s in table.table.metadata.snapshots][-3]
    transaction = table.table.transaction()
    ManageSnapshots(transaction).set_current_snapshot(older.snapshot_id).commit()
    table.table = transaction.commit_transaction()
    version = table.current_version()
    for step in range(12, 15):
        version = table.commit(
            table.stage_local(_rows([step], step)), operation="add", expected_version=version
        )
        check(table)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.integers(1, 400),
    group=st.integers(1, 150),
    part_first=st.booleans(),
    dictionary=st.booleans(),
    part=st.integers(-(2**63), 2**63 - 1),
)
def test_a_part_files_record_read_from_two_columns_equals_pyiceberg_s(
    rows, group, part_first, dictionary, part
):
    """The short cut for a part table's files (``snapshots._part_statistics``: the first column
    and ``_part`` only) against pyiceberg's record read from the file, over row groups, column
    orders, dictionary pages and any BIGINT part number; it must have been taken."""
    import os

    import pyarrow.parquet as pq

    from arrayviews.storage import snapshots

    table = _create()
    columns = {
        "k": pa.array([i % 5 if i % 3 else None for i in range(rows)], pa.int32()),
        "v": pa.array([float(i) for i in range(rows)], pa.float64()),
        "s": pa.array([f"s{i % 4}" for i in range(rows)], pa.string()),
    }
    parts = pa.array([part] * rows, pa.int64())
    ordered = {PART: parts, **columns} if part_first else {**columns, PART: parts}
    path = f"{table.data_directory}/quick-{next(NAMES)}.parquet".removeprefix("file://")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.table(ordered), path, row_group_size=group, use_dictionary=dictionary)
    metadata, io = table.table.metadata, table.table.io
    taken = []
    original = snapshots._part_statistics

    def recorded(*args):
        taken.append(original(*args))
        return taken[-1]

    snapshots._part_statistics = recorded
    try:
        ours = data_file_record(io, metadata, "file://" + path)
    finally:
        snapshots._part_statistics = original
    theirs = parquet_file_to_data_file(io, metadata, "file://" + path)
    assert taken and taken[0] is not None
    _assert_same_part_record(table, ours, theirs, ("partition", "content", "file_format"))
