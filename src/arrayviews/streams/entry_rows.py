"""The queue layout of the min/max window views made before round 36 (streams/windows.py): each
earlier entry of a group's queue is a row of its own beside the group's summary row, which alone
has ``idle`` and the sums; an entry row holds the queue values and ``at``, the age it was made at.
A step reads part j-1 three times (grouped, as entries, and as the places of the new summary
rows). Those views keep this layout (their stored definitions); new ones keep a list per queue in
the group's one row. The translation makes this layout with ``nested=False`` (tests, and the
benchmark comparing the two layouts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from arrayviews.streams.query_building import (
    _alias,
    _coalesce,
    _column,
    _is_null,
    _is_set,
    _number,
    _References,
    _same_groups,
)

if TYPE_CHECKING:
    from arrayviews.streams.windows import WindowTranslation


def previous_groups(t: WindowTranslation, references: _References) -> exp.Select:
    """Part j-1 per group: its summary row's state (the only row with ``idle`` and the sums;
    queue entries share its ``age``) and, per queue, the extreme of the entries still in the
    window at part j (an entry made at age ``at`` stays while ``age - at < Wp``; the summary row
    holds the newest entry, made at its own age)."""
    age = _column(t.age)
    made = _coalesce(_column(t.at), age.copy())
    stays = exp.LT(
        this=exp.Sub(this=exp.Add(this=age.copy(), expression=_number(1)), expression=made),
        expression=_number(t.parts),
    )
    state = [t.age, t.idle, *t.cumulated()]
    outputs = [*t.groups(), *(_alias(exp.Max(this=_column(c)), c) for c in state)]
    outputs += [
        _alias(q.extreme(exp.Case().when(stays.copy(), _column(q.entry))), q.earlier) for q in t.queues
    ]
    return exp.select(*outputs).from_(references.part(t.state, -1)).group_by(*t.groups())


def summary_rows(t: WindowTranslation, table: exp.Expression, alias: str) -> exp.Expression:
    """``table``'s summary rows (a queue entry has no ``idle``), as ``alias``."""
    rows = exp.select(exp.Star()).from_(table).where(_is_set(_column(t.idle)))
    return rows.subquery(alias)


def queued(
    t: WindowTranslation, summary: exp.Select, references: _References, initialize: bool
) -> exp.Expression:
    """Part j with its queues: the summary rows (holding the batch's extremes as the newest
    entries) and the earlier entries still in the window that no newer value beats (ties go
    to the newer). Each row of part j-1 (summary rows read as entries, and once more as the
    places of the new summary rows) is matched to its group's summary, so the step reads the
    stream's part once."""
    state = t.stored_state()
    if initialize:
        outputs = [_column(c, "W") for c in state]
        outputs.append(_alias(exp.cast(exp.null(), "INT"), t.at))
        outputs += [_alias(_column(q.batch, "W"), q.entry) for q in t.queues]
        return exp.select(*outputs).from_(summary.subquery("W"))
    earlier = references.part(t.state, -1)
    entries = exp.select(
        *t.groups(),
        _alias(_number(1), t.kind),
        _alias(_coalesce(_column(t.at), _column(t.age)), t.at),
        *(_column(q.entry) for q in t.queues),
    ).from_(earlier)
    places = exp.select(
        *t.groups(),
        _alias(_number(0), t.kind),
        _alias(exp.cast(exp.null(), "INT"), t.at),
        *(_alias(exp.null(), q.entry) for q in t.queues),
    ).from_(summary_rows(t, references.part(t.state, -1), "Placed"))
    rows = exp.union(entries, places, distinct=False).subquery("Q")
    is_summary = _coalesce(_column(t.kind, "Q"), _number(0)).eq(_number(0))
    outputs = [_alias(_column(g, "W"), g) for g in t.query.group_by]
    for column in state[len(t.query.group_by) :]:
        if column == t.age:
            outputs.append(_alias(_column(column, "W"), column))
        else:
            outputs.append(_alias(exp.Case().when(is_summary.copy(), _column(column, "W")), column))
    outputs.append(_alias(exp.Case().when(exp.Not(this=is_summary.copy()), _column(t.at, "Q")), t.at))
    for q in t.queues:
        batch, entry = _column(q.batch, "W"), _column(q.entry, "Q")
        kept = exp.or_(_is_null(batch), q.beats(entry.copy(), batch.copy()), copy=False)
        value = exp.Case().when(is_summary.copy(), batch).when(kept, entry)
        outputs.append(_alias(value, q.entry))
    matched = (
        exp.select(*outputs)
        .from_(summary.subquery("W"))
        .join(rows, on=_same_groups(t.query.group_by, "W", "Q"), join_type="left outer")
    )
    in_window = exp.LT(
        this=exp.Sub(this=_column(t.age), expression=_column(t.at)), expression=_number(t.parts)
    )
    some_entry = exp.or_(*(_is_set(_column(q.entry)) for q in t.queues), copy=False)
    keep = exp.or_(_is_set(_column(t.idle)), exp.and_(in_window, some_entry, copy=False), copy=False)
    return (
        exp.select(*(_column(c) for c in [*state, t.at, *(q.entry for q in t.queues)]))
        .from_(matched.subquery("Rows"))
        .where(keep)
    )
