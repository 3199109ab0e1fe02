"""Arrays with unsigned (and other storage-type) attributes meet Spark, which has no unsigned
integers: ``to_spark`` presents uint64 as DECIMAL(20,0) and uint8..uint32 in the next wider signed
type, every value exact (against Python integers), on both engines; a Spark DataFrame inserted into
such an attribute is checked and refused with an error naming the array and column."""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pytest

from arrayviews.model.errors import ValidationError

VALUES = {
    "a": ("uint64", [2**64 - 1, 0, 2**63, 2**63 - 1]),
    "b": ("uint32", [2**32 - 1, 0, 2**31, 7]),
    "c": ("uint16", [2**16 - 1, 0, 2**15, 1]),
    "d": ("uint8", [255, 0, 128, 1]),
    "e": ("int8", [-128, 127, 0, -1]),
}


def test_to_spark_presents_unsigned_attributes_exactly(db_on) -> None:
    from pyspark.sql import types as T

    db, _ = db_on
    attributes = ", ".join(f"{name}:{kind}" for name, (kind, _) in VALUES.items())
    A = db.create_array(f"A<{attributes}>[i=0:3:2]")
    A.write_dense({name: np.array(values, dtype=kind) for name, (kind, values) in VALUES.items()})
    frame = A.to_spark()
    types = {f.name: f.dataType for f in frame.schema.fields}
    assert types["a"] == T.DecimalType(20, 0) and types["b"] == T.LongType()
    assert types["c"] == T.IntegerType() and types["d"] == T.ShortType() and types["e"] == T.ByteType()
    rows = sorted(frame.collect())
    for name, (_, values) in VALUES.items():
        assert [int(r[name]) for r in rows] == values, name
    assert db.sql("SELECT a FROM A WHERE a > 18446744073709551610").to_arrow().column("a").to_pylist() == [
        2**64 - 1
    ]


def test_a_spark_frame_into_a_small_integer_attribute_is_checked(db, spark) -> None:
    A = db.create_array("A<e:int8, d:uint8>[i=0:3:2]")
    A.insert(spark.sql("SELECT 0L AS i, -128 AS e, 255 AS d"))
    assert A.to_arrow().to_pylist() == [{"i": 0, "e": -128, "d": 255}]
    with pytest.raises(ValidationError, match="array A, column e: 128 is outside the int8 range"):
        A.insert(spark.sql("SELECT 1L AS i, 128 AS e, 0 AS d"))
    with pytest.raises(ValidationError, match="array A, column d: -1 is outside the uint8 range"):
        A.insert(spark.sql("SELECT 1L AS i, 0 AS e, -1 AS d"))
    assert A.count() == 1


def test_a_uint64_frame_goes_back_into_a_uint64_array(db, spark) -> None:
    A = db.create_array("A<a:uint64>[i=0:3:2]")
    A.write_dense({"a": np.array([2**64 - 1, 0, 2**63, 5], np.uint64)})
    B = db.create_array("B<a:uint64>[i=0:3:2]")
    B.insert(A.to_spark())
    assert sorted(B.to_arrow().column("a").to_pylist()) == [0, 5, 2**63, 2**64 - 1]
    with pytest.raises(
        ValidationError, match="array B, column a: 18446744073709551616 is outside the uint64"
    ):
        B.insert(spark.sql("SELECT 0L AS i, CAST(18446744073709551616 AS DECIMAL(20,0)) AS a"))


def test_a_fractional_decimal_frame_into_a_uint64_array_is_refused_clearly(db, spark) -> None:
    B = db.create_array("B<a:uint64>[i=0:3:2]")
    with pytest.raises(ValidationError, match="array B, column a: values of type decimal\\(20,2\\)"):
        B.insert(spark.sql("SELECT 0L AS i, CAST(5 AS DECIMAL(20,2)) AS a"))
    assert B.count() == 0


def test_whole_decimals_go_into_integer_attributes_in_process(db) -> None:
    """pandas and pyarrow carry integers past int64 as scale-0 decimals: they are stored when they
    fit and named exactly (against Python integers) when they do not; nothing is written then."""
    big = [2**64 - 1, 0, 2**63, None]
    A = db.create_array("A<a:uint64 NULL, b:int16>[i=0:3:2]")
    A.insert(
        pa.table(
            {
                "i": pa.array([0, 1, 2, 3], pa.int64()),
                "a": pa.array([None if v is None else decimal.Decimal(v) for v in big], pa.decimal128(20, 0)),
                "b": pa.array([decimal.Decimal(v) for v in (-(2**15), 2**15 - 1, 0, 7)], pa.decimal128(5, 0)),
            }
        )
    )
    rows = sorted(A.to_arrow().to_pylist(), key=lambda r: r["i"])
    assert [r["a"] for r in rows] == big and [r["b"] for r in rows] == [-(2**15), 2**15 - 1, 0, 7]
    for column, value, bad in (("a", 2**64, "18446744073709551616"), ("a", -1, "-1"), ("b", 2**15, "32768")):
        cells = {
            "i": pa.array([0, 1], pa.int64()),
            "b": pa.array([0, 0], pa.int16()),
            column: pa.array([decimal.Decimal(0), decimal.Decimal(value)], pa.decimal128(38, 0)),
        }
        with pytest.raises(
            ValidationError, match=f"array A, column {column}: {bad} is outside the .* range .*row 1"
        ):
            A.insert(pa.table(cells))
    assert A.version == 1 and A.count() == 4


def test_whole_decimals_go_into_integer_stream_and_uncertain_columns(db) -> None:
    stream = db.create_stream("S", "ts timestamp, n bigint, k int", 60, "ts")
    times = pa.array([0, 1], pa.timestamp("us"))
    stream.append(
        pa.table(
            {
                "ts": times,
                "n": pa.array([decimal.Decimal(-(2**63)), decimal.Decimal(2**63 - 1)], pa.decimal128(19, 0)),
                "k": pa.array([decimal.Decimal(-(2**31)), decimal.Decimal(2**31 - 1)], pa.decimal128(10, 0)),
            }
        )
    )
    assert sorted(stream.read().toPandas()["n"].tolist()) == [-(2**63), 2**63 - 1]
    with pytest.raises(ValidationError, match="stream S, column k: 2147483648 is outside the int32 range"):
        stream.append(
            pa.table(
                {
                    "ts": times,
                    "n": pa.array([0, 0], pa.int64()),
                    "k": pa.array([decimal.Decimal(1), decimal.Decimal(2**31)], pa.decimal128(10, 0)),
                }
            )
        )
    assert stream.version == 1
    U = db.create_uncertain_array("U<flux:gaussian, n:uint64>[x=0:9:5; y=0:9:5]")
    tuples = {
        "x": [1.0, 2.0],
        "y": [1.0, 2.0],
        "x_sigma": [0.1, 0.1],
        "y_sigma": [0.1, 0.1],
        "flux": [1.0, 2.0],
        "flux_sigma": [0.1, 0.1],
    }
    U.insert(
        pa.table(
            {**tuples, "n": pa.array([decimal.Decimal(2**64 - 1), decimal.Decimal(3)], pa.decimal128(20, 0))}
        )
    )
    assert sorted(U.to_pandas()["n"].map(int).tolist()) == [3, 2**64 - 1]
    with pytest.raises(
        ValidationError, match="uncertain array U, column n: 18446744073709551616 is outside the uint64 range"
    ):
        U.insert(
            pa.table(
                {**tuples, "n": pa.array([decimal.Decimal(0), decimal.Decimal(2**64)], pa.decimal128(21, 0))}
            )
        )
    assert U.count() == 2
