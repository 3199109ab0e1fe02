"""The subarray-based join (Alg. 1) through the execution interface, on either engine: tasks decode
the outer fragments and route every outer row to the inner chunks its candidate box (Prop. 4.2 / 4.3
and the inner expansion) touches; the routed rows are co-grouped with those chunks' fragments, paired
(Prop. 4.1) and validated there; the duplicates replication produces (a pair found in several
inner chunks, with the same probability in each) are removed on the driver.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa

from arrayviews.execution.engine import Engine
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.model.uncertain import UncertainSchema
from arrayviews.operators.uncertain_join import (
    RESULT_SCHEMA,
    JoinStatistics,
    Side,
    SideRows,
    SideSpec,
    _validate,
    candidate_boxes,
    inner_chunk_ranges,
    inner_walks_from_metadata,
    pairs_within_boxes,
    per_tuple,
    position_names,
    side_rows,
)
from arrayviews.storage import layout
from arrayviews.storage import uncertain_layout as ul


def _routed_schema(schema: UncertainSchema, inner_storage: ArraySchema, npairs: int) -> pa.Schema:
    fields = [pa.field(layout.chunk_column(d), pa.int64()) for d in inner_storage.dimension_names]
    fields += [pa.field("a_id", pa.int64())]
    for prefix in ("a_cell", "a_low", "a_high"):
        fields += [pa.field(f"{prefix}{k}", pa.int64()) for k in range(schema.ndim)]
    for prefix in ("a_first", "a_last", "a_mean", "a_sigma"):
        fields += [pa.field(f"{prefix}{k}", pa.float64()) for k in range(schema.ndim)]
    fields += [pa.field(f"a_corr{q}", pa.float64()) for q in range(npairs)]
    return pa.schema(fields)


def _route_outer(
    fragments: pa.Table,
    outer: SideSpec,
    inner: SideSpec,
    delta: float,
    walks,
    pairs: np.ndarray,
    routed: pa.Schema,
    occupied: np.ndarray,
) -> pa.Table | None:
    """Task: decode outer fragments, compute each row's candidate box (Prop. 4.2/4.3 and the
    inner expansion) and emit the row once per inner chunk holding tuples (``occupied``, sorted
    row-major) the box overlaps."""
    rows = _home_rows(fragments, outer, pairs)
    if rows is None:
        return None
    low, high = candidate_boxes(rows, outer, inner, delta, walks)
    usable = np.flatnonzero(np.all(low <= high, axis=1))
    rows, low, high = rows.take(usable), low[usable], high[usable]
    grid = ChunkGrid.of(inner.storage)
    owner, chunk = _routes(grid.chunk_of(low), grid.chunk_of(high), occupied)
    columns = {}
    for k, d in enumerate(inner.storage.dimension_names):
        columns[layout.chunk_column(d)] = chunk[:, k]
    columns["a_id"] = rows.ids[owner]
    for k in range(grid.ndim):
        columns[f"a_cell{k}"] = rows.cells[owner, k]
        columns[f"a_low{k}"] = low[owner, k]
        columns[f"a_high{k}"] = high[owner, k]
        columns[f"a_first{k}"] = rows.first[owner, k]
        columns[f"a_last{k}"] = rows.last[owner, k]
        columns[f"a_mean{k}"] = rows.means[owner, k]
        columns[f"a_sigma{k}"] = rows.sigmas[owner, k]
    for q in range(len(pairs)):
        columns[f"a_corr{q}"] = rows.corrs[owner, q]
    return pa.table({f.name: pa.array(columns[f.name], f.type) for f in routed}, schema=routed)


def _routes(first: np.ndarray, last: np.ndarray, occupied: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, inner chunk) routes: every occupied chunk inside each row's chunk box [first, last].
    A box of few chunks is enumerated and kept where occupied; a box of more chunks than are occupied
    (a wide tuple over fine chunks: billions of empty ones) is matched against the occupied list."""
    d = first.shape[1]
    spans = last - first + 1
    volume = np.prod(spans.astype(np.float64), axis=1)
    narrow = np.flatnonzero(volume <= max(1, len(occupied)))
    per_row = np.prod(spans[narrow], axis=1)
    owner = np.repeat(narrow, per_row)
    starts = np.cumsum(per_row) - per_row
    rest = np.arange(int(per_row.sum())) - np.repeat(starts, per_row)
    chunk = np.empty((len(owner), d), np.int64)
    for k in range(d - 1, -1, -1):
        chunk[:, k] = first[owner, k] + rest % spans[owner, k]
        rest = rest // spans[owner, k]
    codes = _row_major(occupied)
    position = np.searchsorted(codes, _row_major(chunk)) if len(codes) else np.zeros(len(chunk), np.int64)
    found = position < len(codes)
    found[found] = codes[position[found]] == _row_major(chunk)[found]
    owners, chunks = [owner[found]], [chunk[found]]
    for row in np.flatnonzero(volume > max(1, len(occupied))):
        inside = np.all((occupied >= first[row]) & (occupied <= last[row]), axis=1)
        owners.append(np.full(int(inside.sum()), row, np.int64))
        chunks.append(occupied[inside])
    return np.concatenate(owners), np.concatenate(chunks).reshape(-1, d)


