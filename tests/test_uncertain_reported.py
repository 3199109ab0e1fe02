"""The items the third trial of uncertain arrays reported and left open, each reproduced and fixed:
the shared batch reader's messages, a pandas id column holding None, NaN in a CSV, the aggregate's
result surface, a data file deleted under the array, and decimal or inexact integer positions (as
an array's float64 attribute takes them); then what an adversarial pass over the statements found:
times in INSERT, column names in another case, CSV fields a type cannot read, ids repeated, explain
after a read, expired versions, file URIs. References are scipy's normal masses, Python's reading
of the text, numpy's times and an array's reader of the same values. Bad input changes nothing."""

from __future__ import annotations

import decimal
import math
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy.stats import norm

import arrayviews
from arrayviews.execution.spark_cells import read_cell_files
from arrayviews.model.errors import MissingFileError, NotFoundError, ParseError, ValidationError


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """One in-process database for the module (names are per test)."""
    return arrayviews.connect(
        str(tmp_path_factory.mktemp("uncertain_reported") / "warehouse"), execution="local"
    )


def mass(mu: float, sigma: float, a: float, b: float) -> float:
    """P(a <= X < b) for X ~ N(mu, sigma) (scipy)."""
    if sigma == 0:
        return 1.0 if a <= mu < b else 0.0
    return float(norm.cdf((b - mu) / sigma) - norm.cdf((a - mu) / sigma))


def _delete_first_file(array) -> str:
    uri = array.table.files(array.version)[0]
    os.remove(uri.removeprefix("file://"))
    return uri


# -- 1. the batch reader names an uncertain array as such ---------------------------------------------
@pytest.mark.parametrize(
    ("name", "batch", "message"),
    [
        (
            "lengths",
            {"x": [1.0, 2.0], "x_sigma": [0.1]},
            r": columns have different lengths \(x=2, x_sigma=1\)",
        ),
        (
            "mixed",
            {"x": [1.0, "a"], "x_sigma": [0.1, 0.1]},
            r": column x mixes text and other values: row 1 holds 'a'",
        ),
        (
            "text",
            {"x": [1.0], "x_sigma": [0.1], "tag": ["\ud800"]},
            r": column tag, row 0: '\\ud800' is not valid Unicode",
        ),
        (
            "wide",
            {"id": [2**64], "x": [1.0], "x_sigma": [0.1]},
            r", column id: 18446744073709551616 \(row 0\) fits no 64-bit",
        ),
        ("rows", [(1.0, 0.1)], r": cannot read tuples from list; give a pandas DataFrame"),
    ],
)
def test_the_batch_reader_says_uncertain_array(local, name, batch, message):
    """Reported: the reader shared with arrays (operators/ingest.to_arrow) began its messages with
    'array cat:' for an uncertain array, where every other message of the uncertain API says
    'uncertain array cat'. An array's own messages are unchanged."""
    array = local.create_uncertain_array(f"{name}<tag:string NULL>[x=0:9:5]", scheme="store-all")
    with pytest.raises(ValidationError, match=rf"^uncertain array {name}{message}") as caught:
        array.insert(batch)
    assert caught.value.array == name
    assert array.version == 0 and array.count() == 0
    plain = local.create_array(f"{name}_a<v:float64>[x=0:9:5]")
    with pytest.raises(ValidationError, match=rf"^array {name}_a: columns have different lengths"):
        plain.insert({"x": [1, 2], "v": [1.0]})


