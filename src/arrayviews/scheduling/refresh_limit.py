"""A refresh-time limit on an array view, kept by paper 003's ONLINE decision taken on the live view."""

from __future__ import annotations

import datetime as dt
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arrayviews.model.errors import ValidationError
from arrayviews.scheduling.asymmetric import online_action
from arrayviews.scheduling.base_apart import ApartRefresh, refresh_isolating
from arrayviews.views.history import SECONDS
from arrayviews.views.pending import first_batch_seconds, joint_seconds, pending_costs
from arrayviews.views.view import ADVANCED_KEY, RefreshResult, expired_bases, reflected_versions, refresh_view

if TYPE_CHECKING:
    from arrayviews.database import Database

#: The view table property holding the limit, in seconds.
LIMIT_PROPERTY = "arrayviews.refresh-limit-seconds"
#: A base's arrival rate is measured over its newest this many commits.
RATE_COMMITS = 10
#: When refreshing every base is predicted within this fraction of the action ONLINE chose, every
#: base is refreshed: this engine's refresh of several bases shares one plan, computation and commit,
#: so emptying the others too costs little, and an emptied base does not fill up again soon.
JOINT_MARGIN = 0.10


def set_refresh_limit(view, seconds: float | None) -> None:
    """Store ``seconds`` as the view's refresh-time limit C (None removes it). A metadata change
    only: no view version is made."""
    table = view._current().table
    if seconds is None:
        table.update_properties({}, removals=[LIMIT_PROPERTY])
        return
    try:
        number = (
            None if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) else float(seconds)
        )
    except OverflowError:  # an integer beyond any float
        number = math.inf
    if number is None or not math.isfinite(number):
        raise ValidationError(
            f"view {view.name}: the refresh limit is a finite number of seconds, got {seconds!r}",
            array=view.name,
            value=repr(seconds),
        )
    if number <= 0:
        raise ValidationError(
            f"view {view.name}: the refresh limit must be above 0 seconds, got {seconds!r}",
            array=view.name,
            value=repr(seconds),
        )
    table.update_properties({LIMIT_PROPERTY: repr(number)})


def refresh_limit(view) -> float | None:
    """The view's refresh-time limit in seconds, or None."""
    text = view._current().table.properties.get(LIMIT_PROPERTY)
    return None if text is None else float(text)


@dataclass(frozen=True)
class BaseLoad:
    """One base array's pending work as the scheduler prices it: f(k) = fixed + per_batch * k for
    k >= 1 batches (0 for none), fitted through the planner's predictions for the first pending batch
    and for all of them; ``rate`` is its recent arrivals in batches per second."""

    base: str
    pending_batches: int
    seconds: float
    fixed: float
    per_batch: float
    rate: float

    def cost(self) -> Callable[[int], float]:
        def f(k: int) -> float:
            if k <= 0:
                return 0.0
            return self.seconds if k == self.pending_batches else self.fixed + self.per_batch * k

        return f


@dataclass(frozen=True)
class LimitDecision:
    """One scheduling decision for a view under its refresh-time limit: the predicted cost of
    refreshing everything pending now, the bases refreshed (none when within the limit) and why.
    The per-base fits and rates, F_t and t are worked out only when the limit is exceeded (empty
    and 0 otherwise: the cheap check comes first)."""

    view: str
    limit: float
    pending_seconds: float
    advanced: tuple[str, ...]
    reason: str
    bases: tuple[BaseLoad, ...]
    spent_seconds: float
    elapsed_seconds: float
    result: RefreshResult | None = None
    #: the bases one batch of which alone is predicted above the limit: while any is named, the
    #: limit cannot be kept (each new batch of such a base breaks it, whatever the plan)
    unmeetable: tuple[str, ...] = ()
    #: when refreshing the bases chosen together failed and each was then refreshed apart: which
    #: failed and why, and which were brought forward (empty otherwise)
    failed: str = ""

    def __str__(self) -> str:
        return self.reason if self.result is None else f"{self.reason}\n{self.result.message}"


