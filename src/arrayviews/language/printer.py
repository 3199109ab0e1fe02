"""Canonical text of statements and array expressions: ``parse(to_text(s)) == [s]``.

Keywords are upper case, array functions lower case, one space after every comma; cell expressions,
aggregate calls and schemas use the model's canonical forms. Statements print on one line without
the closing ``;``, except hand-written ViewDFs (a line per clause, as a body may end in a comment).
Spark SQL (queries, ViewDF bodies, pattern conditions) is printed as it was written or generated.

View definitions: shapes upper case (``PRODUCT(BOX(-2:0), L1(1))``), view aggregates lower case with
``AS name`` only when the name is not the default, aliases only when they differ from the array's
name, and ON equalities as ``(a.i = b.i)`` when plain, else ``(b.i = a.i * m / d + c)`` (the right
side first).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from sqlglot import exp

from arrayviews.language import syntax as ast
from arrayviews.model.uncertain import DEFAULT_SIGMAS

# -- array expressions --------------------------------------------------------------------------
#: Printers of the arguments of each array function (after the input arrays), by node type.
_ARGUMENTS: dict[type, Callable[[ast.ArrayExpr], list[str]]] = {
    ast.Subarray: lambda n: [str(v) for v in (*n.low, *n.high)],
    ast.Filter: lambda n: [n.predicate.to_text()],
    ast.Project: lambda n: list(n.attributes),
    ast.Apply: lambda n: [text for name, expr in n.assignments for text in (name, expr.to_text())],
    ast.Regrid: lambda n: [str(b) for b in n.blocks] + [c.to_text() for c in n.aggregates],
    ast.Window: lambda n: [str(e) for e in n.extents] + [c.to_text() for c in n.aggregates],
    ast.Aggregate: lambda n: [c.to_text() for c in n.aggregates] + list(n.by),
    ast.Join: lambda n: [],
    ast.ProbabilisticSubarray: lambda n: (
        [str(v) for v in (*n.low, *n.high)]
        + [f"THRESHOLD {n.threshold!r}"]
        + ([] if n.method == "scheme" else [f"METHOD {n.method.upper()}"])
    ),
    ast.StructureJoin: lambda n: (
        [repr(n.delta), repr(n.threshold)]
        + [
            f"{keyword} {value.upper()}"
            for keyword, value, default in (
                ("METHOD", n.method, "sbj"),
                ("ENGINE", n.engine, "auto"),
                ("OUTER", n.outer, "auto"),
            )
            if value != default
        ]
    ),
}


def array_argument_printer(node_type: type) -> Callable:
    """Register how the non-array arguments of an array-function node are printed (a decorator)."""

    def register(printer: Callable[[ast.ArrayExpr], list[str]]) -> Callable:
        _ARGUMENTS[node_type] = printer
        return printer

    return register


def array_text(node: ast.ArrayExpr) -> str:
    """``A`` or ``function(inputs..., arguments...)``."""
    if isinstance(node, ast.ArrayName):
        return node.name
    printer = _ARGUMENTS.get(type(node))
    if printer is None or node.function is None:
        raise TypeError(f"no printer for array expression {node!r}")
    parts = [array_text(i) for i in node.inputs()] + printer(node)
    return f"{node.function}({', '.join(parts)})"


# -- view definitions ---------------------------------------------------------------------------
#: Printers of each shape node type.
_SHAPES: dict[type, Callable[[ast.ShapeExpr], str]] = {
    ast.BallShape: lambda n: f"{n.norm}({n.radius}" + ("" if n.ndim is None else f", {n.ndim}") + ")",
    ast.BoxShape: lambda n: "BOX(" + ", ".join(f"{low}:{high}" for low, high in n.ranges) + ")",
    ast.ProductShape: lambda n: "PRODUCT(" + ", ".join(shape_text(p) for p in n.parts) + ")",
    ast.SetShape: lambda n: f"{n.operation}(" + ", ".join(shape_text(p) for p in n.parts) + ")",
}


def shape_printer(node_type: type) -> Callable:
    """Register how a shape node is printed (a decorator)."""

    def register(printer: Callable[[ast.ShapeExpr], str]) -> Callable:
        _SHAPES[node_type] = printer
        return printer

    return register


def shape_text(node: ast.ShapeExpr) -> str:
    printer = _SHAPES.get(type(node))
    if printer is None:
        raise TypeError(f"no printer for shape {node!r}")
    return printer(node)


def _view_aggregate(item: ast.ViewAggregateItem) -> str:
    argument = "*" if item.attribute is None else f"{item.table}.{item.attribute}"
    text = f"{item.function}({argument})"
    return text if item.name == item.default_name else f"{text} AS {item.name}"


def affine_text(source: str, multiplier: int, divisor: int, offset: int) -> str:
    """``p * 2 / 3 - 1``: an affine map of ``source`` as statements write it (factors of 1 and an
    offset of 0 left out)."""
    text = source
    if multiplier != 1:
        text += f" * {multiplier}"
    if divisor != 1:
        text += f" / {divisor}"
    if offset:
        text += f" {'-' if offset < 0 else '+'} {abs(offset)}"
    return text


def _equation(q: ast.SimilaritySelect, e: ast.AxisEquation) -> str:
    right, left = f"{q.right_alias}.{e.target}", f"{q.left_alias}.{e.source}"
    if e.is_plain:
        return f"({left} = {right})"
    return f"({right} = {affine_text(left, e.multiplier, e.divisor, e.offset)})"


def _similarity_select(q: ast.SimilaritySelect) -> str:
    def table(name: str, alias: str) -> str:
        return name if alias == name else f"{name} {alias}"

    text = "SELECT " + ", ".join(_view_aggregate(a) for a in q.aggregates)
    text += f" FROM {table(q.left, q.left_alias)} SIMILARITY JOIN {table(q.right, q.right_alias)}"
    if q.mapping is not None:
        text += " ON " + " AND ".join(_equation(q, e) for e in q.mapping)
    text += f" WITH SHAPE {shape_text(q.shape)}"
    return text + " GROUP BY " + ", ".join(f"{q.left_alias}.{d}" for d in q.group_by)


def view_query_text(query: ast.ViewQuery) -> str:
    """The canonical SELECT of a view definition (what the view's definition stores as its text)."""
    if isinstance(query, ast.WindowSelect):
        return f"SELECT * FROM {array_text(query.window)}"
    if isinstance(query, ast.SimilaritySelect):
        return _similarity_select(query)
    raise TypeError(f"no printer for view query {query!r}")


def _create_view(s: ast.CreateView) -> str:
    text = f"CREATE ARRAY VIEW {s.name}"
    if s.chunks is not None:
        text += " WITH CHUNKS (" + ", ".join(str(n) for n in s.chunks) + ")"
    return f"{text} AS {view_query_text(s.query)}"


def _similarity_query(s: ast.SimilarityQuery) -> str:
    text = _similarity_select(s.query)
    if s.through is None:
        return text
    return text + (" USING BASE ARRAYS" if s.through == "none" else f" USING VIEW {s.through}")


def _refresh_view(s: ast.RefreshView) -> str:
    text = f"REFRESH VIEW {s.name}"
    if s.strategy is not None:
        text += f" USING {s.strategy.upper()}"
    return text if s.bases is None else f"{text} ON {', '.join(s.bases)}"


# -- values -------------------------------------------------------------------------------------
def value_text(value: ast.Value) -> str:
    """A literal of INSERT ... VALUES."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return string_text(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    return str(value)


def string_text(text: str) -> str:
    """A Spark SQL string literal of ``text`` (backslashes, quotes and line breaks escaped)."""
    escaped = text.replace("\\", "\\\\").replace("'", "''").replace("\n", "\\n").replace("\r", "\\r")
    return "'" + escaped + "'"


# -- statements ---------------------------------------------------------------------------------
def _create_array(s: ast.CreateArray) -> str:
    schema = s.schema
    attributes = ", ".join(a.to_text() for a in schema.attributes)
    dimensions = "; ".join(d.to_text() for d in schema.dimensions)
    return f"CREATE ARRAY {schema.name} <{attributes}> [{dimensions}]"


def _select(s: ast.Select) -> str:
    text = "SELECT " + ("*" if s.attributes is None else ", ".join(s.attributes))
    if s.into is not None:
        text += f" INTO {s.into}"
    text += f" FROM {array_text(s.source)}"
    if s.where is not None:
        text += f" WHERE {s.where.to_text()}"
    return text


def _insert(s: ast.Insert) -> str:
    rows = ", ".join("(" + ", ".join(value_text(v) for v in row) + ")" for row in s.rows)
    columns = "" if s.columns is None else " (" + ", ".join(s.columns) + ")"
    text = f"INSERT INTO {s.array}{columns} VALUES {rows}" + _conflict_text(s)
    return f"{text} ALLOW GAP" if s.allow_gap else text


def _load(s: ast.Load) -> str:
    text = f"LOAD {s.array} FROM {string_text(s.path)}"
    text = (text if s.format is None else f"{text} AS {s.format.upper()}") + _conflict_text(s)
    return f"{text} ALLOW GAP" if s.allow_gap else text


def _conflict_text(s: ast.Insert | ast.Load) -> str:
    return " ON CONFLICT REPLACE" if s.on_conflict == "replace" else ""


# -- uncertain arrays ---------------------------------------------------------------------------
def _create_uncertain_array(s: ast.CreateUncertainArray) -> str:
    """The schema as the model writes it, then STORE (with STEP for MULTIPLE), SIGMAS when not the
    default 3, and the WORKLOAD with its THRESHOLD when not the default 0.9."""
    schema = s.schema
    attributes = ", ".join(a.to_text() for a in schema.attributes)
    items = [d.to_text() for d in schema.dimensions] + [f"corr({a}, {b})" for a, b in schema.correlations]
    text = f"CREATE UNCERTAIN ARRAY {s.name} <{attributes}> [{'; '.join(items)}]"
    text += f" STORE {s.scheme.split('-', 1)[1].upper()}"
    if s.step == ast.AUTO_STEP:
        text += " STEP AUTO"
    elif s.step is not None:
        steps = s.step
        text += f" STEP {steps[0]}" if len(set(steps)) == 1 else " STEP (" + ", ".join(map(str, steps)) + ")"
    if s.sigmas != DEFAULT_SIGMAS:
        text += f" SIGMAS {s.sigmas!r}"
    if s.workload is not None:
        text += " WORKLOAD " + ", ".join("(" + ", ".join(repr(x) for x in q) + ")" for q in s.workload)
        if s.workload_threshold != ast.DEFAULT_WORKLOAD_THRESHOLD:
            text += f" THRESHOLD {s.workload_threshold!r}"
    return text


# -- streams and stream views -------------------------------------------------------------------
def _create_stream(s: ast.CreateStream) -> str:
    text = (
        f"CREATE STREAM {s.name} ({s.ddl}) PARTITION LENGTH {s.partition_length} TIME COLUMN {s.time_column}"
    )
    return text if s.max_gap_parts is None else f"{text} WITH MAX GAP {s.max_gap_parts} PARTS"


def _view_head(name: str, lateness: int | None) -> str:
    text = f"CREATE VIEW {name}"
    return text if lateness is None else f"{text} WITH LATENESS {lateness} PARTS"


def _create_viewdf(s: ast.CreateViewDF) -> str:
    """One line per clause: a body may end in a ``--`` comment."""
    d = s.definition
    return (
        f"{_view_head(d.name, s.lateness)} AS\n"
        f"INITIALIZE {d.name}[{d.initialize.variable}] AS\n{d.initialize.text}\n"
        f"UPDATE {d.name}[{d.update.variable}] AS\n{d.update.text}\n"
        f"PARTITION LENGTH {d.partition_length}"
    )


def _conjunct_text(conjunct) -> str:
    """A conjunct of a pattern's WHERE, in parentheses when it is a disjunction."""
    return f"({conjunct.text})" if isinstance(conjunct.expression, exp.Or) else conjunct.text


def _duration(seconds: int) -> str:
    for unit, size in (("HOURS", 3600), ("MINUTES", 60)):
        if seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} SECONDS"


