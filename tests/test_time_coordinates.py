"""Time dimensions (model/time_scale.py): schema text, labels, sel, regrid and xarray round trips,
against Python's datetime arithmetic, pandas and xarray's own selection."""

from __future__ import annotations

import datetime as dt
import itertools

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import xarray as xr
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews.model.errors import ParseError, SchemaError, ValidationError
from arrayviews.model.schema import ArraySchema
from arrayviews.model.schema_parser import parse_schema
from arrayviews.model.time_scale import TimeScale

#: Units of the schema text with their length as a Python timedelta (the reference).
UNITS = {
    "WEEK": dt.timedelta(weeks=1),
    "DAY": dt.timedelta(days=1),
    "HOUR": dt.timedelta(hours=1),
    "MINUTE": dt.timedelta(minutes=1),
    "SECOND": dt.timedelta(seconds=1),
    "MILLISECOND": dt.timedelta(milliseconds=1),
    "MICROSECOND": dt.timedelta(microseconds=1),
}
FIXTURES = [HealthCheck.function_scoped_fixture]


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """One in-process database for the whole module (time labels are not an engine question)."""
    return arrayviews.connect(str(tmp_path_factory.mktemp("times") / "warehouse"), execution="local")


def _instant(label: np.datetime64) -> dt.datetime:
    return label.astype("datetime64[us]").astype(dt.datetime)


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(-500, 500).filter(bool),
    unit=st.sampled_from(sorted(UNITS)),
    origin=st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1)),
    low=st.integers(-1000, 1000),
    extent=st.integers(1, 50),
)
def test_schema_text_labels_every_cell_as_datetime_arithmetic_does(count, unit, origin, low, extent):
    text = f"A<v:float64>[t={low}:{low + extent - 1}:10 SCALE {count} {unit}S OFFSET '{origin.isoformat()}']"
    schema = parse_schema(text)
    scale = schema.dimensions[0].scale
    cells = np.arange(low, low + extent)
    try:
        expected = [origin + int(c) * count * UNITS[unit] for c in cells]
    except OverflowError:  # past Python's years 1-9999: no reference there
        assume(False)
    assert [_instant(x) for x in scale.coordinates(cells)] == expected
    again = parse_schema(schema.to_text())  # the printed text reads back as the same scale
    assert again == schema
    assert ArraySchema.from_json(schema.to_json()) == schema


def test_one_scale_whatever_form_it_came_in():
    daily = TimeScale.of(np.timedelta64(1, "D"), "2026-01-01")
    assert TimeScale.of(np.timedelta64(24, "h"), np.datetime64("2026-01-01T00:00:00.000")) == daily
    assert TimeScale.of(dt.timedelta(days=1), dt.date(2026, 1, 1)) == daily
    assert TimeScale.of(np.timedelta64(86_400_000_000_000, "ns"), pd.Timestamp("2026-01-01")) == daily
    assert TimeScale.of(np.timedelta64(1, "D"), "2026-01-01T00:00Z") == daily
    assert daily.to_text() == "SCALE 1 DAY OFFSET '2026-01-01'"
    weekly = TimeScale.of(np.timedelta64(1, "W"), "2026-01-01")  # numpy counts weeks, not days
    assert [_instant(x) for x in weekly.coordinates([0, 1])] == [
        dt.datetime(2026, 1, 1),
        dt.datetime(2026, 1, 8),
    ]
    assert TimeScale.of(np.timedelta64(3, "10s")) == TimeScale.of(dt.timedelta(seconds=30))
    assert TimeScale.of(np.timedelta64(90, "m"), "2026-01-01T06:00").to_text() == (
        "SCALE 90 MINUTES OFFSET '2026-01-01T06:00'"
    )


@pytest.mark.parametrize(
    "dimension, message",
    [
        ("t=0:9:5 SCALE 1 MONTH", "MONTH is not a fixed length"),
        ("t=0:9:5 SCALE 2 YEARS", "YEARS is not a fixed length"),
        ("t=0:9:5 SCALE 1.5 DAYS", "whole nonzero number"),
        ("t=0:9:5 SCALE 0 HOURS", "whole nonzero number"),
        ("t=0:9:5 SCALE 1 DAY OFFSET '2026-01-01T00:00+25:00'", "no UTC offset"),
        ("t=0:9:5 SCALE 1 DAY OFFSET 'next tuesday'", "not an ISO 8601 time"),
        ("t=0:9:5 SCALE 1 NANOSECOND OFFSET '2262-04-11T23:47:16.854775807'", r"range of datetime64\[ns\]"),
    ],
)
def test_bad_time_scales_are_refused_where_they_are_written(dimension, message):
    with pytest.raises(ParseError, match=message) as caught:
        parse_schema(f"A<v:float64>[{dimension}]")
    assert "line 1, column" in str(caught.value)


