"""In-process SQL: a Spark SQL query (ANSI mode) run by DuckDB over Arrow tables, after sqlglot
rewrites it to DuckDB SQL with Spark's meaning where the two differ; queries it cannot run alike
are refused (the caller runs them on Spark).

Differences handled (each checked by tests/test_local_sql.py):

* ``CAST`` raises on a value it cannot convert (sqlglot reads Spark's CAST as the lenient TRY_CAST);
* ``a / b`` raises on a zero divisor (DuckDB gives NULL or infinity);
* ``try_add(a, b)`` is NULL on overflow, ``raise_error(m)`` raises :class:`RaisedByQuery` with ``m``;
* ``concat`` is NULL when an argument is (sqlglot writes ``||``), ``collect_list`` skips NULLs,
  ascending order puts NULLs first (sqlglot writes both);
* integer ``+ - *`` raise on overflow in both engines; DuckDB sums integers in 128 bits, so a sum is
  exact where Spark's would overflow BIGINT, and casting the result to the view's column raises
  when it does not fit (never a wrapped value);
* a DECIMAL divided (``/``, ``%``) or averaged is refused (DuckDB computes it in DOUBLE, Spark in
  DECIMAL with its own result scale, rounding HALF_UP), as is a DECIMAL product and, when a DECIMAL
  has more than 6 decimal places, a DECIMAL sum of two values (Spark rounds either past 38 digits);
  a ``sum`` past 38 digits raises (DuckDB would return it): execution/decimal_guard.py;
* string literals keep Spark's backslash escapes (sqlglot re-quotes them); timestamps are UTC wall
  times (Spark's session time zone is UTC), returned without a time zone;
* a FLOAT or DOUBLE grouping key is shown as Spark normalizes it (``-0.0`` as ``0.0``:
  execution/float_keys.py);
* ``date_trunc`` with a literal unit and ``date_format`` with a literal pattern of common fields
  run as DuckDB's calls of the same meaning (execution/time_truncation.py, time_formatting.py);
  other calls reading a format, unit or time zone as text (``to_date``, ``to_char``,
  ``get_json_object``, ``from_utc_timestamp``...) are refused: sqlglot's DuckDB forms of them differ
  from Spark's.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import sqlglot
import sqlglot.errors
from sqlglot import exp

from arrayviews.execution.arrow_sql import Unsupported, run_arrow
from arrayviews.execution.decimal_guard import SUM_CHECK_MACRO, DecimalRefused, guard_decimals
from arrayviews.execution.float_keys import KeysUntyped, normalize_float_keys
from arrayviews.execution.time_formatting import spell_time_formats
from arrayviews.execution.time_truncation import spell_time_truncation

#: Prefix of the message of a ``raise_error`` rewritten for DuckDB (found again in its error).
_RAISED = "\x1eraised:"
#: DuckDB macros standing for Spark functions without a DuckDB equal.
_MACROS = (
    # Spark (ANSI) raises DIVIDE_BY_ZERO: the error (not the query's own) sends the query to Spark
    "CREATE MACRO av_nonzero(d) AS CASE WHEN d = 0 THEN error('division by zero') ELSE d END",
    # Spark's substr(s, pos[, len]): pos 1-based, 0 as 1, negative from the end; the characters
    # from max(start, 0) up to start + len (none when that is not after it)
    "CREATE MACRO av_start(s, pos) AS CASE WHEN pos > 0 THEN pos - 1 WHEN pos < 0 THEN length(s) + pos ELSE 0 END",
    "CREATE MACRO av_substr(s, pos, len) AS CASE WHEN s IS NULL OR pos IS NULL OR len IS NULL THEN NULL "
    "WHEN greatest(av_start(s, pos), 0) >= av_start(s, pos) + len THEN '' "
    "ELSE substring(s, greatest(av_start(s, pos), 0) + 1, av_start(s, pos) + len - greatest(av_start(s, pos), 0)) END",
    "CREATE MACRO av_substr_rest(s, pos) AS CASE WHEN s IS NULL OR pos IS NULL THEN NULL "
    "ELSE substring(s, greatest(av_start(s, pos), 0) + 1) END",
    # Java's case mapping (Spark's) and DuckDB's agree on ASCII only ('ß' is 'SS' in Java): other
    # text sends the query to Spark
    "CREATE MACRO av_ascii(s) AS CASE WHEN s IS NULL OR strlen(s) = length(s) THEN s "
    "ELSE error('non-ASCII case mapping') END",
    SUM_CHECK_MACRO,
)


class CannotRunLocally(Exception):
    """The query cannot run in-process with Spark's meaning; the reason says why."""


