"""Computing and maintaining similarity views on an engine (Spark or in-process): the full
computation and the baseline incremental refresh (paper 000, section 4.1) over update triples (p, q, v).

Both produce the new fragments of the view chunks they touch; the caller commits them in one
snapshot. The plan is made from chunk metadata and the deltas' chunk lists only.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from arrayviews.execution.engine import Data, Engine
from arrayviews.kernels.rows import unique_rows
from arrayviews.model.faults import checkpoint
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.operators import simjoin
from arrayviews.operators.cells import cells_to_fragment_table
from arrayviews.operators.deltas import Delta
from arrayviews.operators.simjoin import JoinSpec
from arrayviews.operators.source import StoredSource
from arrayviews.storage import layout
from arrayviews.views import compute
from arrayviews.views.definition import SimilarityViewDefinition

VIEW_CHUNK_PREFIX = "k__"


@dataclass
class Plan:
    """What a refresh will compute: the update triples, and the chunks involved."""

    triples: list[tuple[tuple, tuple, tuple]] = field(default_factory=list)
    left_delta_chunks: np.ndarray | None = None
    right_delta_chunks: np.ndarray | None = None
    cells_recomputed: int = 0  # view cells whose min/max was recomputed (their extreme left)
    #: The chunk pairs of the three delta terms (d_left x right_old, left_old x d_right, both deltas).
    first: list = field(default_factory=list)
    second: list = field(default_factory=list)
    third: list = field(default_factory=list)
    #: Cells the refresh reads from the old base arrays (chunk metadata) and from the deltas.
    base_cells: int = 0
    delta_cells: int = 0


def _chunk_cells(source: StoredSource, ranges=None) -> dict[tuple, int]:
    """Per chunk of a source (only those in the per-dimension chunk ``ranges`` when given), its
    cells: from the metadata columns of the fragments in the files the catalog's column bounds leave
    for those ranges (no cell data; other files are never opened)."""
    meta = source.metadata(ranges)
    schema = source.schema
    if meta.num_rows == 0:
        return {}
    chunks = np.stack([np.asarray(meta.column(c)) for c in layout.chunk_columns(schema)], axis=1)
    unique, inverse = np.unique(chunks, axis=0, return_inverse=True)
    cells = np.zeros(len(unique), np.int64)
    np.add.at(cells, inverse.reshape(-1), np.asarray(meta.column(layout.N_CELLS)))
    return {tuple(int(c) for c in row): int(n) for row, n in zip(unique, cells, strict=True)}


def _chunks_of(source: StoredSource, ranges=None) -> np.ndarray:
    """The chunks holding fragments in ``source`` (of ``ranges``), (n, d) in lexicographic order."""
    meta = source.metadata(ranges)
    ndim = source.schema.ndim
    if meta.num_rows == 0:
        return np.zeros((0, ndim), dtype=np.int64)
    chunks = np.stack([np.asarray(meta.column(c), dtype=np.int64) for c in layout.chunk_columns(source.schema)], axis=1)
    return np.unique(chunks, axis=0).reshape(-1, ndim)


def _rows_among(rows: np.ndarray, among: np.ndarray) -> np.ndarray:
    """For each row of ``rows`` (n, d), whether it is also a row of ``among`` (m, d)."""
    if len(rows) == 0 or len(among) == 0:
        return np.zeros(len(rows), dtype=bool)
    _, inverse = np.unique(np.vstack([among, rows]).astype(np.int64), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    return np.isin(inverse[len(among) :], inverse[: len(among)])


def _delta_cells(delta: Delta, schema: ArraySchema) -> np.ndarray:
    """The coordinates (n, d) of the cells ``delta`` removes or adds."""
    tables = [t for t in (delta.minus, delta.plus) if t.num_rows]
    if not tables:
        return np.zeros((0, schema.ndim), dtype=np.int64)
    return np.vstack(
        [np.stack([np.asarray(t.column(d), dtype=np.int64) for d in schema.dimension_names], axis=1) for t in tables]
    )


#: Above this many (changed cell, shape offset) combinations a refresh plans from the boxes of the
#: changed cells alone, not from the exact chunks their shapes reach.
EXACT_REACH_LIMIT = 200_000


def _exact_reach(spec: JoinSpec, cells: np.ndarray, source: ArraySchema, target: ArraySchema, sign: int):
    """The set of (chunk of a changed cell, chunk it reaches) pairs, exactly: with the identity
    mapping a left cell ``a`` and a right cell ``b`` pair when ``b - a`` is in the shape, so a left
    cell reaches the right cells ``a + o`` (``sign`` +1) and a right cell the left cells ``b - o``
    (``sign`` -1). None where the mapping is not the identity or the combinations pass
    :data:`EXACT_REACH_LIMIT` (the boxes then stand for the cells)."""
    offsets = spec.shape.offsets()
    if not spec.mapping.is_identity or len(cells) * len(offsets) > EXACT_REACH_LIMIT:
        return None
    if len(cells) == 0:
        return set()
    reached = (cells[:, None, :] + sign * offsets[None, :, :]).reshape(-1, cells.shape[1])
    own = np.repeat(ChunkGrid.of(source).chunk_of(cells), len(offsets), axis=0)
    pairs = unique_rows(np.hstack([own, ChunkGrid.of(target).chunk_of(reached)]))
    width = cells.shape[1]
    return {(tuple(int(c) for c in row[:width]), tuple(int(c) for c in row[width:])) for row in pairs}


def _delta_boxes(delta: Delta, schema: ArraySchema) -> simjoin.Boxes:
    """Per chunk holding cells of ``delta`` (removed or added), the box ``(low, high)`` of those cells."""
    coords = _delta_cells(delta, schema)
    if len(coords) == 0:
        return {}
    chunks, inverse = unique_rows(ChunkGrid.of(schema).chunk_of(coords), return_inverse=True)
    low = np.full(chunks.shape, np.iinfo(np.int64).max, dtype=np.int64)
    high = np.full(chunks.shape, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(low, inverse, coords)
    np.maximum.at(high, inverse, coords)
    return {tuple(int(c) for c in chunk): (low[k], high[k]) for k, chunk in enumerate(chunks)}


def _box_chunks(boxes: simjoin.Boxes, ndim: int) -> np.ndarray:
    """The chunks of ``boxes`` (n, d) in lexicographic order."""
    return np.array(sorted(boxes), dtype=np.int64).reshape(-1, ndim)


def _reaching(spec: JoinSpec, pairs: list, left_boxes: simjoin.Boxes | None, right_boxes: simjoin.Boxes) -> list:
    """The (left chunk, right chunk) ``pairs`` where the left cells (the box in ``left_boxes``, else
    the whole chunk) reach the right chunk's box in ``right_boxes``."""
    grid = ChunkGrid.of(spec.left)
    kept = []
    for left, right in pairs:
        low, high = left_boxes[left] if left_boxes is not None else grid.chunk_bounds(left)
        region_low, region_high = spec.right_region(low, high)
        box_low, box_high = right_boxes[right]
        if np.all(region_low <= box_high) and np.all(box_low <= region_high):
            kept.append((left, right))
    return kept


