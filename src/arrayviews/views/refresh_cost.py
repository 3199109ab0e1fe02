"""What a view refresh would cost, from metadata: the work of a full recomputation and of an
incremental (baseline) refresh, each on the executor the cost model picks, and the cheaper of them
for ``refresh("auto")``.

The engine cost model counts cells and jobs; it cannot see what a strategy does per cell (a full
similarity recomputation forms every pair of the join, an incremental one only the update triples,
and both pay planning and commit costs the model leaves out). So each prediction is scaled by what
this view's own refreshes measured: the median, over its last :data:`CALIBRATION_REFRESHES`
refreshes (view creation included) that ran the same strategy on the same executor, of measured
seconds over the model's seconds. A strategy the view has not run yet keeps the model's figure
(scale 1), so ``auto`` tries it once and learns its cost.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from arrayviews.execution.cost import Choice, Estimate
from arrayviews.execution.executors import Executors

#: Spark jobs a refresh runs (compute + write in one job; reading the kept fragments of rewritten
#: files, and the stale-extreme pass of min/max views, add one each).
FULL_JOBS = 2
INCREMENTAL_JOBS = 2
#: The refreshes of a view (per strategy and executor, newest first) that calibrate its predictions.
CALIBRATION_REFRESHES = 5


@dataclass(frozen=True)
class StrategyCost:
    """One refresh strategy: what it reads, the executor chosen for it and the predicted time."""

    strategy: str
    estimate: Estimate
    choice: Choice
    pairs: int = 0  # update triples (similarity views) or view chunks to recompute (window views)
    view_chunks: int | None = None  # view chunks rewritten (None: all)
    #: measured over model seconds of this view's earlier refreshes with this strategy and executor
    scale: float = 1.0

    @property
    def model_seconds(self) -> float:
        """The engine cost model's prediction, before the view's own calibration."""
        return self.choice.predicted[self.choice.executor]

    @property
    def seconds(self) -> float:
        return self.model_seconds * self.scale

    def as_dict(self) -> dict:
        return {
            "executor": self.choice.executor,
            "cells": self.estimate.cells,
            "bytes": self.estimate.bytes,
            "chunks": self.estimate.chunks,
            "jobs": self.estimate.jobs,
            "pairs": self.pairs,
            "view_chunks": self.view_chunks,
            "predicted_seconds": round(self.seconds, 6),
            "model_seconds": round(self.model_seconds, 9),
            "scale": round(self.scale, 6),
        }


def cost_of(
    executors: Executors, strategy: str, estimate: Estimate, pairs: int = 0, view_chunks: int | None = None
) -> StrategyCost:
    """The cost of a strategy reading ``estimate`` on the executor the cost model picks for it."""
    _, choice = executors.choose(estimate)
    return StrategyCost(strategy, estimate, choice, pairs, view_chunks)


def measured_scales(refreshes: Iterable[Mapping]) -> dict[tuple[str, str], float]:
    """Per (strategy, executor), the median measured / model seconds over the newest
    :data:`CALIBRATION_REFRESHES` ``refreshes`` (oldest first, as ``refresh_history`` rows: strategy,
    executor, measured_seconds and the estimates recorded then) that ran it."""
    ratios: dict[tuple[str, str], list[float]] = {}
    for row in refreshes:
        measured = row.get("measured_seconds")
        estimate = (row.get("estimates") or {}).get(row.get("strategy"), {})
        model = estimate.get("model_seconds")
        if measured is None or measured != measured or not model or model <= 0:
            continue  # an older record without the model's figure, or nothing measured
        ratios.setdefault((row["strategy"], row.get("executor") or estimate.get("executor")), []).append(
            float(measured) / float(model)
        )
    return {key: statistics.median(r[-CALIBRATION_REFRESHES:]) for key, r in ratios.items()}


def calibrated(cost: StrategyCost, scales: Mapping[tuple[str, str], float]) -> StrategyCost:
    """``cost`` scaled by what the view measured for its strategy and executor (unchanged if never run)."""
    scale = scales.get((cost.strategy, cost.choice.executor))
    return cost if scale is None else replace(cost, scale=scale)


def cheaper(costs: list[StrategyCost]) -> tuple[StrategyCost, str]:
    """The strategy with the lower predicted time, and a sentence saying why."""
    best = min(costs, key=lambda c: c.seconds)
    others = ", ".join(f"{c.strategy} {c.seconds:.3f} s" for c in costs if c is not best)
    return best, f"auto chose {best.strategy}: predicted {best.seconds:.3f} s" + (
        f" against {others}" if others else ""
    )
