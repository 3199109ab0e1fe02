"""In-process SQL without a query engine's fixed cost: the select-project-filter-join-group queries a
ViewDF step runs, compiled once into pyarrow compute expressions and run as an Acero plan over the
step's Arrow inputs.

A DuckDB query pays about 0.5 ms for each Arrow input it scans and about as much again to start,
which is most of a small maintenance step. :func:`run_arrow` runs the subset of Spark SQL below and
refuses (``Unsupported``) anything else, and also any run in which a value would not be exactly
Spark's: ``execution/local_sql.run_sql`` then runs the query on DuckDB (which may in turn send it to
Spark). A refusal costs a little time, never a different answer.

The subset, with Spark's (ANSI) meaning:

* ``SELECT`` items that are columns, ``*``, or aliased expressions; ``FROM`` a table or an aliased
  subquery; ``[LEFT|RIGHT|FULL] [OUTER] | INNER JOIN ... ON`` a conjunction of ``=`` or
  ``IS NOT DISTINCT FROM`` between expressions of either side; ``WHERE``; ``GROUP BY`` columns
  with ``count(*)``, ``count(x)``, ``min``, ``max`` (not of floating point values: NaN orders
  differently) and ``sum`` of integers (refused when a group's sum could pass BIGINT);
* expressions: columns, integer, string and boolean literals, ``NULL``, ``CAST`` between integer,
  boolean and string types, ``+ - *`` and unary minus of integers (an overflow refuses the run),
  comparisons of integers, strings, booleans, dates and timestamps, ``AND``/``OR``/``NOT``
  (three-valued), ``IS [NOT] NULL``, searched ``CASE``, ``IF``, ``COALESCE``,
  ``GREATEST``/``LEAST`` (NULLs skipped), ``try_add``, ``concat``, ``concat_ws``;
* ``raise_error(m)`` is evaluated lazily: when a row would reach it (through ``CASE``, ``IF`` and
  ``COALESCE`` branches), the run is refused and DuckDB raises the query's own error.

A query is compiled once per input schemas (the tree walked, names resolved, types inferred, every
expression built); each run only binds the inputs to a new plan.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.acero as ac
import pyarrow.compute as pc
import sqlglot
import sqlglot.errors
from sqlglot import exp

#: Queries with more nodes than this run on DuckDB (a guard on compile time and plan size; the
#: largest query a ViewDF step runs, a four-variable pattern's Helper step, has about 400).
NODE_LIMIT = 2000

_BIGINT_MAX = (1 << 63) - 1
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1

#: Spark type names this module casts to, and their Arrow types.
_CAST_TYPES = {
    exp.DataType.Type.BIGINT: pa.int64(),
    exp.DataType.Type.INT: pa.int32(),
    exp.DataType.Type.SMALLINT: pa.int16(),
    exp.DataType.Type.TINYINT: pa.int8(),
    exp.DataType.Type.BOOLEAN: pa.bool_(),
    exp.DataType.Type.VARCHAR: pa.string(),
    exp.DataType.Type.TEXT: pa.string(),
}
_SELECT_PARTS = frozenset({"expressions", "from_", "from", "joins", "where", "group"})
_COMPARISONS = {exp.EQ: "equal", exp.NEQ: "not_equal", exp.GT: "greater", exp.GTE: "greater_equal"}
_COMPARISONS.update({exp.LT: "less", exp.LTE: "less_equal"})
_ARITHMETIC = {exp.Add: "add_checked", exp.Sub: "subtract_checked", exp.Mul: "multiply_checked"}
_AGGREGATES = {exp.Count: "count", exp.Min: "min", exp.Max: "max", exp.Sum: "sum"}
_JOIN_TYPES = {("", "INNER"): "inner", ("", ""): "inner", ("LEFT", ""): "left outer"}
_JOIN_TYPES.update({("LEFT", "OUTER"): "left outer", ("RIGHT", ""): "right outer"})
_JOIN_TYPES.update({("RIGHT", "OUTER"): "right outer", ("FULL", ""): "full outer"})
_JOIN_TYPES.update({("FULL", "OUTER"): "full outer"})
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowKeyError)


class Unsupported(Exception):
    """The query (or this run of it) is outside what this module computes exactly; why."""


def _call(function: str, *arguments: pc.Expression, options=None) -> pc.Expression:
    return pc.Expression._call(function, list(arguments), options)


def _literal_of(value, kind: pa.DataType) -> pc.Expression:
    return pc.scalar(pa.scalar(value, kind))


_TRUE = _literal_of(True, pa.bool_())
_FALSE = _literal_of(False, pa.bool_())


@dataclass(frozen=True)
class _Expr:
    """A compiled expression, its Arrow type, and for each ``raise_error`` it may reach the boolean
    expression (never NULL) of the rows on which it would be evaluated."""

    expr: pc.Expression
    type: pa.DataType
    raises: tuple[pc.Expression, ...] = ()


@dataclass(frozen=True)
class _Column:
    """A column of a relation being compiled: how the query names it, and its field in the plan."""

    table: str | None
    name: str
    field: str
    type: pa.DataType


#: Builds a relation's Acero declaration from the run's inputs.
Builder = Callable[[Mapping[str, pa.Table]], ac.Declaration]


@dataclass
class _Relation:
    columns: list[_Column]
    build: Builder
    #: Aggregate results of a grouped level, by the id of their node in the query tree.
    aggregates: dict[int, _Column] | None = None
    _index: dict[tuple[str, str], list[int]] = field(default_factory=dict, repr=False)

    def position(self, column: exp.Column) -> int:
        if not self._index:
            for number, c in enumerate(self.columns):
                self._index.setdefault(("", c.name.lower()), []).append(number)
                if c.table:
                    self._index.setdefault((c.table.lower(), c.name.lower()), []).append(number)
        found = self._index.get(((column.table or "").lower(), column.name.lower()), ())
        if len(found) != 1:
            raise Unsupported(f"column {column.sql()} is {'ambiguous' if found else 'not found'}")
        return found[0]

    def find(self, column: exp.Column) -> _Column:
        return self.columns[self.position(column)]

    def has(self, column: exp.Column) -> bool:
        found = self._index.get(((column.table or "").lower(), column.name.lower())) if self._index else None
        if found is None:
            try:
                self.position(column)
            except Unsupported:
                return False
            return True
        return len(found) == 1


# -- entry ----------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def _parsed(text: str) -> exp.Expression | str:
    """The query's tree, or why it is not run here (kept: a stream view runs one query each step)."""
    try:
        statements = [s for s in sqlglot.parse(text, read="spark") if s is not None]
    except sqlglot.errors.SqlglotError:
        return "sqlglot could not read the query"
    if len(statements) != 1:
        return "not one query"
    size = sum(1 for node in statements[0].walk() if not isinstance(node, exp.Identifier))
    if size > NODE_LIMIT:
        return f"{size} expression nodes"
    return statements[0]


