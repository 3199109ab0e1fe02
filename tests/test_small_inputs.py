"""Small inputs that used to get a wrong answer or a poor message: Python ints for int32 attributes,
empty Python-list batches, out-of-range number literals, LOAD paths with quotes and ';', the chunk
length of a schema, nulls for NOT NULL attributes; and the one rule deciding which values an
attribute type accepts, checked against plain Python arithmetic."""

from __future__ import annotations

import decimal
import math
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from arrayviews.model.errors import NotFoundError, ParseError, ValidationError
from arrayviews.model.schema_parser import parse_schema
from arrayviews.model.types import (
    accepts,
    always_fits,
    first_misfit,
    integral_decimals_as_integers,
    python_value_problem,
)

INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
FLOAT_BITS = {"float32": 24, "float64": 53}  # significand bits: integers up to 2**bits are exact


def _python_fits(value, target: str) -> bool:
    """The reference rule in plain Python: integers fit the integer range, or convert to the float
    exactly; floats go into floats (float32 without overflow); bools only into bool."""
    if target == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if target in INT_RANGE:
        low, high = INT_RANGE[target]
        return isinstance(value, int) and low <= value <= high
    if isinstance(value, int):
        return abs(value) <= 2 ** FLOAT_BITS[target]
    if target == "float32" and math.isfinite(value):
        return abs(value) <= float(np.finfo(np.float32).max)
    return True


VALUES = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.sampled_from([2**24, 2**24 + 1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**53, 2**53 + 1, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([3.4e38, 3.5e38, -3.5e38, 1e300, 0.1]),
)


@given(VALUES, st.sampled_from(["int32", "int64", "float32", "float64", "bool"]))
def test_the_acceptance_rule_matches_plain_python(value, target: str) -> None:
    assert (python_value_problem(value, target) is None) == _python_fits(value, target), (value, target)
    if isinstance(value, bool) or not isinstance(value, int) or -(2**63) <= value < 2**63:
        column = np.array([value])
        kind_ok = accepts(target, column.dtype)
        misfit = first_misfit(target, column) if kind_ok else 0
        assert (kind_ok and misfit is None) == _python_fits(value, target), (value, target)


def test_type_level_rules() -> None:
    assert always_fits("int64", pa.int32()) and not always_fits("int32", pa.int64())
    assert accepts("int32", pa.int64()) and accepts("int32", pa.uint64())
    assert always_fits("float64", pa.int32()) and not always_fits("float64", pa.int64())
    assert not accepts("int64", pa.float64()) and not accepts("bool", pa.int8())
    assert not accepts("float64", pa.string()) and accepts("float64", pa.null())
    assert not accepts("int64", np.dtype(object))
    assert always_fits(pa.decimal128(21, 2), pa.int64()) and not always_fits(pa.decimal128(20, 2), pa.int64())


INTEGER_RANGES = {
    name: (int(np.iinfo(name).min), int(np.iinfo(name).max))
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
}


@given(
    st.lists(
        st.one_of(
            st.integers(-(10**38) + 1, 10**38 - 1),
            st.sampled_from([2**64, 2**64 - 1, -1, 2**63, -(2**63) - 1]),
        ),
        max_size=6,
    ),
    st.sampled_from(sorted(INTEGER_RANGES)),
)
def test_whole_decimals_fit_integer_types_as_python_integers_do(values: list[int], target: str) -> None:
    """Scale-0 decimals (Spark's uint64) go into integer types value by value: the first that Python
    says is out of range is the one named, and the others are stored unchanged."""
    low, high = INTEGER_RANGES[target]
    column = pa.array([decimal.Decimal(v) for v in values], pa.decimal128(38, 0))
    assert accepts(target, column.type) and not always_fits(target, column.type)
    cast, misfit = integral_decimals_as_integers(target, column)
    outside = [k for k, v in enumerate(values) if not low <= v <= high]
    assert misfit == (outside[0] if outside else None)
    if misfit is None:
        assert cast.type == pa.from_numpy_dtype(np.dtype(target)) and cast.to_pylist() == values
    assert always_fits("int16", pa.decimal128(4, 0)) and not always_fits("int16", pa.decimal128(5, 0))
    assert not accepts("int64", pa.decimal128(20, 1))


# -- through the API ---------------------------------------------------------------------------------
def test_python_ints_go_into_int32_attributes_when_they_fit(db) -> None:
    array = db.create_array("A<v:int32, w:float32>[i=0:9:5]")
    array.insert({"i": [1, 2], "v": [3, -(2**31)], "w": [0.1, 2**24]})
    frame = array.to_pandas()
    assert frame["v"].tolist() == [3, -(2**31)] and str(frame["v"].dtype) == "int32"
    assert frame["w"].tolist() == [float(np.float32(0.1)), 2.0**24]
    before = array.versions()
    for cells, column, value in [
        ({"i": [3], "v": [2**31], "w": [1.0]}, "v", 2**31),
        ({"i": [3], "v": [1], "w": [2**24 + 1]}, "w", 2**24 + 1),
        ({"i": [3], "v": [1], "w": [1e39]}, "w", 1e39),
        ({"i": [3], "v": [1.0], "w": [1.0]}, "v", None),
    ]:
        with pytest.raises(ValidationError) as caught:
            array.insert(cells)
        assert caught.value.column == column and "array A" in str(caught.value)
        if value is not None:
            assert caught.value.value == value and str(value) in str(caught.value)
    pd.testing.assert_frame_equal(array.versions(), before)
    # the same rule for Spark frames, dense blocks and INSERT VALUES
    spark_batch = db.spark.createDataFrame([(4, 7, 1.5)], "i long, v long, w double")
    array.insert(spark_batch)
    with pytest.raises(ValidationError, match="2147483648 is outside the int32 range") as caught:
        array.insert(db.spark.createDataFrame([(5, 2**31, 1.5)], "i long, v long, w double"))
    assert caught.value.column == "v" and caught.value.value == 2**31
    array.write_dense({"v": np.array([5, 6]), "w": np.array([0.5, 0.25])}, origin=[5])
    with pytest.raises(ValidationError, match="outside the int32 range") as caught:
        array.write_dense({"v": np.array([1, 2**40]), "w": np.ones(2)}, origin=[7])
    assert caught.value.value == 2**40
    db.sql("INSERT INTO A VALUES (9, 2147483647, 1.5)")
    with pytest.raises(ValidationError, match="2147483648 is outside the int32 range"):
        db.sql("INSERT INTO A VALUES (8, 2147483648, 1.5)")
    assert array.to_pandas()["v"].tolist() == [3, -(2**31), 7, 5, 6, 2**31 - 1]


def test_an_empty_python_list_batch_changes_nothing(db) -> None:
    array = db.create_array("A<v:int32, w:float64 NULL>[i=0:9:5]")
    before = array.versions()
    for batch in ({"i": [], "v": [], "w": []}, {"i": [], "v": []}, pd.DataFrame({"i": [], "v": []})):
        result = array.insert(batch)
        assert result.version == 0 and not result.committed
        pd.testing.assert_frame_equal(array.versions(), before)
    with pytest.raises(ValidationError, match="unknown column 'x'"):
        array.insert({"i": [], "x": []})


def test_number_literals_out_of_range_are_rejected_where_they_stand(db) -> None:
    db.create_array("A<v:float64>[i=0:9:5]")
    with pytest.raises(ParseError) as caught:
        db.sql("INSERT INTO A VALUES (1, 2.5),\n(2, -1e400)")
    assert (caught.value.line, caught.value.column) == (2, 5)
    assert "outside the float64 range" in str(caught.value)
    db.sql("INSERT INTO A VALUES (1, 1e308), (2, -inf), (3, 4.9e-324)")
    assert db.array("A").to_pandas()["v"].tolist() == [1e308, -math.inf, 5e-324]


def test_load_paths_with_quotes_and_semicolons(db, tmp_path) -> None:
    array = db.create_array("A<v:int64>[i=0:9:5]")
    folder = tmp_path / "it's; here"
    folder.mkdir()
    (folder / "cells; 1.csv").write_text("i,v\n1,10\n2,20\n")
    quoted = str(folder / "cells; 1.csv").replace("'", "''")
    db.sql(f"LOAD A FROM '{quoted}'")
    assert array.to_pandas()["v"].tolist() == [10, 20]
    pa_path = folder / "more's.parquet"
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"i": [3], "v": [30]}), pa_path)
    db.sql(f"LOAD A FROM '{str(pa_path).replace(chr(39), chr(39) * 2)}'")
    assert array.to_pandas()["v"].tolist() == [10, 20, 30]
    missing = os.path.join(str(folder), "nothing; here.csv")
    with pytest.raises(NotFoundError, match="no file or folder") as caught:
        db.sql(f"LOAD A FROM '{missing.replace(chr(39), chr(39) * 2)}'")
    assert missing in str(caught.value)


