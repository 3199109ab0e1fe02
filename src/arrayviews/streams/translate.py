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

Sums of integer columns are exact. In the subtractable form a floating-point column (when the
translation is given the stream's column types) is summed exactly: the Helper keeps its cumulative
sum as the components and non-finite counts of an exact sum (streams/exact_sums.py: ``sum_y`` is the
rounded cumulative sum, ``sum_y_x1`` .. ``sum_y_x3`` the components below it, ``sum_y_pinf``,
``sum_y_ninf``, ``sum_y_nan`` the counts of +inf, -inf and NaN), and the view's sum is the exact
difference rounded once, so a window sum equals ``math.fsum`` of the window's values however large
the values that left it (an infinity that left no longer counts). The distributive form adds per-part
sums and never subtracts. Sums keep the type of the per-part sums, so decimal columns are not
supported by the subtractable form.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from sqlglot import exp

from arrayviews.model.errors import ParseError
from arrayviews.model.names import HELPER_SUFFIX
from arrayviews.model.viewdf import OVERFLOW_MARK, PartIndex, ViewDFDefinition, viewdf_definition
from arrayviews.streams import exact_sums
from arrayviews.streams.fsm import NEW, PREVIOUS, StateMachine, build_state_machine
from arrayviews.streams.queries import AGGREGATE_TYPES, PatternQuery, WindowQuery, aggregate_call

_SUBTRACTABLE = frozenset({"count", "sum", "avg"})

# A query under construction: built for one part variable ("i" or "j") with the placeholder tables
# handed out by a _References.
QueryBuilder = Callable[["_References"], exp.Expression]


# ---------------------------------------------------------------------------------------------
# Entry points


def translate(
    statement, stream_partition_length: int, *, types: Mapping[str, str] | None = None
) -> list[ViewDFDefinition]:
    """The ViewDFs maintaining ``statement``'s view (its ``name`` and its ``query``) over a stream of
    ``stream_partition_length`` seconds per part: helper views first, the final view (named as the
    statement's view) last.

    ``types`` maps the stream's columns to their Spark SQL type names (``simpleString``, e.g.
    ``{"y": "double"}``): pattern sums are then kept in a type wide enough not to overflow (see
    :func:`sum_type`), and a subtractable window sums floating-point columns exactly; without it
    every sum is Spark's SUM."""
    if stream_partition_length <= 0:
        raise ValueError(f"the stream's partition length must be positive, got {stream_partition_length}")
    query = getattr(statement, "query", None)
    if isinstance(query, PatternQuery):
        return _PatternTranslation(statement, stream_partition_length, types).definitions()
    if isinstance(query, WindowQuery):
        return _WindowTranslation(statement, stream_partition_length, types).definitions()
    raise TypeError(f"only pattern and sliding-window views are translated, not {type(statement).__name__}")


def explain(statement, stream_partition_length: int, *, types: Mapping[str, str] | None = None) -> str:
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
        translation = _PatternTranslation(statement, stream_partition_length, types)
        lines.append(
            f"-- {statement.name}: pattern query over {statement.query.stream}, "
            f"partition length {stream_partition_length} s"
        )
        lines += [f"-- {line}" for line in translation.machine.describe().splitlines()]
    else:
        translation = _WindowTranslation(statement, stream_partition_length, types)
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
        # literals kept verbatim (streams.literals) that span lines would be indented by the pretty
        # printer, which would change their value: they are printed in place after it
        held: dict[str, str] = {}

        def hold(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Literal) and not node.is_string and any(c in node.this for c in "\r\n"):
                key = f"__literal_{len(held)}__"
                held[key] = node.this
                return exp.Literal(this=key, is_string=False)
            return node

        text = query.transform(hold).sql(dialect="spark", pretty=True)
        for placeholder, reference in [*self.texts.items(), *held.items()]:
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


def _is_null(expression: exp.Expression) -> exp.Expression:
    return exp.Is(this=expression.copy(), expression=exp.null())


def _is_set(expression: exp.Expression) -> exp.Expression:
    """``expression IS NOT NULL``."""
    return exp.Not(this=_is_null(expression))


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
        self.helper = statement.name + HELPER_SUFFIX
        # the stream attributes read from each part: group columns, summed ones, predicate ones
        self.columns = tuple(dict.fromkeys([*query.group_by, *self.sums, *self.machine.attributes]))

    def definitions(self) -> list[ViewDFDefinition]:
        length = self.partition_length
        helper = _definition(self.helper, self.helper_initialize, self.helper_update, length, helper=True)
        final = _definition(self.statement.name, self.final_query, self.final_query, length, helper=False)
        return [helper, final]

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
        group = [
            exp.Anonymous(
                this="concat",
                expressions=[
                    exp.Literal.string(f"{g}="),
                    _coalesce(exp.cast(_column(g), "STRING"), exp.Literal.string("NULL")),
                ],
            )
            for g in self.query.group_by
        ]
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
    def final_query(self, references: _References) -> exp.Expression:
        accepting = self.machine.accepting
        outputs: list[exp.Expression] = []
        for item in self.query.items:
            if item.is_group:
                source = item.attribute
            elif item.function == "count":
                source = self.counts[accepting]
            else:
                source = self.state_sums[(accepting, item.attribute)]
            outputs.append(_column(source) if source == item.alias else _alias(_column(source), item.alias))
        accepted = _is_set(_column(self.counts[accepting]))
        return exp.select(*outputs).from_(references.part(self.helper, 0)).where(accepted)


# ---------------------------------------------------------------------------------------------
# Sliding-window aggregates


class _WindowTranslation:
    """Sections 5.2.1 (distributive) and 5.2.2 (subtractable, with group membership tracked)."""

    def __init__(
        self,
        statement,
        partition_length: int,
        column_types: Mapping[str, str] | None = None,
    ) -> None:
        self.statement = statement
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


__all__ = ["HELPER_SUFFIX", "explain", "translate"]
