"""Array operators and the time axis tried a second time as an adversary: aggregate names, open-ended
arrays in xarray, NaT labels, write_xarray of selections, aware times and left-out variables,
against Python datetime arithmetic, pandas and xarray's own selection and concat."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import xarray as xr

import arrayviews
from arrayviews.model.errors import ValidationError

SIX_HOURS = dt.timedelta(hours=6)
ORIGIN = dt.datetime(2026, 1, 1)


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """One in-process database for the module (names are per test)."""
    return arrayviews.connect(str(tmp_path_factory.mktemp("arrays_trial2") / "warehouse"), execution="local")


def _catalog(db) -> list[str]:
    return sorted(db.relations().name.tolist())


# -- aggregate output names --------------------------------------------------------------------------


def test_an_aggregate_named_as_a_dimension_is_refused_naming_array_and_name(local) -> None:
    """Before: aggregate(A, sum(v) AS i) over A[i, j] gave the grand total under a dimension silently
    renamed i_2 (regrid and views refuse the same clash); by=['i'] with an output named 'j' kept it."""
    A = local.create_array("Agg<v:float64>[i=0:3:2; j=0:2:2]")
    A.write_dense(np.arange(12.0).reshape(4, 3))
    before = _catalog(local)
    for call in (
        lambda: A.aggregate("sum(v) AS i"),
        lambda: A.aggregate("sum(v) AS I", "count(*)"),
        lambda: A.aggregate("sum(v) AS j", by=["i"]),
        lambda: local.sql("SELECT * FROM aggregate(Agg, sum(v) AS i)"),
        lambda: local.sql("SELECT * FROM aggregate(Agg, max(v) AS J, i)"),
    ):
        with pytest.raises(ValidationError, match=r"array Agg: aggregate output '[iIjJ]' clashes with the dimension '[ij]'"):
            call().to_pandas()
    assert _catalog(local) == before
    # project of a dimension (before: "array Agg has no attribute 'i'", as if it did not exist)
    with pytest.raises(ValidationError, match=r"array Agg: 'i' is a dimension, which every result keeps; name only attributes \(v\)"):
        A.project("v", "i")
    # other names still work, and the totals are Python's
    total = A.aggregate("sum(v) AS total").to_pandas()
    assert total.total.tolist() == [float(sum(range(12)))]
    rows = A.aggregate("sum(v) AS row_sum", by=["i"]).to_pandas()
    assert rows.row_sum.tolist() == [float(sum(range(3 * r, 3 * r + 3))) for r in range(4)]


# -- to_xarray of an open-ended array ----------------------------------------------------------------


def _stored_box_reference(cells: dict[tuple[int, int], float], width: int) -> xr.Dataset:
    """The dataset a user expects: every time from the first to the last stored one (Python
    datetime arithmetic), NaN where no value was written."""
    first, last = min(t for t, _ in cells), max(t for t, _ in cells)
    values = np.full((last - first + 1, width), np.nan, np.float32)
    for (t, x), v in cells.items():
        values[t - first, x] = v
    times = [np.datetime64(ORIGIN + t * SIX_HOURS, "s") for t in range(first, last + 1)]
    return xr.Dataset({"v": (("time", "x"), values)}, coords={"time": times, "x": np.arange(width)})


def test_to_xarray_of_an_open_ended_array_spans_the_cells_that_hold_data(local) -> None:
    """Before: refused ("spans 4611686018427387904 cells ... too many for an xarray Dataset") however
    few cells were stored; now the bounding box along the open-ended dimension, with its times."""
    E = local.create_array("Open<v:float32>[time=0:*:4 SCALE 6 HOURS OFFSET '2026-01-01'; x=0:2:3]")
    with pytest.raises(ValidationError, match=r"array Open holds no cells yet \(dimension time is open-ended\)"):
        E.to_xarray()
    cells = {(5, 0): 1.0, (10, 2): 2.0, (7, 1): 3.0}
    when = np.array([np.datetime64(ORIGIN + t * SIX_HOURS, "h") for t, _ in cells])
    E.insert({"time": when, "x": [x for _, x in cells], "v": np.array(list(cells.values()), np.float32)})
    got = E.to_xarray()
    xr.testing.assert_identical(got.drop_attrs(), _stored_box_reference(cells, 3))
    # a filter narrows the box to what it keeps
    kept = {c: v for c, v in cells.items() if v > 1}
    xr.testing.assert_identical(E.filter("v > 1").to_xarray().drop_attrs(), _stored_box_reference(kept, 3))
    # the dataset goes back where it came from, into a copy made from the same schema
    C = local.create_array("OpenCopy<v:float32>[time=0:*:4 SCALE 6 HOURS OFFSET '2026-01-01'; x=0:2:3]")
    C.write_xarray(got)
    pd.testing.assert_frame_equal(C.to_pandas(), E.to_pandas())
    # the next day, appended, is xarray's concat of the two days
    nxt = _stored_box_reference({(12, 1): 7.0, (13, 0): 8.0}, 3)
    E.write_xarray(nxt)
    expected = xr.concat([got.drop_attrs(), nxt], dim="time").reindex(
        time=[np.datetime64(ORIGIN + t * SIX_HOURS, "s") for t in range(5, 14)]
    )
    xr.testing.assert_identical(E.to_xarray().drop_attrs(), expected)


def test_an_open_ended_range_is_shown_with_a_star_in_errors(local) -> None:
    """Before: "outside the dimension's range 0:4611686018427387903", the sentinel for '*'."""
    E = local.create_array("OpenStar<v:float64>[time=0:*:4 SCALE 1 DAY OFFSET '2026-01-01']")
    early = xr.Dataset({"v": ("time", [1.0])}, coords={"time": [np.datetime64("2025-12-31")]})
    with pytest.raises(ValidationError, match=r"outside the dimension's range 0:\* ") as caught:
        E.write_xarray(early)
    assert "4611686018427387903" not in str(caught.value)
    with pytest.raises(ValidationError, match=r"outside the range 0:\*") as caught:
        E.write_dense(np.zeros(2), origin=(-1,))
    with pytest.raises(ValidationError, match=r"outside the dimension range 0:\*"):
        E.insert({"time": [-3], "v": [1.0]})
    assert E.version == 0 and E.count() == 0


# -- NaT labels ----------------------------------------------------------------------------------------


def test_a_nat_label_is_refused_and_deletes_nothing(local) -> None:
    """Before: pandas.NaT as a slice end read as the earliest instant, so sel(t=slice(NaT, x))
    selected from the first cell and delete(labels=...) removed those cells."""
    L = local.create_array("Nat<v:float64>[t=0:9:4 SCALE 12 HOURS OFFSET '2024-02-27']")
    L.write_dense(np.arange(10.0))
    for label in (slice(pd.NaT, "2024-02-28"), slice("2024-02-27", pd.NaT), pd.NaT, np.datetime64("NaT")):
        with pytest.raises(ValidationError, match=r"array Nat, dimension t: a time label may not be NaT"):
            L.sel(t=label)
        with pytest.raises(ValidationError, match=r"a time label may not be NaT"):
            L.delete(labels={"t": label})
    assert L.version == 1 and L.to_numpy().tolist() == list(np.arange(10.0))


# -- write_xarray of what xarray users hold --------------------------------------------------------------


GRID = "<a:float64 NULL, b:int32 NULL>[t=0:*:4 SCALE 6 HOURS OFFSET '2026-01-01'; y=0:2:3 SCALE 0.5 OFFSET 10.0]"


def _day(shift_days: int = 1) -> xr.Dataset:
    times = pd.date_range("2026-01-01", periods=4, freq="6h") + pd.Timedelta(days=shift_days)
    a = np.arange(12.0).reshape(4, 3) + 100 * shift_days
    b = (np.arange(12) * 10 + shift_days).reshape(4, 3).astype(np.int32)
    return xr.Dataset({"a": (("t", "y"), a), "b": (("t", "y"), b)}, coords={"t": times, "y": [10.0, 10.5, 11.0]})


def test_a_left_out_nullable_variable_is_written_as_nulls(local) -> None:
    """Before: "write_dense needs every attribute; nullable ones left out are not supported yet",
    for write_xarray of a Dataset lacking one of the grid's variables, and for write_dense."""
    G = local.create_array("Part" + GRID)
    day = _day()
    G.write_xarray(day[["a"]])
    got = G.to_xarray()
    xr.testing.assert_equal(got.a, day.a)
    assert np.isnan(got.b.values).all()  # every b a null (NaN once it is float64 in xarray)
    assert G.to_pandas().b.isna().all() and G.count() == 12
    # a cell where every given variable is missing stays empty
    sparse = _day(2)[["b"]].astype(np.float64)
    sparse["b"][0, 0] = np.nan
    G.write_xarray(sparse)
    assert G.count() == 12 + 11
    frame = G.to_pandas(labels=True).set_index(["t", "y"])
    for t, y in [("2026-01-03T06:00", 10.5), ("2026-01-03T18:00", 11.0)]:
        assert frame.loc[(pd.Timestamp(t), y), "b"] == sparse.b.sel(t=t, y=y).item()
        assert pd.isna(frame.loc[(pd.Timestamp(t), y), "a"])
    assert (pd.Timestamp("2026-01-03"), 10.0) not in frame.index  # the NaN: no cell
    # write_dense alike; an attribute that is not nullable may not be left out
    G.write_dense({"b": np.array([[5, 6, 7]], np.int32)}, origin=(20, 0))
    assert G.sel(t="2026-01-06").to_pandas()[["a", "b"]].fillna(-1).values.tolist() == [[-1, 5], [-1, 6], [-1, 7]]
    N = local.create_array("Strict<a:float64, b:int32 NULL>[i=0:2:3]")
    with pytest.raises(ValidationError, match=r"array Strict: the dense block gives no values for attribute\(s\) a"):
        N.write_dense({"b": np.arange(3, dtype=np.int32)})
    assert N.version == 0


