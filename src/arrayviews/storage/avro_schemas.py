"""Avro schemas of Iceberg's metadata files parsed and built once per process, not once per file.

Every manifest and manifest list pyiceberg reads carries its Avro schema as JSON in its header;
pyiceberg parses that JSON into an Iceberg schema and builds the tree of field readers from it
for each file, which took longer than decoding the file's few entries (about 4 ms of each read, a
fifth of a stream view's maintenance step). The schema texts are few (one per manifest kind and
partition spec), and the schema and reader tree depend only on that text and on what the caller
asks to read, so both are kept here per process. Readers hold no state of their own: they read
from the decoder each call is given.

Writing is the same the other way: each manifest written built its entry schema for the table's
partition spec, the tree of field writers and the schema's Avro JSON again. These are kept by
the identity of the spec and schema objects they are built from (table metadata, itself kept by
the catalog), and each kept value holds those objects, so an identity is never reused while
its entry is kept. Writers hold no state either: they write to the encoder they are given.

The encoder's primitives are pyiceberg's with fewer Python calls per value: a long (zig-zag,
variable length) goes to the stream in one write instead of one per byte, a small one from a
table of its encodings, and a string or byte string with its length in one write. The bytes are
the same (``tests/test_commit_encoding.py`` compares them with pyiceberg's own encoder); a commit
encodes a few thousand values, and the calls were a tenth of its cost.

An Avro file is encoded in memory and written whole when it is closed (pyiceberg wrote each value
to the file's stream as it went: a few dozen calls into pyarrow for the header of a manifest). A
file on the local file system is written with one ``os.write`` (pyarrow's output stream costs
twice the creation of the file itself); any other goes through its file IO as before.
"""

from __future__ import annotations

import io
import json
import os
import threading
from collections import OrderedDict

import pyiceberg.avro.file as avro_file
from pyarrow.fs import LocalFileSystem
from pydantic_core import to_json
from pyiceberg.avro.encoder import BinaryEncoder
from pyiceberg.avro.writer import OptionWriter
from pyiceberg.io.pyarrow import PyArrowFile
from pyiceberg.manifest import ManifestWriter
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

#: Parsed schemas and reader trees kept (each distinct schema text and read request is one).
KEPT = 1024

_lock = threading.Lock()
_schemas: OrderedDict[str, object] = OrderedDict()
_readers: OrderedDict[tuple, tuple] = OrderedDict()
_writers: OrderedDict[tuple, tuple] = OrderedDict()
_resolve_reader = avro_file.resolve_reader
_resolve_writer = avro_file.resolve_writer
_construct_writer = avro_file.construct_writer
_with_partition = ManifestWriter._with_partition
_to_avro = AvroSchemaConversion.iceberg_to_avro
_partition_type = PartitionSpec.partition_type
#: pyiceberg's own header properties of a manifest (a reference for tests).
PYICEBERG_MANIFEST_META = ManifestWriter._meta
_SCHEMA_KEY = avro_file._SCHEMA_KEY


def _remember(kept: OrderedDict, key, value) -> None:
    with _lock:
        kept[key] = value
        while len(kept) > KEPT:
            kept.popitem(last=False)


def get_schema(self: avro_file.AvroFileHeader):
    """The Iceberg schema of an Avro file's header, parsed once per schema text."""
    text = self.meta.get(_SCHEMA_KEY)
    if text is None:
        raise ValueError("No schema found in Avro file headers")
    with _lock:
        schema = _schemas.get(text)
    if schema is None:
        schema = AvroSchemaConversion().avro_to_iceberg(json.loads(text))
        _remember(_schemas, text, schema)
    return schema


def resolve_reader(
    file_schema, read_schema, read_types=avro_file.EMPTY_DICT, read_enums=avro_file.EMPTY_DICT
):
    """pyiceberg's reader tree for one file schema and read request, built once. The key holds
    the schemas' identities; the kept value holds the schemas themselves, so an identity is
    never reused while its entry is kept."""
    key = (id(file_schema), id(read_schema), tuple(read_types.items()), tuple(read_enums.items()))
    with _lock:
        found = _readers.get(key)
    if found is None:
        found = (_resolve_reader(file_schema, read_schema, read_types, read_enums), file_schema, read_schema)
        _remember(_readers, key, found)
    return found[0]


