"""A maintenance refresh of several bases that fails, retried one base at a time: one base's bad
batch (an int64 sum it overflows, say) holds back that base only, never the view's other bases."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from arrayviews.execution.failures import translated_errors
from arrayviews.model.errors import ArrayViewsError, CommitConflictError
from arrayviews.views.pending import pending_batches
from arrayviews.views.view import RefreshResult, expired_bases, reflected_versions, refresh_view

if TYPE_CHECKING:
    from arrayviews.database import Database


@dataclass
class ApartRefresh:
    """What refreshing each base apart did: the refreshes committed (one per base brought forward)
    and, per base left behind, the message of the error its refresh raised."""

    view: str
    results: dict[str, RefreshResult] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def advanced(self) -> tuple[str, ...]:
        """The bases brought forward, in the view's order."""
        return tuple(self.results)

    def message(self, reflected: dict[str, int]) -> str:
        """One line: the bases left behind (at the version still reflected), each with its error,
        and the bases brought forward meanwhile."""
        own = f"view {self.view}: "
        left = "; ".join(
            f"refreshing on {base} failed, {base} stays at v{reflected.get(base, 0)}: "
            + (text[len(own) :] if text.startswith(own) else text).splitlines()[0]
            for base, text in self.failed.items()
        )
        done = ", ".join(self.advanced)
        return f"view {self.view}: {left}" + (f"; brought forward on {done}" if done else "")


def refresh_isolating(
    db: Database, view, bases: tuple[str, ...] | None, strategy: str = "auto"
) -> RefreshResult | ApartRefresh:
    """Refresh ``view`` on ``bases`` (all with None) as one refresh; when that raises an arrayviews
    error (a lost commit race aside) and two or more of them have pending batches, refresh each of
    those apart, in the view's order, and return what each did. Each refresh is the view's own
    validated commit, so a base whose refresh fails leaves the view as consistent as before, at the
    versions it reflected. With one base pending, or a reflected version expired (only a refresh of
    every base can run), the error is raised as it came."""
    try:
        return _refresh(db, view, strategy, bases)
    except CommitConflictError:
        raise
    except ArrayViewsError as error:
        chosen = view.definition.bases if bases is None else tuple(bases)
        reflected = reflected_versions(view._current().table)
        pending = [
            b for b in view.definition.bases if b in chosen and _has_pending(db, b, reflected.get(b, 0))
        ]
        if len(pending) < 2 or expired_bases(db, view):
            raise
        apart = ApartRefresh(view.name)
        for base in pending:
            try:
                apart.results[base] = _refresh(db, view, strategy, (base,))
            except CommitConflictError:
                raise
            except ArrayViewsError as alone:
                apart.failed[base] = str(alone)
        if not apart.results:
            raise error
        return apart


def _refresh(db: Database, view, strategy: str, bases: tuple[str, ...] | None) -> RefreshResult:
    """``refresh_view`` raising arrayviews errors for what Spark raised (a task's overflow, say)."""
    with translated_errors():
        return refresh_view(db, view, strategy, bases)


def _has_pending(db: Database, base: str, reflected: int) -> bool:
    table = db.warehouse.open(base)
    return bool(pending_batches(table.versions(), reflected, table.current_version()))


__all__ = ["ApartRefresh", "refresh_isolating"]
