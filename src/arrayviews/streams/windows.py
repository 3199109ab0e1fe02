"""Sliding-window views (paper 004, section 5.2) and the choice of their maintenance plan.

A window of ``Wp`` stream parts has two plans:

* **incremental** (the paper's translations, two views):
  * with min or max (distributive): Helper[j] holds per-part partial aggregates (count, sum, count
    of non-null, max, min) of S[j]; the view combines Helper[j-Wp+1 .. j];
  * with only count, sum and avg (subtractable): Helper[j] holds per group cumulative sums and
    counts since the group's current epoch began, ``age`` (parts since then, this one included)
    and ``idle`` (parts since the group's last row). Helper[j] = Helper[j-1] full-outer-joined with
    S[j]'s per-group sums; a group is dropped when ``idle`` reaches Wp (no row in the window), and
    a dropped group that comes back starts a new epoch (age 1). The view subtracts Helper[j-Wp]
    when it holds the same epoch, i.e. when its age is exactly ``age - Wp`` (a group whose epoch
    began at or before j-Wp stayed in every Helper part since, so Helper[j-Wp] holds it with that
    age; an epoch that began later has age <= Wp, and any older row at j-Wp would need age <= 0).
    Every group of Helper[j] had a row in the window, and every group with a row in the window is
    in Helper[j], so membership never depends on a sum's sign, and the Helper holds only the groups
    seen in the last Wp parts. ``sum`` is null when the window has no non-null value (as in SQL).
* **recompute** (one view): View[j] aggregates S[j-Wp+1 .. j] directly. A step reads the whole
  window, but it is one query, one file and one commit where the incremental plan pays two of
  each, so for a short window over small parts it is the cheaper plan.

:func:`choose_plan` prices both from the stream's rows per part and groups per part
(``execution.cost.StreamStepCost``) and takes the cheaper; the results are the same.

Sums of integer columns are exact in both plans. In the subtractable form a floating-point column
(when the translation is given the stream's column types) is summed exactly: the Helper keeps its
cumulative sum as the components and non-finite counts of an exact sum (streams/exact_sums.py:
``sum_y`` is the rounded cumulative sum, ``sum_y_x1`` .. ``sum_y_x3`` the components below it,
``sum_y_pinf``, ``sum_y_ninf``, ``sum_y_nan`` the counts of +inf, -inf and NaN), and the view's sum
is the exact difference rounded once, so a window sum equals ``math.fsum`` of the window's values
however large the values that left it (an infinity that left no longer counts). Such views keep the
incremental plan. The distributive form adds per-part sums and never subtracts. Sums keep the type
of the per-part sums, so decimal columns are not supported by the subtractable form.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from arrayviews.execution.cost import StreamStepCost
from arrayviews.model.errors import ParseError, ValidationError
from arrayviews.model.names import HELPER_SUFFIX
from arrayviews.model.viewdf import ViewDFDefinition
from arrayviews.storage.files import read_parquet_files
from arrayviews.storage.part_table import PartTable
from arrayviews.streams import exact_sums
from arrayviews.streams.fsm import PREVIOUS
from arrayviews.streams.queries import AGGREGATE_TYPES, WindowQuery, aggregate_call
from arrayviews.streams.query_building import (
    _alias,
    _coalesce,
    _column,
    _definition,
    _duration,
    _Names,
    _number,
    _References,
    _same_groups,
)

_SUBTRACTABLE = frozenset({"count", "sum", "avg"})
INCREMENTAL, RECOMPUTE, AUTO, PENDING = "incremental", "recompute", "auto", "pending"
PLANS = (AUTO, INCREMENTAL, RECOMPUTE)


class WindowTranslation:
    """Sections 5.2.1 (distributive) and 5.2.2 (subtractable, with group membership tracked), and
    the recompute plan; ``plan`` is ``incremental`` or ``recompute``."""

    def __init__(
        self,
        statement,
        partition_length: int,
        column_types: Mapping[str, str] | None = None,
        plan: str = INCREMENTAL,
    ) -> None:
        if plan not in (INCREMENTAL, RECOMPUTE):
            raise ValueError(f"a window view's plan is {INCREMENTAL} or {RECOMPUTE}, got {plan!r}")
        self.statement = statement
        self.view = statement.name
        self.plan = plan
        self.query: WindowQuery = statement.query
        self.partition_length = partition_length
        types = {name.lower(): kind.lower() for name, kind in (column_types or {}).items()}
        query = self.query
        if query.window_seconds % partition_length:
            where = query.window_position
            raise ParseError(
                f"window of {_duration(query.window_seconds)} is not a multiple of the partition "
                f"length {partition_length} seconds",
                text=statement.text,
                line=where.line or None,
                column=where.column or None,
            )
        self.parts = query.window_seconds // partition_length
        self.calls = query.aggregate_calls()
        self.subtractable = all(function in _SUBTRACTABLE for function, _ in self.calls)
        attributes = [attribute for _, attribute in self.calls if attribute]
        names = _Names([*query.group_by, *attributes])
        self.count = names.fresh("ct")  # rows per group: a Batch marker, and count(*)
        self.keeps_count = ("count", None) in self.calls
        summed = dict.fromkeys(a for f, a in self.calls if f in ("sum", "avg"))
        counted = dict.fromkeys(a for f, a in self.calls if f in ("sum", "avg", "count") and a)
        self.sums = {a: names.fresh(f"sum_{a}") for a in summed}
        self.counts = {a: names.fresh(f"count_{a}") for a in counted}
        self.maxima = {a: names.fresh(f"max_{a}") for f, a in self.calls if f == "max"}
        self.minima = {a: names.fresh(f"min_{a}") for f, a in self.calls if f == "min"}
        self.age = names.fresh("age")
        self.idle = names.fresh("idle")
        self.helper = statement.name + HELPER_SUFFIX
        # float columns of the subtractable form, summed exactly: the Helper's columns of each sum
        # state (in the order of exact_sums.FIELDS) and the name of the per-part state in Batch
        self.exact: dict[str, list[str]] = {}
        self.exact_batch: dict[str, str] = {}
        if self.subtractable:
            for attribute, column in self.sums.items():
                if types.get(attribute.lower()) in ("double", "float"):
                    lower = [names.fresh(f"{column}_x{k}") for k in range(1, len(exact_sums.FIELDS) - 3)]
                    counts = [names.fresh(f"{column}_{suffix}") for suffix in ("pinf", "ninf", "nan")]
                    self.exact[attribute] = [column, *lower, *counts]
                    self.exact_batch[attribute] = names.fresh(f"state_{attribute}")

    @property
    def float_sums(self) -> bool:
        """Whether the view sums a float column (exactly, which only the incremental plan does)."""
        return bool(self.exact)

    def definitions(self) -> list[ViewDFDefinition]:
        length = self.partition_length
        if self.plan == RECOMPUTE:
            if self.exact:
                float_sums = ", ".join(sorted(self.exact))
                raise ValidationError(
                    f"view {self.statement.name}: the sums of floating-point column(s) {float_sums} "
                    "are kept exactly by the incremental plan only",
                    array=self.statement.name,
                    column=sorted(self.exact)[0],
                )
            return [_definition(self.statement.name, self.recomputed, self.recomputed, length, helper=False)]
        if self.subtractable:
            helper = _definition(
                self.helper, self.cumulative_initialize, self.cumulative_update, length, helper=True
            )
            final = _definition(self.statement.name, self.subtracted, self.subtracted, length, helper=False)
        else:
            helper = _definition(self.helper, self.partials, self.partials, length, helper=True)
            final = _definition(self.statement.name, self.combined, self.combined, length, helper=False)
        return [helper, final]

    def groups(self, table: str | None = None) -> list[exp.Expression]:
        return [_column(g, table) for g in self.query.group_by]

    # -- per-part partial aggregates (distributive) ------------------------------------------
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
        combine = []
        if self.keeps_count:
            combine.append((exp.Sum, self.count))
        combine += [(exp.Sum, column) for column in [*self.sums.values(), *self.counts.values()]]
        combine += [(exp.Max, column) for column in self.maxima.values()]
        combine += [(exp.Min, column) for column in self.minima.values()]
        totals = (
            exp.select(*self.groups(), *(_alias(function(this=_column(c)), c) for function, c in combine))
            .from_(references.part(self.helper, 1 - self.parts, 0))
            .group_by(*self.groups())
        )
        return self.results(totals)

    # -- the whole window read again (the recompute plan) --------------------------------------
    def recomputed(self, references: _References) -> exp.Expression:
        """The window's totals from its ``Wp`` stream parts directly: no helper, one view."""
        totals = [*self.groups()]
        if self.keeps_count:
            totals.append(_alias(exp.Count(this=exp.Star(), big_int=True), self.count))
        totals += [_alias(exp.Sum(this=_column(a)), column) for a, column in self.sums.items()]
        totals += [_alias(exp.Count(this=_column(a), big_int=True), c) for a, c in self.counts.items()]
        totals += [_alias(exp.Max(this=_column(a)), column) for a, column in self.maxima.items()]
        totals += [_alias(exp.Min(this=_column(a)), column) for a, column in self.minima.items()]
        window = references.part(self.query.stream, 1 - self.parts, 0)
        return self.results(exp.select(*totals).from_(window).group_by(*self.groups()))

    # -- cumulative sums per epoch (subtractable) --------------------------------------------
    def label(self, attribute: str) -> exp.Literal:
        """What an exact sum's error message names: the view and the summed column."""
        return exp.Literal.string(f"view {self.statement.name}, sum of {attribute}")

    def batch_columns(self) -> list[exp.Expression]:
        """S[v]'s per-group row count, sums (0 without non-null values; the exact sum state of a float
        column) and non-null counts."""
        columns = [_alias(exp.Count(this=exp.Star(), big_int=True), self.count)]
        for a, c in self.sums.items():
            if a in self.exact:
                values = exp.Anonymous(this="collect_list", expressions=[_column(a)])
                state = exp.Anonymous(this=exact_sums.SUM, expressions=[values, self.label(a)])
                columns.append(_alias(state, self.exact_batch[a]))
            else:
                columns.append(_alias(_coalesce(exp.Sum(this=_column(a)), _number(0)), c))
        columns += [_alias(exp.Count(this=_column(a), big_int=True), c) for a, c in self.counts.items()]
        return columns

    def cumulated(self) -> list[str]:
        """The cumulative columns of the Helper."""
        sums = [column for a, column in self.sums.items() for column in self.exact.get(a, [column])]
        return ([self.count] if self.keeps_count else []) + sums + [*self.counts.values()]

    def unpacked(self, state: exp.Expression, attribute: str) -> list[exp.Expression]:
        """The Helper columns of an exact sum state: ``state.s0 AS sum_y``, ..."""
        return [
            _alias(exp.Dot(this=state.copy(), expression=exp.to_identifier(field)), column)
            for field, column in zip(exact_sums.FIELDS, self.exact[attribute], strict=True)
        ]

    def packed(self, attribute: str, table: str) -> exp.Expression:
        """The stored columns of an exact sum as one struct: ``struct(T.sum_y, T.sum_y_x1, ...)``."""
        return exp.Struct(expressions=[_column(c, table) for c in self.exact[attribute]])

    def batch(self, references: _References) -> exp.Subquery:
        return (
            exp.select(*self.groups(), *self.batch_columns())
            .from_(references.part(self.query.stream, 0))
            .group_by(*self.groups())
            .subquery("Batch")
        )

    def cumulative_initialize(self, references: _References) -> exp.Expression:
        outputs = [*self.groups(), _alias(_number(1), self.age), _alias(_number(0), self.idle)]
        if not self.exact:
            batch = {alias.alias: alias for alias in self.batch_columns()}
            outputs += [batch[column] for column in self.cumulated()]
            return exp.select(*outputs).from_(references.part(self.query.stream, 0)).group_by(*self.groups())
        for column in self.cumulated():
            attribute = next((a for a, columns in self.exact.items() if column in columns), None)
            if attribute is None:
                outputs.append(_column(column))
            elif column == self.exact[attribute][0]:
                outputs += self.unpacked(_column(self.exact_batch[attribute]), attribute)
        return exp.select(*outputs).from_(self.batch(references))

    def cumulative_update(self, references: _References) -> exp.Expression:
        batch = self.batch(references)
        previous_age = _column(self.age, PREVIOUS)
        step_columns = [
            _alias(_coalesce(_column(g, "Batch"), _column(g, PREVIOUS)), g) for g in self.query.group_by
        ]
        age = (
            exp.Case()
            .when(previous_age.is_(exp.null()), _number(1))
            .else_(exp.Add(this=previous_age.copy(), expression=_number(1)))
        )
        idle = (
            exp.Case()
            .when(
                _column(self.count, "Batch").is_(exp.null()),
                exp.Add(this=_column(self.idle, PREVIOUS), expression=_number(1)),
            )
            .else_(_number(0))
        )
        step_columns += [_alias(age, self.age), _alias(idle, self.idle)]
        outputs = [*self.groups(), _column(self.age), _column(self.idle)]
        for column in self.cumulated():  # in the order of the INITIALIZE query's columns
            attribute = next((a for a, columns in self.exact.items() if column in columns), None)
            if attribute is None:
                total = exp.Add(
                    this=_coalesce(_column(column, PREVIOUS), _number(0)),
                    expression=_coalesce(_column(column, "Batch"), _number(0)),
                )
                step_columns.append(_alias(total, column))
                outputs.append(_column(column))
            elif column == self.exact[attribute][0]:
                state = self.exact_batch[attribute]
                previous = self.packed(attribute, PREVIOUS)
                added = exp.Anonymous(
                    this=exact_sums.ADD,
                    expressions=[previous, _column(state, "Batch"), self.label(attribute)],
                )
                step_columns.append(_alias(added, state))
                outputs += self.unpacked(_column(state), attribute)
        step = (
            exp.select(*step_columns)
            .from_(batch)
            .join(
                exp.alias_(references.part(self.helper, -1), PREVIOUS, table=True),
                on=_same_groups(self.query.group_by, "Batch", PREVIOUS),
                join_type="full outer",
            )
        )
        in_window = _column(self.idle) < _number(self.parts)
        return exp.select(*outputs).from_(step.subquery("Step")).where(in_window)

    def subtracted(self, references: _References) -> exp.Expression:
        columns = [_alias(_column(g, "Cur"), g) for g in self.query.group_by]
        exact_columns = {c for columns in self.exact.values() for c in columns}
        for column in self.cumulated():
            if column in exact_columns:
                continue
            difference = exp.Sub(
                this=_column(column, "Cur"), expression=_coalesce(_column(column, "Old"), _number(0))
            )
            columns.append(_alias(difference, column))
        for attribute, stored in self.exact.items():
            difference = exp.Anonymous(
                this=exact_sums.DIFFERENCE,
                expressions=[
                    self.packed(attribute, "Cur"),
                    self.packed(attribute, "Old"),
                    self.label(attribute),
                ],
            )
            columns.append(_alias(difference, stored[0]))
        same_epoch = _column(self.age, "Old").eq(
            exp.Sub(this=_column(self.age, "Cur"), expression=_number(self.parts))
        )
        totals = (
            exp.select(*columns)
            .from_(exp.alias_(references.part(self.helper, 0), "Cur", table=True))
            .join(
                exp.alias_(references.part(self.helper, -self.parts), "Old", table=True),
                on=exp.and_(_same_groups(self.query.group_by, "Cur", "Old"), same_epoch, copy=False),
                join_type="left outer",
            )
        )
        return self.results(totals)

    # -- the view's rows from per-window totals ----------------------------------------------
    def value(self, function: str, attribute: str | None) -> exp.Expression:
        """The value of ``function(attribute)`` over the window, from the columns of Totals."""
        if function == "count":
            return _column(self.count if attribute is None else self.counts[attribute])
        if function == "max":
            return _column(self.maxima[attribute])
        if function == "min":
            return _column(self.minima[attribute])
        some = _column(self.counts[attribute]) > _number(0)
        total = _column(self.sums[attribute])
        if function == "avg":
            total = exp.Div(this=total, expression=_column(self.counts[attribute]))
        return exp.Case().when(some, total)

    def item_value(self, item) -> exp.Expression:
        if item.is_group:
            return _column(item.attribute)
        return self.value(item.function, item.attribute)

    def results(self, totals: exp.Select) -> exp.Expression:
        outputs = []
        for item in self.query.items:
            value = self.item_value(item)
            same = isinstance(value, exp.Column) and value.name == item.alias
            outputs.append(value if same else _alias(value, item.alias))
        query = exp.select(*outputs).from_(totals.subquery("Totals"))
        if self.query.having is not None:
            query = query.where(self.having())
        return query

    def having(self) -> exp.Expression:
        """HAVING over the Totals columns: aggregate calls and output aliases replaced by their values."""
        by_alias = {item.alias.lower(): item for item in self.query.items}

        def substitute(node: exp.Expression) -> exp.Expression:
            if type(node) in AGGREGATE_TYPES:
                function, attribute = aggregate_call(node)
                return self.value(function, attribute)
            if isinstance(node, exp.Column) and not node.table and node.name.lower() in by_alias:
                return self.item_value(by_alias[node.name.lower()])
            return node

        return self.query.having.expression.copy().transform(substitute, copy=False)


