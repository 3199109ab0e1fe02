"""Streams and their views tried a third time, where the first two trials did not go: what a
hand-written ViewDF query may read (a stream by its bare name, paths, Java calls), how far a view may
run ahead of its stream, reads of a stream's part ranges, windows with HAVING over two group keys
in all three plans, and views over views at another partition length, against plain Python."""

from __future__ import annotations

from fractions import Fraction

import pyarrow as pa
import pytest

import arrayviews
from arrayviews.model.errors import NotFoundError, ParseError, ValidationError
from arrayviews.streams.maintainer import MaintenanceError

EPOCH = 1_420_070_400  # 2015-01-01 00:00 UTC, a whole minute (and a whole three minutes)
FIRST = EPOCH // 60  # its part number


@pytest.fixture(scope="module")
def scratch(spark, tmp_path_factory):
    """A function making a fresh in-process warehouse."""
    made = iter(range(10**6))

    def make(**options):
        path = tmp_path_factory.mktemp("trial3") / f"warehouse{next(made)}"
        return arrayviews.connect(str(path), spark=spark, execution="local", **options)

    return make


def batch(rows: list[tuple]) -> pa.Table:
    """Rows ``(part, second, group, value)`` as an Arrow batch of the stream ``ts, g, v``."""
    return pa.table(
        {
            "ts": pa.array(
                [(60 * (FIRST + p) + s) * 10**6 for p, s, _, _ in rows], pa.timestamp("us", tz="UTC")
            ),
            "g": pa.array([g for _, _, g, _ in rows], pa.string()),
            "v": pa.array([v for _, _, _, v in rows], pa.int64()),
        }
    )


def stream(db, **options):
    return db.create_stream(
        "M", "ts timestamp, g string, v bigint", partition_length=60, time_column="ts", **options
    )


