"""Window aggregates and window views, second trial: time axes fed day by day against pandas'
rolling, long random batch sequences with compaction and a view over a view against a plain Python
brute force, extreme and non-finite values against exact references, and what a refresh reads."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arrayviews import window
from arrayviews.model.errors import NotFoundError, RangeError, ValidationError
from arrayviews.views.refresh_cost import PROBE_MARGIN, UNMEASURED_PROBE_MARGIN


@pytest.fixture(scope="module")
def local(spark, tmp_path_factory):
    """One in-process warehouse for the module (each test makes its own arrays)."""
    import arrayviews

    return arrayviews.connect(str(tmp_path_factory.mktemp("windows2") / "w"), spark=spark, execution="local")


def box_window(cells: dict, before, after) -> dict:
    """Per stored cell the stored cells inside ``[x - before, x + after]``: (count, Python-integer
    sum, min, max)."""
    result = {}
    for x in cells:
        inside = [
            v
            for y, v in cells.items()
            if all(xk - b <= yk <= xk + a for xk, yk, b, a in zip(x, y, before, after, strict=True))
        ]
        result[x] = (len(inside), sum(inside), min(inside), max(inside))
    return result


def _insert(array, cells: dict) -> None:
    columns = {d: [c[k] for c in cells] for k, d in enumerate(array.dims)}
    columns["v"] = list(cells.values())
    array.insert(columns, on_conflict="replace")


# -- what a refresh reads ---------------------------------------------------------------------------


def test_a_batch_at_opposite_corners_reads_only_the_chunks_within_reach(local, monkeypatch) -> None:
    """Two changed cells at opposite corners of a 60 x 60 array in 10 x 10 chunks: the refresh
    reads the base chunks within the window's reach of the two affected view chunks and those view
    chunks, counted here cell by cell. Before, it read (and its report counted) the box of the two:
    every base cell and every view cell (7,200 cells for 700), and it cut every base chunk."""
    rng = np.random.default_rng(11)
    values = rng.integers(-99, 99, (60, 60))
    array = local.create_array("corners<v:int64>[i=0:59:10; j=0:59:10]")
    array.write_dense(values)
    before, after = (1, 2), (2, 1)
    view = local.create_view("corners_w", window("corners", [1, 2, 2, 1], ["count(*)", "sum(v)", "max(v)"]))
    batch = {(0, 0): 1000, (59, 59): -1000}
    _insert(array, batch)
    cells = {(i, j): int(values[i, j]) for i in range(60) for j in range(60)} | batch

    def chunk(cell):
        return tuple(x // 10 for x in cell)

    affected = {
        chunk(x)
        for x in cells
        if any(
            all(xk - b <= ck <= xk + a for xk, ck, b, a in zip(x, c, before, after, strict=True))
            for c in batch
        )
    }
    boxes = [tuple((10 * k, 10 * k + 9) for k in a) for a in affected]
    reached = {
        chunk(y)
        for y in cells
        if any(
            all(lo - b <= yk <= hi + a for yk, (lo, hi), b, a in zip(y, box, before, after, strict=True))
            for box in boxes
        )
    }
    read = sum(1 for y in cells if chunk(y) in reached) + sum(1 for x in cells if chunk(x) in affected)
    assert (len(affected), len(reached), read) == (2, 8, 1000)  # the count above, by hand

    plan = view.explain_refresh("baseline")
    assert "reads 1,000 cells" in plan, plan
    from arrayviews.operators import halo

    cut, original = [], halo.cut_pieces

    def counting(table, *args, **kwargs):
        cut.extend(zip(table.column("c__i").to_pylist(), table.column("c__j").to_pylist(), strict=True))
        return original(table, *args, **kwargs)

    monkeypatch.setattr(halo, "cut_pieces", counting)
    result = view.refresh("baseline")
    monkeypatch.undo()
    assert set(cut) == reached  # the base chunks cut for the halo exchange
    assert result.estimates["baseline"]["cells"] == read
    assert result.view_chunks_rewritten == len(affected)
    want = box_window(
        {c: v for c, v in cells.items() if max(c) <= 3 or min(c) >= 56}, before, after
    )  # windows near the corners only: the rest of the view is unchanged
    got = view.to_pandas().set_index(["i", "j"])
    for cell, (count, total, _, most) in want.items():
        if max(cell) <= 1 or min(cell) >= 58:
            assert tuple(got.loc[cell, ["count", "v_sum", "v_max"]]) == (count, total, most), cell
    assert view.verify()

    _insert(array, {(0, 0): 3, (59, 59): 4})  # auto takes the strategy its estimates favour
    result = view.refresh()
    predicted = {s: e["predicted_seconds"] for s, e in result.estimates.items()}
    best = min(predicted.values())
    if result.decision == "cheaper":
        assert predicted[result.strategy] == best, result.message
    else:  # a probe re-measures a strategy predicted close to the best
        measured = result.estimates[result.strategy]["correction_source"] == "this strategy"
        margin = PROBE_MARGIN if measured else UNMEASURED_PROBE_MARGIN
        assert result.decision == "probe" and predicted[result.strategy] <= (1 + margin) * best
    assert result.estimates["baseline"]["cells"] == read
    assert view.verify()


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    listed=st.booleans(),
    before=st.tuples(st.integers(0, 9), st.integers(0, 30)),
    after=st.tuples(st.integers(0, 9), st.integers(0, 30)),
)
def test_reached_chunks_are_those_whose_box_meets_a_targets_dilated_box(data, listed, before, after) -> None:
    """The base chunks a refresh reads, from the grid (few neighbours) or matched against the
    present chunks (many), against plain box intersection over ``i=-7:30:4; j=0:*:5``."""
    from arrayviews.model.schema_parser import parse_schema
    from arrayviews.views import windowed

    schema = parse_schema("r<v:int64>[i=-7:30:4; j=0:*:5]")
    chunk = st.tuples(st.integers(0, 9), st.integers(0, 12))  # chunks count from the dimension's low
    present = sorted(data.draw(st.sets(chunk, min_size=1, max_size=25)))
    targets = sorted(data.draw(st.sets(st.sampled_from(present), min_size=1, max_size=6)))

    def box(c):
        return (-7 + 4 * c[0], min(30, -4 + 4 * c[0])), (5 * c[1], 5 * c[1] + 4)

    want = {
        p
        for p in present
        for t in targets
        if all(
            lo <= th + a and hi >= tl - b
            for (lo, hi), (tl, th), b, a in zip(box(p), box(t), before, after, strict=True)
        )
    }
    old = windowed.LISTED_REACH
    windowed.LISTED_REACH = 0 if listed else old
    try:
        got = windowed.reached_chunks(schema, np.array(targets), before, after, np.array(present))
    finally:
        windowed.LISTED_REACH = old
    assert {tuple(int(x) for x in row) for row in got} == want
    assert len(got) == len(want)


# -- durations on time axes -------------------------------------------------------------------------


def test_durations_that_are_no_whole_steps_or_ambiguous_are_refused_alike(local) -> None:
    """ "90min" on an hourly axis is refused by ``A.window`` and by a view in the same words, and
    nothing is made. "1M" is a month to pandas (which refuses it); it was silently read as one
    minute, a one-cell window on a minute axis. It is refused, naming it; "1min" works."""
    hourly = local.create_array("hourly<v:int64>[t=0:47:12 SCALE 1 HOUR OFFSET '2026-03-01T00:00']")
    hourly.insert({"t": list(range(48)), "v": list(range(48))})
    views = local.views()
    for attempt in (
        lambda: hourly.window({"t": ("90min", "0h")}, "sum(v)").to_pandas(),
        lambda: local.create_view("hourly_w", window("hourly", ["90min", "0h"], ["sum(v)"])),
    ):
        with pytest.raises(ValidationError, match=r"hourly, dimension t: 90 minutes is not a whole number"):
            attempt()
    minutes = local.create_array("minutes<v:int64>[t=0:59:30 SCALE 1 MINUTE OFFSET '2026-03-01T00:00']")
    minutes.insert({"t": list(range(60)), "v": [1] * 60})
    with pytest.raises(ValidationError, match="'1M' is ambiguous") as caught:
        minutes.window({"t": ("1M", "0min")}, "sum(v)").to_pandas()
    assert caught.value.column == "t"
    with pytest.raises(ValidationError, match="'2M' is ambiguous"):
        local.create_view("minutes_w", window("minutes", ["2M", "0min"], ["sum(v)"]))
    with pytest.raises(ValidationError, match="longer than any duration"):
        minutes.window({"t": ("99999999999999999999 days", "0min")}, "sum(v)").to_pandas()
    falling = local.create_array("falling<v:int64>[t=0:9:4 SCALE -1 HOUR OFFSET '2026-05-01T12:00']")
    falling.insert({"t": list(range(10)), "v": [10**k for k in range(10)]})
    for mixed in (("2h", 1), (1, "1h")):  # before: the count was taken in time order, as a duration
        with pytest.raises(ValidationError, match="mixes a duration and a count of cells"):
            falling.window({"t": mixed}, "sum(v)").to_pandas()
        with pytest.raises(ValidationError, match="mixes a duration and a count of cells"):
            local.create_view("falling_w", window("falling", list(mixed), ["sum(v)"]))
    assert local.views() == views
    trailing = falling.window({"t": ("2h", 0)}, "sum(v)").to_pandas()  # 0 is 0 either way
    assert trailing.v_sum.tolist() == [sum(10**j for j in range(k, min(k + 3, 10))) for k in range(10)]
    got = minutes.window({"t": ("1min", "0min")}, "sum(v)").to_pandas()
    assert got.v_sum.tolist() == [1] + [2] * 59


def test_the_flat_form_of_a_window_takes_durations_as_a_view_does(local) -> None:
    """SciDB's flat extents ``[b1, a1, b2, a2]`` with durations on a half-hourly axis: text was
    refused by ``A.window`` (a view took it), ``numpy.timedelta64`` in hours raised a raw TypeError
    and in nanoseconds was taken as that many cells (the whole axis). All now give the trailing two
    hours, as the mapping form and the view do (plain Python sums)."""
    array = local.create_array(
        "halves<v:int64>[t=0:23:8 SCALE 30 MINUTES OFFSET '2026-05-01T00:00'; k=0:1:2]"
    )
    array.insert({"t": list(range(24)) * 2, "k": [0] * 24 + [1] * 24, "v": list(range(48))})
    want = [sum(range(max(0, t - 4), t + 1)) + k * 24 * (min(t, 4) + 1) for k in (0, 1) for t in range(24)]
    two_hours = np.timedelta64(7200 * 10**9, "ns")
    forms = (
        ["2h", "0h", 0, 0],
        [np.timedelta64(2, "h"), np.timedelta64(0, "h"), 0, 0],
        [two_hours, np.timedelta64(0, "ns"), 0, 0],
        {"t": (two_hours, "0h")},
    )
    for extents in forms:
        got = array.window(extents, "sum(v)").to_pandas().sort_values(["k", "t"])
        assert got.v_sum.tolist() == want, extents
    view = local.create_view("halves_w", window("halves", forms[2], ["sum(v)"]))
    assert view.to_pandas().sort_values(["k", "t"]).v_sum.tolist() == want
    with pytest.raises(ValidationError, match="window extent for t must be two integers"):
        from arrayviews.operators.window import window_extents

        window_extents(array.schema, [two_hours, 0, 0, 0])  # below the API, no duration is a count


def test_a_view_over_an_open_ended_time_axis_fed_day_by_day_follows_pandas_rolling(local) -> None:
    """Hourly days (a falling latitude, gaps as NaN) appended with ``write_xarray`` to ``time=0:*``;
    after each day the trailing-six-hours view (auto refresh), a view over it and ``A.window`` equal
    pandas' ``rolling("6h")`` over everything so far, and ``verify()`` agrees."""
    import xarray as xr

    rng = np.random.default_rng(5)
    lats = [50.0, 49.5, 49.0]
    grid = local.create_array(
        "days<t2m:float64>[time=0:*:8 SCALE 1 HOUR OFFSET '2026-01-01T00:00'; lat=0:2:3 SCALE -0.5 OFFSET 50.0]"
    )
    calls = ["count(*)", "sum(t2m)", "min(t2m)", "max(t2m)"]
    view = local.create_view("days_w", window("days", ["5 hours", "0h", 0, 0], calls))
    above = local.create_view("days_ww", window("days_w", ["0h", "2h", 1, 1], ["max(t2m_max)"]))
    frames = []
    for day in range(3):
        times = pd.date_range(f"2026-01-{day + 1:02d}", periods=24, freq="h")
        values = np.round(rng.normal(size=(24, 3)) * 50, 3)
        values[rng.random(values.shape) < 0.2] = np.nan
        data = xr.DataArray(values, dims=("time", "lat"), coords={"time": times, "lat": lats}, name="t2m")
        grid.write_xarray(data)
        frames.append(data.to_pandas())
        whole = pd.concat(frames)
        view.refresh()
        above.refresh()
        stored, direct = view.to_pandas(), grid.window({"time": ("5h", "0h")}, *calls).to_pandas()
        expected_max = {}
        for k, lat in enumerate(lats):
            series = whole[lat].dropna()
            rolling = series.rolling("6h")
            cells = ((series.index - pd.Timestamp("2026-01-01")) // pd.Timedelta("1h")).to_numpy()
            for frame in (stored, direct):
                got = frame[frame.lat == k].set_index("time")
                assert sorted(got.index) == sorted(cells), (day, lat)
                got = got.loc[cells]
                np.testing.assert_array_equal(got["count"], rolling.count())
                np.testing.assert_allclose(got.t2m_sum, rolling.sum(), rtol=1e-12, atol=1e-9)
                np.testing.assert_array_equal(got.t2m_min, rolling.min())
                np.testing.assert_array_equal(got.t2m_max, rolling.max())
            expected_max.update(zip(((int(c), k) for c in cells), rolling.max(), strict=True))
        want = {  # the view above: over the view's cells two hours on and one latitude either side
            (t, k): max(m for (u, q), m in expected_max.items() if t <= u <= t + 2 and abs(q - k) <= 1)
            for (t, k) in expected_max
        }
        got = above.to_pandas()
        assert dict(zip(zip(got.time, got.lat, strict=True), got.t2m_max_max, strict=True)) == want
        assert view.verify() and above.verify()


def test_duration_windows_on_a_falling_sub_second_axis(local) -> None:
    """Quarter seconds running backwards in time (cell 0 the latest): ("1s", "500ms") is the second
    before each time and the half second after it, in time order, for ``A.window`` and for views
    given the durations as text or as ``numpy.timedelta64`` (exact Python-integer sums), and the
    trailing second counts as pandas' rolling over the time-sorted series."""
    array = local.create_array(
        "quarters<v:int64>[t=0:79:16 SCALE -250 MILLISECONDS OFFSET '2026-03-01T00:00:30']"
    )
    rng = np.random.default_rng(9)
    cells = np.sort(rng.choice(80, 50, replace=False))
    values = rng.integers(-(2**40), 2**40, cells.size)
    array.insert({"t": cells, "v": values})
    times = pd.Timestamp("2026-03-01T00:00:30") - pd.to_timedelta(250 * cells, unit="ms")
    series = pd.Series(values, index=times).sort_index()
    by_time = dict(zip(series.index, series.to_numpy(), strict=True))
    # exact: Python integers over [time - 1 s, time + 0.5 s]
    want = {
        int(c): sum(
            int(v) for u, v in by_time.items() if t - pd.Timedelta("1s") <= u <= t + pd.Timedelta("500ms")
        )
        for c, t in zip(cells, times, strict=True)
    }
    trailing = series.rolling("1001ms").count()  # pandas' (t - 1 s, t] plus t - 1 s itself
    got = array.window({"t": ("1s", "500ms")}, "sum(v)").to_pandas()
    assert dict(zip(got.t.tolist(), got.v_sum.tolist(), strict=True)) == want
    forms = (
        ["1000ms", "500ms"],
        [np.timedelta64(1, "s"), np.timedelta64(500, "ms")],  # before: a raw TypeError from int()
        [np.timedelta64(10**9, "ns"), np.timedelta64(500_000_000, "ns")],  # before: 10**9 cells
    )
    for k, extents in enumerate(forms):  # a view took numpy durations as numpy integers
        view = local.create_view(f"quarters_w{k}", window("quarters", extents, ["sum(v)", "count(*)"]))
        stored = view.to_pandas()
        assert dict(zip(stored.t.tolist(), stored.v_sum.tolist(), strict=True)) == want
    back = array.window({"t": ("1s", "0s")}, "count(*)").to_pandas().set_index("t")
    assert back.loc[cells, "count"].tolist() == [int(trailing[t]) for t in times]


# -- long random batch sequences ------------------------------------------------------------------

HIGHS = (11, 8)  # cells 0..11 x 0..8 of an array in 4 x 3 chunks
OUTER = ((1, 2), (0, 1))  # (before, after) of the view over the array
INNER = ((2, 0), (1, 1))  # of the view over that view
_runs = iter(range(10**6))


@st.composite
def steps(draw):
    """A sequence of batches, compactions and refreshes (random strategies) of both views."""
    cell = st.tuples(st.integers(0, HIGHS[0]), st.integers(0, HIGHS[1]))
    value = st.integers(-(2**50), 2**50)
    sequence = []
    for _ in range(draw(st.integers(4, 9))):
        what = draw(
            st.sampled_from(["insert", "dense", "delete", "box", "compact", "compact view", "refresh"])
        )
        if what == "insert":
            sequence.append((what, draw(st.dictionaries(cell, value, min_size=1, max_size=5))))
        elif what == "dense":
            low = draw(cell)
            shape = tuple(draw(st.integers(1, min(4, h - x + 1))) for x, h in zip(low, HIGHS, strict=True))
            sequence.append((what, low, shape, draw(value)))
        elif what == "delete":
            sequence.append((what, draw(st.lists(cell, min_size=1, max_size=3, unique=True))))
        elif what == "box":
            low = draw(cell)
            high = tuple(min(h, x + draw(st.integers(0, 5))) for x, h in zip(low, HIGHS, strict=True))
            sequence.append((what, low, high))
        elif what == "refresh":
            strategies = st.sampled_from(["auto", "full", "baseline"])
            sequence.append((what, draw(strategies), draw(strategies)))
        else:
            sequence.append((what,))
    return sequence + [("refresh", "auto", "auto")]


def _run_step(array, outer, cells: dict, step) -> None:
    """One step on the array (or a view) and on the reference dictionary alike."""
    kind = step[0]
    if kind == "insert":
        _insert(array, step[1])
        cells.update(step[1])
    elif kind == "dense":
        _, low, shape, start = step
        values = np.arange(math.prod(shape), dtype=np.int64).reshape(shape) * 7 + start
        array.write_dense(values, origin=list(low), on_conflict="replace")
        for index in np.ndindex(*shape):
            cells[(low[0] + index[0], low[1] + index[1])] = int(values[index])
    elif kind == "delete":
        array.delete({"i": [c[0] for c in step[1]], "j": [c[1] for c in step[1]]})
        for c in step[1]:
            cells.pop(c, None)
    elif kind == "box":
        (i0, j0), (i1, j1) = step[1], step[2]
        array.delete(box={"i": (i0, i1), "j": (j0, j1)})
        for c in [c for c in cells if i0 <= c[0] <= i1 and j0 <= c[1] <= j1]:
            del cells[c]
    elif kind == "compact":
        array.compact()
    elif kind == "compact view":
        outer.compact()


def _frame_of(view, names: tuple[str, ...]) -> dict:
    frame = view.to_pandas()
    return {(int(r["i"]), int(r["j"])): tuple(int(r[n]) for n in names) for r in frame.to_dict("records")}


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sequence=steps(),
    first=st.dictionaries(st.tuples(st.integers(0, 11), st.integers(0, 8)), st.integers(-9, 9), max_size=20),
)
def test_random_sequences_keep_a_view_over_a_view_equal_to_brute_force(local, sequence, first) -> None:
    """Inserts replacing values, dense blocks, deletes of cells and boxes, compactions of the array
    and of the view, refreshes at random points with random strategies of a window view and of a
    window view over it: after every refresh both equal the brute force from the array's cells
    (Python integers), ``verify()`` agrees, and each version kept reads as it was when made."""
    name = f"seq{next(_runs)}"
    array = local.create_array(f"{name}<v:int64>[i=0:11:4; j=0:8:3]")
    cells: dict = {}
    if first:
        _insert(array, first)
        cells.update(first)
    (b1, a1), (b2, a2) = OUTER, INNER
    outer = local.create_view(
        f"{name}_w", window(name, [b1[0], a1[0], b1[1], a1[1]], ["count(*)", "sum(v)", "min(v)", "max(v)"])
    )
    inner = local.create_view(
        f"{name}_ww", window(f"{name}_w", [b2[0], a2[0], b2[1], a2[1]], ["sum(v_sum)", "max(v_min)"])
    )
    seen = {}
    for step in sequence:
        _run_step(array, outer, cells, step)
        if step[0] != "refresh":
            continue
        outer.refresh(step[1])
        inner.refresh(step[2])
        want = box_window(cells, b1, a1)
        assert _frame_of(outer, ("count", "v_sum", "v_min", "v_max")) == want
        sums = {c: w[1] for c, w in want.items()}
        mins = {c: w[2] for c, w in want.items()}
        over = {c: (w[1], box_window(mins, b2, a2)[c][3]) for c, w in box_window(sums, b2, a2).items()}
        assert _frame_of(inner, ("v_sum_sum", "v_min_max")) == over
        assert outer.verify() and inner.verify()
        seen[outer.versions().version.max()] = want
    for version, want in seen.items():
        assert _frame_of(outer.at_version(int(version)), ("count", "v_sum", "v_min", "v_max")) == want


