"""Cell expressions against Spark itself: the same Spark SQL text must mean the same thing whether
Spark evaluates it or the numpy evaluator does (Spark 4.1, ANSI mode).

Spark runs here with its expression-rewriting optimizer rules switched off (constant folding, NULL
propagation, boolean simplification, operator reordering, ...) and without subexpression
elimination, so that it evaluates expressions as its own evaluation rules say. Those rewrites never
change a value, but can skip or move errors (``x * 2 * 0`` becomes ``x * 0``); the numpy evaluator
follows the rules without rewriting (see kernels/evaluate.py). Data are small DataFrames, so every
expression runs through Spark's generated code.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from arrayviews.kernels.evaluate import evaluate
from arrayviews.model.errors import ValidationError
from arrayviews.model.expressions import Call, Expr, Literal, infer_type, parse_expression
from expression_cases import CASE_COLUMNS, ROWS, SEMANTICS, Raises, case_columns, same_values
from expression_strategies import COLUMNS, TRANSCENDENTAL, any_trees, expression_chunks, typed, well_typed

pytestmark = pytest.mark.spark

_REWRITES = [
    "NullPropagation",
    "NullDownPropagation",
    "ConstantPropagation",
    "FoldablePropagation",
    "OptimizeIn",
    "ConstantFolding",
    "ReorderAssociativeOperator",
    "BooleanSimplification",
    "SimplifyConditionals",
    "PushFoldableIntoBranches",
    "SimplifyBinaryComparison",
    "ReplaceNullWithFalseInPredicate",
    "SimplifyCasts",
    "UnwrapCastInBinaryComparison",
    "ConvertToLocalRelation",
]
_SETTINGS = {
    "spark.sql.optimizer.excludedRules": ",".join(
        f"org.apache.spark.sql.catalyst.optimizer.{r}" for r in _REWRITES
    ),
    "spark.sql.subexpressionElimination.enabled": "false",
}
SPARK_TYPES = {"int32": "int", "int64": "bigint", "float32": "float", "float64": "double", "bool": "boolean"}
SPARK_TYPES["void"] = "void"
_FIELDS = {
    "int32": T.IntegerType(),
    "int64": T.LongType(),
    "float32": T.FloatType(),
    "float64": T.DoubleType(),
}
_FIELDS["bool"] = T.BooleanType()
_ERROR_CLASS = re.compile(r"\[(ARITHMETIC_OVERFLOW|DIVIDE_BY_ZERO|REMAINDER_BY_ZERO|CAST_OVERFLOW)\]")
#: Where Spark reads a decimal literal (a DECIMAL in Spark, a DOUBLE here): its type there.
DECIMAL_IN_SPARK = {"w * 1.5": "decimal(13,1)"}


@pytest.fixture(scope="module")
def rules_off(spark):
    """The shared session with the rewriting optimizer rules off (restored afterwards)."""
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"
    previous = {key: spark.conf.get(key, None) for key in _SETTINGS}
    for key, value in _SETTINGS.items():
        spark.conf.set(key, value)
    yield spark
    for key, value in previous.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


def frame(
    spark, kinds: dict[str, str], columns: dict[str, np.ndarray], nulls: dict[str, np.ndarray], length: int
):
    """A DataFrame with one row per cell (in order, with a row number) and the columns' values."""
    schema = T.StructType([T.StructField("row_", T.IntegerType(), False)])
    for name, kind in kinds.items():
        schema.add(T.StructField(name, _FIELDS[kind], True))
    rows = []
    for r in range(length):
        row = [r]
        for name in kinds:
            null = name in nulls and nulls[name][r]
            row.append(None if null else columns[name][r].item())
        rows.append(tuple(row))
    return spark.createDataFrame(rows, schema).coalesce(1)


def spark_error(error: Exception) -> str:
    """The Spark error class of an arithmetic error (the test fails on any other error)."""
    found = _ERROR_CLASS.search(str(error))
    if found is None:
        raise error
    return found.group(1)


def run_in_spark(df, texts: list[str]) -> list:
    """For each text: its values in row order (None for NULL), or the Spark error class it raises.

    All texts run in one job; if that job fails, each runs on its own to see which ones fail."""
    try:
        rows = df.selectExpr("row_", *[f"{text} AS c{k}" for k, text in enumerate(texts)]).collect()
    except Exception as error:  # noqa: BLE001 - classified below
        if len(texts) == 1:
            return [spark_error(error)]
        return [run_in_spark(df, [text])[0] for text in texts]
    rows = sorted(rows, key=lambda row: row["row_"])
    return [[_plain(row[f"c{k}"]) for row in rows] for k in range(len(texts))]


