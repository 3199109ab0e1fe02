"""File I/O on any file system pyarrow reaches by URL (local paths, file://, hdfs://, s3://)."""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

#: Aim for row groups of about this many bytes, so chunk pruning can skip the rest of a file: a read
#: of a few chunks decodes a few row groups of a large file, not a quarter of it.
ROW_GROUP_BYTES = 4 * 1024 * 1024


def to_uri(location: str) -> str:
    """A URI for a location given as a URI or as a local path."""
    parsed = urlparse(location)
    if parsed.scheme and len(parsed.scheme) > 1:  # not a Windows drive letter
        return location
    return "file://" + os.path.abspath(location)


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """The pyarrow file system and the path inside it for ``uri``.

    Local paths and ``file://`` URIs are taken literally (as :func:`to_uri` writes them and as Spark
    reads them), so quotes, spaces and ``;`` in folder names need no escaping.
    """
    location = to_uri(uri)
    if location.startswith("file://"):
        return pafs.LocalFileSystem(), location[len("file://") :]
    return pafs.FileSystem.from_uri(location)


def new_data_file_uri(directory_uri: str, prefix: str = "") -> str:
    """A fresh, unique Parquet file URI in a folder (``prefix`` starts the file name)."""
    return directory_uri.rstrip("/") + f"/{prefix}{uuid.uuid4().hex}.parquet"


def conform(table: pa.Table | pa.RecordBatch, arrow_schema: pa.Schema) -> pa.Table:
    """``table`` with exactly the columns, order and types of ``arrow_schema``."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if table.schema.equals(arrow_schema):
        return table
    return table.select(arrow_schema.names).cast(arrow_schema)


def create_folder(fs: pafs.FileSystem, folder: str) -> None:
    """Create ``folder`` and its parents (nothing when it exists)."""
    fs.create_dir(folder, recursive=True)


def in_folder(fs: pafs.FileSystem, path: str, write) -> None:
    """Run ``write``, which creates the file ``path``, creating its folder first. On the local file
    system the folder is created only when the write finds it missing: a table's files go to a
    few folders, and asking for an existing folder again is a system call per file written (on
    the machines of round 28, one as slow as creating the file itself)."""
    folder = path.rsplit("/", 1)[0]
    if not isinstance(fs, pafs.LocalFileSystem):
        create_folder(fs, folder)
        write()
        return
    try:
        write()
    except FileNotFoundError:
        if os.path.isdir(folder):
            raise
        create_folder(fs, folder)
        write()


#: Tables up to this many bytes are encoded in memory and written to their file in one call:
#: Parquet's writer otherwise makes two system calls per column chunk (a write and a seek), and
#: on a busy machine each call on a new file costs more than encoding a small part.
BUFFERED_BYTES = 8 * 1024 * 1024


def write_bytes(fs: pafs.FileSystem, path: str, data: pa.Buffer | bytes) -> None:
    """Create the file ``path`` holding ``data`` (replacing any file of that name)."""
    with fs.open_output_stream(path, compression=None) as out:
        out.write(data)


def write_parquet(
    table: pa.Table, uri: str, statistics: list[str] | None = None, text_dictionaries: bool = True
) -> int:
    """Write ``table`` as one Parquet file at ``uri`` (creating folders); returns its size in bytes.
    ``statistics``: the only columns given min/max statistics and dictionaries beside the text
    columns (a small part file, whose other columns no reader prunes by: 15-30% less time); without
    ``text_dictionaries``, the text columns get none (values that seldom repeat in the file, where
    a dictionary costs its hashing and adds bytes)."""
    fs, path = filesystem(uri)
    # Table.nbytes walks every buffer's slice (13 us for a view's part); the buffers' total bounds
    # it, and while that total is below both limits below, either gives the same file
    nbytes = table.get_total_buffer_size()
    if nbytes > min(ROW_GROUP_BYTES, BUFFERED_BYTES):
        nbytes = table.nbytes
    average = max(1, nbytes // max(1, table.num_rows))
    rows_per_group = max(1, min(1 << 20, ROW_GROUP_BYTES // average))
    # Large byte-string columns (chunk payloads) get neither dictionaries nor min/max statistics:
    # both cost time on megabyte values and would bloat the footer. Small columns keep both, so
    # readers can skip row groups by chunk number.
    small = [
        f.name for f in table.schema if not (pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type))
    ]
    dictionary = small
    if statistics is not None:
        texts = [
            f.name for f in table.schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
        ]
        texts = texts if text_dictionaries else []
        small, dictionary = list(statistics), [*texts, *(c for c in statistics if c not in texts)]
    footer: list[pq.FileMetaData] = []
    options = dict(
        row_group_size=rows_per_group,
        compression="snappy",
        use_dictionary=dictionary,
        write_statistics=small,
        metadata_collector=footer,
    )
    if nbytes > BUFFERED_BYTES:
        in_folder(fs, path, lambda: pq.write_table(table, path, filesystem=fs, **options))
    else:
        encoded = pa.BufferOutputStream()
        pq.write_table(table, encoded, **options)
        in_folder(fs, path, lambda: write_bytes(fs, path, encoded.getvalue()))
    size = fs.get_file_info(path).size
    if size is None:  # gone as soon as written: another process dropped the table's folder
        raise FileNotFoundError(f"data file {uri} is gone")
    with _footers_lock:
        _footers[uri] = WrittenFooter(footer[0], size, table.schema)
        while len(_footers) > FOOTERS_KEPT:
            _footers.popitem(last=False)
    return size


@dataclass(frozen=True)
class WrittenFooter:
    """What writing a Parquet file told this process: its footer (row groups and column
    statistics, as written to the file), its size and the Arrow schema it was written with."""

    footer: pq.FileMetaData
    size: int
    arrow_schema: pa.Schema


#: Files this process wrote lately, by URI: a commit adding one of them takes its statistics from
#: here instead of reading the footer back (a file is written once under a fresh name, never changed).
FOOTERS_KEPT = 1024
_footers: OrderedDict[str, WrittenFooter] = OrderedDict()
_footers_lock = threading.Lock()


def written_footer(uri: str) -> WrittenFooter | None:
    """The footer of ``uri`` if this process wrote that file lately (and forgets it), else None."""
    with _footers_lock:
        return _footers.pop(uri, None)


def delete_files(uris: list[str]) -> None:
    """Delete files, ignoring those already gone."""
    for uri in uris:
        fs, path = filesystem(uri)
        with contextlib.suppress(FileNotFoundError):
            fs.delete_file(path)


def read_parquet_files(
    uris: list[str],
    columns: list[str] | None = None,
    row_filter: ds.Expression | None = None,
    schema: pa.Schema | None = None,
) -> pa.Table:
    """Read (a projection of) several Parquet files into one table on the calling process."""
    if not uris:
        if schema is None:
            raise ValueError("reading no files needs a schema")
        table = schema.empty_table()
        return table.select(columns) if columns else table
    fs, _ = filesystem(uris[0])
    paths = [filesystem(u)[1] for u in uris]
    dataset = ds.dataset(paths, filesystem=fs, format="parquet", schema=schema)
    return dataset.to_table(columns=columns, filter=row_filter)