# -- extreme, cancelling, non-finite and null values --------------------------------------------

M = 2**63 - 1


def float_reference(values: list[float]) -> tuple[float, float, float, float]:
    """(sum, avg, min, max) of floats as documented: exact sums rounded once (math.fsum), NaN and
    infinities propagating as in numpy (inf and -inf together: NaN)."""
    if any(math.isnan(v) for v in values) or (math.inf in values and -math.inf in values):
        total = math.nan
    elif math.inf in values or -math.inf in values:
        total = math.inf if math.inf in values else -math.inf
    else:
        total = math.fsum(values)
    low = math.nan if any(math.isnan(v) for v in values) else min(values)
    high = math.nan if any(math.isnan(v) for v in values) else max(values)
    return total, total / len(values), low, high


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def test_extreme_and_non_finite_values(local) -> None:
    """int64 near both ends (avg correctly rounded from the exact Python-integer mean, an overflowing
    sum refused naming the cell), sums cancelling exactly, floats with NaN, +-inf and -0.0, count of
    a nullable attribute, and min/max after the extreme cell at a chunk corner is deleted: the
    window and the view equal the references (in-process; Spark's agreement is checked below)."""
    db = local
    ints = db.create_array("ints<v:int64>[i=0:11:4]")
    values = [M, M - 1, -M - 1, -M, 2**62, -(2**62), 3, -3, M, -M - 1, 1, M]
    ints.insert({"i": list(range(12)), "v": values})
    view = db.create_view("ints_w", window("ints", [1, 1], ["avg(v)", "min(v)", "max(v)", "count(*)"]))
    for frame in (
        ints.window([1, 1], "avg(v)", "min(v)", "max(v)", "count(*)").to_pandas(),
        view.to_pandas(),
    ):
        for row in frame.to_dict("records"):
            inside = values[max(0, row["i"] - 1) : row["i"] + 2]
            assert row["v_avg"] == float(Fraction(sum(inside), len(inside))), row
            assert (row["v_min"], row["v_max"], row["count"]) == (min(inside), max(inside), len(inside))
    with pytest.raises(RangeError, match=r"window sum of v at cell \(i=0\) is 18446744073709551613"):
        ints.window([1, 1], "sum(v)").to_pandas()
    views = db.views()
    with pytest.raises(RangeError, match=r"ints_s: the window sum of v at cell \(i=0\)"):
        db.create_view("ints_s", window("ints", [1, 1], ["sum(v)"]))
    assert db.views() == views

    swings = db.create_array("swings<v:int64>[i=0:9:3]")
    swing = [-(2**62), -M - 1, M - 5, M - 5, -7, -M, -7, M, M, -M - 1]  # running sums leave int64
    swings.insert({"i": list(range(10)), "v": swing})
    for frame in (
        swings.window([1, 2], "sum(v)", "avg(v)").to_pandas(),
        db.create_view("swings_w", window("swings", [1, 2], ["sum(v)", "avg(v)"])).to_pandas(),
    ):
        for row in frame.to_dict("records"):
            inside = swing[max(0, row["i"] - 1) : row["i"] + 3]
            assert row["v_sum"] == sum(inside), row
            assert row["v_avg"] == float(Fraction(sum(inside), len(inside))), row
    unsigned = db.create_array("unsigned<v:uint64>[i=0:3:2]")
    unsigned.insert({"i": [0, 1, 3], "v": [2**64 - 1, 2**63 + 1, 5]})
    with pytest.raises(
        ValidationError, match=r"array unsigned, attribute v \(uint64\): avg\(v\) does not compute"
    ):
        unsigned.window([1, 1], "avg(v)").to_pandas()  # refused by name, not wrapped around
    assert unsigned.window([1, 1], "count(v)").to_pandas().v_count.tolist() == [2, 2, 1]

    cancel = db.create_array("cancel<v:float64>[i=0:5:3]")
    spread = [1e308, 1.0, -1e308, 2.0**-1074, -1.0, 0.5]
    cancel.insert({"i": list(range(6)), "v": spread})
    got = cancel.window([5, 5], "sum(v)", "avg(v)").to_pandas()
    assert got.v_sum.tolist() == [math.fsum(spread)] * 6  # 0.5 + 2**-1074, not 0.0 or inf
    assert got.v_avg.tolist() == [math.fsum(spread) / 6] * 6

    floats = db.create_array("floats<v:float64>[i=0:9:5]")
    special = [math.nan, 1.0, math.inf, -math.inf, -0.0, 0.0, -0.0, 2.5, math.inf, 4.0]
    floats.insert({"i": list(range(10)), "v": special})
    calls = ["sum(v)", "avg(v)", "min(v)", "max(v)"]
    fview = db.create_view("floats_w", window("floats", [1, 0], calls))
    for frame in (floats.window([1, 0], *calls).to_pandas(), fview.to_pandas()):
        for row in frame.to_dict("records"):
            want = float_reference(special[max(0, row["i"] - 1) : row["i"] + 1])
            got = (row["v_sum"], row["v_avg"], row["v_min"], row["v_max"])
            assert all(_same(a, b) for a, b in zip(got, want, strict=True)), (row, want)
    lone = floats.window([0, 0], "sum(v)").to_pandas()
    assert np.signbit(lone.v_sum[lone.i == 4]).all()  # a lone -0.0 stays -0.0

    nulls = db.create_array("nulls<v:int64 null>[i=0:7:4; j=0:7:4]")
    cells = {
        (i, j): (None if (i + 2 * j) % 5 == 0 else i * 8 + j)
        for i in range(8)
        for j in range(8)
        if (i * j) % 5 != 1
    }
    nulls.insert({"i": [c[0] for c in cells], "j": [c[1] for c in cells], "v": list(cells.values())})
    nview = db.create_view(
        "nulls_w", window("nulls", [1, 1, 1, 1], ["count(*)", "count(v)", "min(v)", "max(v)"])
    )

    def check_nulls() -> None:
        got = nview.to_pandas().to_dict("records")
        assert {(r["i"], r["j"]) for r in got} == set(cells)
        for r in got:
            inside = [v for (y, z), v in cells.items() if abs(y - r["i"]) <= 1 and abs(z - r["j"]) <= 1]
            known = [v for v in inside if v is not None]
            assert (r["count"], r["v_count"]) == (len(inside), len(known))
            assert (r["v_min"], r["v_max"]) == ((min(known), max(known)) if known else (None, None)) or (
                not known and math.isnan(r["v_min"]) and math.isnan(r["v_max"])
            )

    check_nulls()
    corner = max((c for c in cells if cells[c] is not None and c[0] < 4 and c[1] < 4), key=cells.get)
    assert corner == (3, 3)  # the largest value of chunk (0, 0), at its corner
    nulls.delete({"i": [3], "j": [3]})
    del cells[(3, 3)]
    nview.refresh("baseline")
    check_nulls()
    assert nview.verify()