@functools.lru_cache(maxsize=256)
def _compiled(text: str, schemas: tuple[tuple[str, pa.Schema], ...]) -> _Relation | str:
    tree = _parsed(text)
    if isinstance(tree, str):
        return tree
    try:
        return _Compiler(dict(schemas)).select(tree)
    except Unsupported as refusal:
        return str(refusal)
    except _ARROW_ERRORS as error:
        return f"pyarrow: {str(error).splitlines()[0][:200]}"


def run_arrow(text: str, tables: Mapping[str, pa.Table]) -> pa.Table:
    """The result of Spark SQL query ``text`` over ``tables`` (name -> Arrow table), or Unsupported."""
    inputs = {name.lower(): table for name, table in tables.items()}
    relation = _compiled(text, tuple(sorted((name, table.schema) for name, table in inputs.items())))
    if isinstance(relation, str):
        raise Unsupported(relation)
    try:
        result = relation.build(inputs).to_table(use_threads=False)
    except _ARROW_ERRORS as error:
        raise Unsupported(f"pyarrow: {str(error).splitlines()[0][:200]}") from None
    return result.rename_columns([c.name for c in relation.columns])


def _source(table: pa.Table) -> ac.Declaration:
    return ac.Declaration("table_source", ac.TableSourceNodeOptions(table))


def _checked(build: Builder, checks: list[str], fields: list[str]) -> Builder:
    """``build`` run on its own, its rows refused if a ``checks`` column holds true, and the rest
    of the plan run over its ``fields``: a level whose rows must be looked at before going on."""

    def run(inputs: Mapping[str, pa.Table]) -> ac.Declaration:
        rows = build(inputs).to_table(use_threads=False)
        for check in checks:
            if pc.any(rows.column(check)).as_py():
                raise Unsupported(
                    "a row reaches raise_error (DuckDB raises the query's own error)"
                    if check.startswith("raise")
                    else "a sum that could pass BIGINT"
                )
        return _source(rows.select(fields))

    return run


