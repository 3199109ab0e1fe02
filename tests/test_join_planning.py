"""The chunk boxes a similarity-join refresh plans from (``JoinSpec.right_chunk_box`` and
``JoinSpec.left_chunk_box``) against a brute force over every pair of cells: every chunk pair that
some left cell and right cell within the shape form lies inside the boxes, for any chunking, axis
mapping (multiplier, divisor, offset, axes swapped) and box shape."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.mappings import AxisMap, Mapping
from arrayviews.model.schema_parser import parse_schema
from arrayviews.model.shapes import box
from arrayviews.operators.simjoin import JoinSpec


@st.composite
def joins(draw):
    def schema(name: str, dims: tuple[str, str]):
        parts = []
        for dim in dims:
            low = draw(st.integers(-6, 6))
            extent = draw(st.integers(1, 11))
            parts.append(f"{dim}={low}:{low + extent - 1}:{draw(st.integers(1, 5))}")
        return parse_schema(f"{name}<v:float64>[{'; '.join(parts)}]")

    left, right = schema("L", ("i", "j")), schema("R", ("x", "y"))
    axes = []
    for target in ("x", "y"):
        axes.append(
            AxisMap(
                target,
                draw(st.sampled_from(["i", "j"])),
                multiplier=draw(st.sampled_from([-3, -2, -1, 1, 2, 3])),
                divisor=draw(st.integers(1, 3)),
                offset=draw(st.integers(-4, 4)),
            )
        )
    ranges = []
    for _ in range(2):
        low = draw(st.integers(-3, 3))
        ranges.append((low, low + draw(st.integers(0, 3))))
    return left, right, Mapping(tuple(axes)), ranges


def cells(schema) -> np.ndarray:
    spans = [range(d.low, d.high + 1) for d in schema.dimensions]
    return np.array(list(itertools.product(*spans)), dtype=np.int64).reshape(-1, 2)


def chunk_pairs(left, right, mapping: Mapping, ranges) -> set[tuple[tuple, tuple]]:
    """Every (left chunk, right chunk) of a left cell a and right cell b with b - M(a) in the box."""
    a, b = cells(left), cells(right)
    mapped = np.empty((len(a), 2), np.int64)
    for k, axis in enumerate(mapping.axes):
        source = a[:, ["i", "j"].index(axis.source)]
        mapped[:, k] = (source * axis.multiplier) // axis.divisor + axis.offset
    offsets = b[None, :, :] - mapped[:, None, :]
    inside = np.ones(offsets.shape[:2], dtype=bool)
    for k, (low, high) in enumerate(ranges):
        inside &= (offsets[:, :, k] >= low) & (offsets[:, :, k] <= high)
    rows, columns = np.nonzero(inside)
    left_chunks = ChunkGrid.of(left).chunk_of(a[rows])
    right_chunks = ChunkGrid.of(right).chunk_of(b[columns])
    return {(tuple(p), tuple(q)) for p, q in zip(left_chunks.tolist(), right_chunks.tolist(), strict=True)}


def inside(chunk: tuple, chunk_box) -> bool:
    return chunk_box is not None and all(a <= c <= b for c, (a, b) in zip(chunk, chunk_box, strict=True))


@settings(max_examples=200, deadline=None)
@given(joins(), st.randoms(use_true_random=False))
def test_chunk_boxes_hold_every_reachable_chunk(join, random) -> None:
    left, right, mapping, ranges = join
    spec = JoinSpec(left, right, box(ranges), mapping)
    pairs = chunk_pairs(left, right, mapping, ranges)
    all_left = sorted({tuple(c) for c in ChunkGrid.of(left).chunk_of(cells(left)).tolist()})
    all_right = sorted({tuple(c) for c in ChunkGrid.of(right).chunk_of(cells(right)).tolist()})
    chosen_left = random.sample(all_left, random.randint(1, len(all_left)))
    chosen_right = random.sample(all_right, random.randint(1, len(all_right)))
    right_box = spec.right_chunk_box(np.array(chosen_left))
    left_box = spec.left_chunk_box(np.array(chosen_right))
    for p, q in pairs:
        if p in chosen_left:
            assert inside(q, right_box), (p, q, right_box)
        if q in chosen_right:
            assert inside(p, left_box), (p, q, left_box)
    # every pair the planner itself forms is reachable in the brute force too (the boxes prune, the
    # planner's chunk-level pairs stay a superset of the real ones)
    assert all(inside(q, spec.right_chunks_of(p)) for p, q in pairs)


def test_a_refresh_plans_from_the_metadata_of_chunks_in_reach_only(spark, tmp_path, monkeypatch) -> None:
    """One cell inserted into one chunk of an 8 x 8-chunk array: the refresh reads the fragment
    metadata of the chunks around it (3 x 3 at most, per side of the join), not of every chunk, and
    the view still equals its recomputation and a brute-force neighbour count."""
    import arrayviews
    from arrayviews.model.shapes import L1
    from arrayviews.operators import source
    from arrayviews.storage import layout
    from arrayviews.views.definition import similarity

    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution="local")
    array = db.create_array("P<v:float64>[i=0:39:5; j=0:39:5]")
    present = np.ones((40, 40), bool)
    present[17, 17] = False
    i, j = np.nonzero(present)
    array.insert({"i": i, "j": j, "v": np.ones(len(i))})
    view = db.create_view("near", similarity("P", "P", L1(1), ["count(*) as cnt"]))
    array.insert({"i": [17], "j": [17], "v": [2.0]})
    metadata_rows: list[int] = []
    original = source.read_metadata  # every listing of fragment metadata (storage/fragment_metadata.py)

    def recording(uris, columns, schema, row_filter=None):
        table = original(uris, columns, schema, row_filter)
        if columns == layout.metadata_columns(array.schema):
            metadata_rows.append(table.num_rows)
        return table

    monkeypatch.setattr(source, "read_metadata", recording)
    result = view.refresh("baseline")
    assert result.committed
    assert metadata_rows and max(metadata_rows) <= 9, metadata_rows
    monkeypatch.undo()
    counts = view.to_pandas()
    assert len(counts) == 1600
    # brute force: every cell of the full 40 x 40 grid counts itself and its L1 neighbours in the grid
    got = {(int(r.i), int(r.j)): int(r.cnt) for r in counts.itertuples(index=False)}
    for a in range(40):
        for b in range(40):
            near = [(a, b), (a - 1, b), (a + 1, b), (a, b - 1), (a, b + 1)]
            assert got[(a, b)] == sum(1 for x, y in near if 0 <= x < 40 and 0 <= y < 40), (a, b)
    assert view.verify()
