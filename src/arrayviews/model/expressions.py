"""Cell expressions (``sqrt(v) * 2 + j``, ``v > 0.5D AND NOT isnan(w)``): Spark SQL, in one place.

Array expressions are Spark SQL expressions with Spark's semantics (ANSI mode, as Spark 4.1 runs by
default), so the same text means the same thing whether Spark evaluates it over a stream or numpy
over an array's cells. This module gathers the public names:

* the immutable tree (:mod:`~arrayviews.model.expression_tree`) and its canonical Spark SQL text,
* the parser (:mod:`~arrayviews.model.expression_parser`, sqlglot's Spark dialect),
* Spark's typing rules (:mod:`~arrayviews.model.expression_types`),

and :mod:`arrayviews.kernels.evaluate` computes expressions over numpy columns. The supported subset
and every semantic rule are listed in docs/expressions.md.
"""

from __future__ import annotations

from arrayviews.model.expression_parser import SUPPORTED, parse_expression
from arrayviews.model.expression_tree import (
    ARITHMETIC,
    BINARY_OPS,
    BITWISE,
    CAST_FUNCTIONS,
    COMPARISONS,
    FLOAT_TYPES,
    FUNCTION_ALIASES,
    FUNCTIONS,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    INTEGER_TYPES,
    LOGICAL,
    MAX_DEPTH,
    NUMERIC_TYPES,
    UNARY_OPS,
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
    depth,
    referenced_names,
    resolve_name,
    resolve_names,
    transform,
)
from arrayviews.model.expression_types import coercion, infer_type, nullable, result_type, sql_name, wider

__all__ = [
    "ARITHMETIC",
    "BINARY_OPS",
    "BITWISE",
    "CAST_FUNCTIONS",
    "COMPARISONS",
    "FLOAT_TYPES",
    "FUNCTIONS",
    "FUNCTION_ALIASES",
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "INTEGER_TYPES",
    "LOGICAL",
    "MAX_DEPTH",
    "NUMERIC_TYPES",
    "SUPPORTED",
    "UNARY_OPS",
    "VOID",
    "Between",
    "Binary",
    "Call",
    "Case",
    "Cast",
    "Expr",
    "In",
    "IsNull",
    "Literal",
    "Name",
    "Unary",
    "coercion",
    "depth",
    "infer_type",
    "nullable",
    "parse_expression",
    "referenced_names",
    "resolve_name",
    "resolve_names",
    "result_type",
    "sql_name",
    "transform",
    "wider",
]