def test_an_open_ended_time_axis_is_labelled_as_far_as_numpy_can(local):
    schema = parse_schema("A<v:float64>[t=0:*:100 SCALE 1 SECOND OFFSET '2026-01-01T00:00:00.001']")
    scale = schema.dimensions[0].scale
    assert _instant(scale.coordinate(86_400)) == dt.datetime(2026, 1, 2, 0, 0, 0, 1000)
    with pytest.raises(SchemaError, match="no time label"):
        scale.coordinate(2**62 - 1)


@pytest.fixture(scope="module")
def six_hourly():
    times = pd.date_range("2026-01-30", periods=40, freq="6h")
    values = np.arange(80.0).reshape(40, 2)
    return xr.Dataset({"temp": (("time", "lat"), values)}, coords={"time": times, "lat": [10.0, 20.0]})


@pytest.fixture(scope="module")
def grid(local, six_hourly):
    return local.from_xarray(six_hourly, "six_hourly")


def test_xarray_round_trip_keeps_times_exactly(grid, six_hourly):
    assert grid.schema.dimensions[0].scale == TimeScale.of(np.timedelta64(6, "h"), "2026-01-30")
    back = grid.to_xarray()
    np.testing.assert_array_equal(back.time.values, six_hourly.time.values)
    np.testing.assert_array_equal(back.temp.values, six_hourly.temp.values)


LABELS = [
    "2026-01-31",  # a day on a six-hourly axis: the four cells of that day, as pandas
    "2026-02",  # a month: every cell of February
    "2026-01-31T06",  # an hour
    np.datetime64("2026-02-03T18:00"),
    dt.datetime(2026, 2, 1, 12),
    pd.Timestamp("2026-02-02T00:00"),
    pd.Timestamp("2026-02-02T01:00:00+01:00"),  # aware: compared in UTC
    slice("2026-01-31", "2026-02-01"),
    slice("2026-01-31T07", "2026-02-02T11:00"),
    slice(None, "2026-01-30T12"),
    slice(np.datetime64("2026-02-05"), None),
    slice(dt.datetime(2026, 1, 31, 1), pd.Timestamp("2026-02-01T05:59:59")),
]


@pytest.mark.parametrize("label", LABELS, ids=[str(x) for x in LABELS])
def test_sel_selects_what_xarray_selects(grid, six_hourly, label):
    reference = six_hourly.temp.sel(time=_naive(label))
    if "time" not in reference.dims:  # xarray drops the dimension for one instant; arrayviews keeps it
        reference = reference.expand_dims("time")
    got = grid.sel(time=label).to_xarray()
    np.testing.assert_array_equal(got.time.values, reference.time.values)
    np.testing.assert_array_equal(got.temp.values, reference.values)


def _naive(label):
    if isinstance(label, slice):
        return slice(_naive(label.start), _naive(label.stop))
    if isinstance(label, pd.Timestamp) and label.tzinfo is not None:
        return label.tz_convert("UTC").tz_localize(None)
    return label


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURES)
@given(
    first=st.integers(0, 39),
    last=st.integers(0, 39),
    shift=st.sampled_from(["0min", "1min", "-1min", "3h", "-3h"]),
    precision=st.sampled_from(["D", "h", "m", "s"]),
)
def test_label_slices_agree_with_xarray_at_every_precision(grid, six_hourly, first, last, shift, precision):
    times = six_hourly.time.values
    low, high = sorted((first, last))
    start = pd.Timestamp(times[low]) + pd.Timedelta(shift)
    stop = pd.Timestamp(times[high]) - pd.Timedelta(shift)
    width = {"D": 10, "h": 13, "m": 16, "s": 19}[precision]
    texts = slice(start.isoformat()[:width], stop.isoformat()[:width])
    try:
        reference = six_hourly.temp.sel(time=texts).values
    except KeyError:  # pragma: no cover - xarray's refusals are not what is compared
        return
    if reference.size == 0 or texts.start > texts.stop:
        with pytest.raises(ValidationError, match="dimension time"):
            grid.sel(time=texts)
        return
    np.testing.assert_array_equal(grid.sel(time=texts).to_numpy("temp"), reference)


