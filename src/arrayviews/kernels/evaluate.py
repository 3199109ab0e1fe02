"""Vectorised numpy evaluation of cell expressions with Spark SQL's semantics (ANSI mode, Spark 4.1).

Every rule below was checked against Spark 4.1.1 (``spark.sql`` / ``selectExpr``); the tests compare
this evaluator with Spark itself on random expressions and data (tests/test_expression_spark.py).

Values and NULLs
  * Each node yields values and a validity mask; a NULL operand makes arithmetic, comparisons, casts
    and functions NULL (three-valued logic for AND, OR, NOT: ``false AND NULL`` is false,
    ``true OR NULL`` true). ``IS [NOT] NULL``, ``<=>``, ``isnan`` and ``coalesce`` are never NULL
    unless stated. ``ln``/``log``/``log10``/``log2`` of a number <= 0 are NULL; ``nullif(a, b)`` is NULL
    where ``a = b``; ``CASE`` without ELSE is NULL where no WHEN holds; ``try_*`` are NULL instead of
    failing. ``least``/``greatest`` skip NULLs (NULL only if all are). ``x IN (...)`` is NULL if ``x`` is,
    or if nothing matched and a listed value is NULL.
Numbers
  * Integers never wrap: ``+ - *``, unary minus and ``abs`` raise on INT/BIGINT overflow, ``DIV`` raises
    for ``-2^63 DIV -1``; ``/``, ``%`` and ``DIV`` raise on a zero divisor (floats too, -0.0 included).
    ``try_add/try_subtract/try_multiply/try_divide`` give NULL there instead (``try_divide`` does not
    even evaluate its left operand where the divisor is 0).
  * ``/`` is DOUBLE division. ``%`` is Java's remainder (sign of the dividend; ``fmod`` for floats).
    ``DIV`` truncates toward zero. FLOAT arithmetic is 32-bit IEEE; mixing an integer and a FLOAT
    gives DOUBLE. ``sqrt`` of a negative number is NaN. ``pow`` is Java's: ``pow(-inf, 0.5)`` is
    Infinity (not NaN, as sqrt would give), ``pow(1, NaN)`` and
    ``pow(-1, Infinity)`` are NaN. ``log(b, x)`` is ``ln(x) / ln(b)`` and ``log2(x)`` is
    ``ln(x) / ln(2)`` (so not always exact).
  * ``floor``/``ceil`` give BIGINT: NaN becomes 0, values beyond the range saturate (no error).
    ``round`` rounds halves away from zero (HALF_UP) and never gives -0.0.
  * NaN equals NaN and is larger than every other number, infinity included; -0.0 equals 0.0.
    ``least``/``greatest`` use that order (``greatest(1, NaN)`` is NaN) and keep the first of equal
    values. ``isnan`` of an integer is false, of NULL false.
  * ``CAST``: to an integer truncates toward zero and raises if the value (or NaN, or an infinity)
    is outside the range; a DOUBLE of exactly 2^63 becomes 9223372036854775807 (Spark compares with
    the bound as a double). DOUBLE to FLOAT rounds (to infinity beyond the FLOAT range). Numbers to
    BOOLEAN: non-zero is true (NaN too); BOOLEAN to numbers: 1 and 0.
  * INT compared with FLOAT, or BIGINT with DOUBLE, compares as DOUBLE (so 2^53 + 1 = 2^53.0 is true).
Errors (which cells are evaluated)
  * An error is raised only for a cell where Spark evaluates the failing node. Spark evaluates the
    right operand of a NULL-intolerant binary operator or function only where the left one is not
    NULL (``/``, ``%``, ``DIV``: the divisor first, the dividend only where it is not NULL); the right
    operand of AND only where the left is not false, of OR only where it is not true; a CASE/if
    branch only where it is chosen, a later WHEN only where the earlier ones were not true;
    ``coalesce`` arguments until the first non-NULL; an IN list item until one matched;
    ``nanvl(a, b)`` evaluates ``b`` only where ``a`` is NaN; BETWEEN is ``x >= low AND x <= high``.
  * Except for one operand Spark shares: ``x`` of ``x BETWEEN low AND high`` and ``a`` of
    ``nullif(a, b)`` are a common expression (Spark's ``With``), which the optimizer rule
    RewriteWithExpression (not optional) computes in a projection of its own, for every row, unless
    it is cheap (a column or a constant) or the BETWEEN/nullif sits in a branch Spark may skip: an
    ``if`` branch, a CASE part after the first condition, a ``coalesce`` argument after the first,
    ``b`` of ``nanvl(a, b)``. So ``false AND (a + b BETWEEN 0 AND 1)`` raises where ``a + b``
    overflows on any row, and so does a ``try_divide`` by NULL of an expression holding one (checked
    against Spark 4.1.1). Such operands are evaluated first, for every cell.
  * These are Spark's evaluation rules. Spark's optimizer may in addition rewrite constant parts
    (``x * 2 * 0`` becomes ``x * 0``, ``(x + 1 > 0) AND false`` becomes ``false``) and so skip or move
    some errors; this evaluator does not rewrite: it may raise where optimised Spark would not.
  * Errors are :class:`~arrayviews.model.errors.ValidationError` naming the failing part, the whole
    expression, the columns the part reads and their values at the first failing cell.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrayviews.kernels import spark_arithmetic as sa
from arrayviews.model.errors import SchemaError, ValidationError
from arrayviews.model.expression_types import EXPRESSION_STORAGE_TYPES, like_regex
from arrayviews.model.expressions import (
    COMPARISONS,
    VOID,
    Between,
    Binary,
    Call,
    Case,
    Cast,
    Expr,
    In,
    IsNull,
    Literal,
    Name,
    Unary,
    coercion,
    referenced_names,
    resolve_names,
    sql_name,
)
from arrayviews.model.types import computing_problem, type_of_dtype
from arrayviews.storage import codec

_TRY = {"try_add": "+", "try_subtract": "-", "try_multiply": "*", "try_divide": "/"}
_TRY_HINT = {"+": "try_add", "-": "try_subtract", "*": "try_multiply", "/": "try_divide", "div": "try_divide"}
# A node's values in its dtype and where they are not NULL; either may be 0-d (a constant).
Value = tuple[np.ndarray, np.ndarray]
_ALL = np.True_  # every cell: valid, or evaluated


def _both(*masks) -> np.ndarray:
    """The cells in every mask, without array passes for the constant masks (all or none)."""
    result = _ALL
    for mask in masks:
        if mask is np.False_:
            return mask
        if mask is not _ALL:
            result = mask if result is _ALL else result & mask
    return result


def evaluate(
    expr: Expr,
    columns: Mapping[str, np.ndarray],
    length: int,
    nulls: Mapping[str, np.ndarray] | None = None,
) -> np.ma.MaskedArray:
    """Evaluate ``expr`` for every cell of a chunk: a masked array of ``length`` values, masked where NULL.

    ``columns`` maps attribute and dimension names to 1-D arrays of ``length`` values; ``nulls`` maps
    names of nullable columns to masks of their NULL cells (the values there are ignored). The dtype
    is that of the expression's type (an always-NULL ``void`` expression gives a fully masked bool
    array). Raises ValidationError if the expression does not type-check against the columns, or
    where Spark would raise (see the module docstring).
    """
    evaluator = _Evaluator(expr, columns, nulls or {}, length)
    values, valid = evaluator.run()
    return np.ma.MaskedArray(values, mask=~valid)


def evaluate_predicate(
    expr: Expr,
    columns: Mapping[str, np.ndarray],
    length: int,
    nulls: Mapping[str, np.ndarray] | None = None,
) -> np.ndarray:
    """The cells where the condition ``expr`` is TRUE (not false, not NULL), as a bool array.

    Raises ValidationError if ``expr`` is not a BOOLEAN expression.
    """
    evaluator = _Evaluator(expr, columns, nulls or {}, length)
    if evaluator.kind(evaluator.root) not in ("bool", VOID):
        found = sql_name(evaluator.kind(evaluator.root))
        raise ValidationError(f"filter predicate must be a condition, got {found}: {expr.to_text()!r}")
    values, valid = evaluator.run()
    return valid & values.astype(bool)


class _Evaluator:
    """Computes node values top-down with the mask of cells Spark evaluates each node for."""

    def __init__(
        self, expr: Expr, columns: Mapping[str, np.ndarray], nulls: Mapping[str, np.ndarray], length: int
    ) -> None:
        self.length = length
        types = _column_types(expr, columns, length)
        self.root = resolve_names(expr, types)
        self.columns = columns
        self.nulls = nulls
        self.types: dict[int, tuple[str, tuple[str, ...]]] = {}
        self._type(self.root, types)
        # operands Spark computes for every row, by the id of their BETWEEN/nullif; filled by run()
        self.shared: dict[int, Value] = {}

    # -- typing ------------------------------------------------------------------------------
    def _type(self, node: Expr, names: Mapping[str, str]) -> str:
        key = id(node)
        if key not in self.types:
            if isinstance(node, Name):
                self.types[key] = (names[node.name], ())
            else:
                child_types = [self._type(child, names) for child in node.children()]
                try:
                    self.types[key] = coercion(node, child_types)
                except ValidationError as error:
                    raise ValidationError(f"{error} (in expression {self.root.to_text()!r})") from None
        return self.types[key][0]

    def kind(self, node: Expr) -> str:
        return self.types[id(node)][0]

    def operand_kinds(self, node: Expr) -> tuple[str, ...]:
        return self.types[id(node)][1]

    # -- driver ------------------------------------------------------------------------------
    def run(self) -> Value:
        """Values and validity of the whole expression, as fresh arrays of ``length``."""
        with np.errstate(all="ignore"):
            for node in _shared_operands_computed_first(self.root):
                self.shared[id(node)] = self.eval(node.children()[0], _ALL)
            values, valid = self.eval(self.root, _ALL)
        if values.ndim == 0:
            values = np.full(self.length, values, dtype=values.dtype)
        elif any(np.may_share_memory(values, column) for column in self.columns.values()):
            values = values.copy()
        return values, np.array(np.broadcast_to(valid, (self.length,)), dtype=bool)

    def eval(self, node: Expr, active: np.ndarray) -> Value:
        """``node``'s values and validity; ``active`` marks the cells Spark evaluates it for."""
        if isinstance(node, Literal):  # constants stay 0-d and broadcast
            value = ("" if node.type == "string" else 0) if node.value is None else node.value
            return np.asarray(value, dtype=sa.DTYPES[node.type]), np.bool_(node.value is not None)
        if isinstance(node, Name):
            values = np.asarray(self.columns[node.name])
            null = self.nulls.get(node.name)
            return values, (_ALL if null is None else ~np.asarray(null, dtype=bool))
        if isinstance(node, Unary):
            return self.unary(node, active)
        if isinstance(node, Binary):
            return self.binary(node, active)
        if isinstance(node, Call):
            return self.call(node, active)
        if isinstance(node, Cast):
            return self.cast(node, active)
        if isinstance(node, IsNull):
            _, valid = self.eval(node.operand, active)
            return (valid if node.negated else ~valid), _ALL
        if isinstance(node, In):
            return self.in_list(node, active)
        if isinstance(node, Between):
            return self.between(node, active)
        if isinstance(node, Case):
            return self.case(node, active)
        raise TypeError(f"cannot evaluate {node!r}")  # pragma: no cover - every node kind is handled

    def child(self, node: Expr, index: int, active: np.ndarray) -> Value:
        """Child ``index`` of ``node``, converted to the type ``node`` computes in."""
        child = node.children()[index]
        values, valid = self.eval(child, active)
        return self.convert(values, self.kind(child), self.operand_kinds(node)[index]), valid

    @staticmethod
    def convert(values: np.ndarray, source: str, target: str) -> np.ndarray:
        """Spark's implicit widening (exact between integers, rounding from BIGINT to DOUBLE)."""
        if source == target or target == VOID:
            return values
        if target == "string":  # only NULL converts to STRING: its (never read) value is ""
            return np.asarray("", dtype=object)
        return values.astype(sa.DTYPES[target], copy=False)

    # -- errors ------------------------------------------------------------------------------
    def fail(self, bad: np.ndarray, node: Expr, problem: str, hint: str = "") -> None:
        """Raise ValidationError if ``bad`` holds for some cell (``bad`` is already restricted to the
        cells where Spark evaluates ``node`` with non-NULL operands)."""
        bad = np.broadcast_to(bad, (self.length,))
        if not bad.any():
            return
        row = int(np.argmax(bad))
        names = sorted(referenced_names(node))
        read = ", ".join(f"{name} = {self.show(name, row)}" for name in names)
        where = f"; it reads {read}" if read else ""
        operands = ", ".join(self.show_node(child, row) for child in node.children())
        message = (
            f"{problem} in {node.to_text()!r} at the first failing cell (operand values {operands}){where}; "
            f"in expression {self.root.to_text()!r}"
        )
        if hint:
            message += f"; {hint}"
        first_value = _item(np.asarray(self.columns[names[0]])[row]) if names else None
        raise ValidationError(message, column=names[0] if names else None, value=first_value)

    def show(self, name: str, row: int) -> str:
        null = self.nulls.get(name)
        if null is not None and null[row]:
            return "NULL"
        return repr(_item(np.asarray(self.columns[name])[row]))

    def show_node(self, node: Expr, row: int) -> str:
        with np.errstate(all="ignore"):
            values, valid = self.eval(node, np.False_)
        values, valid = np.broadcast_to(values, (self.length,)), np.broadcast_to(valid, (self.length,))
        return repr(_item(values[row])) if valid[row] else "NULL"

    # -- operators ---------------------------------------------------------------------------
    def unary(self, node: Unary, active: np.ndarray) -> Value:
        values, valid = self.child(node, 0, active)
        kind = self.kind(node)
        if node.op == "not":
            return ~values.astype(bool, copy=False), valid
        if node.op == "~":
            return np.invert(values), valid
        if node.op == "+":
            return values, valid
        result, overflow = sa.negate(values, kind)
        self.fail(
            _both(overflow, active, valid), node, f"{sql_name(kind)} overflow: the negation does not fit"
        )
        return result, valid

    def binary(self, node: Binary, active: np.ndarray) -> Value:
        op = node.op
        if op in ("and", "or"):
            return self.logical(node, active)
        if op in ("/", "%", "div"):
            return self.division(node, active, op, trying=False)
        if op == "<=>":
            left, left_ok = self.child(node, 0, active)
            right, right_ok = self.child(node, 1, active)
            same = np.where(left_ok & right_ok, sa.equal(left, right), ~left_ok & ~right_ok)
            return same, _ALL
        left, left_ok = self.child(node, 0, active)
        right, right_ok = self.child(node, 1, _both(active, left_ok))
        valid = _both(left_ok, right_ok)
        if op in COMPARISONS:
            return sa.compare(left, right, op), valid
        if op in ("&", "|", "^"):
            return sa.bitwise(left, right, op), valid
        return self.arithmetic(node, op, left, right, _both(valid, active), trying=False)

    def arithmetic(
        self, node: Expr, op: str, left: np.ndarray, right: np.ndarray, checked: np.ndarray, trying: bool
    ) -> Value:
        kind = self.kind(node)
        result, overflow = sa.add(left, right, kind, op)
        valid = checked
        if trying:
            return result, _both(valid, ~overflow)
        self.fail(
            _both(overflow, checked),
            node,
            f"{sql_name(kind)} overflow: the result is outside the {sql_name(kind)} range",
            f"use {_TRY_HINT[op]} to get NULL instead",
        )
        return result, valid

    def division(self, node: Expr, active: np.ndarray, op: str, trying: bool) -> Value:
        # Spark evaluates the divisor first, and the dividend only where the divisor is not NULL
        # (for try_divide: not NULL and not zero).
        right, right_ok = self.child(node, 1, active)
        zero_divisor = right == 0
        left_active = _both(active, right_ok, ~zero_divisor if trying else _ALL)
        left, left_ok = self.child(node, 0, left_active)
        checked = _both(left_active, left_ok)
        kind = self.kind(node)
        if op == "/":
            result, zero = sa.divide(left, right)
        elif op == "%":
            result, zero = sa.remainder(left, right, kind)
        else:
            result, zero, overflow = sa.integral_divide(left, right)
            self.fail(_both(overflow, checked), node, "BIGINT overflow in DIV (-9223372036854775808 DIV -1)")
        if trying:
            return result, checked & ~zero
        word = "remainder" if op == "%" else "division"
        hint = f"use {_TRY_HINT[op]} to get NULL instead" if op in _TRY_HINT else ""
        self.fail(_both(zero, checked), node, f"{word} by zero", hint)
        return result, right_ok & left_ok

    def logical(self, node: Binary, active: np.ndarray) -> Value:
        left, left_ok = self.child(node, 0, active)
        left = left.astype(bool, copy=False)
        if node.op == "and":
            right, right_ok = self.child(
                node, 1, _both(active, left if left_ok is _ALL else ~(left_ok & ~left))
            )
            right = right.astype(bool, copy=False)
            if left_ok is _ALL and right_ok is _ALL:
                return left & right, _ALL
            true = left_ok & left & right_ok & right
            false = (left_ok & ~left) | (right_ok & ~right)
        else:
            right, right_ok = self.child(
                node, 1, _both(active, ~left if left_ok is _ALL else ~(left_ok & left))
            )
            right = right.astype(bool, copy=False)
            if left_ok is _ALL and right_ok is _ALL:
                return left | right, _ALL
            true = (left_ok & left) | (right_ok & right)
            false = left_ok & ~left & right_ok & ~right
        return true, true | false

    # -- predicates --------------------------------------------------------------------------
    def in_list(self, node: In, active: np.ndarray) -> Value:
        value, value_ok = self.child(node, 0, active)
        looking = _both(active, value_ok)
        matched = np.zeros(self.length, dtype=bool)
        saw_null = np.zeros(self.length, dtype=bool)
        for index in range(1, len(node.children())):
            item, item_ok = self.child(node, index, looking)
            hit = looking & item_ok & sa.equal(value, item)
            saw_null |= looking & ~item_ok
            matched |= hit
            looking = looking & ~hit
        valid = value_ok & (matched | ~saw_null)
        return (~matched if node.negated else matched), valid

    def between(self, node: Between, active: np.ndarray) -> Value:
        operand, low, high = node.children()
        value, value_ok = self.shared.get(id(node)) or self.eval(operand, active)
        source = self.kind(operand)
        first = self.operand_kinds(node)[0]
        second = self.operand_kinds(node)[2]
        low_values, low_ok = self.child(node, 1, _both(active, value_ok))
        at_least = sa.compare(self.convert(value, source, first), low_values, ">=")
        at_least_ok = value_ok & low_ok
        high_active = active & value_ok & ~(at_least_ok & ~at_least)
        high_values, high_ok = self.child(node, 2, high_active)
        at_most = sa.compare(self.convert(value, source, second), high_values, "<=")
        at_most_ok = value_ok & high_ok
        true = at_least_ok & at_least & at_most_ok & at_most
        false = (at_least_ok & ~at_least) | (at_most_ok & ~at_most)
        return (false if node.negated else true), true | false

    def case(self, node: Case, active: np.ndarray) -> Value:
        dtype = sa.DTYPES[self.kind(node)]
        result = _blank(dtype, self.length)
        valid = np.zeros(self.length, dtype=bool)
        # one flag per cell: ``active`` may be a constant (a CASE under ``false AND ...``), and the
        # branches narrow it cell by cell
        remaining = np.array(np.broadcast_to(active, (self.length,)), dtype=bool)
        for index in range(len(node.branches)):
            condition, condition_ok = self.child(node, 2 * index, remaining)
            chosen = remaining & condition_ok & condition.astype(bool, copy=False)
            values, values_ok = self.child(node, 2 * index + 1, chosen)
            result = np.where(chosen, values, result)
            valid = np.where(chosen, values_ok, valid)
            remaining &= ~chosen
        if node.otherwise is not None:
            values, values_ok = self.child(node, 2 * len(node.branches), remaining)
            result = np.where(remaining, values, result)
            valid = np.where(remaining, values_ok, valid)
        return result.astype(dtype), valid

    # -- calls -------------------------------------------------------------------------------
    def call(self, node: Call, active: np.ndarray) -> Value:
        name = node.function
        if name == "if":
            condition, condition_ok = self.child(node, 0, active)
            first = condition_ok & condition.astype(bool, copy=False)
            a, a_ok = self.child(node, 1, _both(active, first))
            b, b_ok = self.child(node, 2, _both(active, ~first))
            valid = _ALL if a_ok is _ALL and b_ok is _ALL else np.where(first, a_ok, b_ok)
            return np.where(first, a, b), valid
        if name == "coalesce":
            result = _blank(sa.DTYPES[self.kind(node)], self.length)
            valid = np.zeros(self.length, dtype=bool)
            # one flag per cell, as in CASE: ``active`` may be a constant (``false AND coalesce(...)``)
            remaining = np.array(np.broadcast_to(active, (self.length,)), dtype=bool)
            for index in range(len(node.args)):
                values, values_ok = self.child(node, index, remaining)
                take = remaining & values_ok
                result = np.where(take, values, result)
                valid |= take
                remaining &= ~values_ok
            return result, valid
        if name in ("least", "greatest"):
            return self.extreme(node, active, name)
        if name == "nullif":
            first, first_ok = self.shared.get(id(node)) or self.eval(node.args[0], active)
            left = self.convert(first, self.kind(node.args[0]), self.operand_kinds(node)[0])
            right, right_ok = self.child(node, 1, _both(active, first_ok))
            same = right_ok & sa.equal(left, right)
            return first, first_ok & ~same
        if name == "nanvl":
            value, value_ok = self.child(node, 0, active)
            nan = np.isnan(value)
            other, other_ok = self.child(node, 1, _both(active, value_ok, nan))
            return np.where(nan, other, value), value_ok & np.where(nan, other_ok, True)
        if name == "isnan":
            value, value_ok = self.child(node, 0, active)
            return value_ok & np.isnan(value), _ALL
        if name == "length":  # characters (code points), as Spark counts them
            value, value_ok = self.child(node, 0, active)
            if value.ndim == 0:
                return np.asarray(len(value.item()), dtype=np.int32), value_ok
            lengths = pc.utf8_length(codec.text_array(value)).to_numpy(zero_copy_only=False)
            return lengths.astype(np.int32, copy=False), value_ok
        if name == "like":
            value, value_ok = self.child(node, 0, active)
            regex = like_regex(node.args[1].value)
            if value.ndim == 0:
                matched = pc.match_substring_regex(pa.array([value.item()], pa.string()), regex)
                return np.bool_(matched[0].as_py()), value_ok
            matched = pc.match_substring_regex(codec.text_array(value), regex)
            return matched.to_numpy(zero_copy_only=False).astype(bool, copy=False), value_ok
        if name in _TRY:
            op = _TRY[name]
            if op == "/":
                return self.division(node, active, op, trying=True)
            left, left_ok = self.child(node, 0, active)
            right, right_ok = self.child(node, 1, _both(active, left_ok))
            return self.arithmetic(node, op, left, right, _both(left_ok, right_ok), trying=True)
        if len(node.args) == 2:  # pow, log(base, x): the second only where the first is not NULL
            first, first_ok = self.child(node, 0, active)
            second, second_ok = self.child(node, 1, _both(active, first_ok))
            valid = _both(first_ok, second_ok)
            if name == "pow":
                return sa.power(first, second), valid
            (numerator, bad_x), (denominator, bad_base) = (
                sa.logarithm(second, "ln"),
                sa.logarithm(first, "ln"),
            )
            return numerator / denominator, valid & ~bad_x & ~bad_base
        value, valid = self.child(node, 0, active)
        return self.function(node, name, value, valid, active)

    def function(
        self, node: Call, name: str, value: np.ndarray, valid: np.ndarray, active: np.ndarray
    ) -> Value:
        kind = self.operand_kinds(node)[0]
        if name in ("ln", "log", "log10", "log2"):
            result, undefined = sa.logarithm(value, name)
            return result, valid & ~undefined
        if name in ("sqrt", "exp", "sin", "cos", "tan"):
            return getattr(np, name)(value), valid
        if name in ("floor", "ceil"):
            return sa.floor_or_ceil(value, kind, name), valid
        if name == "round":
            return sa.round_half_up(value, kind), valid
        result, overflow = sa.absolute(value, kind)  # abs
        self.fail(_both(overflow, active, valid), node, f"{sql_name(kind)} overflow: abs() does not fit")
        return result, valid

    def extreme(self, node: Call, active: np.ndarray, name: str) -> Value:
        result, valid = self.child(node, 0, active)
        for index in range(1, len(node.args)):
            values, values_ok = self.child(node, index, active)
            better = sa.less(values, result) if name == "least" else sa.less(result, values)
            # NULLs are skipped; of equal values the first stays
            take = better if valid is _ALL else (~valid | better)
            take = _both(values_ok, take)
            result = np.where(take, values, result)
            valid = _ALL if valid is _ALL or values_ok is _ALL else valid | values_ok
        return result, valid

    def cast(self, node: Cast, active: np.ndarray) -> Value:
        values, valid = self.eval(node.operand, active)
        source = self.kind(node.operand)
        result, bad = sa.cast(values, source, node.type)
        shown = sql_name(node.type)
        self.fail(
            _both(bad, active, valid),
            node,
            f"cannot cast to {shown}: the value is outside the {shown} range (or NaN)",
            "filter those cells first, or cast to a wider type",
        )
        return result, valid


