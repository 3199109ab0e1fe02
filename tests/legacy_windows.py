"""Window views with min or max as arrayviews created them before every incremental window became
one table (round 14): a helper of per-part partial aggregates (``V__helper``) and the view combining
the window's ``Wp`` helper parts, and over a stream without rows the plan left *pending*. Such
views are still in warehouses and are maintained from their stored definitions; the tests of what
serves them (helper retention, plan settling, dropping an unread helper) create them with this."""

from __future__ import annotations

from sqlglot import exp

from arrayviews.language.parser import parse_statement
from arrayviews.streams.query_building import _alias, _column, _definition, _References
from arrayviews.streams.translate import translate
from arrayviews.streams.window_plans import PlanChoice
from arrayviews.streams.windows import RECOMPUTE, WindowTranslation


class _TwoViews(WindowTranslation):
    """The earlier distributive translation (paper 004, section 5.2.1): Helper[j] holds S[j]'s
    per-group count, sums, non-null counts, maxima and minima; the view combines Helper[j-Wp+1 .. j]."""

    def partials(self, references: _References) -> exp.Expression:
        outputs = [*self.groups()]
        if self.keeps_count:
            outputs.append(_alias(exp.Count(this=exp.Star(), big_int=True), self.count))
        outputs += [_alias(exp.Sum(this=_column(a)), column) for a, column in self.sums.items()]
        outputs += [
            _alias(exp.Count(this=_column(a), big_int=True), column) for a, column in self.counts.items()
        ]
        outputs += [_alias(exp.Max(this=_column(a)), column) for a, column in self.maxima.items()]
        outputs += [_alias(exp.Min(this=_column(a)), column) for a, column in self.minima.items()]
        return exp.select(*outputs).from_(references.part(self.query.stream, 0)).group_by(*self.groups())

    def combined(self, references: _References) -> exp.Expression:
        combine = [(exp.Sum, self.count)] if self.keeps_count else []
        combine += [(exp.Sum, column) for column in [*self.sums.values(), *self.counts.values()]]
        combine += [(exp.Max, column) for column in self.maxima.values()]
        combine += [(exp.Min, column) for column in self.minima.values()]
        totals = (
            exp.select(*self.groups(), *(_alias(function(this=_column(c)), c) for function, c in combine))
            .from_(references.part(self.helper, 1 - self.parts, 0))
            .group_by(*self.groups())
        )
        return self.results(totals)

    def two_views(self) -> list:
        length = self.partition_length
        helper = _definition(self.helper, self.partials, self.partials, length, helper=True)
        final = _definition(self.statement.name, self.combined, self.combined, length, helper=False)
        return [helper, final]


def create_legacy_window_view(db, text: str, pending: bool = False, lateness_parts: int | None = None):
    """Create the window view of ``text`` (min or max among its aggregates) as a helper and a view;
    with ``pending``, its plan stored as an AUTO choice over a stream without rows was."""
    statement = parse_statement(text)
    stream = db.stream(statement.query.stream)
    types = {field.name: field.dataType.simpleString() for field in stream.schema.fields}
    translation = _TwoViews(statement, stream.partition_length, types)
    assert not translation.subtractable, "a subtractable window was one table already"
    kept = None
    if pending:
        choice = PlanChoice(
            "incremental",
            "the stream has no rows yet: incremental until its first rows, then chosen again",
            {},
            True,
        )
        recompute = translate(statement, stream.partition_length, types=types, plan=RECOMPUTE)[-1]
        kept = choice.property_text(
            stream=statement.query.stream,
            group_by=list(statement.query.group_by),
            parts=translation.parts,
            subtractable=False,
            recompute=recompute.to_json(),
        )
    return db.create_stream_view(translation.two_views(), lateness_parts, window_plan=kept)


__all__ = ["create_legacy_window_view"]
