"""Streams and their views tried a second time, where the first trial (test_stream_trial.py) did not
go: names readers reserve, patterns of every shape against a regular-expression search, HAVING,
group keys of NULL and floating point, Flink habits (PREV, LAST), and both executors side by side."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import arrayviews
from arrayviews.model.errors import ParseError, ValidationError
from pattern_reference import Pattern, Predicate, pattern_results

EPOCH = 1_420_070_400  # 2015-01-01 00:00 UTC, a whole minute
FIRST = EPOCH // 60  # its part number


@pytest.fixture(scope="module")
def scratch(spark, tmp_path_factory):
    """A function making a fresh warehouse (in-process unless told otherwise)."""
    made = iter(range(10**6))

    def make(execution: str = "local"):
        path = tmp_path_factory.mktemp("trial2") / f"warehouse{next(made)}"
        return arrayviews.connect(str(path), spark=spark, execution=execution)

    return make


def batch(rows: list[tuple], kind: pa.DataType | None = None, keys: pa.DataType | None = None) -> pa.Table:
    """Rows ``(part, second, group, value)`` as an Arrow batch of the stream ``ts, g, v`` (BIGINT
    values and string groups unless told)."""
    kind, keys = kind or pa.int64(), keys or pa.string()
    return pa.table(
        {
            "ts": pa.array(
                [(60 * (FIRST + p) + s) * 10**6 for p, s, _, _ in rows], pa.timestamp("us", tz="UTC")
            ),
            "g": pa.array([g for _, _, g, _ in rows], keys),
            "v": pa.array([v for _, _, _, v in rows], kind),
        }
    )


def stream(db, kind: str = "bigint", keys: str = "string"):
    return db.create_stream("S", f"ts timestamp, g {keys}, v {kind}", partition_length=60, time_column="ts")


def shown(db, view: str, columns: list[str]) -> set[tuple]:
    """The view's rows as ``(part, *columns)``, read by SQL (numbers as Python ints where whole)."""
    listed = ", ".join(columns)
    rows = db.sql(f"SELECT unix_seconds(PART_TIMESTAMP) AS at, {listed} FROM {view}").collect()
    return {(row[0] // 60 - FIRST, *(_plain(v) for v in row[1:])) for row in rows}


def _plain(value):
    if hasattr(value, "as_integer_ratio") and not isinstance(value, float) and value == int(value):
        return int(value)  # DECIMAL(38,0) sums
    return value


def errors_of(result) -> list[str]:
    return [m.error for m in result.maintenance if m.error]


# -- 1. the name readers see each part's start under --------------------------------------------
def test_an_output_column_named_part_timestamp_is_refused_where_it_is_written(scratch) -> None:
    """Failed before: ``sum(v) AS PART_TIMESTAMP`` was accepted and the sums silently vanished
    (readers replace that column with the part's start time)."""
    db = scratch()
    s = stream(db)
    s.append(batch([(0, 0, "p", 5)]))
    statements = [
        ("SELECT g, sum(v) AS part_timestamp FROM S [WINDOW 2 MINUTES] GROUP BY g", 28),
        ("SELECT g, count(*) AS PART_TIMESTAMP FROM S PATTERN [a] WHERE a.v > 1 GROUP BY g", 28),
    ]
    for query, column in statements:
        with pytest.raises(ParseError, match=rf"'(?i:part_timestamp)' is reserved.* line 1, column {column}"):
            db.sql(f"CREATE VIEW w AS {query}")
    written = (
        "CREATE VIEW h AS\nINITIALIZE h[i] AS SELECT g, v AS Part_Timestamp FROM S[i]\n"
        "UPDATE h[j] AS SELECT g, v AS Part_Timestamp FROM S[j]\nPARTITION LENGTH 60"
    )
    with pytest.raises(
        ValidationError, match=r"view h: column name Part_Timestamp is reserved.*line 2, column 30"
    ):
        db.sql(written)
    assert db.stream_views(helpers=True) == []


# -- 2. a Flink user's MATCH_RECOGNIZE habits, refused by name -------------------------------------
def test_match_recognize_functions_and_unknown_columns_are_named_where_written(scratch) -> None:
    """Failed before: ``PREV(b.v)`` was Spark's UNRESOLVED_ROUTINE error placed at the statement's
    start, ``LAST(b.v)`` was called an aggregate, ``a.v > rand()`` was accepted (a part built again
    would match differently), and an unknown column was Spark's UNRESOLVED_COLUMN at column 1."""
    db = scratch()
    s = stream(db)
    s.append(batch([(0, 0, "p", 5)]))
    version = s.table.current_version()
    head = "CREATE VIEW pv AS SELECT g, count(*) AS ct FROM S PATTERN [a, b+] WHERE a.v > 1 AND "
    at = len(head) + 1
    cases = [
        ("PREV(b.v) > 1", r"PREV\(\) is MATCH_RECOGNIZE's, not a pattern view's", 0),
        ("LAST(b.v) > a.v", r"LAST\(\) is MATCH_RECOGNIZE's", 0),
        ("FIRST(b.v) > 1", r"FIRST\(\) is MATCH_RECOGNIZE's", 0),
        ("CLASSIFIER() = 'b'", r"CLASSIFIER\(\) is MATCH_RECOGNIZE's", 0),
        ("b.v > rand()", r"RAND\(\) is not allowed in a pattern's WHERE", 6),
        ("row_number() OVER (ORDER BY b.v) = 1", r"window functions are not allowed", 0),
        ("b.nope > 1", r"view pv: the stream S has no column nope \(columns: ts, g, v\)", 0),
    ]
    for condition, message, offset in cases:
        with pytest.raises(ParseError, match=rf"{message}.* at line 1, column {at + offset}\n"):
            db.sql(head + condition + " GROUP BY g")
    with pytest.raises(ParseError, match=r"view pv: sum\(g\) needs a numeric column; g is string"):
        db.sql("CREATE VIEW pv AS SELECT v, sum(g) AS t FROM S PATTERN [a] WHERE a.v > 1 GROUP BY v")
    assert db.stream_views(helpers=True) == []
    assert s.table.current_version() == version


# -- 3. patterns of shapes the first trial did not try, against a regular-expression search -------
P = Predicate
SHAPES = [  # (PATTERN variables (name, +), conditions): a one-row match, greedy runs, two + in a row
    ((("a", False),), (P("a", "v", ">", 2),)),
    ((("a", True),), (P("a", "v", "<>", 3),)),
    ((("a", True), ("b", True)), (P("a", "v", "<", 4), P("b", "v", ">=", other="a", other_attribute="v"))),
    (
        (("a", False), ("b", True), ("c", True)),
        (P("a", "v", ">", 4), P("b", "v", "<", 3), P("c", "v", ">", other="b", other_attribute="v")),
    ),
    (
        (("a", True), ("b", False), ("c", True), ("d", False)),
        (P("a", "v", ">=", 1), P("b", "v", "<", 3), P("d", "v", ">", 4)),
    ),
    ((("a", False), ("b", False)), ()),  # no WHERE: every two rows in a row
]


def expected_matches(pattern: Pattern, rows: list[tuple]) -> set[tuple]:
    """``(part, group, count, sum)`` per part by tests/pattern_reference.py: per group its row of each
    part (NULL if one is, else the least: the first ordered by ``v`` NULLS FIRST)."""
    first, last = min(r[0] for r in rows), max(r[0] for r in rows)
    parts = []
    for part in range(first, last + 1):
        values: dict = {}
        for p, _, g, v in rows:
            if p == part:
                values.setdefault(g, []).append(v)
        parts.append({g: {"v": None if None in vs else min(vs)} for g, vs in values.items()})
    found = pattern_results(pattern, parts, ["v"])
    return {(first + t, g, ct, total) for t, matches in enumerate(found) for g, ct, total in matches}


def rich_arrivals(pattern: Pattern, seed: int) -> list[tuple]:
    """Random rows ``(part, second, group, value)`` over parts 0..9, from the first generator (from
    ``seed``) whose stream has at least two matches by the reference: no shape is tried vacuously."""
    for attempt in range(100 * seed, 100 * seed + 100):
        rng = random.Random(attempt)
        arrivals = [
            (
                rng.randint(0, 9),
                rng.randint(0, 59),
                rng.choice(["p", None]),
                rng.choice([None, *range(7)]),
            )
            for _ in range(36)
        ]
        if len(expected_matches(pattern, arrivals)) >= 2:
            return arrivals
    raise AssertionError("no stream with two matches")  # pragma: no cover


@pytest.mark.parametrize("shape", range(len(SHAPES)))
def test_patterns_of_every_shape_match_a_regular_expression_search(scratch, shape) -> None:
    variables, predicates = SHAPES[shape]
    pattern = Pattern(variables, predicates)
    arrivals = rich_arrivals(pattern, shape)
    db = scratch()
    s = stream(db)
    text = "[" + ", ".join(name + ("+" if kleene else "") for name, kleene in variables) + "]"
    where = " WHERE " + " AND ".join(p.sql() for p in predicates) if predicates else ""
    db.sql(
        f"CREATE VIEW pv AS SELECT g, count(*) AS ct, sum(v) AS total FROM S PATTERN {text}{where} GROUP BY g"
    )
    arrived: list[tuple] = []
    for number in range(3):  # later batches bring late rows for earlier parts too
        rows = arrivals[number::3]
        assert not errors_of(s.append(batch(rows)))
        arrived += rows
        assert shown(db, "pv", ["g", "ct", "total"]) == expected_matches(pattern, arrived), (number, arrived)


def test_a_translated_query_over_a_view_or_with_a_random_having_is_refused_by_name(scratch) -> None:
    """Failed before: a window over a pattern view, and INSERT or LOAD into it, said 'no stream
    (array) named pv', and ``HAVING rand() > 0.5`` was accepted (the groups shown would change
    whenever a part is rebuilt)."""
    db = scratch()
    stream(db)
    db.sql("CREATE VIEW pv AS SELECT g, count(*) AS ct FROM S PATTERN [a, b] WHERE a.v > 1 GROUP BY g")
    with pytest.raises(
        ValidationError, match=r"view wo: pv is a stream view; a PATTERN or WINDOW query reads a stream"
    ):
        db.sql("CREATE VIEW wo AS SELECT g, sum(ct) AS n FROM pv [WINDOW 3 MINUTES] GROUP BY g")
    with pytest.raises(ParseError, match=r"rand\(\)|RAND\(\)"):
        db.sql(
            "CREATE VIEW wr AS SELECT g, count(*) AS n FROM S [WINDOW 2 MINUTES] GROUP BY g HAVING rand() > 0.5"
        )
    for statement in ("INSERT INTO pv VALUES ('q', 6)", "LOAD pv FROM '/nowhere.parquet'"):
        with pytest.raises(
            ValidationError, match=r"pv is a stream view: its rows come from the relations it reads"
        ):
            db.sql(statement)
    assert db.stream_views(helpers=True) == ["pv"]


# -- 4. floating-point group keys on both executors -----------------------------------------------
def float_keyed_window(db) -> set[tuple]:
    s = stream(db, keys="double")
    db.sql(
        "CREATE VIEW w USING INCREMENTAL AS SELECT g, sum(v) AS t, count(*) AS n FROM S [WINDOW 2 MINUTES] GROUP BY g"
    )
    nan = float("nan")
    rows = [(0, 0, -0.0, 1), (0, 1, nan, 2), (0, 2, None, 3), (1, 0, 0.0, 4), (1, 1, -0.0, 5), (1, 2, nan, 6)]
    assert not errors_of(s.append(batch(rows, keys=pa.float64())))
    found = shown(db, "w", ["g", "t", "n"])
    return {(p, "nan" if g != g else (None if g is None else str(g)), t, n) for p, g, t, n in found}


def test_nan_null_and_signed_zero_keys_each_form_one_group(scratch) -> None:
    """As Spark groups them: every NaN one group, NULL one, -0.0 with 0.0 (references by hand; the
    zero's sign shown is the strict xfail below)."""
    found = {(p, "0.0" if g == "-0.0" else g, t, n) for p, g, t, n in float_keyed_window(scratch())}
    assert found == {
        (0, "0.0", 1, 1),
        (0, "nan", 2, 1),
        (0, None, 3, 1),
        (1, "0.0", 10, 3),
        (1, "nan", 8, 2),
        (1, None, 3, 1),
    }


def test_a_signed_zero_key_is_shown_as_sparks_group_by_shows_it(scratch) -> None:
    """A strict xfail until r23: in-process the key was shown as -0.0 (execution/float_keys.py)."""
    db = scratch("local")
    keys = {g for p, g, _, _ in float_keyed_window(db) if g in ("0.0", "-0.0")}
    sparks = db.sql("SELECT g FROM S GROUP BY g HAVING g = 0").collect()
    assert keys == {str(row.g) for row in sparks} == {"0.0"}


def test_a_stream_query_with_where_and_group_by_is_spark_sql() -> None:
    """Failed before the language helper's fix of the same round (d8e2eb7): ``SELECT g FROM S WHERE
    v > 1 GROUP BY g`` was read as an array query ("unexpected 'GROUP BY'")."""
    from arrayviews.language.parser import parse_statement
    from arrayviews.language.syntax import Query

    assert isinstance(parse_statement("SELECT g FROM S GROUP BY g"), Query)
    assert isinstance(parse_statement("SELECT g, count(*) FROM S WHERE v > 1 GROUP BY g"), Query)
    for text in ("SELECT g FROM S WHERE v > 1 GROUP BY g", "SELECT g, v FROM S WHERE v > 1 ORDER BY v"):
        assert isinstance(parse_statement(text), Query), text


# -- 5. stream columns ------------------------------------------------------------------------------
def test_a_column_constraint_is_refused_not_dropped(scratch) -> None:
    """Failed before: ``v bigint NOT NULL`` (or ``DEFAULT 1``, ``COMMENT 'x'``) made a stream whose
    column took NULLs all the same: the statement dropped the words, the API kept NOT NULL in the
    schema and appended NULLs."""
    db = scratch()
    for tail, column in (("NOT NULL", 59), ("not null default 1", 59), ("COMMENT 'x'", 59)):
        statement = f"CREATE STREAM X (ts timestamp, g string, v decimal(10, 2) {tail}) PARTITION LENGTH 60 TIME COLUMN ts"
        with pytest.raises(
            ParseError, match=rf"column v: only a type may follow the column's name.* column {column}\n"
        ):
            db.sql(statement)
    with pytest.raises(ValidationError, match=r"stream A, column v: NOT NULL is not supported"):
        db.create_stream(
            "A", "ts timestamp, g string, v bigint NOT NULL", partition_length=60, time_column="ts"
        )
    assert db.streams() == []
    db.sql(
        "CREATE STREAM X (ts timestamp, v decimal(10, 2), w timestamp_ntz) PARTITION LENGTH 60 TIME COLUMN ts"
    )
    assert [f.dataType.simpleString() for f in db.stream("X").schema.fields] == [
        "timestamp",
        "decimal(10,2)",
        "timestamp_ntz",
    ]


def test_array_statements_over_streams_and_stream_views_name_their_kind(scratch) -> None:
    """Failed before: each said 'no view named pv (views: none)' or 'no array named S' of a stream
    view or stream that exists."""
    db = scratch()
    stream(db)
    db.sql("CREATE VIEW pv AS SELECT g, count(*) AS ct FROM S PATTERN [a, b] WHERE a.v > 1 GROUP BY g")
    cases = [
        ("REFRESH VIEW pv", r"pv is a stream view: it is maintained as its sources grow"),
        ("VERIFY VIEW pv", r"pv is a stream view"),
        ("ALTER VIEW pv SET REFRESH LIMIT 5 SECONDS", r"pv is a stream view"),
        ("SHOW STATUS OF S", r"S is a stream, not a view"),
        ("SHOW VERSIONS OF S", r"S is a stream, not an array"),
        ("SHOW VERSIONS OF pv", r"pv is a stream view, not an array"),
    ]
    for statement, message in cases:
        with pytest.raises(ValidationError, match=message):
            db.sql(statement)


def test_a_row_far_before_the_streams_oldest_part_is_a_gap(scratch) -> None:
    """Failed before: one row 60 parts before the oldest (limit 5) was appended as a late row, and
    the translated views were rebuilt from it, building 62 parts; a row of 1970 in a stream of 2015
    would have them build 23 million (a hang, as the gap limit exists to prevent)."""
    db = scratch()
    s = db.create_stream(
        "S", "ts timestamp, g string, v bigint", partition_length=60, time_column="ts", max_gap_parts=2
    )
    db.sql("CREATE VIEW wv AS SELECT g, sum(v) AS t FROM S [WINDOW 2 MINUTES] GROUP BY g")
    s.append(batch([(10, 0, "p", 5), (11, 0, "p", 6)]))
    version, before = s.table.current_version(), shown(db, "wv", ["g", "t"])
    with pytest.raises(
        ValidationError,
        match=r"stream S, time column ts: the batch's oldest time 2015-01-01T00:05:00.* part "
        rf"{FIRST + 5}, 5 parts before the stream's oldest part {FIRST + 10} .* limit of 2 parts",
    ):
        s.append(batch([(5, 0, "p", 1), (11, 1, "p", 1)]))
    assert s.table.current_version() == version and shown(db, "wv", ["g", "t"]) == before
    assert not errors_of(s.append(batch([(8, 0, "p", 7)])))  # within the limit: a late row
    assert not errors_of(s.append(batch([(5, 0, "p", 1)]), allow_gap=True))
    assert shown(db, "wv", ["t"]) == {(5, 1), (6, 1), (8, 7), (9, 7), (10, 5), (11, 11)}