# -- 2. an id pandas turned into NaN ------------------------------------------------------------------
def test_a_pandas_id_column_holding_none_is_a_missing_id_by_row(local):
    """Reported: pandas stores [3, None, 5] as float64 [3.0, NaN, 5.0] and the insert said 'ids must
    be integers, got double', pointing at the dtype the user never chose. Now the missing id and its
    row are named, as a null id (pandas' Int64 NA) is; whole float ids without a gap are still
    refused by type, and good ids go in as given."""
    array = local.create_uncertain_array("ids<v:float64>[x=0:9:5]", scheme="store-all")
    tuples = {"x": [1.5, 2.5, 3.5], "x_sigma": [0.5, 0.5, 0.5], "v": [1.0, 2.0, 3.0]}
    with pytest.raises(
        ValidationError, match=r"^uncertain array ids, column id: missing value \(NaN, as pandas stores None"
    ) as caught:
        array.insert(pd.DataFrame({"id": [3, None, 5], **tuples}))
    assert "in row 1" in str(caught.value) and "double" not in str(caught.value)
    with pytest.raises(ValidationError, match=r"column id: missing value \(null\) in row 2"):
        array.insert(pd.DataFrame({"id": pd.array([3, 4, None], dtype="Int64"), **tuples}))
    with pytest.raises(ValidationError, match=r"column id: ids must be integers, got double"):
        array.insert(pd.DataFrame({"id": [3.0, 4.0, 5.0], **tuples}))
    assert array.version == 0
    array.insert(pd.DataFrame({"id": [3, 9, 5], **tuples}))
    assert array.to_pandas()["id"].tolist() == [3, 5, 9]


# -- 3. NaN in a CSV is NaN, not a missing value ------------------------------------------------------
def test_nan_in_a_csv_is_refused_as_nan_and_kept_as_a_value_of_an_exact_float(local, tmp_path):
    """Reported: LOAD read the text NaN (and nan, NA, null, N/A: Arrow's default null texts) as a
    null, so a NaN sigma was refused as 'missing value (null)', and a NaN of a float attribute
    became a null. NaN is no valid mean or sigma: refused saying NaN, by row. Only an empty field
    is missing, as Spark's reader of an array's CSV has it; a float attribute keeps NaN a number.
    Reference: Python's float() of each field."""
    array = local.create_uncertain_array("csvnan<v:float64 NULL>[x=0:9:5]", scheme="store-all")
    cases = [
        ("x_sigma", "x,x_sigma,v\n1.0,0.5,1\n2.0,NaN,2\n", 1, "NaN"),
        ("x", "x,x_sigma,v\n1.0,0.5,1\n2.0,0.5,2\nnan,0.5,3\n", 2, "NaN"),
        ("x_sigma", "x,x_sigma,v\n1.0,inf,1\n", 0, "inf"),
    ]
    for number, (column, text, row, shown) in enumerate(cases):
        path = tmp_path / f"bad{number}.csv"
        path.write_text(text)
        with pytest.raises(ValidationError) as caught:
            local.sql(f"LOAD csvnan FROM '{path}';")
        message = str(caught.value)
        assert f"column {column}: value {shown} in row {row} is not a finite number" in message
        assert "null" not in message and "missing" not in message
    empty = tmp_path / "empty.csv"
    empty.write_text("x,x_sigma,v\n1.0,,1\n")
    with pytest.raises(ValidationError, match=r"column x_sigma: missing value \(null\) in row 0"):
        local.sql(f"LOAD csvnan FROM '{empty}';")
    assert array.version == 0
    good = tmp_path / "good.csv"
    lines = ["x,x_sigma,v", "1.0,0.5,NaN", "2.5,0.25,", "3.0,0.0,-inf", "4.0,1.0,nan", "5.0,2.0,7.5"]
    good.write_text("\n".join(lines) + "\n")
    local.sql(f"LOAD csvnan FROM '{good}';")
    stored = array.to_arrow()
    fields = [line.split(",")[2] for line in lines[1:]]
    assert stored.column("v").is_null().to_pylist() == [f == "" for f in fields]
    for got, field in zip(stored.column("v").to_pylist(), fields, strict=True):
        if field:
            want = float(field)
            assert (math.isnan(got) and math.isnan(want)) or got == want
    # an array's float64 attribute takes NaN as a number too (NaN is a valid float value)
    plain = local.create_array("csvnan_a<v:float64 NULL>[x=0:9:5]")
    plain.insert({"x": [0, 1], "v": np.array([np.nan, 1.0])})
    assert plain.to_arrow().column("v").null_count == 0


