"""Vectorised numpy evaluation of cell expressions over the columns of one chunk."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from arrayviews.model.errors import SchemaError, ValidationError
from arrayviews.model.expressions import (
    INTEGER_TYPES,
    Binary,
    Call,
    Expr,
    Literal,
    Name,
    Unary,
    infer_type,
    referenced_names,
    result_type,
)
from arrayviews.model.types import numpy_dtype, type_of_dtype

# Semantics beyond the typing rules of infer_type:
# * Every sub-expression is computed on whole columns; iif evaluates both branches.
# * Floats follow IEEE 754: x / 0 is +-inf or nan, sqrt/log of negatives give nan, nothing warns.
# * int64 arithmetic wraps around on overflow (two's complement), as numpy does.
# * x % y takes the sign of y (like Python); an integer x % 0 is 0, a float x % 0 is nan.
# * Comparisons involving nan are false, except <> which is true. An integer compared with a float
#   is converted to float64 first, as is every integer operand of / and ^.
# * least/greatest return nan if any argument is nan. round() rounds halves away from zero.
# * Float to integer casts truncate toward zero, map nan to 0 and saturate at the type's limits;
#   int64 to int32 also saturates.

_ARITHMETIC: dict[str, Callable] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.true_divide,
    "^": np.power,
}
_COMPARE: dict[str, Callable] = {
    "=": np.equal,
    "<>": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}
_FLOAT_FUNCTIONS: dict[str, Callable] = {
    "sqrt": np.sqrt,
    "exp": np.exp,
    "log": np.log,
    "log10": np.log10,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
}


def evaluate(expr: Expr, columns: Mapping[str, np.ndarray], length: int) -> np.ndarray:
    """Evaluate ``expr`` for every cell of a chunk, returning a new 1-D array of ``length`` values.

    ``columns`` maps attribute and dimension names to 1-D arrays of ``length`` values. The result's
    dtype is ``numpy_dtype(infer_type(expr, column types))``; constants are broadcast to ``length``.
    Raises ValidationError if the expression does not type-check against the columns.
    """
    types = _column_types(expr, columns, length)
    dtype = numpy_dtype(infer_type(expr, types))
    with np.errstate(all="ignore"):
        value = _Evaluator(columns).eval(expr)
    if value.dtype != dtype:  # pragma: no cover - the kernels follow the typing rules
        raise AssertionError(f"{expr.to_text()!r} evaluated to {value.dtype}, expected {dtype}")
    if value.ndim == 0:
        return np.full(length, value, dtype=dtype)
    if any(np.may_share_memory(value, column) for column in columns.values()):
        value = value.copy()
    return value


def evaluate_predicate(expr: Expr, columns: Mapping[str, np.ndarray], length: int) -> np.ndarray:
    """Evaluate a filter condition to a bool mask; raises ValidationError if ``expr`` is not bool."""
    found = infer_type(expr, _column_types(expr, columns, length))
    if found != "bool":
        raise ValidationError(f"filter predicate must be a condition, got {found}: {expr.to_text()!r}")
    return evaluate(expr, columns, length)


def _column_types(expr: Expr, columns: Mapping[str, np.ndarray], length: int) -> dict[str, str]:
    """Attribute types of the columns; the referenced ones are checked for dtype and shape."""
    used = referenced_names(expr)
    types = {}
    for name, column in columns.items():
        try:
            types[name] = type_of_dtype(column.dtype)
        except SchemaError as error:
            if name in used:
                raise ValidationError(f"column {name!r}: {error}", column=name) from None
            continue
        if name in used and column.shape != (length,):
            raise ValueError(f"column {name!r} has shape {column.shape}, expected ({length},)")
    return types


class _Evaluator:
    """Computes node values bottom-up; each value is an ndarray (0-d for constants) of the node's type."""

    def __init__(self, columns: Mapping[str, np.ndarray]) -> None:
        self.columns = columns

    def eval(self, node: Expr) -> np.ndarray:
        if isinstance(node, Name):
            return np.asarray(self.columns[node.name])
        if isinstance(node, Literal):
            return np.asarray(node.value, dtype=numpy_dtype(node.type))
        operands = [self.eval(child) for child in node.children()]
        kind = result_type(node, [type_of_dtype(operand.dtype) for operand in operands])
        if isinstance(node, Unary):
            value = _unary(node.op, operands[0], kind)
        elif isinstance(node, Binary):
            value = _binary(node.op, operands[0], operands[1], kind)
        elif isinstance(node, Call):
            value = _call(node.function, operands, kind)
        else:  # pragma: no cover - every node kind is handled above
            raise TypeError(f"cannot evaluate {node!r}")
        return np.asarray(value)


