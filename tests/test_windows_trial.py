"""Window aggregates and window views tried as a new user and an adversary, against a plain Python
brute force recomputed from the array's cells after every batch (Python integers, math.fsum)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
            if value is None:
                assert got[cell][function] is None, (cell, function)
            elif isinstance(value, int) and function != "avg":
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
    spread = {(far + 5 * k, k % 4): k - 20 for k in range(40)}  # 40 chunks: the halo plans from cells
    _insert(array, spread)
    cells.update(spread)
    view.refresh("baseline")
    assert_matches(view.to_pandas(), cells, before, after, array.dims)
    assert_matches(array.window(flat, *calls()).to_pandas(), cells, before, after, array.dims)


def test_bad_window_view_definitions_are_named_and_change_nothing(local) -> None:
    """Before: an odd count of extents raised a bare IndexError, a misspelt dimension in extents by
    name was silently left out (a window of (0, 0) there), and one aggregate given as a string was
    read character by character; numpy integer extents failed with a TypeError when stored."""
    array = local.create_array("defs<v:int64>[i=0:9:3; j=0:9:3]")
    _insert(array, {(1, 1): 3, (2, 2): 4})
    views = local.views()
    with pytest.raises(ValidationError, match="even count"):
        window("defs", [1, 1, 1], ["avg(v)"])
    with pytest.raises(ValidationError, match="no dimension named 'x'"):
        window("defs", {"x": (1, 1)}, ["avg(v)"], dimensions=["i", "j"])
    assert local.views() == views
    extents = np.array([1, 0, 1, 0])  # numpy integers: before, a TypeError from storing the definition
    assert local.create_view("defs_np", window("defs", extents, ["count(*)"])).to_pandas()[
        "count"
    ].tolist() == [1, 2]
    single = local.create_view("defs_one", window("defs", {"i": (1, 0)}, "sum(v)", dimensions=["i", "j"]))
    assert single.to_pandas().v_sum.tolist() == [3, 4]  # j has no reach: (2,2) does not see (1,1)


#: (schema after the name, before, after): 1-D to 3-D, chunk length 1, windows larger than a chunk
#: and than the array, asymmetric and even/odd extents, an unbounded dimension, nullable values.
SHAPES = [
    ("<v:int64>[i=0:11:1]", (2,), (0,)),
    ("<v:int64>[i=-3:8:4]", (20,), (30,)),
    ("<v:float64>[i=0:8:3; j=0:8:4]", (4, 1), (0, 5)),
    ("<v:int64 null>[i=0:5:2; j=0:5:2]", (1, 1), (1, 1)),
    ("<v:int64>[i=0:4:2; j=0:4:3; k=0:4:1]", (1, 0, 2), (2, 1, 0)),
    ("<v:int64>[i=0:*:3; j=0:5:4]", (5, 1), (2, 0)),
]
_names = iter(range(10**6))


@st.composite
def batches(draw, highs: tuple[int, ...], kind: str):
    """A few batches over the cells ``0..highs`` of the array: inserts (replacing), deletes of cells
    or of a box, dense blocks."""
    cell = st.tuples(*[st.integers(0, h) for h in highs])
    if kind == "float":
        value = st.floats(-1e6, 1e6, allow_nan=False).map(lambda x: round(x, 3))
    elif kind == "null":
        value = st.one_of(st.none(), st.integers(-50, 50))
    else:
        value = st.integers(-(2**40), 2**40)
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        what = draw(st.sampled_from(["insert", "delete", "box", "dense"]))
        if what == "insert":
            steps.append(("insert", draw(st.dictionaries(cell, value, min_size=1, max_size=6))))
        elif what == "delete":
            steps.append(("delete", draw(st.lists(cell, min_size=1, max_size=4, unique=True))))
        elif what == "box":
            low = draw(cell)
            steps.append(
                (
                    "box",
                    low,
                    tuple(min(h, x + draw(st.integers(0, 4))) for x, h in zip(low, highs, strict=True)),
                )
            )
        else:
            low = draw(cell)
            shape = tuple(draw(st.integers(1, min(3, h - x + 1))) for x, h in zip(low, highs, strict=True))
            steps.append(("dense", low, shape, draw(st.integers(-9, 9))))
    return steps


def _apply(array, cells: dict, step, kind: str) -> None:
    """One batch on the array and on the reference dictionary alike."""
    dims = array.dims
    if step[0] == "insert":
        _insert(array, step[1])
        cells.update(step[1])
    elif step[0] == "delete":
        array.delete({d: [c[k] for c in step[1]] for k, d in enumerate(dims)})
        for c in step[1]:
            cells.pop(c, None)
    elif step[0] == "box":
        array.delete(box={d: (lo, hi) for d, lo, hi in zip(dims, step[1], step[2], strict=True)})
        for c in list(cells):
            if all(lo <= x <= hi for x, lo, hi in zip(c, step[1], step[2], strict=True)):
                del cells[c]
    else:
        _, low, shape, start = step
        values = (np.arange(math.prod(shape)).reshape(shape) + start).astype(
            np.float64 if kind == "float" else np.int64
        )
        array.write_dense(values, origin=list(low), on_conflict="replace")
        for index in np.ndindex(*shape):
            cells[tuple(lo + x for lo, x in zip(low, index, strict=True))] = values[index].item()


def _kind(schema: str) -> str:
    return "float" if "float" in schema else "null" if "null" in schema else "int"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_window_view_follows_random_batches_in_every_dimension(local, data) -> None:
    """A window view refreshed (auto, full or baseline, chosen at random) after random batches in
    any dimension equals the brute force over the array's cells after every batch."""
    schema, before, after = data.draw(st.sampled_from(SHAPES))
    name = f"h{next(_names)}"
    array = local.create_array(name + schema)
    highs = tuple(min(8, d.high) for d in array.schema.dimensions)
    kind = _kind(schema)
    cells: dict = {}
    first = data.draw(
        st.dictionaries(st.tuples(*[st.integers(0, h) for h in highs]), st.integers(-9, 9), max_size=8)
    )
    if first:
        _insert(array, first)
        cells.update(first)
    flat = [x for pair in zip(before, after, strict=True) for x in pair]
    view = local.create_view(name + "_w", window(name, flat, calls()))
    assert_matches(view.to_pandas(), cells, before, after, array.dims)
    for step in data.draw(batches(highs, kind)):
        _apply(array, cells, step, kind)
        view.refresh(data.draw(st.sampled_from(["auto", "full", "baseline"])))
        assert_matches(view.to_pandas(), cells, before, after, array.dims)


