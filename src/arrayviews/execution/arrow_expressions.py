"""Spark SQL expressions compiled to pyarrow compute expressions, the expression half of
execution/arrow_sql.py: each with its Arrow type inferred as Spark (ANSI) types it, NULLs as Spark
treats them, and for each ``raise_error`` it may reach the rows that would reach it. What this
cannot compile exactly raises :class:`Unsupported`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

if TYPE_CHECKING:  # the compiler calls back into this module for every sub-expression
    from arrayviews.execution.arrow_sql import _Compiler, _Relation

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


_COMPARISONS = {exp.EQ: "equal", exp.NEQ: "not_equal", exp.GT: "greater", exp.GTE: "greater_equal"}
_COMPARISONS.update({exp.LT: "less", exp.LTE: "less_equal"})
_ARITHMETIC = {exp.Add: "add_checked", exp.Sub: "subtract_checked", exp.Mul: "multiply_checked"}
_AGGREGATES = {exp.Count: "count", exp.Min: "min", exp.Max: "max", exp.Sum: "sum"}


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

__all__ = ["Unsupported"]