@dataclass(frozen=True)
class PartSizes:
    """What the stream's newest parts hold, from its metadata and one part's group columns."""

    rows: float  # rows per part (median over the parts looked at)
    groups: float  # distinct groups in the newest part


@dataclass(frozen=True)
class WindowShape:
    """What the plan choice needs of a window view (a WindowTranslation has the same attributes)."""

    view: str
    parts: int
    subtractable: bool
    float_sums: bool = False


@dataclass(frozen=True)
class PlanChoice:
    """The plan a window view is maintained by, and why (EXPLAIN prints it). ``pending``: AUTO over
    a stream without rows keeps the incremental plan until the first rows arrive, then chooses
    (streams/plan_settling.py)."""

    plan: str
    reason: str
    predicted: dict[str, float]
    pending: bool = False

    def property_text(self, **pending_details) -> str:
        """The view's plan as stored with it (``relations.WINDOW_PLAN``)."""
        stored = {
            "plan": PENDING if self.pending else self.plan,
            "reason": self.reason,
            "predicted": self.predicted,
        }
        return json.dumps({**stored, **(pending_details if self.pending else {})}, sort_keys=True)


#: Parts of the stream whose row counts (from its manifests) give the rows per part.
PARTS_LOOKED_AT = 8


def part_sizes(table: PartTable, group_by: tuple[str, ...]) -> PartSizes | None:
    """Rows per part of ``table`` (median over its newest parts with rows, from its manifests) and
    the distinct groups of ``group_by`` in one data file of its newest part (the only data read);
    None while it has no rows."""
    bounds = table.part_range()
    if bounds is None:
        return None
    files = table.sized_files_of_parts(max(bounds[0], bounds[1] - PARTS_LOOKED_AT + 1), bounds[1])
    rows_by_part: dict[int, int] = {}
    for _, part, rows, _ in files:
        rows_by_part[part] = rows_by_part.get(part, 0) + rows
    if not rows_by_part:
        return None
    newest = max(rows_by_part)
    by_lower = {name.lower(): name for name in table.arrow_schema.names}
    keys = [by_lower[g.lower()] for g in group_by]
    sample = next(uri for uri, part, _, _ in files if part == newest)
    groups = read_parquet_files([sample], columns=keys).group_by(keys).aggregate([]).num_rows if keys else 1
    return PartSizes(float(np.median(list(rows_by_part.values()))), float(groups))