def fit(base: str, row: dict, rate: float) -> BaseLoad:
    """The linear cost of a base's batches through the planner's two predictions (one batch, all
    of them); with one batch pending the growth is unknown and taken as none; clamped to >= 0."""
    pending, every, first = row["pending_batches"], row["predicted_seconds"], row["first_batch_seconds"]
    if pending >= 2:
        per_batch = max(0.0, (every - first) / (pending - 1))
        fixed = max(0.0, first - per_batch)
    else:
        per_batch, fixed = 0.0, every
    return BaseLoad(base, pending, every, fixed, per_batch, rate)


def arrival_rate(versions: Sequence, now: dt.datetime) -> float:
    """Batches per second over the newest :data:`RATE_COMMITS` commits of a base (0 with none)."""
    times = sorted(v.time for v in versions)[-RATE_COMMITS:]
    if not times:
        return 0.0
    span = (now - times[0]).total_seconds()
    return len(times) / max(span, 1e-3)


def since_complete_refresh(table, bases: Sequence[str], now: dt.datetime) -> tuple[float, float]:
    """(seconds of partial refreshes since the view was last refreshed on every base, seconds
    since then): the paper's F_t and t, with time 0 at the last complete refresh. When that version
    has expired, time 0 is the oldest version still held (it came after the complete refresh), and
    F_t counts the partial refreshes held."""
    spent, start = 0.0, None
    held = sorted(table.versions(), key=lambda v: v.version, reverse=True)
    for info in held:
        advanced = info.properties.get(ADVANCED_KEY)
        if advanced is None or set(advanced.split(",")) >= set(bases):
            start = info.time
            break
        spent += float(info.properties.get(SECONDS, 0.0))
    else:
        start = held[-1].time if held else None
    elapsed = 0.0 if start is None else max(0.0, (now - start).total_seconds())
    return spent, elapsed


def limit_outlook(db: Database, view) -> str:
    """What :func:`keep_within_limit` would do now, in words (the cheap check only; nothing runs):
    nothing when refreshing everything pending is predicted within the limit, else an ONLINE
    decision refreshing some bases."""
    limit = refresh_limit(view)
    if limit is None:
        return "no refresh limit"
    everything = joint_seconds(db, view)
    if everything <= limit:
        return (
            f"within its limit of {limit:g} s (refreshing everything pending is predicted at "
            f"{everything:.3f} s): left alone"
        )
    return (
        f"over its limit of {limit:g} s (refreshing everything pending is predicted at {everything:.3f} s): "
        "an ONLINE decision refreshes some of its bases"
    )


