"""The storage attribute types (int8, int16, uint8, uint16, uint32, uint64, datetime64) round-trip
through storage with their numpy dtype, are validated by the one acceptance rule, and are refused by
name where values are computed with."""

from __future__ import annotations

import re

import numpy as np
import pytest

from arrayviews.model.errors import ArrayViewsError, ValidationError
from arrayviews.model.types import ATTRIBUTE_TYPES, COMPUTING_TYPES, numpy_dtype, type_of_dtype

STORAGE_TYPES = [t for t in ATTRIBUTE_TYPES if t not in COMPUTING_TYPES]


def extremes(type_name: str) -> np.ndarray:
    """Six values of the type, its smallest and largest among them (numpy's limits as the reference)."""
    dtype = numpy_dtype(type_name)
    if type_name == "string":  # smallest and largest by code point (= UTF-8 byte order)
        return np.array(["", "\x00", "A b", "it's", "\u00e9", "\U0001f389" * 3], dtype=object)
    if dtype.kind == "M":
        return np.array(
            [
                "1677-09-21T00:12:43.145224193",
                "1969-12-31T23:59:59.999999999",
                "1970-01-01",
                "2015-01-01T00:00:10.5",
                "2026-11-26T12:00:00.000000001",
                "2262-04-11T23:47:16.854775807",
            ],
            dtype="datetime64[ns]",
        )
    info = np.iinfo(dtype)
    return np.array(
        [info.min, info.min + 1, 0 if info.min < 0 else 1, 7, info.max - 1, info.max], dtype=dtype
    )


def test_every_type_has_one_numpy_dtype() -> None:
    for name in ATTRIBUTE_TYPES:
        assert type_of_dtype(numpy_dtype(name)) == name
    assert type_of_dtype(np.dtype("datetime64[s]")) == "datetime64"


@pytest.mark.parametrize("type_name", STORAGE_TYPES)
def test_storage_types_round_trip_with_their_dtype(db, type_name: str) -> None:
    dtype = numpy_dtype(type_name)
    values = extremes(type_name)
    A = db.create_array(f"A<x:{type_name}>[i=0:9:4]")
    assert A.attrs == {"x": type_name}
    A.insert({"i": np.arange(6), "x": values})
    cells = A.to_pandas()
    assert cells["x"].to_numpy().dtype == dtype
    np.testing.assert_array_equal(cells["x"].to_numpy(), values)
    dense = A.to_numpy(masked=True)
    assert dense.dtype == dtype
    np.testing.assert_array_equal(dense[:6].data, values)
    assert dense.mask.tolist() == [False] * 6 + [True] * 4
    np.testing.assert_array_equal(A[2:5].to_pandas()["x"].to_numpy(), values[2:5])
    # a dense block, at an origin, through write_dense
    B = db.create_array(f"B<x:{type_name}>[i=0:5:4]")
    B.write_dense(values)
    np.testing.assert_array_equal(np.asarray(B), values)
    assert np.asarray(B).dtype == dtype
    dataset = B.to_xarray()
    assert dataset["x"].dtype == dtype
    np.testing.assert_array_equal(dataset["x"].values, values)
    C = db.from_xarray(dataset, "C")
    assert C.attrs == {"x": type_name}
    np.testing.assert_array_equal(np.asarray(C), values)
    chunks = A.chunks()
    low, high = chunks["x_min"].min(), chunks["x_max"].max()
    if values.dtype.kind not in "MO":  # uint64 statistics are exact decimals (Spark has no unsigned integers)
        low, high = int(low), int(high)
    assert low == values.min() and high == values.max()
    stored = B.aggregate("count(*) as n").to_pandas()["n"].tolist()
    assert stored == [6]


@pytest.mark.parametrize(
    ("type_name", "given", "message"),
    [
        ("uint8", np.array([0, 256]), "256 is outside the uint8 range 0..255"),
        ("uint64", np.array([5, -1]), "-1 is outside the uint64 range 0..18446744073709551615"),
        ("int8", np.array([-129]), "-129 is outside the int8 range -128..127"),
        ("int16", np.array([1.0, 2.0]), "cannot be stored as int16"),
        ("uint32", np.array([True]), "cannot be stored as uint32"),
        ("datetime64", np.array([1, 2]), "cannot be stored as datetime64"),
    ],
)
def test_values_that_do_not_fit_are_refused_by_name(
    db, type_name: str, given: np.ndarray, message: str
) -> None:
    A = db.create_array(f"A<x:{type_name}>[i=0:9:4]")
    with pytest.raises(ValidationError, match=message):
        A.write_dense(given)
    assert A.count() == 0 and A.version == 0


def test_statements_insert_into_storage_types_under_the_same_rule(db) -> None:
    db.sql("CREATE ARRAY U <x:uint64, y:int8> [i=0:3:2]")
    db.sql("INSERT INTO U VALUES (0, 9223372036854775807, -128), (2, 0, 127)")
    cells = db.array("U").to_pandas()
    assert cells["x"].tolist() == [2**63 - 1, 0] and cells["x"].dtype == np.uint64
    assert cells["y"].tolist() == [-128, 127] and cells["y"].dtype == np.int8
    with pytest.raises(ValidationError, match="-1 is outside the uint64 range"):
        db.sql("INSERT INTO U VALUES (3, -1, 0)")
    with pytest.raises(ValidationError, match="128 is outside the int8 range"):
        db.sql("INSERT INTO U VALUES (3, 1, 128)")
    with pytest.raises(ValidationError, match="not an? uint64 value"):
        db.sql("INSERT INTO U VALUES (3, 1.5, 0)")
    assert db.array("U").count() == 2


def test_computations_refuse_storage_types_by_name(db) -> None:
    A = db.create_array("A<h:int16, t:datetime64>[i=0:9:4; j=0:9:4]")
    A.write_dense(
        {
            "h": np.arange(100, dtype=np.int16).reshape(10, 10),
            "t": np.full((10, 10), np.datetime64("2020-01-01", "ns")),
        }
    )
    for run, message in [
        (lambda: A.regrid([2, 2], "sum(h)").to_pandas(), "sum(h) does not compute with int16"),
        (lambda: A.window([1, 1, 1, 1], "avg(t)").to_pandas(), "avg(t) does not apply to datetime64"),
        (
            lambda: A.filter("h > 3").to_pandas(),
            "h in expression 'h > 3': a cell expression does not compute with int16",
        ),
        (lambda: A.apply("u", "t + 1").to_pandas(), "does not apply to datetime64"),
    ]:
        with pytest.raises(ArrayViewsError, match=re.escape(message)):
            run()
    counts = A.regrid([5, 5], "count(*) as n").to_numpy("n")
    np.testing.assert_array_equal(counts, np.full((2, 2), 25))


@pytest.mark.parametrize("unit", ["W", "D", "h", "m", "s", "ms"])
def test_times_in_any_numpy_unit_are_stored_as_the_same_instant(db, unit: str) -> None:
    """Before: days were refused ("date32[day] cannot be stored in attribute t") and hours and
    minutes failed inside pyarrow ("Unsupported datetime64 time unit")."""
    E = db.create_array(f"times_{unit}<t:datetime64>[i=0:9:5]")
    given = np.array(["2026-01-05", "1969-12-29"], f"datetime64[{unit}]")
    E.insert({"i": [0, 1], "t": given})
    assert E.to_pandas()["t"].to_numpy().tolist() == given.astype("datetime64[ns]").tolist()
