"""The semantic rules of cell expressions as examples: text, expected type, expected values per cell.

Each case is checked twice: against the numpy evaluator (tests/test_expressions.py) and against Spark
itself on the same columns (tests/test_expression_spark.py), so the expected values here are what
Spark 4.1 computes (ANSI mode). ``None`` is NULL; ``Raises(kind)`` means Spark raises (kind is the
Spark error class) and arrayviews raises ValidationError.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

NAN, INF = math.nan, math.inf
I32_MAX, I32_MIN = 2**31 - 1, -(2**31)
I64_MAX, I64_MIN = 2**63 - 1, -(2**63)

#: name -> (type, values); None is NULL.
CASE_COLUMNS = {
    "v": ("float64", [0.25, 4.0, NAN, -1.0, 0.0, -2.5]),
    "i": ("int64", [0, 1, 2, 3, -4, I64_MAX]),
    "w": ("int32", [1, 2, 0, -3, 7, I32_MAX]),
    "f": ("float32", [0.5, -1.5, 2.5, INF, -0.0, NAN]),
    "b": ("bool", [True, False, True, False, True, False]),
    "n": ("int32", [1, None, 3, None, -5, 0]),
    "m": ("float64", [None, 1.5, None, -0.5, NAN, 2.0]),
}
ROWS = 6
T, F = True, False


@dataclass(frozen=True)
class Raises:
    """Spark raises an error of this class (arrayviews: ValidationError containing ``message``)."""

    spark_class: str
    message: str


OVERFLOW = Raises("ARITHMETIC_OVERFLOW", "overflow")
DIVIDE = Raises("DIVIDE_BY_ZERO", "division by zero")
REMAINDER = Raises("REMAINDER_BY_ZERO", "remainder by zero")
CAST = Raises("CAST_OVERFLOW", "cannot cast")


def _all(value) -> list:
    return [value] * ROWS


# (text, expected type (attribute type or "void"), expected values or Raises)
SEMANTICS: list[tuple[str, str, list | Raises]] = [
    # -- NaN: equal to itself, larger than everything
    ("v > 0.5 AND i < 10", "bool", [F, T, T, F, F, F]),
    ("v = v", "bool", _all(T)),
    ("v <> v", "bool", _all(F)),
    ("v < CAST('NaN' AS DOUBLE)", "bool", [T, T, F, T, T, T]),
    ("v > CAST('Infinity' AS DOUBLE)", "bool", [F, F, T, F, F, F]),
    ("-0.0D = 0.0D AND NOT -0.0D < 0.0D", "bool", _all(T)),
    ("greatest(v, 1)", "float64", [1.0, 4.0, NAN, 1.0, 1.0, 1.0]),
    ("least(v, 1)", "float64", [0.25, 1.0, 1.0, -1.0, 0.0, -2.5]),
    ("v IN (CAST('NaN' AS DOUBLE))", "bool", [F, F, T, F, F, F]),
    ("f BETWEEN -1 AND 1", "bool", [T, F, F, F, T, F]),
    ("isnan(v) OR isnan(w)", "bool", [F, F, T, F, F, F]),
    ("isnan(m)", "bool", [F, F, F, F, T, F]),
    ("nanvl(v, -1)", "float64", [0.25, 4.0, -1.0, -1.0, 0.0, -2.5]),
    # -- NULLs: three-valued logic, propagation, functions that skip or test them
    ("n + 1", "int32", [2, None, 4, None, -4, 1]),
    ("n > 0 OR b", "bool", [T, None, T, None, T, F]),
    ("n > 0 AND b", "bool", [T, F, T, F, F, F]),
    ("NOT (n > 0)", "bool", [F, None, F, None, T, T]),
    ("n IS NULL", "bool", [F, T, F, T, F, F]),
    ("m IS NOT NULL", "bool", [F, T, F, T, T, T]),
    ("n = NULL", "bool", _all(None)),
    ("w <=> n", "bool", [T, F, F, F, F, F]),
    ("n <=> NULL", "bool", [F, T, F, T, F, F]),
    ("NULL + 1", "int32", _all(None)),
    ("coalesce(n, w)", "int32", [1, 2, 3, -3, -5, 0]),
    ("nvl(m, v)", "float64", [0.25, 1.5, NAN, -0.5, NAN, 2.0]),
    ("nullif(w, 2)", "int32", [1, None, 0, -3, 7, I32_MAX]),
    ("if(b, w, n)", "int32", [1, None, 0, None, 7, 0]),
    ("CASE WHEN w > 1 THEN w WHEN b THEN -1 END", "int32", [-1, 2, -1, None, 7, I32_MAX]),
    ("least(n, m)", "float64", [1.0, 1.5, 3.0, -0.5, -5.0, 0.0]),
    ("greatest(n, CAST(NULL AS INT))", "int32", [1, None, 3, None, -5, 0]),
    ("w IN (1, 7, NULL)", "bool", [T, None, None, None, T, None]),
    ("w NOT IN (1, 7)", "bool", [F, T, T, T, F, T]),
    ("n IN (1, 3)", "bool", [T, None, T, None, F, F]),
    ("w BETWEEN 0 AND 2", "bool", [T, T, T, F, F, F]),
    ("w BETWEEN n AND 5", "bool", [T, None, F, None, F, F]),
    ("ln(v) IS NULL", "bool", [F, F, F, T, T, T]),
    # -- integers: Java remainder and division, no wrap-around
    ("w % 2", "int32", [1, 0, 0, -1, 1, 1]),
    ("w % -2", "int32", [1, 0, 0, -1, 1, 1]),
    ("-w % 3", "int32", [-1, -2, 0, 0, -1, -1]),
    ("i DIV 2", "int64", [0, 0, 1, 1, -2, I64_MAX // 2]),
    ("-7 DIV 2", "int64", _all(-3)),
    ("w / 2", "float64", [0.5, 1.0, 0.0, -1.5, 3.5, 1073741823.5]),
    ("w + 1", "int32", OVERFLOW),
    ("i + 1", "int64", OVERFLOW),
    ("w * w", "int32", OVERFLOW),
    ("i * 2", "int64", OVERFLOW),
    ("-w - 1", "int32", [-2, -3, -1, 2, -8, I32_MIN]),
    ("-w - 2", "int32", OVERFLOW),
    ("abs(-2147483648)", "int32", OVERFLOW),
    ("-(-2147483648)", "int32", OVERFLOW),
    ("-9223372036854775808 DIV -1", "int64", OVERFLOW),
    ("-2147483648 DIV -1", "int64", _all(2147483648)),
    ("-2147483648 % -1", "int32", _all(0)),
    ("try_add(w, 1)", "int32", [2, 3, 1, -2, 8, None]),
    ("try_multiply(i, 2)", "int64", [0, 2, 4, 6, -8, None]),
    ("try_subtract(-w, 2)", "int32", [-3, -4, -2, 1, -9, None]),
    ("CAST(w AS BIGINT) * 2", "int64", [2, 4, 0, -6, 14, 2 * I32_MAX]),
    ("1 / w", "float64", DIVIDE),
    ("v / 0", "float64", DIVIDE),
    ("v / -0.0D", "float64", DIVIDE),
    ("w % 0", "int32", REMAINDER),
    ("v % 0.0D", "float64", REMAINDER),
    ("i DIV 0", "int64", DIVIDE),
    ("try_divide(1, w)", "float64", [1.0, 0.5, None, -1 / 3, 1 / 7, 1 / I32_MAX]),
    ("try_divide(v, 0)", "float64", _all(None)),
    # -- errors only where Spark evaluates
    ("w <> 0 AND 1 / w > 0", "bool", [T, T, F, F, T, T]),
    ("if(w = 0, 0.0D, 1 / w)", "float64", [1.0, 0.5, 0.0, -1 / 3, 1 / 7, 1 / I32_MAX]),
    ("CASE WHEN w > 0 THEN 1 / w ELSE -1 END", "float64", [1.0, 0.5, -1.0, -1.0, 1 / 7, 1 / I32_MAX]),
    ("coalesce(w, w + 2147483647)", "int32", [1, 2, 0, -3, 7, I32_MAX]),
    ("w IN (w, w + 2147483647)", "bool", _all(T)),
    ("n + (w * w)", "int32", OVERFLOW),
    ("nanvl(v, 1 / w)", "float64", DIVIDE),
    ("nanvl(f, 1 / (w - 1))", "float64", [0.5, -1.5, 2.5, INF, -0.0, 1 / (I32_MAX - 1)]),
    ("nullif(n, w * w)", "int32", OVERFLOW),
    # -- except the operand Spark shares in BETWEEN and nullif: computed for every row unless cheap
    # -- or in a branch Spark may skip (RewriteWithExpression)
    ("w < 0 AND (w + 2147483647 BETWEEN 0 AND 1)", "bool", OVERFLOW),
    ("try_divide(if(w + 2147483647 NOT BETWEEN 0 AND 1, 1, 2), n - n)", "float64", OVERFLOW),
    ("w < 0 AND nullif(w + 2147483647, 0) > 0", "bool", OVERFLOW),
    ("w < 0 AND (if(w + 2147483647 BETWEEN 0 AND 1, 1, 2) BETWEEN 0 AND 1)", "bool", OVERFLOW),
    ("w < 0 AND (if(w > 0, 1, if(w + 2147483647 BETWEEN 0 AND 1, 2, 3)) BETWEEN 0 AND 1)", "bool", _all(F)),
    ("if(w < 0, w + 2147483647 BETWEEN 0 AND 1, false)", "bool", _all(F)),
    ("coalesce(b, w + 2147483647 BETWEEN 0 AND 1)", "bool", [T, F, T, F, T, F]),
    ("CASE WHEN w > -10 THEN false WHEN w + 2147483647 BETWEEN 0 AND 1 THEN true END", "bool", _all(F)),
    (
        "nanvl(v, if(w + 2147483647 BETWEEN 0 AND 1, 1.0D, 2.0D))",
        "float64",
        [0.25, 4.0, 2.0, -1.0, 0.0, -2.5],
    ),
    ("w < 0 AND (w BETWEEN 0 AND w + 2147483647)", "bool", _all(F)),
    ("w = 5 AND (2147483647 + 1 BETWEEN 0 AND 1)", "bool", _all(F)),
    # -- floating point
    ("f + f", "float32", [1.0, -3.0, 5.0, INF, -0.0, NAN]),
    ("f + 1", "float64", [1.5, -0.5, 3.5, INF, 1.0, NAN]),
    ("f % 2.5F", "float32", [0.5, -1.5, 0.0, NAN, -0.0, NAN]),
    ("v % 1.5D", "float64", [0.25, 1.0, NAN, -1.0, 0.0, -1.0]),
    ("-5.5D % 2", "float64", _all(-1.5)),
    ("w * 1.5", "float64", [1.5, 3.0, 0.0, -4.5, 10.5, I32_MAX * 1.5]),
    ("sqrt(v)", "float64", [0.5, 2.0, NAN, NAN, 0.0, NAN]),
    ("pow(2, 10)", "float64", _all(1024.0)),
    ("pow(1, CAST('NaN' AS DOUBLE))", "float64", _all(NAN)),
    ("pow(-1, CAST('Infinity' AS DOUBLE))", "float64", _all(NAN)),
    ("pow(CAST('NaN' AS DOUBLE), 0)", "float64", _all(1.0)),
    ("pow(CAST('-Infinity' AS DOUBLE), 0.5D)", "float64", _all(INF)),
    ("pow(f, 0.5F)", "float64", [0.5**0.5, NAN, 2.5**0.5, INF, 0.0, NAN]),
    ("pow(-0.0D, v)", "float64", [0.0, 0.0, NAN, -INF, 1.0, INF]),
    ("i < 9223372036854775807.0D", "bool", [T, T, T, T, T, F]),
    ("9007199254740993 = 9007199254740992.0D", "bool", _all(T)),
    ("CAST(16777217 AS INT) = CAST(16777216 AS FLOAT)", "bool", _all(F)),
    # -- rounding
    ("floor(v)", "int64", [0, 4, 0, -1, 0, -3]),
    ("ceil(f)", "int64", [1, -1, 3, I64_MAX, 0, 0]),
    ("floor(w)", "int64", [1, 2, 0, -3, 7, I32_MAX]),
    ("round(v)", "float64", [0.0, 4.0, NAN, -1.0, 0.0, -3.0]),
    ("round(f)", "float32", [1.0, -2.0, 3.0, INF, 0.0, NAN]),
    ("round(w)", "int32", [1, 2, 0, -3, 7, I32_MAX]),
    ("round(2.5D) + round(-2.5D) + round(0.49999999999999994D)", "float64", _all(0.0)),
    ("round(-0.4D)", "float64", _all(0.0)),
    # -- casts
    ("CAST(v AS INT)", "int32", CAST),
    ("CAST(f AS BIGINT)", "int64", CAST),
    ("CAST(v * 1e10 AS INT)", "int32", CAST),
    ("CAST(i AS INT)", "int32", CAST),
    ("CAST(w AS INT)", "int32", [1, 2, 0, -3, 7, I32_MAX]),
    ("CAST(-2147483648.9D AS INT)", "int32", _all(I32_MIN)),
    ("CAST(9223372036854775807.0D AS BIGINT)", "int64", _all(I64_MAX)),
    ("CAST(1e300D AS FLOAT)", "float32", _all(INF)),
    ("CAST(v AS BOOLEAN)", "bool", [T, T, T, T, F, T]),
    ("CAST(b AS INT) + CAST(TRUE AS BIGINT)", "int64", [2, 1, 2, 1, 2, 1]),
    ("int(2.9D) + bigint(-2.9D)", "int64", _all(0)),
    ("float(w)", "float32", [1.0, 2.0, 0.0, -3.0, 7.0, 2147483648.0]),
    ("double('-inf') < v", "bool", _all(T)),
    # -- bitwise and literals
    ("5 ^ 3", "int32", _all(6)),
    ("w & 3", "int32", [1, 2, 0, 1, 3, 3]),
    ("~w", "int32", [-2, -3, -1, 2, -8, I32_MIN]),
    ("1 | 2 ^ 3", "int32", _all(1)),
    ("w | 1L", "int64", [1, 3, 1, -3, 7, I32_MAX]),
    ("-2147483648", "int32", _all(I32_MIN)),
    ("2147483648", "int64", _all(2147483648)),
    ("1.5F", "float32", _all(1.5)),
    ("1e3", "float64", _all(1000.0)),
    ("(1 = 1) < TRUE", "bool", _all(F)),
    ("1 = 2 < TRUE", "bool", _all(T)),
]


def case_columns() -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The columns of CASE_COLUMNS as numpy arrays (NULLs as 0) and their NULL masks."""
    dtypes = {"int32": np.int32, "int64": np.int64, "float32": np.float32, "float64": np.float64}
    dtypes["bool"] = np.bool_
    columns, nulls = {}, {}
    for name, (kind, values) in CASE_COLUMNS.items():
        mask = np.array([value is None for value in values])
        columns[name] = np.array([0 if value is None else value for value in values], dtype=dtypes[kind])
        if mask.any():
            nulls[name] = mask
    return columns, nulls


def same_values(actual: list, expected: list) -> bool:
    """Equal lists of cell values: NaN equals NaN, the sign of zero counts, types must agree."""
    if len(actual) != len(expected):
        return False
    for a, e in zip(actual, expected, strict=True):
        if a is None or e is None:
            if a is not e:
                return False
        elif isinstance(e, float) or isinstance(a, float):
            if not isinstance(a, float):
                return False
            if math.isnan(e) or math.isnan(a):
                if not (math.isnan(a) and math.isnan(e)):
                    return False
            elif a != e or math.copysign(1.0, a) != math.copysign(1.0, e):
                return False
        elif type(a) is not type(e) or a != e:
            return False
    return True