class _Compiler:
    def __init__(self, schemas: dict[str, pa.Schema]) -> None:
        self.schemas = schemas
        self.numbers = itertools.count()

    def fresh(self, stem: str = "f") -> str:
        return f"{stem}{next(self.numbers)}"

    # -- relations --------------------------------------------------------------------------------
    def select(self, node: exp.Expression) -> _Relation:
        if not isinstance(node, exp.Select):
            raise Unsupported(f"{type(node).__name__} is not a plain SELECT")
        extra = [key for key, value in node.args.items() if value and key not in _SELECT_PARTS]
        if extra:
            raise Unsupported(f"SELECT with {', '.join(sorted(extra))}")
        source = node.args.get("from_") or node.args.get("from")
        if source is None:
            raise Unsupported("SELECT without FROM")
        relation = self.relation(source.this)
        for join in node.args.get("joins") or ():
            relation = self.join(relation, join)
        where = node.args.get("where")
        if where is not None:
            condition = self.expression(where.this, relation)
            if condition.raises:
                raise Unsupported("raise_error in WHERE")
            relation = _Relation(relation.columns, _filtered(relation.build, _condition(condition)))
        group = node.args.get("group")
        aggregates = [a for item in node.expressions for a in item.walk() if type(a) in _AGGREGATES]
        if group is not None or aggregates:
            relation = self.grouped(relation, group, aggregates)
        return self.projected(node.expressions, relation)

    def relation(self, node: exp.Expression) -> _Relation:
        if isinstance(node, exp.Table):
            if node.args.get("db") or node.args.get("catalog") or not isinstance(node.this, exp.Identifier):
                raise Unsupported("a qualified table name")
            key = node.name.lower()
            schema = self.schemas.get(key)
            if schema is None:
                raise Unsupported(f"no input named {node.name}")
            columns = [_Column(node.alias_or_name, f.name, self.fresh(), f.type) for f in schema]
            if len({f.name for f in schema}) != len(schema):
                raise Unsupported(f"input {node.name} has two columns with one name")
            expressions = [pc.field(f.name) for f in schema]
            names = [c.field for c in columns]

            def build(inputs: Mapping[str, pa.Table]) -> ac.Declaration:
                return ac.Declaration.from_sequence(
                    [
                        _source(inputs[key]),
                        ac.Declaration("project", ac.ProjectNodeOptions(expressions, names)),
                    ]
                )

            return _Relation(columns, build)
        if isinstance(node, exp.Subquery) and node.alias:
            inner = self.select(node.this)
            columns = [_Column(node.alias, c.name, c.field, c.type) for c in inner.columns]
            return _Relation(columns, inner.build)
        raise Unsupported(f"FROM {type(node).__name__}")

    def join(self, left: _Relation, join: exp.Join) -> _Relation:
        kind = _JOIN_TYPES.get((join.side.upper(), join.kind.upper()))
        condition = join.args.get("on")
        if kind is None or condition is None or join.args.get("using") or join.args.get("method"):
            raise Unsupported("a join other than INNER/LEFT/RIGHT/FULL ... ON")
        right = self.relation(join.this)
        left_keys: list[tuple[str, pc.Expression]] = []
        right_keys: list[tuple[str, pc.Expression]] = []
        for conjunct in _conjuncts(condition):
            if not isinstance(conjunct, exp.EQ | exp.NullSafeEQ):
                raise Unsupported("a join condition that is not a conjunction of equalities")
            sides = (conjunct.this, conjunct.expression)
            if any(left.has(c) and right.has(c) for side in sides for c in side.find_all(exp.Column)):
                raise Unsupported("a join column both inputs have")
            if _within(sides[0], left) and _within(sides[1], right):
                pair = sides
            elif _within(sides[1], left) and _within(sides[0], right):
                pair = sides[::-1]
            else:
                raise Unsupported("a join equality whose sides are not one per input")
            keys = [self.expression(pair[0], left), self.expression(pair[1], right)]
            if keys[0].raises or keys[1].raises:
                raise Unsupported("raise_error in a join condition")
            keys = _common(keys)
            if isinstance(conjunct, exp.NullSafeEQ):  # NULL matches NULL: (is null, value or zero)
                zero = _zero(keys[0].type)
                for side, key in ((left_keys, keys[0]), (right_keys, keys[1])):
                    side.append((self.fresh("k"), _call("is_null", key.expr)))
                    side.append((self.fresh("k"), _call("coalesce", key.expr, zero)))
            else:
                left_keys.append((self.fresh("k"), keys[0].expr))
                right_keys.append((self.fresh("k"), keys[1].expr))
        left_project = _with_keys(left, left_keys)
        right_project = _with_keys(right, right_keys)
        options = ac.HashJoinNodeOptions(
            kind,
            [name for name, _ in left_keys],
            [name for name, _ in right_keys],
            left_output=[c.field for c in left.columns],
            right_output=[c.field for c in right.columns],
        )

        def build(inputs: Mapping[str, pa.Table]) -> ac.Declaration:
            return ac.Declaration("hashjoin", options, inputs=[left_project(inputs), right_project(inputs)])

        return _Relation(left.columns + right.columns, build)

    def grouped(self, relation: _Relation, group: exp.Group | None, aggregates: list) -> _Relation:
        if group is None or not group.expressions:
            raise Unsupported("aggregates without GROUP BY")
        if any(not isinstance(g, exp.Column) for g in group.expressions):
            raise Unsupported("GROUP BY an expression")
        keys = [relation.find(g) for g in group.expressions]
        inputs: list[tuple[str, pc.Expression]] = [(k.field, pc.field(k.field)) for k in keys]
        requests, found, checks = [], {}, []
        count_all: str | None = None

        def counted_rows() -> str:
            nonlocal count_all
            if count_all is None:
                count_all = self.fresh("n")
                requests.append(([], "hash_count_all", None, count_all))
            return count_all

        for node in aggregates:
            function = _AGGREGATES[type(node)]
            if node.args.get("distinct") or isinstance(node.this, exp.Distinct):
                raise Unsupported("an aggregate over DISTINCT values")
            if function == "count" and isinstance(node.this, exp.Star):
                found[id(node)] = _Column(None, "count", counted_rows(), pa.int64())
                continue
            argument = self.expression(node.this, relation)
            if argument.raises:
                raise Unsupported("raise_error in an aggregate")
            _check_aggregable(function, argument.type)
            name, output = self.fresh("a"), self.fresh("g")
            inputs.append((name, argument.expr))
            if function == "count":
                requests.append((name, "hash_count", pc.CountOptions(mode="only_valid"), output))
                found[id(node)] = _Column(None, "count", output, pa.int64())
                continue
            requests.append((name, f"hash_{function}", None, output))
            kind = pa.int64() if function == "sum" else argument.type
            found[id(node)] = _Column(None, function, output, kind)
            if function == "sum":  # a group's sum is exact when count * max |x| fits BIGINT
                largest = self.fresh("m")
                wide = _call("abs_checked", argument.expr.cast(pa.int64()))
                inputs.append((self.fresh("b"), wide))
                requests.append((inputs[-1][0], "hash_max", None, largest))
                check = self.fresh("check")
                checks.append((check, largest))
        rows = counted_rows() if checks else None
        key_fields = [k.field for k in keys]
        pre = ac.ProjectNodeOptions([e for _, e in inputs], [n for n, _ in inputs])
        aggregate = ac.AggregateNodeOptions(requests, keys=key_fields)
        columns = [_Column(k.table, k.name, k.field, k.type) for k in keys]
        parent = relation.build

        def build(tables: Mapping[str, pa.Table]) -> ac.Declaration:
            return ac.Declaration.from_sequence(
                [parent(tables), ac.Declaration("project", pre), ac.Declaration("aggregate", aggregate)]
            )

        if checks:
            fields = key_fields + [c.field for c in found.values()]
            tests = [
                _call(
                    "greater",
                    _call("multiply_checked", pc.field(largest), pc.field(rows)),
                    _literal_of(_BIGINT_MAX, pa.int64()),
                )
                for _, largest in checks
            ]
            names = [check for check, _ in checks]
            inner = build

            def build(tables: Mapping[str, pa.Table]) -> ac.Declaration:  # noqa: F811
                return ac.Declaration.from_sequence(
                    [
                        inner(tables),
                        ac.Declaration(
                            "project",
                            ac.ProjectNodeOptions(
                                [pc.field(f) for f in dict.fromkeys(fields)] + tests,
                                list(dict.fromkeys(fields)) + names,
                            ),
                        ),
                    ]
                )

            build = _checked(build, names, list(dict.fromkeys(fields)))
        return _Relation(columns, build, found)

    def projected(self, items: list[exp.Expression], relation: _Relation) -> _Relation:
        outputs: list[tuple[str, _Expr]] = []
        for item in items:
            if isinstance(item, exp.Star):
                if relation.aggregates is not None:
                    raise Unsupported("* in a grouped SELECT")
                outputs += [(c.name, _Expr(pc.field(c.field), c.type)) for c in relation.columns]
                continue
            if isinstance(item, exp.Alias):
                name, node = item.alias, item.this
            elif isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
                name, node = item.name, item
            else:
                raise Unsupported(f"a SELECT item without a name: {item.sql()[:60]}")
            outputs.append((name, self.expression(node, relation)))
        lowered = [name.lower() for name, _ in outputs]
        if len(set(lowered)) != len(lowered):
            raise Unsupported("two result columns with one name")
        columns = [_Column(None, name, self.fresh(), value.type) for name, value in outputs]
        expressions = [value.expr for _, value in outputs]
        names = [c.field for c in columns]
        raises = [r for _, value in outputs for r in value.raises]
        checks = [self.fresh("raise") for _ in raises]
        options = ac.ProjectNodeOptions(expressions + raises, names + checks)
        parent = relation.build

        def build(inputs: Mapping[str, pa.Table]) -> ac.Declaration:
            return ac.Declaration.from_sequence([parent(inputs), ac.Declaration("project", options)])

        return _Relation(columns, _checked(build, checks, names) if checks else build)

    # -- expressions ------------------------------------------------------------------------------
    def expression(self, node: exp.Expression, relation: _Relation) -> _Expr:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise Unsupported(f"{type(node).__name__} ({node.sql()[:60]})")
        return handler(self, node, relation)

    def each(self, nodes: list[exp.Expression], relation: _Relation) -> list[_Expr]:
        return [self.expression(n, relation) for n in nodes]


