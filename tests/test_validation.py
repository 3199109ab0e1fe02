"""Bad input: each rejected write raises the right error, names the array, the column and the
offending value, and leaves the array exactly as it was (versions, cells and data files)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arrayviews.model.errors import (
    AlreadyExistsError,
    ConflictError,
    NotFoundError,
    ParseError,
    ValidationError,
)

SCHEMA = "A<r:int64, s:float64>[i=1:6:2; j=1:8:2]"
EXISTING = pd.DataFrame({"i": [1, 2], "j": [1, 5], "r": [1, 2], "s": [0.5, np.nan]})
DDL = "i long, j long, r long, s double"


def batch(**changes) -> pd.DataFrame:
    """A valid batch of two new cells, with columns changed (None drops a column)."""
    columns = {"i": [3, 4], "j": [1, 2], "r": [1, 2], "s": [1.0, 2.0]}
    columns.update(changes)
    return pd.DataFrame({k: v for k, v in columns.items() if v is not None})


def to_spark(spark, frame: pd.DataFrame):
    """The same rows as a Spark DataFrame (from Python values, so NaN stays NaN and NA is null)."""
    rows = [
        tuple(None if x is pd.NA else (x.item() if hasattr(x, "item") else x) for x in row)
        for row in frame.itertuples(index=False, name=None)
    ]
    kinds = {"f": "double", "i": "long", "b": "boolean"}
    ddl = ", ".join(f"{name} {kinds.get(frame[name].dtype.kind, 'string')}" for name in frame.columns)
    return spark.createDataFrame(rows, ddl)


@dataclass
class Case:
    run: Callable  # (array, spark, tmp_path) -> anything
    error: type[Exception]
    column: str | None  # named in the message and (if the error has one) in .column
    value: str | None  # named in the message


def insert_case(frame: pd.DataFrame, error=ValidationError, column=None, value=None, **kw) -> dict[str, Case]:
    """The same bad batch through pandas and through a Spark DataFrame."""
    return {
        "pandas": Case(lambda a, spark, tmp: a.insert(frame, **kw), error, column, value),
        "spark": Case(lambda a, spark, tmp: a.insert(to_spark(spark, frame), **kw), error, column, value),
    }


def csv_file(tmp: Path, text: str) -> str:
    path = tmp / "cells.csv"
    path.write_text(text)
    return str(path)


def parquet_file(tmp: Path, frame: pd.DataFrame) -> str:
    path = tmp / "cells.parquet"
    pq.write_table(pa.table({k: pa.array(frame[k].to_numpy()) for k in frame.columns}), path)
    return str(path)


CASES: dict[str, Case] = {}
for name, per_path in {
    "unknown-column": insert_case(batch(zz=[1, 2]), column="zz", value="zz"),
    "missing-dimension": insert_case(batch(j=None), column="j"),
    "missing-attribute": insert_case(batch(r=None), column="r"),
    "float-coordinates": insert_case(batch(i=[3.0, 4.5]), column="i", value="double"),
    "string-into-float": insert_case(batch(s=["a", "b"]), column="s", value="string"),
    "float-into-int": insert_case(batch(r=[1.5, 2.0]), column="r", value="double"),
    "null-in-not-nullable": insert_case(
        batch(r=pd.array([1, None], dtype="Int64")), column="r", value="null"
    ),
    "i-below-range": insert_case(batch(i=[0, 3]), column="i", value="0"),
    "i-above-range": insert_case(batch(i=[3, 7]), column="i", value="7"),
    "j-below-range": insert_case(batch(j=[-2, 3]), column="j", value="-2"),
    "j-above-range": insert_case(batch(j=[3, 9]), column="j", value="9"),
    "duplicates-in-batch": insert_case(batch(i=[3, 3], j=[1, 1]), value="(i=3, j=1)"),
    "existing-cells": insert_case(batch(i=[2, 3], j=[5, 1]), error=ConflictError, value="(i=2, j=5)"),
    "unknown-on-conflict": insert_case(batch(), value="'merge'", on_conflict="merge"),
}.items():
    for path, case in per_path.items():
        CASES[f"{name}-{path}"] = case

CASES.update(
    {
        "dict-columns-of-different-lengths": Case(
            lambda a, spark, tmp: a.insert(
                {"i": np.array([3, 4]), "j": np.array([1, 2, 3]), "r": np.array([1, 2]), "s": np.ones(2)}
            ),
            ValidationError,
            "j",
            "j=3",
        ),
        "arrow-null-in-not-nullable": Case(
            lambda a, spark, tmp: a.insert(
                pa.table({"i": [3, 4], "j": [1, 1], "r": [1, 2], "s": pa.array([1.0, None])})
            ),
            ValidationError,
            "s",
            "null",
        ),
        "dense-wrong-number-of-dimensions": Case(
            lambda a, spark, tmp: a.write_dense({"r": np.ones(3, np.int64), "s": np.ones(3)}),
            ValidationError,
            None,
            "1",
        ),
        "dense-attributes-of-different-shapes": Case(
            lambda a, spark, tmp: a.write_dense({"r": np.ones((2, 2), np.int64), "s": np.ones((2, 3))}),
            ValidationError,
            None,
            "(2, 3)",
        ),
        "dense-origin-of-wrong-length": Case(
            lambda a, spark, tmp: a.write_dense(
                {"r": np.ones((2, 2), np.int64), "s": np.ones((2, 2))}, origin=(3,)
            ),
            ValidationError,
            None,
            "got 1",
        ),
        "dense-origin-above-range": Case(
            lambda a, spark, tmp: a.write_dense(
                {"r": np.ones((2, 2), np.int64), "s": np.ones((2, 2))}, origin=(6, 1)
            ),
            ValidationError,
            "i",
            "6:7",
        ),
        "dense-origin-below-range": Case(
            lambda a, spark, tmp: a.write_dense(
                {"r": np.ones((2, 2), np.int64), "s": np.ones((2, 2))}, origin=(3, 0)
            ),
            ValidationError,
            "j",
            "0:1",
        ),
        "dense-block-too-large": Case(
            lambda a, spark, tmp: a.write_dense({"r": np.ones((6, 9), np.int64), "s": np.ones((6, 9))}),
            ValidationError,
            "j",
            "1:9",
        ),
        "dense-wrong-dtype": Case(
            lambda a, spark, tmp: a.write_dense({"r": np.ones((2, 2)), "s": np.ones((2, 2))}, origin=(3, 3)),
            ValidationError,
            "r",
            "float64",
        ),
        "dense-existing-cells": Case(
            lambda a, spark, tmp: a.write_dense(
                {"r": np.ones((2, 2), np.int64), "s": np.ones((2, 2))}, origin=(1, 1)
            ),
            ConflictError,
            None,
            "(i=1, j=1)",
        ),
        "load-missing-file": Case(
            lambda a, spark, tmp: a.load(str(tmp / "no-such-file.parquet")),
            NotFoundError,
            None,
            "no-such-file.parquet",
        ),
        "load-csv-malformed-int": Case(
            lambda a, spark, tmp: a.load(csv_file(tmp, "i,j,r,s\n3,1,7,1.0\n4,1,abc,2.0\n")),
            ValidationError,
            "r",
            "'abc'",
        ),
        "load-csv-malformed-float": Case(
            lambda a, spark, tmp: a.load(csv_file(tmp, "i,j,r,s\n3,1,7,1.0\n4,1,8,x2\n")),
            ValidationError,
            "s",
            "'x2'",
        ),
        "load-csv-malformed-coordinate": Case(
            lambda a, spark, tmp: a.load(csv_file(tmp, "i,j,r,s\n3.5,1,7,1.0\n")),
            ValidationError,
            "i",
            "'3.5'",
        ),
        "load-csv-unknown-column": Case(
            lambda a, spark, tmp: a.load(csv_file(tmp, "i,j,r,s,zz\n3,1,7,1.0,5\n")),
            ValidationError,
            "zz",
            None,
        ),
        "load-parquet-above-range": Case(
            lambda a, spark, tmp: a.load(parquet_file(tmp, batch(j=[1, 12]))),
            ValidationError,
            "j",
            "12",
        ),
        "load-parquet-existing-cells": Case(
            lambda a, spark, tmp: a.load(parquet_file(tmp, batch(i=[1, 3], j=[1, 1]))),
            ConflictError,
            None,
            "(i=1, j=1)",
        ),
    }
)


def _listing(array) -> list[str]:
    folder = Path(urlparse(array.source.table.data_directory).path)
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def _state(array) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    return array.versions(), array.to_pandas(), _listing(array)


def assert_unchanged(array, state) -> None:
    versions, cells, files = state
    pd.testing.assert_frame_equal(array.versions(), versions)
    pd.testing.assert_frame_equal(array.to_pandas(), cells)
    assert _listing(array) == files, "a rejected write left files behind"


@pytest.fixture
def target(db):
    array = db.create_array(SCHEMA)
    array.insert(EXISTING)
    return array


@pytest.mark.parametrize("case_id", list(CASES))
def test_bad_input_is_rejected_and_changes_nothing(db, target, tmp_path: Path, case_id: str) -> None:
    case = CASES[case_id]
    before = _state(target)
    assert before[1].shape[0] == 2 and target.version == 1
    with pytest.raises(case.error) as raised:
        case.run(target, db.spark, tmp_path)
    error = raised.value
    message = str(error)
    assert re.search(r"\bA\b", message), message
    if isinstance(error, ValidationError):
        assert error.array == "A"
        if case.column is not None and error.column is not None:
            assert error.column == case.column
    if case.column is not None:
        assert case.column in message, message
    if case.value is not None:
        assert case.value in message, message
    assert_unchanged(target, before)
    # the array still takes a valid batch afterwards
    assert target.insert(batch(i=[5, 6], j=[7, 8])).version == 2


@pytest.mark.parametrize("case_id", ["i-above-range", "duplicates-in-batch", "existing-cells"])
def test_rejected_spark_batch_error_attributes(db, target, case_id: str) -> None:
    """Spark and pandas paths report the same error type and name the same column/cell."""
    pandas_case, spark_case = CASES[f"{case_id}-pandas"], CASES[f"{case_id}-spark"]
    with pytest.raises(ValidationError) as from_pandas:
        pandas_case.run(target, db.spark, None)
    with pytest.raises(ValidationError) as from_spark:
        spark_case.run(target, db.spark, None)
    assert type(from_pandas.value) is type(from_spark.value)
    assert from_pandas.value.column == from_spark.value.column


def test_malformed_schema_is_a_parse_error_with_position(db) -> None:
    text = "B<r:int64, s:float64>\n[i=1:6:2; j=1:8 2]"
    with pytest.raises(ParseError) as raised:
        db.create_array(text)
    error = raised.value
    assert (error.line, error.column) == (2, 17)
    assert "line 2, column 17" in str(error)
    assert "B" not in db.arrays()


def test_duplicate_array_name(db, target) -> None:
    before = _state(target)
    with pytest.raises(AlreadyExistsError, match="array named A already exists"):
        db.create_array("A<v:float64>[i=1:3:3]")
    with pytest.raises(AlreadyExistsError, match="array named a already exists"):
        db.create_array("a<v:float64>[i=1:3:3]")  # names are case-insensitive in the catalog
    assert db.arrays() == ["A"]
    assert target.schema.to_text() == db.array("A").schema.to_text()
    assert_unchanged(target, before)


def test_unknown_array_name(db, target) -> None:
    with pytest.raises(NotFoundError) as raised:
        db.array("Nope")
    assert "Nope" in str(raised.value) and "A" in str(raised.value)
    with pytest.raises(NotFoundError, match="Nope"):
        db.drop_array("Nope")


# -- empty batches --------------------------------------------------------------------------------
EMPTY = batch().iloc[:0].astype({"i": np.int64, "j": np.int64, "r": np.int64, "s": np.float64})
EMPTY_INPUTS: dict[str, Callable] = {
    "pandas": lambda a, spark, tmp: a.insert(EMPTY),
    "arrow_table": lambda a, spark, tmp: a.insert(pa.Table.from_pandas(EMPTY, preserve_index=False)),
    "record_batch": lambda a, spark, tmp: a.insert(pa.RecordBatch.from_pandas(EMPTY, preserve_index=False)),
    "dict": lambda a, spark, tmp: a.insert({k: EMPTY[k].to_numpy() for k in EMPTY.columns}),
    "spark": lambda a, spark, tmp: a.insert(spark.createDataFrame([], DDL)),
    "spark-replace": lambda a, spark, tmp: a.insert(spark.createDataFrame([], DDL), on_conflict="replace"),
    "dense-zero-size": lambda a, spark, tmp: a.write_dense(
        {"r": np.ones((0, 3), np.int64), "s": np.ones((0, 3))}
    ),
    "dense-all-masked": lambda a, spark, tmp: a.write_dense(
        {"r": np.ma.masked_all((2, 2), np.int64), "s": np.ma.masked_all((2, 2))}, origin=(3, 3)
    ),
    "load-parquet": lambda a, spark, tmp: a.load(parquet_file(tmp, EMPTY)),
    "load-csv-header-only": lambda a, spark, tmp: a.load(csv_file(tmp, "i,j,r,s\n")),
}


@pytest.mark.parametrize("kind", list(EMPTY_INPUTS))
def test_empty_batch_commits_nothing(db, target, tmp_path: Path, kind: str) -> None:
    before = _state(target)
    result = EMPTY_INPUTS[kind](target, db.spark, tmp_path)
    assert not result.committed
    assert result.version == 1 and (result.cells_added, result.cells_removed) == (0, 0)
    assert "nothing written" in str(result) and "stays at version 1" in str(result)
    assert "A" in str(result)
    assert_unchanged(target, before)