# -- 4. the aggregate counts its rows ------------------------------------------------------------------
def test_the_aggregate_result_counts_its_rows_as_its_siblings_do(local):
    """Reported: a regrid or group-by result had no count(), while a subarray's and a join's do. Its
    rows (blocks) against scipy's masses: two blocks hold the tuples, the expected counts are the
    fsum of their masses; an empty array's aggregate counts 0."""
    array = local.create_uncertain_array("blocks<v:float64>[x=0:19:5]", scheme="store-all")
    assert array.regrid([5], "count(*)", engine="local").count() == 0
    xs, sigmas = [1.5, 2.5, 17.0], [0.1, 0.2, 0.0]
    array.insert({"x": xs, "x_sigma": sigmas, "v": [1.0, 2.0, 3.0]})
    result = array.regrid([5], "count(*)", engine="local")
    assert result.count() == 2 == len(result.to_pandas())
    for _, row in result.to_pandas().iterrows():
        low = 5 * int(row["x"])
        want = math.fsum(mass(m, s, low, low + 5) for m, s in zip(xs, sigmas, strict=True))
        assert row["count"] == pytest.approx(want, abs=1e-12)
    grouped = array.aggregate("count(*)", "sum(v)", engine="local")
    assert grouped.count() == 1 and grouped.to_pandas()["count"].iloc[0] == pytest.approx(3.0, abs=1e-12)
    for sibling in (array.subarray(x=(0, 4), threshold=0.5), array.structure_join(array, 1.0, 0.5)):
        assert sibling.count() == len(sibling.to_pandas())


# -- 5. a data file deleted under the array ------------------------------------------------------------
def test_a_deleted_data_file_is_named_with_the_uncertain_array(local):
    """Reported: with a data file deleted by hand, every read of the uncertain API (to_pandas, the
    subarray, the aggregate, the join, choose_step, insert, SELECT through db.sql) raised a bare
    FileNotFoundError from pyarrow. Arrays report a damaged warehouse naming the array and the file
    (MissingFileError, still a FileNotFoundError): so do uncertain arrays, naming the side of a join
    whose file is gone. Nothing is written."""
    tuples = {"x": [1.0, 12.0], "x_sigma": [0.1, 0.2], "y": [1.0, 2.0], "y_sigma": [0.1, 0.1]}
    left = local.create_uncertain_array("gone_l<>[x=0:19:5; y=0:9:5]", scheme="store-all")
    left.insert(tuples)
    right = local.create_uncertain_array("gone_r<>[x=0:19:5; y=0:9:5]", scheme="store-all")
    right.insert(tuples)
    uri = _delete_first_file(right)
    reads = [
        right.to_pandas,
        lambda: right.subarray(x=(0, 19), threshold=0.5).to_pandas(),
        lambda: right.subarray(x=(0, 19), threshold=0.5, method="rtree").count(),
        lambda: right.regrid([5, 5], "count(*)", engine="local").count(),
        lambda: right.choose_step([(3, 3)]),
        lambda: right.insert({"x": [3.0], "x_sigma": [0.1], "y": [1.0], "y_sigma": [0.1]}),
        lambda: local.sql("SELECT * FROM subarray(gone_r, 0, 0, 19, 9, THRESHOLD 0.5);").to_pandas(),
    ]
    reads += [
        lambda m=m: left.structure_join(right, 1.0, 0.5, method=m, engine="local").to_pandas()
        for m in ("sbj", "bnl", "index")
    ]
    for read in reads:
        with pytest.raises(MissingFileError) as caught:
            read()
        message = str(caught.value)
        assert message.startswith("uncertain array gone_r: a data file of version 1 is missing (")
        assert uri in message and "arrayviews check" in message
        assert isinstance(caught.value, FileNotFoundError) and caught.value.array == "gone_r"
    assert right.version == 1 and len(right.versions()) == 1
    assert left.to_pandas()["x"].tolist() == tuples["x"]  # the other side is intact