def _row_major(chunks: np.ndarray) -> np.ndarray:
    """Sortable keys of chunk coordinates (structured view: lexicographic, any range)."""
    chunks = np.ascontiguousarray(chunks, np.int64)
    return chunks.view([(f"c{k}", np.int64) for k in range(chunks.shape[1])]).reshape(-1)


def _home_rows(fragments: pa.Table, side: SideSpec, pairs: np.ndarray) -> SideRows | None:
    """The rows of a side's fragments at their home chunk (copies kept for neighbours left out),
    decoded; None when there are none."""
    fragments = ul.home_fragments(fragments)
    if fragments.num_rows == 0:
        return None
    rows = ul.decode_rows(fragments, side.storage, position_names(side.schema))
    return side_rows(rows, side.schema, pairs, side.layout.sigmas)


def _corr_matrix(table: pa.Table, npairs: int) -> np.ndarray:
    corrs = np.zeros((table.num_rows, npairs), np.float64)
    for q in range(npairs):
        corrs[:, q] = np.asarray(table.column(f"a_corr{q}"), np.float64)
    return corrs


def _join_chunk(
    outer_part: pa.Table,
    inner_fragments: pa.Table,
    inner: SideSpec,
    delta: float,
    threshold: float,
    structure,
    ndim: int,
) -> pa.Table | None:
    """Task for one inner chunk: the routed outer rows against the chunk's inner rows."""
    if outer_part.num_rows == 0 or inner_fragments.num_rows == 0:
        return None
    singles, pairs = structure
    inner_rows = _home_rows(inner_fragments, inner, pairs)
    if inner_rows is None:
        return None
    col = lambda prefix, kind: np.stack(  # noqa: E731
        [np.asarray(outer_part.column(f"{prefix}{k}"), kind) for k in range(ndim)], axis=1
    )
    outer_rows = SideRows(
        np.asarray(outer_part.column("a_id"), np.int64),
        col("a_cell", np.int64),
        col("a_first", np.float64),
        col("a_last", np.float64),
        np.ascontiguousarray(col("a_mean", np.float64)),
        np.ascontiguousarray(col("a_sigma", np.float64)),
        _corr_matrix(outer_part, len(pairs)),
    )
    outer_rows, low, high = per_tuple(outer_rows, col("a_low", np.int64), col("a_high", np.int64))
    ia, ib, _ = pairs_within_boxes(outer_rows, low, high, inner_rows, delta)
    return _validate(outer_rows, inner_rows, ia, ib, delta, singles, pairs, threshold, JoinStatistics())


def sbj_routed(
    engine: Engine, outer: Side, inner: Side, delta: float, threshold: float, structure, stats: JoinStatistics
) -> list[pa.Table]:
    """The pairs of the join, computed by ``engine`` (collected: one table in a list)."""
    singles, pairs = structure
    walks = inner_walks_from_metadata(inner)
    ranges = inner_chunk_ranges(outer, inner, delta, walks)
    if ranges is None:
        return []
    outer_storage, inner_storage = outer.table.storage, inner.table.storage
    routed = _routed_schema(outer.schema, inner_storage, len(pairs))
    outer_frame = engine.read_files(outer.table.files(outer.version), layout.fragment_schema(outer_storage))
    home = ul.home_fragments(inner.table.metadata(inner.version))
    occupied = np.unique(
        np.stack([np.asarray(home.column(c), np.int64) for c in layout.chunk_columns(inner_storage)], axis=1),
        axis=0,
    )  # sorted row-major: the inner chunks holding home copies (the only rows a chunk's task pairs)
    route = functools.partial(
        _route_outer,
        outer=outer.spec,
        inner=inner.spec,
        delta=delta,
        walks=walks,
        pairs=pairs,
        routed=routed,
        occupied=occupied,
    )
    outer_routed = engine.map_batches(outer_frame, route, routed)
    keys = layout.chunk_columns(inner_storage)
    inner_frame = engine.read_files(
        inner.table.files(inner.version, ranges), layout.fragment_schema(inner_storage), keys, ranges
    )
    join = functools.partial(
        _join_chunk,
        inner=inner.spec,
        delta=delta,
        threshold=threshold,
        structure=structure,
        ndim=outer.schema.ndim,
    )
    joined = engine.cogroup(outer_routed, inner_frame, keys, join, RESULT_SCHEMA)
    # a pair found in several inner chunks (replicated copies) comes back once per chunk, with the
    # same probability; the driver's _finish keeps one (no second shuffle for so few duplicates)
    table = engine.collect(joined, RESULT_SCHEMA)
    stats.blocks = -1  # one plan: outer rows routed to every inner chunk they need
    return [table]
