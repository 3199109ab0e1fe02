"""What a view refresh would cost, from metadata, and the choice ``refresh("auto")`` makes between
a full recomputation and an incremental (baseline) refresh.

The model. A refresh's seconds on an executor are the engine cost model's seconds for the cells it
reads and the Spark jobs it runs, plus the refresh terms that model cannot see
(:class:`~arrayviews.execution.cost.RefreshCost`): a fixed cost of planning and the Iceberg commit,
a cost per chunk pair the join forms (one call of the join kernel over the left chunk and the right
cells routed to it), and a cost per view chunk rewritten (old fragments read, merged, written). A
full refresh forms every chunk pair of the view and rewrites every view chunk; an incremental one
forms the pairs of its three delta terms and rewrites the view chunks the batch touches.

The correction. Each strategy's prediction is multiplied by the median, over its newest
:data:`CORRECTION_REFRESHES` refreshes of this view on the same executor, of measured over model
seconds (a median, so one refresh slowed by a busy machine does not move it). A strategy the view
has not run uses the median over all of the view's refreshes on that executor (the machine's factor),
or 1 without any. The view's creation is no sample: it also creates the table and compiles on
first use.

The choice (:func:`decide`, a pure function of plain numbers):
1. a batch that touches at least :data:`FULL_FRACTION` of the view's chunks is refreshed in full
   (incremental would rewrite as much as full and join the delta on top);
2. otherwise the strategy with the lower corrected prediction, except that
3. when the other one is predicted within :data:`PROBE_MARGIN` of it and has not run in the last
   :data:`PROBE_EVERY` refreshes (or never), the other one runs once, so its correction is measured
   and strategies close in cost are told apart by measurement, not by one old sample; and
4. when the other one has no measured refresh of its own on this view (its correction is borrowed
   from the other strategy, or 1) and is predicted within :data:`UNMEASURED_PROBE_MARGIN` of it, it
   runs once: the model's split between chunk pairs and view chunks is calibrated on other views, and
   a view whose pairs cost unlike the calibration's (GEO: a full refresh predicted at 2.2 times its
   measured seconds) would otherwise never run the strategy that is really cheaper.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from arrayviews.execution.cost import Choice, Estimate, RefreshCost
from arrayviews.execution.executors import Executors

#: Spark jobs a refresh runs (compute + write in one job; reading the kept fragments of rewritten
#: files, and the stale-extreme pass of min/max views, add one each).
FULL_JOBS = 2
INCREMENTAL_JOBS = 2
#: The refreshes of a view (per strategy and executor, newest) whose measured / model ratios correct
#: its predictions.
CORRECTION_REFRESHES = 5
CALIBRATION_REFRESHES = CORRECTION_REFRESHES  # the earlier name
#: A batch touching at least this fraction of the view's chunks is refreshed in full. Measured
#: (views --quick, round 26, chunks counted from the batch's cell boxes): GEO's batches touch 79-81%
#: and refresh incrementally in 1.1-1.25 times a full refresh's seconds; PTF's touch 8-20% and
#: refresh 3.4-5.9 times faster than full.
FULL_FRACTION = 0.75
#: Strategies predicted within this fraction of each other are close: the other one is re-measured.
PROBE_MARGIN = 0.25
#: ... once it has not run for this many refreshes of the view.
PROBE_EVERY = 8
#: A strategy never measured on the view is run once when predicted within this fraction of the best.
UNMEASURED_PROBE_MARGIN = 1.0
#: Estimates recorded under another model are not comparable; this tag marks this model's.
MODEL = "refresh-3"  # 3: a full join's pairs priced apart (RefreshCost.per_full_pair)
STRATEGY_ORDER = ("baseline", "full")


@dataclass(frozen=True)
class StrategyCost:
    """One refresh strategy: what it reads and computes, the executor chosen for it, the model's
    seconds, and (once :func:`decide` ran) the view's correction and the corrected prediction."""

    strategy: str
    estimate: Estimate
    choice: Choice
    pairs: int = 0  # chunk pairs the join forms (similarity views) or view chunks computed (window)
    view_chunks: int | None = None  # view chunks rewritten (None: all)
    terms: RefreshCost = field(default_factory=RefreshCost)
    view_chunks_total: int = 0  # chunks the view has now
    correction: float = 1.0
    correction_samples: int = 0
    correction_source: str = "none"
    #: where the pair and chunk counts come from (metadata, an earlier count, a lower bound)
    basis: str = "metadata"
    #: the newest measured seconds of this strategy on this view, and the view version it made
    last_measured: float | None = None
    last_measured_version: int | None = None
    #: the pairs are a full join's (priced per routed right chunk, not per kernel call)
    full_join: bool = False

    @property
    def written_chunks(self) -> int:
        return self.view_chunks_total if self.view_chunks is None else self.view_chunks

    @property
    def engine_seconds(self) -> float:
        """The engine cost model's seconds for the cells read and the jobs run."""
        return self.choice.predicted[self.choice.executor]

    @property
    def model_seconds(self) -> float:
        """The whole model's prediction, before the view's own correction."""
        return self.engine_seconds + self.terms.seconds(self.pairs, self.written_chunks, self.full_join)

    @property
    def seconds(self) -> float:
        return self.model_seconds * self.correction

    def as_dict(self) -> dict:
        return {
            "model": MODEL,
            "executor": self.choice.executor,
            "cells": self.estimate.cells,
            "bytes": self.estimate.bytes,
            "chunks": self.estimate.chunks,
            "jobs": self.estimate.jobs,
            "pairs": self.pairs,
            "view_chunks": self.view_chunks,
            "view_chunks_written": self.written_chunks,
            "view_chunks_total": self.view_chunks_total,
            "engine_seconds": round(self.engine_seconds, 9),
            "model_seconds": round(self.model_seconds, 9),
            "correction": round(self.correction, 6),
            "correction_samples": self.correction_samples,
            "correction_source": self.correction_source,
            "predicted_seconds": round(self.seconds, 6),
            "basis": self.basis,
            "last_measured_seconds": None if self.last_measured is None else round(self.last_measured, 6),
            "last_measured_version": self.last_measured_version,
        }


