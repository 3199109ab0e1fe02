"""Spark's typing rules for cell expressions (ANSI mode): result types, implicit casts and nullability.

Types are attribute types (int32 = INT, int64 = BIGINT, float32 = FLOAT, float64 = DOUBLE,
bool = BOOLEAN) plus ``void``, the type of the NULL literal. Every rule below was checked against
Spark 4.1 (``typeof(...)``, and the analysis errors it raises); tests/test_expression_spark.py checks
them on random expressions.

* Widening of two types (``wider``): equal types stay; void takes the other type; INT with BIGINT is
  BIGINT; FLOAT with DOUBLE is DOUBLE; an integer with FLOAT or DOUBLE is DOUBLE (so ``INT + FLOAT``
  is DOUBLE, unlike Java). BOOLEAN widens with nothing but BOOLEAN.
* ``+ - * %`` and ``try_add/try_subtract/try_multiply``: numbers, the wider type (INT + INT is INT).
  With both operands NULL: DOUBLE.
* ``/`` and ``try_divide``: DOUBLE, always (INT / INT too). ``div``: integers only, BIGINT.
* ``& | ^`` (bitwise): integers, the wider type; ``~``: an integer, its type (NULL: INT).
* Unary ``-`` and ``+``, ``abs``: a number, its type (NULL: DOUBLE). ``round``: a number, its type.
* ``floor``, ``ceil``: a number, BIGINT (FLOAT and DOUBLE round to BIGINT, saturating).
* ``sqrt exp ln log log10 log2 pow sin cos tan``: numbers, DOUBLE.
* Comparisons ``= <> < <= > >= <=>``: two numbers (compared in the wider type) or two BOOLEANs
  (false < true), BOOLEAN. ``IN``: the value and the list in one wider type. ``BETWEEN``: the value
  with each bound in their wider type.
* ``AND OR NOT``: BOOLEAN (or NULL). ``IS [NOT] NULL``: anything, BOOLEAN never NULL.
* ``isnan``: a number (an integer is never NaN), BOOLEAN never NULL. ``nanvl(a, b)``: numbers, FLOAT
  if both are FLOAT (or ``b`` is NULL and ``a`` FLOAT), else DOUBLE.
* ``if(c, a, b)``: ``c`` BOOLEAN or NULL. ``CASE``: every WHEN condition BOOLEAN (a bare NULL is
  rejected, as Spark does). The result of ``if``, ``CASE``, ``coalesce``, ``least``, ``greatest``: the
  wider type of the values (NULL values ignored; all NULL gives void).
* ``nullif(a, b)``: ``a`` and ``b`` comparable; the type of ``a``.
* ``CAST(x AS t)``: from any number or BOOLEAN to any of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from arrayviews.model.errors import ValidationError
from arrayviews.model.expression_tree import (
    BITWISE,
    COMPARISONS,
    INTEGER_TYPES,
    LOGICAL,
    NUMERIC_TYPES,
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
    resolve_name,
)
from arrayviews.model.types import SQL_TYPE_NAMES, computing_problem, normalize_type

_DOUBLE_FUNCTIONS = frozenset({"sqrt", "exp", "ln", "log", "log10", "log2", "sin", "cos", "tan", "pow"})
#: Functions whose result may be NULL even where every argument is not NULL.
_NULL_MAKERS = frozenset({"ln", "log", "log10", "log2", "nullif"}) | {
    f"try_{name}" for name in ("add", "subtract", "multiply", "divide")
}


def sql_name(type_name: str) -> str:
    """The Spark SQL name of a type (``VOID`` for the NULL literal's)."""
    if type_name in ("string", "uint64"):
        return type_name.upper()
    return "VOID" if type_name == VOID else SQL_TYPE_NAMES[type_name]


def wider(first: str, second: str) -> str | None:
    """Spark's wider type of two types (ANSI), or None if they do not mix (BOOLEAN with a number)."""
    if first == second:
        return first
    if first == VOID or second == VOID:
        return second if first == VOID else first
    if {"bool", "string", "uint64"} & {first, second}:
        return None
    if first in INTEGER_TYPES and second in INTEGER_TYPES:
        return "int64"
    return "float64"


def _describe(node: Expr) -> str:
    if isinstance(node, Call):
        return f"{node.function}()"
    if isinstance(node, Unary | Binary):
        return {"not": "NOT", "and": "AND", "or": "OR", "div": "DIV"}.get(node.op, f"'{node.op}'")
    return {IsNull: "IS NULL", In: "IN", Between: "BETWEEN", Case: "CASE", Cast: "CAST"}.get(
        type(node), node.to_text()
    )


def _fail(node: Expr, message: str) -> ValidationError:
    return ValidationError(f"{_describe(node)} {message}, in {node.to_text()!r}")


def _number(node: Expr, kind: str, default: str = "float64") -> str:
    """``kind`` if it is a number (a NULL takes ``default``); raises otherwise."""
    if kind == VOID:
        return default
    if kind not in NUMERIC_TYPES:
        hint = "; convert it with CAST(... AS INT) first" if kind == "bool" else ""
        raise _fail(node, f"needs a number, got {sql_name(kind)}{hint}")
    return kind


def _integer(node: Expr, kind: str) -> str:
    if kind == VOID:
        return "int32"
    if kind not in INTEGER_TYPES:
        raise _fail(node, f"needs an integer (INT or BIGINT), got {sql_name(kind)}")
    return kind


#: Storage types cell expressions read: strings (compared, matched, measured) and uint64 (compared).
EXPRESSION_STORAGE_TYPES = ("string", "uint64")


def _text(node: Expr, kind: str) -> str:
    if kind not in ("string", VOID):
        raise _fail(node, f"needs a STRING, got {sql_name(kind)}")
    return "string"


def like_regex(pattern: str) -> str:
    """The regular expression (RE2 and Java syntax) of a LIKE pattern, as Spark builds it: ``_`` is one
    character, ``%`` any run (newlines included), a backslash makes the next ``_``, ``%`` or backslash
    literal and may not precede anything else."""
    pieces, index = ["(?s)^"], 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            following = pattern[index + 1] if index + 1 < len(pattern) else None
            if following not in ("_", "%", "\\"):
                shown = "the end" if following is None else repr(following)
                raise ValidationError(
                    f"LIKE pattern {pattern!r}: the escape character may not precede {shown} "
                    "(only _, % and \\ can be escaped)"
                )
            pieces.append(re.escape(following))
            index += 2
            continue
        pieces.append("." if char == "_" else ".*" if char == "%" else re.escape(char))
        index += 1
    pieces.append("$")
    return "".join(pieces)


def _condition(node: Expr, kind: str, allow_null: bool = True) -> str:
    if kind == "bool" or (allow_null and kind == VOID):
        return "bool"
    raise _fail(node, f"needs a condition (BOOLEAN), got {sql_name(kind)}")


def _common(node: Expr, kinds: Sequence[str]) -> str:
    """The wider type of all ``kinds``; raises if two do not mix."""
    result = VOID
    for kind in kinds:
        combined = wider(result, kind)
        if combined is None:
            listed = ", ".join(dict.fromkeys(sql_name(k) for k in kinds))
            raise _fail(node, f"cannot mix {listed}")
        result = combined
    return result


def coercion(node: Expr, child_types: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """The type of ``node`` and the types its children are converted to before it is computed.

    ``child_types`` are the types of ``node.children()``. A child converted to ``void`` stays NULL.
    ``node`` must not be a Name (a name's type comes from the caller). Raises ValidationError when
    Spark's analyzer would reject the node.
    """
    kinds = tuple(child_types)
    if isinstance(node, Literal):
        return node.type, ()
    if isinstance(node, Unary):
        (kind,) = kinds
        if node.op == "not":
            return "bool", (_condition(node, kind),)
        if node.op == "~":
            kind = _integer(node, kind)
            return kind, (kind,)
        kind = _number(node, kind)
        return kind, (kind,)
    if isinstance(node, Binary):
        return _binary(node, *kinds)
    if isinstance(node, Call):
        return _call(node, kinds)
    if isinstance(node, Cast):
        (kind,) = kinds
        if kind not in (*NUMERIC_TYPES, "bool", VOID) or node.type == "string":
            raise _fail(node, f"cannot convert {sql_name(kind)}")
        return node.type, (kind,)
    if isinstance(node, IsNull):
        return "bool", kinds
    if isinstance(node, In):
        shared = _comparable(node, _common(node, kinds))
        return "bool", (shared,) * len(kinds)
    if isinstance(node, Between):
        operand, low, high = kinds
        first = _comparable(node, _common(node, (operand, low)))
        second = _comparable(node, _common(node, (operand, high)))
        return "bool", (first, first, second)  # the operand is converted per comparison
    if isinstance(node, Case):
        return _case(node, kinds)
    raise TypeError(f"no typing rule for {node!r}")


def _comparable(node: Expr, kind: str) -> str:
    return "bool" if kind == VOID else kind


def _binary(node: Binary, left: str, right: str) -> tuple[str, tuple[str, ...]]:
    op = node.op
    if op in LOGICAL:
        return "bool", (_condition(node, left), _condition(node, right))
    if op in COMPARISONS and "uint64" in (left, right):
        # uint64 compares exactly with integers (no common type: each side keeps its own)
        if {left, right} <= {"uint64", *INTEGER_TYPES, VOID}:
            return "bool", (left, right)
        other = right if left == "uint64" else left
        raise _fail(
            node, f"cannot compare UINT64 with {sql_name(other)} (uint64 values compare with integers)"
        )
    if op in COMPARISONS:
        shared = wider(left, right)
        if shared is None:
            raise _fail(node, f"cannot compare {sql_name(left)} with {sql_name(right)}")
        shared = _comparable(node, shared)
        return "bool", (shared, shared)
    if op in BITWISE:
        shared = wider(_integer(node, left), _integer(node, right))
        return shared, (shared, shared)
    if op == "div":
        _integer(node, left), _integer(node, right)
        return "int64", ("int64", "int64")
    if op == "/":
        _number(node, left), _number(node, right)
        return "float64", ("float64", "float64")
    if left == VOID and right == VOID:
        _number(node, left), _number(node, right)
        return "float64", ("float64", "float64")
    shared = wider(_number(node, left, VOID), _number(node, right, VOID))
    return shared, (shared, shared)


def _call(node: Call, kinds: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    name = node.function
    if name == "if":
        _condition(node, kinds[0])
        shared = _common(node, kinds[1:])
        return shared, ("bool", shared, shared)
    if name in ("coalesce", "least", "greatest"):
        shared = _common(node, kinds)
        return shared, (shared,) * len(kinds)
    if name == "nullif":
        shared = wider(kinds[0], kinds[1])
        if shared is None:
            raise _fail(node, f"cannot compare {sql_name(kinds[0])} with {sql_name(kinds[1])}")
        shared = _comparable(node, shared)
        return kinds[0], (shared, shared)
    if name in ("try_add", "try_subtract", "try_multiply", "try_divide"):
        op = {"try_add": "+", "try_subtract": "-", "try_multiply": "*", "try_divide": "/"}[name]
        return _binary(Binary(op, *node.args), *kinds)
    if name == "nanvl":
        first, second = (_number(node, kind, VOID) for kind in kinds)
        first = "float64" if first in (VOID, *INTEGER_TYPES) else first
        second = first if second == VOID else ("float64" if second in INTEGER_TYPES else second)
        shared = first if first == second else "float64"
        return shared, (shared, shared)
    if name == "isnan":
        _number(node, kinds[0])
        return "bool", ("float64",)
    if name == "length":
        _text(node, kinds[0])
        return "int32", ("string",)
    if name == "like":
        _text(node, kinds[0])
        if not isinstance(node.args[1], Literal) or node.args[1].type != "string":
            raise _fail(node, "needs a quoted pattern, as in s LIKE 'a%'")
        like_regex(node.args[1].value)  # an invalid pattern is refused here, before any cell is read
        return "bool", ("string", "string")
    if name in _DOUBLE_FUNCTIONS:
        for kind in kinds:
            _number(node, kind)
        return "float64", ("float64",) * len(kinds)
    if name in ("floor", "ceil"):
        kind = _number(node, kinds[0], "float64")
        return "int64", ("int64" if kind in INTEGER_TYPES else kind,)
    kind = _number(node, kinds[0])  # abs, round
    return kind, (kind,)


def _case(node: Case, kinds: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    count = len(node.branches)
    conditions = kinds[0 : 2 * count : 2]
    values = list(kinds[1 : 2 * count : 2])
    if node.otherwise is not None:
        values.append(kinds[-1])
    for condition in conditions:
        _condition(node, condition, allow_null=False)
    shared = _common(node, values)
    converted: list[str] = []
    for _ in range(count):
        converted += ["bool", shared]
    if node.otherwise is not None:
        converted.append(shared)
    return shared, tuple(converted)


def result_type(node: Expr, child_types: Sequence[str]) -> str:
    """The type of ``node`` given the types of its children (see :func:`coercion`)."""
    return coercion(node, child_types)[0]


def infer_type(expr: Expr, types: Mapping[str, str]) -> str:
    """The type of ``expr``'s value, given the types of the names it may read.

    Names match as in Spark (without regard to case, an exact match first). Raises ValidationError
    for an unknown name or an operand Spark would reject (see the module docstring). The result is
    ``void`` for an expression that is always an untyped NULL, such as ``coalesce(NULL, NULL)``.
    """
    known = {name: _known_type(kind) for name, kind in types.items()}
    cache: dict[int, str] = {}

    def visit(node: Expr) -> str:
        if isinstance(node, Name):
            try:
                kind = known[resolve_name(node.name, known)]
            except ValidationError as error:
                raise ValidationError(f"{error} in expression {expr.to_text()!r}", column=node.name) from None
            problem = (
                None
                if kind in (VOID, *EXPRESSION_STORAGE_TYPES)
                else computing_problem(kind, "a cell expression")
            )
            if problem is not None:
                raise ValidationError(
                    f"{node.name} in expression {expr.to_text()!r}: {problem}", column=node.name, value=kind
                )
            return kind
        key = id(node)
        if key not in cache:
            cache[key] = coercion(node, [visit(child) for child in node.children()])[0]
        return cache[key]

    return visit(expr)


def _known_type(kind: str) -> str:
    return VOID if kind == VOID else normalize_type(kind)


def nullable(expr: Expr, types: Mapping[str, str], nullable_names: frozenset[str] | set[str]) -> bool:
    """True if ``expr`` may be NULL for some cell, given the names that may hold NULLs.

    Conservative: a NULL literal, a nullable name, ``ln``/``log``/``nullif``/``try_*`` calls, ``CASE``
    without ELSE and NULL-producing operands make it nullable; ``IS NULL``, ``isnan`` and ``<=>`` never
    are; ``coalesce`` is nullable only if every argument is.
    """
    names = list(types)

    def visit(node: Expr) -> bool:
        if isinstance(node, Literal):
            return node.type == VOID
        if isinstance(node, Name):
            return resolve_name(node.name, names) in nullable_names
        children = [visit(child) for child in node.children()]
        if isinstance(node, IsNull) or (isinstance(node, Binary) and node.op == "<=>"):
            return False
        if isinstance(node, Call):
            if node.function == "isnan":
                return False
            if node.function == "coalesce":
                return all(children)
            if node.function in _NULL_MAKERS:
                return True
        if isinstance(node, Case) and node.otherwise is None:
            return True
        return any(children)

    return visit(expr)