def _plain(value):
    return float(value) if value is not None and type(value).__name__ == "Decimal" else value


def spark_types(df, texts: list[str]) -> list[str]:
    """Spark's type for each text (analysis only, no job), or "error" where its analyzer rejects it."""
    try:
        fields = df.selectExpr(*[f"{text} AS c{k}" for k, text in enumerate(texts)]).schema.fields
        return [field.dataType.simpleString() for field in fields]
    except Exception as error:  # noqa: BLE001
        if "AnalysisException" not in type(error).__name__ and "DATATYPE_MISMATCH" not in str(error):
            raise
        if len(texts) == 1:
            return ["error"]
        return [spark_types(df, [text])[0] for text in texts]


def spark_type(df, text: str) -> str:
    return spark_types(df, [text])[0]


def ours(expr: Expr, columns, nulls, length):
    try:
        result = evaluate(expr, columns, length, nulls)
    except ValidationError as error:
        return error
    mask = np.ma.getmaskarray(result)
    return [None if m else v.item() for v, m in zip(np.ma.getdata(result), mask, strict=True)]


# ---------------------------------------------------------------------------------------------
# The semantic table, in Spark


def test_semantic_table_in_spark(rules_off) -> None:
    kinds = {name: kind for name, (kind, _) in CASE_COLUMNS.items()}
    columns, nulls = case_columns()
    df = frame(rules_off, kinds, columns, nulls, ROWS)
    texts = [text for text, _, _ in SEMANTICS]
    # One job for the cases that give values, one each for those that raise.
    values = iter(run_in_spark(df, [text for text, _, e in SEMANTICS if not isinstance(e, Raises)]))
    outcomes = [
        run_in_spark(df, [text])[0] if isinstance(expected, Raises) else next(values)
        for text, _, expected in SEMANTICS
    ]
    problems = []
    found_types = spark_types(df, texts)
    for (text, kind, expected), outcome, found_type in zip(SEMANTICS, outcomes, found_types, strict=True):
        wanted_type = DECIMAL_IN_SPARK.get(text, SPARK_TYPES[kind])
        if found_type != wanted_type:
            problems.append(f"{text}: Spark type {found_type}, table says {wanted_type}")
        if isinstance(expected, Raises):
            if outcome != expected.spark_class:
                problems.append(f"{text}: Spark gives {outcome}, table says {expected.spark_class}")
        elif not same_values(outcome, expected):
            problems.append(f"{text}: Spark gives {outcome}, table says {expected}")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# Typing: every random tree is typed as Spark types it, or rejected where Spark rejects it


@pytest.fixture(scope="module")
def no_rows(rules_off):
    """An empty DataFrame with the columns of COLUMNS (for analysis only)."""
    columns = {name: np.zeros(0, dtype={"bool": np.bool_}.get(kind, kind)) for name, kind in COLUMNS.items()}
    return frame(rules_off, COLUMNS, columns, {}, 0)


@pytest.mark.slow
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_trees(names=list(COLUMNS), max_leaves=6), min_size=1, max_size=8))
def test_typing_agrees_with_spark(no_rows, exprs: list[Expr]) -> None:
    expected = []
    for expr in exprs:
        try:
            expected.append(SPARK_TYPES[infer_type(expr, COLUMNS)])
        except ValidationError:
            expected.append("error")
    found = spark_types(no_rows, [expr.to_text() for expr in exprs])
    assert found == expected, [expr.to_text() for expr in exprs]


# ---------------------------------------------------------------------------------------------
# Values, NULLs and errors: random well-typed expressions over random data with awkward values