def read_header(self: avro_file.AvroFile):
    """An Avro file's header, read with one reader tree of the fixed header schema built once
    (pyiceberg builds it again for every file it opens)."""
    reader = _kept(
        ("header",), lambda: avro_file.construct_reader(avro_file.META_SCHEMA, {-1: avro_file.AvroFileHeader})
    )
    return reader.read(self.decoder)


def write_header(self: avro_file.AvroOutputFile) -> None:
    """pyiceberg's header of an Avro file written, with the JSON of its schema made once per
    schema (pyiceberg serializes it again for every file)."""
    from pyiceberg.table import TableProperties

    codec = self.metadata.get(avro_file.AVRO_CODEC_KEY, TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT)
    codec = avro_file.CODEC_MAPPING_ICEBERG_TO_AVRO.get(codec) or codec
    schema, name = self.file_schema, self.schema_name
    text = _kept(
        ("json", id(schema), name),
        lambda: json.dumps(AvroSchemaConversion().iceberg_to_avro(schema, schema_name=name)),
        schema,
    )
    meta = {**self.metadata, _SCHEMA_KEY: text, avro_file.AVRO_CODEC_KEY: codec}
    header = avro_file.AvroFileHeader(avro_file.MAGIC, meta, self.sync_bytes)
    construct_writer(avro_file.META_SCHEMA).write(self.encoder, header)


def _kept(key: tuple, build, *held):
    with _lock:
        found = _writers.get(key)
    if found is None:
        found = (build(), *held)
        _remember(_writers, key, found)
    return found[0]


def resolve_writer(record_schema, file_schema):
    return _kept(
        ("resolve", id(record_schema), id(file_schema)),
        lambda: _resolve_writer(record_schema=record_schema, file_schema=file_schema),
        record_schema,
        file_schema,
    )


def construct_writer(file_schema):
    return _kept(("construct", id(file_schema)), lambda: _construct_writer(file_schema), file_schema)


def with_partition(self: ManifestWriter, format_version):
    """The manifest entry schema of a writer's table schema and partition spec, built once."""
    schema, spec = self._schema, self._spec
    return _kept(
        ("entry", id(schema), id(spec), format_version),
        lambda: _with_partition(self, format_version),
        schema,
        spec,
    )


def partition_type(self: PartitionSpec, schema):
    """The struct of a partition spec's values over a table schema, built once per spec and
    schema (pyiceberg builds and validates it again four times in a commit)."""
    return _kept(("partition", id(self), id(schema)), lambda: _partition_type(self, schema), self, schema)


def manifest_meta(self: ManifestWriter) -> dict[str, str]:
    """pyiceberg's header properties of a manifest, the JSON of its table schema and partition
    spec made once per schema and spec (pyiceberg serializes both again for every manifest)."""
    schema, spec = self._schema, self._spec
    schema_text, spec_text = _kept(
        ("meta", id(schema), id(spec)),
        lambda: (schema.model_dump_json(), to_json(spec.fields).decode("utf-8")),
        schema,
        spec,
    )
    return {
        "schema": schema_text,
        "partition-spec": spec_text,
        "partition-spec-id": str(spec.spec_id),
        "format-version": str(self.version),
        avro_file.AVRO_CODEC_KEY: self._compression,
    }


def iceberg_to_avro(self: AvroSchemaConversion, schema, schema_name=None):
    """The Avro form of an Iceberg schema, built once (only serialized to JSON by its caller)."""
    return _kept(("avro", id(schema), schema_name), lambda: _to_avro(self, schema, schema_name), schema)


#: The zig-zag encoding of each long whose encoding is one byte (-64 to 63), by its zig-zag value.
_ONE_BYTE = tuple(bytes([n]) for n in range(0x80))
#: pyiceberg's own encoder primitives (a reference for tests).
PYICEBERG_ENCODER = {
    name: getattr(BinaryEncoder, name) for name in ("write_int", "write_bytes", "write_utf8")
}
PYICEBERG_OPTION_WRITE = OptionWriter.write


def write_int(self: BinaryEncoder, integer: int) -> None:
    """pyiceberg's long encoding (zig-zag, seven bits a byte, low bits first) in one write."""
    datum = (integer << 1) ^ (integer >> 63)
    if datum < 0x80:  # never negative: both operands of ^ have the sign of ``integer``
        self._output_stream.write(_ONE_BYTE[datum])
        return
    out = bytearray()
    while datum > 0x7F:
        out.append((datum & 0x7F) | 0x80)
        datum >>= 7
    out.append(datum)
    self._output_stream.write(bytes(out))


