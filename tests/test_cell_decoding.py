"""Decoding sparse fragments into cell coordinates (storage/layout.py) against numpy's unravel_index,
for boxes of one size and boxes clipped at the array edge, in one to four dimensions."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema, Attribute, Dimension
from arrayviews.storage import codec, layout


@st.composite
def grids_and_cells(draw):
    """A schema with random extents and chunk sizes (edge chunks often clipped) and random cells."""
    ndim = draw(st.integers(1, 4))
    dims = []
    for k in range(ndim):
        low = draw(st.integers(-50, 50))
        chunk = draw(st.integers(1, 7))
        length = draw(st.integers(1, 4 * chunk + 3))
        origin = low - draw(st.integers(0, chunk - 1))  # a first chunk clipped at the low end too
        dims.append(Dimension(f"d{k}", low, low + length - 1, chunk, origin))
    schema = ArraySchema("A", (Attribute("v", "float64"),), tuple(dims))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    shape = schema.shape
    total = int(np.prod(shape))
    n = draw(st.integers(0, min(total, 300)))
    flat = np.sort(rng.choice(total, size=n, replace=False))
    low = np.array([d.low for d in schema.dimensions])
    coords = np.stack(np.unravel_index(flat, shape), axis=1).reshape(n, ndim) + low
    return schema, coords, rng.normal(size=n)


def _fragments(schema: ArraySchema, coords: np.ndarray, values: np.ndarray) -> list[codec.Fragment]:
    """Sparse fragments, one per chunk, with offsets by np.ravel_multi_index (the reference encoding)."""
    grid = ChunkGrid.of(schema)
    origin = np.array([d.chunk_origin for d in schema.dimensions])
    length = np.array([d.chunk_length for d in schema.dimensions])
    chunk_of = (coords - origin) // length
    fragments = []
    for chunk in sorted({tuple(int(c) for c in row) for row in chunk_of}):
        mine = np.all(chunk_of == chunk, axis=1)
        box_low, box_high = grid.chunk_bounds(chunk)
        assert np.all(coords[mine] >= box_low) and np.all(coords[mine] <= box_high)
        local = coords[mine] - np.asarray(box_low)
        offsets = np.ravel_multi_index(tuple(local.T), grid.chunk_shape(chunk)).astype(np.int64)
        order = np.argsort(offsets)
        fragments.append(codec.Fragment(chunk, offsets[order], {"v": values[mine][order]}, {}))
    return fragments


@settings(max_examples=200, deadline=None)
@given(case=grids_and_cells(), batch_rows=st.integers(1, 6), group_cells=st.sampled_from([1, 10, 10**9]))
def test_fragments_decode_to_their_cells(case, batch_rows: int, group_cells: int) -> None:
    """Decoded from one record batch, and from a table of many batches decoded in groups of at least
    ``group_cells`` cells."""
    schema, coords, values = case
    table = layout.encode_fragments(_fragments(schema, coords, values), schema, version=1)
    split = pa.Table.from_batches(table.to_batches(max_chunksize=batch_rows), table.schema)
    default = layout.DECODE_GROUP_CELLS
    try:
        layout.DECODE_GROUP_CELLS = group_cells
        decoded = [layout.fragments_to_cells(table, schema), layout.fragments_to_cells(split, schema)]
    finally:
        layout.DECODE_GROUP_CELLS = default
    for cells in decoded:
        got = np.stack([np.asarray(cells.column(d)) for d in schema.dimension_names], axis=1)
        got = got.reshape(cells.num_rows, schema.ndim)
        order = np.lexsort(got.T[::-1])
        assert np.array_equal(got[order], coords)
        assert np.array_equal(np.asarray(cells.column("v"))[order], values)


def test_boxes_of_mixed_sizes_in_one_batch() -> None:
    """Interior and edge chunks of every clipped dimension in one batch, checked cell by cell."""
    dims = (Dimension("a", 0, 10, 4), Dimension("b", -3, 9, 5, -5), Dimension("c", 0, 6, 3))
    schema = ArraySchema("A", (Attribute("v", "float64"),), dims)  # clipped chunks in every dimension
    grid = ChunkGrid.of(schema)
    everything = np.stack(
        np.meshgrid(*[np.arange(d.low, d.high + 1) for d in schema.dimensions], indexing="ij"), -1
    )
    coords = everything.reshape(-1, 3)[::3]
    values = np.arange(len(coords), dtype=np.float64)
    fragments = _fragments(schema, coords, values)
    assert len({grid.chunk_shape(f.chunk) for f in fragments}) > 4
    table = layout.encode_fragments(fragments, schema, version=1)
    cells = layout.fragments_to_cells(table, schema)
    got = np.stack([np.asarray(cells.column(d)) for d in schema.dimension_names], axis=1)
    order = np.lexsort(got.T[::-1])
    assert np.array_equal(got[order], coords)
    assert np.array_equal(np.asarray(cells.column("v"))[order], values)
