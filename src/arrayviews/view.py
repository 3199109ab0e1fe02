"""The ``View`` handle: a materialized array view, readable like any array, kept fresh by refreshes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from arrayviews.array import Array
from arrayviews.execution.failures import translating
from arrayviews.model.errors import ValidationError
from arrayviews.model.schema import ArraySchema
from arrayviews.operators import writes
from arrayviews.scheduling import refresh_limit as limits
from arrayviews.storage.array_table import ArrayTable
from arrayviews.views import creation, history, pending
from arrayviews.views.commit import VIEW_FILE_BYTES
from arrayviews.views.definition import ViewDefinition
from arrayviews.views.source import ViewSource
from arrayviews.views.view import (
    BASE_KEY,
    SNAPSHOT_KEY,
    RefreshResult,
    check_strategy,
    expired_bases,
    explain_refresh,
    frames_agree,
    read_definition,
    reflected_versions,
    refresh_view,
    replaced_bases,
)

if TYPE_CHECKING:
    from arrayviews.database import Database


@translating
class View(Array):
    """A materialized array view: reads see its public aggregates as of its newest refresh."""

    def __init__(
        self, database: Database, table: ArrayTable, definition: ViewDefinition, public: ArraySchema
    ) -> None:
        self._definition = definition
        self._public = public
        super().__init__(database, ViewSource(table, table.current_version(), public))

    @property
    def definition(self) -> ViewDefinition:
        return self._definition

    def _current(self) -> ViewSource:
        table = self._source.table.refresh()
        return ViewSource(table, table.current_version(), self._public)

    def _writable(self):
        raise ValidationError(f"{self.name} is a view: write to its base arrays and refresh it")

    def _maintained_table(self) -> ArrayTable:
        return self._current().table

    def compact(self):
        """Rewrite the view's small files into files of about VIEW_FILE_BYTES (one fragment per
        chunk, clustered by chunk) as one new view version reflecting the same base versions."""
        return writes.compact(
            self._current().table,
            self._db.executors.choose,
            small_file_bytes=VIEW_FILE_BYTES // 2,
            carry=(BASE_KEY, SNAPSHOT_KEY),
            target_bytes=VIEW_FILE_BYTES,
        )

    def at_version(self, version: int) -> Array:
        """A read-only handle on the view as it was at ``version`` (see ``V.versions()``)."""
        source = self._current()
        version = self._held_version(source.table, version)
        return Array(self._db, ViewSource(source.table, version, self._public), pinned=True)

    # -- maintenance -----------------------------------------------------------------------------
    def status(self) -> dict:
        """Base versions reflected and current, the batches (versions that change cells) between
        them, and whether any is pending: a compaction of a base changes no cells, so it leaves the
        view up to date (the next refresh moves past it). A base version after the one reflected
        that has expired counts as a batch (what it changed is unknown); ``expired`` names the bases
        with such versions, which only a full refresh can bring forward."""
        table = self._current().table
        reflected = reflected_versions(table)
        replaced = replaced_bases(self._db, self)
        rows, expired = [], []
        for base in self._definition.bases:
            source = self._db.array(base)._current()
            before, current = reflected.get(base, 0), source.version
            versions = source.table.versions() if before < current else []
            batches = len(pending.pending_batches(versions, before, current))
            if base in replaced:  # rolled back past the version reflected: at least one batch
                expired.append(base)
                batches = max(batches, 1)
            elif before < current and pending.expired_batches(versions, before, current):
                expired.append(base)
            rows.append({"base": base, "reflected": before, "current": current, "pending_batches": batches})
        pending_now = any(r["pending_batches"] for r in rows)
        return {
            "view": self.name,
            "version": table.current_version(),
            "bases": rows,
            "pending": pending_now,
            "expired": expired,
        }

    def refresh(self, strategy: str = "auto", bases: str | list[str] | None = None) -> RefreshResult:
        """Bring the view up to date with its base arrays (one atomic snapshot).

        ``"auto"`` (default) estimates a full recomputation and an incremental (``"baseline"``)
        refresh from metadata (touched chunks, cells, pairs) and the calibrated costs, and runs the
        cheaper; ``"full"`` and ``"baseline"`` force one. The result reports the estimates, the
        executor and the measured time, and the same report is stored with the new view version
        (see :meth:`refresh_history`).

        ``bases`` names the base arrays to bring forward (default: all). The others stay at the
        versions the view reflects: processing the cheap base's batches now and the expensive
        one's later, in larger batches, is how a refresh-time limit is kept at least cost (see
        :meth:`pending_costs`)."""
        check_strategy(strategy, self.name)
        return refresh_view(self._db, self, strategy, bases)

    def refresh_history(self) -> pd.DataFrame:
        """One row per view version still held: how it was computed (strategy asked and run,
        executor and why, estimated cells and predicted seconds, measured seconds, view chunks
        rewritten, update triples)."""
        return history.refresh_history(self._current().table)

    def explain_refresh(self, strategy: str = "auto", bases: str | list[str] | None = None) -> str:
        """What ``refresh(strategy, bases)`` would do now, and why: the estimates of full and
        incremental refresh, the executor for each and the choice (nothing is computed or committed)."""
        return explain_refresh(self._db, self, strategy, bases)

    def set_refresh_limit(self, seconds: float | None) -> None:
        """Keep this view's refresh within ``seconds`` (None removes the limit): each
        :meth:`keep_within_limit` (or ``db.maintain_views()``) refreshes just enough of its bases,
        when refreshing everything pending is predicted to take longer (paper 003)."""
        limits.set_refresh_limit(self, seconds)

    @property
    def refresh_limit(self) -> float | None:
        """The refresh-time limit in seconds, or None."""
        return limits.refresh_limit(self)

    def keep_within_limit(self) -> limits.LimitDecision:
        """One scheduling decision under the view's refresh limit: nothing while refreshing
        everything pending is predicted within it, else a refresh of the bases the ONLINE rule of
        paper 003 picks (greedy, minimal, least amortized cost). The decision says what and why."""
        return limits.keep_within_limit(self._db, self)

    def pending_costs(self) -> pd.DataFrame:
        """One row per base array: versions reflected and current, batches pending, and the
        strategy and predicted seconds of refreshing that base alone now (from metadata and the
        calibrated costs; nothing runs)."""
        return pd.DataFrame(
            pending.pending_costs(self._db, self),
            columns=[
                "base",
                "reflected",
                "current",
                "pending_batches",
                "strategy",
                "predicted_seconds",
                "first_batch_seconds",
            ],
        )

    def verify(self) -> bool:
        """Recompute the view from scratch at the base versions it reflects and compare with what is
        stored; True when they agree exactly (sums are exact, so a maintained view equals its
        recomputation bit for bit). When a base version it reflects has expired, the current one
        stands for it if only compactions followed (they change no cells); if batches did, what the
        view claims to hold can no longer be recomputed and it is behind: False (a full refresh
        brings it up to date)."""
        if expired_bases(self._db, self) and self.status()["pending"]:
            return False
        expected = creation.compute_from_scratch(self._db, self)
        actual = self.to_pandas()
        return frames_agree(actual, expected)

    _kind = "array view"

    def _storage_rows(self) -> list[tuple[str, str]]:
        """The array rows of the repr, and which base versions the view reflects (its freshness)."""
        status = self.status()
        bases = ", ".join(
            f"{b['base']} v{b['reflected']}"
            + ("" if b["reflected"] == b["current"] else f" (now v{b['current']})")
            for b in status["bases"]
        )
        freshness = "deltas pending: refresh() brings it up to date" if status["pending"] else "up to date"
        if status["expired"]:
            freshness = (
                f"behind; the history of {', '.join(status['expired'])} since the version reflected has "
                "expired or was rolled back: a full refresh brings it up to date"
            )
        return [*super()._storage_rows(), ("reflects", bases or "(no bases)"), ("freshness", freshness)]


def create_view(db: Database, name: str, definition: ViewDefinition, chunks=None) -> View:
    """Create, compute and store a view (one commit); see ``views.view.create_view``."""
    table, public, stored = creation.create_view(db, name, definition, chunks)
    return View(db, table, stored, public)


def open_view(db: Database, name: str) -> View:
    """The view ``name`` (ValidationError when ``name`` is an array)."""
    table = db.warehouse.open(name)
    definition, public = read_definition(table)
    return View(db, table, definition, public)


__all__ = ["RefreshResult", "View", "create_view", "open_view"]