def _old_left_pairs(spec: JoinSpec, pairs: list, right_delta: Delta, right_boxes: simjoin.Boxes) -> list:
    """The (old left chunk, right delta chunk) ``pairs`` where a changed right cell reaches a cell
    of the left chunk: exactly (:func:`_exact_reach`) where it can be had, else by boxes."""
    exact = _exact_reach(spec, _delta_cells(right_delta, spec.right), spec.right, spec.left, -1)
    if exact is None:
        return _reaching(spec, pairs, None, right_boxes)
    return [(left, right) for left, right in pairs if (right, left) in exact]


def _signed_fragments(delta: Delta, which: str) -> pa.Table:
    cells = delta.minus if which == "minus" else delta.plus
    return (
        cells_to_fragment_table(cells, delta.schema)
        if cells.num_rows
        else layout.empty_fragment_table(delta.schema)
    )


def bounding_ranges(chunks: np.ndarray) -> list[tuple[int, int]] | None:
    """Per dimension the (first, last) chunk number of a list of chunks: the files to plan."""
    chunks = np.asarray(chunks, dtype=np.int64)
    if chunks.size == 0:
        return None
    return [(int(a), int(b)) for a, b in zip(chunks.min(axis=0), chunks.max(axis=0), strict=True)]


def _view_chunks_of_cells(cells: pa.Table, view: ArraySchema) -> pa.Table:
    coords = np.stack([np.asarray(cells.column(d)) for d in view.dimension_names], axis=1)
    chunks = ChunkGrid.of(view).chunk_of(coords).reshape(-1, view.ndim)
    for k, dimension in enumerate(view.dimension_names):
        cells = cells.append_column(VIEW_CHUNK_PREFIX + dimension, pa.array(chunks[:, k], pa.int64()))
    return cells


