"""``Array.write_xarray``: an xarray object written where its coordinates say (times on a time
scale, numbers on a coordinate scale, integer cells elsewhere). References: xarray's own ``concat``
and ``isel`` of the same data, and the values put in."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import arrayviews
from arrayviews.model.errors import ValidationError

SCHEMA = (
    "era<t2m:float32 NULL, q:float64 NULL>[time=0:*:8 SCALE 6 HOURS OFFSET '2026-01-01'; "
    "lat=0:18:19 SCALE -10.0 OFFSET 90.0; lon=0:35:36 SCALE 10.0]"
)


def _day(number: int, seed: int) -> xr.Dataset:
    """Four six-hourly fields of day ``number`` of January 2026, with a few missing values."""
    rng = np.random.default_rng(seed)
    t2m = rng.standard_normal((4, 19, 36)).astype("float32")
    t2m[0, 0, :3] = np.nan
    q = rng.standard_normal((4, 19, 36)) * 1e300
    q[1, 2, 3] = np.nan
    return xr.Dataset(
        {"t2m": (("time", "lat", "lon"), t2m), "q": (("time", "lat", "lon"), q)},
        coords={
            "time": pd.date_range(f"2026-01-{number:02d}", periods=4, freq="6h"),
            "lat": np.linspace(90, -90, 19),
            "lon": np.arange(36) * 10.0,
        },
    )


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    return arrayviews.connect(str(tmp_path_factory.mktemp("write_xarray") / "w"), execution="local")


def test_days_written_one_after_another_equal_xarrays_concat(local) -> None:
    A = local.create_array(SCHEMA)
    days = [_day(n, n) for n in (1, 2, 3)]
    A.write_xarray(days[0])
    A.write_xarray(days[1].transpose("lon", "time", "lat"))  # any dimension order
    A.write_xarray(days[2].isel(lat=slice(None, None, -1)))  # latitudes rising: the same cells
    expected = xr.concat(days, "time")
    got = A.sel(time=slice("2026-01-01", "2026-01-03")).to_xarray()
    np.testing.assert_array_equal(got.time.values, expected.time.values)
    np.testing.assert_array_equal(got["t2m"].values, expected["t2m"].values)  # NaN where missing
    np.testing.assert_array_equal(got["q"].values, expected["q"].values)


def test_a_region_lands_on_its_cells_and_replaces_only_them(local) -> None:
    A = local.create_array(SCHEMA.replace("era<", "era_region<"))
    day = _day(5, 7)
    A.write_xarray(day)
    patch = day.isel(time=[2], lat=slice(4, 7), lon=slice(10, 12)) * 0 + 1.0
    version = A.version
    with pytest.raises(ValidationError, match="already exist"):
        A.write_xarray(patch)
    assert A.version == version
    A.write_xarray(patch, on_conflict="replace")
    expected = day.copy(deep=True)
    expected["t2m"][2, 4:7, 10:12] = 1.0
    got = A.sel(time=slice("2026-01-05", "2026-01-05")).to_xarray()
    np.testing.assert_array_equal(got["t2m"].values, expected["t2m"].values)


_REFUSED = itertools.count()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.assign_coords(time=d.time + np.timedelta64(1, "h")), "labels no cell of the dimension"),
        (lambda d: d.assign_coords(lat=d.lat + 0.5), "is no coordinate of the dimension"),
        (lambda d: d.isel(lon=slice(None, None, 2)), "not on consecutive cells"),
        (lambda d: d.rename(t2m="temperature"), "variable temperature is no attribute"),
        (lambda d: d.drop_vars("lon"), "dimension lon has no coordinate"),
        (lambda d: d.isel(lat=0).drop_vars("lat"), "has dimensions"),  # with lat kept, it goes there
    ],
)
def test_what_does_not_fit_the_array_is_refused_and_nothing_is_written(local, change, message) -> None:
    name = f"era_refused_{next(_REFUSED)}"
    A = local.create_array(SCHEMA.replace("era<", f"{name}<"))
    with pytest.raises(ValidationError, match=message):
        A.write_xarray(change(_day(1, 3)))
    assert A.version == 0


def test_an_array_made_by_from_xarray_says_how_to_write_beyond_its_data(local) -> None:
    A = local.from_xarray(_day(1, 1), "era_made")
    with pytest.raises(ValidationError, match=r"outside the dimension's range 0:3 .* time=0:\*"):
        A.write_xarray(_day(2, 2))
    assert A.version == 1


def test_a_data_array_over_integer_cells(local) -> None:
    A = local.create_array("counts<n:int64>[i=0:9:5; j=-3:3:7]")
    data = xr.DataArray(np.arange(6).reshape(2, 3), coords={"i": [4, 5], "j": [-1, 0, 1]}, dims=("i", "j"))
    A.write_xarray(data)
    cells = A.to_pandas()
    assert sorted(zip(cells["i"], cells["j"], cells["n"], strict=True)) == [
        (i, j, 3 * (i - 4) + (j + 1)) for i in (4, 5) for j in (-1, 0, 1)
    ]
