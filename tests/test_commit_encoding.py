"""The Avro bytes a commit writes are pyiceberg's: the encoder's primitives against a reference
written from the Avro specification (zig-zag, seven bits a byte), and each manifest list written
with the records' kept bytes against the same list written by pyiceberg's own encoder (byte for
byte, same sync marker) and against a fresh decode by pyiceberg's reader."""

from __future__ import annotations

import io
import itertools
import tempfile
import types

import pyarrow as pa
import pyiceberg.avro.file as avro_file
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.avro.encoder import BinaryEncoder
from pyiceberg.avro.writer import OptionWriter
from pyiceberg.manifest import ManifestListWriter, write_manifest_list
from pyspark.sql import types as T
from tests.commit_history import thirty_mixed_commits

from arrayviews.model.names import PART
from arrayviews.storage import avro_schemas, manifest_cache
from arrayviews.storage.catalog import open_catalog
from arrayviews.storage.part_table import PartTable

WAREHOUSE = tempfile.mkdtemp(prefix="commit-encoding-")
CATALOG = open_catalog(WAREHOUSE)
SCHEMA = T.StructType([T.StructField("k", T.IntegerType()), T.StructField("s", T.StringType())])
NAMES = itertools.count()


def _long(value: int) -> bytes:
    """The Avro specification's encoding of a long: zig-zag, then seven bits a byte, low first."""
    zigzag = (value << 1) if value >= 0 else ((-value) << 1) - 1
    out = bytearray()
    while True:
        low = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _encoded(write) -> bytes:
    stream = io.BytesIO()
    write(BinaryEncoder(stream))
    return stream.getvalue()


longs = st.integers(-(2**63), 2**63 - 1) | st.sampled_from(
    [0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, 2**31, -(2**31), 2**63 - 1, -(2**63)]
)


@settings(max_examples=400, deadline=None)
@given(longs, st.binary(max_size=300), st.text(max_size=120))
def test_encoder_primitives_match_the_avro_specification(value, data, text) -> None:
    assert _encoded(lambda e: e.write_int(value)) == _long(value)
    assert _encoded(lambda e: e.write_bytes(data)) == _long(len(data)) + data
    raw = text.encode("utf-8")
    assert _encoded(lambda e: e.write_utf8(text)) == _long(len(raw)) + raw
    option = OptionWriter(avro_schemas.construct_writer(_long_schema()))
    assert _encoded(lambda e: option.write(e, value)) == _long(1) + _long(value)
    assert _encoded(lambda e: option.write(e, None)) == _long(0)
    # and pyiceberg's own primitives agree
    reference = avro_schemas.PYICEBERG_ENCODER
    assert _encoded(lambda e: reference["write_int"](e, value)) == _long(value)
    assert _encoded(lambda e: reference["write_bytes"](e, data)) == _long(len(data)) + data


def _long_schema():
    from pyiceberg.types import LongType

    return LongType()


def _rows(parts: list[int], tag: int) -> pa.Table:
    return pa.table(
        {
            "k": pa.array([tag] * len(parts), pa.int32()),
            "s": pa.array([f"t{tag}"] * len(parts), pa.string()),
            PART: pa.array(parts, pa.int64()),
        }
    )


