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
from arrayviews.kernels.exact_sum import ExactSumError, SumOverflow
from arrayviews.model.aggregate_calls import AggregateCall
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.model.types import numpy_dtype
from arrayviews.operators import halo
from arrayviews.operators.reads import box_to_numpy
from arrayviews.operators.source import StoredBox
from arrayviews.storage import codec, layout
from arrayviews.storage.chunk_cache import ChunkCache

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
    sum_error: Callable[[ExactSumError | SumOverflow, str, tuple[int, ...], int], Exception],
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
    present = _by_output_cell(block.present, counts, sizes)
    inputs = {}
    for attribute in {call.attribute for call in calls} - {None}:
        values = _by_output_cell(block.values[attribute], counts, sizes)
        nulls = block.nulls.get(attribute)
        inputs[attribute] = (values, None if nulls is None else ~_by_output_cell(nulls, counts, sizes))
    return _reduce_rows(present, inputs, counts, out_first, out_schema, calls, sum_error)


def _by_output_cell(array: np.ndarray, counts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """(output cells in C order, cells of each block) from a block-aligned array."""
    split = array.reshape([int(x) for pair in zip(counts, sizes, strict=True) for x in pair])
    ndim = len(counts)
    order = list(range(0, 2 * ndim, 2)) + list(range(1, 2 * ndim, 2))
    return split.transpose(order).reshape(int(np.prod(counts)), int(np.prod(sizes)))


def _reduce_rows(
    present: np.ndarray,
    inputs: dict[str, tuple[np.ndarray, np.ndarray | None]],
    counts: np.ndarray,
    out_first: np.ndarray,
    out_schema: ArraySchema,
    calls: list[AggregateCall],
    sum_error: Callable[[ExactSumError | SumOverflow, str, tuple[int, ...], int], Exception],
) -> pa.Table | None:
    """The output fragments from one row per output cell (C order over ``counts`` cells, the first
    ``out_first`` cells from the output's low): ``present`` marks the cells of each row, ``inputs``
    holds per attribute the row values and their validity (None: all valid)."""
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
        full = bool(mask.all())  # every block of the chunk whole: its rows as they are, no gather

        def picked(array: np.ndarray, rows=rows, mask=mask, full=full) -> np.ndarray:
            return array[rows].reshape(-1) if full else array[rows][mask]

        repeated = np.repeat(keys, mask.shape[1] if full else mask.sum(axis=1)).astype(np.int64)
        states = {}
        for attribute in {call.attribute for call in calls}:
            needs = set().union(*(needs_for(c.function) for c in calls if c.attribute == attribute))
            if attribute is None:
                states[None] = partial_states(repeated, None, needs)
                continue
            values, valid = inputs[attribute]
            try:
                states[attribute] = partial_states(
                    repeated, picked(values), needs, valid=None if valid is None else picked(valid)
                )
            except ExactSumError as error:
                raise sum_error(
                    error, attribute, tuple(int(c) for c in chunk), int(keys[error.index])
                ) from None
        values_out, nulls_out = {}, {}
        for call in calls:
            try:
                result, null = finalize(states[call.attribute], call.function)
            except SumOverflow as error:
                offset = int(states[call.attribute].keys[error.index])
                raise sum_error(error, call.attribute, tuple(int(c) for c in chunk), offset) from None
            values_out[call.output_name] = result
            if null is not None:
                nulls_out[call.output_name] = null
        fragment = codec.Fragment(tuple(int(c) for c in chunk), keys.astype(np.int64), values_out, nulls_out)
        encoded.append(codec.encode(fragment, math.prod(chunk_shape), dtypes))
    return layout.encoded_to_table(encoded, out_schema, 0)


def regrid_box(
    box: StoredBox,
    out_schema: ArraySchema,
    blocks: tuple[int, ...],
    calls: list[AggregateCall],
    sum_error: Callable[[ExactSumError | SumOverflow, str, tuple[int, ...], int], Exception],
    cache: ChunkCache | None = None,
) -> pa.Table | None:
    """The regrid of a box of a stored array (a stored array whole, or a subarray of one) from its
    chunks as box reads get them (the process's chunk cache, no file scan when it holds them):
    each attribute's dense block of the box is padded to whole regrid blocks and reshaped so that
    each output cell's inputs are one row. None (nothing done) when the attributes read are
    nullable or not numeric, when the box is too large for the chunk path, or when its cells fill
    less than DENSE_FRACTION of the padded block: the caller then takes the fragment path."""
    schema = box.source.schema
    names = sorted({call.attribute for call in calls} - {None})
    if not names:  # count(*) only: which cells are present, from any attribute that has no nulls
        names = [a.name for a in schema.attributes if not a.nullable][:1]
        if not names:
            return None
    specs = [schema.attribute(name) for name in names]
    if any(spec.nullable or numpy_dtype(spec.type).kind not in "biuf" for spec in specs):
        return None
    shape = np.asarray(box.high, dtype=np.int64) - np.asarray(box.low, dtype=np.int64) + 1
    sizes = np.asarray(blocks, dtype=np.int64)
    counts = -(-shape // sizes)
    padded = tuple(int(c * b) for c, b in zip(counts, sizes, strict=True))
    if math.prod(padded) > MAX_BLOCK_CELLS:
        return None
    inside = tuple(slice(0, int(n)) for n in shape)
    present = None
    inputs: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    for spec in specs:
        dtype = numpy_dtype(spec.type)
        read = box_to_numpy(box, spec, dtype.type(0), True, cache)
        if read is None:
            return None
        cut = read[0]
        if present is None:
            present = np.zeros(padded, dtype=bool)
            present[inside] = ~np.ma.getmaskarray(cut)
            if int(np.count_nonzero(present)) < DENSE_FRACTION * present.size:
                return None
        values = np.zeros(padded, dtype=dtype)
        values[inside] = np.ma.getdata(cut)
        inputs[spec.name] = (_by_output_cell(values, counts, sizes), None)
    assert present is not None
    rows = _by_output_cell(present, counts, sizes)
    kept = {name: pair for name, pair in inputs.items() if name in {call.attribute for call in calls}}
    first = np.zeros(len(sizes), dtype=np.int64)
    result = _reduce_rows(rows, kept, counts, first, out_schema, calls, sum_error)
    return layout.fragment_schema(out_schema).empty_table() if result is None else result
