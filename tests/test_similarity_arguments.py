"""Bad arguments to similarity joins and similarity views are refused by what they are, with
nothing created; one aggregate may be given as a string (checked against a brute-force count)."""

from __future__ import annotations

import pytest

from arrayviews import L1, ValidationError, similarity


@pytest.fixture
def grid(db):
    A = db.create_array("sa<v:int64>[i=0:19:5; j=0:19:5]")
    A.insert({"i": [1, 2, 9], "j": [1, 1, 9], "v": [1, 2, 3]})
    return db


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("sa", "sa", "L1", 1), r"similarity join: the shape is a Shape such as L1\(radius, ndim\).* got 'L1'"),
        (("sa", "sa", 5), "the shape is a Shape .* got 5"),
        (("sa", "sa", L1(1, 2), 1), r"a mapping is None \(dimensions matched in order\).* got 1"),
        (("sa", "sa", L1(1, 2), "ij"), "a mapping is None .* got 'ij'"),
        (("sa", 3, L1(1, 2)), "similarity join: the right array is an Array or an array name, got int"),
    ],
)
def test_a_bad_join_argument_is_named(grid, args, message):
    """Before: TypeError "'int' object is not iterable", AttributeError "'str' object has no
    attribute 'ndim'", or "array 3 cannot be read ... run `arrayviews check`"."""
    with pytest.raises(ValidationError, match=message):
        grid.similarity_join(*args)


def test_a_bad_view_shape_creates_nothing_and_one_aggregate_may_be_a_string(grid):
    with pytest.raises(ValidationError, match="similarity view of sa and sa: the shape is a Shape .* got 'L1'"):
        grid.create_view("sv", similarity("sa", "sa", "L1", ["count(*) as n"]))
    assert grid.views() == []
    view = grid.create_view("sv", similarity("sa", "sa", L1(1, 2), "count(*) as n"))
    cells = [(1, 1), (2, 1), (9, 9)]
    expected = {c: sum(abs(c[0] - o[0]) + abs(c[1] - o[1]) <= 1 for o in cells) for c in cells}
    frame = view.to_pandas()
    assert dict(zip(zip(frame["i"], frame["j"], strict=True), frame["n"], strict=True)) == expected