def test_refused_refreshes_and_versions_change_nothing(local) -> None:
    """A refresh with a bad strategy or on a base the view does not read, dropping the base, and a
    window or view with two aggregates of one output name are refused naming them; the view, its
    versions and status are as before. ``at_version`` of a version never made is refused naming
    the versions held."""
    array = local.create_array("refusals<v:int64>[i=0:9:3]")
    array.insert({"i": [1, 2, 5], "v": [1, 2, 3]})
    view = local.create_view("refusals_w", window("refusals", [1, 1], ["sum(v)"]))
    array.insert({"i": [3], "v": [10]})
    frame, versions, status = view.to_pandas(), view.versions(), view.status()
    with pytest.raises(
        ValidationError, match="refusals_w: refresh strategy must be one of auto, full, baseline, got 'fast'"
    ):
        view.refresh("fast")
    with pytest.raises(ValidationError, match="refusals_w: nowhere is not a base array of the view"):
        view.refresh(bases=["nowhere"])
    with pytest.raises(ValidationError, match="array refusals is a base of view"):
        local.drop_array("refusals")
    for attempt in (  # before: the message did not name the array
        lambda: array.window([1, 1], "sum(v)", "max(v) AS v_sum").to_pandas(),
        lambda: local.create_view("refusals_twice", window("refusals", [1, 1], ["sum(v)", "sum(v)"])),
    ):
        with pytest.raises(ValidationError, match="array refusals: two aggregates produce 'v_sum'") as caught:
            attempt()
        assert (caught.value.array, caught.value.column) == ("refusals", "v_sum")
    assert view.to_pandas().equals(frame) and view.versions().equals(versions) and view.status() == status
    with pytest.raises(NotFoundError, match=r"refusals_w has no version 7 \(versions held: 1\)"):
        view.at_version(7)
    view.refresh()
    assert view.at_version(1).to_pandas().equals(frame)
    assert view.to_pandas().v_sum.tolist() == [3, 13, 12, 3]  # i = 1, 2, 3, 5


