"""The in-process structure join's two plans priced from metadata, and the cost-based choice between
them: the block plan (Alg. 1: outer blocks under the memory quota, each reading the inner chunks its
cells' candidate regions reach) and the routed plan (every outer copy sent to the inner chunks its
candidate box overlaps, co-grouped with them chunk by chunk, as on Spark).

Both plans search the same candidate pairs and read every outer copy once; they differ in what the
calibrated terms ``EngineCost.per_block`` (an outer block's set-up), ``per_route`` (an outer copy
routed to one inner chunk), ``per_group`` (one inner chunk co-grouped) and ``per_routed_pair`` (a
candidate pair searched within one inner chunk, against ``per_pair`` for the block plan's search
over a whole block) price, and in the inner copies the block plan reads again for every further
block (priced per copy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from arrayviews.execution.cost import CostModel, Estimate
from arrayviews.model.geometry import ChunkGrid
from arrayviews.operators.uncertain_join import (
    Side,
    _outer_blocks,
    inner_chunk_ranges,
    inner_walks_from_metadata,
)
from arrayviews.storage import layout
from arrayviews.storage import uncertain_layout as ul

BLOCK, ROUTED = "block", "routed"
PLANS = (BLOCK, ROUTED)


@dataclass(frozen=True)
class PlanChoice:
    """The in-process plan of a structure join, why, and both plans' estimates and predictions."""

    plan: str
    reason: str
    estimates: dict[str, Estimate]
    predicted: dict[str, float]


def _copy_chunks(side: Side) -> tuple[np.ndarray, np.ndarray]:
    """Chunk coordinates (n, d) and copy rows (n,) of a side's tuple fragments, from metadata."""
    metadata = ul.home_fragments(side.table.metadata(side.version))
    names = layout.chunk_columns(side.table.storage)
    if metadata.num_rows == 0:
        return np.zeros((0, len(names)), np.int64), np.zeros(0, np.int64)
    chunks = np.stack([np.asarray(metadata.column(c), np.int64) for c in names], axis=1)
    return chunks, np.asarray(metadata.column(layout.N_CELLS), np.int64)


def _within(chunks: np.ndarray, ranges) -> np.ndarray:
    keep = np.ones(len(chunks), bool)
    for k, (first, last) in enumerate(ranges):
        keep &= (chunks[:, k] >= first) & (chunks[:, k] <= last)
    return keep


def _reach(outer: Side, inner: Side, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """Cells below and above an outer copy's cell its candidate box reaches (as ``expected_pairs``:
    the outer step or fence walk, delta, then the inner expansion)."""
    own_low, own_high = inner_walks_from_metadata(outer)
    low_walk, high_walk = inner_walks_from_metadata(inner)
    reach = math.ceil(delta)
    return own_low + reach + low_walk, own_high + reach + high_walk


def plan_estimates(outer: Side, inner: Side, delta: float, base: Estimate) -> dict[str, Estimate]:
    """Each in-process plan's work, from both sides' metadata; ``base`` is what both read and search
    (every copy of both sides once, the candidate pairs)."""
    if outer.version == 0 or inner.version == 0:
        return {BLOCK: base, ROUTED: base}
    walks = inner_walks_from_metadata(inner)
    ranges = inner_chunk_ranges(outer, inner, delta, walks)
    if ranges is None:
        return {BLOCK: base, ROUTED: base}
    inner_chunks, inner_rows = _copy_chunks(inner)
    reachable = _within(inner_chunks, ranges)
    below, above = _reach(outer, inner, delta)

    # block plan: each block (a slab of outer chunks along the first dimension) reads the inner
    # chunks within its cells' reach; the first pass over the inner copies is in ``base``
    outer_grid, inner_grid = ChunkGrid.of(outer.table.storage), ChunkGrid.of(inner.table.storage)
    blocks = _outer_blocks(outer)
    inner_read = 0
    for block in blocks:
        (first, last), *_ = block
        low = outer_grid.dimensions[0].chunk_span(first)[0] - int(below[0])
        high = outer_grid.dimensions[0].chunk_span(last)[1] + int(above[0])
        first_inner, last_inner = inner_grid.dimensions[0].chunk_of(np.array([low, high]))
        slab = reachable & (inner_chunks[:, 0] >= first_inner) & (inner_chunks[:, 0] <= last_inner)
        inner_read += int(inner_rows[slab].sum())
    extra = max(0, inner_read - int(inner_rows[reachable].sum()))
    block = replace(base, copies=base.copies + extra, blocks=len(blocks))

    # routed plan: every outer copy once per inner chunk its candidate box overlaps (an interval of
    # w cells meets (w - 1) / c + 1 chunks of c cells on average), co-grouped per inner chunk
    outer_copies = outer.table.copies_at(outer.version)
    width = 1 + below + above
    per_copy = 1.0
    for k, grid in enumerate(inner_grid.dimensions):
        chunks = int(grid.chunk_of(np.array([grid.high]))[0] - grid.chunk_of(np.array([grid.low]))[0]) + 1
        per_copy *= min(chunks, (float(width[k]) - 1) / grid.length + 1)
    groups = len(np.unique(inner_chunks[reachable], axis=0)) if reachable.any() else 0
    routed = replace(base, pairs=0.0, routed=outer_copies * per_copy, groups=groups, routed_pairs=base.pairs)
    return {BLOCK: block, ROUTED: routed}


def choose_plan(model: CostModel, estimates: dict[str, Estimate], forced: str | None = None) -> PlanChoice:
    """The in-process plan predicted faster by the in-process terms of ``model`` (the block plan on
    a tie: it reads the least), or the ``forced`` one."""
    predicted = {plan: model.seconds("local", estimates[plan]) for plan in PLANS}
    plan = forced or (BLOCK if predicted[BLOCK] <= predicted[ROUTED] else ROUTED)
    block, routed = estimates[BLOCK], estimates[ROUTED]
    source = "forced; " if forced else ""
    source += "calibrated" if model.calibrated else "default"
    reason = (
        f"predicted block plan {predicted[BLOCK]:.3f} s ({block.blocks} outer block(s)), routed plan "
        f"{predicted[ROUTED]:.3f} s ({routed.routed:,.0f} outer copies routed to {routed.groups} inner "
        f"chunk(s)) ({source} costs)"
    )
    return PlanChoice(plan, reason, estimates, predicted)
