"""Translating pattern and sliding-window queries into Helper and final ViewDFs (paper 004, section 5).

``translate(statement, stream_partition_length)`` returns the ViewDFs of a view (helper views first,
the final view last), all with the stream's partition length and ``backfill=True``: they are built
from the stream's first part, and a part reference before a relation's first part (or to a part
without rows) reads as an empty table with the relation's columns. So each INITIALIZE query is the
UPDATE query with the view's own earlier parts empty, and only ever builds the very first part.

Queries are built as sqlglot syntax trees (Spark dialect) with placeholder tables standing for the
part references; the placeholders are replaced by ``T[j-1]``-style references in the generated
text, whose part references are then read back (:func:`~arrayviews.model.viewdf.viewdf_definition`),
so each definition's ``text`` round-trips.

The statements translated are anything with a view ``name`` and a ``query`` (a PatternQuery or a
WindowQuery): the statement language's CREATE VIEW nodes.

Pattern queries (section 5.1) get a Helper keeping, per group with a match in progress, the
group columns, the set of active states with each one's count and sums, and the auxiliary
attributes (see :mod:`arrayviews.streams.fsm` for the semantics), and a final view selecting the
groups whose accepting state is active. Sums are kept in a type they cannot leave in practice
(:func:`sum_type`), and an addition that would leave it raises an error naming the view, the
attribute and the group. A stream part holding several rows of one group is reduced to the first
row in the order of the attributes the query reads (a deterministic choice; the paper assumes one
row).

Sliding windows (section 5.2) are translated by :mod:`arrayviews.streams.windows`, which also
chooses between their incremental and recompute plans.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sqlglot import exp

from arrayviews.model.errors import ParseError
from arrayviews.model.names import HELPER_SUFFIX
from arrayviews.model.viewdf import OVERFLOW_MARK, Presentation, ViewDFDefinition
from arrayviews.streams.fsm import NEW, PREVIOUS, StateMachine, build_state_machine
from arrayviews.streams.queries import PatternQuery, WindowQuery
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
from arrayviews.streams.window_plans import PlanChoice
from arrayviews.streams.windows import INCREMENTAL, WindowTranslation, _check_columns

# ---------------------------------------------------------------------------------------------
# Entry points


def translate(
    statement,
    stream_partition_length: int,
    *,
    types: Mapping[str, str] | None = None,
    plan: PlanChoice | str = INCREMENTAL,
) -> list[ViewDFDefinition]:
    """The ViewDFs maintaining ``statement``'s view (its ``name`` and its ``query``) over a stream of
    ``stream_partition_length`` seconds per part: helper views first, the final view (named as the
    statement's view) last.

    ``types`` maps the stream's columns to their Spark SQL type names (``simpleString``, e.g.
    ``{"y": "double"}``): pattern sums are then kept in a type wide enough not to overflow (see
    :func:`sum_type`), and a subtractable window sums floating-point columns exactly; without it
    every sum is Spark's SUM. ``plan`` is a window view's plan (``incremental`` or ``recompute``,
    or the choice :func:`arrayviews.streams.window_plans.choose_plan` made)."""
    if stream_partition_length <= 0:
        raise ValueError(f"the stream's partition length must be positive, got {stream_partition_length}")
    query = getattr(statement, "query", None)
    if isinstance(query, PatternQuery):
        return _PatternTranslation(statement, stream_partition_length, types).definitions()
    if isinstance(query, WindowQuery):
        return WindowTranslation(statement, stream_partition_length, types, _plan_name(plan)).definitions()
    raise TypeError(f"only pattern and sliding-window views are translated, not {type(statement).__name__}")


def _plan_name(plan: PlanChoice | str) -> str:
    return plan.plan if isinstance(plan, PlanChoice) else plan


def explain(
    statement,
    stream_partition_length: int,
    *,
    types: Mapping[str, str] | None = None,
    plan: PlanChoice | str = INCREMENTAL,
) -> str:
    """What EXPLAIN shows: the state machine of a pattern query, a window view's plan (and why, for
    a chosen one) and the generated ViewDF statements (each of which parses back to its
    definition), or a hand-written ViewDF's part references
    (``statement`` has a ``definition``, or a ``name`` and a ``query``; an EXPLAIN wrapping one is
    looked through)."""
    statement = getattr(statement, "statement", statement)
    definition = getattr(statement, "definition", None)
    if isinstance(definition, ViewDFDefinition):
        return _explain_viewdf(definition)
    lines = []
    if isinstance(statement.query, PatternQuery):
        translation = _PatternTranslation(statement, stream_partition_length, types)
        lines.append(
            f"-- {statement.name}: pattern query over {statement.query.stream}, "
            f"partition length {stream_partition_length} s"
        )
        lines += [f"-- {line}" for line in translation.machine.describe().splitlines()]
    else:
        translation = WindowTranslation(statement, stream_partition_length, types, _plan_name(plan))
        query = statement.query
        if translation.plan != INCREMENTAL:
            kind = "recompute plan: one view aggregating the window's stream parts each step"
        elif translation.subtractable:
            kind = "subtractable aggregates, one table: cumulative sums per epoch, minus the part one window earlier"
        else:
            kind = "min/max, one table: a monotonic queue per group of the values no newer one beats" + (
                ", cumulative sums per epoch minus the part one window earlier"
                if translation.cumulated()
                else ""
            )
        lines.append(
            f"-- {statement.name}: sliding window of {_duration(query.window_seconds)} "
            f"= {translation.parts} parts of {stream_partition_length} s over {query.stream}"
        )
        lines.append(f"-- {kind}")
        if translation.plan == INCREMENTAL and translation.typed:
            lines.append(
                "-- update steps in-process: the numpy window kernel (kernels/window_steps.py); "
                "on Spark: the SQL below"
                if translation.window_step() is not None
                else "-- update steps: the SQL below (the window kernel takes integer sums without HAVING)"
            )
        if isinstance(plan, PlanChoice):
            lines.append(f"-- plan {plan.plan}: {plan.reason}")
    for definition in translation.definitions():
        header = f"-- {'helper view' if definition.helper else 'final view'} {definition.name}"
        if definition.presentation is not None:
            shown = ", ".join(a if a == b else f"{a} AS {b}" for a, b in definition.presentation.columns)
            header = (
                f"-- view {definition.name}: one table holding the Helper's rows; readers see {shown}\n"
                f"-- of the rows where {definition.presentation.when_set} IS NOT NULL"
            )
        lines += ["", header, definition.text + ";"]
    return "\n".join(lines) + "\n"


def _explain_viewdf(definition: ViewDFDefinition) -> str:
    lines = [f"-- {definition.name}: ViewDF, partition length {definition.partition_length} s"]
    for clause, query in (("INITIALIZE", definition.initialize), ("UPDATE", definition.update)):
        for reference in query.references:
            lines.append(
                f"-- {clause} {definition.name}[{query.variable}] reads {reference.text(query.variable)}"
            )
    lines += ["", definition.text + ";"]
    return "\n".join(lines) + "\n"


_INTEGER_SUMS = {"tinyint": "bigint", "smallint": "bigint", "int": "bigint", "bigint": "decimal(38,0)"}


def sum_type(attribute_type: str) -> str:
    """The Spark SQL type a pattern view keeps a sum of ``attribute_type`` values in: BIGINT for
    the smaller integers, DECIMAL(38,0) for BIGINT (no sum of fewer than 2**63 values leaves it),
    DECIMAL(p+10, s) up to precision 38 for DECIMAL(p, s) and DOUBLE for floating point (as Spark's
    own sum); any other type as it is."""
    text = attribute_type.strip().lower()
    if text in _INTEGER_SUMS:
        return _INTEGER_SUMS[text]
    if text in ("float", "double"):
        return "double"
    decimal = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", text)
    if decimal:
        precision, scale = int(decimal.group(1)), int(decimal.group(2))
        return f"decimal({min(38, precision + 10)},{scale})"
    return text


# ---------------------------------------------------------------------------------------------
# Pattern queries


def _check_pattern_columns(statement, types: Mapping[str, str]) -> None:
    """Every column a pattern query reads is the stream's and every sum reads a number; otherwise a
    ParseError names the view and the column, at the condition that reads it (before, an unknown
    column was Spark's UNRESOLVED_COLUMN error, placed at the statement's start)."""
    query: PatternQuery = statement.query
    _check_columns(statement, [("sum", a) for a in query.summed()], types)
    for conjunct in query.conjuncts:
        for column in conjunct.expression.find_all(exp.Column):
            if column.name.lower() not in types:
                raise ParseError(
                    f"view {statement.name}: the stream {query.stream} has no column {column.name} "
                    f"(columns: {', '.join(types)})",
                    text=statement.text,
                    line=conjunct.position.line or None,
                    column=conjunct.position.column or None,
                )


class _PatternTranslation:
    """Algorithms 2 and 3 of the paper, run as a nondeterministic machine: the Helper keeps, per
    group, every active state of the machine (see :mod:`arrayviews.streams.fsm` for the semantics).

    Helper columns: the group columns; per state k (1..n) the row count ``sk_ct`` of the partial
    match in state k that began first (null when state k is not active: the columns of all states
    together are the group's state set) and its sums ``sk_sum_x``; the auxiliary attributes
    (the row's values read by two-variable conditions of the next part). A group whose state set is
    empty has no row. The final view selects the groups whose accepting state n is active.
    """

    def __init__(self, statement, partition_length: int, types: Mapping[str, str] | None = None) -> None:
        self.statement = statement
        self.query: PatternQuery = statement.query
        self.partition_length = partition_length
        query = self.query
        self.sums = query.summed()
        self.types = {name.lower(): text for name, text in (types or {}).items()}
        if self.types:
            _check_pattern_columns(statement, self.types)
        read = [c.name for conjunct in query.conjuncts for c in conjunct.expression.find_all(exp.Column)]
        names = _Names([*query.group_by, *self.sums, *read])
        self.machine: StateMachine = build_state_machine(query, lambda a: names.fresh(f"prev_{a}"))
        self.states = range(1, self.machine.accepting + 1)
        self.counts = {k: names.fresh(f"s{k}_ct") for k in self.states}
        self.state_sums = {
            (k, attribute): names.fresh(f"s{k}_sum_{attribute}")
            for k in self.states
            for attribute in self.sums
        }
        self.values = {attribute: names.fresh(f"value_{attribute}") for attribute in self.sums}
        self.carried = {
            (k, attribute): names.fresh(f"carried_s{k}_sum_{attribute}")
            for k in self.states
            for attribute in self.sums
        }
        self.entered = {k: names.fresh(f"enter_s{k}") for k in self.states}
        self.stayed = {k: names.fresh(f"stay_s{k}") for k in self.states if self.machine.is_kleene(k)}
        self.rank = names.fresh("rank")
        # the Helper of the paper is the view itself: its stored rows are every active partial
        # match, and readers see the complete ones (the final view), so a step is one commit
        self.helper = statement.name
        # the stream attributes read from each part: group columns, summed ones, predicate ones
        self.columns = tuple(dict.fromkeys([*query.group_by, *self.sums, *self.machine.attributes]))

    def definitions(self) -> list[ViewDFDefinition]:
        """One view: the paper's Helper (every active partial match of each part, reading its own
        previous part), shown through :meth:`presentation` as the paper's final view."""
        length = self.partition_length
        return [
            _definition(
                self.statement.name,
                self.helper_initialize,
                self.helper_update,
                length,
                helper=False,
                presentation=self.presentation(),
            )
        ]

    # -- sums ----------------------------------------------------------------------------------
    def sum_type(self, attribute: str) -> str | None:
        """The type a sum of ``attribute`` is kept in (None when the stream's types are unknown)."""
        known = self.types.get(attribute.lower())
        return None if known is None else sum_type(known)

    def value(self, attribute: str, table: str | None = NEW) -> exp.Expression:
        """The row's ``attribute`` in the type of its sums."""
        kept = self.sum_type(attribute)
        column = _column(attribute, table)
        if kept is None or kept == self.types[attribute.lower()]:
            return column
        return exp.cast(column, kept)

    def empty_sum(self, attribute: str) -> exp.Expression:
        """A null of the sum's type (for states a new match is not in)."""
        kept = self.sum_type(attribute)
        if kept is None:
            return exp.Case().when(exp.false(), _column(attribute, NEW))
        return exp.cast(exp.null(), kept)

    def added(self, carried: exp.Expression, attribute: str) -> exp.Expression:
        """``carried`` plus the row's value as SQL's sum does it (nulls skipped), or an error naming
        the view, the attribute and the group when the sum leaves its type (never a wrapped value)."""
        value = _column(self.values[attribute])
        kept = self.sum_type(attribute)
        total: exp.Expression = exp.Anonymous(this="try_add", expressions=[carried.copy(), value.copy()])
        if kept is not None and kept.startswith("decimal"):
            total = exp.TryCast(this=total, to=exp.DataType.build(kept, dialect="spark"))
        group = _group_values(self.query.group_by)
        message = exp.Anonymous(
            this="concat",
            expressions=[
                exp.Literal.string(
                    f"{OVERFLOW_MARK}pattern view {self.statement.name}: sum({attribute}) overflows "
                    f"{kept or 'its type'} for group "
                ),
                exp.Anonymous(this="concat_ws", expressions=[exp.Literal.string(", "), *group]),
            ],
        )
        overflow = exp.Anonymous(this="raise_error", expressions=[message])
        return (
            exp.Case()
            .when(_is_null(carried), value.copy())
            .when(_is_null(value), carried.copy())
            .else_(_coalesce(total, overflow))
        )

    # -- the stream's part, one row per group ------------------------------------------------
    def new_rows(self, references: _References) -> exp.Expression:
        """``S[v]`` reduced to one row per group: the first in the order of the attributes read."""
        group_by = self.query.group_by
        ordering = [c for c in self.columns if c not in group_by] or list(group_by)
        if len(ordering) == 1 and ordering[0] not in group_by:
            return self._first_by_aggregate(references, ordering[0])
        rank = exp.Window(
            this=exp.RowNumber(),
            partition_by=[_column(g) for g in group_by],
            order=exp.Order(expressions=[exp.Ordered(this=_column(c), nulls_first=True) for c in ordering]),
        )
        ranked = exp.select(*(_column(c) for c in self.columns), _alias(rank, self.rank)).from_(
            references.part(self.query.stream, 0)
        )
        return (
            exp.select(*(_column(c) for c in self.columns))
            .from_(ranked.subquery("Ranked"))
            .where(_column(self.rank).eq(_number(1)))
            .subquery(NEW)
        )

    def _first_by_aggregate(self, references: _References, read: str) -> exp.Expression:
        """``new_rows`` when one attribute besides the group is read: the first row in the order
        ``read NULLS FIRST`` holds NULL when the group has one, else the least value, which an
        aggregate finds without sorting each group (a row-number window sorts them)."""
        value = _column(read)
        first = (
            exp.Case()
            .when(
                exp.LT(this=exp.Count(this=value.copy()), expression=exp.Count(this=exp.Star())),
                exp.null(),
            )
            .else_(exp.Min(this=value.copy()))
        )
        group_by = self.query.group_by
        selected = [_column(c) if c in group_by else _alias(first, c) for c in self.columns]
        return (
            exp.select(*selected)
            .from_(references.part(self.query.stream, 0))
            .group_by(*(_column(g) for g in group_by))
            .subquery(NEW)
        )

    # -- Helper ------------------------------------------------------------------------------
    def auxiliary(self, table: str | None) -> list[exp.Expression]:
        return [_alias(_column(a, table), column) for a, column in self.machine.auxiliary]

    def helper_initialize(self, references: _References) -> exp.Expression:
        """A new partial match in state 1 for every group whose row satisfies E[0][1] (the Helper's
        earlier part is empty); with a one-variable pattern it is complete at once."""
        outputs: list[exp.Expression] = [_alias(_column(g, NEW), g) for g in self.query.group_by]
        for k in self.states:
            count = exp.cast(_number(1), "BIGINT") if k == 1 else exp.cast(exp.null(), "BIGINT")
            outputs.append(_alias(count, self.counts[k]))
        for k in self.states:
            for attribute in self.sums:
                total = self.value(attribute) if k == 1 else self.empty_sum(attribute)
                outputs.append(_alias(total, self.state_sums[(k, attribute)]))
        outputs += self.auxiliary(NEW)
        start = self.machine.edge(0, 1)
        return exp.select(*outputs).from_(self.new_rows(references)).where(start.condition())

    def advancing_rows(self, references: _References) -> exp.Expression:
        """``new_rows`` without the groups whose row no edge can take: a group's row advances or
        starts a match only along an edge whose every predicate holds, so it must satisfy, for some
        edge, the predicates that read the row alone (not ``Prev``). Those rows would leave the
        step with an empty state set (no Helper row); filtered first, they are not joined."""
        alone: dict[str, exp.Expression] = {}  # by text: edges often share their predicates
        for edge in self.machine.edges:
            own = [p for p in edge.predicates if all(c.table == NEW for c in p.find_all(exp.Column))]
            if not own:  # this edge may be taken whatever the row holds: nothing to filter by
                return self.new_rows(references)
            condition = exp.and_(*(p.copy() for p in own), copy=False)
            alone.setdefault(condition.sql(dialect="spark"), condition)
        return (
            exp.select(exp.Star())
            .from_(self.new_rows(references))
            .where(exp.or_(*alone.values(), copy=False))
            .subquery(NEW)
        )

    def helper_update(self, references: _References) -> exp.Expression:
        """Every active state of the group's previous Helper row advanced by the part's row: the
        state set of the partial matches that can take it, plus a match starting with it."""
        machine = self.machine
        group_by = self.query.group_by
        # Step: the row, the previous state set's sums, and per state the count of the partial
        # match entering it from the state before (from the begin state for state 1) and of the
        # one staying in it (Kleene states)
        step: list[exp.Expression] = [_alias(_column(g, NEW), g) for g in group_by]
        kept = [a for a, _ in machine.auxiliary if a not in group_by]
        step += [_alias(_column(a, NEW), a) for a in kept]
        step += [_alias(self.value(a), self.values[a]) for a in self.sums]
        step += [
            _alias(_column(self.state_sums[(k, a)], PREVIOUS), self.carried[(k, a)])
            for k in self.states
            for a in self.sums
        ]
        for k in self.states:
            edge = machine.edge(k - 1, k)
            if k == 1:
                entered = exp.Case().when(edge.condition(), exp.cast(_number(1), "BIGINT"))
            else:
                before = _column(self.counts[k - 1], PREVIOUS)
                held = exp.and_(_is_set(before), edge.condition(), copy=False)
                entered = exp.Case().when(held, exp.Add(this=before, expression=_number(1)))
            step.append(_alias(entered, self.entered[k]))
            if k in self.stayed:
                here = _column(self.counts[k], PREVIOUS)
                held = exp.and_(_is_set(here), machine.edge(k, k).condition(), copy=False)
                step.append(
                    _alias(exp.Case().when(held, exp.Add(this=here, expression=_number(1))), self.stayed[k])
                )
        stepped = (
            exp.select(*step)
            .from_(self.advancing_rows(references))
            .join(
                exp.alias_(references.part(self.helper, -1), PREVIOUS, table=True),
                on=_same_groups(group_by, NEW, PREVIOUS),
                join_type="left outer",
            )
        )
        # Chosen: per state, the partial match that began first (the larger count) and its sums
        chosen: list[exp.Expression] = [_column(g) for g in group_by]
        chosen += [_column(a) for a in kept]
        for k in self.states:
            entered = _column(self.entered[k])
            if k not in self.stayed:
                chosen.append(_alias(entered, self.counts[k]))
                from_entering: exp.Expression = _is_set(entered)
            else:
                stayed = _column(self.stayed[k])
                chosen.append(_alias(exp.Greatest(this=entered, expressions=[stayed]), self.counts[k]))
                from_entering = exp.and_(
                    _is_set(entered),
                    exp.or_(_is_null(stayed), entered.copy() >= stayed.copy(), copy=False),
                    copy=False,
                )
            for attribute in self.sums:
                if k == 1:  # a new match: the row's value
                    entering = _column(self.values[attribute])
                else:
                    entering = self.added(_column(self.carried[(k - 1, attribute)]), attribute)
                total = exp.Case().when(from_entering.copy(), entering)
                if k in self.stayed:
                    total = total.when(
                        _is_set(_column(self.stayed[k])),
                        self.added(_column(self.carried[(k, attribute)]), attribute),
                    )
                chosen.append(_alias(total, self.state_sums[(k, attribute)]))
        # after a complete match only the match itself goes on (AFTER MATCH SKIP PAST LAST ROW)
        accepting = machine.accepting
        incomplete = _is_null(_column(self.counts[accepting]))

        def unless_complete(column: str) -> exp.Expression:
            if column in (self.counts[accepting], *(self.state_sums[(accepting, a)] for a in self.sums)):
                return _column(column)
            return _alias(exp.Case().when(incomplete.copy(), _column(column)), column)

        outputs: list[exp.Expression] = [_column(g) for g in group_by]
        outputs += [unless_complete(self.counts[k]) for k in self.states]
        outputs += [unless_complete(self.state_sums[(k, a)]) for k in self.states for a in self.sums]
        outputs += self.auxiliary(None)
        active = exp.or_(*(_is_set(_column(self.counts[k])) for k in self.states), copy=False)
        chosen_query = exp.select(*chosen).from_(stepped.subquery("Step"))
        return exp.select(*outputs).from_(chosen_query.subquery("Chosen")).where(active)

    # -- final view --------------------------------------------------------------------------
    def presentation(self) -> Presentation:
        """The final view as readers see it: the rows whose accepting state is active, with the
        query's columns (a group's count and sums are those of that state)."""
        accepting = self.machine.accepting
        columns = []
        for item in self.query.items:
            if item.is_group:
                source = item.attribute
            elif item.function == "count":
                source = self.counts[accepting]
            else:
                source = self.state_sums[(accepting, item.attribute)]
            columns.append((source, item.alias))
        return Presentation(tuple(columns), self.counts[accepting])


__all__ = ["HELPER_SUFFIX", "explain", "translate"]