def choose_plan(
    shape: WindowTranslation | WindowShape,
    sizes: PartSizes | None,
    cost: StreamStepCost,
    requested: str = AUTO,
) -> PlanChoice:
    """The plan of ``shape``'s view: ``requested`` unless it is ``auto``; otherwise the one with
    the lower predicted step time for parts of ``sizes``. The incremental plan when it keeps float
    sums exactly, and (pending) while the stream has no rows: its step does not grow with the
    window, and the choice is made again when rows arrive."""
    if requested not in PLANS:
        raise ValidationError(
            f"view {shape.view}: the plan is one of {', '.join(PLANS)}, got {requested!r}",
            array=shape.view,
            value=requested,
        )
    window = shape.parts
    predicted: dict[str, float] = {}
    if sizes is not None:
        rows, groups = sizes.rows, min(sizes.groups, sizes.rows)
        # the helper reads the stream's part and its own previous part; the view reads two helper
        # parts (subtractable) or all W of them (distributive)
        combined = 2 if shape.subtractable else window
        predicted = {
            RECOMPUTE: cost.per_view + cost.per_part * window + cost.per_row * window * rows,
            INCREMENTAL: 2 * cost.per_view
            + cost.per_helper
            + cost.per_part * (2 + combined)
            + cost.per_row * (rows + groups + combined * groups),
        }
    if requested != AUTO:
        return PlanChoice(requested, f"{requested} requested", predicted)
    if shape.float_sums:
        return PlanChoice(INCREMENTAL, "its float sums are kept exactly by the incremental plan", predicted)
    if sizes is None:
        return PlanChoice(
            INCREMENTAL,
            "the stream has no rows yet: incremental until its first rows, then chosen again",
            {},
            True,
        )
    plan = RECOMPUTE if predicted[RECOMPUTE] < predicted[INCREMENTAL] else INCREMENTAL
    reason = (
        f"{sizes.rows:,.0f} rows and {sizes.groups:,.0f} groups per part, window of {window} parts: "
        f"predicted step {predicted[RECOMPUTE] * 1000:.1f} ms recomputed, "
        f"{predicted[INCREMENTAL] * 1000:.1f} ms incremental"
    )
    return PlanChoice(plan, reason, predicted)


__all__ = [
    "AUTO",
    "INCREMENTAL",
    "PLANS",
    "RECOMPUTE",
    "PartSizes",
    "PlanChoice",
    "WindowTranslation",
    "choose_plan",
    "part_sizes",
]
