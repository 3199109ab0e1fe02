"""In-process SQL without a query engine's fixed cost: the select-project-filter-join-group queries a
ViewDF step runs, evaluated over its Arrow inputs with pyarrow compute.

A DuckDB query pays about 0.5 ms for each Arrow input it scans and about as much again to start,
which is most of a small maintenance step. :func:`run_arrow` runs the subset of Spark SQL below and
refuses (``Unsupported``) anything else, and also any run in which a value would not be exactly
Spark's: ``execution/local_sql.run_sql`` then runs the query on DuckDB (which may in turn send it to
Spark). A refusal costs a little time, never a different answer.

The subset, with Spark's (ANSI) meaning:

* ``SELECT`` items that are columns, ``*``, or aliased expressions; ``FROM`` a table or an aliased
  subquery; ``[LEFT|RIGHT|FULL] [OUTER] | INNER JOIN ... ON`` a conjunction of ``=`` or
  ``IS NOT DISTINCT FROM`` between expressions of either side (a NULL key under ``IS NOT DISTINCT
  FROM`` is refused); ``WHERE``; ``GROUP BY`` columns with ``count(*)``, ``count(x)``, ``min``,
  ``max`` (not of floating point values: NaN orders differently) and ``sum`` of integers (refused
  when the sum could pass BIGINT);
* expressions: columns, integer, string and boolean literals, ``NULL``, ``CAST`` between integer,
  boolean and string types, ``+ - *`` and unary minus (an overflow refuses the run), comparisons,
  ``AND``/``OR``/``NOT`` (three-valued), ``IS [NOT] NULL``, searched ``CASE``, ``IF``,
  ``COALESCE``, ``GREATEST``/``LEAST`` (NULLs skipped), ``try_add``, ``concat``, ``concat_ws``;
* ``raise_error(m)`` is evaluated lazily: when a row would reach it (through ``CASE``, ``IF`` and
  ``COALESCE`` branches), the run is refused and DuckDB raises the query's own error.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
import sqlglot.errors
from sqlglot import exp

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
_COMPARISONS = {exp.EQ: pc.equal, exp.NEQ: pc.not_equal, exp.GT: pc.greater, exp.GTE: pc.greater_equal}
_COMPARISONS.update({exp.LT: pc.less, exp.LTE: pc.less_equal})
_ARITHMETIC = {exp.Add: pc.add_checked, exp.Sub: pc.subtract_checked, exp.Mul: pc.multiply_checked}
_AGGREGATES = {exp.Count: "count", exp.Min: "min", exp.Max: "max", exp.Sum: "sum"}


#: Queries with more nodes than this run on DuckDB: each node evaluated here costs about 25 us of
#: Python and pyarrow dispatch at a thousand rows, against DuckDB's fixed cost of about 1-1.5 ms
#: a query (a pattern view's Helper step, some 450 nodes, took 7.1 ms here against 5.2 ms there; its
#: final view, 20 nodes, 0.25 ms against 1.05 ms).
NODE_LIMIT = 150


class Unsupported(Exception):
    """The query (or this run of it) is outside what this module computes exactly; why."""


Datum = pa.Array | pa.Scalar


@dataclass
class _Value:
    """An evaluated expression: its values and, for each ``raise_error`` it may reach, the rows
    (a boolean array or scalar) on which it would be evaluated."""

    data: Datum
    raises: tuple[Datum, ...] = ()


@dataclass
class _Frame:
    """Rows of one query level: each column with the relation name that qualifies it."""

    columns: list[tuple[str | None, str, pa.Array]]
    rows: int
    #: Aggregate results of a grouped level, by the id of their node in the query tree.
    aggregates: dict[int, pa.Array] | None = None

    @functools.cached_property
    def _index(self) -> dict[tuple[str, str], list[int]]:
        """(qualifier or "", lower-case name) -> positions; ("", name) lists every column so named."""
        index: dict[tuple[str, str], list[int]] = {}
        for number, (table, name, _) in enumerate(self.columns):
            index.setdefault(("", name.lower()), []).append(number)
            if table:
                index.setdefault((table.lower(), name.lower()), []).append(number)
        return index

    def position(self, column: exp.Column) -> int:
        found = self._index.get(((column.table or "").lower(), column.name.lower()), ())
        if len(found) != 1:
            raise Unsupported(f"column {column.sql()} is {'ambiguous' if found else 'not found'}")
        return found[0]

    def find(self, column: exp.Column) -> pa.Array:
        return self.columns[self.position(column)][2]

    def has(self, column: exp.Column) -> bool:
        try:
            self.find(column)
        except Unsupported:
            return False
        return True

    def named(self, alias: str) -> _Frame:
        return _Frame([(alias, name, array) for (_, name, array) in self.columns], self.rows)

    def filtered(self, mask: Datum) -> _Frame:
        keep = pc.fill_null(mask, False)
        if isinstance(keep, pa.Scalar):
            return self if keep.as_py() else _Frame([(t, n, a.slice(0, 0)) for t, n, a in self.columns], 0)
        columns = [(table, name, pc.filter(array, keep)) for table, name, array in self.columns]
        return _Frame(columns, len(columns[0][2]) if columns else int(pc.sum(keep).as_py() or 0))


def _array(datum: Datum, rows: int) -> pa.Array:
    if isinstance(datum, pa.ChunkedArray):
        if datum.num_chunks == 0:
            return pa.array([], type=datum.type)
        return pa.concat_arrays(datum.chunks) if datum.num_chunks != 1 else datum.chunk(0)
    if isinstance(datum, pa.Scalar):
        return pa.repeat(datum, rows)
    return datum


def _table_frame(table: pa.Table, name: str) -> _Frame:
    return _Frame(
        [(name, field.name, _array(table.column(i), 0)) for i, field in enumerate(table.schema)],
        table.num_rows,
    )


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
        return f"{size} expression nodes: DuckDB runs a query this large faster"
    return statements[0]


def run_arrow(text: str, tables: Mapping[str, pa.Table]) -> pa.Table:
    """The result of Spark SQL query ``text`` over ``tables`` (name -> Arrow table), or Unsupported."""
    tree = _parsed(text)
    if isinstance(tree, str):
        raise Unsupported(tree)
    try:
        frame = _select(tree, {name.lower(): table for name, table in tables.items()})
    except pa.ArrowException as error:
        raise Unsupported(f"pyarrow: {str(error).splitlines()[0][:200]}") from None
    return pa.Table.from_arrays(
        [array for _, _, array in frame.columns], names=[n for _, n, _ in frame.columns]
    )


# -- relations ------------------------------------------------------------------------------------
def _select(node: exp.Expression, tables: dict[str, pa.Table]) -> _Frame:
    if not isinstance(node, exp.Select):
        raise Unsupported(f"{type(node).__name__} is not a plain SELECT")
    extra = [key for key, value in node.args.items() if value and key not in _SELECT_PARTS]
    if extra:
        raise Unsupported(f"SELECT with {', '.join(sorted(extra))}")
    source = node.args.get("from_") or node.args.get("from")
    if source is None:
        raise Unsupported("SELECT without FROM")
    frame = _relation(source.this, tables)
    for join in node.args.get("joins") or ():
        frame = _join(frame, join, tables)
    where = node.args.get("where")
    if where is not None:
        condition = _evaluate(where.this, frame)
        _refuse_raises(condition.raises)
        frame = frame.filtered(condition.data)
    group = node.args.get("group")
    aggregates = [a for item in node.expressions for a in _aggregates_in(item)]
    if group is not None or aggregates:
        frame = _grouped(frame, group, aggregates)
    return _projected(node.expressions, frame)


def _relation(node: exp.Expression, tables: dict[str, pa.Table]) -> _Frame:
    if isinstance(node, exp.Table):
        if node.args.get("db") or node.args.get("catalog") or not isinstance(node.this, exp.Identifier):
            raise Unsupported("a qualified table name")
        table = tables.get(node.name.lower())
        if table is None:
            raise Unsupported(f"no input named {node.name}")
        return _table_frame(table, node.alias_or_name)
    if isinstance(node, exp.Subquery) and node.alias:
        return _select(node.this, tables).named(node.alias)
    raise Unsupported(f"FROM {type(node).__name__}")


_JOIN_TYPES = {("", "INNER"): "inner", ("", ""): "inner", ("LEFT", ""): "left outer"}
_JOIN_TYPES.update({("LEFT", "OUTER"): "left outer", ("RIGHT", ""): "right outer"})
_JOIN_TYPES.update(
    {("RIGHT", "OUTER"): "right outer", ("FULL", ""): "full outer", ("FULL", "OUTER"): "full outer"}
)


def _join(left: _Frame, join: exp.Join, tables: dict[str, pa.Table]) -> _Frame:
    kind = _JOIN_TYPES.get((join.side.upper(), join.kind.upper()))
    condition = join.args.get("on")
    if kind is None or condition is None or join.args.get("using") or join.args.get("method"):
        raise Unsupported("a join other than INNER/LEFT/RIGHT/FULL ... ON")
    right = _relation(join.this, tables)
    conjuncts = _conjuncts(condition)
    left_keys, right_keys = [], []
    for conjunct in conjuncts:
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
        keys = (_plain(pair[0], left), _plain(pair[1], right))
        if isinstance(conjunct, exp.NullSafeEQ) and (keys[0].null_count or keys[1].null_count):
            raise Unsupported("IS NOT DISTINCT FROM over a NULL key")
        left_keys.append(keys[0])
        right_keys.append(keys[1])
    left_table = _keyed(left, left_keys, "l")
    right_table = _keyed(right, right_keys, "r")
    try:
        joined = left_table.join(
            right_table,
            [f"lk{i}" for i in range(len(left_keys))],
            [f"rk{i}" for i in range(len(right_keys))],
            join_type=kind,
            coalesce_keys=False,
            use_threads=False,
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
        raise Unsupported(f"pyarrow join: {error}") from None
    columns = [(t, n, _array(joined.column(f"l{i}"), 0)) for i, (t, n, _) in enumerate(left.columns)]
    columns += [(t, n, _array(joined.column(f"r{i}"), 0)) for i, (t, n, _) in enumerate(right.columns)]
    return _Frame(columns, joined.num_rows)


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    node = node.unnest()
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _within(node: exp.Expression, frame: _Frame) -> bool:
    columns = list(node.find_all(exp.Column))
    return bool(columns) and all(frame.has(c) for c in columns)


def _plain(node: exp.Expression, frame: _Frame) -> pa.Array:
    value = _evaluate(node, frame)
    _refuse_raises(value.raises)
    return _array(value.data, frame.rows)


def _keyed(frame: _Frame, keys: list[pa.Array], prefix: str) -> pa.Table:
    arrays = [array for _, _, array in frame.columns] + keys
    names = [f"{prefix}{i}" for i in range(len(frame.columns))] + [f"{prefix}k{i}" for i in range(len(keys))]
    return pa.Table.from_arrays(arrays, names=names)


def _aggregates_in(node: exp.Expression) -> list[exp.Expression]:
    return _aggregates_below(node)


@functools.lru_cache(maxsize=4096)
def _aggregates_below_cached(key: int, node: exp.Expression) -> tuple[exp.Expression, ...]:
    return tuple(n for n in node.walk() if type(n) in _AGGREGATES)


def _aggregates_below(node: exp.Expression) -> list[exp.Expression]:
    """The aggregate calls in ``node`` (query trees are parsed once and kept, so this is kept too)."""
    return list(_aggregates_below_cached(id(node), node))


def _grouped(frame: _Frame, group: exp.Group | None, aggregates: list[exp.Expression]) -> _Frame:
    if group is None or not group.expressions:
        raise Unsupported("aggregates without GROUP BY")
    if any(not isinstance(g, exp.Column) for g in group.expressions):
        raise Unsupported("GROUP BY an expression")
    keys = [frame.columns[frame.position(g)] for g in group.expressions]
    arrays = [array for _, _, array in keys]
    names = [f"k{i}" for i in range(len(keys))]
    requests, outputs = [], []
    for number, node in enumerate(aggregates):
        function = _AGGREGATES[type(node)]
        if node.args.get("distinct") or isinstance(node.this, exp.Distinct):
            raise Unsupported("an aggregate over DISTINCT values")
        if function == "count" and isinstance(node.this, exp.Star):
            requests.append(([], "count_all"))
            outputs.append("count_all")
            continue
        value = _evaluate(node.this, frame)
        _refuse_raises(value.raises)
        argument = _array(value.data, frame.rows)
        _check_aggregable(function, argument)
        names.append(f"a{number}")
        arrays.append(argument)
        requests.append((f"a{number}", function))
        outputs.append(f"a{number}_{function}")
    if outputs.count("count_all") > 1:
        first = outputs.index("count_all")
        requests = [r for i, r in enumerate(requests) if outputs[i] != "count_all" or i == first]
    table = pa.Table.from_arrays(arrays, names=names)
    try:
        result = table.group_by(names[: len(keys)], use_threads=False).aggregate(requests)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
        raise Unsupported(f"pyarrow group by: {error}") from None
    columns = [(table, name, _array(result.column(f"k{i}"), 0)) for i, (table, name, _) in enumerate(keys)]
    found = {
        id(node): _array(result.column(output), 0) for node, output in zip(aggregates, outputs, strict=True)
    }
    return _Frame(columns, result.num_rows, found)


def _check_aggregable(function: str, argument: pa.Array) -> None:
    kind = argument.type
    if function == "sum":
        if not pa.types.is_integer(kind):
            raise Unsupported(f"sum over {kind}")
        largest = pc.max(pc.abs_checked(argument.cast(pa.int64()))).as_py() if len(argument) else 0
        if largest is not None and largest * len(argument) > _BIGINT_MAX:
            raise Unsupported("a sum that could pass BIGINT")
    elif function in ("min", "max") and (pa.types.is_floating(kind) or pa.types.is_nested(kind)):
        raise Unsupported(f"{function} over {kind}")


def _projected(items: list[exp.Expression], frame: _Frame) -> _Frame:
    columns: list[tuple[str | None, str, pa.Array]] = []
    for item in items:
        if isinstance(item, exp.Star):
            if frame.aggregates is not None:
                raise Unsupported("* in a grouped SELECT")
            columns += [(None, name, array) for _, name, array in frame.columns]
            continue
        if isinstance(item, exp.Alias):
            name, node = item.alias, item.this
        elif isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
            name, node = item.name, item
        else:
            raise Unsupported(f"a SELECT item without a name: {item.sql()[:60]}")
        value = _evaluate(node, frame)
        _refuse_raises(value.raises)
        columns.append((None, name, _array(value.data, frame.rows)))
    lowered = [name.lower() for _, name, _ in columns]
    if len(set(lowered)) != len(lowered):
        raise Unsupported("two result columns with one name")
    return _Frame(columns, frame.rows)


def _refuse_raises(raises: tuple[Datum, ...]) -> None:
    for reached in raises:
        hit = pc.any(reached).as_py() if isinstance(reached, pa.Array) else reached.as_py()
        if hit:
            raise Unsupported("a row reaches raise_error: the query's own error is raised by DuckDB")


# -- expressions ----------------------------------------------------------------------------------
def _evaluate(node: exp.Expression, frame: _Frame) -> _Value:
    handler = _HANDLERS.get(type(node))
    if handler is None:
        raise Unsupported(f"{type(node).__name__} ({node.sql()[:60]})")
    try:
        return handler(node, frame)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
        raise Unsupported(f"pyarrow: {str(error).splitlines()[0][:200]}") from None


def _all(values: list[_Value]) -> tuple[Datum, ...]:
    return tuple(r for v in values for r in v.raises)


def _only(raises: tuple[Datum, ...], rows: Datum) -> tuple[Datum, ...]:
    """``raises`` restricted to the rows ``rows`` (a condition, NULL counting as false)."""
    if not raises:
        return ()
    rows = pc.fill_null(rows, False)
    return tuple(pc.and_(r, rows) for r in raises)


def _column(node: exp.Column, frame: _Frame) -> _Value:
    if isinstance(node.this, exp.Star):
        raise Unsupported("table.*")
    return _Value(frame.find(node))


def _literal(node: exp.Literal, frame: _Frame) -> _Value:
    if node.is_string:
        return _Value(pa.scalar(node.this, pa.string()))
    text = node.this
    if not text.isdigit():
        raise Unsupported(f"the number literal {text} (Spark reads it as a decimal or double)")
    value = int(text)
    if value <= _INT_MAX:
        return _Value(pa.scalar(value, pa.int32()))
    if value <= _BIGINT_MAX:
        return _Value(pa.scalar(value, pa.int64()))
    raise Unsupported(f"the literal {text} (a decimal in Spark)")


def _evaluated(nodes: list[exp.Expression], frame: _Frame) -> list[_Value]:
    return [_evaluate(n, frame) for n in nodes]


def _common(values: list[Datum]) -> list[Datum]:
    """``values`` cast to one type, as Spark widens them (integers, integers and doubles, NULLs)."""
    kinds = {v.type for v in values if not pa.types.is_null(v.type)}
    if not kinds:
        return values
    if len(kinds) == 1:
        (target,) = kinds
    elif all(pa.types.is_integer(k) for k in kinds):
        target = max(kinds, key=lambda k: k.bit_width)
        if any(pa.types.is_unsigned_integer(k) for k in kinds):
            raise Unsupported("unsigned integers")
    elif all(pa.types.is_integer(k) or pa.types.is_float64(k) for k in kinds):
        target = pa.float64()
    else:
        raise Unsupported(f"values of types {sorted(map(str, kinds))} together")
    return [v if v.type == target else v.cast(target) for v in values]


def _cast(node: exp.Cast, frame: _Frame) -> _Value:
    if isinstance(node, exp.TryCast) and node.args.get("safe"):
        raise Unsupported("try_cast")
    target = _CAST_TYPES.get(node.to.this)
    if target is None or node.to.expressions:
        raise Unsupported(f"CAST to {node.to.sql()}")
    value = _evaluate(node.this, frame)
    source = value.data.type
    if source == target or pa.types.is_null(source):
        return _Value(value.data.cast(target), value.raises)
    allowed = pa.types.is_integer(source) and (pa.types.is_integer(target) or pa.types.is_string(target))
    allowed |= pa.types.is_string(source) and pa.types.is_string(target)
    allowed |= pa.types.is_boolean(source) and pa.types.is_string(target)
    if not allowed:
        raise Unsupported(f"CAST from {source} to {target}")
    if pa.types.is_boolean(source):  # Spark writes true/false, as pyarrow does
        return _Value(value.data.cast(target), value.raises)
    return _Value(value.data.cast(target, safe=True), value.raises)


def _comparison(node: exp.Expression, frame: _Frame) -> _Value:
    left, right = _evaluated([node.this, node.expression], frame)
    data = _common([left.data, right.data])
    for datum in data:
        kind = datum.type
        if not (
            pa.types.is_integer(kind)
            or pa.types.is_string(kind)
            or pa.types.is_boolean(kind)
            or pa.types.is_timestamp(kind)
            or pa.types.is_date(kind)
            or pa.types.is_null(kind)
        ):
            raise Unsupported(f"comparing values of type {kind}")
    if any(pa.types.is_null(d.type) for d in data):
        return _Value(pa.scalar(None, pa.bool_()), _all([left, right]))
    return _Value(_COMPARISONS[type(node)](*data), _all([left, right]))


def _arithmetic(node: exp.Expression, frame: _Frame) -> _Value:
    left, right = _evaluated([node.this, node.expression], frame)
    data = _common([left.data, right.data])
    if not all(pa.types.is_integer(d.type) or pa.types.is_null(d.type) for d in data):
        raise Unsupported("arithmetic on values other than integers")
    if any(pa.types.is_null(d.type) for d in data):
        other = [d.type for d in data if not pa.types.is_null(d.type)]
        return _Value(pa.scalar(None, other[0] if other else pa.int32()), _all([left, right]))
    return _Value(_ARITHMETIC[type(node)](*data), _all([left, right]))


def _negative(node: exp.Neg, frame: _Frame) -> _Value:
    if isinstance(node.this, exp.Literal):  # -2147483648 is an INT literal in Spark
        return _negated_literal(node.this)
    value = _evaluate(node.this, frame)
    if not pa.types.is_integer(value.data.type):
        raise Unsupported("unary minus on a value other than an integer")
    return _Value(pc.negate_checked(value.data), value.raises)


def _negated_literal(literal: exp.Literal) -> _Value:
    if literal.is_string or not literal.this.isdigit():
        raise Unsupported("unary minus on a literal other than an integer")
    value = -int(literal.this)
    if value >= _INT_MIN:
        return _Value(pa.scalar(value, pa.int32()))
    if value >= -_BIGINT_MAX - 1:
        return _Value(pa.scalar(value, pa.int64()))
    raise Unsupported(f"the literal {value}")


def _boolean(datum: Datum) -> Datum:
    if pa.types.is_null(datum.type):
        return datum.cast(pa.bool_())
    if not pa.types.is_boolean(datum.type):
        raise Unsupported(f"a condition of type {datum.type}")
    return datum


def _and(node: exp.And, frame: _Frame) -> _Value:
    left, right = _evaluated([node.this, node.expression], frame)
    if left.raises or right.raises:
        raise Unsupported("raise_error under AND")
    return _Value(pc.and_kleene(_boolean(left.data), _boolean(right.data)))


def _or(node: exp.Or, frame: _Frame) -> _Value:
    left, right = _evaluated([node.this, node.expression], frame)
    if left.raises or right.raises:
        raise Unsupported("raise_error under OR")
    return _Value(pc.or_kleene(_boolean(left.data), _boolean(right.data)))


def _not(node: exp.Not, frame: _Frame) -> _Value:
    value = _evaluate(node.this, frame)
    return _Value(pc.invert(_boolean(value.data)), value.raises)


def _is(node: exp.Is, frame: _Frame) -> _Value:
    if not isinstance(node.expression, exp.Null):
        raise Unsupported("IS other than IS NULL")
    value = _evaluate(node.this, frame)
    return _Value(pc.is_null(value.data), value.raises)


def _null(node: exp.Null, frame: _Frame) -> _Value:
    return _Value(pa.scalar(None, pa.null()))


def _bool(node: exp.Boolean, frame: _Frame) -> _Value:
    return _Value(pa.scalar(bool(node.this), pa.bool_()))


def _paren(node: exp.Paren, frame: _Frame) -> _Value:
    return _evaluate(node.this, frame)


def _chosen(conditions: list[Datum], branches: list[_Value], fallback: _Value) -> _Value:
    """The searched CASE over evaluated conditions and branches (first true condition wins)."""
    data = _common([b.data for b in branches] + [fallback.data])
    taken = [pc.fill_null(c, False) for c in conditions]
    raises: list[Datum] = []
    earlier: Datum | None = None
    for condition, branch in zip(taken, branches, strict=True):
        here = condition if earlier is None else pc.and_(condition, pc.invert(earlier))
        raises += _only(branch.raises, here)
        earlier = condition if earlier is None else pc.or_(earlier, condition)
    if fallback.raises:
        raises += _only(fallback.raises, pc.invert(earlier))
    if pa.types.is_null(data[0].type):
        return _Value(data[0], tuple(raises))
    if all(isinstance(c, pa.Scalar) for c in taken):
        for condition, value in zip(taken, data, strict=False):
            if condition.as_py():
                return _Value(value, tuple(raises))
        return _Value(data[-1], tuple(raises))
    rows = max((len(c) for c in taken if isinstance(c, pa.Array)), default=1)
    cases = pc.make_struct(
        *[_array(c, rows) for c in taken], field_names=[f"c{i}" for i in range(len(taken))]
    )
    return _Value(pc.case_when(cases, *data), tuple(raises))


def _case(node: exp.Case, frame: _Frame) -> _Value:
    if node.this is not None:
        raise Unsupported("CASE x WHEN (a simple CASE)")
    conditions, branches = [], []
    for branch in node.args.get("ifs") or ():
        condition = _evaluate(branch.this, frame)
        if condition.raises:
            raise Unsupported("raise_error in a CASE condition")
        conditions.append(_boolean(condition.data))
        branches.append(_evaluate(branch.args["true"], frame))
    default = node.args.get("default")
    fallback = _evaluate(default, frame) if default is not None else _Value(pa.scalar(None, pa.null()))
    return _chosen(conditions, branches, fallback)


def _if(node: exp.If, frame: _Frame) -> _Value:
    condition = _evaluate(node.this, frame)
    if condition.raises:
        raise Unsupported("raise_error in an IF condition")
    otherwise = node.args.get("false")
    fallback = _evaluate(otherwise, frame) if otherwise is not None else _Value(pa.scalar(None, pa.null()))
    return _chosen([_boolean(condition.data)], [_evaluate(node.args["true"], frame)], fallback)


def _coalesce(node: exp.Coalesce, frame: _Frame) -> _Value:
    values = _evaluated([node.this, *node.expressions], frame)
    data = _common([v.data for v in values])
    raises: list[Datum] = list(values[0].raises)
    missing = pc.is_null(data[0])
    for value, datum in zip(values[1:], data[1:], strict=True):
        raises += _only(value.raises, missing)
        missing = pc.and_(missing, pc.is_null(datum))
    present = [d for d in data if not pa.types.is_null(d.type)]
    if not present:
        return _Value(data[0], tuple(raises))
    return _Value(pc.coalesce(*data), tuple(raises))


def _extreme(function: Callable) -> Callable[[exp.Expression, _Frame], _Value]:
    def evaluate(node: exp.Expression, frame: _Frame) -> _Value:
        values = _evaluated([node.this, *node.expressions], frame)
        data = _common([v.data for v in values])
        if any(pa.types.is_floating(d.type) for d in data):
            raise Unsupported("GREATEST/LEAST of floating point values")
        if all(pa.types.is_null(d.type) for d in data):
            return _Value(data[0], _all(values))
        return _Value(function(*data, skip_nulls=True), _all(values))

    return evaluate


def _try_add(node: exp.SafeAdd, frame: _Frame) -> _Value:
    left, right = _evaluated([node.this, node.expression], frame)
    data = _common([left.data, right.data])
    if not all(pa.types.is_integer(d.type) or pa.types.is_null(d.type) for d in data):
        raise Unsupported("try_add of values other than integers")
    if any(pa.types.is_null(d.type) for d in data):
        other = [d.type for d in data if not pa.types.is_null(d.type)]
        return _Value(pa.scalar(None, other[0] if other else pa.int32()), _all([left, right]))
    # an overflow anywhere (even on a row no branch takes) refuses the run: DuckDB computes it
    return _Value(pc.add_checked(*data), _all([left, right]))


def _anonymous(node: exp.Anonymous, frame: _Frame) -> _Value:
    if node.name.lower() != "raise_error" or len(node.expressions) != 1:
        raise Unsupported(f"the function {node.name}")
    return _Value(pa.scalar(None, pa.null()), (pa.scalar(True),))


def _strings(node: exp.Expression, frame: _Frame) -> list[_Value]:
    values = _evaluated(list(node.expressions), frame)
    for value in values:
        if not (pa.types.is_string(value.data.type) or pa.types.is_null(value.data.type)):
            raise Unsupported("concat of values other than strings")
    return values


def _concat(node: exp.Concat, frame: _Frame) -> _Value:
    values = _strings(node, frame)
    data = [v.data.cast(pa.string()) for v in values]
    return _Value(pc.binary_join_element_wise(*data, "", null_handling="emit_null"), _all(values))


def _concat_ws(node: exp.ConcatWs, frame: _Frame) -> _Value:
    values = _strings(node, frame)
    separator, *parts = [v.data.cast(pa.string()) for v in values]
    if not isinstance(separator, pa.Scalar) or not separator.is_valid:
        raise Unsupported("concat_ws with a separator that is not a string literal")
    return _Value(pc.binary_join_element_wise(*parts, separator, null_handling="skip"), _all(values))


def _aggregate(node: exp.Expression, frame: _Frame) -> _Value:
    if frame.aggregates is None or id(node) not in frame.aggregates:
        raise Unsupported("an aggregate outside a grouped SELECT")
    return _Value(frame.aggregates[id(node)])


_HANDLERS: dict[type, Callable[[exp.Expression, _Frame], _Value]] = {
    exp.Column: _column,
    exp.Literal: _literal,
    exp.Null: _null,
    exp.Boolean: _bool,
    exp.Paren: _paren,
    exp.Cast: _cast,
    exp.TryCast: _cast,  # sqlglot reads Spark's CAST as TryCast; Spark (ANSI) raises, as here
    exp.Neg: _negative,
    exp.And: _and,
    exp.Or: _or,
    exp.Not: _not,
    exp.Is: _is,
    exp.Case: _case,
    exp.If: _if,
    exp.Coalesce: _coalesce,
    exp.Greatest: _extreme(pc.max_element_wise),
    exp.Least: _extreme(pc.min_element_wise),
    exp.SafeAdd: _try_add,
    exp.Anonymous: _anonymous,
    exp.Concat: _concat,
    exp.ConcatWs: _concat_ws,
    **{kind: _comparison for kind in _COMPARISONS},
    **{kind: _arithmetic for kind in _ARITHMETIC},
    **{kind: _aggregate for kind in _AGGREGATES},
}

__all__ = ["Unsupported", "run_arrow"]