def keep_within_limit(db: Database, view, now: dt.datetime | None = None) -> LimitDecision:
    """Take one decision for ``view`` under its refresh-time limit C (paper 003): when refreshing
    everything pending is predicted to take at most C seconds, nothing (a lazy plan acts only when
    forced); otherwise refresh the set of bases, emptying each entirely (greedy) and no more than
    needed to get under C (minimal), that minimizes the amortized maintenance cost
    H(q) = (F_t + f(q)) / (t + TIMETOFULL(s - q)) of the ONLINE heuristic (section 4.3), with time
    in seconds since the last complete refresh and f_i fitted per base from the refresh planner's
    predictions. The refresh runs with ``auto``'s strategy.

    The paper's costs add up across bases; this engine's do not (one refresh of several bases shares
    its plan, computation and commit). So "everything pending" is priced as one refresh of every base
    (:func:`~arrayviews.views.pending.joint_seconds`), the action ONLINE chose as one refresh of its
    bases, and when refreshing every base is predicted within :data:`JOINT_MARGIN` of that action,
    every base is refreshed."""
    limit = refresh_limit(view)
    if limit is None:
        raise ValidationError(
            f"view {view.name} has no refresh limit: set one with V.set_refresh_limit(seconds) "
            f"or ALTER VIEW {view.name} SET REFRESH LIMIT n SECONDS"
        )
    now = now or dt.datetime.now(dt.UTC)
    everything = joint_seconds(db, view)  # one refresh of every base: the cheap check first
    if everything <= limit:
        reason = (
            f"view {view.name}: refreshing everything pending is predicted at {everything:.3f} s, "
            f"within the limit of {limit:g} s: nothing to do now"
        )
        return LimitDecision(view.name, limit, everything, (), reason, (), 0.0, 0.0)
    expired = expired_bases(db, view)
    if expired:  # no refresh leaving a base behind can run: refresh every base (in full)
        reason = (
            f"view {view.name}: refreshing everything pending is predicted at {everything:.3f} s, over the "
            f"limit of {limit:g} s: refreshing every base, as the version of {', '.join(expired)} the view "
            "reflects has expired (no refresh leaving a base behind can run)"
        )
        result = refresh_view(db, view, "auto", None)
        return LimitDecision(
            view.name, limit, everything, view.definition.bases, reason, (), 0.0, 0.0, result
        )
    rows = pending_costs(db, view, first_batch=False)
    loads = []
    for row in rows:
        if row["pending_batches"]:
            row["first_batch_seconds"] = (
                row["predicted_seconds"]
                if row["pending_batches"] == 1
                else first_batch_seconds(db, view, row["base"])
            )
        versions = db.warehouse.open(row["base"]).versions()
        loads.append(fit(row["base"], row, arrival_rate([v for v in versions if v is not None], now)))
    spent, elapsed = since_complete_refresh(view._current().table, [r["base"] for r in rows], now)
    action = online_action(
        [load.cost() for load in loads],
        limit,
        [load.pending_batches for load in loads],
        spent,
        int(elapsed),
        [load.rate for load in loads],
    )
    advanced = tuple(load.base for load, taken in zip(loads, action, strict=True) if taken)
    pending_bases = tuple(load.base for load in loads if load.pending_batches)
    if not advanced:  # the per-base fits sum within the limit, the joint prediction does not
        advanced = pending_bases
    chosen = (
        everything
        if set(advanced) >= set(pending_bases)
        else (
            next(load.seconds for load in loads if load.base == advanced[0])
            if len(advanced) == 1
            else joint_seconds(db, view, advanced)
        )
    )
    reason = (
        f"view {view.name}: refreshing everything pending is predicted at {everything:.3f} s, over the "
        f"limit of {limit:g} s: "
    )
    if set(advanced) < set(pending_bases) and everything <= chosen * (1 + JOINT_MARGIN):
        reason += (
            f"refreshing every base (ONLINE chose {', '.join(advanced)} at {chosen:.3f} s; one refresh "
            f"of every base is predicted within {JOINT_MARGIN:.0%} of it and empties them all)"
        )
        advanced = tuple(load.base for load in loads)
    else:
        left = sum(load.seconds for load, taken in zip(loads, action, strict=True) if not taken)
        reason += (
            f"refreshing {', '.join(advanced)} at {chosen:.3f} s (leaves {left:.3f} s pending; chosen by "
            f"the least amortized cost over {elapsed:.0f} s since the last complete refresh)"
        )
    unmeetable = tuple(load.base for load in loads if load.pending_batches and load.cost()(1) > limit)
    if unmeetable:
        singles = ", ".join(
            f"{load.base} at {load.cost()(1):.3f} s" for load in loads if load.base in unmeetable
        )
        reason += (
            f"; the limit cannot be kept: one batch alone is predicted over it ({singles}), so every "
            f"new batch breaks it whatever is refreshed (raise it: ALTER VIEW {view.name} SET REFRESH "
            "LIMIT n SECONDS)"
        )
    reflected = reflected_versions(view._current().table)
    done = refresh_isolating(db, view, advanced)
    failed = ""
    if isinstance(done, ApartRefresh):  # one base's batch failed: the others were brought forward
        failed = done.message(reflected)
        reason += f"; {failed}"
        advanced, done = done.advanced, list(done.results.values())[-1]
    return LimitDecision(
        view.name, limit, everything, advanced, reason, tuple(loads), spent, elapsed, done, unmeetable, failed
    )


__all__ = [
    "JOINT_MARGIN",
    "LIMIT_PROPERTY",
    "BaseLoad",
    "LimitDecision",
    "keep_within_limit",
    "limit_outlook",
    "refresh_limit",
    "set_refresh_limit",
]
