"""An Avro metadata file's records written as one block when it closes, each manifest entry's data
file encoded once per process.

pyiceberg writes every manifest entry as a block of its own: one encoder, one deflate call and one
sync marker per entry. A manifest merge (storage/snapshots.py) rewrites the entries of older
manifests, and each one was encoded again field by field, although a data file's record never
changes once written (a file is written once under a unique name). Here records are encoded as
they are added, as pyiceberg does, and the file gets them as one block when it is closed (Avro
readers read any number of blocks the same way). A data file's bytes are kept per record writer
and file path with the values they were encoded from, and used again only while the values are
still exactly those (compared as ordered tuples: map order is part of the encoding); a data file
whose values are not plain Python values is always encoded afresh.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from enum import Enum

import pyiceberg.avro.file as avro_file
from pyiceberg.avro.encoder import BinaryEncoder
from pyiceberg.avro.writer import StructWriter
from pyiceberg.manifest import DataFile, ManifestEntry
from pyiceberg.typedef import Record
from pyiceberg.utils.lazydict import LazyDict

from arrayviews.storage import avro_schemas

#: Data files whose encoding is kept (a few hundred per table, rewritten by merges).
DATA_FILES_KEPT = 8192

_PENDING = "_arrayviews_pending"
_lock = threading.Lock()
_data_files: OrderedDict[tuple, tuple] = OrderedDict()
_write_block = avro_file.AvroOutputFile.write_block
_tell = avro_file.AvroOutputFile.tell
_PLAIN = frozenset((int, str, bytes, bool, float, type(None)))


class EncodedWriter:
    """A record writer for records that are already their bytes (storage/manifest_cache.py writes
    a manifest list's kept records through it): written as they are, and passed on as they are by
    this module's blocks (``writes_encoded``)."""

    writes_encoded = True

    @staticmethod
    def write(encoder: BinaryEncoder, encoded: bytes) -> None:
        encoder.write(encoded)


def _comparable(values: list) -> tuple | None:
    """``values`` (a data file's fields) as a tuple that compares equal exactly when they encode
    the same; None when one is not made of plain values or enum members (never kept)."""
    out = []
    for value in values:
        kind = type(value)
        if kind in _PLAIN or isinstance(value, Enum):  # enum members are unique and immutable
            out.append(value)
        elif kind is dict or kind is LazyDict:  # a map read from a manifest is a LazyDict
            items = tuple(value.items())
            if any(type(k) not in _PLAIN or type(v) not in _PLAIN for k, v in items):
                return None
            out.append((dict, items))
        elif kind is list:
            if any(type(item) not in _PLAIN for item in value):
                return None
            out.append((list, tuple(value)))
        elif kind is Record:
            if any(type(item) not in _PLAIN for item in value._data):
                return None
            out.append((Record, tuple(value._data)))
        else:
            return None
    return tuple(out)


def _encoded(writer, value) -> bytes:
    stream = io.BytesIO()
    writer.write(BinaryEncoder(stream), value)
    return stream.getvalue()


def data_file_bytes(writer, data_file: DataFile) -> bytes:
    """What ``writer`` (a data file's record writer) encodes for ``data_file``: kept from an earlier
    encoding of the same values, encoded otherwise."""
    values = _comparable(data_file._data)
    if values is None:
        return _encoded(writer, data_file)
    key = (id(writer), data_file.file_path)
    with _lock:
        found = _data_files.get(key)
        if found is not None and found[0] is writer and found[1] == values:
            _data_files.move_to_end(key)
            return found[2]
    encoded = _encoded(writer, data_file)
    with _lock:
        _data_files[key] = (writer, values, encoded)  # the writer is held: its id is not reused meanwhile
        while len(_data_files) > DATA_FILES_KEPT:
            _data_files.popitem(last=False)
    return encoded


def encode_record(writer, record) -> bytes:
    """The Avro bytes of one record; a manifest entry's data file from :func:`data_file_bytes`."""
    if getattr(writer, "writes_encoded", False):
        return record  # manifest lists hand over records already encoded (storage/manifest_cache.py)
    if type(record) is not ManifestEntry or type(writer) is not StructWriter:
        return _encoded(writer, record)
    stream = io.BytesIO()
    encoder = BinaryEncoder(stream)
    for position, field_writer in writer.field_writers:
        value = record[position] if position is not None else None
        if type(value) is DataFile and type(field_writer) is StructWriter:
            encoder.write(data_file_bytes(field_writer, value))
        else:
            field_writer.write(encoder, value)
    return stream.getvalue()


def write_block(self: avro_file.AvroOutputFile, objects: list) -> None:
    """pyiceberg's ``AvroOutputFile.write_block``, the records encoded now and framed as one block
    with the file's other records when it is closed."""
    writer = self.writer
    pending = self.__dict__.setdefault(_PENDING, [])
    pending.extend(encode_record(writer, record) for record in objects)


def tell(self: avro_file.AvroOutputFile) -> int:
    """Bytes written so far, records not yet framed included (before compression)."""
    return _tell(self) + sum(len(encoded) for encoded in self.__dict__.get(_PENDING, ()))


def flush(self: avro_file.AvroOutputFile) -> None:
    """Write the records added so far as one block (count, length, compression, sync marker)."""
    pending = self.__dict__.pop(_PENDING, None)
    if not pending:
        return
    writer = self.writer
    self.writer = EncodedWriter
    try:
        _write_block(self, pending)
    finally:
        self.writer = writer


def close(self: avro_file.AvroOutputFile, exctype, excinst, exctb) -> None:
    """The file's pending records as one block, then the whole file written (storage/avro_schemas.py)."""
    if exctype is None:
        flush(self)
    avro_schemas.close_in_memory(self, exctype, excinst, exctb)


def forget() -> None:
    """Drop every kept encoding (tests)."""
    with _lock:
        _data_files.clear()


def install() -> None:
    """Make pyiceberg's Avro files in this process collect their records into one block (after
    avro_schemas.install, whose in-memory files this closes)."""
    avro_file.AvroOutputFile.write_block = write_block
    avro_file.AvroOutputFile.tell = tell
    avro_file.AvroOutputFile.__exit__ = close


__all__ = ["DATA_FILES_KEPT", "data_file_bytes", "encode_record", "flush", "forget", "install"]
