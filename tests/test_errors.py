"""Errors from inside Spark come back as arrayviews' own errors (type, message, array, column, value),
never as Py4J or PySpark exceptions; the command line prints one line and exits 1, and Spark prints
nothing unless asked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from py4j.protocol import Py4JError
from pyspark.errors import PySparkException

from arrayviews.array import Array
from arrayviews.execution import jobs
from arrayviews.execution.failures import translated_errors
from arrayviews.model.errors import (
    ArrayViewsError,
    ConflictError,
    ExecutionError,
    ParseError,
    ValidationError,
)
from arrayviews.operators.source import ComputedSource
from arrayviews.storage import layout

OUT = pa.schema([("id", pa.int64())])


def _run_failing(spark, error: Exception) -> None:
    """A Spark job whose task raises ``error`` (a closure, so workers receive it by value)."""

    def task(table: pa.Table) -> pa.Table:
        if table.num_rows:
            raise error
        return table

    frame = jobs.map_batches(spark.range(0, 10, numPartitions=2), task, OUT)
    with translated_errors():
        frame.collect()


@pytest.mark.parametrize(
    "error",
    [
        ValidationError("array A, column v: 7 is not an int32 value", array="A", column="v", value=7),
        ConflictError("array B: cell (i=1) exists", array="B"),
        ParseError("unexpected ')'", text="SELECT )", line=1, column=8, expected=("name",)),
    ],
    ids=["validation", "conflict", "parse"],
)
def test_an_arrayviews_error_raised_in_a_task_comes_back_as_itself(spark, error) -> None:
    with pytest.raises(type(error)) as caught:
        _run_failing(spark, error)
    got = caught.value
    assert type(got) is type(error) and str(got) == str(error)
    for name in ("array", "column", "value", "line", "text", "expected"):
        assert getattr(got, name, None) == getattr(error, name, None), name
    assert not isinstance(got, PySparkException | Py4JError)


def test_any_other_task_failure_is_one_line_with_the_python_exception(spark) -> None:
    with pytest.raises(ExecutionError) as caught:
        _run_failing(spark, ZeroDivisionError("division by zero in row 3"))
    message = str(caught.value)
    assert message == "a Spark job failed: ZeroDivisionError: division by zero in row 3"
    assert "Traceback" in caught.value.details and "\n" not in message


def test_the_public_api_translates_task_errors(db) -> None:
    """An array whose computation fails inside a task: reading it raises the task's own error."""
    schema = db.create_array("A<v:int64>[i=0:9:5]").schema
    db.array("A").insert({"i": [1, 7], "v": [1, 2]})
    bad = ValidationError("array A, column v: 2 is odd", array="A", column="v", value=2)

    def task(table: pa.Table) -> pa.Table:
        raise bad

    fragments = jobs.map_batches(db.array("A").source.frame(db.spark), task, layout.fragment_schema(schema))
    failing = Array(db, ComputedSource(schema, fragments))
    for read in (failing.to_pandas, failing.to_arrow, lambda: failing.store("B")):
        with pytest.raises(ValidationError) as caught:
            read()
        assert str(caught.value) == "array A, column v: 2 is odd"
        assert (caught.value.array, caught.value.column, caught.value.value) == ("A", "v", 2)
    assert "B" not in db.arrays()


def test_spark_sql_errors_are_translated(db) -> None:
    db.create_stream("S", "ts timestamp, v int", 60, "ts")
    with pytest.raises(ArrayViewsError) as caught:
        db.sql("SELECT no_such_column FROM S")
    assert "no_such_column" in str(caught.value) and "\n" not in str(caught.value)
    assert not isinstance(caught.value, PySparkException | Py4JError)


def test_a_failed_query_is_reported_once_without_a_java_trace_on_stderr(db, capfd) -> None:
    """PySpark logs a failed query's Java stack trace as JSON on stderr when the exception is made;
    through arrayviews (a notebook, not only the CLI) the translated error is all the user gets."""
    db.create_stream("S2", "ts timestamp, v int", 60, "ts")
    capfd.readouterr()
    with pytest.raises(ArrayViewsError, match="no_such_function"):
        db.sql("SELECT no_such_function(v) FROM S2")
    err = capfd.readouterr().err
    assert "Py4JJavaError" not in err and "at org.apache.spark" not in err, err[:500]


def test_a_java_cause_is_named_without_its_class(db, tmp_path) -> None:
    stream = db.create_stream("S3", "ts timestamp, v int", 60, "ts")
    fake = tmp_path / "readings.parquet"
    fake.write_text("not parquet")
    with pytest.raises(ArrayViewsError) as caught:
        stream.load(str(fake))
    message = str(caught.value)
    assert "is not a Parquet file" in message and str(fake) in message
    assert "java.lang" not in message and "RuntimeException" not in message, message
    assert stream.part_range() is None  # nothing was appended


# -- the command line -------------------------------------------------------------------------------
def _cli(warehouse: Path, *arguments: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "ARRAYVIEWS_LOG_LEVEL"}
    return subprocess.run(
        [sys.executable, "-m", "arrayviews.cli.main", "--warehouse", str(warehouse), *arguments],
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
    )


@pytest.mark.slow
def test_the_cli_prints_one_line_and_exits_1(tmp_path) -> None:
    warehouse = tmp_path / "warehouse"
    created = _cli(warehouse, "sql", "CREATE ARRAY A <v:float64> [i=0:9:5]")
    assert created.returncode == 0, created.stderr
    assert created.stderr == "", "Spark printed on standard error: " + created.stderr[:500]

    failed = _cli(warehouse, "sql", "INSERT INTO A VALUES\n  (1, 2.0),\n  (2, 1e400)")
    assert failed.returncode == 1
    lines = failed.stderr.splitlines()
    assert lines == [
        "error: number 1e400 is outside the float64 range (write inf for infinity) at line 3, column 7"
    ]

    missing = _cli(warehouse, "sql", "SELECT * FROM regrid(B, 2, sum(v))")  # found without Spark
    assert missing.returncode == 1 and len(missing.stderr.splitlines()) == 1
    assert missing.stderr.startswith("error: ") and "B" in missing.stderr

    unknown = _cli(warehouse, "--verbose", "sql", "SELECT nope(v) FROM A")  # Spark SQL: Spark starts
    assert unknown.returncode == 1
    lines = unknown.stderr.splitlines()
    at = next(k for k, line in enumerate(lines) if line.startswith("error: "))
    assert "nope" in lines[at]
    assert any("WARN" in line for line in lines[:at])  # Spark's start-up log is back

    # a syntax error is found before Spark starts (no start-up log even with --verbose)
    verbose = _cli(warehouse, "--verbose", "sql", "INSERT INTO A VALUES (2, 1e400)")
    assert verbose.returncode == 1
    lines = verbose.stderr.splitlines()
    assert lines[0].startswith("error: number 1e400")
    assert lines[1:3] == ["  INSERT INTO A VALUES (2, 1e400)", " " * 27 + "^"]  # the full report
