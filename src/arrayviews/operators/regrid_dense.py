"""Regrid in-process over a dense input: the cells placed once in a block, every output cell's
input cells gathered by one reshape, no per-cell sort or grouping.

The two-stage reduction (operators/reduce.py) maps every cell to its output cell, sorts the cells by
output cell and reduces runs; over a dense input on the driver most of its time is that mapping and
sorting. Here the fragments are placed into a block aligned to the regrid blocks, the block is
reshaped so that each output cell's inputs are one row, and the rows go to the same partial-state
and finalize kernels (kernels/aggregates.py). count, sum (exact), avg, min and max do not depend on
the order of a group's values, so the results equal the two-stage reduction exactly; var and stdev
(two-pass moments, whose rounding depends on how the values are split) keep the two-stage path.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from arrayviews.kernels.aggregates import finalize, needs_for, partial_states
from arrayviews.kernels.exact_sum import ExactSumError
from arrayviews.model.aggregate_calls import AggregateCall
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.model.types import numpy_dtype
from arrayviews.operators import halo
from arrayviews.storage import codec, layout

#: Aggregates whose value does not depend on the order of a group's values.
ORDER_FREE = frozenset({"count", "sum", "avg", "min", "max"})
#: Cells filling at least this share of the aligned block of their chunks take the dense path.
DENSE_FRACTION = 0.25
#: Largest aligned block (cells) placed on the driver.
MAX_BLOCK_CELLS = 1 << 25


def applies(schema: ArraySchema, calls: list[AggregateCall]) -> bool:
    """Whether the dense path can compute these aggregates (numeric inputs, order-free functions)."""
    for call in calls:
        if call.function not in ORDER_FREE:
            return False
        if call.attribute is not None and codec.is_text(numpy_dtype(schema.attribute(call.attribute).type)):
            return False
    return True


def regrid_in_process(
    table: pa.Table,
    schema: ArraySchema,
    out_schema: ArraySchema,
    blocks: tuple[int, ...],
    calls: list[AggregateCall],
    two_stage: Callable[[pa.Table], pa.Table | None],
    sum_error: Callable[[ExactSumError, str, tuple[int, ...], int], Exception],
) -> pa.Table | None:
    """The regrid of every fragment in ``table`` (the whole input); ``two_stage(table)`` computes it
    the general way when the input is too sparse or too large for one block."""
    if table.num_rows == 0:
        return None
    grid = ChunkGrid.of(schema)
    chunks = np.stack([np.asarray(table.column(c), dtype=np.int64) for c in layout.chunk_columns(schema)], 1)
    starts = np.stack([g.chunk_starts(chunks[:, k]) for k, g in enumerate(grid.dimensions)], axis=1)
    ends = starts + np.stack([g.chunk_sizes(chunks[:, k]) for k, g in enumerate(grid.dimensions)], axis=1)
    lows = np.array([d.low for d in schema.dimensions], dtype=np.int64)
    sizes = np.asarray(blocks, dtype=np.int64)
    out_first = (starts.min(axis=0) - lows) // sizes  # first output cell (as an offset from low)
    out_last = (ends.max(axis=0) - 1 - lows) // sizes
    counts = out_last - out_first + 1
    shape = tuple(int(n * b) for n, b in zip(counts, sizes, strict=True))
    cells = int(np.sum(table.column(layout.N_CELLS)))
    if math.prod(shape) > MAX_BLOCK_CELLS or cells < DENSE_FRACTION * math.prod(shape):
        return two_stage(table)
    block = halo.place(halo.fragments_as_pieces(table, schema), schema, lows + out_first * sizes, shape)

    def by_output_cell(array: np.ndarray) -> np.ndarray:
        """(output cells in C order, cells of each block) from a block-aligned array."""
        split = array.reshape([int(x) for pair in zip(counts, sizes, strict=True) for x in pair])
        ndim = len(shape)
        order = list(range(0, 2 * ndim, 2)) + list(range(1, 2 * ndim, 2))
        return split.transpose(order).reshape(int(np.prod(counts)), int(np.prod(sizes)))

    present = by_output_cell(block.present)
    inputs = {}
    for attribute in {call.attribute for call in calls} - {None}:
        values = by_output_cell(block.values[attribute])
        nulls = block.nulls.get(attribute)
        inputs[attribute] = (values, None if nulls is None else ~by_output_cell(nulls))

    out_grid = ChunkGrid.of(out_schema)
    out_lows = np.array([d.low for d in out_schema.dimensions], dtype=np.int64)
    out_cells = np.stack(np.unravel_index(np.arange(present.shape[0]), tuple(int(c) for c in counts)), 1)
    out_cells = out_cells + out_first + out_lows
    has_cells = present.any(axis=1)
    out_chunks = out_grid.chunk_of(out_cells)
    dtypes = layout.attribute_dtypes(out_schema)
    encoded = []
    # one integer code per output chunk (the chunks are few; cells are many: no row-wise unique)
    first_chunk = out_chunks.min(axis=0)
    codes = np.ravel_multi_index(
        tuple((out_chunks - first_chunk).T), tuple(out_chunks.max(axis=0) - first_chunk + 1)
    )
    for code in np.unique(codes[has_cells]):
        rows = np.flatnonzero(has_cells & (codes == code))
        chunk = out_chunks[rows[0]]
        chunk_low, _ = out_grid.chunk_bounds(chunk)
        chunk_shape = out_grid.chunk_shape(chunk)
        keys = np.ravel_multi_index(tuple((out_cells[rows] - np.asarray(chunk_low)).T), chunk_shape)
        mask = present[rows]
        repeated = np.repeat(keys, mask.sum(axis=1)).astype(np.int64)
        states = {}
        for attribute in {call.attribute for call in calls}:
            needs = set().union(*(needs_for(c.function) for c in calls if c.attribute == attribute))
            if attribute is None:
                states[None] = partial_states(repeated, None, needs)
                continue
            values, valid = inputs[attribute]
            try:
                states[attribute] = partial_states(
                    repeated, values[rows][mask], needs, valid=None if valid is None else valid[rows][mask]
                )
            except ExactSumError as error:
                raise sum_error(
                    error, attribute, tuple(int(c) for c in chunk), int(keys[error.index])
                ) from None
        values_out, nulls_out = {}, {}
        for call in calls:
            result, null = finalize(states[call.attribute], call.function)
            values_out[call.output_name] = result
            if null is not None:
                nulls_out[call.output_name] = null
        fragment = codec.Fragment(tuple(int(c) for c in chunk), keys.astype(np.int64), values_out, nulls_out)
        encoded.append(codec.encode(fragment, math.prod(chunk_shape), dtypes))
    return layout.encoded_to_table(encoded, out_schema, 0)