def test_labels_that_name_no_cell_or_are_not_times_are_refused(grid):
    with pytest.raises(
        ValidationError, match=r"no cell has a time within '2026-01-31T05:00'.*2026-01-31T06:00"
    ):
        grid.sel(time="2026-01-31T05:00")
    with pytest.raises(ValidationError, match="no cell has the coordinate"):
        grid.sel(time=np.datetime64("2026-01-31T05:00"))
    with pytest.raises(ValidationError, match="a time label is ISO text"):
        grid.sel(time=5.0)
    with pytest.raises(ValidationError, match="holds no coordinate"):
        grid.sel(time=slice("2027-01-01", "2027-02-01"))
    with pytest.raises(ValidationError, match="no UTC offset"):
        grid.sel(time="2026-01-31T06:00+19:00")
    # an offset names its instant: 11:00 at +05:00 is 06:00 UTC, the cell of that label
    np.testing.assert_array_equal(
        grid.sel(time="2026-01-31T11:00+05:00").to_numpy("temp"),
        grid.sel(time="2026-01-31T06:00").to_numpy("temp"),
    )
    with pytest.raises(ValidationError, match="may not be NaT"):
        grid.sel(time=np.datetime64("NaT"))


def test_regrid_labels_each_block_by_its_first_time(grid, six_hourly):
    daily = grid.regrid([4, 1], "avg(temp)")
    got = daily.to_xarray()
    np.testing.assert_array_equal(got.time.values, six_hourly.time.values[::4])
    expected = six_hourly.temp.coarsen(time=4).mean().values
    np.testing.assert_allclose(got.temp_avg.values, expected, rtol=0, atol=0)


def test_descending_times_select_like_xarray(local):
    times = pd.date_range("2026-03-01", periods=12, freq="D")[::-1]
    data = xr.DataArray(np.arange(12.0), coords={"day": times}, dims="day", name="v")
    array = local.from_xarray(data, "descending_days")
    assert array.schema.dimensions[0].scale.step < 0
    label = slice(np.datetime64("2026-03-09"), np.datetime64("2026-03-04"))
    np.testing.assert_array_equal(array.sel(day=label).to_numpy("v"), data.sel(day=label).values)


@pytest.mark.parametrize(
    "times, message",
    [
        (pd.DatetimeIndex(["2026-01-01", "2026-01-02", "2026-01-04"]), "not evenly spaced: 2026-01-04"),
        (pd.DatetimeIndex(["2026-01-01", "2026-01-01", "2026-01-01"]), "one time for every cell"),
        (pd.DatetimeIndex(["2026-01-01", "NaT", "2026-01-03"]), "holds NaT"),
        (np.array(["2026-01", "2026-02", "2026-03"], dtype="datetime64[M]"), "not evenly spaced"),
    ],
)
def test_uneven_or_unfixed_times_are_refused_and_nothing_is_created(local, times, message):
    data = xr.DataArray(np.arange(3.0), coords={"t": times}, dims="t", name="v")
    with pytest.raises(ValidationError, match=message):
        local.from_xarray(data, "uneven_times")
    assert "uneven_times" not in local.arrays()


def test_statements_create_and_show_a_time_axis(local):
    local.sql("CREATE ARRAY hourly <v:float64>[t=0:*:24 SCALE 1 HOUR OFFSET '2026-11-29T00:00'; x=0:3:4]")
    hourly = local.array("hourly")
    hourly.insert(pd.DataFrame({"t": [0, 5, 30], "x": [1, 2, 3], "v": [1.0, 2.0, 3.0]}))
    shown = str(local.sql("SHOW SCHEMA OF hourly"))
    assert "SCALE 1 HOUR OFFSET '2026-11-29T00:00'" in shown
    window = hourly.sel(t=slice("2026-11-29T04:00", "2026-11-30T12:00")).to_xarray()
    expected = [dt.datetime(2026, 11, 29) + dt.timedelta(hours=h) for h in range(4, 37)]
    assert [_instant(x) for x in window.t.values] == expected
    assert np.nansum(window.v.values) == 5.0  # cells 5 and 30
    whole = hourly.to_xarray()  # open-ended: from the first to the last hour holding data
    assert [_instant(x) for x in whole.t.values] == [dt.datetime(2026, 11, 29) + dt.timedelta(hours=h) for h in range(31)]
    assert np.nansum(whole.v.values) == 6.0 and np.count_nonzero(~np.isnan(whole.v.values)) == 3
    with pytest.raises(ParseError, match="MONTHS is not a fixed length") as caught:
        local.sql("CREATE ARRAY monthly <v:float64>[t=0:11:12 SCALE 1 MONTHS]")
    assert "line 1, column" in str(caught.value)
    assert "monthly" not in local.arrays()