def test_a_deleted_data_file_read_by_spark_is_named_too(db):
    """The same on Spark: the Spark engine found the file gone while it planned the aggregate's and
    the join's tasks and raised a bare FileNotFoundError; now the error names the uncertain array
    and the file (a file found gone inside a task, an ExecutionError, is translated alike)."""
    tuples = {"x": [1.0, 12.0], "x_sigma": [0.1, 0.2]}
    left = db.create_uncertain_array("sgone_l<>[x=0:19:5]", scheme="store-all")
    left.insert(tuples)
    right = db.create_uncertain_array("sgone_r<>[x=0:19:5]", scheme="store-all")
    right.insert(tuples)
    uri = _delete_first_file(left)
    for read in (
        lambda: left.aggregate("count(*)", engine="spark").to_pandas(),
        lambda: right.structure_join(left, 1.0, 0.5, engine="spark").count(),
    ):
        with pytest.raises(
            MissingFileError, match=r"^uncertain array sgone_l: a data file of version 1"
        ) as caught:
            read()
        assert uri in str(caught.value)


# -- 6. positions a float64 attribute would not take ---------------------------------------------------
def test_decimal_and_inexact_integer_positions_are_refused_as_an_arrays_float64_refuses_them(local):
    """Arrays refuse decimals for a float64 attribute (model/types.accepts), so uncertain positions
    keep refusing them, but said 'values must be numbers' of a decimal. And an integer mean above
    2**53 was rounded silently (2**53 + 1 stored as 2**53, another cell); an array's float64
    attribute refuses it: so does the uncertain insert, naming the row."""
    big = 2**60
    array = local.create_uncertain_array(f"exact<>[x=0:{big}:{2**40}]", scheme="store-mean")
    plain = local.create_array("exact_a<v:float64>[i=0:9:5]")
    with pytest.raises(ValidationError, match=r"values of type decimal128\(2, 1\) cannot be stored"):
        plain.insert({"i": [0], "v": [decimal.Decimal("1.5")]})
    with pytest.raises(
        ValidationError, match=r"column x: values of type decimal128\(2, 1\) cannot be stored as float64"
    ):
        array.insert({"x": [decimal.Decimal("1.5")], "x_sigma": [0.5]})
    inexact = 2**53 + 1
    with pytest.raises(ValidationError, match=r"array exact_a, column v: 9007199254740993 is not exactly"):
        plain.insert({"i": [0], "v": pa.array([inexact], pa.int64())})
    with pytest.raises(
        ValidationError,
        match=r"uncertain array exact, column x: 9007199254740993 is not exactly representable as float64 .*\(row 1\)",
    ):
        array.insert({"x": pa.array([5, inexact], pa.int64()), "x_sigma": [0.0, 0.0]})
    assert array.version == 0
    array.insert({"x": pa.array([5, 2**53], pa.int64()), "x_sigma": [0, 0]})
    assert array.to_pandas()["x"].tolist() == [5.0, float(2**53)]


# -- 7. statements of uncertain arrays (an adversarial pass) -------------------------------------------
def test_insert_statements_take_times_for_a_datetime64_attribute_as_an_arrays_insert_does(local):
    """Bug: INSERT INTO an uncertain array refused every value of a datetime64 attribute ("'2026-01-01'
    is a string, not a datetime64 value"): no statement could fill it, while an array's INSERT reads
    ISO text. Now the same text gives the same instant (reference: numpy's datetime64 of the UTC
    time), a bad time is named at its line and column, and nothing is written on error."""
    local.sql("CREATE UNCERTAIN ARRAY stamped <t:datetime64 NULL, b:bool> [x=0:9:5];")
    local.sql("CREATE ARRAY stamped_a <t:datetime64 NULL> [x=0:9:5];")
    array = local.uncertain_array("stamped")
    for text, problem in [
        ("'yesterday'", r"'yesterday' is not an ISO 8601 time"),
        ("5", r"5 is not a time \(write it as text"),
    ]:
        with pytest.raises(ValidationError, match=rf"column t: {problem}.* in row 2 at line 2, column 12"):
            local.sql(
                f"INSERT INTO stamped (x, x_sigma, t, b) VALUES (1, 0.5, null, true),\n  (2, 0.5, {text}, false);"
            )
    assert array.version == 0
    times = ["2026-01-31T06:00", "2026-01-01T06:00+02:00", "1999-12-31"]
    rows = ", ".join(f"({k}, 0.5, '{t}', true)" for k, t in enumerate(times))
    local.sql(f"INSERT INTO stamped (x, x_sigma, t, b) VALUES {rows}, (3, 0.5, null, false);")
    local.sql("INSERT INTO stamped_a VALUES " + ", ".join(f"({k}, '{t}')" for k, t in enumerate(times)) + ";")
    want = [
        np.datetime64("2026-01-31T06:00", "ns"),
        np.datetime64("2026-01-01T04:00", "ns"),
        np.datetime64("1999-12-31", "ns"),
    ]
    got = array.to_pandas()["t"].to_numpy()
    assert np.array_equal(got[:3], np.array(want)) and np.isnat(got[3])
    assert np.array_equal(local.array("stamped_a").to_pandas()["t"].to_numpy(), got[:3])


