"""Hypothesis strategies for cell expressions: random trees (any shape, for printing and typing) and
random well-typed expressions over a fixed set of nullable columns with awkward values (for comparing
the numpy evaluator with Spark and with the plain-Python reference)."""

from __future__ import annotations

import math
import struct

import numpy as np
from hypothesis import strategies as st

from arrayviews.model.expressions import (
    ARITHMETIC,
    BITWISE,
    COMPARISONS,
    FUNCTIONS,
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

#: The columns every generated expression may read (all nullable).
COLUMNS = {"a32": "int32", "a64": "int64", "x32": "float32", "x64": "float64", "p": "bool", "q": "bool"}
DTYPES = {
    "int32": np.int32,
    "int64": np.int64,
    "float32": np.float32,
    "float64": np.float64,
    "bool": np.bool_,
}
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FLOAT32_MAX = struct.unpack("<f", struct.pack("<I", 0x7F7FFFFF))[0]
#: Functions whose results are not exactly rounded (compared with a tolerance, kept out of deep trees).
TRANSCENDENTAL = ("exp", "ln", "log", "log10", "log2", "sin", "cos", "tan", "pow")

_SPECIAL = {
    "int32": [0, 1, -1, 2, 3, 7, -7, 46341, INT32_MAX, INT32_MIN, INT32_MAX - 1, INT32_MIN + 1],
    "int64": [0, 1, -1, 5, -3, 2**31, -(2**31) - 1, 2**53 + 1, 3037000500, INT64_MAX, INT64_MIN],
    "float64": [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, 1e300, -1e300, 5e-324, 2.0**63, 2.0**31]
    + [math.inf, -math.inf, math.nan, 0.1],
    "float32": [
        0.0,
        -0.0,
        0.5,
        2.5,
        -1.5,
        3.0,
        FLOAT32_MAX,
        float(np.float32(1e-45)),
        2.0**31,
        math.inf,
        -math.inf,
        math.nan,
    ],
}


def _float32(value: float) -> float:
    return float(np.float32(value))


def values_of(kind: str) -> st.SearchStrategy:
    """Values of an attribute type, often boundary ones."""
    if kind == "bool":
        return st.booleans()
    if kind == "int32":
        random = st.one_of(st.integers(-20, 20), st.integers(INT32_MIN, INT32_MAX))
    elif kind == "int64":
        random = st.one_of(st.integers(-20, 20), st.integers(INT64_MIN, INT64_MAX))
    elif kind == "float32":
        random = st.floats(width=32, allow_nan=False).map(_float32)
    else:
        random = st.one_of(st.floats(allow_nan=False), st.integers(-40, 40).map(lambda k: k / 4))
    return st.one_of(st.sampled_from(_SPECIAL[kind]), random)


def literals(kind: str) -> st.SearchStrategy[Literal]:
    if kind == "void":
        return st.just(Literal(None))
    return values_of(kind).map(lambda value: Literal(value, kind))


@st.composite
def expression_chunks(draw, max_rows: int = 8, null_rate: float = 0.2):
    """``(length, columns, nulls)``: one array per column of COLUMNS and masks of their NULL cells."""
    length = draw(st.integers(0, max_rows) | st.just(max_rows))
    columns, nulls = {}, {}
    for name, kind in COLUMNS.items():
        values = draw(st.lists(values_of(kind), min_size=length, max_size=length))
        columns[name] = np.array(values, dtype=DTYPES[kind])
        null = draw(st.lists(st.floats(0, 1), min_size=length, max_size=length))
        nulls[name] = np.array([x < null_rate for x in null], dtype=bool)
    return length, columns, nulls


# -- well-typed expressions --------------------------------------------------------------------------


def _names(*kinds: str) -> st.SearchStrategy[Name]:
    return st.sampled_from([Name(name) for name, kind in COLUMNS.items() if kind in kinds])


def _mostly(usual: st.SearchStrategy, rare: st.SearchStrategy) -> st.SearchStrategy:
    """``usual`` three times in four, else ``rare`` (st.one_of draws its branches about evenly)."""
    return st.integers(0, 3).flatmap(lambda k: usual if k else rare)


def _call(function: str, *parts: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    return st.tuples(*parts).map(lambda args: Call(function, args))


def _calls(functions: list[str], part: st.SearchStrategy[Expr], low: int = 2, high: int = 3):
    return st.builds(Call, st.sampled_from(functions), st.lists(part, min_size=low, max_size=high).map(tuple))


def _case(condition: st.SearchStrategy[Expr], value: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    conditions = condition.filter(lambda e: not (isinstance(e, Literal) and e.type == "void"))
    return st.builds(
        Case,
        st.lists(st.tuples(conditions, value), min_size=1, max_size=2).map(tuple),
        st.none() | value,
    )


def typed(kind: str, depth: int, exact: bool = True) -> st.SearchStrategy[Expr]:
    """Well-typed expressions: ``kind`` is "integer" (INT/BIGINT), "number" (any numeric type, maybe
    an untyped NULL) or "condition" (BOOLEAN). ``exact`` leaves out functions that are not exactly
    rounded (exp, ln, log..., trigonometry, pow)."""
    return _typed(kind, depth, exact)


_cache: dict = {}


def _typed(kind: str, depth: int, exact: bool) -> st.SearchStrategy[Expr]:
    key = (kind, depth, exact)
    if key not in _cache:
        _cache[key] = st.deferred(lambda: _build(kind, depth, exact))
    return _cache[key]


def _build(kind: str, depth: int, exact: bool) -> st.SearchStrategy[Expr]:
    typed_null_int = st.sampled_from([Cast(Literal(None), "int32"), Cast(Literal(None), "int64")])
    # Columns are drawn three times as often as constants: their cells hold the awkward values.
    integer_leaves = _mostly(
        _names("int32", "int64"), st.one_of(literals("int32"), literals("int64"), typed_null_int)
    )
    float_leaves = _mostly(_names("float32", "float64"), st.one_of(literals("float32"), literals("float64")))
    number_leaves = _mostly(st.one_of(integer_leaves, float_leaves), st.just(Literal(None)))
    condition_leaves = _mostly(_names("bool"), st.one_of(st.booleans().map(Literal), st.just(Literal(None))))
    leaves = {"integer": integer_leaves, "number": number_leaves, "condition": condition_leaves}[kind]
    if depth == 0:
        return leaves
    integer = _typed("integer", depth - 1, exact)
    number = _typed("number", depth - 1, exact)
    condition = _typed("condition", depth - 1, exact)
    if kind == "integer":
        options = [
            st.builds(
                Binary, st.sampled_from(["+", "-", "*", "%", "div", *sorted(BITWISE)]), integer, integer
            ),
            st.builds(Unary, st.sampled_from(["-", "~", "+"]), integer),
            st.builds(lambda f, a: Call(f, (a,)), st.sampled_from(["abs", "round"]), integer),
            st.builds(lambda f, a: Call(f, (a,)), st.sampled_from(["floor", "ceil"]), number),
            st.builds(Cast, st.one_of(number, condition), st.sampled_from(["int32", "int64"])),
            _calls(["try_add", "try_subtract", "try_multiply"], integer, 2, 2),
            _call("if", condition, integer, integer),
            _calls(["least", "greatest"], integer),
            _calls(["coalesce"], integer, 1, 3),
            _call("nullif", integer, number),
            _case(condition, integer),
            integer_leaves,
        ]
    elif kind == "number":
        options = [
            integer,
            st.builds(Binary, st.sampled_from(["+", "-", "*", "/", "%"]), number, number),
            st.builds(Unary, st.sampled_from(["-", "+"]), number),
            st.builds(lambda f, a: Call(f, (a,)), st.sampled_from(["abs", "round", "sqrt"]), number),
            _call("nanvl", number, number),
            _call("try_divide", number, number),
            st.builds(Cast, st.one_of(number, condition), st.sampled_from(["float32", "float64"])),
            _call("if", condition, number, number),
            _calls(["least", "greatest"], number),
            _calls(["coalesce"], number, 1, 3),
            _case(condition, number),
            float_leaves,
        ]
        if not exact:
            options.append(
                st.builds(lambda f, a: Call(f, (a,)), st.sampled_from(TRANSCENDENTAL[:-1]), number)
            )
            options.append(_call("pow", number, number))
    else:
        options = [
            st.builds(Binary, st.sampled_from(sorted(COMPARISONS)), number, number),
            st.builds(Binary, st.sampled_from(sorted(COMPARISONS)), condition, condition),
            st.builds(Binary, st.sampled_from(["and", "or"]), condition, condition),
            st.builds(Unary, st.just("not"), condition),
            st.builds(IsNull, st.one_of(number, condition), st.booleans()),
            st.builds(In, number, st.lists(number, min_size=1, max_size=3).map(tuple), st.booleans()),
            st.builds(Between, number, number, number, st.booleans()),
            _call("isnan", number),
            st.builds(Cast, number, st.just("bool")),
            _call("if", condition, condition, condition),
            _calls(["coalesce"], condition, 1, 3),
            _case(condition, condition),
            condition_leaves,
        ]
    return st.one_of(*options)


def well_typed(depth: int = 3, exact: bool = True) -> st.SearchStrategy[Expr]:
    """A well-typed numeric or BOOLEAN expression over COLUMNS."""
    return st.one_of(typed("number", depth, exact), typed("condition", depth, exact))


# -- trees of any shape -------------------------------------------------------------------------------

ODD_NAMES = ["v", "i", "x_1", "_", "V", "and", "True", "NaN", "my col", "1abc", "sqrt", "Or2", "select"]
ODD_NAMES += ["a`b", "date", "from", "null", "int", "x,y(z)", "é"]
_KINDS = ["int32", "int64", "float32", "float64", "bool", "void"]


def any_literal() -> st.SearchStrategy[Literal]:
    return st.sampled_from(_KINDS).flatmap(literals)


def _any_call(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    def build(function: str) -> st.SearchStrategy[Expr]:
        fewest, most = FUNCTIONS[function]
        return st.lists(children, min_size=fewest, max_size=most or fewest + 2).map(
            lambda args: Call(function, tuple(args))
        )

    # The string functions (length, LIKE) take strings, which these columns are not (Spark would cast
    # a number to a string where arrays refuse): tests/test_string_attributes.py checks them on text.
    numeric = sorted(set(FUNCTIONS) - {"length", "like"})
    return st.sampled_from(numeric).flatmap(build)


def any_trees(names: list[str] | None = None, max_leaves: int = 12) -> st.SearchStrategy[Expr]:
    """Expression trees of any shape and kind (typing not respected): for printing and typing tests."""
    leaves = st.one_of(any_literal(), st.sampled_from(names or ODD_NAMES).map(Name))

    def grow(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
        return st.one_of(
            st.builds(Unary, st.sampled_from(["-", "+", "~", "not", "!"]), children),
            st.builds(
                Binary,
                st.sampled_from(sorted(ARITHMETIC | BITWISE | COMPARISONS | {"and", "or", "==", "!="})),
                children,
                children,
            ),
            _any_call(children),
            st.builds(Cast, children, st.sampled_from(["int32", "int64", "float32", "float64", "bool"])),
            st.builds(IsNull, children, st.booleans()),
            st.builds(In, children, st.lists(children, min_size=1, max_size=3).map(tuple), st.booleans()),
            st.builds(Between, children, children, children, st.booleans()),
            st.builds(
                Case, st.lists(st.tuples(children, children), min_size=1, max_size=2), st.none() | children
            ),
        )

    return st.recursive(leaves, grow, max_leaves=max_leaves)
