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
  equal value beats an older one), kept in the group's one row: the batch's extreme as the newest
  entry and a list of the earlier entries, each ``STRUCT(v, at)`` with the ``age`` it was made at,
  oldest first. Part j reads S[j] once and part j-1 once: the entries of j-1 still in the window
  (``age - at < Wp``) are its list and its newest entry; the window's extreme is the batch's or
  theirs; the new list keeps those the batch does not beat. Over values in random order a queue
  holds about H(Wp) = 1 + 1/2 + ... + 1/Wp entries (5.2 at Wp = 100), at most Wp over a falling
  run. Counts and sums beside them are the cumulative sums above. (Views made before round 36
  keep their layout, as their stored definitions do: each earlier entry a row of its own, part
  j-1 read three times; the translation makes it with ``nested=False``. Before round 14 this form
  was a helper of per-part partial aggregates and a view combining Helper[j-Wp+1 .. j].)
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

import sqlglot
from sqlglot import exp

from arrayviews.model import text_lines
from arrayviews.model.errors import ParseError, ValidationError
from arrayviews.model.names import HELPER_SUFFIX
from arrayviews.model.viewdf import OVERFLOW_MARK, Presentation, ViewDFDefinition
from arrayviews.model.window_step import ItemColumn, QueueColumns, WindowStep
from arrayviews.streams import entry_rows, exact_sums
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


def _spark(template: str, **columns: exp.Expression) -> exp.Expression:
    """The Spark SQL expression ``template`` with each bare column named in ``columns`` replaced
    by its expression (lambda parameters such as ``e.v`` are qualified, so never replaced)."""

    def put(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name in columns:
            return columns[node.name].copy()
        return node

    return sqlglot.parse_one(template, read="spark").transform(put)


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
    #: (``nested``) the stored list of the earlier entries still kept, each ``STRUCT(v, at)``, and
    #: the step's column of the entries made before this part that are still in the window
    entries: str = ""
    candidates: str = ""

    def extreme(self, values: exp.Expression) -> exp.Expression:
        return (exp.Max if self.function == "max" else exp.Min)(this=values)

    def list_extreme(self, entries: exp.Expression) -> exp.Expression:
        """The extreme of the values of a list of entries (NULL when it is empty)."""
        function = "ARRAY_MAX" if self.function == "max" else "ARRAY_MIN"
        return _spark(f"{function}(TRANSFORM(entries, e -> e.v))", entries=entries)

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
        nested: bool = True,
    ) -> None:
        if plan not in (INCREMENTAL, RECOMPUTE):
            raise ValueError(f"a window view's plan is {INCREMENTAL} or {RECOMPUTE}, got {plan!r}")
        self.statement = statement
        self.view = statement.name
        self.plan = plan
        #: min/max queues keep their earlier entries as a list in the group's one row (round 36);
        #: False makes the layout of earlier views (an entry a row), which those views keep
        self.nested = nested
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
                names.fresh(f"earlier_{function}_{attribute}") if nested else "",
                names.fresh(f"candidates_{function}_{attribute}") if nested else "",
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
                QueueColumns(q.function, q.attribute, q.batch, q.entry, q.head, q.entries or None)
                for q in self.queues
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
            if self.nested:
                step_columns += [
                    _alias(_column(q.batch, "Batch"), q.batch),
                    _alias(self.candidates(q), q.candidates),
                ]
                earlier = _alias(q.list_extreme(_column(q.candidates)), q.earlier)
                outputs += [_column(q.batch), _column(q.candidates), earlier]
                continue
            step_columns += [
                _alias(_column(q.batch, "Batch"), q.batch),
                _alias(_column(q.earlier, PREVIOUS), q.earlier),
            ]
            outputs += [_column(q.batch), _column(q.earlier)]
        previous = (
            exp.alias_(references.part(self.state, -1), PREVIOUS, table=True)
            if not self.queues or self.nested
            else entry_rows.previous_groups(self, references).subquery(PREVIOUS)
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
    def candidates(self, queue: _Queue) -> exp.Expression:
        """(``nested``) The entries of ``queue`` made before part j that are still in the window
        at j, oldest first: part j-1's kept entries, then its batch's extreme (made at its age).
        An entry made at age ``at`` stays while ``age - at < Wp``, the group's age at j being
        one more than at j-1 (a group without a row at j-1 has none)."""
        return _spark(
            "FILTER(CASE WHEN kept IS NULL THEN ARRAY(STRUCT(newest AS v, made AS at))"
            " ELSE CONCAT(kept, ARRAY(STRUCT(newest AS v, made AS at))) END,"
            f" e -> e.v IS NOT NULL AND made + 1 - e.at < {self.parts})",
            kept=_column(queue.entries, PREVIOUS),
            newest=_column(queue.entry, PREVIOUS),
            made=_column(self.age, PREVIOUS),
        )

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
        """Part j with its queues, in this view's layout (``listed``, or an entry a row)."""
        if self.nested:
            return self.listed(summary, initialize)
        return entry_rows.queued(self, summary, references, initialize)

    def listed(self, summary: exp.Select, initialize: bool) -> exp.Expression:
        """(``nested``) Part j with its queues, a row per group: the batch's extreme as the newest
        entry, and the list of the earlier entries still in the window that it does not beat
        (ties go to the newer), oldest first; empty in a group's first part."""
        outputs = [_column(c, "W") for c in self.stored_state()]
        for q in self.queues:
            batch = _column(q.batch, "W")
            outputs.append(_alias(batch, q.entry))
            if initialize:  # no entries, typed as the list the updates make
                kept = _spark(
                    "FILTER(ARRAY(STRUCT(newest AS v, made AS at)), e -> FALSE)",
                    newest=batch,
                    made=_column(self.age, "W"),
                )
            else:
                kept = _spark(
                    "FILTER(candidates, e -> newest IS NULL OR beats)",
                    candidates=_column(q.candidates, "W"),
                    newest=batch,
                    beats=q.beats(_spark("e.v"), batch),
                )
            outputs.append(_alias(kept, q.entries))
        return exp.select(*outputs).from_(summary.subquery("W"))

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
            if self.nested and not initialize:
                totals.append(_alias(_column(q.candidates, "Cur"), q.candidates))
        query = exp.select(*totals).from_(current.subquery("Cur"))
        if not initialize and self.cumulated():
            same_epoch = _column(self.age, "Old").eq(
                exp.Sub(this=_column(self.age, "Cur"), expression=_number(self.parts))
            )
            old_part = references.part(self.state, -self.parts)
            query = query.join(
                entry_rows.summary_rows(self, old_part, "Old")
                if self.queues and not self.nested
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
        if self.nested and not initialize:
            outputs += [_column(q.candidates) for q in self.queues]
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
        marker = self.idle if self.queues and not self.nested else self.age  # entries have no idle
        return Presentation(columns, self.shown or marker)

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