def test_columns_are_matched_without_regard_to_case_and_a_bad_csv_field_is_named(local, tmp_path):
    """Bugs: an uncertain array's insert and LOAD refused columns spelled in another case ('unknown
    column X'), where an array's insert and LOAD and the INSERT statement match names without regard
    to case; and a CSV field its column's type cannot read was reported in Arrow's words ('In CSV
    column #2: Row #3: CSV conversion error to double: invalid value ...', a 0-based column number)
    instead of by column, value and line. Nothing is written on error."""
    array = local.create_uncertain_array("cased<v:float64 NULL, k:int32 NULL>[x=0:9:5]", scheme="store-all")
    array.insert(pd.DataFrame({"X": [1.5], "X_Sigma": [0.5], "V": [2.0]}))
    spelled = tmp_path / "spelled.csv"
    spelled.write_text("ID,X,x_SIGMA,K\n7,2.5,0.25,3\n")
    local.sql(f"LOAD cased FROM '{spelled}';")
    stored = array.to_pandas()
    assert stored["id"].tolist() == [0, 7] and stored["x"].tolist() == [1.5, 2.5]
    assert stored["x_sigma"].tolist() == [0.5, 0.25] and stored["v"].iloc[0] == 2.0
    assert pd.isna(stored["k"].iloc[0]) and stored["k"].iloc[1] == 3
    with pytest.raises(ValidationError, match=r"column x: the column appears twice"):
        array.insert({"x": [1.0], "X": [1.0], "x_sigma": [0.1]})
    bad = tmp_path / "bad.csv"
    bad.write_text("x,x_sigma,v,k\n1.5,0.5,1,2\n2.5,0.5,NA,3\n")
    with pytest.raises(
        ValidationError,
        match=rf"^uncertain array cased, column v: 'NA' \(line 3 of {bad}\) is not a float64 value",
    ):
        local.sql(f"LOAD cased FROM '{bad}';")
    bad.write_text("x,x_sigma,v,k\n1.5,0.5,1,99999999999\n")
    with pytest.raises(
        ValidationError, match=r"column k: '99999999999' \(line 2 of .*\) is not an int32 value"
    ):
        local.sql(f"LOAD cased FROM '{bad}';")
    folder = tmp_path / "parts"  # files of a folder may order their columns apart
    folder.mkdir()
    (folder / "a.csv").write_text("x,x_sigma,v\n1.5,0.5,1\n")
    (folder / "b.csv").write_text("v,X,x_sigma\n2,2.5,wide\n")
    with pytest.raises(
        ValidationError, match=r"column x_sigma: 'wide' \(line 2 of .*b\.csv\) is not a float64 value"
    ):
        local.sql(f"LOAD cased FROM '{folder}' AS CSV;")
    assert array.version == 2