class RaisedByQuery(Exception):
    """The query's ``raise_error(message)`` fired; ``args[0]`` is the message."""


@dataclass(frozen=True)
class ArrowFunction:
    """A scalar function over Arrow arrays callable from in-process queries (DuckDB type names)."""

    name: str
    function: Callable[..., pa.Array]
    parameters: tuple[str, ...]
    returns: str
    #: Positions of arguments written as Spark ``STRUCT(...)``: passed as ``struct_macro(fields...)``.
    struct_arguments: tuple[int, ...] = ()
    struct_macro: str | None = None


#: Spark calls whose format, unit or time-zone text sqlglot writes for DuckDB with another meaning
#: (``to_char(n, '999')`` as a CAST, ``to_date(s, fmt)`` as a lenient TRY_CAST without its format,
#: Java date patterns as strftime ones, units and zones as DuckDB reads them): they run on Spark.
_SPARK_ONLY_CALLS = (
    exp.TimestampTrunc, exp.DateTrunc, exp.TimeToStr, exp.StrToTime, exp.StrToDate, exp.StrToUnix,
    exp.UnixToStr, exp.UnixToTime, exp.TimeToUnix, exp.ToChar, exp.TsOrDsToDate, exp.TimeStrToTime,
    exp.JSONExtract, exp.JSONExtractScalar, exp.AtTimeZone, exp.ConvertTimezone, exp.FromTimeZone,
)  # fmt: skip


def _rewrite(tree: exp.Expression, functions: Mapping[str, ArrowFunction]) -> exp.Expression:
    """The Spark query tree with Spark's meaning spelled for DuckDB (see the module docstring)."""

    def visit(node: exp.Expression) -> exp.Expression:
        if isinstance(node, _SPARK_ONLY_CALLS):
            raise CannotRunLocally(f"{node.sql(dialect='spark')} reads its format or unit as only Spark does")
        if isinstance(node, exp.TryCast) and not node.args.get("safe"):
            return exp.Cast(this=node.this, to=node.to)
        if isinstance(node, exp.Div):
            divisor = exp.Anonymous(this="av_nonzero", expressions=[node.expression])
            return exp.Div(this=node.this, expression=divisor, typed=False, safe=False)
        if isinstance(node, exp.IntDiv | exp.Mod):  # DIV, % and mod: Spark raises on a zero divisor
            divisor = exp.Anonymous(this="av_nonzero", expressions=[node.expression])
            return type(node)(this=node.this, expression=divisor)
        if isinstance(node, exp.Substring):
            text, start, length = node.this, node.args.get("start"), node.args.get("length")
            if start is None:
                return node
            if length is None:
                return exp.Anonymous(this="av_substr_rest", expressions=[text, start])
            return exp.Anonymous(this="av_substr", expressions=[text, start, length])
        if isinstance(node, exp.Upper | exp.Lower):
            return type(node)(this=exp.Anonymous(this="av_ascii", expressions=[node.this]))
        if isinstance(node, exp.SafeAdd):
            return exp.Anonymous(
                this="try", expressions=[exp.Add(this=node.this, expression=node.expression)]
            )
        if isinstance(node, exp.Anonymous):
            name = node.name.lower()
            if name == "raise_error":
                (message,) = node.expressions
                text = exp.DPipe(this=exp.Literal.string(_RAISED), expression=message, safe=True)
                return exp.Anonymous(this="error", expressions=[text])
            known = functions.get(name)
            if known is not None and known.struct_macro is not None:
                arguments = list(node.expressions)
                for position in known.struct_arguments:
                    argument = arguments[position]
                    if isinstance(argument, exp.Struct):
                        fields = [
                            e.expression
                            if isinstance(e, exp.PropertyEQ)
                            else e.this
                            if isinstance(e, exp.Alias)
                            else e
                            for e in argument.expressions
                        ]
                        arguments[position] = exp.Anonymous(this=known.struct_macro, expressions=fields)
                return exp.Anonymous(this=node.name, expressions=arguments)
            if name in {"java_method", "reflect", "try_reflect"}:
                raise CannotRunLocally(f"{node.name}(...) calls Java methods")
        return node

    # children before parents, so a rewritten node keeps its children's rewrites (sqlglot's
    # transform does not descend into a node it replaced)
    for node in reversed(list(tree.walk())):
        new = visit(node)
        if new is not node:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree


@functools.lru_cache(maxsize=256)
def _translated(
    text: str, functions: tuple[ArrowFunction, ...], schemas: tuple[tuple[str, pa.Schema], ...]
) -> str:
    try:
        statements = [s for s in sqlglot.parse(text, read="spark") if s is not None]
    except sqlglot.errors.SqlglotError as error:
        raise CannotRunLocally(f"sqlglot could not read the query ({str(error).splitlines()[0]})") from None
    if len(statements) != 1:
        raise CannotRunLocally("not one query")
    try:
        tree = guard_decimals(statements[0], dict(schemas))
        tree = normalize_float_keys(tree, dict(schemas))
    except (DecimalRefused, KeysUntyped) as refused:
        raise CannotRunLocally(str(refused)) from None
    tree = spell_time_truncation(text, tree, dict(schemas))
    tree = spell_time_formats(text, tree, dict(schemas))
    tree = _rewrite(tree, {f.name: f for f in functions})
    try:
        return tree.sql(dialect="duckdb")
    except sqlglot.errors.SqlglotError as error:
        raise CannotRunLocally(f"sqlglot could not write the query for DuckDB ({error})") from None


def duckdb_sql(
    text: str, functions: Sequence[ArrowFunction] = (), schemas: Mapping[str, pa.Schema] | None = None
) -> str:
    """The DuckDB SQL meaning what Spark SQL ``text`` over inputs of ``schemas`` (name -> Arrow
    schema) means (CannotRunLocally if there is none)."""
    return _translated(text, tuple(functions), tuple((schemas or {}).items()))


_local = threading.local()


def _connection(functions: tuple[ArrowFunction, ...], macros: tuple[str, ...]):
    """This thread's DuckDB connection with the functions and macros registered (made once)."""
    import duckdb

    key = (functions, macros)
    cached = getattr(_local, "connections", None)
    if cached is None:
        cached = _local.connections = {}
    if key not in cached:
        connection = duckdb.connect(config={"threads": 1})
        for statement in (*_MACROS, *macros):
            connection.execute(statement)
        for function in functions:
            connection.create_function(
                function.name,
                function.function,
                [duckdb.sqltype(p) for p in function.parameters],
                duckdb.sqltype(function.returns),
                type="arrow",
                null_handling="special",
                side_effects=False,
            )
        cached[key] = connection
    return cached[key]


def _naive_times(table: pa.Table) -> pa.Table:
    """Timestamps with a time zone as UTC wall times: DuckDB's TIMESTAMP, whose functions (hour,
    date_trunc...) then mean what Spark's mean with its session time zone UTC (DuckDB's own time
    zone support is an extension this process may not have)."""
    fields = [
        pa.field(f.name, pa.timestamp(f.type.unit), f.nullable)
        if pa.types.is_timestamp(f.type) and f.type.tz is not None
        else f
        for f in table.schema
    ]
    schema = pa.schema(fields)
    return table if schema == table.schema else table.cast(schema)