def _view_chunks_of_fragments(fragments: pa.Table, view: ArraySchema) -> pa.Table:
    for dimension in view.dimension_names:
        fragments = fragments.append_column(
            VIEW_CHUNK_PREFIX + dimension, fragments.column(layout.chunk_column(dimension))
        )
    return fragments


def _keyed_schema(arrow_schema: pa.Schema, view: ArraySchema) -> pa.Schema:
    for dimension in view.dimension_names:
        arrow_schema = arrow_schema.append(pa.field(VIEW_CHUNK_PREFIX + dimension, pa.int64()))
    return arrow_schema


def _with_view_chunks(engine: Engine, state: Data, view: ArraySchema) -> Data:
    """State cells with the numbers of their view chunks (the key of the merge)."""
    delta = layout.cell_schema(compute.delta_schema(view))
    return engine.map_batches(
        state, functools.partial(_view_chunks_of_cells, view=view), _keyed_schema(delta, view)
    )


def _fragments_with_view_chunks(engine: Engine, fragments: Data, view: ArraySchema) -> Data:
    arrow_schema = layout.fragment_schema(view)
    return engine.map_batches(
        fragments, functools.partial(_view_chunks_of_fragments, view=view), _keyed_schema(arrow_schema, view)
    )


def _merge(
    old_rows: pa.Table, delta_rows: pa.Table, definition, stored, full, public=None
) -> pa.Table | None:
    delta_rows = delta_rows.drop_columns(
        [c for c in delta_rows.column_names if c.startswith(VIEW_CHUNK_PREFIX)]
    )
    return compute.merge_chunk(old_rows, delta_rows, definition, stored, full, public)


def compute_state(
    engine: Engine,
    spec: JoinSpec,
    definition: SimilarityViewDefinition,
    stored: ArraySchema,
    left_rows: Data,
    right_rows: Data,
    terms: tuple,
) -> Data:
    """Stage 2: state cells (full or signed change) of every left chunk that has rows."""
    delta = compute.delta_schema(stored)
    function = functools.partial(
        compute.join_chunk, spec=spec, definition=definition, stored=stored, terms=terms
    )
    keys = simjoin.halo.target_columns(spec.left.dimension_names)
    return engine.cogroup(left_rows, right_rows, keys, function, layout.cell_schema(delta))


def merge_into_view(
    engine: Engine,
    state: Data,
    old_view: Data | None,
    definition,
    stored: ArraySchema,
    full: bool,
    public: frozenset[str] | None = None,
) -> Data:
    """Stage 3: group state cells by view chunk, merge with the old view fragments (``public``: see
    ``compute.merge_chunk``)."""
    keyed = _with_view_chunks(engine, state, stored)
    keys = [VIEW_CHUNK_PREFIX + d for d in stored.dimension_names]
    if old_view is None:
        old_view = engine.empty(layout.fragment_schema(stored))
    renamed = _fragments_with_view_chunks(engine, old_view, stored)
    function = functools.partial(_merge, definition=definition, stored=stored, full=full, public=public)
    return engine.cogroup(renamed, keyed, keys, function, layout.fragment_schema(stored))


