"""Sliding-window views (paper 004, section 5.2): their translation into ViewDFs.

A window of ``Wp`` stream parts has two plans (streams/window_plans.py chooses between them):

* **incremental** with only count, sum and avg (subtractable, section 5.2.2), one table: the
  view's own rows hold the maintenance state beside the window's values, its UPDATE reads its own
  earlier parts, and readers see the query's columns of the rows where HAVING holds
  (``Presentation``, streams/presentation.py), so a step is one query, one file and one commit.
  The state is each group's cumulative sums and counts since the group's current epoch began,
  ``age`` (parts since then, this one included) and ``idle`` (parts since the group's last row):
  part j is part j-1 full-outer-joined with S[j]'s per-group sums; a group is dropped when
  ``idle`` reaches Wp (no row in the window), and a dropped group that comes back starts a new
  epoch (age 1). The window's totals subtract part j-Wp when it holds the same epoch, i.e. when
  its age is exactly ``age - Wp`` (a group whose epoch began at or before j-Wp stayed in every part
  since, so part j-Wp holds it with that age; an epoch that began later has age <= Wp, and any
  older row at j-Wp would need age <= 0). Every kept group had a row in the window and every group
  with a row in the window is kept, so membership never depends on a sum's sign;
* **incremental** with min or max (distributive, section 5.2.1), also one table: per group and
  per ``min``/``max``, a monotonic queue of the values no newer value in the window beats (a newer
  equal value beats an older one). The summary row (the only row with ``idle``) holds the batch's
  extreme as the newest entry; older entries are rows of their own with the ``age`` they were made
  at (``at``). Part j reads S[j] once and part j-1 three times: grouped (each group's state and the
  extreme of the entries still in the window), as entries, and as the places of the new summary
  rows. An entry stays while ``age - at < Wp`` and no value of S[j] beats it; the window's extreme
  is the batch's or the earliest entry's. Over values in random order a queue holds about
  H(Wp) = 1 + 1/2 + ... + 1/Wp entries (5.2 at Wp = 100), at most Wp over a falling run, so a step
  reads a few rows per group instead of the window's Wp parts. Counts and sums beside them are
  the cumulative sums above, read from the summary rows. (Before round 14 this form was a helper
  of per-part partial aggregates and a view combining Helper[j-Wp+1 .. j]: Wp parts a step.)
* **recompute** (one view): View[j] aggregates S[j-Wp+1 .. j] directly.

Over a stream without rows a window is incremental at once (its one table cannot become the
recompute plan). Views made before one table keep their helper and view (their stored
definitions), and a min/max window left *pending* then is chosen by streams/plan_settling.py.

Sums of integer columns are exact in both plans. Those of BIGINT columns are formed in
DECIMAL(38,0) (an epoch's cumulative sums pass BIGINT long before a window's does), each window's
sum shown as BIGINT or, when it leaves BIGINT, an error naming the view, the column and the group.
Narrower integer columns keep BIGINT sums, which stay on the faster in-process path: an epoch
would need more than 2^32 rows before its sums could leave BIGINT, and then Spark's overflow error
stops the step. In the incremental plan a floating-point column
(when the translation is given the stream's column types) is summed exactly, also beside min/max
(before round 14 a window with min or max summed its per-part float sums with Spark's SUM): the
state keeps its
cumulative sum as the components and non-finite counts of an exact sum (streams/exact_sums.py:
``sum_y`` is the rounded cumulative sum, ``sum_y_x1`` .. ``sum_y_x3`` the components below it,
``sum_y_pinf``, ``sum_y_ninf``, ``sum_y_nan`` the counts of +inf, -inf and NaN), and the window's sum
is the exact difference rounded once, so a window sum equals ``math.fsum`` of the window's values
however large the values that left it (an infinity that left no longer counts). Such views keep the
incremental plan. Sums of DECIMAL(p, s) columns are formed in DECIMAL(38, s) and shown in Spark's
DECIMAL(p+10, s) the same way (before, the incremental form's sum types disagreed and such a view
could not be created).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp

from arrayviews.model import text_lines
from arrayviews.model.errors import ParseError, ValidationError
from arrayviews.model.names import HELPER_SUFFIX
from arrayviews.model.viewdf import OVERFLOW_MARK, Presentation, ViewDFDefinition
from arrayviews.model.window_step import ItemColumn, QueueColumns, WindowStep
from arrayviews.streams import exact_sums
from arrayviews.streams.fsm import PREVIOUS
from arrayviews.streams.queries import AGGREGATE_TYPES, WindowQuery, aggregate_call
from arrayviews.streams.query_building import (
    _alias,
    _coalesce,
    _column,
    _definition,
    _duration,
    _group_values,
    _is_null,
    _is_set,
    _Names,
    _number,
    _References,
    _same_groups,
)

_SUBTRACTABLE = frozenset({"count", "sum", "avg"})
#: Spark type names of group keys and of min/max columns the window kernel takes
#: (kernels/window_steps.py ``_key_type_ok`` and its queue check).
_KERNEL_EXTREMES = frozenset(("tinyint", "smallint", "int", "bigint", "date", "timestamp", "timestamp_ntz"))
_KERNEL_KEYS = _KERNEL_EXTREMES | {"string", "boolean"}
_INTEGERS = frozenset({"tinyint", "smallint", "int", "bigint"})
#: The type integer sums are formed in: an epoch's cumulative sums grow without bound, and a
#: window's total of BIGINT values may pass through more than BIGINT holds on its way.
_WIDE = "DECIMAL(38,0)"
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_BIGINT_RANGE = (-(2**63), 2**63 - 1)


def _check_columns(statement, calls, types: Mapping[str, str]) -> None:
    """Every column the window query reads is the stream's, and every sum and avg reads a number;
    a ParseError names the view, the column and where it was written otherwise (before, an unknown
    group column raised a bare KeyError, and ``sum(text)`` a Spark cast error when the first part
    was built)."""
    query = statement.query
    read = [(None, g) for g in query.group_by] + [(f, a) for f, a in calls if a is not None]
    for function, attribute in read:
        kind = types.get(attribute.lower())
        numeric = kind is not None and (
            kind in _INTEGERS or kind.startswith("decimal") or kind in ("float", "double")
        )
        if kind is not None and (function not in ("sum", "avg") or numeric):
            continue
        written = (
            rf"\b{function}\s*\(\s*{re.escape(attribute)}\s*\)"
            if function
            else rf"\b{re.escape(attribute)}\b"
        )
        found = re.search(written, statement.text, flags=re.IGNORECASE)
        line = column = None
        if found is not None:
            line, column = text_lines.position(statement.text, found.start())
        problem = (
            f"the stream {query.stream} has no column {attribute} (columns: {', '.join(types)})"
            if kind is None
            else f"{function}({attribute}) needs a numeric column; {attribute} is {kind}"
        )
        raise ParseError(f"view {statement.name}: {problem}", text=statement.text, line=line, column=column)


@dataclass(frozen=True)
class _Queue:
    """The monotonic queue of one ``min`` or ``max`` of a window: the column of its stored entries
    (``entry``), the batch's extreme per group (``batch``), the extreme of the earlier entries still
    in the window (``earlier``) and the window's extreme (``head``, the column ``value`` reads)."""

    function: str
    attribute: str
    batch: str
    entry: str
    earlier: str
    head: str

    def extreme(self, values: exp.Expression) -> exp.Expression:
        return (exp.Max if self.function == "max" else exp.Min)(this=values)

    def beats(self, value: exp.Expression, other: exp.Expression) -> exp.Expression:
        """``value`` is kept ahead of ``other``: strictly greater (max) or smaller (min), in the
        engine's own order (NaN the greatest)."""
        return (
            exp.GT(this=value, expression=other)
            if self.function == "max"
            else exp.LT(this=value, expression=other)
        )


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
        self.typed = bool(types)
        self.types = types
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
        if types:
            _check_columns(statement, self.calls, types)
        self.subtractable = all(function in _SUBTRACTABLE for function, _ in self.calls)
        attributes = [attribute for _, attribute in self.calls if attribute]
        names = _Names([*query.group_by, *attributes])
        self.count = names.fresh("ct")  # rows per group: a Batch marker, and count(*)
        self.keeps_count = ("count", None) in self.calls
        summed = dict.fromkeys(a for f, a in self.calls if f in ("sum", "avg"))
        counted = dict.fromkeys(a for f, a in self.calls if f in ("sum", "avg", "count") and a)
        self.sums = {a: names.fresh(f"sum_{a}") for a in summed}
        self.counts = {a: names.fresh(f"count_{a}") for a in counted}
        # per sum column of an integer or decimal attribute: the type its sums are formed in and
        # the type of Spark's sum, which the window's sum is shown in
        self.wide: dict[str, tuple[str, str]] = {}
        for a in summed:
            kind = types.get(a.lower(), "")
            decimal = _DECIMAL.fullmatch(kind)
            if kind == "bigint":  # narrower integers: 2^32 rows an epoch before BIGINT could overflow
                self.wide[self.sums[a]] = (_WIDE, "BIGINT")
            elif decimal:
                precision, scale = int(decimal.group(1)), int(decimal.group(2))
                shown = f"DECIMAL({min(38, precision + 10)},{scale})"
                self.wide[self.sums[a]] = (f"DECIMAL(38,{scale})", shown)
        self.maxima = {a: names.fresh(f"max_{a}") for f, a in self.calls if f == "max"}
        self.minima = {a: names.fresh(f"min_{a}") for f, a in self.calls if f == "min"}
        self.age = names.fresh("age")
        self.idle = names.fresh("idle")
        self.helper = statement.name + HELPER_SUFFIX
        # float columns of the subtractable form, summed exactly: the Helper's columns of each sum
        # state (in the order of exact_sums.FIELDS) and the name of the per-part state in Batch
        self.exact: dict[str, list[str]] = {}
        self.exact_batch: dict[str, str] = {}
        for attribute, column in self.sums.items():
            if types.get(attribute.lower()) in ("double", "float"):
                lower = [names.fresh(f"{column}_x{k}") for k in range(1, len(exact_sums.FIELDS) - 3)]
                counts = [names.fresh(f"{column}_{suffix}") for suffix in ("pinf", "ninf", "nan")]
                self.exact[attribute] = [column, *lower, *counts]
                self.exact_batch[attribute] = names.fresh(f"state_{attribute}")
        # a window's incremental plan is one table: the view's rows are its state (cumulative
        # sums, age, idle; a queue per min/max), the window's values under fresh names and, with
        # HAVING, a marker of the rows readers see; its UPDATE reads the view's own earlier parts
        self.one_table = True
        self.state = statement.name
        # min/max: per (function, attribute) the batch's extreme, the queue's stored entries, and
        # the extreme of the earlier entries still in the window
        self.queues = [
            _Queue(
                function,
                attribute,
                names.fresh(f"batch_{function}_{attribute}"),
                names.fresh(f"queue_{function}_{attribute}"),
                names.fresh(f"prev_{function}_{attribute}"),
                (self.maxima if function == "max" else self.minima)[attribute],
            )
            for function, attribute in dict.fromkeys((f, a) for f, a in self.calls if f in ("min", "max"))
        ]
        self.at = names.fresh("at")
        self.kind = names.fresh("kind")
        self.stored_items = [
            item.attribute if item.is_group else names.fresh(item.alias) for item in query.items
        ]
        self.kept = {c: names.fresh(f"keep_{c}") for c in [self.age, self.idle, *self.cumulated()]}
        self.shown = names.fresh("shown") if query.having is not None else None

    @property
    def cumulates(self) -> bool:
        """Whether counts or sums are kept (cumulated, and subtracted a window back)."""
        return bool(self.cumulated())

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
        return [
            _definition(
                self.statement.name,
                lambda references: self.windowed(references, initialize=True),
                lambda references: self.windowed(references, initialize=False),
                length,
                helper=False,
                presentation=self.presentation(),
                window_step=self.window_step(),
            )
        ]

    def window_step(self) -> WindowStep | None:
        """The update step column by column for kernels/window_steps.py, when the kernel computes
        what the SQL does: sums of integer columns (a BIGINT column's kept as DECIMAL(38,0), which
        the kernel takes while its sums stay well inside BIGINT), no DECIMAL or exact float sums,
        no HAVING. None leaves every step to the SQL."""
        if self.plan != INCREMENTAL or not self._kernel_shaped():
            return None
        items = tuple(
            ItemColumn(stored, item.function, item.attribute)
            for item, stored in zip(self.query.items, self.stored_items, strict=True)
            if not item.is_group
        )
        return WindowStep(
            parts=self.parts,
            stream=self.query.stream,
            groups=tuple(self.query.group_by),
            age=self.age,
            idle=self.idle,
            count=self.count,
            keeps_count=self.keeps_count,
            sums=tuple(self.sums.items()),
            counts=tuple(self.counts.items()),
            queues=tuple(
                QueueColumns(q.function, q.attribute, q.batch, q.entry, q.head) for q in self.queues
            ),
            at=self.at,
            items=items,
            wide=tuple(self.wide),
        )

    def _kernel_shaped(self) -> bool:
        """Whether the incremental step's columns are what the kernel takes (see window_step)."""
        decimals = [column for column, (_, shown) in self.wide.items() if shown != "BIGINT"]
        if decimals or self.exact or self.shown is not None or not self.typed:
            return False
        return bool(self.query.group_by)  # without, the SQL's batch is one row even for an empty part

    @property
    def kernel(self) -> bool:
        """Whether the incremental plan's in-process steps run as the window kernel: its shape
        (``window_step``) and, from the stream's column types, group keys and min/max columns the
        kernel takes (no float keys, no float extremes; those steps run their SQL)."""
        if not self._kernel_shaped():
            return False
        keys = all(self.types.get(g.lower(), "") in _KERNEL_KEYS for g in self.query.group_by)
        return keys and all(self.types.get(q.attribute.lower(), "") in _KERNEL_EXTREMES for q in self.queues)

    def groups(self, table: str | None = None) -> list[exp.Expression]:
        return [_column(g, table) for g in self.query.group_by]

    # -- the whole window read again (the recompute plan) --------------------------------------
    def recomputed(self, references: _References) -> exp.Expression:
        """The window's totals from its ``Wp`` stream parts directly: no helper, one view."""
        totals = [*self.groups()]
        if self.keeps_count:
            totals.append(_alias(exp.Count(this=exp.Star(), big_int=True), self.count))
        totals += [_alias(exp.Sum(this=self.summand(a)), column) for a, column in self.sums.items()]
        totals += [_alias(exp.Count(this=_column(a), big_int=True), c) for a, c in self.counts.items()]
        totals += [_alias(exp.Max(this=_column(a)), column) for a, column in self.maxima.items()]
        totals += [_alias(exp.Min(this=_column(a)), column) for a, column in self.minima.items()]
        window = references.part(self.query.stream, 1 - self.parts, 0)
        return self.results(exp.select(*totals).from_(window).group_by(*self.groups()))

    # -- cumulative sums per epoch (subtractable) --------------------------------------------
    def summand(self, attribute: str) -> exp.Expression:
        """``attribute`` as it is summed: an integer column as DECIMAL(38,0)."""
        column = _column(attribute)
        wide = self.wide.get(self.sums.get(attribute, ""))
        return exp.cast(column, wide[0]) if wide else column

    def widened(self, column: str, total: exp.Expression) -> exp.Expression:
        """``total`` of the sum column ``column``, kept as DECIMAL(38,0) for an integer column."""
        return exp.cast(total, self.wide[column][0]) if column in self.wide else total

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
                columns.append(
                    _alias(self.widened(c, _coalesce(exp.Sum(this=self.summand(a)), _number(0))), c)
                )
        columns += [_alias(exp.Count(this=_column(a), big_int=True), c) for a, c in self.counts.items()]
        columns += [_alias(q.extreme(_column(q.attribute)), q.batch) for q in self.queues]
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
            outputs += [batch[column] for column in [*self.cumulated(), *(q.batch for q in self.queues)]]
            return exp.select(*outputs).from_(references.part(self.query.stream, 0)).group_by(*self.groups())
        for column in self.cumulated():
            attribute = next((a for a, columns in self.exact.items() if column in columns), None)
            if attribute is None:
                outputs.append(_column(column))
            elif column == self.exact[attribute][0]:
                outputs += self.unpacked(_column(self.exact_batch[attribute]), attribute)
        outputs += [_column(q.batch) for q in self.queues]
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
                step_columns.append(_alias(self.widened(column, total), column))
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
        for q in self.queues:
            step_columns += [
                _alias(_column(q.batch, "Batch"), q.batch),
                _alias(_column(q.earlier, PREVIOUS), q.earlier),
            ]
            outputs += [_column(q.batch), _column(q.earlier)]
        previous = (
            exp.alias_(references.part(self.state, -1), PREVIOUS, table=True)
            if not self.queues
            else self.previous_groups(references).subquery(PREVIOUS)
        )
        step = (
            exp.select(*step_columns)
            .from_(batch)
            .join(
                previous,
                on=_same_groups(self.query.group_by, "Batch", PREVIOUS),
                join_type="full outer",
            )
        )
        in_window = _column(self.idle) < _number(self.parts)
        return exp.select(*outputs).from_(step.subquery("Step")).where(in_window)

    # -- monotonic queues of min/max (one table) ----------------------------------------------
    def previous_groups(self, references: _References) -> exp.Select:
        """Part j-1 per group: its summary row's state (the only row with ``idle`` and the sums;
        queue entries share its ``age``) and, per queue, the extreme of the entries still in the
        window at part j (an entry made at age ``at`` stays while ``age - at < Wp``; the summary row
        holds the newest entry, made at its own age)."""
        age = _column(self.age)
        made = _coalesce(_column(self.at), age.copy())
        stays = exp.LT(
            this=exp.Sub(this=exp.Add(this=age.copy(), expression=_number(1)), expression=made),
            expression=_number(self.parts),
        )
        state = [self.age, self.idle, *self.cumulated()]
        outputs = [*self.groups(), *(_alias(exp.Max(this=_column(c)), c) for c in state)]
        outputs += [
            _alias(q.extreme(exp.Case().when(stays.copy(), _column(q.entry))), q.earlier) for q in self.queues
        ]
        return exp.select(*outputs).from_(references.part(self.state, -1)).group_by(*self.groups())

    def summary_rows(self, table: exp.Expression, alias: str) -> exp.Expression:
        """``table``'s summary rows (a queue entry has no ``idle``), as ``alias``."""
        rows = exp.select(exp.Star()).from_(table).where(_is_set(_column(self.idle)))
        return rows.subquery(alias)

    def head(self, queue: _Queue) -> exp.Expression:
        """The window's extreme: the batch's or the earlier entries', whichever is kept ahead."""
        batch, earlier = _column(queue.batch, "Cur"), _column(queue.earlier, "Cur")
        return (
            exp.Case()
            .when(_is_null(earlier), batch)
            .when(_is_null(batch), earlier.copy())
            .when(queue.beats(earlier.copy(), batch.copy()), earlier.copy())
            .else_(batch.copy())
        )

    def stored_state(self) -> list[str]:
        """The columns of a summary row before the queues' (the one-table form's output)."""
        items = [s for item, s in zip(self.query.items, self.stored_items, strict=True) if not item.is_group]
        return [*self.query.group_by, *self.kept, *items, *([self.shown] if self.shown else [])]

    def queued(self, summary: exp.Select, references: _References, initialize: bool) -> exp.Expression:
        """Part j with its queues: the summary rows (holding the batch's extremes as the newest
        entries) and the earlier entries still in the window that no newer value beats (ties go
        to the newer). Each row of part j-1 (summary rows read as entries, and once more as the
        places of the new summary rows) is matched to its group's summary, so the step reads the
        stream's part once."""
        state = self.stored_state()
        if initialize:
            outputs = [_column(c, "W") for c in state]
            outputs.append(_alias(exp.cast(exp.null(), "INT"), self.at))
            outputs += [_alias(_column(q.batch, "W"), q.entry) for q in self.queues]
            return exp.select(*outputs).from_(summary.subquery("W"))
        earlier = references.part(self.state, -1)
        entries = exp.select(
            *self.groups(),
            _alias(_number(1), self.kind),
            _alias(_coalesce(_column(self.at), _column(self.age)), self.at),
            *(_column(q.entry) for q in self.queues),
        ).from_(earlier)
        places = exp.select(
            *self.groups(),
            _alias(_number(0), self.kind),
            _alias(exp.cast(exp.null(), "INT"), self.at),
            *(_alias(exp.null(), q.entry) for q in self.queues),
        ).from_(self.summary_rows(references.part(self.state, -1), "Placed"))
        rows = exp.union(entries, places, distinct=False).subquery("Q")
        is_summary = _coalesce(_column(self.kind, "Q"), _number(0)).eq(_number(0))
        outputs = [_alias(_column(g, "W"), g) for g in self.query.group_by]
        for column in state[len(self.query.group_by) :]:
            if column == self.age:
                outputs.append(_alias(_column(column, "W"), column))
            else:
                outputs.append(_alias(exp.Case().when(is_summary.copy(), _column(column, "W")), column))
        outputs.append(
            _alias(exp.Case().when(exp.Not(this=is_summary.copy()), _column(self.at, "Q")), self.at)
        )
        for q in self.queues:
            batch, entry = _column(q.batch, "W"), _column(q.entry, "Q")
            kept = exp.or_(_is_null(batch), q.beats(entry.copy(), batch.copy()), copy=False)
            value = exp.Case().when(is_summary.copy(), batch).when(kept, entry)
            outputs.append(_alias(value, q.entry))
        matched = (
            exp.select(*outputs)
            .from_(summary.subquery("W"))
            .join(rows, on=_same_groups(self.query.group_by, "W", "Q"), join_type="left outer")
        )
        in_window = exp.LT(
            this=exp.Sub(this=_column(self.age), expression=_column(self.at)), expression=_number(self.parts)
        )
        some_entry = exp.or_(*(_is_set(_column(q.entry)) for q in self.queues), copy=False)
        keep = exp.or_(_is_set(_column(self.idle)), exp.and_(in_window, some_entry, copy=False), copy=False)
        return (
            exp.select(*(_column(c) for c in [*state, self.at, *(q.entry for q in self.queues)]))
            .from_(matched.subquery("Rows"))
            .where(keep)
        )

    # -- one table: the Helper's rows and the window's values (subtractable) --------------------
    def windowed(self, references: _References, initialize: bool) -> exp.Expression:
        """Part ``j`` of the one-table view: this part's cumulative rows (Cur, as the Helper's
        step makes them), the window's totals (Cur less the same epoch's row ``Wp`` parts back; the
        first part has none), and the query's values from those totals."""
        current = self.cumulative_initialize(references) if initialize else self.cumulative_update(references)
        exact_columns = {c for columns in self.exact.values() for c in columns}
        totals = [_alias(_column(g, "Cur"), g) for g in self.query.group_by]
        totals += [_alias(_column(column, "Cur"), kept) for column, kept in self.kept.items()]
        for column in self.cumulated():
            if column in exact_columns:
                continue
            total = _column(column, "Cur")
            if not initialize:
                total = exp.Sub(this=total, expression=_coalesce(_column(column, "Old"), _number(0)))
            totals.append(_alias(self.widened(column, total), column))
        for attribute, stored in self.exact.items():
            old = self.no_state() if initialize else self.packed(attribute, "Old")
            difference = exp.Anonymous(
                this=exact_sums.DIFFERENCE,
                expressions=[self.packed(attribute, "Cur"), old, self.label(attribute)],
            )
            totals.append(_alias(difference, stored[0]))
        for q in self.queues:
            totals.append(_alias(_column(q.batch, "Cur"), q.batch))
            totals.append(_alias(_column(q.batch, "Cur") if initialize else self.head(q), q.head))
        query = exp.select(*totals).from_(current.subquery("Cur"))
        if not initialize and self.cumulated():
            same_epoch = _column(self.age, "Old").eq(
                exp.Sub(this=_column(self.age, "Cur"), expression=_number(self.parts))
            )
            old_part = references.part(self.state, -self.parts)
            query = query.join(
                self.summary_rows(old_part, "Old")
                if self.queues
                else exp.alias_(old_part, "Old", table=True),
                on=exp.and_(_same_groups(self.query.group_by, "Cur", "Old"), same_epoch, copy=False),
                join_type="left outer",
            )
        outputs = [*self.groups()]
        outputs += [_alias(_column(kept), column) for column, kept in self.kept.items()]
        for item, stored in zip(self.query.items, self.stored_items, strict=True):
            if not item.is_group:
                outputs.append(_alias(self.item_value(item), stored))
        if self.shown is not None:
            outputs.append(_alias(exp.Case().when(self.having(), exp.true()), self.shown))
        outputs += [_column(q.batch) for q in self.queues]
        summary = exp.select(*outputs).from_(query.subquery("Totals"))
        return self.queued(summary, references, initialize) if self.queues else summary

    @staticmethod
    def no_state() -> exp.Expression:
        """An exact sum state of zero (every field NULL) for the first part's window."""
        fields = [
            exp.cast(exp.null(), "DOUBLE" if field.startswith("s") else "BIGINT")
            for field in exact_sums.FIELDS
        ]
        return exp.Struct(expressions=fields)

    def presentation(self) -> Presentation:
        """What readers see of the one table: the query's columns, of every row (a group is kept
        while it has a row in the window) or, with HAVING, of the rows where it holds."""
        columns = tuple(
            (stored, item.alias) for item, stored in zip(self.query.items, self.stored_items, strict=True)
        )
        return Presentation(columns, self.shown or (self.idle if self.queues else self.age))

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
        total: exp.Expression = _column(self.sums[attribute])
        wide = self.wide.get(self.sums[attribute])
        if wide is not None and (function == "sum" or wide[1] != "BIGINT"):
            total = self.checked(total, attribute, wide[1])
        if function == "avg":
            dividend = exp.cast(total, "DOUBLE") if wide and wide[1] == "BIGINT" else total
            total = exp.Div(this=dividend, expression=_column(self.counts[attribute]))
        return exp.Case().when(some, total)

    def checked(self, total: exp.Expression, attribute: str, shown: str) -> exp.Expression:
        """A window's wide sum in ``shown``, the type of Spark's ``sum``, or an error naming the
        view, the attribute and the group when it does not fit (never a wrapped value)."""
        if shown == "BIGINT":
            low, high = _BIGINT_RANGE
            fits = exp.Between(this=total.copy(), low=exp.Literal.number(low), high=exp.Literal.number(high))
        else:
            kept = exp.TryCast(this=total.copy(), to=exp.DataType.build(shown, dialect="spark"))
            fits = exp.or_(_is_null(total), _is_set(kept), copy=False)
        group = _group_values(self.query.group_by)
        text = (
            f"{OVERFLOW_MARK}window view {self.statement.name}: sum({attribute}) over the window "
            f"leaves {shown.lower()}"
        )
        pieces: list[exp.Expression] = [exp.Literal.string(text)]
        if group:
            pieces += [
                exp.Literal.string(" for group "),
                exp.Anonymous(this="concat_ws", expressions=[exp.Literal.string(", "), *group]),
            ]
        overflow = exp.Anonymous(
            this="raise_error", expressions=[exp.Anonymous(this="concat", expressions=pieces)]
        )
        return exp.Case().when(fits, exp.cast(total.copy(), shown)).else_(overflow)

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


__all__ = ["AUTO", "INCREMENTAL", "PENDING", "PLANS", "RECOMPUTE", "WindowTranslation"]