def write_bytes(self: BinaryEncoder, b: bytes) -> None:
    """A byte string with its length before it (one write when the length takes one byte)."""
    size = len(b)
    if size < 0x40:
        self._output_stream.write(_ONE_BYTE[size << 1] + b)
    else:
        write_int(self, size)
        self._output_stream.write(b)


def write_utf8(self: BinaryEncoder, s: str) -> None:
    write_bytes(self, s.encode("utf-8"))


def write_option(self: OptionWriter, encoder: BinaryEncoder, val) -> None:
    """An optional value: the union branch (1: the value, 0: null), then the value."""
    if val is not None:
        encoder.write(b"\x02")  # branch 1, zig-zag encoded
        self.option.write(encoder, val)
    else:
        encoder.write(b"\x00")


#: Set on a local output file written whole by this process: its size (no need to ask the disk).
_WRITTEN_SIZE = "_arrayviews_written_size"
_file_length = PyArrowFile.__len__


def file_length(self: PyArrowFile) -> int:
    """pyiceberg's ``PyArrowFile.__len__`` (the file's size from the file system), or the size
    written when this object wrote the file whole (a manifest's length in its list record)."""
    size = self.__dict__.get(_WRITTEN_SIZE)
    return _file_length(self) if size is None else size


def write_whole(output_file, data: bytes, overwrite: bool) -> None:
    """Write ``data`` as the whole content of pyiceberg's output file ``output_file``: on the local
    file system in one system call (a new file fails with FileExistsError unless ``overwrite``, as
    pyiceberg's ``create`` does), elsewhere through the file's own output stream."""
    if isinstance(getattr(output_file, "_filesystem", None), LocalFileSystem):
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
        try:
            descriptor = os.open(output_file._path, flags, 0o666)
        except FileNotFoundError:
            descriptor = None  # no such folder: pyarrow's stream below creates it
        if descriptor is not None:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(descriptor, view) :]
            finally:
                os.close(descriptor)
            output_file.__dict__[_WRITTEN_SIZE] = len(data)
            return
    with output_file.create(overwrite=overwrite) as stream:
        stream.write(data)


def open_in_memory(self: avro_file.AvroOutputFile):
    """pyiceberg's ``AvroOutputFile.__enter__``, encoding into memory (header first)."""
    self.output_stream = io.BytesIO()
    self.encoder = BinaryEncoder(self.output_stream)
    self._write_header()
    return self


def close_in_memory(self: avro_file.AvroOutputFile, exctype, excinst, exctb) -> None:
    """pyiceberg's ``AvroOutputFile.__exit__``: the file gets what was encoded (also after an
    error, as pyiceberg's stream flushed it when closed)."""
    write_whole(self.output_file, self.output_stream.getvalue(), overwrite=True)


def install() -> None:
    """Make pyiceberg's Avro reads and writes in this process use the kept schemas and trees, and
    its encoder the primitives above."""
    BinaryEncoder.write_int = write_int
    BinaryEncoder.write_bytes = write_bytes
    BinaryEncoder.write_utf8 = write_utf8
    OptionWriter.write = write_option
    avro_file.AvroFileHeader.get_schema = get_schema
    avro_file.AvroFile._read_header = read_header
    avro_file.AvroOutputFile._write_header = write_header
    avro_file.AvroOutputFile.__enter__ = open_in_memory
    avro_file.AvroOutputFile.__exit__ = close_in_memory
    PyArrowFile.__len__ = file_length
    avro_file.resolve_reader = resolve_reader
    avro_file.resolve_writer = resolve_writer
    avro_file.construct_writer = construct_writer
    ManifestWriter._with_partition = with_partition
    ManifestWriter._meta = property(manifest_meta)
    PartitionSpec.partition_type = partition_type
    AvroSchemaConversion.iceberg_to_avro = iceberg_to_avro


__all__ = [
    "KEPT",
    "construct_writer",
    "file_length",
    "get_schema",
    "install",
    "iceberg_to_avro",
    "manifest_meta",
    "partition_type",
    "read_header",
    "resolve_reader",
    "resolve_writer",
    "write_bytes",
    "write_header",
    "write_int",
    "write_option",
    "write_utf8",
    "write_whole",
]