def test_a_repeated_or_stored_id_of_an_insert_statement_is_named_at_its_line_and_column(local):
    """Bug: INSERT INTO an uncertain array with an id already stored, or given twice, said so without
    a place ('(statement at line 1, column 1)' only), while every other refused value of the
    statement is named at its line and column. The API names the batch row (0-based) too."""
    local.sql("CREATE UNCERTAIN ARRAY keyed <v:float64> [x=0:19:5];")
    local.sql("INSERT INTO keyed (id, x, x_sigma, v) VALUES (3, 1, 0.5, 1.0);")
    statement = "INSERT INTO keyed (id, x, x_sigma, v) VALUES (4, 1, 0.5, 1.0),\n   ({}, 2, 0.5, 2.0);"
    with pytest.raises(
        ValidationError, match=r"id 3 is already stored \(the batch gives it in row 2 at line 2, column 5;"
    ):
        local.sql(statement.format(3))
    with pytest.raises(
        ValidationError, match=r"id 4 appears 2 times in the batch \(again in row 2 at line 2, column 5\)"
    ):
        local.sql(statement.format(4))
    array = local.uncertain_array("keyed")
    with pytest.raises(ValidationError, match=r"id 3 is already stored \(the batch gives it in row 2;"):
        array.insert({"id": [8, 9, 3], "x": [1.0, 2.0, 3.0], "x_sigma": [0.5] * 3, "v": [0.0] * 3})
    assert array.version == 1 and array.to_pandas()["id"].tolist() == [3]


def test_an_aggregate_and_a_join_explain_the_versions_their_results_were_read_from(local):
    """Bug: once read, an aggregate's and a join's explain() followed the arrays' newest versions: after
    an insert they said version 2 while their results (kept, as a subarray's is) answered for
    version 1. Before being read they follow the newest version; once read, the version read.
    References: scipy masses of the version-1 tuples."""
    array = local.create_uncertain_array("told<>[x=0:19:5]", scheme="store-all")
    array.insert({"x": [1.5, 2.0], "x_sigma": [0.5, 0.25]})
    total = array.aggregate("count(*)", engine="local")
    pairs = array.structure_join(array, 1.0, 0.5, engine="local")
    array.insert({"x": [3.0], "x_sigma": [0.0]})
    assert total.explain()["version"] == 2 and pairs.explain()["outer"]["version"] == 2  # not read yet
    first = total.to_pandas()["count"].iloc[0]
    assert first == pytest.approx(mass(1.5, 0.5, 0, 20) + mass(2.0, 0.25, 0, 20) + 1.0, abs=1e-12)
    xs, sigmas = [1.5, 2.0, 3.0], [0.5, 0.25, 0.0]
    within = [  # P(|t.x - u.x| < 1) of every pair, the difference N(mean_t - mean_u, sqrt(s_t^2 + s_u^2))
        mass(xs[i] - xs[j], math.hypot(sigmas[i], sigmas[j]), -1.0, 1.0) for i in range(3) for j in range(3)
    ]
    want = sum(p >= 0.5 for p in within)
    assert pairs.count() == want
    array.insert({"x": [10.0], "x_sigma": [0.0]})
    assert total.explain()["version"] == 2 and total.to_pandas()["count"].iloc[0] == first
    explained = pairs.explain()
    assert (explained["outer"]["version"], explained["inner"]["version"]) == (2, 2) and pairs.count() == want
    assert array.aggregate("count(*)", engine="local").explain()["version"] == 3


@pytest.mark.parametrize(
    ("items", "column", "clash"),
    [
        (
            "<a:gaussian, A_sigma:float64> [x=0:9:5]",
            39,
            r"'A_sigma' of attribute A_sigma clashes with attribute a \(as 'a_sigma'",
        ),
        (
            "<x_First:float64> [x=0:9:5]",
            27,
            r"'x_First' of attribute x_First clashes with dimension x \(as 'x_first'",
        ),
        ("<Id:int64> [x=0:9:5]", 27, r"'Id' of attribute Id clashes with the tuple id \(as 'id'"),
    ],
)
def test_column_names_of_an_uncertain_array_that_differ_only_in_case_clash_at_their_place(
    local, items, column, clash
):
    """Bug: CREATE UNCERTAIN ARRAY z <a:gaussian, A_sigma:float64> was refused by the storage table's
    schema as 'array z: names 'a_sigma' and 'A_sigma' differ only in case' at the statement's start,
    naming storage columns (x_first) the user never wrote; exact clashes were already ParseErrors at
    the name. Column names are case-insensitive: a clash in case is one at its line and column."""
    with pytest.raises(
        ParseError, match=rf"^uncertain array z: column name {clash}.* at line 1, column {column}"
    ):
        local.sql(f"CREATE UNCERTAIN ARRAY z {items};")
    assert "z" not in local.relations()["name"].tolist()