def _typed_ok(expr: Expr) -> bool:
    try:
        infer_type(expr, COLUMNS)
    except ValidationError:
        return False
    return True


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(expression_chunks(), st.lists(well_typed(depth=4).filter(_typed_ok), min_size=1, max_size=6))
def test_evaluation_agrees_with_spark(rules_off, chunk, exprs: list[Expr]) -> None:
    length, columns, nulls = chunk
    df = frame(rules_off, COLUMNS, columns, nulls, length)
    outcomes = run_in_spark(df, [expr.to_text() for expr in exprs])
    for expr, outcome in zip(exprs, outcomes, strict=True):
        mine = ours(expr, columns, nulls, length)
        if isinstance(outcome, str):
            assert isinstance(mine, ValidationError), (expr.to_text(), outcome, mine)
        else:
            assert not isinstance(mine, ValidationError), (expr.to_text(), outcome, str(mine))
            assert same_values(mine, outcome), (expr.to_text(), mine, outcome)


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    expression_chunks(null_rate=0.1),
    st.lists(
        st.one_of(
            st.builds(lambda f, a: Call(f, (a,)), st.sampled_from(TRANSCENDENTAL[:-1]), typed("number", 1)),
            st.builds(lambda a, b: Call("pow", (a, b)), typed("number", 1), typed("number", 1)),
            st.builds(lambda a, b: Call("log", (a, b)), typed("number", 1), typed("number", 1)),
        ).filter(_typed_ok),
        min_size=1,
        max_size=8,
    ),
)
def test_transcendental_functions_agree_with_spark(rules_off, chunk, exprs: list[Expr]) -> None:
    """exp, ln, log, log10, log2, sin, cos, tan and pow: Spark uses Java's StrictMath, numpy its own
    routines, so finite results are compared to 1e-15 relative; NULLs, NaN and infinities exactly."""
    length, columns, nulls = chunk
    df = frame(rules_off, COLUMNS, columns, nulls, length)
    outcomes = run_in_spark(df, [expr.to_text() for expr in exprs])
    for expr, outcome in zip(exprs, outcomes, strict=True):
        mine = ours(expr, columns, nulls, length)
        if isinstance(outcome, str):
            assert isinstance(mine, ValidationError), (expr.to_text(), outcome)
            continue
        assert not isinstance(mine, ValidationError), (expr.to_text(), str(mine))
        for a, e in zip(mine, outcome, strict=True):
            if isinstance(a, float) and isinstance(e, float) and math.isfinite(a) and math.isfinite(e):
                assert math.isclose(a, e, rel_tol=1e-15, abs_tol=1e-300), (expr.to_text(), a, e)
            else:
                assert same_values([a], [e]), (expr.to_text(), a, e)


# ---------------------------------------------------------------------------------------------
# Texts as users write them: Spark reads them as the parser does


READINGS = [
    "1 | 2 ^ 3 & 6",
    "5 ^ 3 | 1",
    "(1 = 1) = TRUE < FALSE",
    "1 < 2 = TRUE",
    "- 2147483648",
    "-2147483648 * 1",
    "- -5",
    "2 - -2147483648L",
    "NOT 1 = 2 AND TRUE",
    "1 + 2 * 3 % 4 DIV 2",
    "~1 + 1",
    "-2 & 3",
    "1 IN (1, 2) AND 2 BETWEEN 1 AND 3",
    "CASE 2 WHEN 1 THEN 10 WHEN 2 THEN 20 ELSE 30 END",
    "1.5F + 1",
    "7L DIV 2",
    "+3",
    "double('Infinity') > 1e308",
    "int('  12') + boolean('t')::INT",
    "nvl(NULL, 1)",
    "ceiling(2.1D) + power(2, 3)",
    "log10(1000.0D)",
    "1 IS DISTINCT FROM NULL",
]


@pytest.mark.parametrize("text", READINGS)
def test_spark_reads_texts_as_the_parser_does(rules_off, text: str) -> None:
    df = frame(rules_off, {}, {}, {}, 2)
    expr = parse_expression(text)
    assert spark_type(df, text) == SPARK_TYPES[infer_type(expr, {})] == spark_type(df, expr.to_text())
    (outcome,) = run_in_spark(df, [text])
    assert same_values(ours(expr, {}, {}, 2), outcome), (text, outcome)


@pytest.mark.parametrize("value", [3.4028234663852886e38, -3.4028234663852886e38, 1.1754943508222875e-38, 0.1])
def test_float32_literals_print_as_spark_reads_them(rules_off, value: float) -> None:
    """A float32 literal prints as text Spark accepts and reads back as the same float: the shortest
    spelling of the largest float32, 3.4028235e+38F, is beyond the range Spark checks the written
    decimal against (found by test_evaluation_agrees_with_spark)."""
    literal = Literal(float(np.float32(value)), "float32")
    df = frame(rules_off, {}, {}, {}, 1)
    (outcome,) = run_in_spark(df, [literal.to_text()])
    assert not isinstance(outcome, str), (literal.to_text(), outcome)
    assert outcome == [float(np.float32(value))]