class _Input:
    """One input of a prepared query: DuckDB takes its rows through the Arrow stream interface
    each time the query runs (and its schema once, when the query is bound), so the rows can change
    between runs while the bound and optimized plan is kept."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def __arrow_c_stream__(self, requested_schema=None):
        return self.table.__arrow_c_stream__(requested_schema)

    def __arrow_c_schema__(self):
        return self.table.schema.__arrow_c_schema__()


@dataclass
class _Prepared:
    """A query bound and optimized once on its own cursor, with the inputs it reads."""

    cursor: object
    name: str
    inputs: dict[str, _Input]


#: Prepared queries kept per thread (by query text, functions, macros and the inputs' schemas).
PREPARED_KEPT = 32


def _size_class(rows: int) -> int:
    """Inputs whose row counts differ by less than a factor of about four share a plan (the
    optimizer's join order and build side follow the sizes it saw when it prepared the query)."""
    return rows.bit_length() // 2


def _prepared(translated: str, tables: Mapping[str, pa.Table], functions: tuple, macros: tuple) -> _Prepared:
    """This thread's prepared form of ``translated`` over inputs shaped like ``tables``: binding
    and optimizing a query cost more than running it on a part's rows (about 2 ms of a 9 ms
    pattern step query), and a stream view runs the same query every step."""
    key = (
        translated,
        functions,
        macros,
        tuple((name, table.schema, _size_class(table.num_rows)) for name, table in tables.items()),
    )
    kept = getattr(_local, "prepared", None)
    if kept is None:
        kept = _local.prepared = OrderedDict()
    found = kept.get(key)
    if found is not None:
        kept.move_to_end(key)
        return found
    cursor = _connection(functions, macros).cursor()
    inputs = {name: _Input(table) for name, table in tables.items()}
    for name, source in inputs.items():
        cursor.register(name, source)
    name = f"av_query_{next(_numbers)}"
    try:
        cursor.execute(f"PREPARE {name} AS {translated}")
    except BaseException:
        cursor.close()
        raise
    found = kept[key] = _Prepared(cursor, name, inputs)
    while len(kept) > PREPARED_KEPT:
        _, dropped = kept.popitem(last=False)
        dropped.cursor.close()
    return found


_numbers = itertools.count()


def run_sql(
    text: str,
    tables: Mapping[str, pa.Table],
    functions: Sequence[ArrowFunction] = (),
    macros: Sequence[str] = (),
    arrow_first: bool = False,
) -> pa.Table:
    """The result of Spark SQL query ``text`` over ``tables`` (name -> Arrow table), run in this
    process. Raises CannotRunLocally when the query (or an error inside it that is not its own
    ``raise_error``) cannot be had with Spark's meaning, and RaisedByQuery for ``raise_error``.
    The query is prepared once per thread and input shape and run again on new rows. With
    ``arrow_first`` a small query is first tried with pyarrow compute alone (execution/arrow_sql.py),
    which spares DuckDB's fixed cost of each input and query; what it refuses runs on DuckDB."""
    import duckdb

    inputs = {name: _naive_times(table) for name, table in tables.items()}
    if arrow_first:
        with contextlib.suppress(Unsupported):  # refused: DuckDB runs it below
            return run_arrow(text, inputs)
    translated = duckdb_sql(text, functions, {name: table.schema for name, table in inputs.items()})
    prepared = None
    try:
        prepared = _prepared(translated, inputs, tuple(functions), tuple(macros))
        for name, table in inputs.items():
            prepared.inputs[name].table = table
        return prepared.cursor.execute(f"EXECUTE {prepared.name}").to_arrow_table()
    except duckdb.Error as error:
        message = str(error)
        if _RAISED in message:
            raise RaisedByQuery(message.split(_RAISED, 1)[1].strip()) from None
        kind = type(error).__name__.removesuffix("Exception")
        raise CannotRunLocally(f"DuckDB: {kind}: {message.splitlines()[0][:300]}") from None
    finally:
        if prepared is not None:  # the rows are not kept between runs
            for name, table in inputs.items():
                prepared.inputs[name].table = table.schema.empty_table()


__all__ = ["ArrowFunction", "CannotRunLocally", "RaisedByQuery", "duckdb_sql", "run_sql"]
