"""Window aggregates and window views tried as a new user and an adversary, against a plain Python
brute force recomputed from the array's cells after every batch (Python integers, math.fsum)."""

from __future__ import annotations

import math

import pytest

from arrayviews import window
from arrayviews.model.errors import ValidationError

FUNCTIONS = ("count", "sum", "avg", "min", "max")


def brute_force(cells: dict, before, after) -> dict:
    """Per stored cell, {function: value} over the stored cells in ``[x - before, x + after]``: Python
    integers for integer values (exact sums), math.fsum for floats; nulls are left out of sum, avg,
    min and max (all null: None) and counted by count(*)."""
    result = {}
    for x in cells:
        inside = [
            value
            for y, value in cells.items()
            if all(xk - b <= yk <= xk + a for xk, yk, b, a in zip(x, y, before, after, strict=True))
        ]
        known = [v for v in inside if v is not None]
        row = {"count": len(inside), "sum": None, "avg": None, "min": None, "max": None}
        if known:
            total = sum(known) if all(isinstance(v, int) for v in known) else math.fsum(known)
            row.update(sum=total, avg=total / len(known), min=min(known), max=max(known))
        result[x] = row
    return result


def outputs(frame, dims, attribute: str = "v") -> dict:
    """{cell: {function: value}} of a window frame with the default output names."""
    names = {f: "count" if f == "count" else f"{attribute}_{f}" for f in FUNCTIONS}
    result = {}
    for row in frame.to_dict("records"):
        values = {}
        for function, column in names.items():
            value = row[column]
            value = value.item() if hasattr(value, "item") else value
            values[function] = (
                None if value is None or (isinstance(value, float) and math.isnan(value)) else value
            )
        result[tuple(int(row[d]) for d in dims)] = values
    return result


def assert_matches(frame, cells: dict, before, after, dims) -> None:
    """The frame holds exactly the brute force's cells and values (integers exactly, floats to 1e-12)."""
    got, want = outputs(frame, dims), brute_force(cells, before, after)
    assert sorted(got) == sorted(want)
    for cell, row in want.items():
        for function, value in row.items():
            if isinstance(value, int) and function != "avg":
                assert got[cell][function] == value, (cell, function)
            else:
                assert got[cell][function] == pytest.approx(value, rel=1e-12, abs=1e-12), (cell, function)


def calls(attribute: str = "v") -> list[str]:
    return [f"{f}({'*' if f == 'count' else attribute})" for f in FUNCTIONS]


@pytest.fixture(scope="module")
def local(spark, tmp_path_factory):
    """One in-process warehouse for the module (each test makes its own arrays)."""
    import arrayviews

    return arrayviews.connect(str(tmp_path_factory.mktemp("windows") / "w"), spark=spark, execution="local")


def _insert(array, cells: dict) -> None:
    dims = array.dims
    columns = {d: [c[k] for c in cells] for k, d in enumerate(dims)}
    columns["v"] = list(cells.values())
    array.insert(columns, on_conflict="replace")


def test_far_apart_cells_with_a_long_reach_over_an_unbounded_dimension(local) -> None:
    """Two clusters 10**13 cells apart along ``i=0:*:5`` with a reach of 2**40 cells: the halo was
    cut to the box of the chunks present, which still names 2 * 10**12 chunks (1.14 TiB asked for,
    MemoryError) for the window, the view's creation and its refresh; only chunks holding cells
    can be targets."""
    far = 10**13
    array = local.create_array("far<v:int64>[i=0:*:5; j=0:3:2]")
    cells = {(0, 0): 1, (3, 1): 2, (far, 3): 4, (far + 2, 0): 8}
    _insert(array, cells)
    before, after = (0, 1), (2**40, 0)
    flat = [0, 2**40, 1, 0]
    assert_matches(array.window(flat, *calls()).to_pandas(), cells, before, after, array.dims)
    view = local.create_view("far_w", window("far", flat, calls()))
    assert_matches(view.to_pandas(), cells, before, after, array.dims)
    batch = {(far - 2**40, 2): 16, (far + 4, 1): 32}
    _insert(array, batch)
    cells.update(batch)
    array.delete({"i": [0], "j": [0]})
    del cells[(0, 0)]
    view.refresh("baseline")
    assert_matches(view.to_pandas(), cells, before, after, array.dims)


def test_bad_window_view_definitions_are_named_and_change_nothing(local) -> None:
    """Before: an odd count of extents raised a bare IndexError, a misspelt dimension in extents by
    name was silently left out (a window of (0, 0) there), and one aggregate given as a string was
    read character by character."""
    array = local.create_array("defs<v:int64>[i=0:9:3; j=0:9:3]")
    _insert(array, {(1, 1): 3, (2, 2): 4})
    views = local.views()
    with pytest.raises(ValidationError, match="even count"):
        window("defs", [1, 1, 1], ["avg(v)"])
    with pytest.raises(ValidationError, match="no dimension named 'x'"):
        window("defs", {"x": (1, 1)}, ["avg(v)"], dimensions=["i", "j"])
    assert local.views() == views
    single = local.create_view("defs_one", window("defs", {"i": (1, 0)}, "sum(v)", dimensions=["i", "j"]))
    assert single.to_pandas().v_sum.tolist() == [3, 4]  # j has no reach: (2,2) does not see (1,1)