def test_a_reopened_warehouse_keeps_the_time_axis(local, grid):
    again = arrayviews.connect(local.warehouse.location, execution="local")
    assert again.array("six_hourly").schema == grid.schema


def test_plot_draws_a_time_axis_as_dates(grid):
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    ax = grid.plot("temp")
    try:
        top, bottom = sorted(ax.get_ylim())
        first = mdates.date2num(np.datetime64("2026-01-30T00:00"))
        assert top == pytest.approx(first - 0.125)  # half of six hours before the first cell's time
        assert isinstance(ax.yaxis.get_major_formatter(), mdates.AutoDateFormatter)
    finally:
        plt.close(ax.figure)


def test_to_xarray_of_an_open_ended_array_is_refused_by_name(local):
    local.sql("CREATE ARRAY open_cells <v:int32>[i=0:*:10; j=0:2:3]")
    with pytest.raises(
        ValidationError, match="array open_cells .*dimension i is open-ended.*read a subarray"
    ):
        local.array("open_cells").to_xarray()  # numpy's "array is too big" before


def test_blocks_and_windows_given_as_durations(grid, six_hourly):
    daily = grid.regrid({"time": "1 day"}, "avg(temp)").to_xarray()
    expected = six_hourly.temp.resample(time="1D").mean()
    np.testing.assert_array_equal(daily.time.values, expected.time.values)
    np.testing.assert_array_equal(daily.temp_avg.values, expected.values)
    assert grid.regrid(["1D", 1], "avg(temp)").shape == (10, 2)
    # a trailing day: pandas' rolling over the times (t - 24h, t]
    trailing = grid.window({"time": (dt.timedelta(hours=18), "0h")}, "sum(temp)").to_numpy("temp_sum")
    frame = six_hourly.temp.to_pandas()
    np.testing.assert_array_equal(trailing, frame.rolling("24h").sum().values)


@pytest.mark.parametrize(
    "blocks, message",
    [
        ({"time": "5h"}, "not a whole number of the dimension's steps"),
        ({"time": "1 fortnight"}, "not a duration"),
        ({"lat": "1 day"}, "durations need a time scale"),
        ({"time": np.timedelta64(-1, "D")}, "may not be negative"),
        ({"time": 2.5}, "regrid block size for time"),
    ],
)
def test_durations_that_are_not_whole_steps_are_refused(grid, blocks, message):
    with pytest.raises(ValidationError, match=message):
        grid.regrid(blocks, "avg(temp)")


def test_the_demo_time_grid_part_passes_its_checks(local):
    from arrayviews.cli.grid_demo import run_grid_demo

    result = run_grid_demo(local, days=3)
    assert result["checks"] and all(result["checks"].values()), result["checks"]


def test_a_fine_step_given_for_a_coarse_scale_is_made_coarse_first():
    # one day in nanoseconds from 2500-01-01: past datetime64[ns], but a daily scale holds it
    scale = TimeScale.of(np.timedelta64(86_400 * 10**9, "ns"), np.datetime64("2500-01-01T00:00:00"))
    assert scale == TimeScale.of(np.timedelta64(1, "D"), "2500-01-01")
    assert _instant(scale.coordinate(1)) == dt.datetime(2500, 1, 2)


def test_a_window_view_takes_durations_and_stores_cells(local, grid, six_hourly):
    from arrayviews.views.definition import window

    view = local.create_view("trailing_day", window("six_hourly", ["18 hours", "0h", 0, 0], ["sum(temp)"]))
    assert (view.definition.before, view.definition.after) == ((3, 0), (0, 0))
    frame = six_hourly.temp.to_pandas()
    np.testing.assert_array_equal(view.to_numpy("temp_sum"), frame.rolling("24h").sum().values)
    with pytest.raises(ValidationError, match="not a whole number of the dimension's steps"):
        local.create_view("bad_span", window("six_hourly", ["5 hours", 0, 0, 0], ["sum(temp)"]))
    assert "bad_span" not in local.views()