def _pyiceberg_list(manifests, snapshot, parent, sequence_number, path: str) -> bytes:
    """The manifest list pyiceberg alone writes for ``manifests`` (its add_manifests, encoder
    primitives and option writer), read back as bytes."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    output = PyArrowFileIO().new_output(path)
    with write_manifest_list(2, output, snapshot, parent, sequence_number, "deflate") as writer:
        writer._writer.write_block([writer.prepare_manifest(m) for m in manifests])
    with open(path.removeprefix("file://"), "rb") as stream:
        return stream.read()


def test_manifest_lists_written_from_kept_record_bytes_equal_pyiceberg_s_own(monkeypatch) -> None:
    """Twenty commits (adds, replacements, drops; manifests merge on the way): every manifest list
    equals, byte for byte, the list pyiceberg's own encoder writes for the same records with the
    same sync marker; its records equal a fresh decode; and each record is encoded once, not once
    per list that names it."""
    table = PartTable.create(CATALOG, "views", f"enc_{next(NAMES)}", SCHEMA, 60, "viewdf", {})
    encodes = {"records": 0}
    original = manifest_cache.BinaryEncoder

    class Counting(original):
        def __init__(self, stream) -> None:
            encodes["records"] += 1
            super().__init__(stream)

    monkeypatch.setattr(manifest_cache, "BinaryEncoder", Counting)
    # one sync marker for every Avro file (pyiceberg draws it from os.urandom)
    monkeypatch.setattr(avro_file, "os", types.SimpleNamespace(urandom=lambda n: bytes(range(n))))
    listed = 0
    version = 0
    for step in range(20):
        staged = table.stage_local(_rows([step % 4, step], step))
        version = table.commit(
            staged,
            replace_parts=[step % 4] if step % 3 == 0 else [],
            drop_below=step - 6 if step % 5 == 4 else None,
            operation="add",
            expected_version=version,
        )
        listed += len(table.table.current_snapshot().manifests(table.table.io))
    assert encodes["records"] < listed / 2  # most records came from earlier lists
    monkeypatch.setattr(manifest_cache, "BinaryEncoder", original)
    io_ = table.table.io
    with monkeypatch.context() as reference:
        for name, method in avro_schemas.PYICEBERG_ENCODER.items():
            reference.setattr(BinaryEncoder, name, method)
        reference.setattr(OptionWriter, "write", avro_schemas.PYICEBERG_OPTION_WRITE)
        for number, snapshot in enumerate(table.table.metadata.snapshots):
            fresh = list(manifest_cache._decode_list(io_, snapshot.manifest_list))
            kept = snapshot.manifests(io_)
            assert [m._data for m in kept] == [m._data for m in fresh]
            path = f"file://{WAREHOUSE}/reference-{number}.avro"
            expected = _pyiceberg_list(
                fresh, snapshot.snapshot_id, snapshot.parent_snapshot_id, snapshot.sequence_number, path
            )
            with io_.new_input(snapshot.manifest_list).open() as stream:
                assert stream.read() == expected


def test_list_writer_is_arrayviews_own() -> None:
    assert ManifestListWriter.add_manifests is manifest_cache._add_manifests


def test_manifest_headers_equal_pyiceberg_s_own() -> None:
    """The header properties of every manifest a commit writes (schema and spec JSON made once)
    equal those pyiceberg's own manifest writer makes for the table's schema and spec."""
    from pyiceberg.manifest import write_manifest

    table = PartTable.create(CATALOG, "views", f"enc_{next(NAMES)}", SCHEMA, 60, "viewdf", {})
    version = 0
    for step in range(3):
        version = table.commit(
            table.stage_local(_rows([step], step)),
            drop_below=1 if step == 2 else None,
            operation="add",
            expected_version=version,
        )
    metadata, io_ = table.table.metadata, table.table.io
    reference = write_manifest(2, metadata.spec(), metadata.schema(), io_.new_output("unused"), 1, "deflate")
    expected = avro_schemas.PYICEBERG_MANIFEST_META.fget(reference)
    assert avro_schemas.manifest_meta(reference) == expected
    headers = 0
    for manifest in table.table.current_snapshot().manifests(io_):
        with avro_file.AvroFile(io_.new_input(manifest.manifest_path)) as reader:
            meta = reader.header.meta
        assert {k: meta[k] for k in expected} == expected
        headers += 1
    assert headers >= 2
    assert metadata.spec().partition_type(metadata.schema()) == avro_schemas._partition_type(
        metadata.spec(), metadata.schema()
    )


def test_the_swap_runs_on_the_plain_connection_and_is_seen_by_other_connections() -> None:
    """A commit's compare-and-set of the metadata location runs on the thread's plain sqlite3
    connection (no statement through SQLAlchemy's pool); another catalog object and a separate
    sqlite3 connection see the new location at once, and a stale handle's swap still changes
    nothing (the commit lands as a conflict)."""
    import sqlite3

    from sqlalchemy import event

    from arrayviews.storage.snapshots import BaseMovedError

    table = PartTable.create(CATALOG, "views", f"enc_{next(NAMES)}", SCHEMA, 60, "viewdf", {})
    table.commit(table.stage_local(_rows([0], 0)), operation="add", expected_version=0)
    statements = []

    def record(conn, cursor, statement, *args) -> None:
        statements.append(statement)

    event.listen(CATALOG.engine, "before_cursor_execute", record)
    try:
        table.commit(table.stage_local(_rows([1], 1)), operation="add", expected_version=1)
    finally:
        event.remove(CATALOG.engine, "before_cursor_execute", record)
    assert not [s for s in statements if s.lstrip().upper().startswith("UPDATE")]
    other = PartTable.open(open_catalog(WAREHOUSE), "views", table.name)
    assert other.current_version() == 2
    with sqlite3.connect(f"{WAREHOUSE}/catalog.db") as connection:
        (location,) = connection.execute(
            "SELECT metadata_location FROM iceberg_tables WHERE table_name = ?", (table.name,)
        ).fetchone()
    assert location == table.table.metadata_location
    stale = PartTable.open(CATALOG, "views", table.name)
    other.commit(other.stage_local(_rows([2], 2)), operation="add", expected_version=2)
    staged = stale.stage_local(_rows([3], 3))
    with pytest.raises(BaseMovedError):
        stale.commit(staged, operation="add", expected_version=2)
    stale.discard(staged)
    assert PartTable.open(CATALOG, "views", table.name).current_version() == 3


def test_a_commit_applies_its_updates_once_and_builds_one_evaluator_and_no_file_io(monkeypatch) -> None:
    """The transaction's view and the catalog's staging share one application of a commit's
    updates; an overwrite's two passes over the manifests share one evaluator, which judges each
    manifest of the parent once; the catalog makes
    no new file IO per commit. The metadata written equals what a fresh read of the file (by
    pyiceberg's own parser, through another catalog) gives, with the metadata log of the base."""
    import pyiceberg.catalog as pyiceberg_catalog
    import pyiceberg.table.update.snapshot as producers
    from pyiceberg.serializers import FromInputFile

    from arrayviews.storage import metadata_updates
    from arrayviews.storage import snapshots as snapshots_module

    table = PartTable.create(CATALOG, "views", f"enc_{next(NAMES)}", SCHEMA, 60, "viewdf", {})
    version = 0
    for step in range(3):
        version = table.commit(
            table.stage_local(_rows([step], step)), operation="add", expected_version=version
        )
    counts = {"applied": 0, "evaluators": 0, "io": 0}
    apply_update = metadata_updates._apply_table_update
    build = producers._OverwriteFiles._build_manifest_evaluator
    load_file_io = pyiceberg_catalog.load_file_io

    def counting(key, original):
        def wrapped(*args, **kwargs):
            counts[key] += 1
            return original(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(metadata_updates, "_apply_table_update", counting("applied", apply_update))
    judged = []
    built = snapshots_module._manifest_evaluator

    def building(producer, spec_id):
        counts["evaluators"] += 1
        evaluate = built(producer, spec_id)
        reference = build(producer, spec_id)  # pyiceberg's own evaluator of the same filter

        def judge(manifest):
            judged.append(manifest.manifest_path)
            verdict = evaluate(manifest)
            assert verdict == reference(manifest)
            return verdict

        return judge

    monkeypatch.setattr(snapshots_module, "_manifest_evaluator", building)
    monkeypatch.setattr(pyiceberg_catalog, "load_file_io", counting("io", load_file_io))
    base = table.table.metadata_location
    table.commit(table.stage_local(_rows([9], 9)), drop_below=1, operation="add", expected_version=version)
    updates = 2  # the snapshot and the main branch
    assert counts == {"applied": updates, "evaluators": 1, "io": 0}
    parent = table.table.metadata.snapshot_by_id(table.table.current_snapshot().parent_snapshot_id)
    assert sorted(judged) == sorted(m.manifest_path for m in parent.manifests(table.table.io))
    monkeypatch.undo()
    written = FromInputFile.table_metadata(table.table.io.new_input(table.table.metadata_location))
    assert written == table.table.metadata
    assert written.metadata_log[-1].metadata_file == base
    other = PartTable.open(open_catalog(WAREHOUSE), "views", table.name)
    assert other.table.metadata == written
    assert sorted(other.files_by_part()) == [1, 2, 9]


def _full(entry) -> tuple:
    data_file = entry.data_file
    return (
        list(entry._data[:4]),
        [v._data if type(v).__name__ == "Record" else v for v in data_file._data],
        data_file.spec_id,
        type(entry).__name__,
        type(data_file).__name__,
    )


def test_entries_kept_as_written_equal_pyiceberg_s_decode_of_the_file(monkeypatch) -> None:
    """Thirty commits (adds, replacements, drops; merges on the way) through two catalogs: the
    entries kept for every manifest this process wrote equal, value for value (data file fields,
    inherited sequence numbers and spec id), pyiceberg's decode of the file; a drop decodes no
    manifest (the manifest that added the file was kept as written)."""
    table = PartTable.create(CATALOG, "views", f"enc_{next(NAMES)}", SCHEMA, 60, "viewdf", {})
    other = PartTable.open(open_catalog(WAREHOUSE), "views", table.name)
    version = thirty_mixed_commits([table, other], _rows)
    decodes = []
    monkeypatch.setattr(manifest_cache, "_decode", lambda *a, **k: decodes.append(a) or [])
    handle = table.refresh()
    staged = handle.stage_local(_rows([40], 40))
    handle.commit(staged, drop_below=24, operation="add", expected_version=version)
    assert decodes == []
    monkeypatch.undo()
    io_ = table.table.io
    checked = 0
    for snapshot in table.table.metadata.snapshots:
        for manifest in snapshot.manifests(io_):
            kept = manifest.fetch_manifest_entry(io_, discard_deleted=False)
            fresh = manifest_cache._decode(manifest, io_, discard_deleted=False)
            assert [_full(e) for e in kept] == [_full(e) for e in fresh]
            checked += len(kept)
    assert checked > 100


def test_lengths_recorded_without_a_stat_equal_the_files_on_disk(monkeypatch) -> None:
    """Manifest lengths in the list records and the metadata size the catalog keeps come from the
    bytes written, not from a look at the disk (no file-info call in a commit); they equal the
    sizes a stat gives."""
    import os

    from pyiceberg.io.pyarrow import PyArrowFile

    table = PartTable.create(CATALOG, "views", f"enc_{next(NAMES)}", SCHEMA, 60, "viewdf", {})
    table.commit(table.stage_local(_rows([0], 0)), operation="add", expected_version=0)
    looks = []
    original = PyArrowFile._file_info
    monkeypatch.setattr(PyArrowFile, "_file_info", lambda self: looks.append(self.location) or original(self))
    staged = table.stage_local(_rows([1], 1))
    table.commit(staged, drop_below=1, operation="add", expected_version=1)
    assert looks == []
    monkeypatch.undo()
    for manifest in table.table.current_snapshot().manifests(table.table.io):
        assert manifest.manifest_length == os.path.getsize(manifest.manifest_path.removeprefix("file://"))
    location = table.table.metadata_location
    kept = CATALOG.__dict__["_metadata_kept"][location]
    assert kept[2] == os.path.getsize(location.removeprefix("file://"))
    # a file not written whole here is still measured on disk
    assert len(table.table.io.new_input(location)) == kept[2]


@pytest.mark.parametrize(
    "modes",
    [{}, {"k": "full"}, {"s": "truncate(3)", "k": "counts"}, {"k": "full", "s": "full"}],
)
def test_data_file_records_from_the_measured_columns_equal_pyiceberg_s(modes) -> None:
    """A data file's record made from only the columns with metrics (and the first) equals
    pyiceberg's record read from the file, for several metrics settings (sizes of columns without
    metrics left out, as Iceberg does), over several row groups."""
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import parquet_file_to_data_file

    from arrayviews.storage.snapshots import data_file_record

    table = PartTable.create(CATALOG, "views", f"enc_{next(NAMES)}", SCHEMA, 60, "viewdf", {})
    if modes:
        table.update_properties({f"write.metadata.metrics.column.{c}": m for c, m in modes.items()})
    rows = pa.table(
        {
            "k": pa.array([i % 7 if i % 5 else None for i in range(3000)], pa.int32()),
            "s": pa.array([f"value-{i % 11}" for i in range(3000)], pa.string()),
            PART: pa.array([5] * 3000, pa.int64()),
        }
    )
    path = f"{table.data_directory}/measured-{len(modes)}-{next(NAMES)}.parquet"
    import os

    os.makedirs(table.data_directory.removeprefix("file://"), exist_ok=True)
    pq.write_table(rows, path.removeprefix("file://"), row_group_size=700)
    metadata, io_ = table.table.metadata, table.table.io
    for _ in range(2):  # the positions found, then kept
        ours = data_file_record(io_, metadata, path)
        theirs = parquet_file_to_data_file(io_, metadata, path)
        schema = metadata.schema()
        measured = {schema.find_field(PART).field_id} | {schema.find_field(c).field_id for c in modes}
        for field in ("record_count", "value_counts", "null_value_counts", "nan_value_counts"):
            assert getattr(ours, field) == getattr(theirs, field), field
        for field in ("lower_bounds", "upper_bounds", "split_offsets", "file_size_in_bytes"):
            assert getattr(ours, field) == getattr(theirs, field), field
        assert ours.partition == theirs.partition
        assert {f: s for f, s in theirs.column_sizes.items() if f in measured} == ours.column_sizes
        assert len(ours.split_offsets) == 5
    if not modes:  # only _part has metrics: the record was made from two of the three columns
        from arrayviews.storage import snapshots

        footer = pq.read_metadata(path.removeprefix("file://"))
        plan, mapping = snapshots._statistics_plan(
            metadata.table_uuid, metadata.current_schema_id, metadata.schema(), metadata.properties
        )
        seen = snapshots._measured_columns(footer, footer.schema.to_arrow_schema(), plan, mapping)
        assert seen.num_columns == 2


@settings(max_examples=300, deadline=None)
@given(st.sets(st.integers(-60, 60) | st.integers(-(2**62), 2**62), max_size=14))
def test_a_commit_s_part_text_equals_format_parts(parts) -> None:
    from arrayviews.storage.part_table import _format_sorted_parts, format_parts, parse_parts

    ordered = sorted(parts)
    assert _format_sorted_parts(ordered) == format_parts(ordered)
    assert (
        parse_parts(_format_sorted_parts(ordered)) == ordered
        if max(map(abs, ordered), default=0) < 1000
        else True
    )


_numbers = st.one_of(
    st.integers(-5, 10**12).map(str), st.sampled_from(["", "x", "1.5", " 7", "-0"]), st.none()
)
_total_keys = [
    "total-data-files",
    "total-delete-files",
    "total-records",
    "total-files-size",
    "total-position-deletes",
    "total-equality-deletes",
]
_change_keys = [
    "added-data-files",
    "deleted-data-files",
    "added-delete-files",
    "removed-delete-files",
    "added-records",
    "deleted-records",
    "added-files-size",
    "removed-files-size",
    "added-position-deletes",
    "removed-position-deletes",
    "added-equality-deletes",
    "removed-equality-deletes",
]


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(["append", "overwrite", "delete", "replace"]),
    st.one_of(st.none(), st.just({}), st.dictionaries(st.sampled_from(_total_keys), _numbers)),
    st.dictionaries(st.sampled_from(_change_keys + ["arrayviews.version"]), _numbers),
    st.booleans(),
)
def test_summary_totals_equal_pyiceberg_s(operation, previous, changes, previous_as_summary) -> None:
    """A snapshot summary's totals against pyiceberg's ``update_snapshot_summaries``: same
    properties, or the same error, for any parent totals (missing, negative, not numbers) and
    changes."""
    from pyiceberg.table.snapshots import Operation, Summary

    from arrayviews.storage import snapshots

    def clean(values):
        return {k: v for k, v in (values or {}).items() if v is not None}

    def run(update):
        summary = Summary(Operation(operation), **clean(changes))
        parent = previous
        if previous is not None:
            parent = Summary(Operation.APPEND, **clean(previous)) if previous_as_summary else clean(previous)
        try:
            return ("ok", dict(update(summary, parent).additional_properties), summary.operation)
        except ValueError as error:
            return ("error", str(error))

    assert run(snapshots.update_snapshot_summaries) == run(snapshots.PYICEBERG_UPDATE_SUMMARIES)
    import pyiceberg.table.update.snapshot as producers

    assert producers.update_snapshot_summaries is snapshots.update_snapshot_summaries