def test_a_selection_with_a_scalar_coordinate_goes_to_its_cell(local) -> None:
    """Before: ds.isel(y=1) (a scalar coordinate y=10.5) was refused as "the xarray object has
    dimensions ('t',), the array ('t', 'y')"; xarray's own expand_dims puts it at y=10.5."""
    G = local.create_array("Slice" + GRID)
    day = _day()
    G.write_xarray(day.isel(y=1))
    G.write_xarray(day.isel(t=0, y=2).a.to_dataset())  # one value, both coordinates scalar
    got = G.to_xarray().drop_attrs()
    # xarray's own placement: the selections put back on the day's full coordinates
    expected = xr.merge([day.isel(y=[1]), day.isel(t=[0], y=[2])[["a"]]], join="outer", compat="no_conflicts")
    expected = expected.reindex(y=day.y)
    xr.testing.assert_equal(got, expected)
    assert np.isnan(got.b.values[:, [0, 2]]).all() and G.count() == 5


def test_to_xarray_of_integers_with_empty_cells_writes_back(local) -> None:
    """Before: to_xarray gives integer and bool attributes with empty cells as float64 (NaN there),
    and write_xarray refused that very Dataset ("values of type float64 cannot be stored as int32")."""
    R = local.create_array("Ints<n:int32, f:bool, u:uint64 NULL>[i=-2:5:3; j=0:1:2]")
    cells = {(-2, 0): (7, True, 2**53), (0, 1): (-2**31, False, None), (5, 1): (2**31 - 1, True, 0)}
    R.insert({
        "i": [c[0] for c in cells], "j": [c[1] for c in cells],
        "n": np.array([v[0] for v in cells.values()], np.int32),
        "f": [v[1] for v in cells.values()],
        "u": pa.array([v[2] for v in cells.values()], pa.uint64()),
    })
    shown = R.to_xarray()
    assert shown.n.dtype == shown.f.dtype == np.float64
    copy = local.create_array("IntsCopy<n:int32, f:bool, u:uint64 NULL>[i=-2:5:3; j=0:1:2]")
    copy.write_xarray(shown)
    pd.testing.assert_frame_equal(copy.to_pandas(), R.to_pandas())
    # a fraction, or a value past 2**53 where float64 is no longer exact, is still refused
    for value, message in [(0.5, "values of type float64 cannot be stored as int32"), (2.0**60, "float64")]:
        bad = shown.copy(deep=True)
        bad["n"][0, 0] = value
        with pytest.raises(ValidationError, match=message):
            local.create_array(f"IntsBad{len(_catalog(local))}<n:int32, f:bool, u:uint64 NULL>[i=-2:5:3; j=0:1:2]").write_xarray(bad)
    # floats without a NaN stay floats, which never go into integer attributes
    whole = shown.fillna(0)
    with pytest.raises(ValidationError, match="values of type float64 cannot be stored as int32"):
        local.create_array("IntsWhole<n:int32, f:bool, u:uint64 NULL>[i=-2:5:3; j=0:1:2]").write_xarray(whole)