# -- inserting cells by their times ---------------------------------------------------------------
_INSERTS = itertools.count()


@settings(max_examples=15, deadline=None, suppress_health_check=FIXTURES)
@given(
    count=st.integers(1, 90),
    unit=st.sampled_from(["DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND"]),
    origin=st.datetimes(dt.datetime(1950, 1, 1), dt.datetime(2100, 1, 1)),
    cells=st.lists(st.integers(0, 10_000), min_size=1, max_size=8, unique=True),
    form=st.sampled_from(["datetime64[ms]", "datetime64[us]", "datetime64[ns]", "aware pandas", "pyarrow"]),
)
def test_cells_given_as_times_land_where_datetime_arithmetic_puts_them(
    local, count, unit, origin, cells, form
):
    """Before: ``insert`` refused times on a time dimension ("coordinates must be integers, got
    timestamp[us]"; numpy hours failed inside pyarrow with "Unsupported datetime64 time unit")."""
    origin = origin.replace(microsecond=origin.microsecond // 1000 * 1000)
    A = local.create_array(
        f"at_times_{next(_INSERTS)}<v:int64>[t=0:*:64 SCALE {count} {unit}S OFFSET '{origin.isoformat()}']"
    )
    times = [origin + cell * count * UNITS[unit] for cell in cells]  # the reference labels
    # numpy wraps a datetime64[ns] past 2262-04-11 silently (to 1677), so such an input is not
    # the time it was meant to be; pandas refuses it. Neither is a case of ours.
    assume(form not in ("datetime64[ns]", "aware pandas") or max(times) < dt.datetime(2262, 4, 11))
    if form == "aware pandas":  # the same instants one hour east of UTC
        column = pd.Series(pd.to_datetime(times)).dt.tz_localize("UTC").dt.tz_convert("Etc/GMT-1")
        batch = pd.DataFrame({"t": column, "v": cells})
    elif form == "pyarrow":
        batch = {"t": pa.array(times, pa.timestamp("ms")), "v": cells}
    else:
        batch = {"t": np.array(times, dtype=form), "v": np.array(cells)}
    A.insert(batch)
    frame = A.to_pandas()
    assert sorted(zip(frame["t"].tolist(), frame["v"].tolist(), strict=True)) == [
        (cell, cell) for cell in sorted(cells)
    ]


def test_times_in_coarse_numpy_units_and_dates_are_read(local):
    A = local.create_array("coarse_times<v:int64>[t=0:99:10 SCALE 6 HOURS OFFSET '2026-01-01']")
    A.insert({"t": np.array(["2026-01-01T06", "2026-01-02T18"], "datetime64[h]"), "v": [1, 2]})
    A.insert({"t": np.array(["2026-01-03"], "datetime64[D]"), "v": [3]})
    A.insert({"t": [dt.date(2026, 1, 4)], "v": [4]})
    assert dict(zip(A.to_pandas()["t"], A.to_pandas()["v"], strict=True)) == {1: 1, 7: 2, 8: 3, 12: 4}


@pytest.mark.parametrize(
    ("times", "message"),
    [
        (["2026-01-01T06:00", "2026-01-01T07:00"], r"2026-01-01T07:00:00 \(row 1\) labels no cell"),
        (["2025-12-31T18:00"], r"coordinate -1 \(2025-12-31T18:00:00\) \(row 0\) is outside"),
        (["2026-01-01T06:00", "NaT"], r"missing coordinate in row 1"),
    ],
)
def test_a_time_that_labels_no_cell_is_refused_by_row_and_nothing_is_written(local, times, message):
    A = local.create_array(
        f"refused_times_{next(_INSERTS)}<v:int64>[t=0:99:10 SCALE 6 HOURS OFFSET '2026-01-01']"
    )
    with pytest.raises(ValidationError, match=message):
        A.insert({"t": np.array(times, "datetime64[m]"), "v": np.arange(len(times))})
    assert A.version == 0 and A.to_pandas().empty


def test_times_on_a_dimension_without_a_time_scale_are_refused_saying_why(local):
    A = local.create_array("no_time_scale<v:int64>[t=0:99:10]")
    with pytest.raises(ValidationError, match=r"coordinates must be integers \(or times, on a dimension"):
        A.insert({"t": np.array(["2026-01-01"], "datetime64[s]"), "v": [1]})


def test_spark_frames_and_csv_files_give_cells_as_times(local, spark, tmp_path):
    """Before: a Spark DataFrame's timestamps and a CSV file's ISO times on a time dimension were
    refused ("coordinates must be integers"; "'2026-01-04T06:00' is not an integer coordinate")."""
    A = local.create_array("spark_times<v:int64>[t=0:99:10 SCALE 6 HOURS OFFSET '2026-01-01']")
    origin, step = dt.datetime(2026, 1, 1), dt.timedelta(hours=6)
    frame = spark.createDataFrame([(origin + 3 * step, 1), (origin + 9 * step, 2)], "t timestamp, v bigint")
    A.insert(frame)
    A.insert(spark.createDataFrame([(dt.date(2026, 1, 5), 3)], "t date, v bigint"))
    path = tmp_path / "times.csv"
    path.write_text(f"t,v\n{(origin + 21 * step).isoformat()},4\n22,5\n{origin + 23 * step},6\n")
    local.sql(f"LOAD spark_times FROM '{path}'")
    assert dict(zip(A.to_pandas()["t"], A.to_pandas()["v"], strict=True)) == {
        3: 1,
        9: 2,
        16: 3,
        21: 4,
        22: 5,
        23: 6,
    }
    off = spark.createDataFrame([(origin + step + dt.timedelta(minutes=1), 7)], "t timestamp, v bigint")
    with pytest.raises(ValidationError, match="2026-01-01 06:01:00 labels no cell of the dimension"):
        A.insert(off)
    path.write_text("t,v\n2026-01-01T06:01,8\n")
    with pytest.raises(ValidationError, match="is not an integer coordinate or a time labelling a cell"):
        local.sql(f"LOAD spark_times FROM '{path}'")
    assert A.version == 3


def test_to_pandas_with_labels_gives_times_and_coordinates(local):
    A = local.create_array(
        "labelled<v:int64>[t=0:99:10 SCALE 90 MINUTES OFFSET '2026-03-01T06:00'; y=0:9:5 SCALE 0.5 OFFSET -1.0; i=0:3:2]"
    )
    A.insert({"t": [0, 7, 31], "y": [0, 3, 9], "i": [1, 2, 3], "v": [1, 2, 3]})
    frame = A.to_pandas(labels=True)
    origin = dt.datetime(2026, 3, 1, 6)
    assert [_instant(np.datetime64(t)) for t in frame["t"]] == [
        origin + c * dt.timedelta(minutes=90) for c in (0, 7, 31)
    ]
    assert frame["y"].tolist() == [-1.0 + 0.5 * c for c in (0, 3, 9)]
    assert frame["i"].tolist() == [1, 2, 3] and frame["v"].tolist() == [1, 2, 3]
    assert A.to_pandas()["t"].tolist() == [0, 7, 31]  # cells without labels, as before


# -- conditions comparing a time dimension with a time written as text --------------------------
_COMPARE = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
_MIRROR = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@pytest.fixture(scope="module")
def hourly_both_ways(local):
    """Two arrays over cells 0..47, one with times rising by 90 minutes, one falling by 2 hours."""
    up = local.create_array("up_times<v:int64>[t=0:47:16 SCALE 90 MINUTES OFFSET '2026-01-01T00:00']")
    down = local.create_array("down_times<v:int64>[t=0:47:16 SCALE -2 HOURS OFFSET '2026-01-03T00:00']")
    for array in (up, down):
        array.insert({"t": np.arange(48), "v": np.arange(48)})
    return {"up": (up, dt.timedelta(minutes=90)), "down": (down, dt.timedelta(hours=-2))}


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURES)
@given(
    which=st.sampled_from(["up", "down"]),
    op=st.sampled_from(sorted(_COMPARE)),
    minutes=st.integers(-600, 5000),
    literal_first=st.booleans(),
    between=st.booleans(),
    span=st.integers(0, 1500),
)
def test_a_condition_on_a_time_written_as_text_keeps_the_cells_datetime_arithmetic_keeps(
    hourly_both_ways, which, op, minutes, literal_first, between, span
):
    """Before: ``time >= '2026-01-02'`` was refused ("cannot compare BIGINT with STRING")."""
    array, step = hourly_both_ways[which]
    origin = dt.datetime(2026, 1, 1) if which == "up" else dt.datetime(2026, 1, 3)
    instant = dt.datetime(2026, 1, 1) + dt.timedelta(minutes=minutes)
    if between:
        high = instant + dt.timedelta(minutes=span)
        condition = f"t BETWEEN '{instant.isoformat()}' AND '{high.isoformat()}'"
        expected = [c for c in range(48) if instant <= origin + c * step <= high]
    else:
        text = f"'{instant.isoformat(sep=' ')}'"
        condition = f"{text} {_MIRROR[op]} t" if literal_first else f"t {op} {text}"
        expected = [c for c in range(48) if _COMPARE[op](origin + c * step, instant)]
    assert sorted(array.filter(condition).to_pandas()["t"].tolist()) == expected


