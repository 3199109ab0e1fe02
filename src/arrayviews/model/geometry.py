"""Chunk geometry: which chunk holds a cell, chunk bounds, chunks overlapping a box, neighbour chunks.

Every function here works on whole numpy arrays of coordinates; nothing loops over cells.
A *chunk coordinate* is the tuple of per-dimension chunk numbers ``k`` with
``k = floor((x - chunk_origin) / chunk_length)``. Chunk boxes are clipped to the dimension range, and
cells inside a chunk are numbered in C order over the clipped box (the *local offset*).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from arrayviews.model.schema import ArraySchema, Dimension


@dataclass(frozen=True)
class DimensionGrid:
    """Regular chunking of one dimension: range ``[low, high]``, chunks of ``length`` from ``origin``."""

    low: int
    high: int
    length: int
    origin: int

    @classmethod
    def of(cls, dimension: Dimension) -> DimensionGrid:
        return cls(dimension.low, dimension.high, dimension.chunk_length, dimension.chunk_origin)

    @property
    def first_chunk(self) -> int:
        return (self.low - self.origin) // self.length

    @property
    def last_chunk(self) -> int:
        return (self.high - self.origin) // self.length

    @property
    def chunk_count(self) -> int:
        return self.last_chunk - self.first_chunk + 1

    def chunk_of(self, coordinates: np.ndarray) -> np.ndarray:
        """Chunk number of each coordinate (int64 array)."""
        return np.floor_divide(np.asarray(coordinates, dtype=np.int64) - self.origin, self.length)

    def chunk_span(self, chunk: int) -> tuple[int, int]:
        """Inclusive cell range of chunk number ``chunk``, clipped to the dimension range."""
        start = self.origin + chunk * self.length
        return max(start, self.low), min(start + self.length - 1, self.high)

    def chunk_starts(self, chunks: np.ndarray) -> np.ndarray:
        """First cell (after clipping) of each chunk number in ``chunks``."""
        return np.maximum(self.origin + np.asarray(chunks, dtype=np.int64) * self.length, self.low)

    def chunk_sizes(self, chunks: np.ndarray) -> np.ndarray:
        """Number of cells (after clipping) of each chunk number in ``chunks``."""
        starts = self.origin + np.asarray(chunks, dtype=np.int64) * self.length
        return np.minimum(starts + self.length - 1, self.high) - np.maximum(starts, self.low) + 1

    def chunks_overlapping(self, low: int, high: int) -> tuple[int, int] | None:
        """First and last chunk number overlapping ``[low, high]`` (clipped to the range), or None."""
        low, high = max(low, self.low), min(high, self.high)
        if low > high:
            return None
        return (low - self.origin) // self.length, (high - self.origin) // self.length

    def chunks_within_reach(self, chunk: int, before: int, after: int) -> tuple[int, int] | None:
        """Chunks holding a cell within ``before`` cells below or ``after`` cells above chunk ``chunk``.

        These are the chunks a window or shape of that reach, centred on any cell of ``chunk``, can touch.
        """
        lo, hi = self.chunk_span(chunk)
        return self.chunks_overlapping(lo - before, hi + after)


@dataclass(frozen=True)
class ChunkGrid:
    """Regular chunking of a whole array: one :class:`DimensionGrid` per dimension."""

    dimensions: tuple[DimensionGrid, ...]

    @classmethod
    def of(cls, schema: ArraySchema) -> ChunkGrid:
        return cls(tuple(DimensionGrid.of(d) for d in schema.dimensions))

    @property
    def ndim(self) -> int:
        return len(self.dimensions)

    @property
    def chunk_count(self) -> int:
        return math.prod(g.chunk_count for g in self.dimensions)

    # -- cells to chunks -------------------------------------------------------------------------
    def chunk_of(self, cells: np.ndarray) -> np.ndarray:
        """Chunk coordinates (n, d) of cells given as an (n, d) integer array."""
        cells = np.asarray(cells, dtype=np.int64).reshape(-1, self.ndim)
        return np.stack([g.chunk_of(cells[:, k]) for k, g in enumerate(self.dimensions)], axis=1)

    def chunk_bounds(self, chunk: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Inclusive (low, high) corners of a chunk, clipped to the array range."""
        spans = [g.chunk_span(int(k)) for g, k in zip(self.dimensions, chunk, strict=True)]
        return tuple(s[0] for s in spans), tuple(s[1] for s in spans)

    def chunk_shape(self, chunk: Sequence[int]) -> tuple[int, ...]:
        """Number of cells per dimension of a chunk after clipping."""
        low, high = self.chunk_bounds(chunk)
        return tuple(h - lo + 1 for lo, h in zip(low, high, strict=True))

    def local_offsets(self, cells: np.ndarray, chunk: Sequence[int]) -> np.ndarray:
        """C-order offsets of cells inside the clipped box of ``chunk`` (cells must lie in it)."""
        low, _ = self.chunk_bounds(chunk)
        cells = np.asarray(cells, dtype=np.int64).reshape(-1, self.ndim)
        local = cells - np.asarray(low, dtype=np.int64)
        return np.ravel_multi_index(tuple(local.T), self.chunk_shape(chunk)).astype(np.int64, copy=False)

    def cells_at(self, offsets: np.ndarray, chunk: Sequence[int]) -> np.ndarray:
        """Cell coordinates (n, d) of local offsets inside ``chunk``; inverse of :meth:`local_offsets`."""
        low, _ = self.chunk_bounds(chunk)
        local = np.unravel_index(np.asarray(offsets, dtype=np.int64), self.chunk_shape(chunk))
        return np.stack(local, axis=1).astype(np.int64, copy=False) + np.asarray(low, dtype=np.int64)

    # -- boxes and neighbours --------------------------------------------------------------------
    def chunk_ranges_overlapping(
        self, low: Sequence[int], high: Sequence[int]
    ) -> tuple[tuple[int, int], ...] | None:
        """Per dimension the (first, last) chunk overlapping the box ``[low, high]``, or None if empty."""
        ranges = []
        for grid, lo, hi in zip(self.dimensions, low, high, strict=True):
            span = grid.chunks_overlapping(int(lo), int(hi))
            if span is None:
                return None
            ranges.append(span)
        return tuple(ranges)

    def chunks_overlapping(self, low: Sequence[int], high: Sequence[int]) -> Iterator[tuple[int, ...]]:
        """Every chunk coordinate overlapping the box ``[low, high]`` (may be many: prefer ranges)."""
        ranges = self.chunk_ranges_overlapping(low, high)
        if ranges is None:
            return iter(())
        return itertools.product(*(range(a, b + 1) for a, b in ranges))

    def neighbour_ranges(
        self,
        chunk: Sequence[int],
        before: Sequence[int],
        after: Sequence[int],
        within: tuple[Sequence[int], Sequence[int]] | None = None,
    ) -> tuple[tuple[int, int], ...] | None:
        """Per dimension the chunk range within ``before``/``after`` cells of ``chunk`` (includes itself),
        cut to the chunk box ``within`` (first, last chunk per dimension) when given; None if empty."""
        ranges = []
        for k, (grid, c, b, a) in enumerate(zip(self.dimensions, chunk, before, after, strict=True)):
            span = grid.chunks_within_reach(int(c), int(b), int(a))
            assert span is not None  # the chunk itself is always within reach
            if within is not None:
                span = (max(span[0], int(within[0][k])), min(span[1], int(within[1][k])))
                if span[0] > span[1]:
                    return None
            ranges.append(span)
        return tuple(ranges)

    def neighbour_chunks(
        self,
        chunk: Sequence[int],
        before: Sequence[int],
        after: Sequence[int],
        within: tuple[Sequence[int], Sequence[int]] | None = None,
    ) -> Iterator[tuple[int, ...]]:
        """Every chunk (including ``chunk``) holding a cell within the given per-dimension reach, only
        those in the chunk box ``within`` when given."""
        ranges = self.neighbour_ranges(chunk, before, after, within)
        if ranges is None:
            return iter(())
        return itertools.product(*(range(a, b + 1) for a, b in ranges))

    def contains(self, cells: np.ndarray) -> np.ndarray:
        """Boolean mask of the cells (n, d) that lie inside the array range."""
        cells = np.asarray(cells, dtype=np.int64).reshape(-1, self.ndim)
        inside = np.ones(len(cells), dtype=bool)
        for k, grid in enumerate(self.dimensions):
            inside &= (cells[:, k] >= grid.low) & (cells[:, k] <= grid.high)
        return inside