def test_a_zero_chunk_length_names_the_low_high_chunk_form() -> None:
    with pytest.raises(ParseError) as caught:
        parse_schema("A<v:int64>[i=0:9:0:5]")
    message = str(caught.value)
    assert "chunk length must be at least 1, got 0" in message
    assert "i=0:9:0:5 reads as low:high:chunk:overlap" in message and "name=low:high:chunk" in message
    assert (caught.value.line, caught.value.column) == (1, 18)


def test_a_null_for_a_not_null_attribute_suggests_declaring_it_null(db) -> None:
    array = db.create_array("A<v:int32, w:float64>[i=0:9:5]")
    hint = "declare it as v:int32 NULL to allow nulls"
    attempts = [
        lambda: array.insert({"i": [1], "v": [None], "w": [1.0]}),
        lambda: array.insert({"i": [1, 2], "v": [None, 3], "w": [1.0, 2.0]}),
        lambda: array.insert(pa.table({"i": [1], "v": pa.array([None], pa.int32()), "w": [1.0]})),
        lambda: array.insert(db.spark.createDataFrame([(1, None, 1.0)], "i long, v int, w double")),
        lambda: db.sql("INSERT INTO A VALUES (1, NULL, 1.0)"),
    ]
    for attempt in attempts:
        with pytest.raises(ValidationError) as caught:
            attempt()
        assert hint in str(caught.value) and caught.value.column == "v", str(caught.value)
    assert array.count() == 0
