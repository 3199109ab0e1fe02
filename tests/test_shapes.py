"""Similarity shapes (model/shapes.py) against their definitions: L1/Linf balls from the norms, boxes,
products and stencils from the ranges and masks that define them, and the set operations against
Python set operations on offset tuples. No Spark."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.model.errors import ValidationError
from arrayviews.model.shapes import L1, Linf, Shape, box, product, stencil


def offset_set(shape: Shape) -> set[tuple[int, ...]]:
    return {tuple(int(x) for x in row) for row in shape.offsets()}


def shape_of(offsets: set[tuple[int, ...]], ndim: int) -> Shape:
    """A shape holding exactly ``offsets`` (built independently of the set operations)."""
    if not offsets:
        return Shape(np.zeros((1,) * ndim, dtype=bool), (0,) * ndim)
    points = np.array(sorted(offsets), dtype=np.int64).reshape(-1, ndim)
    low = points.min(axis=0)
    mask = np.zeros(tuple(points.max(axis=0) - low + 1), dtype=bool)
    mask[tuple((points - low).T)] = True
    return Shape(mask, tuple(int(-x) for x in low))


def grid(radius: int, ndim: int) -> list[tuple[int, ...]]:
    return list(itertools.product(range(-radius, radius + 1), repeat=ndim))


# -- balls ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ndim", [1, 2, 3])
@pytest.mark.parametrize("radius", [0, 1, 2, 3])
def test_balls_match_norm_definitions(radius: int, ndim: int) -> None:
    candidates = grid(radius + 2, ndim)
    l1 = {o for o in candidates if sum(abs(x) for x in o) <= radius}
    linf = {o for o in candidates if max(abs(x) for x in o) <= radius}
    assert offset_set(L1(radius, ndim)) == l1
    assert offset_set(Linf(radius, ndim)) == linf
    assert len(L1(radius, ndim)) == len(l1)
    assert len(Linf(radius, ndim)) == (2 * radius + 1) ** ndim
    # membership of arbitrary offsets, inside and outside the bounding box
    probe = np.array(candidates, dtype=np.int64).reshape(-1, ndim)
    np.testing.assert_array_equal(L1(radius, ndim).contains(probe), np.abs(probe).sum(axis=1) <= radius)
    np.testing.assert_array_equal(Linf(radius, ndim).contains(probe), np.abs(probe).max(axis=1) <= radius)
    assert L1(radius, ndim).before == (radius,) * ndim == L1(radius, ndim).after
    assert L1(radius, ndim).ndim == ndim


def test_paper_cross_is_five_cells() -> None:
    """The paper's L1(1) in 2-D: the centre and its 4 direct neighbours."""
    assert offset_set(L1(1)) == {(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)}
    assert len(Linf(1)) == 9


@pytest.mark.parametrize("radius", [-1, 1.5, True, "1"])
def test_ball_radius_must_be_a_non_negative_integer(radius) -> None:
    with pytest.raises(ValidationError):
        L1(radius)
    with pytest.raises(ValidationError):
        Linf(radius)


def test_ball_needs_a_dimension() -> None:
    with pytest.raises(ValidationError):
        L1(1, 0)


# -- boxes, products, stencils ------------------------------------------------------------------------

ranges_1d = st.tuples(st.integers(-4, 4), st.integers(0, 4)).map(lambda t: (t[0], t[0] + t[1]))


@settings(max_examples=60, deadline=None)
@given(st.lists(ranges_1d, min_size=1, max_size=3))
def test_box_is_the_product_of_its_ranges(ranges) -> None:
    shape = box(ranges)
    expected = set(itertools.product(*[range(lo, hi + 1) for lo, hi in ranges]))
    assert offset_set(shape) == expected
    assert shape.ndim == len(ranges)
    assert shape.before == tuple(-lo for lo, _ in ranges)
    assert shape.after == tuple(hi for _, hi in ranges)
    probe = np.array(grid(6, len(ranges)), dtype=np.int64)
    inside = np.all((probe >= [lo for lo, _ in ranges]) & (probe <= [hi for _, hi in ranges]), axis=1)
    np.testing.assert_array_equal(shape.contains(probe), inside)


