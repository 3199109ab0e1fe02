"""The immutable tree of cell expressions and its canonical Spark SQL text.

Nodes compare equal when structurally equal; ``parse_expression(e.to_text()) == e`` for every tree
(the round trip the tests check). The canonical text is Spark SQL that Spark and sqlglot read the
same way: keywords upper case, functions lower case, typed literals (``1.5D``, ``2L``, ``1.5F``,
``CAST('NaN' AS DOUBLE)``), and parentheses wherever Spark and sqlglot would group differently
(comparisons never chain, mixed bitwise operators are parenthesised).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from arrayviews.model.errors import ValidationError
from arrayviews.model.sql_dialect import is_plain_name
from arrayviews.model.types import FLOAT32_MAX, SQL_TYPE_NAMES, normalize_type, type_of_sql_name

#: Deepest allowed nesting of operators and calls (printing, typing and evaluation recurse).
MAX_DEPTH = 200
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: The type of the NULL literal (Spark's VOID): it takes the type its context needs.
VOID = "void"
NUMERIC_TYPES = ("int32", "int64", "float32", "float64")
INTEGER_TYPES = ("int32", "int64")
FLOAT_TYPES = ("float32", "float64")
LITERAL_TYPES = (*NUMERIC_TYPES, "bool", "string", "uint64", VOID)
UINT64_MAX = 2**64 - 1

UNARY_OPS = frozenset({"-", "+", "~", "not"})
ARITHMETIC = frozenset({"+", "-", "*", "/", "%", "div"})
BITWISE = frozenset({"&", "|", "^"})
COMPARISONS = frozenset({"=", "<>", "<", "<=", ">", ">=", "<=>"})
LOGICAL = frozenset({"and", "or"})
BINARY_OPS = ARITHMETIC | BITWISE | COMPARISONS | LOGICAL
_OP_ALIASES = {"==": "=", "!=": "<>", "!": "not"}

#: Functions callable in expressions: canonical name -> (fewest, most) arguments (None: no limit).
FUNCTIONS: dict[str, tuple[int, int | None]] = {
    **dict.fromkeys(("abs", "sqrt", "exp", "ln", "log10", "log2", "sin", "cos", "tan"), (1, 1)),
    **dict.fromkeys(("floor", "ceil", "round", "isnan"), (1, 1)),
    "log": (1, 2),
    "pow": (2, 2),
    "nanvl": (2, 2),
    "least": (2, None),
    "greatest": (2, None),
    "if": (3, 3),
    "coalesce": (1, None),
    "nullif": (2, 2),
    **dict.fromkeys(("try_add", "try_subtract", "try_multiply", "try_divide"), (2, 2)),
    "length": (1, 1),
    "like": (2, 2),  # ``s LIKE 'pattern'`` (printed as Spark's function form like(s, 'pattern'))
}
#: Other Spark spellings of the same functions: alias -> (canonical name, exact argument count or None).
FUNCTION_ALIASES: dict[str, tuple[str, int | None]] = {
    "power": ("pow", None),
    "ceiling": ("ceil", None),
    "nvl": ("coalesce", 2),
}
#: Spark's cast functions (``double(x)`` is ``CAST(x AS DOUBLE)``) -> attribute type.
CAST_FUNCTIONS: dict[str, str] = {"int": "int32", "bigint": "int64", "float": "float32", "double": "float64"}
CAST_FUNCTIONS["boolean"] = "bool"


class Expr:
    """Base of the expression nodes; nodes are immutable and compare equal when structurally equal."""

    __slots__ = ()

    def children(self) -> tuple[Expr, ...]:
        """The direct sub-expressions, in reading order."""
        return ()

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        """A node like this one over other children (same count and order as :meth:`children`)."""
        return self

    def walk(self) -> Iterator[Expr]:
        """This node and every node below it, parents before children."""
        stack: list[Expr] = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children()))

    def to_text(self) -> str:
        """Canonical Spark SQL text that parses back to an equal expression."""
        return _print(self, 0)

    def __str__(self) -> str:
        return self.to_text()


def _float_key(value: float) -> tuple:
    return ("nan",) if math.isnan(value) else (value, math.copysign(1.0, value))


@dataclass(frozen=True, eq=False)
class Literal(Expr):
    """A typed constant. ``type`` defaults from the value as Spark types literals: a bool is BOOLEAN,
    an int INT if it fits (else BIGINT), a float DOUBLE, None the untyped NULL (``void``)."""

    value: bool | int | float | str | None
    type: str | None = None

    def __post_init__(self) -> None:
        value, kind = self.value, self.type
        if kind is None:
            kind = _default_type(value)
        elif kind not in LITERAL_TYPES:
            kind = _literal_type_name(kind)
        if kind == "string":
            if not isinstance(value, str):
                raise TypeError(f"a STRING literal needs a str, got {value!r}")
        elif kind == "uint64":  # integers above BIGINT, as written for uint64 attributes
            if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
                raise TypeError(f"a uint64 literal needs an int, got {value!r}")
            value = int(value)
            if not INT64_MAX < value <= UINT64_MAX:
                raise ValueError(f"a uint64 literal lies in {INT64_MAX + 1}..{UINT64_MAX}, got {value}")
        elif kind == VOID:
            if value is not None:
                raise ValueError(f"a NULL literal has no value, got {value!r}")
        elif kind == "bool":
            if not isinstance(value, bool | np.bool_):
                raise TypeError(f"a BOOLEAN literal needs a bool, got {value!r}")
            value = bool(value)
        elif kind in INTEGER_TYPES:
            if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
                raise TypeError(f"an {SQL_TYPE_NAMES[kind]} literal needs an int, got {value!r}")
            value = int(value)
            low, high = (INT32_MIN, INT32_MAX) if kind == "int32" else (INT64_MIN, INT64_MAX)
            if not low <= value <= high:
                raise ValueError(f"{value} is outside the {SQL_TYPE_NAMES[kind]} range {low}..{high}")
        else:
            if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
                raise TypeError(f"a {SQL_TYPE_NAMES[kind]} literal needs a float, got {value!r}")
            value = float(value)
            if kind == "float32" and not math.isnan(value) and float(np.float32(value)) != value:
                raise ValueError(f"{value!r} is not a FLOAT (32-bit) value")
            if math.isnan(value):
                value = math.nan
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "type", kind)

    def _key(self) -> tuple:
        value = self.value
        return (self.type, _float_key(value) if isinstance(value, float) else value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Literal):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def _default_type(value: object) -> str:
    if value is None:
        return VOID
    if isinstance(value, bool | np.bool_):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, numbers.Integral):
        if int(value) > INT64_MAX:
            return "uint64"
        return "int32" if INT32_MIN <= int(value) <= INT32_MAX else "int64"
    if isinstance(value, numbers.Real):
        return "float64"
    raise TypeError(f"a literal must be a bool, int, float or None, got {type(value).__name__}")


def _literal_type_name(kind: str) -> str:
    """An attribute type name or Spark type name (INT, DOUBLE, ...) as an attribute type name."""
    found = type_of_sql_name(kind)
    if found is not None:
        return found
    if kind.lower() in (VOID, "null"):
        return VOID
    return normalize_type(kind)


@dataclass(frozen=True)
class Name(Expr):
    """A reference to an attribute column or dimension coordinate of the chunk."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "\n" in self.name:
            raise ValueError(f"invalid name {self.name!r} in an expression")


