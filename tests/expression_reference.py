"""A plain-Python reference for Spark SQL cell expressions: one cell at a time, Python ints and floats.

Independent of arrayviews' evaluator and typing (its own type rules, its own arithmetic with exact
Python integers, ``fractions`` and ``decimal``): it transcribes Spark's row-at-a-time ``eval``, so the
order in which it evaluates operands (and so which errors it meets) is Spark's. Spark itself is the
other reference (tests/test_expression_spark.py); this one needs no JVM.
"""

from __future__ import annotations

import math
import struct
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

from arrayviews.model.expressions import (
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
)

BOUNDS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
INTS = ("int32", "int64")
FLOATS = ("float32", "float64")
NUMBERS = INTS + FLOATS
_FLOAT32_MAX = Fraction(struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0])


class SparkError(Exception):
    """Spark would raise (overflow, division by zero, invalid cast) for this cell."""


class TypeProblem(Exception):
    """Spark's analyzer would reject the expression."""


# -- types -----------------------------------------------------------------------------------------


def widen(a: str, b: str) -> str:
    if a == b:
        return a
    if "void" in (a, b):
        return b if a == "void" else a
    if "bool" in (a, b):
        raise TypeProblem(f"{a} with {b}")
    return "int64" if a in INTS and b in INTS else "float64"


def _numeric(kind: str, null_as: str = "float64") -> str:
    if kind == "void":
        return null_as
    if kind not in NUMBERS:
        raise TypeProblem(kind)
    return kind


def type_of(node: Expr, columns: dict[str, str]) -> str:
    """The Spark type of ``node`` (as an attribute type name or "void")."""
    kinds = [type_of(child, columns) for child in node.children()]
    if isinstance(node, Literal):
        return node.type
    if isinstance(node, Name):
        return columns[node.name]
    if isinstance(node, Unary):
        if node.op == "not":
            if kinds[0] not in ("bool", "void"):
                raise TypeProblem("NOT")
            return "bool"
        if node.op == "~":
            if kinds[0] not in (*INTS, "void"):
                raise TypeProblem("~")
            return "int32" if kinds[0] == "void" else kinds[0]
        return _numeric(kinds[0])
    if isinstance(node, Binary):
        return _binary_type(node.op, *kinds)
    if isinstance(node, Cast):
        if kinds[0] not in (*NUMBERS, "bool", "void"):
            raise TypeProblem("CAST")
        return node.type
    if isinstance(node, IsNull):
        return "bool"
    if isinstance(node, In):
        shared = "void"
        for kind in kinds:
            shared = widen(shared, kind)
        return "bool"
    if isinstance(node, Between):
        widen(kinds[0], kinds[1]), widen(kinds[0], kinds[2])
        return "bool"
    if isinstance(node, Case):
        values = kinds[1 : 2 * len(node.branches) : 2] + ([kinds[-1]] if node.otherwise is not None else [])
        if any(k != "bool" for k in kinds[0 : 2 * len(node.branches) : 2]):
            raise TypeProblem("CASE condition")
        shared = "void"
        for kind in values:
            shared = widen(shared, kind)
        return shared
    return _call_type(node, kinds)


def _binary_type(op: str, left: str, right: str) -> str:
    if op in ("and", "or"):
        if left not in ("bool", "void") or right not in ("bool", "void"):
            raise TypeProblem(op)
        return "bool"
    if op in ("=", "<>", "<", "<=", ">", ">=", "<=>"):
        widen(left, right)
        return "bool"
    if op in ("&", "|", "^", "div"):
        for kind in (left, right):
            if kind not in (*INTS, "void"):
                raise TypeProblem(op)
        if op == "div":
            return "int64"
        return widen("int32" if left == "void" else left, "int32" if right == "void" else right)
    for kind in (left, right):
        _numeric(kind)
    if op == "/":
        return "float64"
    if left == right == "void":
        return "float64"
    return widen(left, right)