def test_a_handle_on_an_expired_version_says_the_version_is_gone(local):
    """Bugs: a handle pinned to a version expired since counted 0 tuples and 0 copies (the summary
    looked up was gone), where an array's pinned handle raises NotFoundError; and reading it said the
    version 'was expired by another process while it was read', though this process expired it
    before; its repr raised. Now each says the array has no such version, naming the versions held."""
    array = local.create_uncertain_array("aged<>[x=0:19:5]", scheme="store-all")
    array.insert({"x": [1.0, 7.5], "x_sigma": [0.1, 0.0]})
    array.relayout("store-mean")
    old = array.at_version(1)
    assert (old.count(), old.copies()) == (2, 3)  # 1.0 +- 0.3 covers cells 0 and 1, 7.5 one cell
    array.expire_versions()
    for read in (old.count, old.copies, old.to_pandas, lambda: array.structure_join(old, 1.0, 0.5).count()):
        with pytest.raises(
            NotFoundError, match=r"^uncertain array aged has no version 1 \(versions held: 2\)"
        ):
            read()
    assert array.count() == 2 and array.to_pandas()["x"].tolist() == [1.0, 7.5]
    # the handle's repr says so rather than raising (it raised NotFoundError), as an array's does
    assert repr(old) == (
        "<UncertainArray aged<>[x=0:19:5] (unreadable: NotFoundError: uncertain array aged has no version 1 "
        "(versions held: 2))>"
    )


def test_load_takes_a_file_uri_as_an_arrays_load_does(local, tmp_path):
    """Bug: LOAD of an uncertain array checked the path with pathlib, so a file:// URI (which an
    array's LOAD reads, as every warehouse location may be one) was refused as 'no file or folder'.
    The tuples read through the URI are the values written in the file."""
    array = local.create_uncertain_array("uri<v:float64>[x=0:19:5]", scheme="store-all")
    source = tmp_path / "folder with space"
    source.mkdir()
    (source / "t.csv").write_text("x,x_sigma,v\n1.5,0.5,2\n12.25,0.0,-1\n")
    local.sql(f"LOAD uri FROM 'file://{source}/t.csv';")
    got = array.to_pandas()
    assert got[["x", "x_sigma", "v"]].values.tolist() == [[1.5, 0.5, 2.0], [12.25, 0.0, -1.0]]
    with pytest.raises(NotFoundError, match=r"uncertain array uri: no file or folder at file://.*/none\.csv"):
        local.sql(f"LOAD uri FROM 'file://{source}/none.csv';")
    assert array.version == 1


def test_nan_in_a_csv_means_the_same_to_an_array_and_an_uncertain_array(db, tmp_path):
    """The reference for item 3: an array's LOAD (Spark's CSV reader, read_cell_files) keeps the text
    NaN of a float64 attribute a number and an empty field a null; an uncertain array's LOAD of the same file now
    does the same (before, both were nulls)."""
    fields = ["NaN", "", "2.5"]  # the same v fields in both files
    cells, tuples = tmp_path / "cells.csv", tmp_path / "tuples.csv"
    cells.write_text("x,v\n" + "".join(f"{k},{v}\n" for k, v in enumerate(fields)))
    tuples.write_text("x,x_sigma,v\n" + "".join(f"{k},0.0,{v}\n" for k, v in enumerate(fields)))
    plain = db.create_array("same_a<v:float64 NULL>[x=0:9:5]")
    # the reader of an array's LOAD (Spark's), without the write after it
    expected = read_cell_files(db.spark, str(cells), plain.schema).orderBy("x").toArrow().column("v")
    uncertain = db.create_uncertain_array("same_u<v:float64 NULL>[x=0:9:5]", scheme="store-all")
    db.sql(f"LOAD same_u FROM '{tuples}';")
    assert expected.is_null().to_pylist() == [False, True, False] and math.isnan(expected[0].as_py())
    got = uncertain.to_arrow().column("v")
    assert got.is_null().to_pylist() == expected.is_null().to_pylist()
    assert math.isnan(got[0].as_py()) and got[2].as_py() == expected[2].as_py() == 2.5