def full_pairs(spec: JoinSpec, left: StoredSource, right: StoredSource) -> list[tuple[tuple, tuple]]:
    """Every (left chunk, right chunk) pair a full computation joins, from chunk metadata."""
    left_chunks = _chunks_of(left)
    right_chunks = left_chunks if right is left else _chunks_of(right)
    return simjoin.plan_pairs(spec, left_chunks, right_chunks)


def chunk_count(source: StoredSource) -> int:
    """The chunks holding cells in ``source``, from the fragments' metadata columns."""
    return len(_chunk_cells(source))


def full_computation(
    engine: Engine,
    spec: JoinSpec,
    definition: SimilarityViewDefinition,
    stored: ArraySchema,
    left: StoredSource,
    right: StoredSource,
    pairs: list | None = None,
) -> tuple[Data, Plan]:
    """Fragments of the whole view computed from scratch (over ``pairs`` when already planned)."""
    pairs = pairs if pairs is not None else full_pairs(spec, left, right)
    plan = Plan([(p, q, p) for p, q in pairs])
    left_rows = simjoin.route_left(engine, left.data(engine), spec, simjoin.LEFT_OLD)
    right_rows = simjoin.route_right(engine, right.data(engine), spec, pairs, simjoin.RIGHT_OLD)
    state = compute_state(engine, spec, definition, stored, left_rows, right_rows, compute.FULL_TERMS)
    return merge_into_view(engine, state, None, definition, stored, full=True), plan


def plan_baseline(
    spec: JoinSpec, left_old: StoredSource, right_old: StoredSource, left_delta: Delta, right_delta: Delta
) -> Plan:
    """The update triples of a baseline refresh and the cells it reads, from chunk metadata and the
    deltas' cells alone (no base data is read)."""
    left_boxes = _delta_boxes(left_delta, spec.left)
    right_boxes = left_boxes if right_delta is left_delta else _delta_boxes(right_delta, spec.right)
    left_delta_chunks = _box_chunks(left_boxes, spec.left.ndim)
    right_delta_chunks = _box_chunks(right_boxes, spec.right.ndim)
    # Only the old chunks a delta can pair with are planned: right chunks within reach of the
    # left delta chunks, left chunks whose reach covers a right delta chunk (boxes of chunks, pruned
    # in the catalog before any file is opened).
    right_box = spec.right_chunk_box(left_delta_chunks)
    left_box = spec.left_chunk_box(right_delta_chunks)
    right_cells = _chunk_cells(right_old, right_box) if right_box is not None else {}
    left_cells = _chunk_cells(left_old, left_box) if left_box is not None else {}
    left_old_chunks = np.array(sorted(left_cells), dtype=np.int64).reshape(-1, spec.left.ndim)
    right_old_chunks = np.array(sorted(right_cells), dtype=np.int64).reshape(-1, spec.right.ndim)
    # A pair is planned only where the delta's cells reach the other chunk, not merely the delta's
    # chunk: a batch inside one chunk, away from its edges, pairs with that chunk alone, so the
    # refresh neither reads nor rewrites the chunks around it (the shapes of the changed cells
    # exactly where that is cheap, else the boxes of the changed cells widened by the shape).
    first = simjoin.plan_pairs(spec, left_delta_chunks, right_old_chunks, left_boxes)
    exact_first = _exact_reach(spec, _delta_cells(left_delta, spec.left), spec.left, spec.right, 1)
    if exact_first is not None:  # the right chunks a changed left cell's shape reaches
        first = [pair for pair in first if pair in exact_first]
    second = _old_left_pairs(
        spec, simjoin.plan_pairs(spec, left_old_chunks, right_delta_chunks), right_delta, right_boxes
    )
    third = simjoin.plan_pairs(spec, left_delta_chunks, right_delta_chunks, left_boxes)
    third = _reaching(spec, third, left_boxes, right_boxes)
    read = sum(right_cells.get(q, 0) for q in {q for _, q in first})
    read += sum(left_cells.get(p, 0) for p in {p for p, _ in second})
    delta_cells = sum(
        d.minus.num_rows + d.plus.num_rows
        for d in {id(left_delta): left_delta, id(right_delta): right_delta}.values()
    )
    return Plan(
        list(dict.fromkeys((p, q, p) for p, q in first + second + third)),
        left_delta_chunks,
        right_delta_chunks,
        first=first,
        second=second,
        third=third,
        base_cells=read,
        delta_cells=delta_cells,
    )


