"""The metadata columns of data files (chunk numbers, cell counts, value ranges), read once per process.

A data file never changes once written and its path is unique, so the metadata rows of a file, once
read, serve every later plan that lists chunks from it: a refresh that lists a view's chunks opens
only the files written since the last listing instead of every file of the view (the listing of a
1,600-chunk view read 49 files on every refresh). Which files a listing uses is decided by the
snapshot's file list, passed in by the caller on every call; the cache only saves the reading.

The cache is its own, bounded by bytes, apart from the process's chunk cache: its small entries
would otherwise evict decoded chunks and the chunk cache's derived maps.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as ds

from arrayviews.storage.chunk_cache import ChunkCache
from arrayviews.storage.files import filesystem

#: Bytes of metadata rows kept (about 100 bytes a fragment: some 300,000 fragments).
METADATA_BUDGET = 32 * 1024 * 1024
_CACHE = ChunkCache(METADATA_BUDGET)


def metadata_cache() -> ChunkCache:
    """The process's cache of metadata rows (for tests and ``clear``)."""
    return _CACHE


def read_metadata(
    uris: list[str], columns: list[str], schema: pa.Schema, row_filter: ds.Expression | None = None
) -> pa.Table:
    """The ``columns`` (metadata columns of ``schema``, the files' fragment schema) of every row of the
    files ``uris`` that ``row_filter`` keeps, in the order of ``uris``; files read before by this
    process are not opened again."""
    wanted = tuple(columns)
    found: dict[str, pa.Table] = {}
    missing: list[str] = []
    for uri in uris:
        cached = _CACHE.get(("metadata", uri, wanted))
        if cached is None:
            missing.append(uri)
        else:
            found[uri] = cached
    if missing:
        found.update(_read_whole(missing, list(wanted), schema))
    projected = schema.empty_table().select(list(wanted)).schema
    tables = [found[uri] for uri in uris]
    rows = pa.concat_tables(tables) if tables else projected.empty_table()
    return rows if row_filter is None else rows.filter(row_filter)


def _read_whole(uris: list[str], columns: list[str], schema: pa.Schema) -> dict[str, pa.Table]:
    """Every row of ``columns`` of each file (one scan of them all), each file's rows put in the cache."""
    fs, _ = filesystem(uris[0])
    by_path = {filesystem(uri)[1]: uri for uri in uris}
    dataset = ds.dataset(list(by_path), filesystem=fs, format="parquet", schema=schema)
    batches: dict[str, list[pa.RecordBatch]] = {uri: [] for uri in uris}
    for tagged in dataset.scanner(columns=columns, use_threads=False).scan_batches():
        batches[by_path[tagged.fragment.path]].append(tagged.record_batch)
    projected = schema.empty_table().select(columns).schema
    read: dict[str, pa.Table] = {}
    for uri, pieces in batches.items():
        table = pa.Table.from_batches(pieces, schema=projected).combine_chunks()
        read[uri] = table
        _CACHE.put(("metadata", uri, tuple(columns)), table, max(1, table.nbytes))
    return read
