"""One maintenance pass over a warehouse: stream views brought up to date, array views kept within
their refresh limits (paper 003) and, when asked, every other stale array view refreshed; a failure
of one view is reported and the pass goes on with the others (and with that view's other bases)."""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from arrayviews.model.errors import ArrayViewsError
from arrayviews.scheduling.base_apart import ApartRefresh, refresh_isolating
from arrayviews.views.view import reflected_versions

if TYPE_CHECKING:
    from arrayviews.database import Database


@dataclass
class MaintenancePass:
    """What one pass did: the stream views' steps, the decisions under refresh limits, the refreshes
    of array views without a limit, and the views that failed (name -> message)."""

    started: dt.datetime
    seconds: float = 0.0
    streams: list = field(default_factory=list)  # streams.maintainer.MaintenanceResult
    decisions: list = field(default_factory=list)  # scheduling.refresh_limit.LimitDecision
    refreshed: list = field(default_factory=list)  # views.view.RefreshResult
    fresh: list[str] = field(default_factory=list)  # array views without a limit, nothing pending
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def changed(self) -> bool:
        """Whether the pass wrote anything (a stream view's part, a view refresh)."""
        built = any(r.built or r.recomputed or r.rebuilt for r in self.streams if r.error is None)
        return built or bool(self.refreshed) or any(d.result is not None for d in self.decisions)

    def lines(self) -> list[str]:
        out = []
        for step in self.streams:
            if step.error is None and (step.built or step.recomputed or step.rebuilt):
                parts = step.built or step.recomputed
                span = f"part {parts[0]}" if len(parts) == 1 else f"parts {parts[0]}..{parts[-1]}"
                out.append(
                    f"stream view {step.view}: {len(parts)} part(s) built ({span}), now at version {step.version} "
                    f"({step.seconds:.3f} s, {step.executor or 'nothing run'})"
                )
        for decision in self.decisions:
            out.append(decision.reason)
        for result in self.refreshed:
            out.append(str(result).splitlines()[0])
        for name, message in self.errors.items():
            out.append(f"error: {name}: {message.splitlines()[0] if message else 'failed'}")
        if not out:
            out.append("nothing to do: every view is up to date or within its refresh limit")
        return out

    @property
    def heading(self) -> str:
        return f"maintenance pass at {self.started:%Y-%m-%d %H:%M:%S} UTC ({self.seconds:.2f} s)"

    def to_pandas(self) -> pd.DataFrame:
        """One row per view the pass dealt with (``MAINTAIN``'s table): view, kind, action, seconds
        and error (the first line of its message, empty unless the view failed; ``errors`` keeps the
        whole); views the pass left alone have no row."""
        rows: list[tuple[str, str, str, float | None, str]] = []
        for step in self.streams:
            if step.error is not None:
                rows.append((step.view, "stream view", "failed", step.seconds, _first_line(step.error)))
            elif step.rebuilt:
                rows.append(
                    (step.view, "stream view", f"rebuilt, now at version {step.version}", step.seconds, "")
                )
            elif step.built or step.recomputed:
                parts = step.built or step.recomputed
                span = f"part {parts[0]}" if len(parts) == 1 else f"parts {parts[0]}..{parts[-1]}"
                action = f"built {len(parts)} part(s) ({span}), now at version {step.version}"
                rows.append((step.view, "stream view", action, step.seconds, ""))
            else:
                rows.append((step.view, "stream view", "up to date", step.seconds, ""))
        for decision in self.decisions:
            if decision.result is None:
                action = (
                    f"within its limit of {decision.limit:g} s (predicted {decision.pending_seconds:.3g} s)"
                )
            else:
                action = f"refreshed on {', '.join(decision.advanced)} (limit {decision.limit:g} s)"
                if decision.unmeetable:
                    action += f"; the limit cannot be kept: one batch of {', '.join(decision.unmeetable)} exceeds it"
            seconds = None if decision.result is None else decision.result.seconds
            rows.append((decision.view, "array view", action, seconds, ""))
        for result in self.refreshed:
            rows.append((result.view, "array view", f"refreshed ({result.strategy})", result.seconds, ""))
        for name in self.fresh:
            rows.append((name, "array view", "up to date", None, ""))
        listed = {row[0] for row in rows}
        for at, row in enumerate(rows):  # a view brought forward on some bases, failed on others
            if row[1] == "array view" and row[0] in self.errors and not row[4]:
                rows[at] = (*row[:4], _first_line(self.errors[row[0]]))
        for name, message in self.errors.items():
            if name not in listed:
                kind = "stream views" if name == "streams" else "array view"
                rows.append((name, kind, "failed", None, _first_line(message)))
        return pd.DataFrame(rows, columns=["view", "kind", "action", "seconds", "error"])

    def __str__(self) -> str:
        return "\n".join([self.heading, *("  " + line for line in self.lines())])


def _first_line(message: str) -> str:
    return message.splitlines()[0] if message else "failed"


def run_pass(db: Database, refresh_all: bool = False) -> MaintenancePass:
    """One pass: ``db.maintain_streams()``, then each array view with a refresh limit takes one
    ONLINE decision (``keep_within_limit``); with ``refresh_all``, each array view without a limit
    that has pending batches is refreshed (``auto``). An arrayviews error in one view is recorded in
    ``errors`` and the pass goes on; every write is the view's own validated commit, so two passes
    running at once on one warehouse refresh a view once and the other finds it fresh."""
    started = dt.datetime.now(dt.UTC)
    clock = time.perf_counter()
    report = MaintenancePass(started)
    try:
        report.streams = list(db.maintain_streams())
    except ArrayViewsError as error:
        report.errors["streams"] = str(error)
    for step in report.streams:
        if step.error is not None:
            report.errors[step.view] = step.error
    for view in _in_dependency_order(db, report):
        name = view.name
        try:
            if view.refresh_limit is not None:
                decision = view.keep_within_limit()
                report.decisions.append(decision)
                if decision.failed:
                    report.errors[name] = decision.failed
            elif refresh_all and view.status()["pending"]:
                reflected = reflected_versions(view._current().table)
                done = refresh_isolating(db, view, None)
                if isinstance(done, ApartRefresh):  # some base's batch failed, the others went on
                    report.refreshed.extend(done.results.values())
                    report.errors[name] = done.message(reflected)
                else:
                    report.refreshed.append(done)
            elif refresh_all:
                report.fresh.append(name)
        except ArrayViewsError as error:
            report.errors[name] = str(error)
    report.seconds = time.perf_counter() - clock
    return report


def _in_dependency_order(db: Database, report: MaintenancePass) -> list:
    """The array views, each after the views it reads (views over views), so one pass brings a
    chain of derived products up to date; a view that cannot be opened goes to ``errors``."""
    return in_dependency_order(db, report.errors)


def in_dependency_order(db: Database, errors: dict[str, str] | None = None) -> list:
    """The array views, each after the views it reads; a view that cannot be opened goes to
    ``errors`` (raised when ``errors`` is None)."""
    views = {}
    for name in db.views():
        try:
            views[name.lower()] = db.view(name)
        except ArrayViewsError as error:
            if errors is None:
                raise
            errors[name] = str(error)
    ordered: list = []
    placed: set[str] = set()

    def place(key: str) -> None:
        if key in placed:
            return
        placed.add(key)  # views only read relations older than themselves: no cycle
        for base in views[key].definition.bases:
            if base.lower() in views:
                place(base.lower())
        ordered.append(views[key])

    for key in sorted(views):
        place(key)
    return ordered


__all__ = ["MaintenancePass", "in_dependency_order", "run_pass"]
