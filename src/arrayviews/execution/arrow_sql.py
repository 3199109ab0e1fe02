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
  ``IS NOT DISTINCT FROM`` between expressions of either side; ``WHERE``; ``UNION ALL`` (columns
  widened as Spark does for integers and NULLs); ``GROUP BY`` columns
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

from arrayviews.execution.arrow_expressions import (
    _AGGREGATES,
    _BIGINT_MAX,
    _FALSE,
    _HANDLERS,
    Unsupported,
    _call,
    _common,
    _condition,
    _Expr,
    _literal_of,
    _orderable,
)

#: Queries with more nodes than this run on DuckDB (a guard on compile time and plan size; the
#: largest query a ViewDF step runs, a four-variable pattern's Helper step, has about 400).
NODE_LIMIT = 2000

_SELECT_PARTS = frozenset({"expressions", "from_", "from", "joins", "where", "group"})
_JOIN_TYPES = {("", "INNER"): "inner", ("", ""): "inner", ("LEFT", ""): "left outer"}
_JOIN_TYPES.update({("LEFT", "OUTER"): "left outer", ("RIGHT", ""): "right outer"})
_JOIN_TYPES.update({("RIGHT", "OUTER"): "right outer", ("FULL", ""): "full outer"})
_JOIN_TYPES.update({("FULL", "OUTER"): "full outer"})
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowKeyError)


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
    #: The inputs its rows come from, once per reference (a self-join names its input twice): a
    #: relation has at most the product of (rows + 1) over them (joins multiply, unions add).
    references: tuple[str, ...] = ()
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
        try:
            self.position(column)
        except Unsupported:
            return False
        return True


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
    inputs = {name.lower(): _fewer_chunks(table) for name, table in tables.items()}
    relation = _compiled(text, tuple(sorted((name, table.schema) for name, table in inputs.items())))
    if isinstance(relation, str):
        raise Unsupported(relation)
    try:
        result = relation.build(inputs).to_table(use_threads=False)
    except _ARROW_ERRORS as error:
        raise Unsupported(f"pyarrow: {str(error).splitlines()[0][:200]}") from None
    return result.rename_columns([c.name for c in relation.columns])


#: Inputs made of chunks smaller than this on average (many parts of a view read together, each
#: a chunk) are made one chunk first: Acero pays per batch in every node, and a copy of the rows
#: costs less (99 chunks of 1000 rows: 14.7 ms as they were, 8.7 ms with the copy included).
SMALL_CHUNK_ROWS = 8192