def test_a_variable_over_fewer_dimensions_is_refused_by_name(local) -> None:
    """Before: a Dataset with a variable over only some of the dimensions failed with numpy's
    "IndexError: too many indices for array"; from_xarray refuses it by name, and so does this."""
    G = local.create_array("Fewer" + GRID)
    day = _day()
    day["b"] = day.b.isel(y=0, drop=True)
    with pytest.raises(ValidationError, match=r"array Fewer: variable b has dimensions \('t',\), the array \('t', 'y'\)"):
        G.write_xarray(day)
    assert G.version == 0


def test_aware_times_in_an_xarray_coordinate_are_their_utc_instants(local) -> None:
    """Before: a Dataset over a time-zone-aware index (xarray keeps such times as objects) was
    refused ("dtype object ... but the dimension takes times"), though insert takes aware times."""
    G = local.create_array("Aware" + GRID)
    day = _day()
    berlin = day.assign_coords(t=day.indexes["t"].tz_localize("UTC").tz_convert("Europe/Berlin"))
    G.write_xarray(berlin)
    xr.testing.assert_identical(G.to_xarray().drop_attrs(), day)
    # across the change to summer time the UTC instants are six hours apart, as the axis wants
    spring = pd.date_range("2026-03-29T00:00", periods=3, freq="6h", tz="UTC").tz_convert("Europe/Berlin")
    assert [t.hour for t in spring] == [1, 8, 14]  # the local clock is not evenly spaced
    G.write_xarray(xr.Dataset({"a": (("t", "y"), np.ones((3, 3)))}, coords={"t": spring, "y": [10.0, 10.5, 11.0]}))
    assert G.sel(t=slice("2026-03-29", "2026-03-29T12:00")).count() == 9


