"""Tests of the statement executor against numpy/pandas references, on tiny arrays.

The operator tests share one module-scoped database holding two small arrays (each SELECT costs a
Spark job); the bad-statement tests run on the same database and check that nothing changed.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import arrayviews
from arrayviews.array import Array
from arrayviews.language import syntax as ast
from arrayviews.language.executor import execute, execute_text
from arrayviews.language.printer import to_text
from arrayviews.language.view_executor import view_definition_from_text
from arrayviews.model.errors import (
    AlreadyExistsError,
    ConflictError,
    NotFoundError,
    ParseError,
    ValidationError,
)
from arrayviews.views.definition import ViewAggregate, WindowViewDefinition

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
        "coordinate 9 is outside the dimension range 1:4 in row 1 at line 1, column 23",
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
        assert re.search(rf"\(statement at line {line}, column \d+\)$", str(error))
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
    with pytest.raises(NotFoundError, match=r"no array named A \(arrays: B\) \(statement at line 1, column 1\)"):
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


# -- views --------------------------------------------------------------------------------------
CROSS = [(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)]  # L1(1) in 2-D
SQUARE = [(di, dj) for di in (-1, 0, 1) for dj in (-1, 0, 1)]  # LINF(1), a 1-cell window


def _dense(frame: pd.DataFrame, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    mask, values = np.zeros(shape, bool), np.zeros(shape)
    mask[frame.i - 1, frame.j - 1] = True
    values[frame.i - 1, frame.j - 1] = frame.v
    return mask, values


def _shifted(grid: np.ndarray, di: int, dj: int, fill: float) -> np.ndarray:
    """grid[i + di, j + dj] at [i, j] (``fill`` outside)."""
    padded = np.pad(grid.astype(float), 1, constant_values=fill)
    return padded[1 + di : 1 + di + grid.shape[0], 1 + dj : 1 + dj + grid.shape[1]]


def _neighbourhood_reference(frame: pd.DataFrame, shape, offsets) -> dict[str, np.ndarray]:
    """Per non-empty cell: how many non-empty cells lie at the offsets, their mean and max (NaN elsewhere)."""
    mask, values = _dense(frame, shape)
    count = sum(_shifted(mask, di, dj, 0) for di, dj in offsets)
    total = sum(_shifted(np.where(mask, values, 0), di, dj, 0) for di, dj in offsets)
    high = np.max([_shifted(np.where(mask, values, -np.inf), di, dj, -np.inf) for di, dj in offsets], axis=0)
    nan = np.where(mask, 1.0, np.nan)
    return {"count": count * nan, "mean": total / np.maximum(count, 1) * nan, "max": high * nan}


def _random_cells(seed: int, shape, keep: float, exclude: pd.DataFrame | None = None) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    i, j = np.meshgrid(np.arange(1, shape[0] + 1), np.arange(1, shape[1] + 1), indexing="ij")
    present = rng.random(shape) < keep
    if exclude is not None:
        present[exclude.i - 1, exclude.j - 1] = False
    return pd.DataFrame({"i": i[present], "j": j[present], "v": rng.random(int(present.sum()))})


SIMILARITY_VIEW = (
    "CREATE ARRAY VIEW V AS SELECT COUNT(*) AS cnt, AVG(A2.v) AS mean_v FROM A A1 SIMILARITY JOIN A A2 "
    "ON (A1.i = A2.i) AND (A1.j = A2.j) WITH SHAPE L1(1) GROUP BY A1.i, A1.j"
)


def test_similarity_view_lifecycle(db) -> None:
    grid = (6, 8)
    first = _random_cells(3, grid, 0.5)
    db.sql(f"CREATE ARRAY A <v:float64> [i=1:6:2; j=1:8:4]; {_insert_text('A', first)}")
    view = db.sql(SIMILARITY_VIEW)
    assert view.name == "V" and db.views() == ["V"]
    assert view.definition.text == to_text(db_parse_query(SIMILARITY_VIEW))

    def check(cells: pd.DataFrame) -> None:
        expected = _neighbourhood_reference(cells, grid, CROSS)
        result = db.sql("SELECT * FROM V")
        assert list(result.to_pandas().columns) == ["i", "j", "cnt", "mean_v"]  # no hidden state
        np.testing.assert_array_equal(result.to_numpy("cnt", fill=np.nan), expected["count"])
        np.testing.assert_allclose(result.to_numpy("mean_v"), expected["mean"], equal_nan=True)

    check(first)
    assert db.sql("SHOW SCHEMA OF V") == "V<cnt:int64, mean_v:float64 NULL>[i=1:6:2; j=1:8:4]"
    assert db.sql("SELECT cnt FROM V WHERE cnt > 2").count() == int(
        (_neighbourhood_reference(first, grid, CROSS)["count"] > 2).sum()
    )
    assert list(db.sql("SHOW ARRAYS").name) == ["A"]  # views are listed by SHOW VIEWS
    views = db.sql("SHOW VIEWS")
    assert views.to_dict("records") == [
        {"name": "V", "kind": "array view", "definition": view.definition.text, "version": 1, "pending": False}
    ]

    second = _random_cells(4, grid, 0.3, exclude=first)
    db.sql(_insert_text("A", second))
    status = db.sql("SHOW STATUS OF V")
    assert status.to_dict("records") == [{"base": "A", "reflected": 1, "current": 2, "pending": True}]
    assert bool(db.sql("SHOW VIEWS").pending.iloc[0])
    result = db.sql("REFRESH VIEW V")  # USING AUTO: the cheaper of full and baseline
    assert result.committed and result.requested == "auto" and result.version == 2
    assert result.strategy in ("baseline", "full") and set(result.estimates) == {"baseline", "full"}
    assert str(result).startswith(f"refresh ({result.strategy}) of view V: now at version 2")
    check(pd.concat([first, second]))
    assert db.sql("VERIFY VIEW V") is True
    assert not db.sql("REFRESH VIEW V USING FULL").committed  # nothing pending
    assert list(db.sql("SHOW STATUS OF V").pending) == [False]

    with pytest.raises(ValidationError, match="V is a view: write to its base arrays and refresh it"):
        db.sql("INSERT INTO V VALUES (1, 1, 5, 0.5)")
    with pytest.raises(ValidationError, match="array A is a base of view"):
        db.sql("DROP ARRAY A")
    with pytest.raises(ValidationError, match="V is a view; drop it with DROP VIEW V"):
        db.sql("DROP ARRAY V")
    assert db.sql("DROP VIEW V") is None
    assert db.views() == [] and db.arrays() == ["A"]
    assert db.sql("SHOW VIEWS").empty


def db_parse_query(text: str):
    from arrayviews.language.parser import parse

    (statement,) = parse(text)
    return statement.query


def test_window_view_from_text_and_full_refresh(db) -> None:
    grid = (6, 8)
    first = _random_cells(5, grid, 0.5)
    db.sql(f"CREATE ARRAY A <v:float64> [i=1:6:2; j=1:8:4]; {_insert_text('A', first)}")
    view = db.create_view("W", "select * from WINDOW(A, 1, 1, 1, 1, Avg(v), max(v) AS top)")
    assert view.definition == WindowViewDefinition(
        "A",
        (1, 1),
        (1, 1),
        ("avg(v)", "max(v) as top"),
        "SELECT * FROM window(A, 1, 1, 1, 1, avg(v), max(v) as top)",
    )

    def check(cells: pd.DataFrame) -> None:
        expected = _neighbourhood_reference(cells, grid, SQUARE)
        result = db.sql("SELECT * FROM W")
        np.testing.assert_allclose(result.to_numpy("v_avg"), expected["mean"], equal_nan=True)
        np.testing.assert_allclose(result.to_numpy("top"), expected["max"], equal_nan=True)

    check(first)
    second = _random_cells(6, grid, 0.3, exclude=first)
    db.sql(_insert_text("A", second))
    result = db.sql("REFRESH VIEW W USING FULL")
    assert result.committed and result.strategy == "full"
    check(pd.concat([first, second]))
    assert db.sql("SHOW VIEWS").to_dict("records") == [
        {"name": "W", "kind": "array view", "definition": view.definition.text, "version": 2, "pending": False}
    ]


def test_view_with_affine_mapping_box_shape_and_chunks(db) -> None:
    """A (fine grid) looks at B (twice as coarse, shifted by one) through a BOX: a brute-force check."""
    db.sql("CREATE ARRAY A <v:float64> [i=1:6:3; j=1:4:2]; CREATE ARRAY B <w:int64> [x=0:4:5; y=0:3:2]")
    a = _random_cells(7, (6, 4), 0.6)
    b = pd.DataFrame(
        [(x, y, 10 * x + y) for x in range(5) for y in range(4) if (x + y) % 3], columns=["x", "y", "w"]
    )
    db.sql(_insert_text("A", a) + ";" + to_text(ast.Insert("B", tuple(map(tuple, b.to_numpy().tolist())))))
    view = db.sql(
        "CREATE ARRAY VIEW V WITH CHUNKS (2, 4) AS SELECT count(*), sum(b.w), min(b.w) AS low, avg(a.v)\n"
        "  FROM A a SIMILARITY JOIN B b ON (b.x = a.i / 2 + 1) AND (a.j = b.y)\n"
        "  WITH SHAPE BOX(-1:0, 0:1) GROUP BY a.i, a.j"
    )
    assert view.schema.to_text() == (
        "V<count:int64, w_sum:int64 NULL, low:int64 NULL, v_avg:float64 NULL>[i=1:6:2; j=1:4:4]"
    )
    present = {(x, y): w for x, y, w in b.itertuples(index=False)}
    rows = []  # left cells with no right cell in their shape have no pairs, so no view cell
    for i, j, v in a.itertuples(index=False):
        x, y = i // 2 + 1, j
        ws = [present[x + dx, y + dy] for dx in (-1, 0) for dy in (0, 1) if (x + dx, y + dy) in present]
        if ws:
            rows.append((i, j, len(ws), sum(ws), min(ws), v))
    expected = pd.DataFrame(rows, columns=["i", "j", "count", "w_sum", "low", "v_avg"])
    assert_cells(db.sql("SELECT * FROM V").to_pandas(), expected)


VIEW_ERRORS = [
    # statement (on the module's A <v, n> and B <w>, both [i; j]), error type, fragment of the message
    (
        "CREATE ARRAY VIEW V AS SELECT count(*) FROM A a SIMILARITY JOIN B b\n  ON (b.i = a.i) WITH SHAPE L1(1) GROUP BY a.i, a.j",
        ValidationError,
        "ON does not map dimension j of B (b): every dimension of the right array needs exactly one equality, "
        "e.g. (b.j = a.i) (at line 2, column 3)",
    ),
    (
        "CREATE ARRAY VIEW V AS SELECT count(*) FROM A a SIMILARITY JOIN B b ON (b.k = a.i) WITH SHAPE L1(1) GROUP BY a.i, a.j",
        ValidationError,
        "ON: b.k: array B has no dimension 'k'; dimensions: i, j (at line 1, column 69)",
    ),
    (
        "CREATE ARRAY VIEW V AS SELECT count(*) FROM A a SIMILARITY JOIN B b WITH SHAPE L1(1) GROUP BY a.j, a.i",
        ValidationError,
        "GROUP BY must list every dimension of A in order (a.i, a.j): only grouping by the left array's cells "
        "is supported (at line 1, column 95)",
    ),
    (
        "CREATE ARRAY VIEW V AS SELECT count(*) FROM A a SIMILARITY JOIN B b WITH SHAPE L1(1) GROUP BY a.i",
        ValidationError,
        "GROUP BY must list every dimension of A in order",
    ),
    (
        "CREATE ARRAY VIEW V AS SELECT count(*), avg(b.v) FROM A a SIMILARITY JOIN B b WITH SHAPE L1(1) GROUP BY a.i, a.j",
        ValidationError,
        "b.v: array B has no attribute 'v'; attributes: w (at line 1, column 41)",
    ),
    (
        "CREATE ARRAY VIEW V AS SELECT count(*) AS i FROM A a SIMILARITY JOIN B b WITH SHAPE L1(1) GROUP BY a.i, a.j",
        ValidationError,
        "view output 'i' clashes with a dimension of A",
    ),
    (
        "CREATE ARRAY VIEW V AS SELECT count(*) FROM A a SIMILARITY JOIN B b WITH SHAPE BOX(-1:1) GROUP BY a.i, a.j",
        ValidationError,
        "WITH SHAPE: BOX has 1 range(s) but the shape needs 2 (one per dimension) (at line 1, column 80)",
    ),
    (
        "CREATE ARRAY VIEW V AS SELECT count(*) FROM A a SIMILARITY JOIN B b WITH SHAPE PRODUCT(BOX(0:0), BOX(0:0), L1(1)) GROUP BY a.i, a.j",
        ValidationError,
        "WITH SHAPE: PRODUCT covers 2 dimension(s) plus a ball, but the shape needs 2",
    ),
    (
        "CREATE ARRAY VIEW V AS SELECT count(*) FROM C c SIMILARITY JOIN B b WITH SHAPE L1(1) GROUP BY c.i, c.j",
        NotFoundError,
        "no array named C (arrays: A, B) (at line 1, column 45)",
    ),
    (
        "CREATE ARRAY VIEW V WITH CHUNKS (2) AS SELECT count(*) FROM A a SIMILARITY JOIN B b WITH SHAPE L1(1) GROUP BY a.i, a.j",
        ValidationError,
        "WITH CHUNKS needs one chunk length per dimension of the view (i, j), got 1",
    ),
    ("CREATE ARRAY VIEW W AS SELECT * FROM window(A, 1, 1, avg(v))", ValidationError, "needs 4 extents"),
    (
        "CREATE ARRAY VIEW W AS SELECT * FROM window(A, 1, 1, 1, 1, avg(x))",
        ValidationError,
        "unknown attribute 'x'",
    ),
    (
        "CREATE ARRAY VIEW B AS SELECT * FROM window(A, 1, 1, 1, 1, avg(v))",
        AlreadyExistsError,
        "B already exists",
    ),
    ("DROP VIEW A", ValidationError, "A is an array, not a view"),
    ("REFRESH VIEW C", NotFoundError, "no view named C (views: none)"),
    ("SHOW STATUS OF B", ValidationError, "B is an array, not a view"),
    ("VERIFY VIEW C", NotFoundError, "no view named C"),
]


@pytest.mark.parametrize(("text", "kind", "message"), VIEW_ERRORS, ids=[v[0][:70] for v in VIEW_ERRORS])
def test_bad_view_statements_change_nothing(loaded, text: str, kind: type, message: str) -> None:
    db, _, _ = loaded
    before = _state(db)
    with pytest.raises(kind) as caught:
        db.sql(text)
    assert message in str(caught.value)
    assert str(caught.value).endswith("(statement at line 1, column 1)")
    assert _state(db) == before and db.views() == []


def test_view_definition_from_text_points_into_the_select(loaded) -> None:
    db, _, _ = loaded
    text = "SELECT count(*)\nFROM A a SIMILARITY JOIN B b\nON (b.i = a.i)\nWITH SHAPE L1(1) GROUP BY a.i, a.j"
    with pytest.raises(
        ValidationError, match=r"ON does not map dimension j of B .* \(at line 3, column 1\)$"
    ):
        db.create_view("V", text)
    with pytest.raises(ParseError) as caught:
        db.create_view("V", "SELECT count(*) FROM A a SIMILARITY JOIN B b WITH SHAPE L2(1) GROUP BY a.i, a.j")
    assert (caught.value.line, caught.value.column) == (1, 57)
    definition = view_definition_from_text(
        db, "select Count(*) from A a similarity join A b with shape linf(0) group by a.i, a.j"
    )
    assert (
        definition.text == "SELECT count(*) FROM A a SIMILARITY JOIN A b WITH SHAPE LINF(0) GROUP BY a.i, a.j"
    )
    assert (definition.left, definition.right, definition.mapping, len(definition.shape)) == (
        "A",
        "A",
        None,
        1,
    )
    assert definition.aggregates == (ViewAggregate("count", None, None, "count"),)
    assert db.views() == []
