"""Manifests written as one block with data-file bytes kept (storage/avro_blocks.py): the kept bytes
of a data file equal pyiceberg's own fresh encoding of its current values (also after its values
change in place under the same path), and thirty commits with merges write manifests of one block
each whose decode by pyiceberg's reader gives exactly the entries written."""

from __future__ import annotations

import io
import itertools
import tempfile

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.avro.encoder import BinaryEncoder
from pyiceberg.avro.file import AvroFile
from pyiceberg.avro.writer import OptionWriter
from pyiceberg.manifest import DATA_FILE_TYPE, DataFile
from pyiceberg.typedef import Record
from pyspark.sql import types as T
from tests.commit_history import thirty_mixed_commits

from arrayviews.model.names import PART
from arrayviews.storage import avro_blocks, avro_schemas, manifest_cache
from arrayviews.storage.catalog import open_catalog
from arrayviews.storage.part_table import PartTable

WAREHOUSE = tempfile.mkdtemp(prefix="avro-blocks-")
CATALOG = open_catalog(WAREHOUSE)
SCHEMA = T.StructType([T.StructField("k", T.IntegerType()), T.StructField("s", T.StringType())])
NAMES = itertools.count()


def _rows(parts: list[int], tag: int) -> pa.Table:
    return pa.table(
        {
            "k": pa.array([tag] * len(parts), pa.int32()),
            "s": pa.array([f"t{tag}"] * len(parts), pa.string()),
            PART: pa.array(parts, pa.int64()),
        }
    )


def _thirty_commits(table: PartTable) -> None:
    thirty_mixed_commits([table], _rows)


@pytest.fixture(scope="module")
def data_file_writer():
    """A data file's record writer and a data file, as one commit of a part table encodes them."""
    seen = []
    original = avro_blocks.data_file_bytes

    def recording(writer, data_file):
        seen.append((writer, data_file))
        return original(writer, data_file)

    avro_blocks.data_file_bytes = recording
    try:
        table = PartTable.create(CATALOG, "views", f"blocks_{next(NAMES)}", SCHEMA, 60, "viewdf", {})
        table.commit(table.stage_local(_rows([1, 1], 1)), operation="add", expected_version=0)
    finally:
        avro_blocks.data_file_bytes = original
    assert seen
    return seen[-1]


def _pyiceberg_encoding(writer, value) -> bytes:
    """pyiceberg's own encoding of ``value`` (its encoder primitives and option writer)."""
    saved = {name: getattr(BinaryEncoder, name) for name in avro_schemas.PYICEBERG_ENCODER}
    saved_option = OptionWriter.write
    try:
        for name, method in avro_schemas.PYICEBERG_ENCODER.items():
            setattr(BinaryEncoder, name, method)
        OptionWriter.write = avro_schemas.PYICEBERG_OPTION_WRITE
        stream = io.BytesIO()
        writer.write(BinaryEncoder(stream), value)
        return stream.getvalue()
    finally:
        for name, method in saved.items():
            setattr(BinaryEncoder, name, method)
        OptionWriter.write = saved_option


FIELDS = [f.name for f in DATA_FILE_TYPE[2].fields]


def _set(data_file: DataFile, **values) -> None:
    for name, value in values.items():
        data_file[FIELDS.index(name)] = value


def _copy(data_file: DataFile) -> DataFile:
    values = [
        dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v for v in data_file._data
    ]
    copied = DataFile(*values)
    copied.spec_id = data_file.spec_id
    return copied


counts = st.integers(0, 2**40)
statistics = st.dictionaries(st.integers(1, 9), st.integers(0, 2**31), max_size=4)
bounds = st.dictionaries(st.integers(1, 9), st.binary(max_size=9), max_size=4)