def test_spark_refreshes_a_window_view_as_in_process_bit_for_bit(spark, tmp_path) -> None:
    """NaN, infinities, -0.0, nulls and int64 near both ends in one array, two equal views (made
    in-process); a batch replacing cells at chunk corners and emptying one; one view refreshed
    incrementally on Spark (the same warehouse opened with ``execution="spark"``), the other
    in-process: equal frames, signs of zeros included, and the in-process recomputation agrees."""
    import arrayviews

    here = arrayviews.connect(str(tmp_path / "w"), spark=spark, execution="local")
    there = arrayviews.connect(str(tmp_path / "w"), spark=spark, execution="spark")
    cells = {
        (0, 0): (math.nan, 5),
        (0, 3): (math.inf, None),
        (1, 1): (-0.0, M),
        (3, 3): (-math.inf, M - 1),
        (4, 0): (0.0, -M - 1),
        (4, 4): (2.5, None),
        (5, 2): (-0.0, 7),
    }
    array = here.create_array("mixed<f:float64, n:int64 null>[i=0:5:4; j=0:5:4]")
    keys = list(cells)
    columns = {"i": [c[0] for c in keys], "j": [c[1] for c in keys]}
    array.insert({**columns, "f": [cells[c][0] for c in keys], "n": [cells[c][1] for c in keys]})
    calls = ["count(*)", "count(n)", "sum(f)", "min(f)", "max(f)", "avg(n)", "min(n)", "max(n)"]
    for name in ("mixed_s", "mixed_l"):
        here.create_view(name, window("mixed", [1, 2, 2, 1], calls))
    batch = {"i": [3, 4, 4], "j": [3, 4, 1], "f": [-0.0, math.nan, 1.5], "n": [None, -M - 1, M]}
    array.insert(batch, on_conflict="replace")
    result = there.view("mixed_s").refresh("baseline")
    assert (result.executor, result.strategy) == ("spark", "baseline")
    assert here.view("mixed_l").refresh("baseline").executor == "local"
    frames = [
        here.view(n).to_pandas().sort_values(["i", "j"], ignore_index=True) for n in ("mixed_s", "mixed_l")
    ]
    assert frames[0].equals(frames[1])
    for column in ("f_sum", "f_min", "f_max"):
        assert np.array_equal(np.signbit(frames[0][column]), np.signbit(frames[1][column]))
    assert here.view("mixed_s").verify()
