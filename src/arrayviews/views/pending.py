"""What refreshing a view on each base's pending batches would cost, as ``auto`` plans it from
metadata and the calibrated costs (nothing runs): the per-table costs a refresh-time scheduler weighs."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from arrayviews.operators.source import StoredSource
from arrayviews.views.source import ViewSource
from arrayviews.views.view import _pinned_bases, _plan_strategy, expired_bases, reflected_versions

if TYPE_CHECKING:
    from arrayviews.database import Database


def pending_costs(db: Database, view, first_batch: bool = True) -> list[dict]:
    """Per base array of ``view``: the versions it reflects and the current one, how many batches
    (commits) are pending, and what refreshing that base alone would cost now as ``auto`` plans it
    (strategy and predicted seconds from metadata and the calibrated costs; nothing runs), with the
    predicted seconds of its first pending batch alone (with ``first_batch``; else 0, sparing a
    planning per base: :func:`first_batch_seconds` gives it later). These are the per-table costs
    f_i(s_i) and f_i(1) a refresh-time scheduler weighs (paper 003, section 2).

    When the version some base's reflects has expired, no refresh leaving that base behind can run:
    each base's row then prices the one refresh that can, of every base (a full one)."""
    table = view._current().table
    reflected = reflected_versions(table)
    source = ViewSource(table, table.current_version(), table.schema)
    every = bool(expired_bases(db, view))
    rows = []
    for base in view.definition.bases:
        bases = _pinned_bases(db, view.definition, reflected, None if every else (base,))
        pinned = bases[base]
        before = reflected.get(base, 0)
        pending = _pending_versions(pinned, before)
        row = {
            "base": base,
            "reflected": before,
            "current": pinned.version,
            "pending_batches": len(pending),
            "strategy": None,
            "predicted_seconds": 0.0,
            "first_batch_seconds": 0.0,
        }
        if pending:
            _, chosen, _, _, _ = _plan_strategy(db, view, "auto", bases, reflected, source)
            row.update(strategy=chosen.strategy, predicted_seconds=float(chosen.seconds))
            if first_batch:
                row["first_batch_seconds"] = (
                    row["predicted_seconds"]
                    if len(pending) == 1 or every
                    else first_batch_seconds(db, view, base)
                )
        rows.append(row)
    return rows


def _pending_versions(pinned: StoredSource, reflected: int) -> list[int]:
    """The versions of a base after the one the view reflects, up to the pinned one, oldest first,
    that change cells: a compaction is no batch (the view reflects its cells already)."""
    return pending_batches(pinned.table.versions(), reflected, pinned.version)


def pending_batches(versions, reflected: int, current: int) -> list[int]:
    """Of a base's ``versions`` (VersionInfo, the ones still held), the numbers after ``reflected``
    up to ``current`` that change cells, oldest first. Versions are numbered one by one, so a number
    in that range no longer held has expired: what it did is unknown, and it counts as a batch (a
    view behind an expired version is never said to be up to date)."""
    held = {v.version: v for v in versions}
    return [n for n in range(reflected + 1, current + 1) if n not in held or held[n].changes_cells]


def expired_batches(versions, reflected: int, current: int) -> list[int]:
    """The numbers after ``reflected`` up to ``current`` that ``versions`` no longer holds."""
    held = {v.version for v in versions}
    return [n for n in range(reflected + 1, current + 1) if n not in held]


def joint_seconds(db: Database, view, bases: tuple[str, ...] | None = None) -> float:
    """The predicted seconds of ONE refresh bringing ``bases`` (all with None) forward over all their
    pending batches, as ``auto`` plans it (0 when none of them has any); nothing runs. A refresh of
    several bases shares one plan, one computation and one commit, so this is usually far less than
    the sum of each base's :func:`pending_costs` row."""
    table = view._current().table
    reflected = reflected_versions(table)
    pinned = _pinned_bases(db, view.definition, reflected, bases)
    if not any(_pending_versions(source, reflected.get(b, 0)) for b, source in pinned.items()):
        return 0.0
    source = ViewSource(table, table.current_version(), table.schema)
    _, chosen, _, _, _ = _plan_strategy(db, view, "auto", pinned, reflected, source)
    return float(chosen.seconds)


def first_batch_seconds(db: Database, view, base: str) -> float:
    """The predicted seconds of refreshing ``view`` on the first pending batch of ``base`` alone
    (0 with none pending), as ``auto`` plans it; nothing runs."""
    table = view._current().table
    reflected = reflected_versions(table)
    if expired_bases(db, view):  # only a refresh of every base can run
        return joint_seconds(db, view)
    bases = _pinned_bases(db, view.definition, reflected, (base,))
    pending = _pending_versions(bases[base], reflected.get(base, 0))
    if not pending:
        return 0.0
    one = {**bases, base: replace(bases[base], version=pending[0])}
    source = ViewSource(table, table.current_version(), table.schema)
    _, first, _, _, _ = _plan_strategy(db, view, "auto", one, reflected, source)
    return float(first.seconds)


__all__ = ["expired_batches", "first_batch_seconds", "joint_seconds", "pending_batches", "pending_costs"]
