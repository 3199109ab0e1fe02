"""Tests of the statement executor against numpy/pandas references, on tiny arrays.

The operator tests share one module-scoped database holding two small arrays (each SELECT costs a
Spark job); the bad-statement tests run on the same database and check that nothing changed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import arrayviews
from arrayviews.array import Array
from arrayviews.language import syntax as ast
from arrayviews.language.executor import execute, execute_text
from arrayviews.language.printer import to_text
from arrayviews.model.errors import (
    AlreadyExistsError,
    ConflictError,
    NotFoundError,
    ParseError,
    ValidationError,
)

pytestmark = pytest.mark.spark

SHAPE = (4, 6)  # A and B: [i=1:4:2; j=1:6:3]


def _cells(seed: int, keep: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    i, j = np.meshgrid(np.arange(1, SHAPE[0] + 1), np.arange(1, SHAPE[1] + 1), indexing="ij")
    present = rng.random(SHAPE) < keep
    return pd.DataFrame({"i": i[present], "j": j[present], "value": rng.random(int(present.sum()))})


def _insert_text(name: str, frame: pd.DataFrame) -> str:
    rows = tuple(tuple(None if pd.isna(v) else v for v in row) for row in frame.itertuples(index=False))
    rows = tuple(tuple(int(v) if isinstance(v, np.integer) else v for v in row) for row in rows)
    rows = tuple(tuple(float(v) if isinstance(v, np.floating) else v for v in row) for row in rows)
    return to_text(ast.Insert(name, rows))


@pytest.fixture(scope="module")
def loaded(spark, tmp_path_factory):
    """A database with A <v:float64, n:int64 NULL> and B <w:float64>, both [i=1:4:2; j=1:6:3]."""
    db = arrayviews.connect(str(tmp_path_factory.mktemp("language") / "warehouse"), spark=spark)
    a = _cells(1, 0.7).rename(columns={"value": "v"})
    a["n"] = pd.array([None if k % 4 == 3 else k for k in range(len(a))], dtype="Int64")
    b = _cells(2, 0.6).rename(columns={"value": "w"})
    script = f"""
        CREATE ARRAY A <v:float64, n:int64 NULL> [i=1:4:2; j=1:6:3];
        CREATE ARRAY B <w:float64> [i=1:4:2; j=1:6:3];
        {_insert_text("A", a)};
        {_insert_text("B", b)}
    """
    result = execute_text(db, script)
    assert result.committed and result.cells_added == len(b)
    return db, a, b


def _numeric(column: pd.Series) -> np.ndarray:
    return pd.to_numeric(column).astype("float64").to_numpy()


def assert_cells(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Same columns in order, same cells (row-major), same values (nulls and NaN as NaN)."""
    dims = [c for c in ("i", "j") if c in expected.columns]
    expected = expected.sort_values(dims).reset_index(drop=True)
    actual = actual.reset_index(drop=True)
    assert list(actual.columns) == list(expected.columns)
    assert len(actual) == len(expected), (actual, expected)
    for column in expected.columns:
        np.testing.assert_allclose(
            _numeric(actual[column]), _numeric(expected[column]), equal_nan=True, err_msg=column
        )


