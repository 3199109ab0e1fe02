"""Computing and maintaining similarity views on Spark: the full computation and the baseline
incremental refresh (paper 000, section 4.1) over update triples (p, q, v).

Both produce the new fragments of the view chunks they touch; the caller commits them in one
snapshot. The plan is made from chunk metadata and the deltas' chunk lists only.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from arrayviews.execution import jobs
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


def _chunks_of(source: StoredSource) -> np.ndarray:
    meta = source.metadata()
    schema = source.schema
    if meta.num_rows == 0:
        return np.zeros((0, schema.ndim), np.int64)
    return np.unique(
        np.stack([np.asarray(meta.column(c)) for c in layout.chunk_columns(schema)], axis=1), axis=0
    )


def _cells_chunks(cells: pa.Table, schema: ArraySchema) -> np.ndarray:
    if cells.num_rows == 0:
        return np.zeros((0, schema.ndim), np.int64)
    coords = np.stack([np.asarray(cells.column(d)) for d in schema.dimension_names], axis=1)
    return np.unique(ChunkGrid.of(schema).chunk_of(coords), axis=0)


def _signed_fragments(delta: Delta, which: str) -> pa.Table:
    cells = delta.minus if which == "minus" else delta.plus
    return (
        cells_to_fragment_table(cells, delta.schema)
        if cells.num_rows
        else layout.empty_fragment_table(delta.schema)
    )


def _with_view_chunks(cells: DataFrame, view: ArraySchema) -> DataFrame:
    for dimension in view.dimensions:
        cells = cells.withColumn(
            VIEW_CHUNK_PREFIX + dimension.name,
            jobs.integer_div(F.col(dimension.name) - F.lit(dimension.chunk_origin), dimension.chunk_length),
        )
    return cells


def _merge(old_rows: pa.Table, delta_rows: pa.Table, definition, stored, full) -> pa.Table | None:
    delta_rows = delta_rows.drop_columns(
        [c for c in delta_rows.column_names if c.startswith(VIEW_CHUNK_PREFIX)]
    )
    return compute.merge_chunk(old_rows, delta_rows, definition, stored, full)


def compute_state(
    spark: SparkSession,
    spec: JoinSpec,
    definition: SimilarityViewDefinition,
    stored: ArraySchema,
    left_rows: DataFrame,
    right_rows: DataFrame,
    terms: tuple,
) -> DataFrame:
    """Stage 2 on Spark: state cells (full or signed change) of every left chunk that has rows."""
    delta = compute.delta_schema(stored)
    function = functools.partial(
        compute.join_chunk, spec=spec, definition=definition, stored=stored, terms=terms
    )
    keys = simjoin.halo.target_columns(spec.left.dimension_names)
    return jobs.cogroup_tables(left_rows, right_rows, keys, function, layout.cell_schema(delta))


def merge_into_view(
    spark: SparkSession,
    state: DataFrame,
    old_view: DataFrame | None,
    definition,
    stored: ArraySchema,
    full: bool,
) -> DataFrame:
    """Stage 3 on Spark: group state cells by view chunk, merge with the old view fragments."""
    keyed = _with_view_chunks(state, stored)
    keys = [VIEW_CHUNK_PREFIX + d for d in stored.dimension_names]
    if old_view is None:
        old_view = spark.createDataFrame([], jobs.spark_schema(layout.fragment_schema(stored)))
    renamed = old_view
    for dimension in stored.dimension_names:
        renamed = renamed.withColumn(VIEW_CHUNK_PREFIX + dimension, F.col(layout.chunk_column(dimension)))
    function = functools.partial(_merge, definition=definition, stored=stored, full=full)
    return jobs.cogroup_tables(renamed, keyed, keys, function, layout.fragment_schema(stored))


def full_computation(
    spark: SparkSession,
    spec: JoinSpec,
    definition: SimilarityViewDefinition,
    stored: ArraySchema,
    left: StoredSource,
    right: StoredSource,
) -> tuple[DataFrame, Plan]:
    """Fragments of the whole view computed from scratch."""
    pairs = simjoin.plan_pairs(spec, _chunks_of(left), _chunks_of(right))
    plan = Plan([(p, q, p) for p, q in pairs])
    left_rows = simjoin.route_left(left.frame(spark), spec, simjoin.LEFT_OLD)
    right_rows = simjoin.route_right(right.frame(spark), spec, pairs, simjoin.RIGHT_OLD)
    state = compute_state(spark, spec, definition, stored, left_rows, right_rows, compute.FULL_TERMS)
    return merge_into_view(spark, state, None, definition, stored, full=True), plan


def baseline_refresh(
    spark: SparkSession,
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
) -> tuple[DataFrame, np.ndarray, Plan]:
    """The new fragments of the view chunks that the deltas change, and which view chunks those are.

    Terms: d_left join right_old, left_old join d_right, d_left join d_right (signed cells); the
    state changes are added to the stored state. Where a min/max view loses values, the cells whose
    stored extreme may have left are found first (one job over the state change and the touched view
    chunks), and only those cells are recomputed from the new base arrays (``left_new``/``right_new``).
    """
    left_delta_chunks = np.unique(
        np.vstack([_cells_chunks(left_delta.minus, spec.left), _cells_chunks(left_delta.plus, spec.left)]),
        axis=0,
    )
    right_delta_chunks = np.unique(
        np.vstack(
            [_cells_chunks(right_delta.minus, spec.right), _cells_chunks(right_delta.plus, spec.right)]
        ),
        axis=0,
    )
    left_old_chunks = _chunks_of(left_old)
    right_old_chunks = _chunks_of(right_old)
    first = simjoin.plan_pairs(spec, left_delta_chunks, right_old_chunks)
    second = simjoin.plan_pairs(spec, left_old_chunks, right_delta_chunks)
    third = simjoin.plan_pairs(spec, left_delta_chunks, right_delta_chunks)
    plan = Plan(
        list(dict.fromkeys((p, q, p) for p, q in first + second + third)),
        left_delta_chunks,
        right_delta_chunks,
    )
    checkpoint("refresh.planned")
    left_rows = [
        simjoin.fragments_to_left(
            spark,
            {
                simjoin.LEFT_MINUS: _signed_fragments(left_delta, "minus"),
                simjoin.LEFT_PLUS: _signed_fragments(left_delta, "plus"),
            },
            spec,
        )
    ]
    second_targets = np.array(sorted({p for p, _ in second}), dtype=np.int64).reshape(-1, spec.left.ndim)
    if len(second_targets):
        left_rows.append(simjoin.route_left(left_old.frame(spark), spec, simjoin.LEFT_OLD, second_targets))
    right_rows = [
        simjoin.fragments_to_right(
            spark,
            {
                simjoin.RIGHT_MINUS: _signed_fragments(right_delta, "minus"),
                simjoin.RIGHT_PLUS: _signed_fragments(right_delta, "plus"),
            },
            spec,
            second + third,
        )
    ]
    if first:
        right_rows.append(simjoin.route_right(right_old.frame(spark), spec, first, simjoin.RIGHT_OLD))
    left_frame = functools.reduce(DataFrame.unionByName, left_rows)
    right_frame = functools.reduce(DataFrame.unionByName, right_rows)
    # The view chunks that may change, from the plan alone (no job runs to find them): those
    # overlapping a left chunk that receives work. Chunks without any change pass through unchanged.
    view_grid = ChunkGrid.of(stored)
    left_grid = ChunkGrid.of(spec.left)
    targets = sorted({p for p, _, _ in plan.triples})
    candidates = set()
    for target in targets:
        low, high = left_grid.chunk_bounds(target)
        candidates.update(view_grid.chunks_overlapping(low, high))
    if not candidates:
        return None, np.zeros((0, stored.ndim), np.int64), plan
    affected = np.array(sorted(candidates), dtype=np.int64).reshape(-1, stored.ndim)
    state = compute_state(spark, spec, definition, stored, left_frame, right_frame, compute.DELTA_TERMS)
    old_frame = simjoin.only_chunks(old_view.frame(spark), stored, affected)
    loses = left_delta.minus.num_rows or right_delta.minus.num_rows
    if loses and any(a.function in ("min", "max") and a.side == "right" for a in definition.aggregates):
        stale = find_stale_cells(spark, state, old_frame, definition, stored)
        plan.cells_recomputed = stale.num_rows
        if stale.num_rows:
            fresh = fresh_extremes(spark, spec, definition, stored, stale, left_new, right_new)
            state = state.unionByName(fresh)
    merged = merge_into_view(spark, state, old_frame, definition, stored, full=False)
    return merged, affected, plan


def _stale(old_rows: pa.Table, delta_rows: pa.Table, definition, stored) -> pa.Table | None:
    delta_rows = delta_rows.drop_columns(
        [c for c in delta_rows.column_names if c.startswith(VIEW_CHUNK_PREFIX)]
    )
    return compute.stale_cells(old_rows, delta_rows, definition, stored)


def find_stale_cells(
    spark: SparkSession, state: DataFrame, old_view: DataFrame, definition, stored: ArraySchema
) -> pa.Table:
    """The view cells whose stored min/max may have left with this change (coordinates, on the driver)."""
    keyed = _with_view_chunks(state, stored)
    keys = [VIEW_CHUNK_PREFIX + d for d in stored.dimension_names]
    renamed = old_view
    for dimension in stored.dimension_names:
        renamed = renamed.withColumn(VIEW_CHUNK_PREFIX + dimension, F.col(layout.chunk_column(dimension)))
    schema = pa.schema([pa.field(d, pa.int64()) for d in stored.dimension_names])
    function = functools.partial(_stale, definition=definition, stored=stored)
    return jobs.collect(jobs.cogroup_tables(renamed, keyed, keys, function, schema), schema)


def fresh_extremes(
    spark: SparkSession,
    spec: JoinSpec,
    definition: SimilarityViewDefinition,
    stored: ArraySchema,
    cells: pa.Table,
    left_new: StoredSource,
    right_new: StoredSource,
) -> DataFrame:
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
        spark, {simjoin.LEFT_OLD: cells_to_fragment_table(left_cells, bare.left)}, bare
    )
    pairs = simjoin.plan_pairs(bare, np.array(list(boxes), dtype=np.int64), _chunks_of(right_new), boxes)
    right_rows = simjoin.route_right(right_new.frame(spark), bare, pairs, simjoin.RIGHT_OLD, boxes)
    function = functools.partial(
        compute.fresh_extremes_chunk, spec=bare, definition=definition, stored=stored
    )
    keys = simjoin.halo.target_columns(bare.left.dimension_names)
    delta = compute.delta_schema(stored)
    return jobs.cogroup_tables(left_rows, right_rows, keys, function, layout.cell_schema(delta))