# -- regrid of an open-ended time axis, on both executors ---------------------------------------------------


def test_regrid_of_an_open_ended_time_axis_is_pandas_resample(db_on) -> None:
    """Before: regrid({"t": "6h"}) (and SELECT ... FROM regrid(E, 4, 1, ...)) of an open-ended time
    axis failed on both executors: "cell 1152921504606846973 has no time label: SCALE 6 HOURS ...
    passes the range of datetime64[m]", its output a bounded dimension reaching that far."""
    db, executor = db_on
    E = db.create_array("E<v:float64 NULL>[t=-2:*:5 SCALE 90 MINUTES OFFSET '1969-12-31T22:30'; x=0:1:2]")
    rng = np.random.default_rng(3)
    cells = sorted({(int(t), int(x)) for t, x in zip(rng.integers(-2, 40, 30), rng.integers(0, 2, 30), strict=True)})
    values = [None if k % 5 == 0 else float(k) for k in range(len(cells))]
    E.insert(pd.DataFrame({"t": [c[0] for c in cells], "x": [c[1] for c in cells], "v": pd.array(values, dtype="Float64")}))
    start = dt.datetime(1969, 12, 31, 22, 30)
    frame = pd.DataFrame(
        {"t": [start + c[0] * dt.timedelta(minutes=90) for c in cells], "x": [c[1] for c in cells], "v": values}
    )
    first = start - 2 * dt.timedelta(minutes=90)  # the blocks start at the first cell, -2
    reference = (
        frame.groupby([pd.Grouper(key="t", freq="6h", origin=pd.Timestamp(first)), "x"])
        .agg(v_sum=("v", "sum"), v_count=("v", "count"), count=("v", "size"))
        .reset_index()
    )
    got = E.regrid({"t": "6h"}, "sum(v)", "count(v)", "count(*)").to_pandas(labels=True)
    assert got.t.tolist() == [t.to_datetime64() for t in reference.t]
    assert got.x.tolist() == reference.x.tolist() and got["count"].tolist() == reference["count"].tolist()
    assert got.v_count.tolist() == reference.v_count.tolist()
    assert got.v_sum.fillna(0).tolist() == reference.v_sum.tolist()  # pandas' sum of no value is 0
    assert E.regrid({"t": "6h"}, "count(*)").schema.dimensions[0].unbounded
    if executor == "local":  # the statement's path is the same on Spark: one Spark job is enough
        statement = db.sql("SELECT * FROM regrid(E, 4, 1, count(*))").to_pandas()
        assert statement["count"].tolist() == reference["count"].tolist()