def _filtered(build: Builder, condition: pc.Expression) -> Builder:
    options = ac.FilterNodeOptions(condition)

    def run(inputs: Mapping[str, pa.Table]) -> ac.Declaration:
        return ac.Declaration.from_sequence([build(inputs), ac.Declaration("filter", options)])

    return run


def _with_keys(relation: _Relation, keys: list[tuple[str, pc.Expression]]) -> Builder:
    expressions = [pc.field(c.field) for c in relation.columns] + [e for _, e in keys]
    options = ac.ProjectNodeOptions(expressions, [c.field for c in relation.columns] + [n for n, _ in keys])
    parent = relation.build

    def build(inputs: Mapping[str, pa.Table]) -> ac.Declaration:
        return ac.Declaration.from_sequence([parent(inputs), ac.Declaration("project", options)])

    return build


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    node = node.unnest()
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _within(node: exp.Expression, relation: _Relation) -> bool:
    columns = list(node.find_all(exp.Column))
    return bool(columns) and all(relation.has(c) for c in columns)


def _zero(kind: pa.DataType) -> pc.Expression:
    if pa.types.is_integer(kind):
        return _literal_of(0, kind)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _literal_of("", kind)
    if pa.types.is_boolean(kind):
        return _FALSE
    raise Unsupported(f"IS NOT DISTINCT FROM over values of type {kind}")


