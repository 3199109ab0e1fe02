"""Where an in-process (DuckDB) query over DECIMAL values could differ from Spark's, and how it is kept exact."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import sqlglot.errors
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

#: Name of the DuckDB macro checking a DECIMAL sum against Spark's DECIMAL(38) bound.
SUM_CHECK = "av_decimal_sum"
#: The macro: DuckDB sums DECIMAL(38, s) in 128 bits and returns a sum past 38 digits as if it fit
#: (Spark, ANSI, raises); a sum within 1% of the bound is refused too (the test is in DOUBLE), so
#: Spark decides it. A sum of another type is returned as it is.
SUM_CHECK_MACRO = (
    f"CREATE MACRO {SUM_CHECK}(s) AS CASE WHEN typeof(s) LIKE 'DECIMAL%' AND abs(CAST(s AS DOUBLE)) * "
    "power(10, coalesce(TRY_CAST(regexp_extract(typeof(s), ',(\\d+)\\)', 1) AS INTEGER), 0)) >= 9.9e37 "
    "THEN error('DECIMAL sum past 38 digits') ELSE s END"
)


#: Spark functions dividing or averaging that sqlglot reads as anonymous calls.
_MEANS = frozenset({"mean", "try_avg", "try_divide"})


class DecimalRefused(Exception):
    """The query computes with DECIMAL values in a way DuckDB does not do as Spark does."""


def _spark_decimal_literal(node: exp.Expression) -> bool:
    """A number literal Spark reads as a DECIMAL (``1.5``, not ``1.5e0`` or ``1``)."""
    return (
        isinstance(node, exp.Literal) and node.is_number and "." in node.this and "e" not in node.this.lower()
    )


def _decimal_type(kind: exp.DataType | None) -> bool:
    return kind is not None and "DECIMAL" in kind.this.name


def _scale(kind: exp.DataType) -> int:
    """The scale of a DECIMAL type (sqlglot: DECIMAL(p, s)); 0 when not written, Spark's default."""
    parameters = kind.expressions
    return int(parameters[1].name) if len(parameters) > 1 else 0


def _largest_scale(tree: exp.Expression, schemas: Mapping[str, pa.Schema]) -> int | None:
    """The largest scale of a DECIMAL the query reads, casts to or writes as a literal; None when
    none does (the query then computes nothing in DECIMAL)."""
    scales = [f.type.scale for schema in schemas.values() for f in schema if pa.types.is_decimal(f.type)]
    for node in tree.walk():
        if isinstance(node, exp.DataType) and _decimal_type(node):
            scales.append(_scale(node))
        elif _spark_decimal_literal(node):
            scales.append(len(node.this.split(".", 1)[1]))
    return max(scales) if scales else None


_NAMES = {
    pa.int8(): "TINYINT",
    pa.int16(): "SMALLINT",
    pa.int32(): "INT",
    pa.int64(): "BIGINT",
    pa.float32(): "FLOAT",
    pa.float64(): "DOUBLE",
    pa.string(): "STRING",
    pa.large_string(): "STRING",
    pa.bool_(): "BOOLEAN",
    pa.date32(): "DATE",
}


def _spark_name(kind: pa.DataType) -> str:
    """Spark's name of an Arrow column type; UNKNOWN (treated as possibly DECIMAL) for the rest."""
    if pa.types.is_decimal(kind):
        return f"DECIMAL({kind.precision}, {kind.scale})"
    if pa.types.is_timestamp(kind):
        return "TIMESTAMP"
    return _NAMES.get(kind, "UNKNOWN")


def annotated(tree: exp.Expression, schemas: Mapping[str, pa.Schema]) -> exp.Expression | None:
    """A copy of the query with sqlglot's types (decimal literals typed DECIMAL, as Spark reads
    them); None when sqlglot cannot type it."""
    copy = tree.copy()
    for node in list(copy.walk()):
        if _spark_decimal_literal(node):
            whole, fraction = node.this.lstrip("-").split(".", 1)
            digits = max(len(whole.lstrip("0")) + len(fraction), len(fraction), 1)
            node.replace(exp.cast(node.copy(), exp.DataType.build(f"DECIMAL({digits}, {len(fraction)})")))
    schema = {name: {f.name: _spark_name(f.type) for f in schema} for name, schema in schemas.items()}
    try:
        qualified = qualify(copy, schema=schema, dialect="spark", validate_qualify_columns=False)
        return annotate_types(qualified, schema=schema, dialect="spark")
    except (sqlglot.errors.SqlglotError, KeyError, ValueError, TypeError, AttributeError):
        return None


def _may_be_decimal(node: exp.Expression) -> bool:
    kind = node.type
    return kind is None or kind.this == exp.DataType.Type.UNKNOWN or _decimal_type(kind)


def guard_decimals(tree: exp.Expression, schemas: Mapping[str, pa.Schema]) -> exp.Expression:
    """The Spark query tree kept exact where it computes with DECIMAL values, or DecimalRefused.

    Spark (ANSI) divides DECIMALs in DECIMAL (its own result precision and scale, HALF_UP), and its
    ``avg`` of a DECIMAL is a DECIMAL; DuckDB divides and averages them in DOUBLE: refused. Spark
    rounds a product, or a sum of two values with more than 6 decimal places, that needs more than 38
    digits, where DuckDB keeps (or refuses) the exact value: refused. DuckDB returns a ``sum`` past
    38 digits where Spark raises: each ``sum`` is wrapped in the macro ``SUM_CHECK_MACRO``. A query
    that reads, casts to or writes no DECIMAL is returned unchanged (and costs one walk of the tree).
    """
    largest = _largest_scale(tree, schemas)
    if largest is None:
        return tree
    typed = annotated(tree, schemas)
    nodes = list(typed.walk()) if typed is not None else None

    def refuse_where(kinds: tuple[type, ...], what: str, names: frozenset[str] = frozenset()) -> None:
        for node in nodes if nodes is not None else tree.walk():
            if isinstance(node, kinds) or (isinstance(node, exp.Anonymous) and node.name.lower() in names):
                operands = [node.this, node.args.get("expression"), *node.expressions]
                if nodes is None or any(
                    _may_be_decimal(o) for o in operands if isinstance(o, exp.Expression)
                ):
                    raise DecimalRefused(f"{what} of a DECIMAL ({node.sql('spark')[:120]})")

    refuse_where(
        (exp.Div, exp.SafeDivide, exp.Mod, exp.Avg), "DuckDB divides in DOUBLE: a division or average", _MEANS
    )
    refuse_where((exp.Mul,), "Spark may round a product past 38 digits: a product")
    if largest > 6:
        refuse_where((exp.Add, exp.Sub), "Spark may round a sum past 38 digits at scale > 6: a sum")
    for node in list(tree.find_all(exp.Sum)):
        target = node.parent if isinstance(node.parent, exp.Window) else node
        checked: exp.Expression = exp.Anonymous(this=SUM_CHECK, expressions=[target.copy()])
        if isinstance(target.parent, exp.Select) and target.arg_key == "expressions":
            checked = exp.alias_(checked, target.sql("duckdb"), quoted=True)  # the name DuckDB gives it
        target.replace(checked)
    return tree


__all__ = ["SUM_CHECK", "SUM_CHECK_MACRO", "DecimalRefused", "annotated", "guard_decimals"]
