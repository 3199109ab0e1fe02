"""Exact float sums in Spark SQL: Arrow UDFs that carry the expansions of kernels/exact_sum.py, so that
sliding-window sums kept as cumulative sums minus an earlier cumulative sum are exact.

A sum state is a struct of the ``K`` canonical float64 components (``s0`` is the correctly rounded
sum) and the counts of +inf, -inf and NaN values (``pinf``, ``ninf``, ``nan``); a NULL state or NULL
field is zero. Functions (registered by :func:`register`, each taking a label naming the view and
column for its error messages):

``av_exact_sum(values ARRAY<DOUBLE>, label)``
    the state of the sum of an array (``collect_list`` of a group's values);
``av_exact_add(a STATE-LIKE STRUCT, b STATE, label)``
    the state of ``a + b`` (``a`` may be any struct of the seven fields in order, e.g. stored columns);
``av_exact_difference(a STRUCT, b STRUCT, label)``
    ``a - b`` rounded to the nearest double (NaN while a NaN or both infinities are counted, else
    +-inf while one infinity is): the value ``math.fsum`` gives for the values in ``a`` but not ``b``.

Each works on whole Arrow batches with the numba kernels (no per-row Python).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.functions import arrow_udf

from arrayviews.execution.local_sql import ArrowFunction
from arrayviews.kernels.exact_sum import NONFINITE, ExactSumError, FloatSums, K

FIELDS = tuple(f"s{k}" for k in range(K)) + ("pinf", "ninf", "nan")
STATE_TYPE = (
    "struct<" + ", ".join(f"{f}: {'double' if f.startswith('s') else 'bigint'}" for f in FIELDS) + ">"
)
_ARROW_TYPES = [pa.float64()] * K + [pa.int64()] * NONFINITE
SUM, ADD, DIFFERENCE = "av_exact_sum", "av_exact_add", "av_exact_difference"


def _label(labels: pa.Array) -> str:
    return str(labels[0].as_py()) if len(labels) else "exact sum"


def _error(error: ExactSumError, labels: pa.Array) -> ArithmeticError:
    return ArithmeticError(f"{_label(labels)}: {error}")


def _read(states: pa.Array) -> FloatSums:
    """A struct array of the seven fields (by position) as sums; NULL states and fields are zero."""
    if isinstance(states, pa.ChunkedArray):
        states = states.combine_chunks()
    missing = np.asarray(states.is_null(), dtype=bool)
    columns = []
    for index, arrow_type in enumerate(_ARROW_TYPES):
        field = states.field(index).cast(arrow_type).fill_null(0)
        values = np.asarray(field, dtype=arrow_type.to_pandas_dtype())
        columns.append(np.where(missing, 0, values))
    return FloatSums(
        np.ascontiguousarray(np.stack(columns[:K], axis=1)).reshape(-1, K),
        np.ascontiguousarray(np.stack(columns[K:], axis=1)).reshape(-1, NONFINITE),
    )


def _write(sums: FloatSums) -> pa.StructArray:
    arrays = [pa.array(sums.parts[:, k], pa.float64()) for k in range(K)]
    arrays += [pa.array(sums.nonfinite[:, k], pa.int64()) for k in range(NONFINITE)]
    return pa.StructArray.from_arrays(arrays, names=list(FIELDS))


def _pairwise(a: pa.Array, b: pa.Array, sign: int) -> FloatSums:
    first, second = _read(a), _read(b)
    n = len(first)
    rows = FloatSums.concat([first, second])
    groups = np.concatenate([np.arange(n), np.arange(n)])
    signs = np.concatenate([np.ones(n, np.int64), np.full(n, sign, np.int64)])
    return rows.combine(groups, n, signs)


def exact_sum(values: pa.Array, labels: pa.Array) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    lengths = np.asarray(values.value_lengths().fill_null(0), dtype=np.int64)
    flat = np.asarray(values.flatten().fill_null(0.0), dtype=np.float64)
    try:
        sums = FloatSums.of_lists(flat, np.concatenate([[0], np.cumsum(lengths)]))
    except ExactSumError as error:
        raise _error(error, labels) from None
    return _write(sums)


def exact_add(a: pa.Array, b: pa.Array, labels: pa.Array) -> pa.Array:
    try:
        return _write(_pairwise(a, b, 1))
    except ExactSumError as error:
        raise _error(error, labels) from None


def exact_difference(a: pa.Array, b: pa.Array, labels: pa.Array) -> pa.Array:
    try:
        return pa.array(_pairwise(a, b, -1).values(), pa.float64())
    except ExactSumError as error:
        raise _error(error, labels) from None


_FUNCTIONS = (
    (SUM, exact_sum, STATE_TYPE),
    (ADD, exact_add, STATE_TYPE),
    (DIFFERENCE, exact_difference, "double"),
)
_registered: set[int] = set()


def register(spark: SparkSession) -> None:
    """Make the functions callable from Spark SQL in ``spark`` (once per session)."""
    key = id(spark._jsparkSession)
    if key in _registered:
        return
    for name, function, return_type in _FUNCTIONS:
        spark.udf.register(name, arrow_udf(function, return_type))
    _registered.add(key)


# -- the same functions for in-process queries (execution/local_sql.py) ------------------------------
_DUCKDB_STATE = (
    "STRUCT(" + ", ".join(f"{f} {'DOUBLE' if f.startswith('s') else 'BIGINT'}" for f in FIELDS) + ")"
)
#: Spark's ``STRUCT(a, b, ...)`` of stored state columns, as the state type (fields by position).
STATE_MACRO = "av_exact_state"
LOCAL_MACROS = (
    f"CREATE MACRO {STATE_MACRO}({', '.join(FIELDS)}) AS {{"
    + ", ".join(f"'{f}': CAST({f} AS {'DOUBLE' if f.startswith('s') else 'BIGINT'})" for f in FIELDS)
    + "}",
)
LOCAL_FUNCTIONS = (
    ArrowFunction(SUM, exact_sum, ("DOUBLE[]", "VARCHAR"), _DUCKDB_STATE),
    ArrowFunction(
        ADD, exact_add, (_DUCKDB_STATE, _DUCKDB_STATE, "VARCHAR"), _DUCKDB_STATE, (0, 1), STATE_MACRO
    ),
    ArrowFunction(
        DIFFERENCE, exact_difference, (_DUCKDB_STATE, _DUCKDB_STATE, "VARCHAR"), "DOUBLE", (0, 1), STATE_MACRO
    ),
)
__all__ = ["ADD", "DIFFERENCE", "FIELDS", "LOCAL_FUNCTIONS", "LOCAL_MACROS", "STATE_TYPE", "SUM", "register"]
