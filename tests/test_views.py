"""Materialized array views against an independent brute-force reference.

Every expected view is computed here, with numpy (all pairs) or scipy's cKDTree, from a dict model of
the base arrays that the tests keep alongside their writes; shape membership comes from each shape's
definition (norm, ranges, mask), never from arrayviews. Views are maintained by ``refresh()`` after
batches of inserts, deletes and updates and must equal the reference exactly for integers and to 1e-9
relative for floats (nulls alike, NaN alike).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.spatial import cKDTree

import arrayviews
from arrayviews.model.errors import NotFoundError, ValidationError
from arrayviews.model.mappings import AxisMap, Mapping
from arrayviews.model.shapes import L1, Linf, Shape, box, product, stencil
from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate, WindowViewDefinition

Cell = tuple[int, ...]
Member = Callable[[np.ndarray], np.ndarray]  # offsets (..., d) -> bool (...)


# -- the model of a base array ----------------------------------------------------------------------


@dataclass
class Base:
    """A base array and, alongside, the dict of its cells that every reference is computed from."""

    array: object
    dims: tuple[str, ...]
    types: dict[str, str]  # attribute -> "int64" | "float64"
    cells: dict[Cell, dict[str, object]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.array.name

    def table(self, cells: dict[Cell, dict[str, object]]) -> pa.Table:
        coords = sorted(cells)
        columns = {d: pa.array([c[k] for c in coords], pa.int64()) for k, d in enumerate(self.dims)}
        for name, kind in self.types.items():
            raw = [cells[c].get(name) for c in coords]
            mask = np.array([x is None for x in raw], dtype=bool)
            arrow = pa.int64() if kind == "int64" else pa.float64()
            filled = [(0 if kind == "int64" else 0.0) if x is None else x for x in raw]
            columns[name] = pa.array(filled, arrow, mask=mask)
        return pa.table(columns)

    def insert(self, cells: dict[Cell, dict[str, object]]) -> None:
        assert not set(cells) & set(self.cells), "insert only new cells"
        if cells:
            self.array.insert(self.table(cells))
            self.cells.update(cells)

    def replace(self, cells: dict[Cell, dict[str, object]]) -> None:
        if cells:
            self.array.insert(self.table(cells), on_conflict="replace")
            self.cells.update(cells)

    def delete(self, coords: Sequence[Cell]) -> None:
        coords = sorted(set(coords))
        if coords:
            self.array.delete(np.array(coords, dtype=np.int64).reshape(-1, len(self.dims)))
            for c in coords:
                del self.cells[c]

    def delete_all(self) -> None:
        self.array.delete(box={d: (-(10**6), 10**6) for d in self.dims})
        self.cells.clear()

    def coords(self) -> np.ndarray:
        return np.array(sorted(self.cells), dtype=np.int64).reshape(-1, len(self.dims))


def make_base(db, text: str, dims: Sequence[str], types: dict[str, str]) -> Base:
    return Base(db.create_array(text), tuple(dims), dict(types))


def random_value(rng: np.random.Generator, kind: str, nulls: bool = True, nan: bool = True) -> object:
    roll = rng.random()
    if nulls and roll < 0.1:
        return None
    if kind == "int64":
        return int(rng.integers(-50, 51))
    if nan and roll > 0.95:
        return float("nan")
    return float(np.round(rng.normal(0, 10), 3))


def random_cells(
    rng: np.random.Generator,
    ranges: Sequence[tuple[int, int]],
    count: int,
    types: dict[str, str],
    exclude=(),
    nulls: bool = True,
    nan: bool = True,
) -> dict[Cell, dict[str, object]]:
    """``count`` distinct random cells in the box ``ranges`` (not in ``exclude``) with random values."""
    space = list(itertools.product(*[range(lo, hi + 1) for lo, hi in ranges]))
    free = [c for c in space if c not in set(exclude)]
    chosen = rng.choice(len(free), size=min(count, len(free)), replace=False) if free else []
    return {
        tuple(int(x) for x in free[k]): {a: random_value(rng, t, nulls, nan) for a, t in types.items()}
        for k in chosen
    }


def pick(rng: np.random.Generator, cells, count: int) -> list[Cell]:
    present = sorted(cells)
    if not present:
        return []
    return [present[k] for k in rng.choice(len(present), size=min(count, len(present)), replace=False)]


# -- the reference similarity view -----------------------------------------------------------------------


def identity(coords: np.ndarray) -> np.ndarray:
    return coords


def reference_similarity(
    left: Base,
    right: Base,
    member: Member,
    aggregates: Sequence[ViewAggregate],
    mapping: Callable[[np.ndarray], np.ndarray] = identity,
) -> dict[Cell, dict[str, object]]:
    """For every left cell with at least one pair, the aggregates over its pairs (all pairs, numpy)."""
    lc, rc = left.coords(), right.coords()
    if len(lc) == 0 or len(rc) == 0:
        return {}
    left_keys = [tuple(int(x) for x in c) for c in lc]
    right_keys = [tuple(int(x) for x in c) for c in rc]
    pairs = member(rc[None, :, :] - mapping(lc)[:, None, :])
    out = {}
    for i, cell in enumerate(left_keys):
        partners = [right_keys[j] for j in np.flatnonzero(pairs[i])]
        if not partners:
            continue
        row = {}
        for agg in aggregates:
            if agg.attribute is None:
                row[agg.alias] = len(partners)
                continue
            if agg.side == "left":
                x = left.cells[cell][agg.attribute]
                vals = [] if x is None else [x] * len(partners)
            else:
                vals = [right.cells[p][agg.attribute] for p in partners]
                vals = [v for v in vals if v is not None]
            row[agg.alias] = aggregate_values(agg.function, vals)
        out[cell] = row
    return out


def aggregate_values(function: str, vals: list) -> object:
    if function == "count":
        return len(vals)
    if not vals:
        return None
    floats = isinstance(vals[0], float)
    has_nan = floats and any(math.isnan(v) for v in vals)
    if function in ("sum", "avg"):
        total = (float("nan") if has_nan else math.fsum(vals)) if floats else sum(vals)
        return total if function == "sum" else total / len(vals)
    if has_nan:
        return float("nan")
    return min(vals) if function == "min" else max(vals)


def view_content(view) -> tuple[list[str], dict[Cell, dict[str, object]]]:
    """The view as read by users (to_arrow keeps nulls and NaN apart)."""
    table = view.to_arrow()
    dims = list(view.schema.dimension_names)
    attrs = [c for c in table.column_names if c not in dims]
    rows = table.to_pylist()
    content = {tuple(r[d] for d in dims): {a: r[a] for a in attrs} for r in rows}
    assert len(content) == len(rows), "a view cell appears twice"
    return attrs, content


def same_value(actual: object, expected: object) -> bool:
    if expected is None or actual is None:
        return actual is None and expected is None
    if isinstance(expected, float) or isinstance(actual, float):
        if math.isnan(expected) or math.isnan(actual):
            return math.isnan(expected) and math.isnan(actual)
        return math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-9)
    return actual == expected and type(actual) is type(expected)


def assert_view(view, expected: dict[Cell, dict[str, object]], aliases: Sequence[str] | None = None) -> None:
    attrs, actual = view_content(view)
    if aliases is not None:
        assert attrs == list(aliases), "the view shows exactly its public aggregates"
    missing = sorted(set(expected) - set(actual))
    extra = sorted(set(actual) - set(expected))
    assert not missing and not extra, f"cells missing {missing[:5]}, unexpected {extra[:5]}"
    wrong = [
        (cell, name, actual[cell][name], value)
        for cell, row in expected.items()
        for name, value in row.items()
        if not same_value(actual[cell][name], value)
    ]
    assert not wrong, f"{len(wrong)} wrong values, e.g. {wrong[:5]}"


def l1(radius: int) -> Member:
    return lambda o: np.abs(o).sum(axis=-1) <= radius


def linf(radius: int) -> Member:
    return lambda o: np.abs(o).max(axis=-1) <= radius


def in_box(ranges) -> Member:
    low = np.array([lo for lo, _ in ranges])
    high = np.array([hi for _, hi in ranges])
    return lambda o: np.all((o >= low) & (o <= high), axis=-1)


def in_mask(mask: np.ndarray, centre) -> Member:
    centre, size = np.asarray(centre), np.asarray(mask.shape)

    def member(o: np.ndarray) -> np.ndarray:
        index = o + centre
        valid = np.all((index >= 0) & (index < size), axis=-1)
        out = np.zeros(o.shape[:-1], dtype=bool)
        out[valid] = mask[tuple(np.moveaxis(index[valid], -1, 0))]
        return out

    return member


def kdtree_counts(left: np.ndarray, right: np.ndarray, radius: int, p: float) -> np.ndarray:
    return cKDTree(right).query_ball_point(left, radius + 0.5, p=p, return_length=True)


COUNT = ViewAggregate("count", None, None, "cnt")


# -- Figure 1 of the paper ---------------------------------------------------------------------------------

# A<r:int64, s:int64>[i=1:6:2; j=1:8:2]: the text gives A[1,2] = <2,5> and A[1,3] = <6,3>, the only
# adjacent pair; six cells in six of the twelve 2x2 chunks. The other four cells are placed so that the
# rest of the example holds: the 7 inserted cells create two new chunks and change 11 view cells.
FIGURE_CELLS = {
    (1, 2): {"r": 2, "s": 5},
    (1, 3): {"r": 6, "s": 3},
    (3, 2): {"r": 1, "s": 4},
    (4, 5): {"r": 3, "s": 1},
    (6, 4): {"r": 5, "s": 2},
    (2, 6): {"r": 4, "s": 6},
}
FIGURE_VIEW = {(1, 2): 2, (1, 3): 2, (3, 2): 1, (4, 5): 1, (6, 4): 1, (2, 6): 1}
FIGURE_INSERTS = [(1, 5), (2, 1), (2, 3), (4, 2), (4, 4), (5, 4), (5, 6)]
# Counted by hand: each cell plus its non-empty neighbours in the cross L1(1).
FIGURE_VIEW_AFTER = {
    (1, 2): 2, (1, 3): 3, (3, 2): 2, (4, 5): 2, (6, 4): 2, (2, 6): 1,
    (1, 5): 1, (2, 1): 1, (2, 3): 2, (4, 2): 2, (4, 4): 3, (5, 4): 3, (5, 6): 1,
}  # fmt: skip
FIGURE_QUERY = (
    "SELECT COUNT(*) AS cnt FROM A A1 SIMILARITY JOIN A A2 ON (A1.i = A2.i) AND (A1.j = A2.j) "
    "WITH SHAPE L1(1) GROUP BY A1.i, A1.j"
)


def counts(view) -> dict[Cell, int]:
    return {cell: row["cnt"] for cell, row in view_content(view)[1].items()}


def test_figure1_count_view(db) -> None:
    base = make_base(db, "A<r:int64, s:int64>[i=1:6:2; j=1:8:2]", "ij", {"r": "int64", "s": "int64"})
    base.insert(FIGURE_CELLS)
    assert len(base.array.chunks()) == 6
    view = db.create_view("V", SimilarityViewDefinition("A", "A", L1(1), (COUNT,)))
    assert counts(view) == FIGURE_VIEW
    assert_view(view, reference_similarity(base, base, l1(1), (COUNT,)), ["cnt"])
    assert db.views() == ["V"]
    assert isinstance(view.definition, SimilarityViewDefinition)
    assert view.status()["pending"] is False
    assert view.status()["bases"] == [{"base": "A", "reflected": 1, "current": 1, "pending_batches": 0}]

    # Figure 1 (b): seven new cells, two of them in new chunks
    base.insert({c: {"r": 1, "s": 1} for c in FIGURE_INSERTS})
    assert len(base.array.chunks()) == 8
    status = view.status()
    assert status["pending"] is True
    assert status["bases"] == [{"base": "A", "reflected": 1, "current": 2, "pending_batches": 1}]
    assert counts(view) == FIGURE_VIEW, "a view changes only when refreshed"
    versions = len(view.versions())
    result = view.refresh("baseline")
    assert result.committed and result.strategy == "baseline"
    assert len(view.versions()) == versions + 1
    after = counts(view)
    assert after == FIGURE_VIEW_AFTER
    changed = {c for c in after if FIGURE_VIEW.get(c) != after[c]}
    assert len(changed) == 11  # "the number of cells in view V impacted by the insertions is 11"
    assert_view(view, reference_similarity(base, base, l1(1), (COUNT,)))
    cells = base.coords()
    np.testing.assert_array_equal([after[tuple(c)] for c in cells], kdtree_counts(cells, cells, 1, p=1))
    assert view.status()["pending"] is False
    assert view.status()["bases"] == [{"base": "A", "reflected": 2, "current": 2, "pending_batches": 0}]

    # nothing pending: returns at once and commits nothing
    before = view.versions()
    started = time.perf_counter()
    result = view.refresh("baseline")
    assert time.perf_counter() - started < 2.0
    assert not result.committed
    assert view.refresh("full").committed is False
    assert view.versions().equals(before)
    assert view.verify() is True

    # the statement form defines the same view; dropping a view leaves the others
    text_view = db.create_view("W", FIGURE_QUERY)
    assert counts(text_view) == FIGURE_VIEW_AFTER
    assert sorted(db.views()) == ["V", "W"]
    db.drop_view("W")
    assert db.views() == ["V"]
    with pytest.raises(NotFoundError):
        db.view("W")
    assert counts(db.view("V")) == FIGURE_VIEW_AFTER
    with pytest.raises(ValidationError):
        db.view("V").insert(base.table({(1, 1): {"r": 0, "s": 0}}))  # views are written by refresh only


# -- every aggregate on both sides, under inserts, updates and deletes ---------------------------------------

ADDITIVE_AGGREGATES = (
    COUNT,
    *(
        ViewAggregate(function, side, attribute, f"{function}_{side[0]}{attribute}")
        for side in ("left", "right")
        for attribute in ("x", "y")
        for function in ("count", "sum", "avg")
    ),
)
EXTREME_AGGREGATES = (
    ViewAggregate("count", "right", "y", "n"),
    *(
        ViewAggregate(function, side, attribute, f"{function}_{side[0]}{attribute}")
        for side in ("left", "right")
        for attribute in ("x", "y")
        for function in ("min", "max")
    ),
)


@pytest.mark.slow
def test_every_aggregate_under_insert_update_delete(db) -> None:
    """count/sum/avg (maintained by adding and subtracting) and min/max (recomputed under deletes) on
    both sides, int and float attributes with nulls and NaN, under every kind of batch."""
    rng = np.random.default_rng(11)
    types = {"x": "int64", "y": "float64"}
    ranges = [(0, 13), (0, 13)]
    base = make_base(db, "A<x:int64 NULL, y:float64 NULL>[i=0:13:4; j=0:13:5]", "ij", types)
    base.insert(random_cells(rng, ranges, 60, types))
    shape, member = box([(-1, 2), (-1, 1)]), in_box([(-1, 2), (-1, 1)])
    views = {
        aggregates: db.create_view(name, SimilarityViewDefinition("A", "A", shape, aggregates))
        for name, aggregates in (("VA", ADDITIVE_AGGREGATES), ("VE", EXTREME_AGGREGATES))
    }

    def refresh(strategy: str = "baseline") -> None:
        for view in views.values():
            result = view.refresh(strategy)
            assert result.committed and result.strategy == strategy

    def check() -> None:
        for aggregates, view in views.items():
            expected = reference_similarity(base, base, member, aggregates)
            assert_view(view, expected, [a.alias for a in aggregates])

    check()
    # 1. new cells
    base.insert(random_cells(rng, ranges, 15, types, exclude=base.cells))
    refresh()
    check()
    # 2. updates: new values, value <-> null, numbers <-> NaN, and unchanged copies
    updates = {c: {a: random_value(rng, t) for a, t in types.items()} for c in pick(rng, base.cells, 20)}
    nans = [c for c, row in base.cells.items() if isinstance(row["y"], float) and math.isnan(row["y"])]
    updates.update({c: {"x": 1, "y": 0.5} for c in nans[:2]})  # NaN leaves the sums
    updates.update({c: dict(base.cells[c]) for c in pick(rng, base.cells, 5) if c not in updates})
    base.replace(updates)
    refresh()
    check()

    # 3. deletes of the current extremes, with more writes pending
    def extreme_cells(attribute: str) -> list[Cell]:
        present = [(v, c) for c, row in base.cells.items() if isinstance(v := row[attribute], (int, float))]
        present = [(v, c) for v, c in present if not (isinstance(v, float) and math.isnan(v))]
        return [min(present)[1], max(present)[1]]

    base.delete(extreme_cells("x") + extreme_cells("y") + pick(rng, base.cells, 8))
    base.replace(
        {c: {a: random_value(rng, t) for a, t in types.items()} for c in pick(rng, base.cells, 5)}
        | random_cells(rng, ranges, 5, types, exclude=base.cells)
    )
    bases = views[ADDITIVE_AGGREGATES].status()["bases"]
    assert bases[0]["current"] - bases[0]["reflected"] == 2
    refresh()
    check()
    # 4. full recomputation with changes pending
    base.delete(pick(rng, base.cells, 6))
    refresh("full")
    check()
    assert all(view.verify() for view in views.values())
    # 5. deleting every cell empties the views
    base.delete_all()
    refresh()
    for view in views.values():
        assert view.to_pandas().empty
        assert view.count() == 0
        assert view.verify() is True
    # 6. and cells coming back fill them again
    base.insert(random_cells(rng, ranges, 12, types))
    refresh()
    check()


# -- random shapes on random sparse arrays --------------------------------------------------------------------


@st.composite
def random_shapes(draw, ndim: int) -> tuple[Shape, Member, str]:
    kind = draw(st.sampled_from(["L1", "Linf", "box", "product", "stencil"]))
    if kind == "L1":
        r = draw(st.integers(0, 2))
        return L1(r, ndim), l1(r), kind
    if kind == "Linf":
        r = draw(st.integers(0, 2))
        return Linf(r, ndim), linf(r), kind
    if kind == "box" or (kind == "product" and ndim == 1):
        ranges = []
        for _ in range(ndim):
            low = draw(st.integers(-3, 1))
            ranges.append((low, low + draw(st.integers(0, 3))))
        return box(ranges), in_box(ranges), "box"
    if kind == "product":  # a range on the first dimension times a cross on the others
        first = (draw(st.integers(-3, 0)), draw(st.integers(0, 1)))
        rest = l1(1)
        return (
            product(box([first]), L1(1, ndim - 1)),
            lambda o: (o[..., 0] >= first[0]) & (o[..., 0] <= first[1]) & rest(o[..., 1:]),
            kind,
        )
    size = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    flat = draw(st.lists(st.booleans(), min_size=int(np.prod(size)), max_size=int(np.prod(size))))
    mask = np.array(flat, dtype=bool).reshape(size)
    centre = tuple(draw(st.integers(0, s - 1)) for s in size)
    return stencil(mask, centre), in_mask(mask, centre), kind


@st.composite
def view_cases(draw):
    ndim = draw(st.sampled_from([1, 2, 2, 3]))
    extent = {1: 40, 2: 14, 3: 6}[ndim]
    lows = [draw(st.integers(-5, 5)) for _ in range(ndim)]
    chunks = [draw(st.integers(2, 6)) for _ in range(ndim)]
    shape = draw(random_shapes(ndim))
    view_chunks = draw(st.one_of(st.none(), st.lists(st.integers(2, 7), min_size=ndim, max_size=ndim)))
    density = draw(st.sampled_from([0.05, 0.15, 0.35]))
    aggregates = draw(st.sampled_from([RANDOM_ADDITIVE, RANDOM_EXTREMES]))
    seed = draw(st.integers(0, 2**32 - 1))
    return ndim, extent, lows, chunks, shape, view_chunks, density, aggregates, seed


RANDOM_ADDITIVE = (
    COUNT,
    ViewAggregate("sum", "right", "v", "sum_v"),
    ViewAggregate("avg", "right", "w", "avg_w"),
    ViewAggregate("sum", "left", "w", "sum_lw"),
    ViewAggregate("count", "left", "v", "count_lv"),
)
RANDOM_EXTREMES = (
    COUNT,
    ViewAggregate("max", "right", "w", "max_w"),
    ViewAggregate("avg", "left", "w", "avg_lw"),
    ViewAggregate("min", "left", "v", "min_lv"),
)
_names = itertools.count()


@pytest.fixture(scope="module")
def mdb(spark, tmp_path_factory):
    """One warehouse shared by the examples of a property test (each uses fresh array names)."""
    return arrayviews.connect(str(tmp_path_factory.mktemp("views") / "warehouse"), spark=spark)


@pytest.mark.slow
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(view_cases())
def test_random_shapes_and_batches(mdb, case) -> None:
    ndim, extent, lows, chunks, (shape, member, kind), view_chunks, density, aggregates, seed = case
    rng = np.random.default_rng(seed)
    n = next(_names)
    dims = ["i", "j", "k"][:ndim]
    ranges = [(lo, lo + extent - 1) for lo in lows]
    text = "; ".join(f"{d}={lo}:{hi}:{c}" for d, (lo, hi), c in zip(dims, ranges, chunks, strict=True))
    types = {"v": "int64", "w": "float64"}
    base = make_base(mdb, f"R{n}<v:int64 NULL, w:float64 NULL>[{text}]", dims, types)
    volume = extent**ndim
    base.insert(random_cells(rng, ranges, max(1, int(volume * density)), types))
    definition = SimilarityViewDefinition(base.name, base.name, shape, aggregates)
    view = mdb.create_view(f"RV{n}", definition, chunks=view_chunks)
    if view_chunks is not None:
        assert [d.chunk_length for d in view.schema.dimensions] == view_chunks
    assert_view(view, reference_similarity(base, base, member, aggregates))
    # one refresh for a batch of inserts, updates and deletes
    batch = max(2, int(volume * density / 4))
    base.insert(random_cells(rng, ranges, batch, types, exclude=base.cells))
    base.replace(
        {c: {a: random_value(rng, t) for a, t in types.items()} for c in pick(rng, base.cells, batch)}
    )
    base.delete(pick(rng, base.cells, batch))
    view.refresh("baseline")
    expected = reference_similarity(base, base, member, aggregates)
    assert_view(view, expected)
    if kind in ("L1", "Linf"):  # the counts once more, from cKDTree
        radius = next(r for r in range(3) if shape == (L1(r, ndim) if kind == "L1" else Linf(r, ndim)))
        cells = base.coords()
        tree = kdtree_counts(cells, cells, radius, p=1 if kind == "L1" else np.inf) if len(cells) else []
        assert [expected[tuple(int(x) for x in c)]["cnt"] for c in cells] == list(tree)


# -- two arrays, a mapping between resolutions, a view with its own chunking -------------------------------


def halve(coords: np.ndarray) -> np.ndarray:
    """B.x = A.i / 2, B.y = A.j / 2 - 1 (floor division)."""
    return np.floor_divide(coords, 2) - np.array([0, 1])


def double(coords: np.ndarray) -> np.ndarray:
    return coords * 2


FINE_AGGREGATES = (
    COUNT,
    ViewAggregate("sum", "right", "b", "sum_b"),
    ViewAggregate("min", "right", "b", "min_b"),
    ViewAggregate("max", "left", "a", "max_a"),
    ViewAggregate("avg", "left", "a", "avg_a"),
)
COARSE_AGGREGATES = (
    COUNT,
    ViewAggregate("sum", "right", "a", "sum_a"),
    ViewAggregate("max", "right", "a", "max_a"),
    ViewAggregate("avg", "left", "b", "avg_b"),
    ViewAggregate("count", "right", "a", "count_a"),
)


@pytest.mark.slow
def test_two_arrays_at_different_resolutions(db) -> None:
    """alpha A (fine) joined with beta B twice as coarse (B.x = A.i / 2, B.y = A.j / 2 - 1), and the reverse view B -> A
    (each coarse cell aggregates its 2x2 fine cells) stored with its own chunking."""
    rng = np.random.default_rng(5)
    fine = make_base(db, "A<a:int64 NULL>[i=0:15:4; j=0:15:4]", "ij", {"a": "int64"})
    coarse = make_base(db, "B<b:float64>[x=0:7:2; y=0:7:3]", "xy", {"b": "float64"})
    fine_ranges, coarse_ranges = [(0, 15), (0, 15)], [(0, 7), (0, 7)]
    fine.insert(random_cells(rng, fine_ranges, 50, fine.types))
    coarse.insert(random_cells(rng, coarse_ranges, 14, coarse.types, nulls=False, nan=False))
    down = Mapping((AxisMap("x", "i", divisor=2), AxisMap("y", "j", divisor=2, offset=-1)))
    up = Mapping((AxisMap("i", "x", multiplier=2), AxisMap("j", "y", multiplier=2)))
    fine_view = db.create_view("FV", SimilarityViewDefinition("A", "B", L1(1), FINE_AGGREGATES, down))
    block = box([(0, 1), (0, 1)])
    coarse_view = db.create_view(
        "CV", SimilarityViewDefinition("B", "A", block, COARSE_AGGREGATES, up), chunks=[3, 5]
    )
    assert [d.chunk_length for d in coarse_view.schema.dimensions] == [3, 5]
    assert coarse_view.schema.dimension_names == ("x", "y")
    assert sorted(db.views()) == ["CV", "FV"]

    def check() -> None:
        assert_view(fine_view, reference_similarity(fine, coarse, l1(1), FINE_AGGREGATES, halve))
        assert_view(
            coarse_view,
            reference_similarity(coarse, fine, in_box([(0, 1), (0, 1)]), COARSE_AGGREGATES, double),
        )

    def refresh_both() -> None:
        for view in (fine_view, coarse_view):
            assert view.status()["pending"]
            view.refresh("baseline")
            assert not view.status()["pending"]

    check()
    # changes to alpha only
    fine.insert(random_cells(rng, fine_ranges, 12, fine.types, exclude=fine.cells))
    fine.delete(pick(rng, fine.cells, 6))
    refresh_both()
    check()
    # changes to beta only: updates and deletes
    coarse.replace({c: {"b": float(np.round(rng.normal(), 3))} for c in pick(rng, coarse.cells, 5)})
    coarse.delete(pick(rng, coarse.cells, 3))
    refresh_both()
    check()
    # changes to both, one of them twice
    fine.replace({c: {"a": int(rng.integers(-9, 10))} for c in pick(rng, fine.cells, 8)})
    coarse.insert(random_cells(rng, coarse_ranges, 6, coarse.types, exclude=coarse.cells, nulls=False))
    fine.insert(random_cells(rng, fine_ranges, 6, fine.types, exclude=fine.cells))
    status = fine_view.status()
    assert {r["base"]: r["current"] - r["reflected"] for r in status["bases"]} == {"A": 2, "B": 1}
    refresh_both()
    check()
    assert fine_view.verify() and coarse_view.verify()
    # the versions the views reflect are expired: no delta can be formed, refreshes recompute
    fine.delete(pick(rng, fine.cells, 4))
    fine.array.expire_versions()
    for view in (fine_view, coarse_view):
        assert view.refresh("baseline").strategy == "full"
    check()


# -- window views -------------------------------------------------------------------------------------------

WINDOW_FUNCTIONS = ("count", "sum", "avg", "min", "max")


def reference_window(base: Base, before, after) -> dict[Cell, dict[str, object]]:
    cells = base.coords()
    out = {}
    if len(cells) == 0:
        return out
    low = cells[:, None, :] - np.asarray(before)
    high = cells[:, None, :] + np.asarray(after)
    inside = np.all((cells[None, :, :] >= low) & (cells[None, :, :] <= high), axis=2)
    values = [base.cells[tuple(int(x) for x in c)]["v"] for c in cells]
    for row, cell in enumerate(cells):
        window = [values[k] for k in np.flatnonzero(inside[row])]
        out[tuple(int(x) for x in cell)] = {
            "count" if f == "count" else f"v_{f}": aggregate_values(f, window) for f in WINDOW_FUNCTIONS
        }
    return out


@pytest.mark.slow
def test_window_view_refreshes(db) -> None:
    rng = np.random.default_rng(3)
    types = {"v": "float64"}
    ranges = [(0, 19), (0, 11)]
    base = make_base(db, "G<v:float64>[t=0:19:5; s=0:11:4]", ["t", "s"], types)
    base.insert(random_cells(rng, ranges, 70, types, nulls=False, nan=False))
    before, after = (2, 1), (0, 1)
    aggregates = ("count(*)", "sum(v)", "avg(v)", "min(v)", "max(v)")
    view = db.create_view("WV", WindowViewDefinition("G", before, after, aggregates))
    names = ["count", "v_sum", "v_avg", "v_min", "v_max"]
    assert_view(view, reference_window(base, before, after), names)
    # a local insert touches few view chunks
    base.insert(random_cells(rng, [(0, 3), (0, 3)], 4, types, exclude=base.cells, nulls=False, nan=False))
    result = view.refresh("baseline")
    assert result.committed and 0 < result.view_chunks_rewritten < 15
    assert_view(view, reference_window(base, before, after))
    # updates and deletes, including the current extremes
    values = {c: row["v"] for c, row in base.cells.items()}
    extremes = [min(values, key=values.get), max(values, key=values.get)]
    base.replace({c: {"v": float(np.round(rng.normal(0, 10), 3))} for c in pick(rng, base.cells, 6)})
    base.delete(extremes + pick(rng, base.cells, 4))
    view.refresh("baseline")
    assert_view(view, reference_window(base, before, after))
    base.insert(random_cells(rng, ranges, 5, types, exclude=base.cells, nulls=False, nan=False))
    assert view.refresh("full").committed
    assert_view(view, reference_window(base, before, after))
    assert view.verify() is True
    assert view.refresh("baseline").committed is False


# -- known bugs ----------------------------------------------------------------------------------------------


def test_left_sum_with_infinite_value(db) -> None:
    base = make_base(db, "F<y:float64>[i=0:7:4]", "i", {"y": "float64"})
    base.insert({(0,): {"y": float("inf")}, (1,): {"y": 1.0}})
    aggregates = (
        COUNT,
        ViewAggregate("sum", "left", "y", "ls"),
        ViewAggregate("avg", "left", "y", "la"),
    )
    view = db.create_view("FV", SimilarityViewDefinition("F", "F", L1(1, 1), aggregates))
    base.delete([(1,)])  # cell 0 loses its neighbour: 2 pairs -> 1 pair, sum 2 * inf -> 1 * inf
    view.refresh("baseline")
    # regression: count * value maintained by adding gave NaN here (inf - inf); expected inf
    assert_view(view, reference_similarity(base, base, l1(1), aggregates))


def test_view_versions_count_cells(db) -> None:
    base = make_base(db, "C<v:int64>[i=0:7:4]", "i", {"v": "int64"})
    base.insert({(0,): {"v": 1}, (1,): {"v": 2}, (5,): {"v": 3}})
    view = db.create_view("CV", SimilarityViewDefinition("C", "C", L1(1, 1), (COUNT,)))
    assert view.count() == 3
    assert int(view.versions()["cells_total"].iloc[-1]) == 3
    base.insert({(6,): {"v": 4}})  # chunk 1 rewritten: 1 cell becomes 2
    base.delete([(0,)])  # chunk 0: 2 cells become 1
    view.refresh("baseline")
    assert view.count() == 3
    assert int(view.versions()["cells_total"].iloc[-1]) == 3
    view.refresh(strategy="full")
    assert int(view.versions()["cells_total"].iloc[-1]) == view.count() == 3