def _fewer_chunks(table: pa.Table) -> pa.Table:
    chunks = table.column(0).num_chunks if table.num_columns else 0
    if chunks > 1 and table.num_rows < SMALL_CHUNK_ROWS * chunks:
        return table.combine_chunks()
    return table


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
        if isinstance(node, exp.Union):
            return self.union_all(node)
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
            relation = _Relation(
                relation.columns,
                _filtered(relation.build, _condition(condition)),
                references=relation.references,
            )
        group = node.args.get("group")
        aggregates = [a for item in node.expressions for a in item.walk() if type(a) in _AGGREGATES]
        if group is not None or aggregates:
            relation = self.grouped(relation, group, aggregates)
        return self.projected(node.expressions, relation)

    def union_all(self, node: exp.Union) -> _Relation:
        """``a UNION ALL b``: the rows of both, each column of the type Spark widens the two to
        (integers, NULLs), named as in ``a``."""
        if type(node) is not exp.Union or node.args.get("distinct") or not node.args.get("expression"):
            raise Unsupported(f"{type(node).__name__} other than UNION ALL")
        extra = [k for k, v in node.args.items() if v and k not in ("this", "expression", "distinct")]
        if extra:
            raise Unsupported(f"UNION ALL with {', '.join(sorted(extra))}")
        sides = [self.select(node.this), self.select(node.expression)]
        if len(sides[0].columns) != len(sides[1].columns):
            raise Unsupported("UNION ALL of inputs with different numbers of columns")
        pairs = [
            _common([_Expr(pc.field(a.field), a.type), _Expr(pc.field(b.field), b.type)])
            for a, b in zip(sides[0].columns, sides[1].columns, strict=True)
        ]
        columns = [
            _Column(None, c.name, self.fresh(), pair[0].type)
            for c, pair in zip(sides[0].columns, pairs, strict=True)
        ]
        names = [c.field for c in columns]
        projections = [
            ac.ProjectNodeOptions([pair[number].expr for pair in pairs], names) for number in range(2)
        ]
        builders = [side.build for side in sides]

        def build(inputs: Mapping[str, pa.Table]) -> ac.Declaration:
            branches = [
                ac.Declaration.from_sequence([parent(inputs), ac.Declaration("project", options)])
                for parent, options in zip(builders, projections, strict=True)
            ]
            return ac.Declaration("union", None, inputs=branches)

        return _Relation(columns, build, references=sides[0].references + sides[1].references)

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

            return _Relation(columns, build, references=(key,))
        if isinstance(node, exp.Subquery) and node.alias:
            inner = self.select(node.this)
            columns = [_Column(node.alias, c.name, c.field, c.type) for c in inner.columns]
            return _Relation(columns, inner.build, references=inner.references)
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

        return _Relation(left.columns + right.columns, build, references=left.references + right.references)

    def grouped(self, relation: _Relation, group: exp.Group | None, aggregates: list) -> _Relation:
        if group is None or not group.expressions:
            raise Unsupported("aggregates without GROUP BY")
        if any(not isinstance(g, exp.Column) for g in group.expressions):
            raise Unsupported("GROUP BY an expression")
        keys = [relation.find(g) for g in group.expressions]
        # Spark groups a float key normalized: -0.0 is the group of 0.0, shown as 0.0 (+0.0 makes it so)
        inputs: list[tuple[str, pc.Expression]] = [
            (
                k.field,
                pc.field(k.field) + pa.scalar(0, k.type)
                if pa.types.is_floating(k.type)
                else pc.field(k.field),
            )
            for k in keys
        ]
        requests, found, checks = [], {}, []
        # the overflow checks' own inputs and aggregates, and the largest |x| each summed type allows
        check_inputs: list[tuple[str, pc.Expression]] = []
        check_requests: list = []
        magnitudes: list[int | None] = []
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
                check_inputs.append((self.fresh("b"), wide))
                check_requests.append((check_inputs[-1][0], "hash_max", None, largest))
                check = self.fresh("check")
                checks.append((check, largest))
                magnitudes.append(_largest_magnitude(argument.type))
        if checks and count_all is None:
            count_all = self.fresh("n")
            check_requests.append(([], "hash_count_all", None, count_all))
        rows = count_all
        key_fields = [k.field for k in keys]
        columns = [_Column(k.table, k.name, k.field, k.type) for k in keys]
        parent = relation.build

        def aggregated(with_checks: bool) -> Builder:
            used = inputs + check_inputs if with_checks else inputs
            pre = ac.ProjectNodeOptions([e for _, e in used], [n for n, _ in used])
            aggregate = ac.AggregateNodeOptions(
                requests + check_requests if with_checks else requests, keys=key_fields
            )

            def build(tables: Mapping[str, pa.Table]) -> ac.Declaration:
                return ac.Declaration.from_sequence(
                    [parent(tables), ac.Declaration("project", pre), ac.Declaration("aggregate", aggregate)]
                )

            return build

        build = aggregated(with_checks=bool(checks))
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

            checked = _checked(build, names, list(dict.fromkeys(fields)))
            build = _unless_bounded(checked, aggregated(with_checks=False), relation.references, magnitudes)
        return _Relation(columns, build, found, references=relation.references)

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

        return _Relation(
            columns, _checked(build, checks, names) if checks else build, references=relation.references
        )

    # -- expressions ------------------------------------------------------------------------------
    def expression(self, node: exp.Expression, relation: _Relation) -> _Expr:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise Unsupported(f"{type(node).__name__} ({node.sql()[:60]})")
        return handler(self, node, relation)

    def each(self, nodes: list[exp.Expression], relation: _Relation) -> list[_Expr]:
        return [self.expression(n, relation) for n in nodes]


def _largest_magnitude(kind: pa.DataType) -> int | None:
    """The largest |x| of an integer type narrower than 64 bits; None for 64-bit types."""
    if not pa.types.is_integer(kind) or kind.bit_width >= 64:
        return None
    return (1 << kind.bit_width) - 1 if pa.types.is_unsigned_integer(kind) else 1 << (kind.bit_width - 1)


def _unless_bounded(
    checked: Builder, plain: Builder, references: tuple[str, ...], magnitudes: list[int | None]
) -> Builder:
    """``plain`` (no overflow checks) for a run whose inputs have too few rows for any group's sum
    to leave BIGINT: at most prod(rows + 1) rows reach the grouping, each summand at most its type's
    largest |x| (a 32-bit column would need 2^32 rows); ``checked`` otherwise."""
    if None in magnitudes:
        return checked
    largest = max(magnitudes)

    def build(inputs: Mapping[str, pa.Table]) -> ac.Declaration:
        rows = 1
        for reference in references:
            rows *= inputs[reference].num_rows + 1
            if rows * largest > _BIGINT_MAX:
                return checked(inputs)
        return plain(inputs)

    return build


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


__all__ = ["NODE_LIMIT", "Unsupported", "run_arrow"]
