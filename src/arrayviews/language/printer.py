"""Canonical text of statements and array expressions: ``parse(to_text(s)) == [s]``.

Keywords are upper case, array functions lower case, one space after every comma; cell expressions,
aggregate calls and schemas use the model's canonical forms. Statements print on one line without
the closing ``;``.

View definitions: shapes upper case (``PRODUCT(BOX(-2:0), L1(1))``), view aggregates lower case with
``AS name`` only when the name is not the default, aliases only when they differ from the array's
name, and ON equalities as ``(a.i = b.i)`` when plain, else ``(b.i = a.i * m / d + c)`` (the right
side first).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from arrayviews.language import syntax as ast

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


def _equation(q: ast.SimilaritySelect, e: ast.AxisEquation) -> str:
    right, left = f"{q.right_alias}.{e.target}", f"{q.left_alias}.{e.source}"
    if e.is_plain:
        return f"({left} = {right})"
    text = left
    if e.multiplier != 1:
        text += f" * {e.multiplier}"
    if e.divisor != 1:
        text += f" / {e.divisor}"
    if e.offset:
        text += f" {'-' if e.offset < 0 else '+'} {abs(e.offset)}"
    return f"({right} = {text})"


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


def _refresh_view(s: ast.RefreshView) -> str:
    text = f"REFRESH VIEW {s.name}"
    return text if s.strategy is None else f"{text} USING {s.strategy.upper()}"


# -- values -------------------------------------------------------------------------------------
def value_text(value: ast.Value) -> str:
    """A literal of INSERT ... VALUES."""
    if value is None:
        return "null"
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
    return "'" + text.replace("'", "''") + "'"


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
    return f"INSERT INTO {s.array} VALUES {rows}"


def _load(s: ast.Load) -> str:
    text = f"LOAD {s.array} FROM {string_text(s.path)}"
    return text if s.format is None else f"{text} AS {s.format.upper()}"


_STATEMENTS: dict[type, Callable] = {
    ast.CreateArray: _create_array,
    ast.DropArray: lambda s: f"DROP ARRAY {s.name}",
    ast.ShowArrays: lambda s: "SHOW ARRAYS",
    ast.ShowVersions: lambda s: f"SHOW VERSIONS OF {s.name}",
    ast.ShowChunks: lambda s: f"SHOW CHUNKS OF {s.name}",
    ast.ShowSchema: lambda s: f"SHOW SCHEMA OF {s.name}",
    ast.Select: _select,
    ast.Insert: _insert,
    ast.Load: _load,
    ast.Delete: lambda s: f"DELETE FROM {array_text(s.target)}",
    ast.CreateView: _create_view,
    ast.DropView: lambda s: f"DROP VIEW {s.name}",
    ast.ShowViews: lambda s: "SHOW VIEWS",
    ast.ShowStatus: lambda s: f"SHOW STATUS OF {s.name}",
    ast.RefreshView: _refresh_view,
    ast.VerifyView: lambda s: f"VERIFY VIEW {s.name}",
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
