"""A baseline refresh plans from the delta's cells, not from whole delta chunks: it rewrites only
the view chunks a changed cell's shape reaches, and the view still equals brute force."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arrayviews.model.mappings import AxisMap, Mapping
from arrayviews.model.shapes import L1, Linf, box
from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate, similarity

SIDE, CHUNK = 24, 6
NAMES = itertools.count()
SHAPES = {
    "L1(1)": L1(1),
    "Linf(2)": Linf(2),
    "up-left box": box([(-3, 0), (-1, 2)]),  # not symmetric, zero offset on its edge
    "away": box([(2, 4), (1, 1)]),  # without the zero offset: cells may lack any pair
}


def offsets(shape) -> np.ndarray:
    """The shape's offsets (n, 2), read off its stencil independently of the code under test."""
    return np.argwhere(shape.stencil) - np.asarray(shape.centre)


def brute_counts(present: np.ndarray, shape) -> dict[tuple[int, int], int]:
    """For every present cell p, the present cells q with q - p in the shape (cells without pairs
    have no view cell)."""
    counts = {}
    for i, j in np.argwhere(present):
        n = 0
        for di, dj in offsets(shape):
            a, b = i + di, j + dj
            if 0 <= a < SIDE and 0 <= b < SIDE and present[a, b]:
                n += 1
        if n:
            counts[(int(i), int(j))] = n
    return counts