def test_box_of_previous_steps() -> None:
    """``box([(-200, 0)])``: the previous 200 steps and the current one."""
    shape = box([(-200, 0)])
    assert len(shape) == 201
    assert shape.before == (200,) and shape.after == (0,)
    assert offset_set(shape) == {(t,) for t in range(-200, 1)}


def test_empty_box_range_is_rejected() -> None:
    with pytest.raises(ValidationError):
        box([(2, 1)])


@st.composite
def masks(draw, max_ndim: int = 3):
    ndim = draw(st.integers(1, max_ndim))
    size = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    flat = draw(st.lists(st.booleans(), min_size=int(np.prod(size)), max_size=int(np.prod(size))))
    mask = np.array(flat, dtype=bool).reshape(size)
    centre = tuple(draw(st.integers(-1, s)) for s in size)  # the centre may lie outside the mask
    return mask, centre


@settings(max_examples=80, deadline=None)
@given(masks())
def test_stencil_offsets_are_mask_cells_minus_centre(case) -> None:
    mask, centre = case
    shape = stencil(mask, centre)
    expected = {tuple(int(x) - c for x, c in zip(row, centre, strict=True)) for row in np.argwhere(mask)}
    assert offset_set(shape) == expected
    assert len(shape) == int(mask.sum())
    probe = np.array(grid(5, mask.ndim), dtype=np.int64)
    index = probe + np.asarray(centre)
    valid = np.all((index >= 0) & (index < np.asarray(mask.shape)), axis=1)
    inside = np.zeros(len(probe), dtype=bool)
    inside[valid] = mask[tuple(index[valid].T)]
    np.testing.assert_array_equal(shape.contains(probe), inside)


def test_stencil_default_centre_is_the_middle() -> None:
    mask = np.zeros((3, 5), dtype=bool)
    mask[1, 2] = mask[0, 4] = True
    assert offset_set(stencil(mask)) == {(0, 0), (-1, 2)}


def test_stencil_errors() -> None:
    with pytest.raises(ValidationError):
        stencil(np.ones((2, 3), dtype=bool))  # no middle cell
    with pytest.raises(ValidationError):
        stencil(np.ones((3, 3), dtype=int))  # not boolean
    with pytest.raises(ValidationError):
        Shape(np.ones((3, 3), dtype=bool), (1,))  # centre of the wrong length


@settings(max_examples=40, deadline=None)
@given(st.lists(masks(max_ndim=2), min_size=1, max_size=3))
def test_product_is_the_cartesian_product(cases) -> None:
    parts = [stencil(mask, centre) for mask, centre in cases]
    shape = product(*parts)
    expected = {
        tuple(itertools.chain.from_iterable(combo))
        for combo in itertools.product(*[sorted(offset_set(p)) for p in parts])
    }
    if not expected:  # a product with an empty factor is empty
        assert len(shape) == 0
    else:
        assert offset_set(shape) == expected
    assert shape.ndim == sum(p.ndim for p in parts)


def test_product_of_time_range_and_cross() -> None:
    shape = product(box([(-3, 0)]), L1(1, 2))
    expected = {(t, a, b) for t in range(-3, 1) for a, b in offset_set(L1(1))}
    assert offset_set(shape) == expected
    assert len(shape) == 20
    with pytest.raises(ValidationError):
        product()


# -- set operations -------------------------------------------------------------------------------------


@st.composite
def offset_sets(draw, ndim: int):
    values = st.tuples(*[st.integers(-3, 3)] * ndim)
    return draw(st.sets(values, max_size=12))


@st.composite
def two_sets(draw):
    ndim = draw(st.integers(1, 3))
    return ndim, draw(offset_sets(ndim)), draw(offset_sets(ndim))