def affected_view_chunks(spec: JoinSpec, stored: ArraySchema, plan: Plan) -> np.ndarray:
    """The view chunks that may change, from the plan alone (no job runs to find them): those
    overlapping a left chunk that receives work. Chunks without any change pass through unchanged."""
    view_grid = ChunkGrid.of(stored)
    left_grid = ChunkGrid.of(spec.left)
    candidates = set()
    for target in sorted({p for p, _, _ in plan.triples}):
        low, high = left_grid.chunk_bounds(target)
        candidates.update(view_grid.chunks_overlapping(low, high))
    return np.array(sorted(candidates), dtype=np.int64).reshape(-1, stored.ndim)


def holding_cells(
    spec: JoinSpec,
    definition: SimilarityViewDefinition,
    stored: ArraySchema,
    affected: np.ndarray,
    view_chunks: np.ndarray,
    left_delta: Delta,
) -> int:
    """How many of the view chunks ``affected`` (from :func:`affected_view_chunks`: every view chunk
    overlapping a left chunk that gets work) can hold cells, for an estimate: those the view holds,
    and those a left cell the delta adds falls in. The others stay empty, unless a left cell without a
    view cell gains its first pair, which only a view whose left cells may lack a pair allows (another
    right array, a mapping, a shape without the zero offset): there every affected chunk is counted."""
    if definition.left != definition.right or not spec.mapping.is_identity:
        return len(affected)
    if not spec.shape.contains(np.zeros((1, spec.shape.ndim), dtype=np.int64))[0]:
        return len(affected)
    grid = ChunkGrid.of(stored)
    held = [np.asarray(view_chunks, dtype=np.int64).reshape(-1, stored.ndim)]
    plus = left_delta.plus
    if plus.num_rows:
        coords = np.stack([np.asarray(plus.column(d)) for d in spec.left.dimension_names], axis=1)
        held.append(np.asarray(grid.chunk_of(coords), dtype=np.int64).reshape(-1, stored.ndim))
    return int(_rows_among(np.asarray(affected, dtype=np.int64).reshape(-1, stored.ndim), np.vstack(held)).sum())


def certainly_touched(
    spec: JoinSpec,
    definition: SimilarityViewDefinition,
    stored: ArraySchema,
    left_delta: Delta,
    view_chunks: np.ndarray,
    at_least: int,
) -> np.ndarray | None:
    """The view chunks a baseline refresh of a self-join rewrites, from the delta's chunks and the
    view's chunk list alone (no base chunk is planned), when they are at least ``at_least``; else
    None, as where the shortcut does not hold (another right array, a mapping, a shape without the
    zero offset, a view chunked unlike its base).

    With an identity mapping and the zero offset in the shape, every delta chunk pairs with itself
    (both-deltas term), and an old chunk is a target exactly when the box of a delta chunk's cells is
    within its reach (old-left term, as :func:`plan_baseline` plans it); the old chunks are the
    view's chunks (one view cell per base cell)."""
    if definition.left != definition.right or not spec.mapping.is_identity:
        return None
    if [d.chunk_length for d in stored.dimensions] != [d.chunk_length for d in spec.left.dimensions]:
        return None
    if not spec.shape.contains(np.zeros((1, spec.shape.ndim), dtype=np.int64))[0]:
        return None
    boxes = _delta_boxes(left_delta, spec.left)
    delta_chunks = _box_chunks(boxes, spec.left.ndim)

    def chunks_of(targets) -> np.ndarray:
        return affected_view_chunks(
            spec, stored, Plan([(tuple(int(c) for c in p), None, None) for p in targets])
        )

    lower = chunks_of(delta_chunks)
    if 2 * len(lower) < at_least:  # far from it: not worth planning the old chunks' term here
        return None
    second = {p for p, _ in _old_left_pairs(spec, simjoin.plan_pairs(spec, view_chunks, delta_chunks), left_delta, boxes)}
    touched = chunks_of({tuple(int(c) for c in p) for p in delta_chunks} | second)
    return touched if len(touched) >= at_least else None