def reachable_chunks(changed: np.ndarray, shape) -> set[tuple[int, int]]:
    """View chunks whose cells a change can alter: each changed cell d's own chunk, and the chunks
    of the cells p with d - p in the shape."""
    chunks = set()
    for i, j in changed:
        chunks.add((int(i) // CHUNK, int(j) // CHUNK))
        for di, dj in offsets(shape):
            a, b = i - di, j - dj
            if 0 <= a < SIDE and 0 <= b < SIDE:
                chunks.add((int(a) // CHUNK, int(b) // CHUNK))
    return chunks


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shape_name=st.sampled_from(sorted(SHAPES)),
    seed=st.integers(0, 2**32 - 1),
    added=st.lists(st.tuples(st.integers(0, SIDE - 1), st.integers(0, SIDE - 1)), min_size=1, max_size=6),
    removed_corner=st.none() | st.tuples(st.integers(0, SIDE - 2), st.integers(0, SIDE - 2)),
)
def test_a_refresh_rewrites_only_chunks_a_changed_cell_reaches(db, shape_name, seed, added, removed_corner) -> None:
    shape = SHAPES[shape_name]
    name = f"B{next(NAMES)}"
    array = db.create_array(f"{name}<v:float64>[i=0:{SIDE - 1}:{CHUNK}; j=0:{SIDE - 1}:{CHUNK}]")
    present = np.random.default_rng(seed).random((SIDE, SIDE)) < 0.3
    cells = np.argwhere(present)
    array.insert({"i": cells[:, 0], "j": cells[:, 1], "v": np.ones(len(cells))})
    view = db.create_view(f"{name}_v", similarity(name, name, shape, ["count(*) as cnt"]))

    changed = []
    new = np.unique(np.array(added), axis=0)
    fresh = new[~present[new[:, 0], new[:, 1]]]
    array.insert({"i": new[:, 0], "j": new[:, 1], "v": np.full(len(new), 2.0)}, on_conflict="replace")
    present[new[:, 0], new[:, 1]] = True
    changed.extend(fresh.tolist())
    if removed_corner is not None:
        a, b = removed_corner
        gone = np.argwhere(present[a : a + 2, b : b + 2]) + [a, b]
        array.delete(box={"i": (a, a + 1), "j": (b, b + 1)})
        present[a : a + 2, b : b + 2] = False
        changed.extend(gone.tolist())

    result = view.refresh("baseline")
    frame = view.to_pandas()
    got = {(int(i), int(j)): int(n) for i, j, n in zip(frame["i"], frame["j"], frame["cnt"], strict=True)}
    assert got == brute_counts(present, shape)
    # a cell rewritten with its own value (replace) is a delta too: count the whole batch as changed
    changed.extend(new.tolist())
    assert result.view_chunks_rewritten <= len(reachable_chunks(np.array(changed).reshape(-1, 2), shape))
    db.drop_view(f"{name}_v")
    db.drop_array(name)


FINE, COARSE = (16, 16), (8, 16)
#: beta.x = floor(alpha.i / 2), beta.y = 15 - alpha.j: a coarser axis and a mirrored one, so the
#: reach of a box of alpha cells is found through a decreasing map too.
MIRROR = Mapping((AxisMap("x", "i", divisor=2), AxisMap("y", "j", multiplier=-1, offset=15)))


def mapped_counts(fine: np.ndarray, coarse: np.ndarray, shape) -> dict[tuple[int, int], int]:
    """For every present alpha cell, the present beta cells b with b - M(a) in the shape."""
    counts = {}
    for i, j in np.argwhere(fine):
        x, y = i // 2, 15 - j
        n = 0
        for dx, dy in offsets(shape):
            a, b = x + dx, y + dy
            if 0 <= a < COARSE[0] and 0 <= b < COARSE[1] and coarse[a, b]:
                n += 1
        if n:
            counts[(int(i), int(j))] = n
    return counts


def _changes(shape_of: tuple[int, int]):
    return st.lists(st.tuples(st.integers(0, shape_of[0] - 1), st.integers(0, shape_of[1] - 1)), max_size=5)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shape_name=st.sampled_from(sorted(SHAPES)),
    seed=st.integers(0, 2**32 - 1),
    fine_flips=_changes(FINE),
    coarse_flips=_changes(COARSE),
)
def test_a_mapped_view_of_two_arrays_equals_brute_force_after_edge_changes(
    db, shape_name, seed, fine_flips, coarse_flips
) -> None:
    """Cells added or removed anywhere (chunk edges included) on either side of a view through a
    coarsening and mirroring mapping: the refreshed view equals brute force."""
    shape = SHAPES[shape_name]
    k = next(NAMES)
    alpha = db.create_array(f"A{k}<a:float64>[i=0:15:4; j=0:15:4]")
    beta = db.create_array(f"B{k}<b:float64>[x=0:7:3; y=0:15:5]")
    rng = np.random.default_rng(seed)
    fine, coarse = rng.random(FINE) < 0.35, rng.random(COARSE) < 0.35
    for array, present in ((alpha, fine), (beta, coarse)):
        cells = np.argwhere(present)
        names = array.schema.dimension_names
        attribute = array.schema.attributes[0].name
        array.insert({names[0]: cells[:, 0], names[1]: cells[:, 1], attribute: np.ones(len(cells))})
    view = db.create_view(
        f"M{k}", SimilarityViewDefinition(f"A{k}", f"B{k}", shape, [ViewAggregate("count", None, None, "cnt")], MIRROR)
    )
    for array, present, flips in ((alpha, fine, fine_flips), (beta, coarse, coarse_flips)):
        names = array.schema.dimension_names
        attribute = array.schema.attributes[0].name
        for cell in dict.fromkeys(flips):  # each flipped cell is added if absent, removed if present
            if present[cell]:
                array.delete({names[0]: [cell[0]], names[1]: [cell[1]]})
            else:
                array.insert({names[0]: [cell[0]], names[1]: [cell[1]], attribute: [1.0]})
            present[cell] = not present[cell]
    view.refresh("baseline")
    frame = view.to_pandas()
    got = {(int(i), int(j)): int(n) for i, j, n in zip(frame["i"], frame["j"], frame["cnt"], strict=True)}
    assert got == mapped_counts(fine, coarse, shape)
    db.drop_view(f"M{k}")
    db.drop_array(f"A{k}")
    db.drop_array(f"B{k}")