@dataclass(frozen=True)
class Unary(Expr):
    """``-x``, ``+x``, ``~x`` (bitwise not) or ``NOT x``."""

    op: str
    operand: Expr

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", _canonical_op(self.op, UNARY_OPS))

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        (operand,) = children
        return Unary(self.op, operand)


@dataclass(frozen=True)
class Binary(Expr):
    """``left op right``: arithmetic (``+ - * / % div``), bitwise (``& | ^``), comparisons
    (``= <> < <= > >= <=>``) and logic (``and``, ``or``), with canonical operator spellings."""

    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", _canonical_op(self.op, BINARY_OPS))

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        left, right = children
        return Binary(self.op, left, right)


@dataclass(frozen=True)
class Call(Expr):
    """A call of one of :data:`FUNCTIONS` (name stored in canonical lower case)."""

    function: str
    args: tuple[Expr, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.function, str):
            raise TypeError(f"a function name must be a str, got {self.function!r}")
        function = self.function.lower()
        args = tuple(self.args)
        function, exact = FUNCTION_ALIASES.get(function, (function, None))
        if function not in FUNCTIONS:
            raise ValueError(f"unknown function {self.function!r}; supported: {', '.join(sorted(FUNCTIONS))}")
        problem = arity_problem(function, len(args), exact)
        if problem:
            raise ValueError(problem)
        object.__setattr__(self, "function", function)
        object.__setattr__(self, "args", args)

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return Call(self.function, children)


