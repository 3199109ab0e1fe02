"""Chunk-number bounds of the data files live at a version, from the Iceberg column statistics of
its listing, kept per snapshot: the files a box of chunks may read, found without planning a scan."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from arrayviews.storage import layout

if TYPE_CHECKING:
    from arrayviews.storage.array_table import ArrayTable
    from arrayviews.storage.versioned import StoredFile

#: Bounds kept (per table and snapshot; a snapshot's files never change).
BOUNDS_KEPT = 64

_INT64 = np.iinfo(np.int64)


@dataclass(frozen=True)
class FileBounds:
    """The live files of one snapshot and, per file and dimension, the least and greatest chunk
    number it holds (int64 min and max where the statistics do not say)."""

    files: tuple[StoredFile, ...]
    low: np.ndarray
    high: np.ndarray
    #: (table uuid, snapshot id) the files are live at; None for a version with no snapshot
    snapshot: tuple[str, int] | None = None

    def overlapping(self, ranges: Sequence[tuple[int, int]]) -> np.ndarray:
        """Positions of the files that may hold a chunk within per-dimension (first, last) ranges
        (as Iceberg's metrics evaluation of ``first <= c <= last`` decides it)."""
        first = np.asarray([r[0] for r in ranges], dtype=np.int64)
        last = np.asarray([r[1] for r in ranges], dtype=np.int64)
        return np.flatnonzero(np.all((self.high >= first) & (self.low <= last), axis=1))

    def covering(self, files: np.ndarray, chunks: np.ndarray) -> np.ndarray:
        """Which of the files at positions ``files`` may hold each chunk of ``chunks`` (n, d): an
        (n, len(files)) boolean matrix (a file's bounds contain every chunk it holds)."""
        low, high = self.low[files][None, :, :], self.high[files][None, :, :]
        inside = chunks[:, None, :]
        return np.all((low <= inside) & (inside <= high), axis=2)


_lock = threading.Lock()
_kept: OrderedDict[tuple[str, int], FileBounds] = OrderedDict()


def live_bounds(table: ArrayTable, version: int) -> FileBounds | None:
    """The bounds of the files live at ``version`` of ``table``; None when the table's Iceberg schema
    lacks a chunk column (it is then not laid out as array fragments)."""
    snapshot_id = table.snapshot_of(version)
    ndim = table.schema.ndim
    if snapshot_id is None:
        return FileBounds((), np.zeros((0, ndim), np.int64), np.zeros((0, ndim), np.int64))
    key = (str(table.table.metadata.table_uuid), snapshot_id)
    with _lock:
        kept = _kept.get(key)
        if kept is not None:
            _kept.move_to_end(key)
            return kept
    iceberg_schema = table.table.schema()
    names = {f.name: f.field_id for f in iceberg_schema.fields}
    columns = layout.chunk_columns(table.schema)
    if any(c not in names for c in columns):
        return None
    field_ids = [names[c] for c in columns]
    files = table.live_files(version)
    low = np.full((len(files), ndim), _INT64.min, dtype=np.int64)
    high = np.full((len(files), ndim), _INT64.max, dtype=np.int64)
    for row, data_file in enumerate(files):
        lower, upper = data_file.lower_bounds or {}, data_file.upper_bounds or {}
        for k, field_id in enumerate(field_ids):
            # Iceberg's single-value form of a long: 8 bytes, little-endian
            if len(lower.get(field_id, b"")) == 8:
                low[row, k] = int.from_bytes(lower[field_id], "little", signed=True)
            if len(upper.get(field_id, b"")) == 8:
                high[row, k] = int.from_bytes(upper[field_id], "little", signed=True)
    bounds = FileBounds(tuple(files), low, high, key)
    with _lock:
        _kept[key] = bounds
        while len(_kept) > BOUNDS_KEPT:
            _kept.popitem(last=False)
    return bounds