@settings(max_examples=150, deadline=None)
@given(two_sets())
def test_set_operations_match_python_sets(case) -> None:
    ndim, a, b = case
    left, right = shape_of(a, ndim), shape_of(b, ndim)
    assert offset_set(left) == a and offset_set(right) == b
    results = {
        "union": (left.union(right), left | right, a | b),
        "difference": (left.difference(right), left - right, a - b),
        "symmetric_difference": (left.symmetric_difference(right), left ^ right, a ^ b),
        "intersection": (left.intersection(right), left & right, a & b),
    }
    for name, (method, operator, expected) in results.items():
        assert offset_set(method) == expected, name
        assert method == operator, name
        # equal offset sets give equal (and equally hashed) shapes, whatever their construction
        assert method == shape_of(expected, ndim), name
        assert hash(method) == hash(shape_of(expected, ndim)), name
        assert len(method) == len(expected), name


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 3).flatmap(lambda d: st.tuples(st.just(d), offset_sets(d))))
def test_reflected_negates_offsets(case) -> None:
    ndim, offsets = case
    shape = shape_of(offsets, ndim)
    reflected = shape.reflected()
    assert offset_set(reflected) == {tuple(-x for x in o) for o in offsets}
    assert reflected.reflected() == shape
    if offsets:
        assert reflected.before == shape.after and reflected.after == shape.before


def test_reflected_of_one_sided_box() -> None:
    shape = box([(2, 4), (-1, 0)])
    assert offset_set(shape.reflected()) == {(-x, -y) for x in range(2, 5) for y in range(-1, 1)}


def test_set_operations_need_equal_dimensions() -> None:
    with pytest.raises(ValidationError):
        L1(1, 2) | L1(1, 3)
    with pytest.raises(ValidationError):
        L1(1, 1) - Linf(1, 2)


def test_delta_shape_example() -> None:
    """Linf(1) minus L1(1) in 2-D: the four diagonal neighbours."""
    assert offset_set(Linf(1) - L1(1)) == {(1, 1), (1, -1), (-1, 1), (-1, -1)}
    assert offset_set(L1(2) ^ Linf(1)) == offset_set(L1(2)) ^ offset_set(Linf(1))
    assert L1(1) | Linf(1) == Linf(1)
    assert L1(1) & Linf(1) == L1(1)


# -- equality and hashing -------------------------------------------------------------------------------


def test_equal_offset_sets_give_equal_shapes() -> None:
    square = np.ones((3, 3), dtype=bool)
    same = [Linf(1), box([(-1, 1), (-1, 1)]), stencil(square), product(Linf(1, 1), Linf(1, 1))]
    for a in same:
        for b in same:
            assert a == b
            assert hash(a) == hash(b)
    assert len(set(same)) == 1
    assert L1(0, 2) == Linf(0, 2) == box([(0, 0), (0, 0)])
    # padding with empty rows does not change the shape
    padded = np.zeros((5, 5), dtype=bool)
    padded[1:4, 1:4] = True
    assert stencil(padded) == Linf(1)
    assert stencil(padded, (1, 1)) != Linf(1)  # a different centre is a different offset set
    assert stencil(padded, (1, 1)) == box([(0, 2), (0, 2)])


def test_different_shapes_are_unequal() -> None:
    shapes = [L1(1), Linf(1), L1(2), L1(1, 3), box([(0, 1), (0, 1)]), box([(-1, 0), (0, 1)])]
    for a, b in itertools.combinations(shapes, 2):
        assert a != b
    assert L1(1) != offset_set(L1(1))  # not equal to non-shapes
    assert len(set(shapes)) == len(shapes)


def test_empty_shapes_are_equal() -> None:
    a = L1(1) - Linf(1)
    b = Shape(np.zeros((4, 2), dtype=bool), (3, 0))
    assert len(a) == 0 and len(b) == 0
    assert a == b and hash(a) == hash(b)
    assert offset_set(a) == set()
    assert not a.contains(np.zeros((1, 2), dtype=np.int64)).any()


def test_shapes_are_immutable() -> None:
    shape = L1(1)
    with pytest.raises(ValueError):
        shape.stencil[0, 0] = True