def arity_problem(function: str, count: int, exact: int | None = None) -> str | None:
    """Why ``count`` arguments do not fit ``function`` (None if they do)."""
    fewest, most = (exact, exact) if exact is not None else FUNCTIONS[function]
    if count >= fewest and (most is None or count <= most):
        return None
    if most is None:
        wanted = f"at least {fewest} arguments"
    elif fewest == most:
        wanted = f"{fewest} argument{'s' if fewest != 1 else ''}"
    else:
        wanted = f"{fewest} to {most} arguments"
    return f"function {function}() takes {wanted}, got {count}"


@dataclass(frozen=True)
class Cast(Expr):
    """``CAST(operand AS type)``; ``type`` is an attribute type (int32, int64, float32, float64, bool)."""

    operand: Expr
    type: str

    def __post_init__(self) -> None:
        kind = _literal_type_name(self.type)
        if kind == VOID:
            raise ValueError("cannot cast to NULL")
        object.__setattr__(self, "type", kind)

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        (operand,) = children
        return Cast(operand, self.type)


@dataclass(frozen=True)
class IsNull(Expr):
    """``operand IS NULL`` (or ``IS NOT NULL`` when ``negated``)."""

    operand: Expr
    negated: bool = False

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        (operand,) = children
        return IsNull(operand, self.negated)


@dataclass(frozen=True)
class In(Expr):
    """``operand IN (values...)`` (or ``NOT IN`` when ``negated``); at least one value."""

    operand: Expr
    values: tuple[Expr, ...]
    negated: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))
        if not self.values:
            raise ValueError("IN needs at least one value")

    def children(self) -> tuple[Expr, ...]:
        return (self.operand, *self.values)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return In(children[0], children[1:], self.negated)


@dataclass(frozen=True)
class Between(Expr):
    """``operand BETWEEN low AND high`` (or ``NOT BETWEEN`` when ``negated``)."""

    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False

    def children(self) -> tuple[Expr, ...]:
        return (self.operand, self.low, self.high)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        operand, low, high = children
        return Between(operand, low, high, self.negated)


@dataclass(frozen=True)
class Case(Expr):
    """``CASE WHEN condition THEN value ... [ELSE otherwise] END`` (at least one WHEN)."""

    branches: tuple[tuple[Expr, Expr], ...]
    otherwise: Expr | None = None

    def __post_init__(self) -> None:
        branches = tuple((condition, value) for condition, value in self.branches)
        if not branches:
            raise ValueError("CASE needs at least one WHEN")
        object.__setattr__(self, "branches", branches)

    def children(self) -> tuple[Expr, ...]:
        flat = tuple(node for branch in self.branches for node in branch)
        return flat if self.otherwise is None else (*flat, self.otherwise)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        count = 2 * len(self.branches)
        pairs = tuple((children[k], children[k + 1]) for k in range(0, count, 2))
        return Case(pairs, children[count] if self.otherwise is not None else None)


def _canonical_op(op: str, allowed: frozenset[str]) -> str:
    key = op.lower() if isinstance(op, str) else op
    key = _OP_ALIASES.get(key, key)
    if key not in allowed:
        raise ValueError(f"unknown operator {op!r}; expected one of {', '.join(sorted(allowed))}")
    return key


# ---------------------------------------------------------------------------------------------
# Names and shape


def referenced_names(expr: Expr) -> frozenset[str]:
    """The attribute and dimension names the expression reads."""
    return frozenset(node.name for node in expr.walk() if isinstance(node, Name))


def transform(expr: Expr, function: Callable[[Expr], Expr]) -> Expr:
    """Rebuild ``expr`` bottom-up, replacing every node by ``function(node with new children)``."""
    children = expr.children()
    if children:
        expr = expr.with_children(tuple(transform(child, function) for child in children))
    return function(expr)


def resolve_name(name: str, available: Iterable[str]) -> str:
    """The spelling among ``available`` that ``name`` refers to.

    As in Spark (``spark.sql.caseSensitive`` is false by default) names match without regard to case;
    an exact match wins. Raises ValidationError for an unknown or ambiguous name.
    """
    names = list(available)
    if name in names:
        return name
    matches = [candidate for candidate in names if candidate.lower() == name.lower()]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise ValidationError(
            f"name {name!r} is ambiguous: it matches {', '.join(matches)} (names match without regard "
            f"to case); write it as one of them exactly",
            column=name,
        )
    raise ValidationError(f"unknown name {name!r}; available: {', '.join(names) or '(none)'}", column=name)


