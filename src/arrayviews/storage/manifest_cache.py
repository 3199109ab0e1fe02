"""Manifest lists and manifest entries decoded once per process: Iceberg never rewrites either file.

pyiceberg decodes a manifest's Avro entries every time they are asked for. One overwrite commit
asks for the same manifest twice (the entries it deletes, then the manifests it keeps) and manifest
merging asks again for manifests the last commits already read, so a stream view's maintenance step
decoded each manifest three or four times. A manifest is written once under a unique name and never
rewritten in place, so its entries are kept here, per process, in a bounded least-recently-used
table, and handed out as new lists (the entries themselves are only read by pyiceberg and arrayviews:
writers build new entries from them).

The entries pyiceberg returns inherit the snapshot id and sequence numbers of the manifest-list
record they were read through (Iceberg's sequence-number inheritance). A manifest read before its
commit assigned those (a manifest merged in the commit that wrote it) inherits other values than
the same manifest read afterwards, so the key is the manifest's path *and* those values.

A snapshot's manifest list is read the same way: pyiceberg decodes it again each time a snapshot's
manifests are asked for (five times in one stream view's step); it is kept here by its path. A
manifest list this process writes is kept as written (the records the writer encoded, with the
sequence numbers it assigned), so the step after a commit does not read back the list it just wrote.

Each commit writes a new manifest list naming every manifest of the snapshot, nearly all of them
the same records as in the list before (a manifest's record never changes once its commit assigned
its sequence numbers). pyiceberg encodes every record again; here the Avro bytes of each record are
kept (by the writer that encoded them and the record's values) and the list's block is written by
pyiceberg's block writer from those bytes, so a commit encodes only its own new manifests.

A manifest this process writes is kept the same way, as written: the entries its writer encoded,
copied and given what a read inherits from the manifest-list record once the list that first
names it is written (sequence numbers, snapshot id, partition spec id), so dropping a file ten
commits later does not decode the manifest that added it. Only format version 2 manifests whose
values all come back from Avro as the same Python values are kept so (``tests`` compare them with
pyiceberg's decode of the file).
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict

import pyiceberg.table.snapshots
from pyiceberg.avro.encoder import BinaryEncoder
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DATA_FILE_TYPE,
    DEFAULT_READ_VERSION,
    MANIFEST_ENTRY_SCHEMAS_STRUCT,
    MANIFEST_LIST_FILE_SCHEMAS,
    DataFile,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestListWriter,
    ManifestWriter,
    _inherit_from_manifest,
)
from pyiceberg.typedef import Record

from arrayviews.storage.avro_blocks import EncodedWriter

#: Manifests whose entries are kept (a part table's manifest holds a few hundred small entries).
MANIFESTS_KEPT = 512
#: Manifest lists kept (one per snapshot read lately).
LISTS_KEPT = 1024
#: Encoded manifest-list records kept (one per manifest of the snapshots written lately).
RECORDS_KEPT = 4096

_lock = threading.Lock()
_kept: OrderedDict[tuple, tuple[ManifestEntry, ...]] = OrderedDict()
_lists: OrderedDict[str, tuple[ManifestFile, ...]] = OrderedDict()
_records: OrderedDict[tuple, tuple[object, bytes]] = OrderedDict()
_decode = ManifestFile.fetch_manifest_entry
_decode_list = pyiceberg.table.snapshots._manifests
_close_list_writer = ManifestListWriter.__exit__
_add_entry = ManifestWriter.add_entry
_close_manifest_writer = ManifestWriter.__exit__
#: Manifests written by this process whose list is not written yet: path -> entries as written.
_written: OrderedDict[str, tuple[ManifestEntry, ...]] = OrderedDict()
#: Where a manifest-list record of the read version holds its partition summaries.
_RECORD_FIELDS = MANIFEST_LIST_FILE_SCHEMAS[DEFAULT_READ_VERSION].fields
_RECORD_SIZE = len(_RECORD_FIELDS)
_PARTITIONS = [f.name for f in _RECORD_FIELDS].index("partitions")
#: Python types Avro gives back as they were written (values of partitions, counts and bounds).
_PLAIN = frozenset((int, str, bytes, bool, float, type(None)))


def _key(manifest: ManifestFile) -> tuple:
    return (
        manifest.manifest_path,
        manifest.added_snapshot_id,
        manifest.sequence_number,
        manifest.min_sequence_number,
    )


def fetch_manifest_entry(self: ManifestFile, io: FileIO, discard_deleted: bool = True) -> list[ManifestEntry]:
    """The entries of manifest ``self`` (only live ones with ``discard_deleted``), decoded once."""
    key = _key(self)
    with _lock:
        entries = _kept.get(key)
        if entries is not None:
            _kept.move_to_end(key)
    if entries is None:
        entries = tuple(_decode(self, io, discard_deleted=False))
        with _lock:
            _kept[key] = entries
            while len(_kept) > MANIFESTS_KEPT:
                _kept.popitem(last=False)
    if discard_deleted:
        return [e for e in entries if e.status != ManifestEntryStatus.DELETED]
    return list(entries)


def manifest_list(io: FileIO, location: str) -> tuple[ManifestFile, ...]:
    """The manifests listed by the manifest list at ``location``, decoded once."""
    with _lock:
        manifests = _lists.get(location)
        if manifests is not None:
            _lists.move_to_end(location)
            return manifests
    manifests = tuple(_decode_list(io, location))
    _keep_list(location, manifests)
    return manifests


def _keep_list(location: str, manifests: tuple[ManifestFile, ...]) -> None:
    with _lock:
        _lists[location] = manifests
        while len(_lists) > LISTS_KEPT:
            _lists.popitem(last=False)


def _record_key(record: ManifestFile) -> tuple | None:
    """The values of a manifest-list record as a hashable tuple (its partition summaries as
    tuples of their values); None if one cannot be hashed."""
    data = record._data
    summaries = data[_PARTITIONS] if len(data) == _RECORD_SIZE else None
    if type(summaries) is list:  # the read version's record (all of them in practice)
        key = (*data[:_PARTITIONS], tuple([tuple(s._data) for s in summaries]), *data[_PARTITIONS + 1 :])
    else:
        key = tuple(
            tuple(tuple(summary._data) for summary in value) if isinstance(value, list) else value
            for value in data
        )
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _encoded(writer, record: ManifestFile) -> bytes:
    """The Avro bytes ``writer`` (pyiceberg's record writer of a manifest list) encodes for
    ``record``: kept from an earlier list when it held the same record, encoded otherwise."""
    values = _record_key(record)
    key = None if values is None else (id(writer), values)
    if key is not None:
        with _lock:
            found = _records.get(key)
            if found is not None and found[0] is writer:
                _records.move_to_end(key)
                return found[1]
    stream = io.BytesIO()
    writer.write(BinaryEncoder(stream), record)
    encoded = stream.getvalue()
    if key is not None:
        with _lock:
            _records[key] = (writer, encoded)  # the writer is held: its id is not reused meanwhile
            while len(_records) > RECORDS_KEPT:
                _records.popitem(last=False)
    return encoded


def _add_manifests(self: ManifestListWriter, manifest_files: list[ManifestFile]) -> ManifestListWriter:
    """pyiceberg's ``ManifestListWriter.add_manifests`` (one block of the prepared records),
    with each record's bytes kept across lists, remembering the records it writes."""
    prepared = [self.prepare_manifest(manifest_file) for manifest_file in manifest_files]
    avro = self._writer
    writer = avro.writer
    encoded = [_encoded(writer, record) for record in prepared]
    avro.writer = EncodedWriter  # the block adds count, length, codec, marker
    try:
        avro.write_block(encoded)
    finally:
        avro.writer = writer
    self.__dict__.setdefault("_arrayviews_written", []).extend(prepared)
    return self


def _close_and_keep(self: ManifestListWriter, exc_type, exc_value, traceback) -> None:
    """pyiceberg's ``ManifestListWriter.__exit__``; a list written whole is kept as written, and
    the entries of the manifests this process wrote that it names for the first time too."""
    _close_list_writer(self, exc_type, exc_value, traceback)
    if exc_type is None:
        list_written(self._output_file.location, tuple(self.__dict__.get("_arrayviews_written", ())))


def list_written(location: str, listed: tuple[ManifestFile, ...]) -> None:
    """Keep the manifest list just written whole at ``location`` (its records as written), and the
    entries of the manifests this process wrote that it names for the first time."""
    _keep_list(location, listed)
    for manifest in listed:
        with _lock:
            entries = _written.pop(manifest.manifest_path, None)
        if entries is not None:
            _keep_entries(manifest, entries)


def encoded_record(writer, record: ManifestFile) -> bytes:
    """What ``writer`` (a manifest list's record writer) encodes for ``record``, kept across lists."""
    return _encoded(writer, record)


def _keep_entries(manifest: ManifestFile, written: tuple[ManifestEntry, ...]) -> None:
    """Keep the entries a read of ``manifest`` gives: copies of those written, with what they
    inherit from its record (pyiceberg's own inheritance)."""
    entries = []
    for entry in written:
        data_file = DataFile(*entry.data_file._data)
        values = list(entry._data)
        values[4] = data_file
        entries.append(_inherit_from_manifest(ManifestEntry(*values), manifest))
    key = _key(manifest)
    with _lock:
        if key not in _kept:
            _kept[key] = tuple(entries)
            while len(_kept) > MANIFESTS_KEPT:
                _kept.popitem(last=False)


_ENTRY_SIZE = len(MANIFEST_ENTRY_SCHEMAS_STRUCT[DEFAULT_READ_VERSION].fields)
_DATA_FILE_SIZE = len(DATA_FILE_TYPE[DEFAULT_READ_VERSION].fields)


def _reads_back_as_written(entry: ManifestEntry) -> bool:
    """Whether decoding ``entry`` from a manifest gives back the values it holds: the read
    version's fields, and plain values (a partition of plain values, maps of plain values)."""
    data_file = entry.data_file
    if len(entry._data) != _ENTRY_SIZE or type(data_file) is not DataFile:
        return False
    if len(data_file._data) != _DATA_FILE_SIZE:
        return False
    for value in data_file._data:
        kind = type(value)
        if kind is dict:
            for key, item in value.items():
                if type(key) is not int or type(item) not in _PLAIN:
                    return False
        elif kind is list:
            for item in value:
                if type(item) is not int:
                    return False
        elif kind is Record:
            for item in value._data:
                if type(item) not in _PLAIN:
                    return False
        elif isinstance(value, (dict, list, Record)):
            return False  # a subclass: read back as the base type
    return True


def _add_entry_and_remember(self: ManifestWriter, entry: ManifestEntry) -> ManifestWriter:
    """pyiceberg's ``ManifestWriter.add_entry``, remembering the entry written (format version 2
    manifests whose entries read back as written; any other is read from its file)."""
    _add_entry(self, entry)
    remembered = self.__dict__.get("_arrayviews_entries")
    if remembered is None and "_arrayviews_entries" not in self.__dict__:
        remembered = [] if self.version == DEFAULT_READ_VERSION else None
        self.__dict__["_arrayviews_entries"] = remembered
    if remembered is not None:
        if _reads_back_as_written(entry):
            remembered.append(entry)
        else:
            self.__dict__["_arrayviews_entries"] = None
    return self


def _close_and_remember(self: ManifestWriter, exc_type, exc_value, traceback) -> None:
    """pyiceberg's ``ManifestWriter.__exit__``; the entries of a manifest written whole are
    remembered until a manifest list names it."""
    _close_manifest_writer(self, exc_type, exc_value, traceback)
    entries = self.__dict__.get("_arrayviews_entries")
    if exc_type is None and entries:
        _remember_written(self._output_file.location, tuple(entries))


def manifest_written(location: str, entries: tuple[ManifestEntry, ...], version: int) -> None:
    """Remember the entries of the manifest just written whole at ``location`` until a manifest
    list names it (format version 2 manifests whose entries all read back as written)."""
    if version == DEFAULT_READ_VERSION and entries and all(_reads_back_as_written(e) for e in entries):
        _remember_written(location, entries)


def _remember_written(location: str, entries: tuple[ManifestEntry, ...]) -> None:
    with _lock:
        _written[location] = entries
        while len(_written) > MANIFESTS_KEPT:
            _written.popitem(last=False)


def forget() -> None:
    """Drop everything kept (tests that count decodes)."""
    with _lock:
        _kept.clear()
        _lists.clear()
        _records.clear()
        _written.clear()


def install() -> None:
    """Make pyiceberg's manifest reads in this process (``Snapshot.manifests`` and
    ``ManifestFile.fetch_manifest_entry``) use what is kept here."""
    ManifestFile.fetch_manifest_entry = fetch_manifest_entry
    pyiceberg.table.snapshots._manifests = manifest_list
    ManifestListWriter.add_manifests = _add_manifests
    ManifestListWriter.__exit__ = _close_and_keep
    ManifestWriter.add_entry = _add_entry_and_remember
    ManifestWriter.__exit__ = _close_and_remember


__all__ = [
    "LISTS_KEPT",
    "encoded_record",
    "list_written",
    "manifest_written",
    "MANIFESTS_KEPT",
    "RECORDS_KEPT",
    "fetch_manifest_entry",
    "forget",
    "install",
    "manifest_list",
]