def _shared_operands_computed_first(root: Expr) -> list[Expr]:
    """The BETWEEN and nullif nodes whose first operand Spark computes for every row, inner ones first.

    Spark 4.1 replaces ``x BETWEEN l AND h`` and ``nullif(x, y)`` by expressions that share ``x``
    (``With``); RewriteWithExpression moves a shared ``x`` that is not a column or a constant into a
    projection below, unless the node lies in an input of If, CaseWhen, Coalesce or NaNvl that is not
    always evaluated (there it is inlined). A moved ``x`` is a projection of its own, so nodes inside
    it are judged afresh.
    """
    found: list[Expr] = []

    def visit(node: Expr, in_branch: bool) -> None:
        shares = isinstance(node, Between) or (isinstance(node, Call) and node.function == "nullif")
        moved = (
            shares
            and not in_branch
            and referenced_names(node.children()[0])
            and not isinstance(node.children()[0], Name)
        )
        for index, child in enumerate(node.children()):
            if moved and index == 0:
                visit(child, False)
            else:
                visit(child, in_branch or _maybe_skipped(node, index))
        if moved:
            found.append(node)

    visit(root, False)
    return found


def _maybe_skipped(node: Expr, index: int) -> bool:
    """Whether child ``index`` of ``node`` is an input Spark's conditional expressions may skip."""
    if isinstance(node, Case):  # the first WHEN condition is always evaluated
        return index > 0
    return isinstance(node, Call) and node.function in ("if", "coalesce", "nanvl") and index > 0


def _item(value: object) -> object:
    return value.item() if isinstance(value, np.generic | np.ndarray) else value


def _blank(dtype: np.dtype, length: int) -> np.ndarray:
    return np.full(length, "", dtype=object) if dtype.kind == "O" else np.zeros(length, dtype=dtype)


def _column_types(expr: Expr, columns: Mapping[str, np.ndarray], length: int) -> dict[str, str]:
    """Attribute types of the columns; the ones the expression reads are checked for dtype and shape."""
    used = {name.lower() for name in referenced_names(expr)}
    types = {}
    for name, column in columns.items():
        column = np.asarray(column)
        try:
            types[name] = type_of_dtype(column.dtype)
            problem = None
            if types[name] not in EXPRESSION_STORAGE_TYPES:
                problem = computing_problem(types[name], "a cell expression")
            if problem is not None:
                del types[name]
                raise SchemaError(problem)
        except SchemaError as error:
            if name.lower() in used:
                raise ValidationError(f"column {name!r}: {error}", column=name) from None
            continue
        if name.lower() in used and column.shape != (length,):
            raise ValueError(f"column {name!r} has shape {column.shape}, expected ({length},)")
    return types