def cost_of(
    executors: Executors,
    strategy: str,
    estimate: Estimate,
    pairs: int = 0,
    view_chunks: int | None = None,
    view_chunks_total: int = 0,
    basis: str = "metadata",
    full_join: bool = False,
) -> StrategyCost:
    """The cost of a strategy reading ``estimate`` on the executor the engine cost model picks
    (``full_join``: its ``pairs`` are those of a similarity view's full join)."""
    _, choice = executors.choose(estimate)
    terms = executors.costs.refresh_terms(choice.executor)
    return StrategyCost(
        strategy, estimate, choice, pairs, view_chunks, terms, view_chunks_total, basis=basis, full_join=full_join
    )


#: Incremental is "clearly cheaper" when its corrected prediction is at most this fraction of full's.
CLEARLY = 0.5


def previous_full_pairs(rows: list[Mapping]) -> tuple[int, int] | None:
    """(chunk pairs, version) of the newest full estimate in the view's history whose pairs were
    counted from metadata under this model, or None."""
    for row in reversed(rows):
        full = (row.get("estimates") or {}).get("full") or {}
        if full.get("model") == MODEL and full.get("basis") == "metadata" and full.get("pairs"):
            return int(full["pairs"]), int(row.get("version") or 0)
    return None


def clearly_cheaper(incremental: StrategyCost, full: StrategyCost, rows: Iterable[Mapping]) -> bool:
    """Whether incremental's corrected prediction is at most :data:`CLEARLY` of full's (then full's
    pairs need not be counted again: full only gains chunk pairs as the base arrays grow)."""
    found = measurements(rows)
    seconds = {}
    for cost in (incremental, full):
        factor, _, _ = correction_of(cost.strategy, found.for_executor(cost.choice.executor))
        seconds[cost.strategy] = cost.model_seconds * factor
    return seconds[incremental.strategy] <= CLEARLY * seconds[full.strategy]