def resolve_names(expr: Expr, available: Iterable[str]) -> Expr:
    """``expr`` with every name spelled as in ``available`` (see :func:`resolve_name`)."""
    names = list(available)

    def respell(node: Expr) -> Expr:
        if isinstance(node, Name):
            resolved = resolve_name(node.name, names)
            return node if resolved == node.name else Name(resolved)
        return node

    return transform(expr, respell)


def depth(expr: Expr) -> int:
    """The number of nodes on the longest path from ``expr`` down to a leaf."""
    deepest, stack = 0, [(expr, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in node.children())
    return deepest


# ---------------------------------------------------------------------------------------------
# Canonical text
#
# Binding strength, loosest first. Spark groups comparisons at one level and & > ^ > |; sqlglot has
# two comparison levels and one bitwise level, so comparisons never chain unparenthesised and mixed
# bitwise operators are parenthesised: both then read the text the same way.

_OR, _AND, _NOT, _PREDICATE, _COMPARE = 1, 2, 3, 4, 5
_BIT_OR, _BIT_XOR, _BIT_AND, _ADD, _MULTIPLY, _UNARY, _ATOM = 6, 7, 8, 9, 10, 11, 12
_BINARY_LEVELS = {"or": _OR, "and": _AND, "|": _BIT_OR, "^": _BIT_XOR, "&": _BIT_AND}
_BINARY_LEVELS |= dict.fromkeys(COMPARISONS, _COMPARE) | {"+": _ADD, "-": _ADD}
_BINARY_LEVELS |= dict.fromkeys(("*", "/", "%", "div"), _MULTIPLY)
_BINARY_TEXT = {"and": "AND", "or": "OR", "div": "DIV"}


def _level(expr: Expr) -> int:
    if isinstance(expr, Binary):
        return _BINARY_LEVELS[expr.op]
    if isinstance(expr, Unary):
        return _NOT if expr.op == "not" else _UNARY
    if isinstance(expr, IsNull | In | Between):
        return _PREDICATE
    if isinstance(expr, Literal) and isinstance(expr.value, int | float) and not isinstance(expr.value, bool):
        # A negative number reads as one literal only where a unary minus may stand.
        negative = expr.value < 0 or (isinstance(expr.value, float) and math.copysign(1.0, expr.value) < 0)
        return _UNARY if negative and math.isfinite(expr.value) else _ATOM
    return _ATOM


def literal_text(literal: Literal) -> str:
    """Spark SQL for a literal of its exact type: ``7``, ``7L``, ``1.5F``, ``0.1D``, ``CAST('NaN' AS DOUBLE)``."""
    value, kind = literal.value, literal.type
    if kind == VOID:
        return "NULL"
    if kind == "bool":
        return "TRUE" if value else "FALSE"
    if kind == "string":
        return string_literal_text(value)
    if kind in ("int32", "uint64"):
        return str(value)
    if kind == "int64":
        return f"{value}L" if INT32_MIN <= value <= INT32_MAX else str(value)
    if not math.isfinite(value):
        word = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        return f"CAST('{word}' AS {SQL_TYPE_NAMES[kind]})"
    if kind == "float32":
        text = str(np.float32(value))
        if abs(float(text)) > FLOAT32_MAX:  # the shortest spelling of +-max rounds up past the range
            text = repr(float(np.float32(value)))  # Spark checks the written decimal against the range
        return f"{text}F"
    return f"{value!r}D"


_STRING_ESCAPES = str.maketrans(
    {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\x00": "\\u0000"}
)


def string_literal_text(value: str) -> str:
    """A Spark SQL string literal of ``value``: single quotes, backslash escapes for the backslash,
    the quote, NUL and line breaks (read back by Spark and :func:`spark_string_value` alike)."""
    return "'" + value.translate(_STRING_ESCAPES) + "'"


_SIMPLE_ESCAPES = {
    "0": "\x00",
    "b": "\b",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "Z": "\x1a",
    "%": "\\%",
    "_": "\\_",
}
_HEX = frozenset("0123456789abcdefABCDEF")


def spark_string_value(raw: str) -> str:
    """The value of a quoted Spark SQL string literal as written (quotes included), unescaped as
    Spark's ``unescapeSQLString`` does: ``\\uXXXX``, octal ``\\ooo``, ``\\0 \\b \\n \\r \\t \\Z``,
    ``\\%`` and ``\\_`` kept with their backslash (for LIKE), any other escaped character itself."""
    quote, body = raw[0], raw[1:-1]
    out, index = [], 0
    while index < len(body):
        char = body[index]
        if char == quote and body[index + 1 : index + 2] == quote:  # a doubled quote
            out.append(quote)
            index += 2
            continue
        if char != "\\" or index + 1 >= len(body):
            out.append(char)
            index += 1
            continue
        following = body[index + 1]
        if following == "u" and len(body) >= index + 6 and set(body[index + 2 : index + 6]) <= _HEX:
            out.append(chr(int(body[index + 2 : index + 6], 16)))
            index += 6
        elif (
            following in "0123"
            and index + 3 < len(body)
            and body[index + 2] in "01234567"
            and body[index + 3] in "01234567"
        ):
            out.append(chr(int(body[index + 1 : index + 4], 8)))
            index += 4
        else:
            out.append(_SIMPLE_ESCAPES.get(following, following))
            index += 2
    return "".join(out)


def name_text(name: str) -> str:
    """A name as Spark SQL: bare if it reads as that column, else in backquotes (`` ` `` doubled)."""
    if is_plain_name(name):
        return name
    return "`" + name.replace("`", "``") + "`"


def _wrap(text: str, level: int, min_level: int) -> str:
    return f"({text})" if level < min_level else text


def _operand(expr: Expr, parent_op: str, min_level: int) -> str:
    """An operand of a binary operator; mixed bitwise operators are always parenthesised."""
    if parent_op in BITWISE and isinstance(expr, Binary) and expr.op in BITWISE and expr.op != parent_op:
        return f"({_print(expr, 0)})"
    return _print(expr, min_level)


def _print(expr: Expr, min_level: int) -> str:
    level = _level(expr)
    if isinstance(expr, Literal):
        text = literal_text(expr)
    elif isinstance(expr, Name):
        text = name_text(expr.name)
    elif isinstance(expr, Call):
        text = f"{expr.function}({', '.join(_print(arg, 0) for arg in expr.args)})"
    elif isinstance(expr, Cast):
        text = f"CAST({_print(expr.operand, 0)} AS {SQL_TYPE_NAMES[expr.type]})"
    elif isinstance(expr, Case):
        parts = [f"WHEN {_print(c, 0)} THEN {_print(v, 0)}" for c, v in expr.branches]
        if expr.otherwise is not None:
            parts.append(f"ELSE {_print(expr.otherwise, 0)}")
        text = f"CASE {' '.join(parts)} END"
    elif isinstance(expr, Unary):
        text = _unary_text(expr)
    elif isinstance(expr, Binary):
        op = expr.op
        # comparisons do not chain
        bounds = (_COMPARE + 1, _COMPARE + 1) if op in COMPARISONS else (level, level + 1)
        left = _operand(expr.left, op, bounds[0])
        right = _operand(expr.right, op, bounds[1])
        text = f"{left} {_BINARY_TEXT.get(op, op)} {right}"
    elif isinstance(expr, IsNull):
        text = f"{_print(expr.operand, _COMPARE + 1)} IS {'NOT ' if expr.negated else ''}NULL"
    elif isinstance(expr, In):
        values = ", ".join(_print(value, 0) for value in expr.values)
        text = f"{_print(expr.operand, _COMPARE + 1)} {'NOT ' if expr.negated else ''}IN ({values})"
    elif isinstance(expr, Between):
        operand, low, high = (_print(node, _COMPARE + 1) for node in expr.children())
        text = f"{operand} {'NOT ' if expr.negated else ''}BETWEEN {low} AND {high}"
    else:
        raise TypeError(f"not an expression node: {expr!r}")
    return _wrap(text, level, min_level)


def _unary_text(expr: Unary) -> str:
    operand = expr.operand
    if expr.op == "not":
        # NOT over a predicate is parenthesised: unparenthesised, NOT x IN (...) reads as x NOT IN (...).
        bound = _PREDICATE + 1 if isinstance(operand, IsNull | In | Between) else _NOT
        return f"NOT {_print(operand, bound)}"
    if (
        expr.op == "-"
        and isinstance(operand, Literal)
        and _level(operand) == _ATOM
        and operand.type in (*NUMERIC_TYPES, "uint64")
        and math.isfinite(operand.value)
    ):
        return f"-({literal_text(operand)})"  # "-5" would read as the literal -5 (and -2^63 as BIGINT)
    text = _print(operand, _UNARY)
    # Never "--" (a comment) nor "~~" or "+-" glued into one token: prefix signs are spaced apart.
    separator = " " if text[:1] in ("-", "+", "~") else ""
    return f"{expr.op}{separator}{text}"