def chunk_list(source: StoredSource) -> np.ndarray:
    """The chunks holding cells in ``source`` (n, d), from the fragments' metadata columns."""
    return _chunks_of(source)


def baseline_refresh(
    engine: Engine,
    spec: JoinSpec,
    definition: SimilarityViewDefinition,
    stored: ArraySchema,
    left_old: StoredSource,
    right_old: StoredSource,
    left_delta: Delta,
    right_delta: Delta,
    old_view: StoredSource,
    left_new: StoredSource | None = None,
    right_new: StoredSource | None = None,
    plan: Plan | None = None,
) -> tuple[Data | None, np.ndarray, Plan]:
    """The new fragments of the view chunks that the deltas change, and which view chunks those are.

    Terms: d_left join right_old, left_old join d_right, d_left join d_right (signed cells); the
    state changes are added to the stored state. Where a min/max view loses values, the cells whose
    stored extreme may have left are found first (one job over the state change and the touched view
    chunks), and only those cells are recomputed from the new base arrays (``left_new``/``right_new``).
    """
    plan = plan if plan is not None else plan_baseline(spec, left_old, right_old, left_delta, right_delta)
    first, second, third = plan.first, plan.second, plan.third
    checkpoint("refresh.planned")
    left_rows = [
        simjoin.fragments_to_left(
            engine,
            {
                simjoin.LEFT_MINUS: _signed_fragments(left_delta, "minus"),
                simjoin.LEFT_PLUS: _signed_fragments(left_delta, "plus"),
            },
            spec,
        )
    ]
    second_targets = np.array(sorted({p for p, _ in second}), dtype=np.int64).reshape(-1, spec.left.ndim)
    if len(second_targets):
        left_rows.append(
            simjoin.route_left(
                engine,
                left_old.data(engine, bounding_ranges(second_targets)),
                spec,
                simjoin.LEFT_OLD,
                second_targets,
            )
        )
    right_rows = [
        simjoin.fragments_to_right(
            engine,
            {
                simjoin.RIGHT_MINUS: _signed_fragments(right_delta, "minus"),
                simjoin.RIGHT_PLUS: _signed_fragments(right_delta, "plus"),
            },
            spec,
            second + third,
        )
    ]
    if first:
        first_chunks = np.array(sorted({q for _, q in first}), dtype=np.int64)
        right_rows.append(
            simjoin.route_right(
                engine, right_old.data(engine, bounding_ranges(first_chunks)), spec, first, simjoin.RIGHT_OLD
            )
        )
    left_frame = engine.union(left_rows)
    right_frame = engine.union(right_rows)
    affected = affected_view_chunks(spec, stored, plan)
    if len(affected) == 0:
        return None, affected, plan
    state = compute_state(engine, spec, definition, stored, left_frame, right_frame, compute.DELTA_TERMS)
    old_frame = simjoin.only_chunks(
        engine, old_view.data(engine, bounding_ranges(affected)), stored, affected
    )
    loses = left_delta.minus.num_rows or right_delta.minus.num_rows
    if loses and any(a.function in ("min", "max") and a.side == "right" for a in definition.aggregates):
        cells = plan.base_cells + plan.delta_cells
        stale = find_stale_cells(engine, state, old_frame, definition, stored, cells)
        plan.cells_recomputed = stale.num_rows
        if stale.num_rows:
            fresh = fresh_extremes(engine, spec, definition, stored, stale, left_new, right_new)
            state = engine.union([state, fresh])
    merged = merge_into_view(engine, state, old_frame, definition, stored, full=False)
    return merged, affected, plan