# -- the view's measurements ------------------------------------------------------------------------
@dataclass(frozen=True)
class Measurements:
    """What a view's refresh history says, per (strategy, executor): measured / model ratios, oldest
    first, and how many refreshes ago each strategy last ran (0: the newest refresh)."""

    ratios: dict[tuple[str, str], list[float]]
    last_run: dict[str, int]

    def for_executor(self, executor: str) -> dict[str, list[float]]:
        return {s: r for (s, e), r in self.ratios.items() if e == executor}


def measurements(refreshes: Iterable[Mapping]) -> Measurements:
    """The ratios and ages from ``refresh_history`` rows (oldest first: strategy, executor,
    measured_seconds and the estimates recorded then). Rows from another model, without a
    measurement, or of the view's creation, count for the ages but give no ratio."""
    rows = list(refreshes)
    ratios: dict[tuple[str, str], list[float]] = {}
    last_run: dict[str, int] = {}
    for age, row in enumerate(reversed(rows)):
        strategy = row.get("strategy")
        if not strategy:
            continue
        last_run.setdefault(strategy, age)
    for row in rows:
        if row.get("decision") == "create":  # creation's time holds table creation and first-use
            continue  # compilation too: 10-18x a refresh of the same work, so no sample of one
        strategy = row.get("strategy")
        measured = row.get("measured_seconds")
        estimate = (row.get("estimates") or {}).get(strategy) or {}
        model = estimate.get("model_seconds")
        if estimate.get("model") != MODEL or measured is None or measured != measured:
            continue
        if not model or model <= 0 or measured <= 0:
            continue
        executor = row.get("executor") or estimate.get("executor")
        ratios.setdefault((strategy, executor), []).append(float(measured) / float(model))
    return Measurements(ratios, last_run)


def measured_scales(refreshes: Iterable[Mapping]) -> dict[tuple[str, str], float]:
    """Per (strategy, executor), the median measured / model ratio over its newest refreshes."""
    found = measurements(refreshes)
    return {key: statistics.median(r[-CORRECTION_REFRESHES:]) for key, r in found.ratios.items()}


# -- the choice --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Decision:
    """The strategy auto runs, what kind of decision it was, why, and the per-strategy correction
    (factor, samples, source) and corrected prediction behind it."""

    strategy: str
    kind: str  # "cheaper", "probe", "touched" (the batch touches most view chunks)
    reason: str
    corrections: dict[str, tuple[float, int, str]]
    predicted: dict[str, float]


def correction_of(strategy: str, ratios: Mapping[str, list[float]]) -> tuple[float, int, str]:
    """(factor, samples, source): the median of the strategy's newest ratios; without any, the
    median of every strategy's newest ratios; without any, 1."""
    own = list(ratios.get(strategy, []))[-CORRECTION_REFRESHES:]
    if own:
        return statistics.median(own), len(own), "this strategy"
    pooled = [r for s in sorted(ratios) for r in list(ratios[s])[-CORRECTION_REFRESHES:]]
    if pooled:
        return statistics.median(pooled), len(pooled), "the view's other refreshes"
    return 1.0, 0, "none"


