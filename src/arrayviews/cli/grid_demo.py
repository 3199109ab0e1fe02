"""Demo part 5: a satellite-like temperature grid over time, latitude and longitude arrives day by
day in six-hourly fields; a trailing-day window view is kept fresh, daily means are regridded by a
duration, and every result is checked against xarray computing the same from the same fields."""

from __future__ import annotations

import time

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from arrayviews.database import Database
from arrayviews.views.definition import window

console = Console()
GRID, VIEW = "surface_temperature", "trailing_day_mean"
SCHEMA = (
    "<t2m:float64>[time=0:*:4 SCALE 6 HOURS OFFSET '2026-11-01T00:00'; "
    "lat=0:44:45 SCALE -4.0 OFFSET 88.0 UNIT 'degrees_north'; "
    "lon=0:89:45 SCALE 4.0 OFFSET -178.0 UNIT 'degrees_east']"
)


def _fields(day: int, rng: np.random.Generator) -> np.ndarray:
    """Four six-hourly fields of day ``day`` (kelvin): a latitude gradient, a daily cycle that follows
    the sun in longitude, and weather noise."""
    lat = 88.0 - 4.0 * np.arange(45)
    lon = -178.0 + 4.0 * np.arange(90)
    hours = 24 * day + 6 * np.arange(4)
    sun = np.cos(np.radians(lon[None, None, :] + 15.0 * (hours[:, None, None] % 24) - 180.0))
    base = 288.0 - 30.0 * np.sin(np.radians(lat))[None, :, None] ** 2
    return base + 5.0 * sun + rng.normal(0.0, 1.5, size=(4, 45, 90))


def run_grid_demo(db: Database, days: int = 6) -> dict:
    import xarray as xr

    for name, drop in ((VIEW, db.drop_view), (GRID, db.drop_array)):
        if name in {n.lower() for n in (db.views() if drop == db.drop_view else db.arrays())}:
            drop(name)
    console.print(
        "[bold]time grid[/bold]: six-hourly surface temperature on a 4-degree grid, one day a batch; "
        "a trailing-day mean view and daily means by a duration"
    )
    started = time.perf_counter()
    rng = np.random.default_rng(2026)
    grid = db.create_array(GRID + SCHEMA)
    grid.write_dense(_fields(0, rng), origin=(0, 0, 0))
    view = db.create_view(VIEW, window(GRID, ["18 hours", "0 hours", 0, 0, 0, 0], ["avg(t2m)"]))
    refreshes = []
    for day in range(1, days):
        grid.write_dense(_fields(day, rng), origin=(4 * day, 0, 0))
        refreshes.append(view.refresh().seconds)
    reference = grid[0 : 4 * days, :, :].to_xarray()  # the stored fields, as xarray sees them
    expected_window = reference.t2m.rolling(time=4, min_periods=1).mean()
    got_window = view[0 : 4 * days, :, :].to_xarray().t2m_avg
    daily = grid[0 : 4 * days, :, :].regrid({"time": "1 day"}, "avg(t2m)").to_xarray().t2m_avg
    expected_daily = reference.t2m.resample(time="1D").mean()
    one_day = grid.sel(time="2026-11-03").to_xarray().t2m
    checks = {
        "trailing-day window view = xarray rolling mean over four six-hourly fields": bool(
            np.allclose(got_window.values, expected_window.values, rtol=1e-12, atol=0)
        ),
        "daily means by regrid({'time': '1 day'}) = xarray resample('1D')": bool(
            np.array_equal(daily.time.values, expected_daily.time.values)
            and np.allclose(daily.values, expected_daily.values, rtol=1e-12, atol=0)
        ),
        "sel(time='2026-11-03') = xarray's partial-string selection": bool(
            xr.DataArray.equals(one_day, reference.t2m.sel(time="2026-11-03"))
        ),
    }
    table = Table(title="time grid")
    table.add_column("step")
    table.add_column("result")
    table.add_row("grid", escape(grid.schema.to_text()))
    table.add_row("batches", f"{days} days, {4 * days} fields of 45 x 90 cells")
    table.add_row("window view refresh", f"median {np.median(refreshes):.2f} s per day")
    table.add_row(
        "daily means",
        ", ".join(
            f"{str(t)[:10]}: {v:.2f} K"
            for t, v in zip(daily.time.values, daily.mean(("lat", "lon")).values, strict=True)
        ),
    )
    console.print(table)
    for name, ok in checks.items():
        console.print(f"  [{'green' if ok else 'red'}]{'ok  ' if ok else 'FAIL'}[/] {name}")
    total = time.perf_counter() - started
    console.print(f"time grid part done in {total:.1f} s")
    return {"checks": checks, "seconds": total, "refresh_seconds": refreshes}