def _call_type(node: Call, kinds: list[str]) -> str:
    name = node.function
    if name == "if":
        if kinds[0] not in ("bool", "void"):
            raise TypeProblem("if")
        return widen(kinds[1], kinds[2])
    if name in ("coalesce", "least", "greatest"):
        shared = "void"
        for kind in kinds:
            shared = widen(shared, kind)
        return shared
    if name == "nullif":
        widen(kinds[0], kinds[1])
        return kinds[0]
    if name.startswith("try_"):
        op = {"try_add": "+", "try_subtract": "-", "try_multiply": "*", "try_divide": "/"}[name]
        return _binary_type(op, *kinds)
    if name == "nanvl":
        first, second = (_numeric(k, "void") for k in kinds)
        first = "float64" if first in ("void", *INTS) else first
        second = first if second == "void" else ("float64" if second in INTS else second)
        return first if first == second else "float64"
    if name == "isnan":
        _numeric(kinds[0])
        return "bool"
    if name in ("floor", "ceil"):
        _numeric(kinds[0])
        return "int64"
    if name in ("abs", "round"):
        return _numeric(kinds[0])
    for kind in kinds:
        _numeric(kind)
    return "float64"


# -- values ----------------------------------------------------------------------------------------


def to_float32(value) -> float:
    """Round an int or float to the nearest FLOAT (ties to even), infinite beyond the range."""
    if isinstance(value, float) and not math.isfinite(value):
        return value
    exact = Fraction(value)
    if exact == 0:
        return math.copysign(0.0, value) if isinstance(value, float) else 0.0
    sign = -1 if exact < 0 else 1
    magnitude = abs(exact)
    exponent = math.floor(math.log2(magnitude))
    while Fraction(2) ** exponent > magnitude:
        exponent -= 1
    while Fraction(2) ** (exponent + 1) <= magnitude:
        exponent += 1
    step = Fraction(2) ** (max(exponent, -126) - 23)
    units = magnitude / step
    whole = math.floor(units)
    rest = units - whole
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2 == 1):
        whole += 1
    rounded = whole * step
    if rounded > _FLOAT32_MAX:
        return sign * math.inf
    return sign * float(rounded)


def convert(value, source: str, target: str):
    """Spark's implicit widening of a non-NULL value."""
    if value is None or source == target or target == "void":
        return value
    if target == "float32":
        return to_float32(value)
    if target == "float64":
        return float(value)
    return value


def order(a, b) -> int:
    """Spark's ordering of two non-NULL values of one type: NaN is the largest, NaN equals NaN."""
    if isinstance(a, float) and isinstance(b, float) and (math.isnan(a) or math.isnan(b)):
        return (math.isnan(a) > math.isnan(b)) - (math.isnan(a) < math.isnan(b))
    return (a > b) - (a < b)


def checked(value: int, kind: str, what: str) -> int:
    low, high = BOUNDS[kind]
    if not low <= value <= high:
        raise SparkError(f"{what}: {value} outside {kind}")
    return value


def java_remainder(a: int, b: int) -> int:
    result = abs(a) % abs(b)
    return -result if a < 0 else result


def java_long(value: float) -> int:
    """Java's (long) double: NaN is 0, saturating at the bounds."""
    if math.isnan(value):
        return 0
    if value >= 2.0**63:
        return BOUNDS["int64"][1]
    if value <= -(2.0**63):
        return BOUNDS["int64"][0]
    return int(value)


def half_up(value: float, kind: str) -> float:
    if not math.isfinite(value):
        return value
    rounded = float(Decimal(value).to_integral_value(rounding=ROUND_HALF_UP))
    rounded = abs(rounded) if rounded == 0 else rounded
    return to_float32(rounded) if kind == "float32" else rounded


def cast_value(value, source: str, target: str):
    if value is None or source == target:
        return value
    if target == "bool":
        return value != 0
    if source == "bool":
        value = int(value)
        source = "int32"
    if target in FLOATS:
        return to_float32(value) if target == "float32" else float(value)
    low, high = BOUNDS[target]
    if source in INTS:
        return checked(value, target, "cast")
    if not math.isfinite(value) or math.floor(value) > float(high) or math.ceil(value) < float(low):
        raise SparkError(f"cast {value!r} to {target}")
    return java_long(value) if target == "int64" else int(value)