@settings(max_examples=60, deadline=None)
@given(counts, counts, statistics, statistics, bounds, bounds)
def test_kept_bytes_equal_pyiceberg_s_encoding_of_the_values_now(
    data_file_writer, records, size, sizes, nulls, lower, upper
) -> None:
    """The same path encoded again after each change of its values (a new object, or a map of the
    same object changed in place) gives pyiceberg's encoding of the values as they are now."""
    writer, template = data_file_writer
    data_file = _copy(template)
    first = avro_blocks.data_file_bytes(writer, data_file)
    assert first == _pyiceberg_encoding(writer, data_file)
    assert avro_blocks.data_file_bytes(writer, data_file) == first  # kept: the same values
    changed = _copy(template)
    _set(changed, record_count=records, file_size_in_bytes=size, column_sizes=sizes)
    _set(changed, null_value_counts=nulls, lower_bounds=lower, upper_bounds=upper)
    assert avro_blocks.data_file_bytes(writer, changed) == _pyiceberg_encoding(writer, changed)
    changed.column_sizes[99] = 7  # in place: same object, same path, other bytes
    assert avro_blocks.data_file_bytes(writer, changed) == _pyiceberg_encoding(writer, changed)


def test_a_map_s_order_is_part_of_what_is_compared(data_file_writer) -> None:
    writer, template = data_file_writer
    ordered = _copy(template)
    _set(ordered, value_counts={1: 10, 2: 20})
    swapped = _copy(template)
    _set(swapped, value_counts={2: 20, 1: 10})  # equal as dicts, encoded in another order
    assert avro_blocks.data_file_bytes(writer, ordered) == _pyiceberg_encoding(writer, ordered)
    assert avro_blocks.data_file_bytes(writer, swapped) == _pyiceberg_encoding(writer, swapped)
    assert _pyiceberg_encoding(writer, ordered) != _pyiceberg_encoding(writer, swapped)


def test_values_that_are_not_plain_are_never_kept(data_file_writer) -> None:
    writer, template = data_file_writer
    nested = _copy(template)
    _set(nested, partition=Record(Record(1)))
    assert avro_blocks._comparable(nested._data) is None
    assert avro_blocks._comparable(template._data) is not None


def _blocks(path: str) -> int:
    """How many blocks an Avro file holds (its sync marker follows the header and each block)."""
    with open(path.removeprefix("file://"), "rb") as stream:
        data = stream.read()
    with AvroFile(_input(path), None) as reader:
        sync = reader.header.sync
    return data.count(sync) - 1


def _input(path: str):
    from pyiceberg.io.pyarrow import PyArrowFileIO

    return PyArrowFileIO().new_input(path)


def test_manifests_hold_one_block_and_decode_to_the_entries_written() -> None:
    """Thirty commits (adds, replacements, drops; merges rewrite older entries): every manifest and
    manifest list is one block, and pyiceberg's reader decodes each manifest to the entries this
    process kept as written (data file values, inherited sequence numbers, statuses)."""
    table = PartTable.create(CATALOG, "views", f"blocks_{next(NAMES)}", SCHEMA, 60, "viewdf", {})
    avro_blocks.forget()
    _thirty_commits(table)
    io_ = table.table.io
    checked, merged = 0, 0
    for snapshot in table.table.metadata.snapshots:
        assert _blocks(snapshot.manifest_list) == 1
        for manifest in snapshot.manifests(io_):
            kept = manifest.fetch_manifest_entry(io_, discard_deleted=False)
            fresh = manifest_cache._decode(manifest, io_, discard_deleted=False)
            assert [_full(e) for e in kept] == [_full(e) for e in fresh]
            assert _blocks(manifest.manifest_path) == 1
            checked += len(fresh)
            merged += len(fresh) > 1
    assert checked > 100 and merged > 5


def _full(entry) -> tuple:
    data_file = entry.data_file
    return (
        [v.value if hasattr(v, "value") else v for v in entry._data[:4]],
        [v._data if type(v).__name__ == "Record" else v for v in data_file._data],
        data_file.spec_id,
    )