def _regrid_reference(a: pd.DataFrame) -> pd.DataFrame:
    blocks = a.assign(i=(a.i - 1) // 2 + 1, j=(a.j - 1) // 3 + 1).groupby(["i", "j"])
    return pd.DataFrame(
        {"v_avg": blocks.v.mean(), "count": blocks.size(), "m": blocks.n.max().astype("float64")}
    ).reset_index()


def _nested_reference(a: pd.DataFrame) -> pd.DataFrame:
    inside = a[(a.i <= 3) & (a.n > 2)]
    return pd.DataFrame({"i": [0], "total": [inside.v.sum()]})


OPERATOR_CASES = {
    "SELECT * FROM A": lambda a, b: a,
    "select * from subarray(A, 2, 2, 3, 5)": lambda a, b: a[a.i.between(2, 3) & a.j.between(2, 5)],
    "SELECT * FROM subarray(A, -10, 4, 2, 100)": lambda a, b: a[(a.i <= 2) & (a.j >= 4)],
    "SELECT * FROM filter(A, v > 0.5 and i < 4)": lambda a, b: a[(a.v > 0.5) & (a.i < 4)],
    "SELECT * FROM A WHERE v > 0.5 and i < 4": lambda a, b: a[(a.v > 0.5) & (a.i < 4)],
    "SELECT n FROM A WHERE v < 0.5": lambda a, b: a[a.v < 0.5][["i", "j", "n"]],
    "SELECT * FROM project(A, n, v)": lambda a, b: a[["i", "j", "n", "v"]],
    "SELECT * FROM apply(A, w, v * 2 + j, k, i * 10)": lambda a, b: a.assign(w=a.v * 2 + a.j, k=a.i * 10),
    "SELECT * FROM regrid(A, 2, 3, avg(v), count(*), max(n) as m)": lambda a, b: _regrid_reference(a),
    "SELECT * FROM aggregate(A, count(*), sum(v))": lambda a, b: pd.DataFrame(
        {"i": [0], "count": [len(a)], "v_sum": [a.v.sum()]}
    ),
    "SELECT * FROM aggregate(A, avg(v), min(n), j)": lambda a, b: (
        a.groupby("j").agg(v_avg=("v", "mean"), n_min=("n", "min")).reset_index()
    ),
    "SELECT * FROM join(A, B)": lambda a, b: a.merge(b, on=["i", "j"]),
    "SELECT * FROM join(project(B, w), apply(project(A, v), t, v * 2))": lambda a, b: b.merge(
        a[["i", "j", "v"]].assign(t=a.v * 2), on=["i", "j"]
    ),
    "SELECT total FROM aggregate(filter(subarray(A, 1, 1, 3, 6), n > 2), sum(v) as total)": lambda a, b: (
        _nested_reference(a)
    ),
}


@pytest.mark.parametrize("statement", list(OPERATOR_CASES), ids=list(OPERATOR_CASES))
def test_select_matches_pandas(loaded, statement: str) -> None:
    db, a, b = loaded
    result = db.sql(statement)
    assert isinstance(result, Array)
    assert result.stored == (statement == "SELECT * FROM A")  # operators give computed arrays
    assert_cells(result.to_pandas(), OPERATOR_CASES[statement](a, b))


def test_select_result_reads_as_numpy(loaded) -> None:
    db, a, _ = loaded
    expected = np.full(SHAPE, np.nan)
    expected[a.i - 1, a.j - 1] = a.v
    np.testing.assert_array_equal(db.sql("SELECT * FROM A").to_numpy("v"), expected)


def test_select_is_lazy_and_runs_no_job(loaded) -> None:
    db, _, _ = loaded
    tracker = db.spark.sparkContext.statusTracker()
    before = len(tracker.getJobIdsForGroup(None))
    array = db.sql("SELECT * FROM regrid(filter(A, v > 0.1), 2, 2, avg(v))")
    assert array.schema.to_text() == "A<v_avg:float64>[i=1:2:2; j=1:3:3]"
    assert len(tracker.getJobIdsForGroup(None)) == before


def test_show_statements(loaded) -> None:
    db, a, b = loaded
    arrays = db.sql("SHOW ARRAYS")
    assert list(arrays.name) == ["A", "B"]
    assert list(arrays.cells) == [len(a), len(b)]
    assert list(arrays.version) == [1, 1]
    versions = db.sql("show versions of A")
    assert list(versions.version) == [1]
    assert list(versions.operation) == ["insert"]
    assert list(versions.cells_total) == [len(a)]
    chunks = db.sql("SHOW CHUNKS OF A")
    assert chunks.cells.sum() == len(a)
    assert chunks.v_max.max() == pytest.approx(a.v.max())
    assert db.sql("SHOW SCHEMA OF B") == "B<w:float64>[i=1:4:2; j=1:6:3]"


def _state(db) -> tuple:
    names = db.arrays()
    return names, {name: db.array(name).versions().drop(columns="time").to_dict("list") for name in names}


BAD_STATEMENTS = [
    # statement, error type, fragment of the message
    ("SELECT * FROM C", NotFoundError, "no array named C (arrays: A, B)"),
    ("SHOW VERSIONS OF C", NotFoundError, "no array named C"),
    ("DROP ARRAY C", NotFoundError, "no array named C"),
    ("INSERT INTO C VALUES (1, 1, 0.5)", NotFoundError, "no array named C"),
    ("SELECT * FROM subarray(A, 1, 2)", ValidationError, "needs 4 coordinates (the low then the high"),
    ("SELECT * FROM subarray(A, 1, 1, 1, 3, 3, 3)", ValidationError, "needs 4 coordinates"),
    ("SELECT * FROM subarray(A, 3, 1, 1, 6)", ValidationError, "is empty (low > high)"),
    ("SELECT x FROM A", ValidationError, "array A has no attribute 'x'; attributes: v, n"),
    ("SELECT * FROM project(A, v, x)", ValidationError, "array A has no attribute 'x'"),
    ("SELECT * FROM A WHERE x > 1", ValidationError, "unknown name 'x'"),
    ("SELECT * FROM A WHERE v + 1", ValidationError, "not a condition"),
    ("SELECT * FROM filter(A, v and 1)", ValidationError, "needs a condition"),
    ("SELECT * FROM apply(A, v, 1)", ValidationError, "already has a dimension or attribute named 'v'"),
    ("SELECT * FROM regrid(A, 2, avg(v))", ValidationError, "regrid needs one block size per dimension"),
    ("SELECT * FROM regrid(A, 2, 0, avg(v))", ValidationError, "must be a positive integer"),
    ("SELECT * FROM aggregate(A, avg(x))", ValidationError, "unknown attribute 'x'"),
    ("SELECT * FROM aggregate(A, count(*), k)", ValidationError, "array A has no dimension 'k'"),
    ("SELECT * INTO B FROM A", AlreadyExistsError, "an array named B already exists"),
    ("SELECT * INTO C FROM A WHERE x > 1", ValidationError, "unknown name 'x'"),
    ("CREATE ARRAY A <v:int64> [i=1:2]", AlreadyExistsError, "an array named A already exists"),
    (
        "INSERT INTO A VALUES (1, 1, 0.5)",
        ValidationError,
        "row 1 has 3 value(s); each row needs 4 (i, j, v, n)",
    ),
    (
        "INSERT INTO A VALUES (1, 1, 0.5, 2.5)",
        ValidationError,
        "attribute n: 2.5 is not an int64 value in row 1",
    ),
    ("INSERT INTO A VALUES (1, 1, 0.5, 1), (1, 2, null, 2)", ValidationError, "attribute v: null, but"),
    (
        "INSERT INTO A VALUES (1.5, 1, 0.5, 2)",
        ValidationError,
        "dimension i: 1.5 is not an integer coordinate",
    ),
    ("INSERT INTO A VALUES (1, null, 0.5, 2)", ValidationError, "dimension j: null is not a coordinate"),
    ("INSERT INTO A VALUES (1, 1, true, 2)", ValidationError, "attribute v: true is not a float64 value"),
    (
        "INSERT INTO A VALUES (9, 1, 0.5, 2)",
        ValidationError,
        "coordinate 9 (row 0) is outside the dimension range",
    ),
    ("INSERT INTO A VALUES (4, 6, 0.5, 1), (4, 6, 0.25, 2)", ValidationError, "more than once"),
    ("DELETE FROM subarray(A, 1, 2)", ValidationError, "needs 4 coordinates"),
    ("LOAD A FROM '/nonexistent/cells.csv'", NotFoundError, "no file or folder at /nonexistent/cells.csv"),
    ("INSERT INTO A VALUES (4, 6, 0.5, 1);\nSELECT * FROM", ParseError, "unexpected end of input"),
    ("SHOW ARRAYS;\n\n  SELECT *\n  FROM subarray(A, 1, 2)", ValidationError, "needs 4 coordinates"),
]


@pytest.mark.parametrize(("text", "kind", "message"), BAD_STATEMENTS, ids=[b[0] for b in BAD_STATEMENTS])
def test_bad_statements_change_nothing(loaded, text: str, kind: type, message: str) -> None:
    db, _, _ = loaded
    before = _state(db)
    with pytest.raises(kind) as caught:
        result = db.sql(text)
        if isinstance(result, Array):  # errors found only when the data is read count too
            result.to_pandas()
    error = caught.value
    assert message in str(error)
    if kind is not ParseError:
        line = 3 if text.startswith("SHOW ARRAYS;") else 1
        assert str(error).endswith(f"(statement at line {line})")
        assert error.statement_line == line
    assert _state(db) == before


def test_conflicting_insert_changes_nothing(loaded) -> None:
    db, a, _ = loaded
    before = _state(db)
    i, j = int(a.i.iloc[0]), int(a.j.iloc[0])
    with pytest.raises(ConflictError):
        db.sql(f"INSERT INTO A VALUES ({i}, {j}, 0.5, 1)")
    assert _state(db) == before


def test_validation_errors_name_the_column(loaded) -> None:
    db, _, _ = loaded
    with pytest.raises(ValidationError) as caught:
        db.sql("INSERT INTO A VALUES (1, 1, 0.5, 2.5)")
    assert (caught.value.array, caught.value.column, caught.value.value) == ("A", "n", 2.5)
    with pytest.raises(ValidationError) as caught:
        db.sql("SELECT q FROM A")
    assert (caught.value.array, caught.value.column) == ("A", "q")


# -- statements that change things (each on a fresh database) -----------------------------------
def test_create_insert_select(db) -> None:
    created = db.sql("CREATE ARRAY T <f:float32, k:int32 NULL, b:bool, d:float64 NULL> [x=0:9:5]")
    assert isinstance(created, Array) and created.stored and created.version == 0
    assert db.arrays() == ["T"]
    result = db.sql(
        "INSERT INTO T VALUES (0, 1.5, 1, true, nan), (3, -2, null, false, -inf), (9, 0.25, -7, true, null)"
    )
    assert (result.operation, result.version, result.cells_added) == ("insert", 1, 3)
    frame = db.sql("SELECT * FROM T").to_pandas()
    expected = pd.DataFrame(
        {
            "x": [0, 3, 9],
            "f": [1.5, -2.0, 0.25],
            "k": [1, np.nan, -7],
            "b": [1.0, 0.0, 1.0],
            "d": [np.nan, -np.inf, np.nan],
        }
    )
    assert_cells(frame, expected)
    assert frame.d.isna().tolist() == [True, False, True]  # nan and null both read as missing here
    assert str(frame.f.dtype) == "float32"


def test_execute_takes_syntax_trees(db) -> None:
    schema = "CREATE ARRAY S <v:int64> [i=1:3]"
    execute_text(db, schema)
    insert = ast.Insert("S", ((1, 10), (3, 30)))
    assert execute(db, insert).cells_added == 2
    select = ast.Select(ast.ArrayName("S"), where=None)
    assert execute(db, select).to_pandas().v.tolist() == [10, 30]
    assert execute_text(db, "") is None
    assert execute_text(db, "-- nothing\n;") is None


def test_select_into_stores_the_result(db) -> None:
    db.sql("CREATE ARRAY A <v:float64> [i=1:6:3]; INSERT INTO A VALUES (1, 0.5), (2, 1.5), (5, 2.5)")
    stored = db.sql("SELECT * INTO B FROM apply(A, w, v * 2) WHERE v > 1")
    assert stored.stored and stored.name == "B" and stored.version == 1
    assert db.arrays() == ["A", "B"]
    assert_cells(db.array("B").to_pandas(), pd.DataFrame({"i": [2, 5], "v": [1.5, 2.5], "w": [3.0, 5.0]}))
    versions = db.sql("SHOW VERSIONS OF B")
    assert list(versions.operation) == ["store"] and list(versions.cells_total) == [2]


def test_drop_array(db) -> None:
    db.sql("CREATE ARRAY A <v:int64> [i=1:3]; CREATE ARRAY B <v:int64> [i=1:3]")
    assert db.sql("DROP ARRAY A") is None
    assert db.arrays() == ["B"]
    with pytest.raises(NotFoundError, match=r"no array named A \(arrays: B\) \(statement at line 1\)"):
        db.sql("SELECT * FROM A")


def test_statements_before_a_failing_one_have_run(db) -> None:
    with pytest.raises(NotFoundError) as caught:
        db.sql("CREATE ARRAY A <v:int64> [i=1:3];\nSELECT * FROM nothing")
    assert caught.value.statement_line == 2
    assert db.arrays() == ["A"]


def test_load_csv_and_parquet(db, tmp_path) -> None:
    db.sql("CREATE ARRAY L <v:float64, n:int64 NULL> [i=1:10:5; j=1:4:2]")
    csv = tmp_path / "cells.csv"
    cells = pd.DataFrame({"i": [1, 7], "j": [2, 4], "v": [0.5, 1.5], "n": pd.array([3, None], dtype="Int64")})
    cells.to_csv(csv, index=False)
    result = db.sql(f"LOAD L FROM '{csv}'")
    assert (result.operation, result.cells_added, result.version) == ("load", 2, 1)
    parquet = tmp_path / "more.bin"
    pd.DataFrame({"i": [10], "j": [1], "v": [2.5], "n": [4]}).to_parquet(parquet, index=False)
    assert db.sql(f"load L from '{parquet}' as parquet").cells_added == 1
    expected = pd.DataFrame({"i": [1, 7, 10], "j": [2, 4, 1], "v": [0.5, 1.5, 2.5], "n": [3, np.nan, 4]})
    assert_cells(db.sql("SELECT * FROM L").to_pandas(), expected)


def test_delete(db) -> None:
    db.sql(
        "CREATE ARRAY D <v:int64> [i=1:4:2; j=1:4:2];"
        "INSERT INTO D VALUES (1, 1, 11), (2, 3, 23), (3, 2, 32), (4, 4, 44)"
    )
    result = db.sql("DELETE FROM subarray(D, 2, 1, 4, 3)")
    assert (result.operation, result.cells_removed, result.version) == ("delete", 2, 2)
    assert_cells(
        db.sql("SELECT * FROM D").to_pandas(), pd.DataFrame({"i": [1, 4], "j": [1, 4], "v": [11, 44]})
    )
    assert db.sql("DELETE FROM D").cells_removed == 2
    assert db.array("D").count() == 0
    assert list(db.sql("SHOW VERSIONS OF D").operation) == ["insert", "delete", "delete"]