def java_pow(a: float, b: float) -> float:
    if b == 0:
        return 1.0
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if abs(a) == 1 and math.isinf(b):
        return math.nan
    try:
        return math.pow(a, b)
    except OverflowError:
        odd = math.isfinite(b) and b == math.floor(b) and math.fmod(b, 2) != 0
        return -math.inf if a < 0 and odd else math.inf
    except ValueError:  # zero to a negative power, or a negative base to a fraction
        if a == 0:
            odd = b == math.floor(b) and math.fmod(b, 2) != 0
            return -math.inf if odd and math.copysign(1.0, a) < 0 else math.inf
        return math.nan


def ieee_divide(a: float, b: float) -> float:
    if b != 0:
        return a / b
    if math.isnan(a) or a == 0:
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _math(function, value: float) -> float:
    """A math-module function with IEEE results where Python raises."""
    if math.isnan(value):
        return math.nan
    try:
        return function(value)
    except OverflowError:
        return math.inf
    except ValueError:
        return math.nan


class Reference:
    """Evaluates one expression cell by cell; ``columns`` maps names to their types."""

    def __init__(self, expr: Expr, columns: dict[str, str]) -> None:
        self.expr = expr
        self.columns = columns
        self.types: dict[int, str] = {}
        self.projected: dict[int, object] = {}  # this row's values of the operands computed first
        for node in expr.walk():
            self.types[id(node)] = type_of(node, columns)

    def kind(self, node: Expr) -> str:
        return self.types[id(node)]

    def of(self, node: Expr, row: dict, target: str | None = None):
        """The value of ``node`` for one cell (None for NULL), widened to ``target`` if given."""
        value = self.projected[id(node)] if id(node) in self.projected else self._value(node, row)
        return value if target is None else convert(value, self.kind(node), target)

    def _value(self, node: Expr, row: dict):  # noqa: C901 - one branch per node kind, as in Spark
        kind = self.kind(node)
        if isinstance(node, Literal):
            return node.value
        if isinstance(node, Name):
            return row[node.name]
        if isinstance(node, Unary):
            if node.op == "not":
                value = self.of(node.operand, row)
                return None if value is None else not value
            value = self.of(node.operand, row, kind)
            if value is None or node.op == "+":
                return value
            if node.op == "~":
                return ~value
            return checked(-value, kind, "negation") if kind in INTS else -value
        if isinstance(node, Binary):
            return self._binary(node, row, kind)
        if isinstance(node, Cast):
            return cast_value(self.of(node.operand, row), self.kind(node.operand), node.type)
        if isinstance(node, IsNull):
            return (self.of(node.operand, row) is None) != node.negated
        if isinstance(node, In):
            return self._in(node, row)
        if isinstance(node, Between):
            result = self._between(node, row)
            return result if not node.negated or result is None else not result
        if isinstance(node, Case):
            for condition, value in node.branches:
                if self.of(condition, row) is True:
                    return self.of(value, row, kind)
            return None if node.otherwise is None else self.of(node.otherwise, row, kind)
        return self._call(node, row, kind)

    def _shared(self, *nodes: Expr) -> str:
        shared = "void"
        for node in nodes:
            shared = widen(shared, self.kind(node))
        return shared

    def _binary(self, node: Binary, row: dict, kind: str):
        op = node.op
        if op in ("and", "or"):
            stop = op == "or"  # true stops OR, false stops AND
            left = self.of(node.left, row)
            if left is stop:
                return stop
            right = self.of(node.right, row)
            if left is None:
                return stop if right is stop else None
            return right
        if op == "<=>":
            shared = self._shared(node.left, node.right)
            left, right = self.of(node.left, row, shared), self.of(node.right, row, shared)
            if left is None or right is None:
                return left is None and right is None
            return order(left, right) == 0
        if op in ("/", "%", "div"):
            return self._division(node.left, node.right, op, row, kind, trying=False)
        shared = self._shared(node.left, node.right) if op in ("=", "<>", "<", "<=", ">", ">=") else kind
        left = self.of(node.left, row, shared)
        if left is None:
            return None
        right = self.of(node.right, row, shared)
        if right is None:
            return None
        if op in ("=", "<>", "<", "<=", ">", ">="):
            sign = order(left, right)
            return {"=": sign == 0, "<>": sign != 0, "<": sign < 0, "<=": sign <= 0}.get(
                op, sign > 0 if op == ">" else sign >= 0
            )
        if op in ("&", "|", "^"):
            return {"&": left & right, "|": left | right, "^": left ^ right}[op]
        return self._arithmetic(op, left, right, kind, trying=False)

    @staticmethod
    def _arithmetic(op: str, left, right, kind: str, trying: bool):
        result = {"+": left + right, "-": left - right, "*": left * right}[op]
        if kind in INTS:
            low, high = BOUNDS[kind]
            if not low <= result <= high:
                if trying:
                    return None
                raise SparkError(f"{kind} overflow")
            return result
        return to_float32(result) if kind == "float32" else result

    def _division(self, left_node: Expr, right_node: Expr, op: str, row: dict, kind: str, trying: bool):
        compute = "float64" if op == "/" else ("int64" if op == "div" else kind)
        right = self.of(right_node, row, compute)
        if right is None or (trying and right == 0):
            return None
        left = self.of(left_node, row, compute)
        if left is None:
            return None
        if right == 0:
            raise SparkError("division by zero")
        if op == "/":
            return left / right
        if op == "div":
            quotient = abs(left) // abs(right) * (1 if (left < 0) == (right < 0) else -1)
            return checked(quotient, "int64", "DIV")
        if kind in INTS:
            return java_remainder(left, right)
        if math.isinf(left) or math.isnan(left) or math.isnan(right):
            return math.nan
        return left if math.isinf(right) else math.fmod(left, right)

    def _in(self, node: In, row: dict):
        shared = self._shared(node.operand, *node.values)
        value = self.of(node.operand, row, shared)
        if value is None:
            return None
        saw_null = False
        for item in node.values:
            other = self.of(item, row, shared)
            if other is None:
                saw_null = True
            elif order(value, other) == 0:
                return not node.negated
        return None if saw_null else node.negated

    def _between(self, node: Between, row: dict):
        first = self._shared(node.operand, node.low)
        second = self._shared(node.operand, node.high)
        value = self.of(node.operand, row)
        if value is None:
            self_low = None
        else:
            low = self.of(node.low, row, first)
            self_low = (
                None if low is None else order(convert(value, self.kind(node.operand), first), low) >= 0
            )
        if self_low is False:
            return False
        if value is None:
            high_ok = None
        else:
            high = self.of(node.high, row, second)
            high_ok = (
                None if high is None else order(convert(value, self.kind(node.operand), second), high) <= 0
            )
        if self_low is None:
            return False if high_ok is False else None
        return high_ok

    def _call(self, node: Call, row: dict, kind: str):  # noqa: C901
        name, args = node.function, node.args
        if name == "if":
            chosen = args[1] if self.of(args[0], row) is True else args[2]
            return self.of(chosen, row, kind)
        if name == "coalesce":
            for arg in args:
                value = self.of(arg, row, kind)
                if value is not None:
                    return value
            return None
        if name in ("least", "greatest"):
            best = None
            for arg in args:
                value = self.of(arg, row, kind)
                if value is None:
                    continue
                if best is None or (order(value, best) < 0 if name == "least" else order(value, best) > 0):
                    best = value
            return best
        if name == "nullif":
            shared = self._shared(args[0], args[1])
            first = self.of(args[0], row)
            if first is None:
                return None
            second = self.of(args[1], row, shared)
            if second is not None and order(convert(first, self.kind(args[0]), shared), second) == 0:
                return None
            return first
        if name == "nanvl":
            value = self.of(args[0], row, kind)
            if value is None or not math.isnan(value):
                return value
            return self.of(args[1], row, kind)
        if name == "isnan":
            value = self.of(args[0], row)
            return isinstance(value, float) and math.isnan(value)
        if name.startswith("try_"):
            op = {"try_add": "+", "try_subtract": "-", "try_multiply": "*", "try_divide": "/"}[name]
            if op == "/":
                return self._division(args[0], args[1], "/", row, kind, trying=True)
            left = self.of(args[0], row, kind)
            if left is None:
                return None
            right = self.of(args[1], row, kind)
            return None if right is None else self._arithmetic(op, left, right, kind, trying=True)
        if len(args) == 2:  # pow, log(base, x)
            first = self.of(args[0], row, "float64")
            if first is None:
                return None
            second = self.of(args[1], row, "float64")
            if second is None:
                return None
            if name == "pow":
                return java_pow(first, second)
            if first <= 0 or second <= 0:
                return None
            return ieee_divide(_math(math.log, second), _math(math.log, first))
        source = self.kind(args[0])
        value = self.of(args[0], row)
        if value is None:
            return None
        if name == "abs":
            value = convert(value, source, kind)
            return checked(abs(value), kind, "abs") if kind in INTS else abs(value)
        if name in ("floor", "ceil"):
            if source in INTS:
                return value
            value = float(value)
            if not math.isfinite(value):
                return java_long(value)
            return java_long(float((math.floor if name == "floor" else math.ceil)(value)))
        if name == "round":
            value = convert(value, source, kind)
            return value if kind in INTS else half_up(value, kind)
        value = float(value)
        if name == "sqrt":
            return math.nan if value < 0 else math.sqrt(value)
        if name in ("ln", "log", "log10", "log2"):
            if value <= 0:
                return None
            if name == "log10":
                return _math(math.log10, value)
            natural = _math(math.log, value)
            return natural / math.log(2.0) if name == "log2" else natural
        return _math({"exp": math.exp, "sin": math.sin, "cos": math.cos, "tan": math.tan}[name], value)


