"""What a view refresh would cost, from metadata: the work of a full recomputation and of an
incremental (baseline) refresh, each on the executor the cost model picks, and the cheaper of them
for ``refresh("auto")``."""

from __future__ import annotations

from dataclasses import dataclass

from arrayviews.execution.cost import Choice, Estimate
from arrayviews.execution.executors import Executors

#: Spark jobs a refresh runs (compute + write in one job; reading the kept fragments of rewritten
#: files, and the stale-extreme pass of min/max views, add one each).
FULL_JOBS = 2
INCREMENTAL_JOBS = 2


@dataclass(frozen=True)
class StrategyCost:
    """One refresh strategy: what it reads, the executor chosen for it and the predicted time."""

    strategy: str
    estimate: Estimate
    choice: Choice
    pairs: int = 0  # update triples (similarity views) or view chunks to recompute (window views)
    view_chunks: int | None = None  # view chunks rewritten (None: all)

    @property
    def seconds(self) -> float:
        return self.choice.predicted[self.choice.executor]

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
        }


def cost_of(
    executors: Executors, strategy: str, estimate: Estimate, pairs: int = 0, view_chunks: int | None = None
) -> StrategyCost:
    """The cost of a strategy reading ``estimate`` on the executor the cost model picks for it."""
    _, choice = executors.choose(estimate)
    return StrategyCost(strategy, estimate, choice, pairs, view_chunks)


def cheaper(costs: list[StrategyCost]) -> tuple[StrategyCost, str]:
    """The strategy with the lower predicted time, and a sentence saying why."""
    best = min(costs, key=lambda c: c.seconds)
    others = ", ".join(f"{c.strategy} {c.seconds:.3f} s" for c in costs if c is not best)
    return best, f"auto chose {best.strategy}: predicted {best.seconds:.3f} s" + (
        f" against {others}" if others else ""
    )
