"""Window extents given as durations are in time order on either direction of a time axis:
``("2h", "0h")`` is the trailing two hours, as pandas' ``rolling("3h")`` computes, also where the
axis runs backwards in time (cell 0 the latest)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from arrayviews import window


@pytest.mark.parametrize("step", [1, -1])
def test_duration_extents_are_trailing_in_time_on_rising_and_falling_axes(db, step):
    """Before: on a falling axis ("SCALE -1 HOUR") ("2h", "0h") summed the two following hours."""
    name = "rising" if step > 0 else "falling"
    A = db.create_array(f"{name}<v:int64>[t=0:23:8 SCALE {step} HOUR OFFSET '2026-05-01T12:00']")
    rng = np.random.default_rng(7)
    cells = np.sort(rng.choice(24, size=15, replace=False))
    values = rng.integers(-50, 50, size=cells.size)
    A.insert({"t": cells, "v": values})
    times = pd.Timestamp("2026-05-01T12:00") + pd.to_timedelta(step * cells, unit="h")
    reference = pd.Series(values, index=times).sort_index().rolling("3h").sum()
    expected = {cell: int(reference[time]) for cell, time in zip(cells, times, strict=True)}

    got = A.window({"t": ("2h", "0h")}, "sum(v)").to_pandas()
    assert dict(zip(got["t"], got["v_sum"], strict=True)) == expected
    view = db.create_view(f"{name}_trailing", window(name, ["2 hours", "0h"], ["sum(v)"]))
    stored = view.to_pandas()
    assert dict(zip(stored["t"], stored["v_sum"], strict=True)) == expected
    # counts of cells stay in cell order
    cellwise = A.window({"t": (2, 0)}, "sum(v)").to_pandas()
    by_cell = dict(zip(cells, values, strict=True))
    assert dict(zip(cellwise["t"], cellwise["v_sum"], strict=True)) == {
        c: sum(by_cell.get(k, 0) for k in range(c - 2, c + 1)) for c in cells
    }
