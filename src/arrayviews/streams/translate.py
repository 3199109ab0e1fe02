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
group columns, the state, the match's count and sums and the auxiliary attributes (see
:mod:`arrayviews.streams.fsm` for the semantics), and a final view selecting the groups in the
accepting state. A stream part holding several rows of one group is reduced to the first row in
the order of the attributes the query reads (a deterministic choice; the paper assumes one row).

Sliding windows of ``Wp`` stream parts (section 5.2):

* with min or max (distributive): Helper[j] holds per-part partial aggregates (count, sum, count of
  non-null, max, min) of S[j]; the view combines Helper[j-Wp+1 .. j];
* with only count, sum and avg (subtractable): Helper[j] holds per group cumulative sums and
  counts since the group's current epoch began, ``age`` (parts since then, this one included) and
  ``idle`` (parts since the group's last row). Helper[j] = Helper[j-1] full-outer-joined with S[j]'s
  per-group sums; a group is dropped when ``idle`` reaches Wp (no row in the window), and a
  dropped group that comes back starts a new epoch (age 1). The view subtracts Helper[j-Wp] when it
  holds the same epoch, i.e. when its age is exactly ``age - Wp`` (a group whose epoch began at or
  before j-Wp stayed in every Helper part since, so Helper[j-Wp] holds it with that age; an epoch
  that began later has age <= Wp, and any older row at j-Wp would need age <= 0). Every group of
  Helper[j] had a row in the window, and every group with a row in the window is in Helper[j], so
  membership never depends on a sum's sign, and the Helper holds only the groups seen in the last Wp
  parts. ``sum`` is null when the window has no non-null value (as in SQL).

Sums of integer columns are exact; sums of floating-point columns may differ from a recomputation in
the last bits (cumulative sums are subtracted). Sums keep the type of the per-part sums, so decimal
columns are not supported by the subtractable form.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sqlglot import exp

from arrayviews.model.errors import ParseError
from arrayviews.model.viewdf import PartIndex, ViewDFDefinition, viewdf_definition
from arrayviews.streams.fsm import NEW, PREVIOUS, StateMachine, build_state_machine
from arrayviews.streams.queries import AGGREGATE_TYPES, PatternQuery, WindowQuery, aggregate_call

HELPER_SUFFIX = "__helper"
_SUBTRACTABLE = frozenset({"count", "sum", "avg"})

# A query under construction: built for one part variable ("i" or "j") with the placeholder tables
# handed out by a _References.
QueryBuilder = Callable[["_References"], exp.Expression]


# ---------------------------------------------------------------------------------------------
# Entry points


def translate(statement, stream_partition_length: int) -> list[ViewDFDefinition]:
    """The ViewDFs maintaining ``statement``'s view (its ``name`` and its ``query``) over a stream of
    ``stream_partition_length`` seconds per part: helper views first, the final view (named as the
    statement's view) last."""
    if stream_partition_length <= 0:
        raise ValueError(f"the stream's partition length must be positive, got {stream_partition_length}")
    query = getattr(statement, "query", None)
    if isinstance(query, PatternQuery):
        return _PatternTranslation(statement, stream_partition_length).definitions()
    if isinstance(query, WindowQuery):
        return _WindowTranslation(statement, stream_partition_length).definitions()
    raise TypeError(f"only pattern and sliding-window views are translated, not {type(statement).__name__}")


def explain(statement, stream_partition_length: int) -> str:
    """What EXPLAIN shows: the state machine of a pattern query and the generated ViewDF statements
    (each of which parses back to its definition), or a hand-written ViewDF's part references
    (``statement`` has a ``definition``, or a ``name`` and a ``query``; an EXPLAIN wrapping one is
    looked through)."""
    statement = getattr(statement, "statement", statement)
    definition = getattr(statement, "definition", None)
    if isinstance(definition, ViewDFDefinition):
        return _explain_viewdf(definition)
    lines = []
    if isinstance(statement.query, PatternQuery):
        translation = _PatternTranslation(statement, stream_partition_length)
        lines.append(
            f"-- {statement.name}: pattern query over {statement.query.stream}, "
            f"partition length {stream_partition_length} s"
        )
        lines += [f"-- {line}" for line in translation.machine.describe().splitlines()]
    else:
        translation = _WindowTranslation(statement, stream_partition_length)
        query = statement.query
        kind = (
            "subtractable aggregates: cumulative sums per epoch, minus the part one window earlier"
            if translation.subtractable
            else "distributive aggregates: per-part partial aggregates combined over the window"
        )
        lines.append(
            f"-- {statement.name}: sliding window of {_duration(query.window_seconds)} "
            f"= {translation.parts} parts of {stream_partition_length} s over {query.stream}"
        )
        lines.append(f"-- {kind}")
    for definition in translation.definitions():
        role = "helper view" if definition.helper else "final view"
        lines += ["", f"-- {role} {definition.name}", definition.text + ";"]
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


def _duration(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} hours"
    if seconds % 60 == 0:
        return f"{seconds // 60} minutes"
    return f"{seconds} seconds"


# ---------------------------------------------------------------------------------------------
# Shared pieces


class _Names:
    """Column names that collide neither with the user's columns nor with each other."""

    def __init__(self, taken: Iterable[str]) -> None:
        self.taken = {name.lower() for name in taken}

    def fresh(self, wanted: str) -> str:
        name, k = wanted, 1
        while name.lower() in self.taken:
            name, k = f"{wanted}_{k}", k + 1
        self.taken.add(name.lower())
        return name


class _References:
    """Hands out placeholder tables for part references while a query is built for ``variable``."""

    def __init__(self, variable: str) -> None:
        self.variable = variable
        self.texts: dict[str, str] = {}

    def part(self, relation: str, low: int, high: int | None = None) -> exp.Table:
        """``relation[variable+low .. variable+high]`` (one part when ``high`` is None)."""
        placeholder = f"__part_{len(self.texts)}__"
        low_text = PartIndex(1, low).text(self.variable)
        if high is None or high == low:
            self.texts[placeholder] = f"{relation}[{low_text}]"
        else:
            self.texts[placeholder] = f"{relation}[{low_text} .. {PartIndex(1, high).text(self.variable)}]"
        return exp.to_table(placeholder)

    def render(self, query: exp.Expression) -> str:
        text = query.sql(dialect="spark", pretty=True)
        for placeholder, reference in self.texts.items():
            if text.count(placeholder) != 1:  # pragma: no cover - every placeholder is used once
                raise AssertionError(f"placeholder {placeholder} appears {text.count(placeholder)} times")
            text = text.replace(placeholder, reference)
        return text


def _column(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=exp.to_identifier(name), table=exp.to_identifier(table) if table else None)


def _number(value: int) -> exp.Literal:
    return exp.Literal.number(value)


def _alias(expression: exp.Expression, name: str) -> exp.Alias:
    return exp.Alias(this=expression, alias=exp.to_identifier(name))


def _coalesce(*expressions: exp.Expression) -> exp.Coalesce:
    first, *rest = expressions
    return exp.Coalesce(this=first, expressions=list(rest))


def _same_groups(group_by: tuple[str, ...], left: str, right: str) -> exp.Expression:
    """Null-safe equality of the group columns of ``left`` and ``right``."""
    return exp.and_(
        *(exp.NullSafeEQ(this=_column(g, left), expression=_column(g, right)) for g in group_by), copy=False
    )


def _statement_text(name: str, initialize: str, update: str, partition_length: int) -> str:
    """The ViewDF statement around two generated query texts (kept as they are, so that each body is
    exactly the generated query)."""
    return (
        f"CREATE VIEW {name} AS\nINITIALIZE {name}[i] AS\n{initialize}\n"
        f"UPDATE {name}[j] AS\n{update}\nPARTITION LENGTH {partition_length}"
    )


def _definition(
    name: str, initialize: QueryBuilder, update: QueryBuilder, partition_length: int, helper: bool
) -> ViewDFDefinition:
    texts = []
    for variable, build in (("i", initialize), ("j", update)):
        references = _References(variable)
        texts.append(references.render(build(references)))
    text = _statement_text(name, texts[0], texts[1], partition_length)
    return viewdf_definition(
        name, ("i", texts[0]), ("j", texts[1]), partition_length, backfill=True, helper=helper, text=text
    )


# ---------------------------------------------------------------------------------------------
# Pattern queries


class _PatternTranslation:
    """Algorithms 2 and 3 of the paper, with the semantics of :mod:`arrayviews.streams.fsm`."""

    def __init__(self, statement, partition_length: int) -> None:
        self.statement = statement
        self.query: PatternQuery = statement.query
        self.partition_length = partition_length
        query = self.query
        self.sums = query.summed()
        read = [c.name for conjunct in query.conjuncts for c in conjunct.expression.find_all(exp.Column)]
        names = _Names([*query.group_by, *self.sums, *read])
        self.machine: StateMachine = build_state_machine(query, lambda a: names.fresh(f"prev_{a}"))
        self.state = names.fresh("state")
        self.count = names.fresh("ct") if any(i.function == "count" for i in query.items) else None
        self.sum_columns = {attribute: names.fresh(f"sum_{attribute}") for attribute in self.sums}
        self.continued = names.fresh("continued")
        self.started = names.fresh("started")
        self.rank = names.fresh("rank")
        self.carried_count = names.fresh("carried_ct")
        self.carried_sums = {attribute: names.fresh(f"carried_sum_{attribute}") for attribute in self.sums}
        self.helper = statement.name + HELPER_SUFFIX
        # the stream attributes read from each part: group columns, summed ones, predicate ones
        self.columns = tuple(dict.fromkeys([*query.group_by, *self.sums, *self.machine.attributes]))

    def definitions(self) -> list[ViewDFDefinition]:
        length = self.partition_length
        helper = _definition(self.helper, self.helper_initialize, self.helper_update, length, helper=True)
        final = _definition(self.statement.name, self.final_query, self.final_query, length, helper=False)
        return [helper, final]

    # -- the stream's part, one row per group ------------------------------------------------
    def new_rows(self, references: _References) -> exp.Expression:
        """``S[v]`` reduced to one row per group: the first in the order of the attributes read."""
        group_by = self.query.group_by
        ordering = [c for c in self.columns if c not in group_by] or list(group_by)
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

    # -- Helper ------------------------------------------------------------------------------
    def helper_initialize(self, references: _References) -> exp.Expression:
        """A new match for every group whose tuple satisfies E[0][1] (the Helper's earlier part is empty)."""
        outputs: list[exp.Expression] = [_alias(_column(g, NEW), g) for g in self.query.group_by]
        outputs.append(_alias(_number(1), self.state))
        if self.count:
            outputs.append(_alias(exp.cast(_number(1), "BIGINT"), self.count))
        outputs += [_alias(_column(a, NEW), self.sum_columns[a]) for a in self.sums]
        outputs += [_alias(_column(a, NEW), column) for a, column in self.machine.auxiliary]
        start = self.machine.edge(0, 1)
        return exp.select(*outputs).from_(self.new_rows(references)).where(start.condition())

    def helper_update(self, references: _References) -> exp.Expression:
        machine = self.machine
        group_by = self.query.group_by
        previous_state = _column(self.state, PREVIOUS)
        continued = exp.Case()
        for state in range(1, machine.accepting + 1):
            for target in (state, state + 1):
                edge = machine.edge(state, target)
                if edge is not None:
                    condition = exp.and_(previous_state.eq(_number(state)), edge.condition(), copy=False)
                    continued = continued.when(condition, _number(target), copy=False)
        continued = continued.else_(_number(0), copy=False) if continued.args.get("ifs") else _number(0)
        started = exp.Case().when(machine.edge(0, 1).condition(), _number(1)).else_(_number(0))
        values = [
            a for a in dict.fromkeys([*self.sums, *(a for a, _ in machine.auxiliary)]) if a not in group_by
        ]
        step_columns: list[exp.Expression] = [_alias(_column(g, NEW), g) for g in group_by]
        step_columns += [_alias(_column(a, NEW), a) for a in values]
        if self.count:
            step_columns.append(_alias(_column(self.count, PREVIOUS), self.carried_count))
        step_columns += [
            _alias(_column(self.sum_columns[a], PREVIOUS), self.carried_sums[a]) for a in self.sums
        ]
        step_columns += [_alias(continued, self.continued), _alias(started, self.started)]
        step = (
            exp.select(*step_columns)
            .from_(self.new_rows(references))
            .join(
                exp.alias_(references.part(self.helper, -1), PREVIOUS, table=True),
                on=_same_groups(group_by, NEW, PREVIOUS),
                join_type="left outer",
            )
        )
        goes_on = _column(self.continued) > _number(0)
        outputs: list[exp.Expression] = [_column(g) for g in group_by]
        outputs.append(
            _alias(
                exp.Case().when(goes_on.copy(), _column(self.continued)).else_(_column(self.started)),
                self.state,
            )
        )
        if self.count:
            counted = exp.Add(this=_column(self.carried_count), expression=_number(1))
            restarted = exp.cast(_number(1), "BIGINT")
            outputs.append(_alias(exp.Case().when(goes_on.copy(), counted).else_(restarted), self.count))
        for attribute in self.sums:
            carried, value = _column(self.carried_sums[attribute]), _column(attribute)
            added = _coalesce(exp.Add(this=carried, expression=value), carried.copy(), value.copy())
            summed = exp.Case().when(goes_on.copy(), added).else_(value.copy())
            outputs.append(_alias(summed, self.sum_columns[attribute]))
        outputs += [_alias(_column(a), column) for a, column in machine.auxiliary]
        kept = exp.or_(goes_on.copy(), _column(self.started) > _number(0), copy=False)
        return exp.select(*outputs).from_(step.subquery("Step")).where(kept)

    # -- final view --------------------------------------------------------------------------
    def final_query(self, references: _References) -> exp.Expression:
        outputs: list[exp.Expression] = []
        for item in self.query.items:
            if item.is_group:
                source = item.attribute
            elif item.function == "count":
                source = self.count
            else:
                source = self.sum_columns[item.attribute]
            outputs.append(_column(source) if source == item.alias else _alias(_column(source), item.alias))
        accepted = _column(self.state).eq(_number(self.machine.accepting))
        return exp.select(*outputs).from_(references.part(self.helper, 0)).where(accepted)


# ---------------------------------------------------------------------------------------------
# Sliding-window aggregates


class _WindowTranslation:
    """Sections 5.2.1 (distributive) and 5.2.2 (subtractable, with group membership tracked)."""

    def __init__(self, statement, partition_length: int) -> None:
        self.statement = statement
        self.query: WindowQuery = statement.query
        self.partition_length = partition_length
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

    def definitions(self) -> list[ViewDFDefinition]:
        length = self.partition_length
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

    # -- cumulative sums per epoch (subtractable) --------------------------------------------
    def batch_columns(self) -> list[exp.Expression]:
        """S[v]'s per-group row count, sums (0 without non-null values) and non-null counts."""
        columns = [_alias(exp.Count(this=exp.Star(), big_int=True), self.count)]
        columns += [_alias(_coalesce(exp.Sum(this=_column(a)), _number(0)), c) for a, c in self.sums.items()]
        columns += [_alias(exp.Count(this=_column(a), big_int=True), c) for a, c in self.counts.items()]
        return columns

    def cumulated(self) -> list[str]:
        """The cumulative columns of the Helper."""
        return ([self.count] if self.keeps_count else []) + [*self.sums.values(), *self.counts.values()]

    def cumulative_initialize(self, references: _References) -> exp.Expression:
        outputs = [*self.groups(), _alias(_number(1), self.age), _alias(_number(0), self.idle)]
        batch = {alias.alias: alias for alias in self.batch_columns()}
        outputs += [batch[column] for column in self.cumulated()]
        return exp.select(*outputs).from_(references.part(self.query.stream, 0)).group_by(*self.groups())

    def cumulative_update(self, references: _References) -> exp.Expression:
        batch = (
            exp.select(*self.groups(), *self.batch_columns())
            .from_(references.part(self.query.stream, 0))
            .group_by(*self.groups())
            .subquery("Batch")
        )
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
        for column in self.cumulated():
            total = exp.Add(
                this=_coalesce(_column(column, PREVIOUS), _number(0)),
                expression=_coalesce(_column(column, "Batch"), _number(0)),
            )
            step_columns.append(_alias(total, column))
        step = (
            exp.select(*step_columns)
            .from_(batch)
            .join(
                exp.alias_(references.part(self.helper, -1), PREVIOUS, table=True),
                on=_same_groups(self.query.group_by, "Batch", PREVIOUS),
                join_type="full outer",
            )
        )
        outputs = [*self.groups(), _column(self.age), _column(self.idle), *map(_column, self.cumulated())]
        in_window = _column(self.idle) < _number(self.parts)
        return exp.select(*outputs).from_(step.subquery("Step")).where(in_window)

    def subtracted(self, references: _References) -> exp.Expression:
        columns = [_alias(_column(g, "Cur"), g) for g in self.query.group_by]
        for column in self.cumulated():
            difference = exp.Sub(
                this=_column(column, "Cur"), expression=_coalesce(_column(column, "Old"), _number(0))
            )
            columns.append(_alias(difference, column))
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


__all__ = ["HELPER_SUFFIX", "explain", "translate"]
