"""Rows of the part files this process wrote lately, kept in memory so that later maintenance steps
read them without decoding Parquet again.

A stream view's step reads what the steps before it wrote: the helper view's previous part, the
final view's input part staged a moment ago, the stream part this process just appended, and, for
a view reading its own parts back (a window view's part j-Wp), the part it wrote Wp steps ago. Part
files are written once under fresh, unique names and never changed, so the rows written under a
name are the rows that file holds for as long as it exists; a name a reader is given comes from a
committed snapshot, so a file that was discarded instead of committed is never asked for. The rows
are kept as written (already in the table's Arrow schema); a read that asks for another schema (the
table was altered since) reads the files.

Two pools, each bounded in bytes:

- *held*: the newest parts of a table whose parts are read back up to ``depth`` parts later
  (:func:`hold`, declared by the maintenance step that reads them). A part is held until a part
  ``depth`` newer is remembered (or the held bytes pass their budget, oldest first), and then
  moves to the recent pool. Without it a window view's own state, written once and read again
  ``Wp`` steps later, is the oldest entry of the recent pool and the first to leave it whenever
  the stream's parts (read every step by other readers) fill the pool.
- *recent*: everything else, least recently used dropped first.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence

import pyarrow as pa

#: Bytes of rows kept in the recent pool (all files together), and the largest file's rows kept.
KEPT_BYTES = int(os.environ.get("ARRAYVIEWS_RECENT_PART_BYTES", 64 * 1024 * 1024))
LARGEST_KEPT = KEPT_BYTES // 8
#: Bytes of rows held for tables read back (all tables together), and the largest file held.
HELD_BYTES = int(os.environ.get("ARRAYVIEWS_HELD_PART_BYTES", 128 * 1024 * 1024))
LARGEST_HELD = HELD_BYTES // 8
#: Tables whose read-back depth is remembered (the least recently declared forgotten first).
DEPTHS_KEPT = 1024

_lock = threading.Lock()
#: uri -> (rows, the bytes of their buffers), least recently used first
_kept: OrderedDict[str, tuple[pa.Table, int]] = OrderedDict()
_kept_bytes = 0
#: uri -> (owner, part, rows, their bytes), oldest held first
_held: OrderedDict[str, tuple[str, int, pa.Table, int]] = OrderedDict()
_held_bytes = 0
#: owner -> {uri: part} of its held files
_held_by_owner: dict[str, dict[str, int]] = {}
#: owner (a table's data directory) -> how many parts back its parts are read
_depths: OrderedDict[str, int] = OrderedDict()
#: Reads answered from memory and reads that went to the files (for tests and profiling).
hits = 0
misses = 0


def hold(owner: str, depth: int) -> None:
    """Declare that parts of the table ``owner`` are read again up to ``depth`` parts after they
    were written (the deepest declaration counts): its next ``depth + 1`` newest parts are held."""
    if depth <= 0:
        return
    with _lock:
        _depths[owner] = max(depth, _depths.get(owner, 0))
        _depths.move_to_end(owner)
        while len(_depths) > DEPTHS_KEPT:
            _depths.popitem(last=False)


def _keep_recent(uri: str, rows: pa.Table, size: int) -> None:
    """(Lock held.) ``rows`` (``size`` bytes) as the most recently used entry of the recent pool."""
    global _kept_bytes
    if size > LARGEST_KEPT:
        return
    _kept[uri] = (rows, size)
    _kept_bytes += size
    while _kept_bytes > KEPT_BYTES and _kept:
        _, (_, dropped) = _kept.popitem(last=False)
        _kept_bytes -= dropped


def _release(uri: str) -> tuple[pa.Table, int]:
    """(Lock held.) Take ``uri`` out of the held pool; its rows and their bytes."""
    global _held_bytes
    owner, _, rows, size = _held.pop(uri)
    _held_bytes -= size
    files = _held_by_owner[owner]
    del files[uri]
    if not files:
        del _held_by_owner[owner]
    return rows, size


def _discard(uri: str) -> None:
    """(Lock held.) Forget ``uri`` in both pools."""
    global _kept_bytes
    if uri in _held:
        _release(uri)
    previous = _kept.pop(uri, None)
    if previous is not None:
        _kept_bytes -= previous[1]


def remember(uri: str, rows: pa.Table, owner: str | None = None, part: int | None = None) -> None:
    """Keep the rows just written to the part file ``uri`` (part ``part`` of the table ``owner``)."""
    global _held_bytes
    size = rows.get_total_buffer_size()  # Table.nbytes walks every buffer: 13 us for 4,500 rows
    with _lock:
        _discard(uri)
        depth = _depths.get(owner) if owner is not None and part is not None else None
        if depth is None or size > LARGEST_HELD:
            _keep_recent(uri, rows, size)
            return
        _held[uri] = (owner, part, rows, size)
        _held_bytes += size
        files = _held_by_owner.setdefault(owner, {})
        files[uri] = part
        for older in [u for u, p in files.items() if p < part - depth]:  # read by no later step
            _keep_recent(older, *_release(older))
        while _held_bytes > HELD_BYTES and len(_held) > 1:  # the oldest held first
            oldest = next(iter(_held))
            _keep_recent(oldest, *_release(oldest))


def recall(uris: Sequence[str], schema: pa.Schema) -> pa.Table | None:
    """The rows of the files ``uris`` (in that order) when this process wrote every one of them
    lately with ``schema``; None when any must be read from its file."""
    global hits, misses
    with _lock:
        found = []
        for uri in uris:
            held = _held.get(uri)
            if held is not None:
                found.append(held[2])
                continue
            kept = _kept.get(uri)
            if kept is not None:
                _kept.move_to_end(uri)
            found.append(None if kept is None else kept[0])
    if not uris or any(rows is None or not rows.schema.equals(schema) for rows in found):
        misses += 1
        return None
    hits += 1
    return found[0] if len(found) == 1 else pa.concat_tables(found)


def forget() -> None:
    """Drop every kept and held file's rows (tests, and a process that wants its memory back);
    declared depths stay."""
    global _kept_bytes, _held_bytes
    with _lock:
        _kept.clear()
        _kept_bytes = 0
        _held.clear()
        _held_by_owner.clear()
        _held_bytes = 0


__all__ = ["HELD_BYTES", "KEPT_BYTES", "forget", "hold", "recall", "remember"]