def _create_pattern_view(s: ast.CreatePatternView) -> str:
    q = s.query
    variables = ", ".join(v.name + ("+" if v.kleene else "") for v in q.variables)
    text = f"{_view_head(s.name, s.lateness)} AS SELECT {', '.join(i.text() for i in q.items)} "
    text += f"FROM {q.stream} PATTERN [{variables}]"
    if q.conjuncts:
        text += " WHERE " + " AND ".join(_conjunct_text(c) for c in q.conjuncts)
    return text + " GROUP BY " + ", ".join(q.group_by)


def _create_window_view(s: ast.CreateWindowView) -> str:
    q = s.query
    head = _view_head(s.name, s.lateness) + ("" if s.plan == "auto" else f" USING {s.plan.upper()}")
    text = f"{head} AS SELECT {', '.join(i.text() for i in q.items)} "
    text += f"FROM {q.stream} [WINDOW {_duration(q.window_seconds)}] GROUP BY " + ", ".join(q.group_by)
    return text if q.having is None else f"{text} HAVING {q.having.text}"


_STATEMENTS: dict[type, Callable] = {
    ast.Explain: lambda s: f"EXPLAIN {to_text(s.statement)}",
    ast.ShowRelations: lambda s: f"SHOW {s.kind.upper()}",
    ast.Query: lambda s: s.text,
    ast.CreateStream: _create_stream,
    ast.DropStream: lambda s: f"DROP STREAM {s.name}",
    ast.CreateViewDF: _create_viewdf,
    ast.CreatePatternView: _create_pattern_view,
    ast.CreateWindowView: _create_window_view,
    ast.AlterViewLateness: lambda s: f"ALTER VIEW {s.name} SET LATENESS {s.lateness} PARTS",
    ast.AlterViewKeepVersions: lambda s: f"ALTER VIEW {s.name} SET KEEP {s.versions} VERSIONS",
    ast.AlterViewRefreshLimit: lambda s: (
        f"ALTER VIEW {s.name} SET REFRESH LIMIT "
        + ("NONE" if s.seconds is None else f"{s.seconds!r} SECONDS")
    ),
    ast.CreateArray: _create_array,
    ast.CreateUncertainArray: _create_uncertain_array,
    ast.DropArray: lambda s: f"DROP ARRAY {s.name}",
    ast.ShowVersions: lambda s: f"SHOW VERSIONS OF {s.name}",
    ast.ShowChunks: lambda s: f"SHOW CHUNKS OF {s.name}",
    ast.ShowSchema: lambda s: f"SHOW SCHEMA OF {s.name}",
    ast.Select: _select,
    ast.Insert: _insert,
    ast.Load: _load,
    ast.Delete: lambda s: f"DELETE FROM {array_text(s.target)}",
    ast.CreateView: _create_view,
    ast.DropView: lambda s: f"DROP VIEW {s.name}",
    ast.ShowStatus: lambda s: f"SHOW STATUS OF {s.name}",
    ast.RefreshView: _refresh_view,
    ast.SimilarityQuery: _similarity_query,
    ast.VerifyView: lambda s: f"VERIFY VIEW {s.name}",
    ast.Maintain: lambda s: "MAINTAIN ALL" if s.refresh_all else "MAINTAIN",
}


def statement_printer(node_type: type) -> Callable:
    """Register the printer of a statement type (a decorator)."""

    def register(printer: Callable) -> Callable:
        _STATEMENTS[node_type] = printer
        return printer

    return register


def to_text(node: ast.Statement | ast.ArrayExpr | ast.ViewQuery | ast.ShapeExpr) -> str:
    """The canonical text of a statement (without ``;``), an array expression, a view's SELECT or a shape."""
    if isinstance(node, ast.ArrayExpr):
        return array_text(node)
    if isinstance(node, ast.ViewQuery):
        return view_query_text(node)
    if isinstance(node, ast.ShapeExpr):
        return shape_text(node)
    printer = _STATEMENTS.get(type(node))
    if printer is None:
        raise TypeError(f"no printer for statement {node!r}")
    return printer(node)


def script_text(statements: list[ast.Statement]) -> str:
    """Statements one per line, each ending with ``;``."""
    return "".join(f"{to_text(s)};\n" for s in statements)


__all__ = [
    "array_argument_printer",
    "array_text",
    "script_text",
    "shape_printer",
    "shape_text",
    "statement_printer",
    "to_text",
    "value_text",
    "view_query_text",
]