def filtered(present: np.ndarray, values: np.ndarray, before, after) -> dict:
    """count, sum, min, max of every window by scipy.ndimage (a box of ones correlated, minimum and
    maximum filters with the empty cells at +-inf), each array over the whole grid."""
    from scipy import ndimage

    size = tuple(b + a + 1 for b, a in zip(before, after, strict=True))
    origin = tuple(b - s // 2 for b, s in zip(before, size, strict=True))
    box = np.ones(size)
    as_float = np.where(present, values, 0).astype(np.float64)  # |values| < 2**20: exact in float64

    def correlate(array):
        return ndimage.correlate(array, box, mode="constant", cval=0.0, origin=origin)

    return {
        "count": correlate(present.astype(np.float64)),
        "sum": correlate(as_float),
        "min": ndimage.minimum_filter(
            np.where(present, values, np.inf), size=size, origin=origin, mode="constant", cval=np.inf
        ),
        "max": ndimage.maximum_filter(
            np.where(present, values, -np.inf), size=size, origin=origin, mode="constant", cval=-np.inf
        ),
    }


def assert_filtered(frame, present: np.ndarray, values: np.ndarray, before, after) -> None:
    """The view frame holds the present cells only, with the scipy filters' values there."""
    want = filtered(present, values, before, after)
    index = tuple(np.asarray(frame[d]) for d in ("i", "j"))
    assert sorted(zip(*index, strict=True)) == sorted(zip(*np.nonzero(present), strict=True))
    np.testing.assert_array_equal(frame["count"], want["count"][index])
    np.testing.assert_array_equal(frame.v_sum, want["sum"][index])
    np.testing.assert_allclose(frame.v_avg, want["sum"][index] / want["count"][index], rtol=1e-15)
    np.testing.assert_array_equal(frame.v_min, want["min"][index])
    np.testing.assert_array_equal(frame.v_max, want["max"][index])


@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_dense_view_batch_then_its_inverse_against_scipy(local, dtype) -> None:
    """41 x 34 cells in 7 x 9 chunks (edge chunks cut), holes and one empty chunk, an asymmetric
    window: a dense block across four chunks' corners and a deleted box that empties a chunk and
    holds the largest and smallest values, then the exact inverse batch: the view follows scipy's
    filters and returns to its first state bit for bit (min and max included)."""
    rng = np.random.default_rng(7)
    shape, before, after = (41, 34), (3, 2), (1, 4)
    values = rng.integers(-(2**19), 2**19, shape).astype(dtype)
    if dtype == "float64":
        values = values / 8  # exact binary fractions: sums stay exact
    present = rng.random(shape) > 0.2
    present[7:14, 9:18] = False  # an empty chunk
    values[3, 3], values[5, 1] = 2**19, -(2**19)  # the extremes, in the box deleted below
    present[3, 3] = present[5, 1] = True
    name = f"dense_{dtype}"
    array = local.create_array(f"{name}<v:{dtype}>[i=0:40:7; j=0:33:9]")
    array.write_dense(np.ma.masked_array(values, ~present))
    view = local.create_view(name + "_w", window(name, [3, 1, 2, 4], calls()))
    first = view.to_pandas()
    assert_filtered(first, present, values, before, after)

    block = (slice(12, 17), slice(16, 21))  # across the corner of chunks (1, 1), (1, 2), (2, 1), (2, 2)
    new_values, new_present = values.copy(), present.copy()
    new_values[block] = np.arange(25).reshape(5, 5) - 12
    new_present[block] = True
    new_present[0:7, 0:9] = False  # chunk (0, 0) emptied, with both extremes
    array.write_dense(new_values[block], origin=[12, 16], on_conflict="replace")
    array.delete(box={"i": (0, 6), "j": (0, 8)})
    view.refresh("baseline")
    assert_filtered(view.to_pandas(), new_present, new_values, before, after)

    restore = (slice(0, 7), slice(0, 9))
    array.write_dense(np.ma.masked_array(values[restore], ~present[restore]), origin=[0, 0])
    array.write_dense(
        np.ma.masked_array(values[block], ~present[block]), origin=[12, 16], on_conflict="replace"
    )
    gone = np.argwhere(new_present[block] & ~present[block]) + [12, 16]
    array.delete({"i": gone[:, 0].tolist(), "j": gone[:, 1].tolist()})
    view.refresh("baseline")
    again = view.to_pandas()
    assert_filtered(again, present, values, before, after)
    assert again.equals(first)


def test_a_reach_leaving_int64_over_a_wide_dimension_is_refused(local) -> None:
    """Over ``i=-(2**62 - 1):2**62 - 1`` a reach of 2**63 - 1 (cut to the dimension's 2**63 - 2 cells)
    wrapped in the window's arithmetic: cells silently went missing from the window and from the
    view. It is now refused naming the dimension, no view is made; a reach of 2**62 - 1 works."""
    edge = 2**62 - 1
    array = local.create_array(f"wide<v:int64>[i=-{edge}:{edge}:1000; j=0:3:2]")
    cells = {(-edge, 0): 1, (0, 1): 2, (edge, 3): 4}
    _insert(array, cells)
    views = local.views()
    with pytest.raises(ValidationError, match=r"along i .* leaves the int64 coordinates") as caught:
        array.window([2**63 - 1, 0, 1, 1], *calls()).to_pandas()
    assert caught.value.column == "i"
    with pytest.raises(ValidationError, match="leaves the int64 coordinates"):
        local.create_view("wide_w", window("wide", [0, 2**63 - 1, 1, 1], calls()))
    assert local.views() == views
    view = local.create_view("wide_w", window("wide", [edge, edge, 3, 3], calls()))
    assert_matches(view.to_pandas(), cells, (edge, 3), (edge, 3), array.dims)
    array.delete({"i": [0], "j": [1]})
    del cells[(0, 1)]
    view.refresh("baseline")
    assert_matches(view.to_pandas(), cells, (edge, 3), (edge, 3), array.dims)


def test_a_refresh_rewrites_only_chunks_holding_cells(local) -> None:
    """A one-cell batch in a sparse array: the refresh rewrites the chunks holding a cell whose
    window reaches it (counted here from the cells), not every chunk within reach. Before, the empty
    chunks were counted too: 36 "rewritten" for 2 changed, more than the view's 31 chunks, so auto
    refreshed everything because the batch "touched" over 90% of the view."""
    rng = np.random.default_rng(3)
    array = local.create_array("sparse<v:int64>[i=0:199:10; j=0:199:10]")
    cells = {
        (int(k // 20) * 10 + 3, int(k % 20) * 10 + 4): int(k) for k in rng.choice(400, 30, replace=False)
    }
    _insert(array, cells)
    flat, reach = [25, 25, 25, 25], (25, 25)
    view = local.create_view("sparse_w", window("sparse", flat, calls()))
    for batch in ({(100, 100): 7}, {(17, 180): -3}):
        _insert(array, batch)
        cells.update(batch)
        (changed,) = batch
        holding = {(i // 10, j // 10) for i, j in cells}
        reached = {
            chunk
            for chunk in holding
            if all(10 * c - 25 <= x <= 10 * c + 9 + 25 for c, x in zip(chunk, changed, strict=True))
        }
        result = view.refresh("baseline") if batch == {(100, 100): 7} else view.refresh()
        assert result.view_chunks_rewritten == len(reached)
        assert result.decision != "touched"
        assert_matches(view.to_pandas(), cells, reach, reach, array.dims)


def test_spark_window_over_far_apart_clusters_matches_in_process(spark, local, tmp_path) -> None:
    """The long-reach window over far-apart clusters on Spark (the halo cut in its tasks from the
    listed chunks; before, the box of 2.5 * 10**11 chunks) equals the brute force and, bit for bit,
    the in-process window."""
    import arrayviews

    on_spark = arrayviews.connect(str(tmp_path / "w"), spark=spark, execution="spark")
    far = 10**12
    cells = {(1, 0): 0.5, (2, 5): -1.25, (far, 1): 1e300, (far + 3, 2): -1e300, (far + 9, 0): 2.0}
    frames = []
    for db, name in ((on_spark, "both"), (local, "both_local")):
        array = db.create_array(f"{name}<v:float64>[i=0:*:4; j=0:5:3]")
        _insert(array, cells)
        frames.append(array.window([2**45, 0, 1, 1], *calls()).to_pandas())
        assert_matches(frames[-1], cells, (2**45, 1), (0, 1), array.dims)
    assert frames[0].equals(frames[1])