def shown(db, view: str, columns: list[str], length: int = 60) -> set[tuple]:
    """The view's rows as ``(part, *columns)`` (parts counted from FIRST in units of ``length``)."""
    listed = ", ".join(columns)
    rows = db.sql(f"SELECT unix_seconds(PART_TIMESTAMP) AS at, {listed} FROM {view}").collect()
    return {(row[0] // length - EPOCH // length, *row[1:]) for row in rows}


def errors_of(result) -> list[str]:
    return [m.error for m in result.maintenance if m.error]


def column(statement: str, line: int, piece: str) -> int:
    """The 1-based column of the last ``piece`` on 1-based ``line`` of ``statement``."""
    return statement.splitlines()[line - 1].rindex(piece) + 1


def viewdf(name: str, initialize: str, update: str, length: int = 60) -> str:
    return (
        f"CREATE VIEW {name} AS\nINITIALIZE {name}[i] AS {initialize}\nUPDATE {name}[j] AS {update}\n"
        f"PARTITION LENGTH {length}"
    )


# -- 1. what a hand-written ViewDF query reads ------------------------------------------------------
def test_a_stream_read_by_its_bare_name_in_a_viewdf_query_is_refused_where_written(scratch) -> None:
    """Failed before: ``(SELECT max(v) FROM M)`` in an UPDATE was accepted once any Spark SQL query
    had run in the session (it read the copy of M that query registered, or in-process something
    else: part 3 showed 4 > max(v) = 4), and late rows never recomputed the parts reading it."""
    db = scratch()
    s = stream(db)
    s.append(batch([(0, 0, "p", 1), (1, 0, "p", 2), (2, 0, "q", 3), (3, 0, "q", 4)]))
    assert db.sql("SELECT count(*) AS n FROM M").collect()[0].n == 4  # registers M in the session
    version = s.version
    statement = viewdf(
        "v9", "SELECT g, v FROM M[i]", "SELECT g, v FROM M[j] WHERE v > (SELECT max(v) FROM M)"
    )
    with pytest.raises(
        ParseError,
        match=r"view v9: the UPDATE query reads M without a part reference.*M\[j\].* line 3, "
        rf"column {column(statement, 3, 'M)')}\n",
    ):
        db.sql(statement)
    lowered = viewdf("v8", "SELECT g, v FROM M[i] UNION ALL SELECT g, v FROM m", "SELECT g, v FROM M[j]")
    with pytest.raises(
        ParseError,
        match=rf"INITIALIZE query reads m without a part reference.* line 2, column {column(lowered, 2, 'm')}\n",
    ):
        db.sql(lowered)
    assert db.stream_views(helpers=True) == [] and s.version == version

    # its own WITH names (one shadowing the stream's name, as Spark reads it) and part references
    # are what a query reads: a running total per group
    db.sql(
        viewdf(
            "tot",
            "WITH m AS (SELECT g, sum(v) AS t FROM M[i] GROUP BY g) SELECT g, t FROM m",
            "WITH now AS (SELECT g, sum(v) AS t FROM M[j] GROUP BY g) SELECT coalesce(n.g, p.g) AS g, "
            "coalesce(n.t, 0) + coalesce(p.t, 0) AS t FROM now n FULL OUTER JOIN tot[j-1] p ON n.g = p.g",
        )
    )
    late = [(4, 0, "p", 10), (5, 0, "q", -1), (3, 30, "q", 7)]  # one row late for part 3
    assert not errors_of(s.append(batch(late)))
    arrived = [(0, 0, "p", 1), (1, 0, "p", 2), (2, 0, "q", 3), (3, 0, "q", 4), *late]
    expected = set()
    for part in range(3, 6):  # a hand-written view starts at the newest part (3)
        totals: dict[str, int] = {}
        for p, _, g, v in arrived:
            if 3 <= p <= part:
                totals[g] = totals.get(g, 0) + v
        expected |= {(part, g, t) for g, t in totals.items()}
    assert shown(db, "tot", ["g", "t"]) == expected
    # failed before: SHOW STATUS of an unknown name listed the array views only ("views: none")
    with pytest.raises(NotFoundError, match=r"no view named nope \(views: tot\)"):
        db.sql("SHOW STATUS OF nope")


def test_viewdf_queries_read_no_paths_or_table_functions_and_call_no_java(scratch) -> None:
    """Failed before: SQL over streams refuses these (unless ``allow_unsafe_sql``), but a ViewDF
    query ran them: ``reflect('java.lang.System', 'getProperty', 'user.name')`` put the user's name
    in the view, ``text.`/etc/hostname``` read a file of the machine."""
    db = scratch()
    s = stream(db)
    s.append(batch([(0, 0, "p", 1), (1, 0, "q", 2)]))
    version = s.version
    java = "reflect('java.lang.System', 'getProperty', 'user.name')"
    cases = [
        (
            viewdf("r1", f"SELECT g, {java} AS u FROM M[i]", f"SELECT g, {java} AS u FROM M[j]"),
            r"the INITIALIZE query is refused: reflect\(\.\.\.\) calls Java methods at line 2, column 31\n",
        ),
        (
            viewdf(
                "r2",
                "SELECT g, v FROM M[i]",
                "SELECT g, v FROM M[j] UNION ALL SELECT 'x', 1L FROM text.`/etc/hostname`",
            ),
            r"the UPDATE query reads text\.`/etc/hostname`, a path or another catalog .* line 3, column 69\n",
        ),
        (
            viewdf(
                "r3", "SELECT g, v FROM M[i]", "SELECT g, v FROM M[j] UNION ALL SELECT 'x', id FROM range(2)"
            ),
            r"the UPDATE query reads the table function RANGE\(2\) .* line 3, column 69\n",
        ),
        (
            viewdf(
                "r4", "SELECT g, v FROM M[i]", "SELECT g, v FROM M[j] UNION ALL SELECT g, v FROM elsewhere"
            ),
            r"reads elsewhere, which is neither a part reference nor one of its WITH names .* line 3, column 66\n",
        ),
    ]
    for statement, message in cases:
        with pytest.raises(ParseError, match=message):
            db.sql(statement)
    assert db.stream_views(helpers=True) == [] and s.version == version

    # a database opened with allow_unsafe_sql=True may call Java (but not read M without brackets)
    unsafe = arrayviews.connect(
        db.warehouse.location, spark=db.spark, execution="local", allow_unsafe_sql=True
    )
    unsafe.sql(cases[0][0])
    assert {row.u for row in unsafe.sql("SELECT u FROM r1").collect()} == {
        unsafe.spark.sparkContext._jvm.java.lang.System.getProperty("user.name")
    }
    with pytest.raises(ParseError, match=r"reads M without a part reference"):
        unsafe.sql(
            viewdf("r5", "SELECT g, v FROM M[i]", "SELECT g, v FROM M[j] UNION ALL SELECT g, v FROM M")
        )


# -- 2. how far a view may run ahead of its stream ----------------------------------------------
def test_a_view_reading_far_behind_its_part_is_refused_before_it_builds_a_hundred_million_parts(
    scratch,
) -> None:
    """Failed before: ``M[j-100000000]`` in the UPDATE let the view build every part up to M's
    newest part plus 10^8 in its first maintenance (the statement ran for more than ten minutes and
    took 5.7 GB before it was stopped), and ``M[j-10^21]`` raised a bare OverflowError."""
    db = scratch()
    s = stream(db, max_gap_parts=5)
    s.append(batch([(0, 0, "p", 1), (1, 0, "p", 2), (2, 0, "q", 3)]))
    version = s.version
    far = viewdf("far", "SELECT g, v FROM M[i]", "SELECT g, v FROM M[j-100000000]")
    with pytest.raises(
        ParseError,
        match=r"view far: m\[j-100000000\] lets far build 100000000 parts past the newest part of m.*"
        r"limit of 5 \(the gap limit of m, max_gap_parts\).* line 3, column 35\n",
    ):
        db.sql(far)
    huge = viewdf("huge", "SELECT g, v FROM M[i]", "SELECT g, v FROM M[j-1000000000000000000000 .. j]")
    with pytest.raises(
        ParseError, match=r"the part offset -1000000000000000000000 is past every part number"
    ):
        db.sql(huge)
    with pytest.raises(ParseError, match=r"lets six build 6 parts past"):
        db.sql(viewdf("six", "SELECT g, v FROM M[i]", "SELECT g, v FROM M[j-6]"))
    assert db.stream_views(helpers=True) == [] and s.version == version

    # within the limit: the view runs exactly five parts ahead, part j holding M's part j-5
    db.sql(viewdf("ahead", "SELECT g, v FROM M[i]", "SELECT g, v + 100 AS v FROM M[j-5]"))
    assert shown(db, "ahead", ["g", "v"]) == {(2, "q", 3), (5, "p", 101), (6, "p", 102), (7, "q", 103)}
    assert not errors_of(s.append(batch([(3, 0, "q", 4)])))
    assert shown(db, "ahead", ["g", "v"]) == {
        (2, "q", 3),
        (5, "p", 101),
        (6, "p", 102),
        (7, "q", 103),
        (8, "q", 104),
    }


# -- 3. reading a stream's parts ---------------------------------------------------------------------
def test_reading_a_streams_parts_takes_part_numbers(scratch) -> None:
    """Failed before: ``read('2015-01-01 00:01:00')`` raised "'<' not supported between instances of
    'int' and 'str'", and ``read(FIRST + 1.5)`` silently read the parts from 2 on."""
    db = scratch()
    s = stream(db)
    rows = [(0, 0, "p", 1), (1, 0, "p", 2), (1, 9, "q", 5), (3, 0, "q", 3)]
    s.append(batch(rows))
    for low, high in (
        (None, None),
        (FIRST + 1, FIRST + 1),
        (FIRST + 1, None),
        (FIRST + 3, FIRST + 1),
        (FIRST + 9, None),
    ):
        lo = 0 if low is None else low - FIRST
        hi = 99 if high is None else high - FIRST
        expected = sorted(v for p, _, _, v in rows if lo <= p <= hi)
        assert sorted(r.v for r in s.read(low, high).collect()) == expected, (low, high)
    for bad in ("2015-01-01 00:01:00", FIRST + 1.5, True):
        with pytest.raises(
            ValidationError, match=r"stream M: read\(\) takes part numbers .*got " + repr(bad)[:6]
        ):
            s.read(bad)
    with pytest.raises(ValidationError, match=r"stream M: read\(\) takes part numbers"):
        s.read(FIRST, 2.0)
    # failed before: the result of an empty batch printed as nothing at all
    empty = s.append(batch([]), batch_id="none")
    assert str(empty) == "the batch (batch none, not recorded) has no rows: nothing was appended to " + (
        f"stream M, still at version {s.version}"
    )


# -- 4. windows with HAVING over two group keys, every plan ---------------------------------------
def window_expected(rows, width: int, having) -> set[tuple]:
    """``(part, g, h, sum, count(*), avg)`` of the groups ``having`` keeps, by plain Python."""
    first, last = min(r[0] for r in rows), max(r[0] for r in rows)
    expected = set()
    for part in range(first, last + 1):
        groups: dict[tuple, list] = {}
        for p, _, g, h, v in rows:
            if part - width < p <= part:
                groups.setdefault((g, h), []).append(v)
        for (g, h), values in groups.items():
            present = [v for v in values if v is not None]
            total = sum(present) if present else None
            mean = float(Fraction(total, len(present))) if present else None
            if having(len(values), total, mean):
                expected.add((part, g, h, total, len(values), mean))
    return expected


def test_windows_with_having_over_two_nullable_keys_agree_with_python_in_every_plan(scratch) -> None:
    db = scratch()
    s = db.create_stream(
        "S", "ts timestamp, g string, h int, v bigint", partition_length=60, time_column="ts"
    )
    plans = ["USING INCREMENTAL", "USING RECOMPUTE"]  # AUTO takes one of them
    for number, plan in enumerate(plans):
        db.sql(
            f"CREATE VIEW w{number} {plan} AS SELECT g, h, sum(v) AS t, count(*) AS n, avg(v) AS a "
            "FROM S [WINDOW 3 MINUTES] GROUP BY g, h HAVING count(*) >= 2 AND avg(v) > 0"
        )
    big = 2**53 + 1  # averages of integers past 2^53 are exact (one rounding)
    batches = [
        [(0, 0, "p", 1, big), (0, 5, "p", 1, big + 2), (1, 0, None, None, 4), (1, 1, None, None, None)],
        [(6, 0, "p", 1, -3), (6, 1, "p", 1, 5), (2, 0, None, None, -1), (9, 0, "q", None, 7)],
        [(7, 0, "p", 1, None), (1, 30, None, 2, 1), (8, 0, "q", None, 0), (3, 0, None, None, 2)],
    ]
    arrived: list[tuple] = []
    for rows in batches:  # parts without rows in between, late rows in later batches
        frame = pa.table(
            {
                "ts": pa.array(
                    [(60 * (FIRST + p) + x) * 10**6 for p, x, *_ in rows], pa.timestamp("us", tz="UTC")
                ),
                "g": pa.array([r[2] for r in rows], pa.string()),
                "h": pa.array([r[3] for r in rows], pa.int32()),
                "v": pa.array([r[4] for r in rows], pa.int64()),
            }
        )
        assert not errors_of(s.append(frame))
        arrived += rows
        expected = window_expected(
            arrived, 3, lambda n, total, mean: n >= 2 and mean is not None and mean > 0
        )
        for number in range(len(plans)):
            assert shown(db, f"w{number}", ["g", "h", "t", "n", "a"]) == expected, (plans[number], arrived)


# -- 5. views over views at another partition length ----------------------------------------------
def test_a_three_minute_view_and_a_view_over_three_of_its_parts_follow_late_rows(scratch) -> None:
    """H sums each three minutes of M (``M[i*3 .. i*3+2]``), R sums three parts of H
    (``H[j-2 .. j]``): both against sums over the rows by plain Python after late rows."""
    db = scratch()
    s = stream(db)
    arrived = [(0, 0, "p", 1), (2, 0, "q", 2), (4, 0, "p", 3), (6, 0, "p", 4), (8, 0, "q", 5)]
    s.append(batch(arrived))
    three = "SELECT g, sum(v) AS t, count(*) AS n FROM M[{v}*3 .. {v}*3+2] GROUP BY g"
    db.sql(viewdf("H", three.format(v="i"), three.format(v="j"), 180))
    over = "SELECT g, sum(t) AS t3, sum(n) AS n3 FROM H[{v}-2 .. {v}] GROUP BY g"
    db.sql(viewdf("R", over.format(v="i"), over.format(v="j"), 180))
    for rows in ([(9, 0, "p", 6), (13, 0, "q", 7), (1, 0, "q", 8)], [(7, 0, "q", 9), (12, 0, "p", 10)]):
        assert not errors_of(s.append(batch(rows)))
        arrived += rows
        first, held = db.stream_view("H").state().first, db.stream_view("H").parts()
        assert first == FIRST // 3 + 2  # the newest three minutes complete when H was created
        sums: dict[tuple, list] = {}
        for p, _, g, v in arrived:
            sums.setdefault(((FIRST + p) // 3, g), []).append(v)
        h = {(part - FIRST // 3, g, sum(vs), len(vs)) for (part, g), vs in sums.items() if part in held}
        assert shown(db, "H", ["g", "t", "n"], 180) == h
        r = set()
        for part in held:
            window = [(g, t, n) for q, g, t, n in h if part - 2 <= q + FIRST // 3 <= part]
            for group in {g for g, _, _ in window}:
                r.add(
                    (
                        part - FIRST // 3,
                        group,
                        sum(t for g, t, _ in window if g == group),
                        sum(n for g, _, n in window if g == group),
                    )
                )
        assert shown(db, "R", ["g", "t3", "n3"], 180) == r


# -- 6. errors in the data a view computes ----------------------------------------------------------
def test_an_error_in_a_views_data_names_the_view_and_the_part(scratch) -> None:
    """Failed before: creating the view said only "a Spark job failed: [DIVIDE_BY_ZERO] ..." (no view,
    no part), and a failed step was recorded as "ArithmeticException: ... FROM viewdf_0e06b0cc3266_0"
    (a Java exception's name and an internal temporary view's, still no part)."""
    db = scratch()
    s = stream(db)
    s.append(batch([(0, 0, "p", 5)]))
    failing = "SELECT g, 10 / (v - 5) AS e FROM M[{}]"
    with pytest.raises(
        MaintenanceError, match=rf"^view x, part {FIRST} \(from 2015-01-01 00:00:00\): \[DIVIDE_BY_ZERO\]"
    ):
        db.sql(viewdf("x", failing.format("i"), failing.format("j")))
    assert db.stream_views(helpers=True) == []
    later = "SELECT g, 10 / (v - 7) AS e FROM M[{}]"
    db.sql(viewdf("y", later.format("i"), later.format("j")))
    assert not errors_of(s.append(batch([(1, 0, "p", 6)])))
    result = s.append(batch([(2, 0, "p", 7)]))
    message = result.failed["y"]
    assert message.startswith(f"MaintenanceError: view y, part {FIRST + 2} (from 2015-01-01 00:02:00): ")
    assert "[DIVIDE_BY_ZERO]" in message and "viewdf_" not in message and "Exception" not in message
    assert shown(db, "y", ["g", "e"]) == {(0, "p", 10 / (5 - 7)), (1, "p", 10 / (6 - 7))}


def test_string_functions_in_process_mean_what_spark_means(scratch) -> None:
    db = scratch()
    s = stream(db)
    s.append(batch([(0, 0, "pq", 1)]))
    query = "SELECT g, substr(g, 0, 1) AS head, upper(concat(g, 'ß')) AS shout FROM M[{}]"
    db.sql(viewdf("t", query.format("i"), query.format("j")))
    # 'ß' has no case mapping DuckDB shares with Java: the step is left to Spark (ASCII stays here)
    assert db.stream_view("t").maintenance_history()["executor"].tolist() == ["spark"]
    assert shown(db, "t", ["g", "head", "shout"]) == {(0, "pq", "pq"[0:1], ("pq" + "ß").upper())}


@pytest.mark.parametrize("expression", ["10 DIV (v - 5)", "10 % (v - 5)"])
def test_integer_division_by_zero_in_process_is_an_error_as_on_spark(scratch, expression) -> None:
    db = scratch()
    s = stream(db)
    s.append(batch([(0, 0, "p", 5)]))
    query = f"SELECT g, {expression} AS e FROM M[{{}}]"
    with pytest.raises(MaintenanceError, match=r"_BY_ZERO"):
        db.sql(viewdf("z", query.format("i"), query.format("j")))
