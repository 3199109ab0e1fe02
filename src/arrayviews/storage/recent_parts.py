"""Rows of the part files this process wrote lately, kept in memory so that the next maintenance
step reads them without decoding Parquet again.

A stream view's step reads what the step before it wrote: the helper view's previous part, the
final view's input part staged a moment ago, the stream part this process just appended. Part
files are written once under fresh, unique names and never changed, so the rows written under a
name are the rows that file holds for as long as it exists; a name a reader is given comes from a
committed snapshot, so a file that was discarded instead of committed is never asked for. The
rows are kept as written (already in the table's Arrow schema), bounded in bytes, oldest dropped
first; a read that asks for another schema (the table was altered since) reads the files.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence

import pyarrow as pa

#: Bytes of rows kept (all files together), and the largest file's rows kept at all.
KEPT_BYTES = int(os.environ.get("ARRAYVIEWS_RECENT_PART_BYTES", 64 * 1024 * 1024))
LARGEST_KEPT = KEPT_BYTES // 8

_lock = threading.Lock()
_kept: OrderedDict[str, pa.Table] = OrderedDict()
_kept_bytes = 0
#: Reads answered from memory and reads that went to the files (for tests and profiling).
hits = 0
misses = 0


def remember(uri: str, rows: pa.Table) -> None:
    """Keep the rows just written to the part file ``uri``."""
    global _kept_bytes
    size = rows.nbytes
    if size > LARGEST_KEPT:
        return
    with _lock:
        previous = _kept.pop(uri, None)
        if previous is not None:
            _kept_bytes -= previous.nbytes
        _kept[uri] = rows
        _kept_bytes += size
        while _kept_bytes > KEPT_BYTES and _kept:
            _, dropped = _kept.popitem(last=False)
            _kept_bytes -= dropped.nbytes


def recall(uris: Sequence[str], schema: pa.Schema) -> pa.Table | None:
    """The rows of the files ``uris`` (in that order) when this process wrote every one of them
    lately with ``schema``; None when any must be read from its file."""
    global hits, misses
    with _lock:
        found = [_kept.get(uri) for uri in uris]
        for uri in uris:
            if uri in _kept:
                _kept.move_to_end(uri)
    if not uris or any(rows is None or not rows.schema.equals(schema) for rows in found):
        misses += 1
        return None
    hits += 1
    return found[0] if len(found) == 1 else pa.concat_tables(found)


def forget() -> None:
    """Drop every kept file's rows (tests, and a process that wants its memory back)."""
    global _kept_bytes
    with _lock:
        _kept.clear()
        _kept_bytes = 0


__all__ = ["KEPT_BYTES", "forget", "recall", "remember"]