# -- window means of integers ---------------------------------------------------------------------------------


def test_window_means_of_integers_are_pythons_int_division(local) -> None:
    """Before: the window's avg of integers was q + r / n rounded twice, one unit in the last place
    off the mean aggregate and regrid give (18 / 14 gave 1.2857142857142856, not ...58)."""
    rng = np.random.default_rng(11)
    rows, width = 40, 9
    big = rng.integers(-(2**62), 2**62, size=(rows, width))
    values = np.where(rng.random((rows, width)) < 0.5, big, rng.integers(-50, 50, size=(rows, width)))
    kept = rng.random((rows, width)) < 0.75
    A = local.create_array(f"Means<n:int64>[i=0:{rows - 1}:16; j=0:{width - 1}:4]")
    where = np.argwhere(kept)
    A.insert({"i": where[:, 0], "j": where[:, 1], "n": values[kept]})
    for before, after in [(0, 1), (2, 3), (5, 0)]:
        expected = []
        for i, j in where.tolist():
            inside = [int(values[i, m]) for m in range(j - before, j + after + 1) if 0 <= m < width and kept[i, m]]
            expected.append(sum(inside) / len(inside))  # Python rounds int / int correctly
        for method in ("incremental", "basic", "naive"):
            got = A.window({"i": (0, 0), "j": (before, after)}, "avg(n)", method=method).to_pandas()
            assert got.n_avg.tolist() == expected, (before, after, method)
    whole = A.window({"i": (0, 0), "j": (width, width)}, "avg(n)").to_pandas().drop_duplicates("i")
    assert whole.n_avg.tolist() == A.aggregate("avg(n)", by=["i"]).to_pandas().n_avg.tolist()