def _as(value: np.ndarray, type_name: str) -> np.ndarray:
    return value.astype(numpy_dtype(type_name), copy=False)


def _unary(op: str, operand: np.ndarray, kind: str) -> np.ndarray:
    if op == "not":
        return np.logical_not(operand)
    operand = _as(operand, kind)
    return np.negative(operand) if op == "-" else operand


def _binary(op: str, left: np.ndarray, right: np.ndarray, kind: str) -> np.ndarray:
    if op == "and":
        return np.logical_and(left, right)
    if op == "or":
        return np.logical_or(left, right)
    if op in _COMPARE:
        if left.dtype.kind != "b":
            both_int = left.dtype.kind in "iu" and right.dtype.kind in "iu"
            shared = "int64" if both_int else "float64"
            left, right = _as(left, shared), _as(right, shared)
        return _COMPARE[op](left, right)
    left, right = _as(left, kind), _as(right, kind)
    if op == "%":
        if kind in INTEGER_TYPES:
            zero = right == 0
            return np.where(zero, 0, np.remainder(left, np.where(zero, 1, right))).astype(left.dtype)
        return np.remainder(left, right)
    return _ARITHMETIC[op](left, right)


def _call(function: str, args: list[np.ndarray], kind: str) -> np.ndarray:
    if function in _FLOAT_FUNCTIONS:
        return _FLOAT_FUNCTIONS[function](_as(args[0], "float64"))
    if function == "pow":
        return np.power(_as(args[0], "float64"), _as(args[1], "float64"))
    if function == "abs":
        return np.abs(_as(args[0], kind))
    if function in ("floor", "ceil", "round"):
        value = _as(args[0], kind)
        if kind in INTEGER_TYPES:
            return value
        return {"floor": np.floor, "ceil": np.ceil, "round": _round}[function](value)
    if function in ("least", "greatest"):
        combine = np.minimum if function == "least" else np.maximum
        result = _as(args[0], kind)
        for arg in args[1:]:
            result = combine(result, _as(arg, kind))
        return result
    if function == "is_nan":
        value = args[0]
        return np.isnan(value) if value.dtype.kind == "f" else np.zeros(value.shape, dtype=np.bool_)
    if function == "iif":
        return np.where(args[0], _as(args[1], kind), _as(args[2], kind))
    return cast(args[0], kind)


def _round(value: np.ndarray) -> np.ndarray:
    """Round to the nearest integer, halves away from zero, keeping the sign of zero (as C's round)."""
    whole = np.trunc(value)
    step = np.where(np.abs(value - whole) >= 0.5, np.sign(value), 0.0)
    return np.copysign(whole + step, value)


def cast(value: np.ndarray, type_name: str) -> np.ndarray:
    """Convert ``value`` to ``type_name`` as the cast functions do (saturating for integers)."""
    dtype = numpy_dtype(type_name)
    if dtype.kind not in "iu" or value.dtype.kind == "b" or np.can_cast(value.dtype, dtype):
        return value.astype(dtype, copy=False)
    info = np.iinfo(dtype)
    if value.dtype.kind in "iu":
        return np.clip(value, info.min, info.max).astype(dtype, copy=False)
    value = np.trunc(value.astype(np.float64, copy=False))
    high = value >= -float(info.min)  # -min is 2**31 or 2**63, exactly representable
    low = value < float(info.min)
    inside = np.where(np.isnan(value) | high | low, 0.0, value).astype(dtype)
    return np.where(high, info.max, np.where(low, info.min, inside)).astype(dtype, copy=False)