def test_time_conditions_in_statements_and_text_that_is_no_time(local, hourly_both_ways):
    got = local.sql("SELECT * FROM up_times WHERE t >= '2026-01-03T21:00Z' AND v < 100").to_pandas()
    assert got["t"].tolist() == [46, 47]  # 2026-01-03T21:00 is cell 46 (46 * 90 minutes)
    with pytest.raises(ValidationError, match="'2026-02-30' is not a time"):
        local.sql("SELECT * FROM up_times WHERE t < '2026-02-30'")
    with pytest.raises(ValidationError, match="no UTC offset"):
        local.sql("SELECT * FROM up_times WHERE t < '2026-01-02T00:00+02:61'")
    # 2026-01-04T00:30+03:00 is 2026-01-03T21:30 UTC: after cell 46 (21:00), before 47 (22:30)
    got = local.sql("SELECT * FROM up_times WHERE t > '2026-01-04T00:30+03:00' AND v < 100").to_pandas()
    assert got["t"].tolist() == [47]


def test_delete_by_labels_removes_what_sel_selects(local):
    A = local.create_array("delete_days<v:int64>[t=0:99:10 SCALE 6 HOURS OFFSET '2026-01-01'; i=0:1:2]")
    A.insert({"t": np.repeat(np.arange(12), 2), "i": np.tile([0, 1], 12), "v": np.arange(24)})
    origin = dt.datetime(2026, 1, 1)
    A.delete(labels={"t": "2026-01-02", "i": 1})
    kept = sorted(zip(A.to_pandas()["t"], A.to_pandas()["i"], strict=True))
    gone = {(c, 1) for c in range(12) if (origin + c * dt.timedelta(hours=6)).date() == dt.date(2026, 1, 2)}
    assert kept == sorted({(c, i) for c in range(12) for i in (0, 1)} - gone)
    with pytest.raises(ValidationError, match="delete takes one of cells, box=... or labels=..."):
        A.delete(box={"t": (0, 1)}, labels={"t": "2026-01-01"})