def _check_aggregable(function: str, kind: pa.DataType) -> None:
    if function == "sum" and not pa.types.is_integer(kind):
        raise Unsupported(f"sum over {kind}")
    if function in ("min", "max") and not _orderable(kind):
        raise Unsupported(f"{function} over {kind}")


def _orderable(kind: pa.DataType) -> bool:
    return (
        pa.types.is_integer(kind)
        or pa.types.is_string(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_timestamp(kind)
        or pa.types.is_date(kind)
    )


def _condition(value: _Expr) -> pc.Expression:
    """A boolean expression that is never NULL (NULL counts as false, as in WHERE and WHEN)."""
    if pa.types.is_null(value.type):
        return _FALSE
    if not pa.types.is_boolean(value.type):
        raise Unsupported(f"a condition of type {value.type}")
    return _call("coalesce", value.expr, _FALSE)


def _common(values: list[_Expr]) -> list[_Expr]:
    """``values`` cast to one type, as Spark widens them (integers, NULLs)."""
    kinds = {v.type for v in values if not pa.types.is_null(v.type)}
    if not kinds:
        return values
    if len(kinds) == 1:
        (target,) = kinds
    elif all(pa.types.is_signed_integer(k) for k in kinds):
        target = max(kinds, key=lambda k: k.bit_width)
    else:
        raise Unsupported(f"values of types {sorted(map(str, kinds))} together")
    return [v if v.type == target else _Expr(v.expr.cast(target), target, v.raises) for v in values]


def _all(values: list[_Expr]) -> tuple[pc.Expression, ...]:
    return tuple(r for v in values for r in v.raises)


def _only(raises: tuple[pc.Expression, ...], rows: pc.Expression) -> tuple[pc.Expression, ...]:
    return tuple(_call("and_kleene", r, rows) for r in raises)


# -- expression handlers --------------------------------------------------------------------------
def _column(compiler: _Compiler, node: exp.Column, relation: _Relation) -> _Expr:
    if isinstance(node.this, exp.Star):
        raise Unsupported("table.*")
    if node.args.get("db") or node.args.get("catalog"):
        raise Unsupported(f"{node.sql()} (a struct field, or a qualified table)")
    column = relation.find(node)
    return _Expr(pc.field(column.field), column.type)


def _integer(value: int) -> _Expr:
    if _INT_MIN <= value <= _INT_MAX:
        return _Expr(_literal_of(value, pa.int32()), pa.int32())
    if -_BIGINT_MAX - 1 <= value <= _BIGINT_MAX:
        return _Expr(_literal_of(value, pa.int64()), pa.int64())
    raise Unsupported(f"the literal {value} (a decimal in Spark)")


def _literal(compiler: _Compiler, node: exp.Literal, relation: _Relation) -> _Expr:
    if node.is_string:
        return _Expr(_literal_of(node.this, pa.string()), pa.string())
    if not node.this.isdigit():
        raise Unsupported(f"the number literal {node.this} (Spark reads it as a decimal or double)")
    return _integer(int(node.this))


def _null(compiler: _Compiler, node: exp.Null, relation: _Relation) -> _Expr:
    return _Expr(_literal_of(None, pa.null()), pa.null())


def _boolean_literal(compiler: _Compiler, node: exp.Boolean, relation: _Relation) -> _Expr:
    return _Expr(_TRUE if node.this else _FALSE, pa.bool_())


def _paren(compiler: _Compiler, node: exp.Paren, relation: _Relation) -> _Expr:
    return compiler.expression(node.this, relation)


def _cast(compiler: _Compiler, node: exp.Cast, relation: _Relation) -> _Expr:
    if isinstance(node, exp.TryCast) and node.args.get("safe"):
        raise Unsupported("try_cast")
    target = _CAST_TYPES.get(node.to.this)
    if target is None or node.to.expressions:
        raise Unsupported(f"CAST to {node.to.sql()}")
    value = compiler.expression(node.this, relation)
    source = value.type
    if source == target:
        return value
    if pa.types.is_null(source):
        return _Expr(_literal_of(None, target), target, value.raises)
    allowed = pa.types.is_integer(source) and (pa.types.is_integer(target) or pa.types.is_string(target))
    allowed |= pa.types.is_string(source) and pa.types.is_string(target)
    allowed |= pa.types.is_boolean(source) and pa.types.is_string(target)  # true/false, as Spark
    if not allowed:
        raise Unsupported(f"CAST from {source} to {target}")
    return _Expr(value.expr.cast(target, safe=True), target, value.raises)


def _comparable(kind: pa.DataType) -> bool:
    return _orderable(kind) or pa.types.is_null(kind)


def _comparison(compiler: _Compiler, node: exp.Expression, relation: _Relation) -> _Expr:
    values = _common(compiler.each([node.this, node.expression], relation))
    if not all(_comparable(v.type) for v in values):
        raise Unsupported(f"comparing values of types {values[0].type} and {values[1].type}")
    if any(pa.types.is_null(v.type) for v in values):
        return _Expr(_literal_of(None, pa.bool_()), pa.bool_(), _all(values))
    return _Expr(_call(_COMPARISONS[type(node)], values[0].expr, values[1].expr), pa.bool_(), _all(values))


def _integers(values: list[_Expr], what: str) -> pa.DataType | None:
    """The common integer type of ``values`` (None when one is NULL), or Unsupported."""
    if not all(pa.types.is_signed_integer(v.type) or pa.types.is_null(v.type) for v in values):
        raise Unsupported(f"{what} of values other than integers")
    kinds = [v.type for v in values if not pa.types.is_null(v.type)]
    if len(kinds) != len(values):
        return None
    return max(kinds, key=lambda k: k.bit_width)


def _integer_operation(
    compiler: _Compiler, node: exp.Expression, relation: _Relation, function: str
) -> _Expr:
    """``function`` (a checked integer operation) of the node's two operands; NULL if one is."""
    values = _common(compiler.each([node.this, node.expression], relation))
    kind = _integers(values, type(node).__name__)
    if kind is None:
        other = [v.type for v in values if not pa.types.is_null(v.type)]
        kind = other[0] if other else pa.int32()
        return _Expr(_literal_of(None, kind), kind, _all(values))
    return _Expr(_call(function, values[0].expr, values[1].expr), kind, _all(values))


def _arithmetic(compiler: _Compiler, node: exp.Expression, relation: _Relation) -> _Expr:
    return _integer_operation(compiler, node, relation, _ARITHMETIC[type(node)])


def _try_add(compiler: _Compiler, node: exp.SafeAdd, relation: _Relation) -> _Expr:
    # an overflow anywhere (even on a row no branch takes) refuses the run: DuckDB computes it
    return _integer_operation(compiler, node, relation, "add_checked")


def _negative(compiler: _Compiler, node: exp.Neg, relation: _Relation) -> _Expr:
    if isinstance(node.this, exp.Literal):  # -2147483648 is an INT literal in Spark
        if node.this.is_string or not node.this.this.isdigit():
            raise Unsupported("unary minus on a literal other than an integer")
        return _integer(-int(node.this.this))
    value = compiler.expression(node.this, relation)
    if not pa.types.is_signed_integer(value.type):
        raise Unsupported("unary minus on a value other than an integer")
    return _Expr(_call("negate_checked", value.expr), value.type, value.raises)


def _truth(value: _Expr) -> pc.Expression:
    if pa.types.is_null(value.type):
        return _literal_of(None, pa.bool_())
    if not pa.types.is_boolean(value.type):
        raise Unsupported(f"a condition of type {value.type}")
    return value.expr


def _logical(function: str, what: str) -> Callable:
    def compile_(compiler: _Compiler, node: exp.Expression, relation: _Relation) -> _Expr:
        left, right = compiler.each([node.this, node.expression], relation)
        if left.raises or right.raises:
            raise Unsupported(f"raise_error under {what}")
        return _Expr(_call(function, _truth(left), _truth(right)), pa.bool_())

    return compile_


def _not(compiler: _Compiler, node: exp.Not, relation: _Relation) -> _Expr:
    value = compiler.expression(node.this, relation)
    return _Expr(_call("invert", _truth(value)), pa.bool_(), value.raises)


def _is(compiler: _Compiler, node: exp.Is, relation: _Relation) -> _Expr:
    if not isinstance(node.expression, exp.Null):
        raise Unsupported("IS other than IS NULL")
    value = compiler.expression(node.this, relation)
    return _Expr(_call("is_null", value.expr), pa.bool_(), value.raises)


def _chosen(conditions: list[_Expr], branches: list[_Expr], fallback: _Expr) -> _Expr:
    """The searched CASE: the first branch whose condition is true, else ``fallback``."""
    if any(c.raises for c in conditions):
        raise Unsupported("raise_error in a CASE condition")
    taken = [_condition(c) for c in conditions]
    values = _common([*branches, fallback])
    raises: list[pc.Expression] = []
    earlier: pc.Expression | None = None
    for condition, branch in zip(taken, values, strict=False):
        here = condition if earlier is None else _call("and_kleene", condition, _call("invert", earlier))
        raises += _only(branch.raises, here)
        earlier = condition if earlier is None else _call("or_kleene", earlier, condition)
    raises += _only(values[-1].raises, _call("invert", earlier))
    kind = values[0].type
    if pa.types.is_null(kind):
        return _Expr(values[0].expr, kind, tuple(raises))
    cases = _call("make_struct", *taken, options=pc.MakeStructOptions([f"c{i}" for i in range(len(taken))]))
    return _Expr(_call("case_when", cases, *(v.expr for v in values)), kind, tuple(raises))


def _case(compiler: _Compiler, node: exp.Case, relation: _Relation) -> _Expr:
    if node.this is not None:
        raise Unsupported("CASE x WHEN (a simple CASE)")
    ifs = node.args.get("ifs") or ()
    conditions = [compiler.expression(branch.this, relation) for branch in ifs]
    branches = [compiler.expression(branch.args["true"], relation) for branch in ifs]
    default = node.args.get("default")
    fallback = (
        compiler.expression(default, relation)
        if default is not None
        else _Expr(_literal_of(None, pa.null()), pa.null())
    )
    return _chosen(conditions, branches, fallback)


def _if(compiler: _Compiler, node: exp.If, relation: _Relation) -> _Expr:
    otherwise = node.args.get("false")
    fallback = (
        compiler.expression(otherwise, relation)
        if otherwise is not None
        else _Expr(_literal_of(None, pa.null()), pa.null())
    )
    condition = compiler.expression(node.this, relation)
    return _chosen([condition], [compiler.expression(node.args["true"], relation)], fallback)


def _coalesce(compiler: _Compiler, node: exp.Coalesce, relation: _Relation) -> _Expr:
    values = _common(compiler.each([node.this, *node.expressions], relation))
    raises: list[pc.Expression] = list(values[0].raises)
    missing = _call("is_null", values[0].expr)
    for value in values[1:]:
        raises += _only(value.raises, missing)
        missing = _call("and_kleene", missing, _call("is_null", value.expr))
    present = [v for v in values if not pa.types.is_null(v.type)]
    if not present:
        return _Expr(values[0].expr, values[0].type, tuple(raises))
    return _Expr(_call("coalesce", *(v.expr for v in present)), present[0].type, tuple(raises))


def _extreme(function: str) -> Callable:
    def compile_(compiler: _Compiler, node: exp.Expression, relation: _Relation) -> _Expr:
        values = _common(compiler.each([node.this, *node.expressions], relation))
        present = [v for v in values if not pa.types.is_null(v.type)]
        if not present:
            return _Expr(values[0].expr, values[0].type, _all(values))
        if not _orderable(present[0].type):
            raise Unsupported(f"GREATEST/LEAST of {present[0].type} values")
        options = pc.ElementWiseAggregateOptions(skip_nulls=True)
        return _Expr(
            _call(function, *(v.expr for v in present), options=options), present[0].type, _all(values)
        )

    return compile_


def _anonymous(compiler: _Compiler, node: exp.Anonymous, relation: _Relation) -> _Expr:
    if node.name.lower() != "raise_error" or len(node.expressions) != 1:
        raise Unsupported(f"the function {node.name}")
    return _Expr(_literal_of(None, pa.null()), pa.null(), (_TRUE,))


def _strings(compiler: _Compiler, node: exp.Expression, relation: _Relation) -> list[_Expr]:
    values = compiler.each(list(node.expressions), relation)
    for value in values:
        if not (pa.types.is_string(value.type) or pa.types.is_null(value.type)):
            raise Unsupported("concat of values other than strings")
    return values


def _text(value: _Expr) -> pc.Expression:
    return _literal_of(None, pa.string()) if pa.types.is_null(value.type) else value.expr


def _concat(compiler: _Compiler, node: exp.Concat, relation: _Relation) -> _Expr:
    values = _strings(compiler, node, relation)
    options = pc.JoinOptions(null_handling="emit_null")
    joined = _call(
        "binary_join_element_wise", *(_text(v) for v in values), _literal_of("", pa.string()), options=options
    )
    return _Expr(joined, pa.string(), _all(values))


def _concat_ws(compiler: _Compiler, node: exp.ConcatWs, relation: _Relation) -> _Expr:
    values = _strings(compiler, node, relation)
    separator = node.expressions[0]
    if not (isinstance(separator, exp.Literal) and separator.is_string):
        raise Unsupported("concat_ws with a separator that is not a string literal")
    options = pc.JoinOptions(null_handling="skip")
    joined = _call(
        "binary_join_element_wise", *(_text(v) for v in values[1:]), values[0].expr, options=options
    )
    return _Expr(joined, pa.string(), _all(values))


def _aggregate(compiler: _Compiler, node: exp.Expression, relation: _Relation) -> _Expr:
    if relation.aggregates is None or id(node) not in relation.aggregates:
        raise Unsupported("an aggregate outside a grouped SELECT")
    column = relation.aggregates[id(node)]
    return _Expr(pc.field(column.field), column.type)


_HANDLERS: dict[type, Callable[[_Compiler, exp.Expression, _Relation], _Expr]] = {
    exp.Column: _column,
    exp.Literal: _literal,
    exp.Null: _null,
    exp.Boolean: _boolean_literal,
    exp.Paren: _paren,
    exp.Cast: _cast,
    exp.TryCast: _cast,  # sqlglot reads Spark's CAST as TryCast; Spark (ANSI) raises, as here
    exp.Neg: _negative,
    exp.And: _logical("and_kleene", "AND"),
    exp.Or: _logical("or_kleene", "OR"),
    exp.Not: _not,
    exp.Is: _is,
    exp.Case: _case,
    exp.If: _if,
    exp.Coalesce: _coalesce,
    exp.Greatest: _extreme("max_element_wise"),
    exp.Least: _extreme("min_element_wise"),
    exp.SafeAdd: _try_add,
    exp.Anonymous: _anonymous,
    exp.Concat: _concat,
    exp.ConcatWs: _concat_ws,
    **{kind: _comparison for kind in _COMPARISONS},
    **{kind: _arithmetic for kind in _ARITHMETIC},
    **{kind: _aggregate for kind in _AGGREGATES},
}

__all__ = ["NODE_LIMIT", "Unsupported", "run_arrow"]