def _always_evaluated(node: Expr) -> tuple[Expr, ...]:
    """Spark's ``alwaysEvaluatedInputs`` of a conditional expression; every child of any other node."""
    if isinstance(node, Case):
        return (node.branches[0][0],)
    if isinstance(node, Call) and node.function in ("if", "coalesce", "nanvl"):
        return node.args[:1]
    return tuple(node.children())


def projected_first(expr: Expr) -> list[Expr]:
    """Operands Spark 4.1 computes in a projection below the expression, in the order it computes them.

    ``x BETWEEN l AND h`` and ``nullif(x, y)`` hold ``x`` as a common expression (``With``). The
    optimizer rule RewriteWithExpression turns each one it reaches through always-evaluated inputs
    into a column of a projection below, unless ``x`` is cheap (a column, or has no column at all);
    one reached through an input a conditional may skip is written back in place. A nested one is
    rewritten by the rule's next pass, so it is computed before the one holding it.
    """
    order: list[Expr] = []

    def reach(node: Expr, always: bool) -> None:
        if isinstance(node, Between) or (isinstance(node, Call) and node.function == "nullif"):
            shared = node.children()[0]
            cheap = isinstance(shared, Name) or not any(isinstance(n, Name) for n in shared.walk())
            if always and not cheap:
                reach(shared, True)  # a projection of its own: every row evaluates it
                for other in node.children()[1:]:
                    reach(other, True)
                order.append(shared)
                return
        firm = {id(child) for child in _always_evaluated(node)}
        for child in node.children():
            reach(child, always and id(child) in firm)

    reach(expr, True)
    return order


def evaluate_rows(expr: Expr, columns: dict[str, str], rows: list[dict]) -> list:
    """The value of ``expr`` for every row (None for NULL), or the SparkError that row raises."""
    reference = Reference(expr, columns)
    first = projected_first(expr)
    out = []
    for row in rows:
        reference.projected = {}
        try:
            for shared in first:
                reference.projected[id(shared)] = reference.of(shared, row)
            out.append(reference.of(expr, row))
        except SparkError as error:
            out.append(error)
    return out


def evaluate_cells(expr: Expr, columns: dict[str, str], rows: list[dict]) -> list | SparkError:
    """The value of ``expr`` for every row (None for NULL), or the SparkError of the first failing row."""
    outcomes = evaluate_rows(expr, columns, rows)
    return next((outcome for outcome in outcomes if isinstance(outcome, SparkError)), outcomes)
