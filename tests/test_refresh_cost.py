"""refresh('auto') calibrates the cost model's predictions by what the view's own refreshes measured."""

from __future__ import annotations

import numpy as np
import pytest

from arrayviews.model.shapes import L1
from arrayviews.views.definition import similarity
from arrayviews.views.refresh_cost import CALIBRATION_REFRESHES, measured_scales


def row(strategy: str, executor: str, measured: float | None, model: float | None) -> dict:
    estimate = {} if model is None else {"model_seconds": model, "executor": executor}
    return {
        "strategy": strategy,
        "executor": executor,
        "measured_seconds": measured,
        "estimates": {strategy: estimate},
    }


def test_scales_are_medians_of_the_newest_refreshes_per_strategy_and_executor() -> None:
    rows = [row("full", "local", 100.0, 1.0)]  # the oldest full refresh, beyond the newest five
    rows += [row("full", "local", m, 0.5) for m in (1.0, 2.0, 3.0, 4.0, 5.0)]  # ratios 2, 4, 6, 8, 10
    rows += [row("baseline", "local", 0.3, 0.1), row("baseline", "local", 0.5, 0.1)]  # ratios 3, 5
    rows += [row("baseline", "spark", 9.0, 3.0)]
    rows += [row("baseline", "local", None, 0.1), row("full", "local", 7.0, None)]  # unusable
    assert CALIBRATION_REFRESHES == 5
    scales = measured_scales(rows)
    assert scales == {
        ("full", "local"): pytest.approx(6.0),
        ("baseline", "local"): pytest.approx(4.0),
        ("baseline", "spark"): pytest.approx(3.0),
    }


def test_auto_scales_full_by_the_measured_creation_and_tries_incremental_at_model_cost(db) -> None:
    array = db.create_array("A<v:float64>[i=0:59:20; j=0:59:20]")
    rng = np.random.default_rng(3)
    cells = np.argwhere(rng.random((60, 60)) < 0.5)
    array.insert({"i": cells[:, 0], "j": cells[:, 1], "v": rng.random(len(cells))})
    view = db.create_view("N", similarity("A", "A", L1(1), ["count(*) as cnt"]))
    created = view.refresh_history().iloc[-1]
    full = created["estimates"]["full"]
    assert created["measured_seconds"] > 0 and full["model_seconds"] > 0
    array.insert({"i": [59], "j": [59], "v": [1.0]}, on_conflict="replace")
    result = view.refresh("auto")
    estimates = result.estimates
    expected_scale = created["measured_seconds"] / full["model_seconds"]
    if estimates["full"]["executor"] == full["executor"]:
        assert estimates["full"]["scale"] == pytest.approx(expected_scale, rel=1e-3)
        assert estimates["full"]["predicted_seconds"] == pytest.approx(
            estimates["full"]["model_seconds"] * expected_scale, rel=1e-3
        )
    assert estimates["baseline"]["scale"] == 1.0  # never run on this view: the model's own figure
    assert view.verify()


def test_a_whole_array_estimate_from_the_summary_equals_the_planned_files(db) -> None:
    """The unplanned estimate of a whole read (snapshot summary totals) equals the sums over the
    files a plan lists, after appends and a replace that removes files."""
    from arrayviews.operators.source import StoredSource

    array = db.create_array("E<v:float64>[i=0:99:10; j=0:99:10]")
    array.write_dense(np.arange(10_000.0).reshape(100, 100))
    array.insert({"i": [3, 55], "j": [4, 66], "v": [1.0, 2.0]}, on_conflict="replace")
    table = array.source.table
    source = StoredSource(table, table.current_version())
    files = table.data_files()
    estimate = source.estimate()
    assert estimate.bytes == sum(f.file_size_in_bytes for f in files)
    assert estimate.chunks == sum(f.record_count for f in files)
    assert estimate.cells == 10_000