def _stale(old_rows: pa.Table, delta_rows: pa.Table, definition, stored) -> pa.Table | None:
    delta_rows = delta_rows.drop_columns(
        [c for c in delta_rows.column_names if c.startswith(VIEW_CHUNK_PREFIX)]
    )
    return compute.stale_cells(old_rows, delta_rows, definition, stored)


def find_stale_cells(
    engine: Engine, state: Data, old_view: Data, definition, stored: ArraySchema, cells: int | None = None
) -> pa.Table:
    """The view cells whose stored min/max may have left with this change (coordinates, on the driver),
    found by one job (``cells``: the cells the plan reads, which size its shuffles)."""
    keyed = _with_view_chunks(engine, state, stored)
    keys = [VIEW_CHUNK_PREFIX + d for d in stored.dimension_names]
    renamed = _fragments_with_view_chunks(engine, old_view, stored)
    schema = pa.schema([pa.field(d, pa.int64()) for d in stored.dimension_names])
    function = functools.partial(_stale, definition=definition, stored=stored)
    with engine.one_job(cells):
        return engine.collect(engine.cogroup(renamed, keyed, keys, function, schema), schema)


def fresh_extremes(
    engine: Engine,
    spec: JoinSpec,
    definition: SimilarityViewDefinition,
    stored: ArraySchema,
    cells: pa.Table,
    left_new: StoredSource,
    right_new: StoredSource,
) -> Data:
    """State rows with the min/max of ``cells`` recomputed from the new right array: the right cells
    within reach of the box of the stale cells of each left chunk, nothing more."""
    bare = JoinSpec(spec.left.with_attributes([]), spec.right, spec.shape, spec.mapping)
    coords = np.stack([np.asarray(cells.column(d)) for d in stored.dimension_names], axis=1)
    chunks = ChunkGrid.of(bare.left).chunk_of(coords)
    boxes = {}
    for chunk in np.unique(chunks, axis=0):
        inside = coords[np.all(chunks == chunk, axis=1)]
        boxes[tuple(int(c) for c in chunk)] = (inside.min(axis=0), inside.max(axis=0))
    left_cells = pa.table(
        {d: pa.array(coords[:, k], pa.int64()) for k, d in enumerate(bare.left.dimension_names)}
    )
    left_rows = simjoin.fragments_to_left(
        engine, {simjoin.LEFT_OLD: cells_to_fragment_table(left_cells, bare.left)}, bare
    )
    targets = np.array(list(boxes), dtype=np.int64)
    reach = bare.right_chunk_box(targets)  # only the right chunks the stale cells can reach are read
    if reach is None:
        right_chunks = np.zeros((0, bare.right.ndim), np.int64)
        right_data = engine.empty(layout.fragment_schema(right_new.schema))
    else:
        right_chunks, right_data = _chunks_of(right_new, reach), right_new.data(engine, reach)
    pairs = simjoin.plan_pairs(bare, targets, right_chunks, boxes)
    right_rows = simjoin.route_right(engine, right_data, bare, pairs, simjoin.RIGHT_OLD, boxes)
    function = functools.partial(
        compute.fresh_extremes_chunk, spec=bare, definition=definition, stored=stored
    )
    keys = simjoin.halo.target_columns(bare.left.dimension_names)
    delta = compute.delta_schema(stored)
    return engine.cogroup(left_rows, right_rows, keys, function, layout.cell_schema(delta))