@settings(max_examples=12, deadline=None, suppress_health_check=FIXTURES)
@given(
    cells=st.lists(st.integers(0, 5_000), min_size=1, max_size=6, unique=True),
    minutes=st.integers(-14 * 60, 14 * 60),
    at_once=st.booleans(),
)
def test_text_with_an_offset_from_utc_is_the_instant_it_names(local, cells, minutes, at_once):
    """Before: '2026-01-02T06:00+05:30' was refused ("give times in UTC") by insert, sel and
    conditions, while LOAD of a CSV file and Spark read it as its instant."""
    A = local.create_array(f"offset_times_{next(_INSERTS)}<v:int64>[t=0:*:64 SCALE 90 MINUTES OFFSET '2001-02-03']")
    zone = dt.timezone(dt.timedelta(minutes=minutes))
    origin = dt.datetime(2001, 2, 3, tzinfo=dt.UTC)
    texts = [(origin + cell * dt.timedelta(minutes=90)).astimezone(zone).isoformat() for cell in cells]
    if not at_once:  # one zone-less text among them: read row by row
        texts[0] = (origin + cells[0] * dt.timedelta(minutes=90)).replace(tzinfo=None).isoformat()
    A.insert({"t": texts, "v": cells})
    frame = A.to_pandas()
    assert sorted(zip(frame["t"].tolist(), frame["v"].tolist(), strict=True)) == [(c, c) for c in sorted(cells)]
    chosen = cells[-1]
    assert A.sel(t=texts[-1]).to_pandas()["v"].tolist() == [chosen]
