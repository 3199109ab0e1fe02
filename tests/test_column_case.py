"""Column names in aggregates match in any letter case, as everywhere else (a schema refuses two
names that differ only in case): reductions, windows, window views and similarity views and joins,
through Python and statements. References: numpy sums over the inserted values and a plain-Python
count of neighbours."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import arrayviews
from arrayviews import L1, similarity, window

VALUES = np.array([3, -1, 4, 1, -5, 9], dtype=np.int64)


@pytest.fixture(scope="module")
def local_db(spark, tmp_path_factory):
    db = arrayviews.connect(str(tmp_path_factory.mktemp("column_case")), spark=spark, execution="local")
    A = db.create_array("cased<v:int64>[i=0:11:4]")
    A.insert({"i": np.arange(len(VALUES)), "v": VALUES})
    return db


def _neighbour_sums() -> dict[int, int]:
    """Per cell i, the sum of v over the cells within distance 1 (itself included), in Python."""
    cells = dict(enumerate(VALUES.tolist()))
    return {i: sum(cells[j] for j in cells if abs(i - j) <= 1) for i in cells}


def test_reduce_and_window_take_an_attribute_in_any_case(local_db) -> None:
    """Before: ``aggregate("sum(V)")`` over attribute v said "unknown attribute 'V'", though a filter
    ``V > 2`` ran."""
    A = local_db.array("cased")
    total = A.aggregate("sum(V)").to_pandas()
    assert "v_sum" in total.columns and int(total["v_sum"].iloc[0]) == int(VALUES.sum())
    windowed = A.window([1, 1], "Sum(V)").to_pandas().set_index("i")["v_sum"]
    assert {int(i): int(s) for i, s in windowed.items()} == _neighbour_sums()


def test_views_take_an_attribute_in_any_case(local_db) -> None:
    """Before: ``sum(right.V)`` failed in a similarity view and its statement, ``avg(V)`` in a window
    view."""
    expected = _neighbour_sums()
    V = local_db.create_view("cased_sim", similarity("cased", "cased", L1(1, 1), ["sum(right.V) as s"]))
    got = V.to_pandas().set_index("i")["s"]
    assert {int(i): int(s) for i, s in got.items()} == expected
    local_db.sql(
        "CREATE ARRAY VIEW cased_sql AS SELECT SUM(b.V) AS s FROM cased a SIMILARITY JOIN cased b "
        "WITH SHAPE L1(1) GROUP BY a.i"
    )
    got = local_db.array("cased_sql").to_pandas().set_index("i")["s"]
    assert {int(i): int(s) for i, s in got.items()} == expected
    W = local_db.create_view("cased_win", window("cased", [1, 1], ["sum(V)"]))
    got = W.to_pandas().set_index("i")["v_sum"]
    assert {int(i): int(s) for i, s in got.items()} == expected
    joined = local_db.similarity_join("cased", "CASED", L1(1, 1)).aggregate("sum(Right.V) as s")
    got = joined.to_pandas().set_index("i")["s"]
    assert {int(i): int(s) for i, s in got.items()} == expected


def test_cells_given_with_column_names_in_any_case(local_db, spark, tmp_path) -> None:
    """Before: ``insert({"I": ..., "V": ...})``, a CSV file headed ``I,V`` and a Spark DataFrame with
    column ``I`` were refused ("unknown column 'I'"), and ``delete({"I": ...})`` found no dimension."""
    A = local_db.create_array("cased_cells<v:int64>[i=0:9:5]")
    A.insert({"I": [0, 1], "V": [10, 11]})
    A.insert(pd.DataFrame({"i": [2], "V": [12]}))
    A.insert(spark.createDataFrame([(3, 13)], "I bigint, v bigint"))
    path = tmp_path / "cased.csv"
    path.write_text("I,V\n4,14\n")
    local_db.sql(f"LOAD cased_cells FROM '{path}'")
    A.delete({"I": [1]})
    cells = A.to_pandas()
    assert dict(zip(cells["i"], cells["v"], strict=True)) == {0: 10, 2: 12, 3: 13, 4: 14}
    with pytest.raises(arrayviews.ValidationError, match="appears twice"):
        A.insert({"i": [5], "v": [1], "V": [2]})