def decide(
    model: Mapping[str, float],
    ratios: Mapping[str, list[float]],
    last_run: Mapping[str, int],
    touched_fraction: float | None,
) -> Decision:
    """The choice between the strategies in ``model`` (strategy -> model seconds): see the module
    docstring. ``ratios`` are the view's measured / model ratios per strategy (oldest first),
    ``last_run`` how many refreshes ago each ran, ``touched_fraction`` the fraction of the view's
    chunks the incremental refresh would rewrite (None: unknown)."""
    corrections = {s: correction_of(s, ratios) for s in model}
    predicted = {s: model[s] * corrections[s][0] for s in model}
    order = sorted(model, key=lambda s: (predicted[s], STRATEGY_ORDER.index(s) if s in STRATEGY_ORDER else 9))
    figures = ", ".join(f"{s} {predicted[s]:.3f} s" for s in order)
    if "full" in model and touched_fraction is not None and touched_fraction >= FULL_FRACTION:
        touched = (
            f"touches {touched_fraction:.0%} of the view's chunks"
            if touched_fraction <= 1
            else f"touches more chunks than the view holds ({touched_fraction:.1f} times as many: it adds chunks)"
        )
        return Decision(
            "full",
            "touched",
            f"auto chose full: the batch {touched} "
            f"(at least {FULL_FRACTION:.0%}: an incremental refresh rewrites as much as a full one); "
            f"predicted {figures}",
            corrections,
            predicted,
        )
    best = order[0]
    for other in order[1:]:
        unmeasured = corrections[other][2] != "this strategy"
        margin = UNMEASURED_PROBE_MARGIN if unmeasured else PROBE_MARGIN
        close = predicted[other] <= (1.0 + margin) * predicted[best]
        age = last_run.get(other)
        if close and (unmeasured or age is None or age >= PROBE_EVERY):
            if unmeasured:
                when = "never measured on this view"
            else:
                when = "never run on this view" if age is None else f"last run {age} refreshes ago"
            return Decision(
                other,
                "probe",
                f"auto chose {other} to measure it: predicted {figures}, within {margin:.0%} of "
                f"each other, and {other} was {when}",
                corrections,
                predicted,
            )
    return Decision(best, "cheaper", f"auto chose {best}: predicted {figures}", corrections, predicted)


def corrected(cost: StrategyCost, correction: tuple[float, int, str]) -> StrategyCost:
    factor, samples, source = correction
    return replace(cost, correction=factor, correction_samples=samples, correction_source=source)


def choose_strategy(
    costs: Mapping[str, StrategyCost], history_rows: Iterable[Mapping]
) -> tuple[StrategyCost, dict[str, StrategyCost], Decision]:
    """Apply :func:`decide` to the strategies' costs and the view's history: the chosen cost, every
    cost with its correction, and the decision."""
    rows_list = list(history_rows)
    found = measurements(rows_list)
    model = {s: c.model_seconds for s, c in costs.items()}
    # each strategy is corrected by the ratios measured on the executor it would run on
    ratios: dict[str, list[float]] = {}
    executors = {c.choice.executor for c in costs.values()}
    if len(executors) == 1:
        ratios = found.for_executor(next(iter(executors)))
        decision = decide(model, ratios, found.last_run, touched_fraction(costs))
    else:
        per = {s: correction_of(s, found.for_executor(c.choice.executor)) for s, c in costs.items()}
        decision = decide(
            {s: model[s] * per[s][0] for s in model}, {}, found.last_run, touched_fraction(costs)
        )
        decision = Decision(
            decision.strategy,
            decision.kind,
            decision.reason,
            per,
            {s: model[s] * per[s][0] for s in model},
        )
    with_corrections = {s: corrected(c, decision.corrections[s]) for s, c in costs.items()}
    for strategy, measured in last_measured(rows_list).items():
        if strategy in with_corrections:
            with_corrections[strategy] = replace(
                with_corrections[strategy], last_measured=measured[0], last_measured_version=measured[1]
            )
    return with_corrections[decision.strategy], with_corrections, decision


def last_measured(rows: list[Mapping]) -> dict[str, tuple[float, int]]:
    """Per strategy, (measured seconds, version) of its newest measured refresh in ``rows``."""
    found: dict[str, tuple[float, int]] = {}
    for row in reversed(rows):
        strategy, measured = row.get("strategy"), row.get("measured_seconds")
        if strategy and strategy not in found and measured is not None and measured == measured:
            found[strategy] = (float(measured), int(row.get("version") or 0))
    return found


def touched_fraction(costs: Mapping[str, StrategyCost]) -> float | None:
    """The fraction of the view's chunks the incremental refresh rewrites (None: unknown)."""
    incremental = costs.get("baseline")
    if incremental is None or incremental.view_chunks is None or incremental.view_chunks_total <= 0:
        return None
    return incremental.view_chunks / incremental.view_chunks_total