def test_plot_of_an_open_ended_time_axis_draws_the_cells_that_hold_data(local) -> None:
    """Before: plot() of an open-ended array was refused ("spans 9223372036854775808 cells ... too many
    for a dense numpy array"), as to_xarray was."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    P = local.create_array("Plotted<v:float64>[t=0:*:8 SCALE 1 HOUR OFFSET '2026-01-01']")
    P.insert({"t": np.array(["2026-01-01T03", "2026-01-02T05"], "datetime64[h]"), "v": [1.0, 2.0]})
    ax = P.plot()
    try:
        x, y = ax.lines[0].get_data()
        hours = [ORIGIN + dt.timedelta(hours=h) for h in range(3, 30)]
        days = mdates.date2num(x) if np.asarray(x).dtype.kind == "M" else np.asarray(x, dtype=float)
        assert [mdates.num2date(v).replace(tzinfo=None) for v in days] == hours
        assert np.nansum(y) == 3.0 and np.count_nonzero(~np.isnan(y)) == 2
    finally:
        plt.close(ax.figure)


def test_insert_takes_iso_text_on_a_time_dimension(local, tmp_path) -> None:
    """Before: text was refused ("coordinates must be integers, got string") on a time dimension,
    though sel, conditions and CSV files take ISO times there; now each text is one UTC instant."""
    T = local.create_array("Texts<v:int64>[t=0:*:10 SCALE 90 MINUTES OFFSET '2026-03-28T00:00']")
    texts = ["2026-03-28T01:30", "2026-03-28T03:00Z", "2026-03-28 04:30:00", "2026-03-29T00:00:00.000000000+00:00",
             "2026-03-28T09:00+01:30"]  # an offset names its instant (07:30 UTC)
    T.insert({"t": texts, "v": [1, 2, 3, 4, 6]})
    T.insert(pd.DataFrame({"t": ["9999-12-31T22:30"], "v": [5]}))
    step, origin = dt.timedelta(minutes=90), dt.datetime(2026, 3, 28)
    utc = [dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in [*texts, "9999-12-31T22:30"]]
    utc = [t if t.tzinfo is None else t.astimezone(dt.UTC).replace(tzinfo=None) for t in utc]
    expected = {(t - origin) // step: v for t, v in zip(utc, [1, 2, 3, 4, 6, 5], strict=True)}
    assert dict(zip(T.to_pandas().t, T.to_pandas().v, strict=True)) == expected
    for text, message in [
        ("2026-03-28T01:31", r"'2026-03-28T01:31' \(row 1\) labels no cell of the dimension"),
        ("2026-03-28T01:30+01:00", r"'2026-03-28T01:30\+01:00' \(row 1\) labels no cell"),  # 00:30 UTC
        ("2026-03-28T01:30+19:00", r"row 1: time '2026-03-28T01:30\+19:00' has the offset \+19:00, which is no UTC offset"),
        ("yesterday", r"row 1: 'yesterday' is not an ISO 8601 time"),
        ("2026-03-27", r"\(2026-03-27\) \(row 1\) is outside the dimension range 0:\*"),
    ]:
        with pytest.raises(ValidationError, match=rf"array Texts, column t: .*{message}|array Texts, column t: {message}"):
            T.insert({"t": ["2026-03-28T06:00", text], "v": [8, 9]})
    assert T.version == 2 and T.count() == 6
    # a CSV file's minutes with a zone (before: "'2026-03-28T03:00Z' ... is not an integer coordinate
    # or a time labelling a cell"; Spark reads a zone only after seconds)
    path = tmp_path / "times.csv"
    path.write_text("t,v\n2026-03-30T03:00Z,10\n2026-03-30T04:30+00:00,11\n2026-03-30T06:00:00Z,12\n")
    local.sql(f"LOAD Texts FROM '{path}'")
    loaded = T.sel(t="2026-03-30").to_pandas(labels=True)
    assert loaded.t.tolist() == [np.datetime64(f"2026-03-30T{h}") for h in ("03:00", "04:30", "06:00")]
    assert loaded.v.tolist() == [10, 11, 12]
    # numbers and times in one column: before, "column t mixes text and other values" (no text there)
    with pytest.raises(ValidationError, match=r"column t mixes values of different kinds: row 1 holds .*2026-04-06.*row 0 holds 2"):
        T.insert({"t": np.array([2, np.datetime64("2026-04-06")], dtype=object), "v": [8, 9]})
    assert T.version == 3


def test_to_xarray_box_of_two_open_ended_dimensions_after_deletes(local) -> None:
    """The box is found from the edge chunks only: cells spread over many chunks, the edge cells
    deleted afterwards, two open-ended dimensions; against Python's min and max of the cells kept."""
    rng = np.random.default_rng(5)
    B = local.create_array("OpenTwo<v:int64>[i=-7:*:3; j=2:*:4]")
    cells = {(int(i), int(j)): k for k, (i, j) in enumerate(zip(rng.integers(-7, 30, 40), rng.integers(2, 40, 40), strict=True))}
    B.insert({"i": [c[0] for c in cells], "j": [c[1] for c in cells], "v": list(cells.values())})
    for _ in range(3):
        ds = B.to_xarray()
        lows = (min(i for i, _ in cells), min(j for _, j in cells))
        highs = (max(i for i, _ in cells), max(j for _, j in cells))
        assert ds.i.values.tolist() == list(range(lows[0], highs[0] + 1))
        assert ds.j.values.tolist() == list(range(lows[1], highs[1] + 1))
        got = {(int(i), int(j)): int(v) for (i, j), v in ds.v.to_series().dropna().items()}
        assert got == cells
        # take away the first row of cells and the last column
        gone = [c for c in cells if c[0] == lows[0] or c[1] == highs[1]]
        B.delete({"i": [c[0] for c in gone], "j": [c[1] for c in gone]})
        cells = {c: v for c, v in cells.items() if c not in gone}
