"""Translated pattern and sliding-window views maintained end to end (db.sql, appends, late rows,
retention), against the plain-Python pattern reference and pandas recomputation over the whole
stream."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import arrayviews
from pattern_reference import Pattern, Predicate, pattern_results

EPOCH = 1_420_070_400
SCHEMA = "ts timestamp, src string, dest string, loss int"
GROUPS = [("a", "x"), ("a", "y"), ("b", "x"), ("c", "z")]

PATTERN_VIEW = """CREATE VIEW rising AS
SELECT src, dest, count(*) AS ct, sum(loss) AS total
FROM M PATTERN [a, b, c+]
WHERE a.loss > 10 AND b.loss > a.loss AND c.loss > 10
GROUP BY src, dest"""
REFERENCE = Pattern(
    (("a", False), ("b", False), ("c", True)),
    (
        Predicate("a", "loss", ">", 10),
        Predicate("b", "loss", ">", other="a", other_attribute="loss"),
        Predicate("c", "loss", ">", 10),
    ),
)
SUM_VIEW = """CREATE VIEW recent AS
SELECT src, sum(loss) AS total, count(*) AS n, avg(loss) AS mean FROM M [WINDOW 3 MINUTES]
GROUP BY src HAVING count(*) >= 2"""
MAX_VIEW = """CREATE VIEW peaks AS
SELECT src, max(loss) AS top, min(loss) AS low FROM M [WINDOW 4 MINUTES] GROUP BY src"""


def readings(minutes, seed: int, skip: float = 0.2) -> tuple[pd.DataFrame, pd.DataFrame]:
    """At most one reading per group and minute, losses -5..30: the readings that arrive now, and
    those held back (a share ``skip`` of them) to arrive late."""
    rng = np.random.default_rng(seed)
    rows, held = [], []
    for minute in minutes:
        for src, dest in GROUPS:
            row = (EPOCH + 60 * minute + int(rng.integers(0, 60)), src, dest, int(rng.integers(-5, 31)))
            (held if rng.random() < skip else rows).append(row)
    return _frame(rows), _frame(held)


def _frame(rows: list[tuple], loss_type: str = "int32") -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ts": pd.to_datetime([r[0] for r in rows], unit="s", utc=True),
            "src": [r[1] for r in rows],
            "dest": [r[2] for r in rows],
            "loss": pd.array([r[3] for r in rows], dtype=loss_type),
        }
    )


def _nullable_frame(rows: list[tuple]) -> tuple[pd.DataFrame, pd.Series]:
    """Readings (epoch seconds, src, dest, loss or None) as a frame with nullable losses, and
    each reading's minute from EPOCH."""
    frame = _frame(rows, "Int32")
    minutes = (frame.ts - pd.Timestamp(EPOCH, unit="s", tz="UTC")) // pd.Timedelta(seconds=60)
    return frame, minutes


def with_parts(frames: list[pd.DataFrame]) -> pd.DataFrame:
    rows = pd.concat(frames, ignore_index=True)
    seconds = (rows["ts"] - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)
    return rows.assign(part=seconds // 60)


def stored(db, name: str, columns: list[str]) -> dict[int, set[tuple]]:
    frame = db.stream_view(name).to_pandas()
    result: dict[int, set[tuple]] = {}
    stamps = pd.to_datetime(frame["PART_TIMESTAMP"]).dt.tz_localize(None)
    for stamp, row in zip(stamps, frame[columns].itertuples(index=False, name=None), strict=True):
        part = int((stamp - pd.Timestamp(0)) // pd.Timedelta(seconds=60))
        values = tuple(v.item() if hasattr(v, "item") else v for v in row)
        values = tuple(round(v, 9) if isinstance(v, float) else v for v in values)
        result.setdefault(part, set()).add(values)
    return result


def pattern_reference(rows: pd.DataFrame) -> dict[int, set[tuple]]:
    first, last = int(rows.part.min()), int(rows.part.max())
    parts = []
    for part in range(first, last + 1):
        here = rows[rows.part == part]
        parts.append({(r.src, r.dest): {"loss": int(r.loss)} for r in here.itertuples()})
    results = pattern_results(REFERENCE, parts, ["loss"])
    return {
        first + k: {(g[0], g[1], ct, total) for g, ct, total in found}
        for k, found in enumerate(results)
        if found
    }


def window_reference(rows: pd.DataFrame, width: int, kind: str) -> dict[int, set[tuple]]:
    result = {}
    for part in range(int(rows.part.min()), int(rows.part.max()) + 1):
        window = rows[(rows.part > part - width) & (rows.part <= part)]
        found = set()
        for src, group in window.groupby("src"):
            losses = group.loss.astype(int)
            if kind == "sum" and len(losses) >= 2:
                found.add((src, int(losses.sum()), len(losses), round(float(losses.mean()), 9)))
            elif kind == "max":
                found.add((src, int(losses.max()), int(losses.min())))
        if found:
            result[part] = found
    return result


def assert_same(actual: dict[int, set[tuple]], expected: dict[int, set[tuple]]) -> None:
    assert sorted(actual) == sorted(expected)
    for part, rows in expected.items():
        assert sorted(actual[part], key=repr) == sorted(rows, key=repr), f"part {part}"


@pytest.fixture()
def db(spark, tmp_path):
    return arrayviews.connect(str(tmp_path / "warehouse"), spark=spark)


def executors(results) -> set[str]:
    """The executors the maintenance steps report (steps that built nothing report none)."""
    return {r.executor for r in results if r.executor is not None}


def check_all(db, frames: list[pd.DataFrame]) -> None:
    rows = with_parts(frames)
    assert_same(stored(db, "rising", ["src", "dest", "ct", "total"]), pattern_reference(rows))
    assert_same(stored(db, "recent", ["src", "total", "n", "mean"]), window_reference(rows, 3, "sum"))
    assert_same(stored(db, "peaks", ["src", "top", "low"]), window_reference(rows, 4, "max"))


@pytest.mark.slow  # about 60 part builds
@pytest.mark.parametrize("plan", ["INCREMENTAL", "RECOMPUTE"])
def test_translated_views_backfill_follow_appends_and_late_rows(db, plan: str) -> None:
    """Both plans of the window views (the pattern view has one) against the references."""
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    now, held_early = readings(range(0, 6), seed=1)
    frames = [now]
    stream.append(now)
    db.create_stream_view(PATTERN_VIEW, lateness_parts=1)
    for text in (SUM_VIEW, MAX_VIEW):
        db.create_stream_view(text.replace(" AS\nSELECT", f" USING {plan} AS\nSELECT", 1), lateness_parts=1)
    helpers = set(db.stream_views(helpers=True)) - set(db.stream_views())
    # every view is one table: the pattern view, a subtractable window (recent) and one with
    # min/max (peaks, a monotonic queue per group in its incremental plan)
    assert helpers == set()
    assert db.stream_view("rising").status()["first"] == EPOCH // 60  # backfilled from the oldest part
    check_all(db, frames)
    held = [held_early]
    for minutes, seed in ((range(6, 8), 2), (range(8, 9), 3)):
        now, later = readings(minutes, seed)
        frames.append(now)
        held.append(later)
        stream.append(now)
    check_all(db, frames)
    # the held-back readings arrive late: some a part or two back (within the allowance), some
    # several parts back (beyond it)
    late = pd.concat(held, ignore_index=True)
    assert len(late) and late.ts.min() < pd.Timestamp((EPOCH // 60 + 5) * 60, unit="s", tz="UTC")
    frames.append(late)
    result = stream.append(late)
    assert result.late_parts
    assert any(m.recomputed for m in result.maintenance)
    # one-table views keep all their parts and recompute them (a helper that dropped the parts
    # such rows need is rebuilt: tests/test_bounded_history.py)
    assert not any(m.rebuilt for m in result.maintenance)
    assert any(m.view == "rising" and m.recomputed for m in result.maintenance)
    assert executors(result.maintenance) == {"local"}  # small parts: auto builds them in-process
    assert all("predicted in-process" in m.executor_reason for m in result.maintenance if m.executor)
    check_all(db, frames)
    # rows older than the stream's first part: translated views start again from the new oldest part
    early, _ = readings([-2], seed=5, skip=0.0)
    frames.append(early)
    stream.append(early)
    check_all(db, frames)
    assert db.stream_view("rising").status()["first"] == EPOCH // 60 - 2


@pytest.mark.slow
def test_subtractable_window_float_sums_are_exact(db_on) -> None:
    """One 1e17 reading, then readings of 1.5: once the 1e17 reading has left the window the sum is
    math.fsum of the window (it was 0.0 when cumulative float sums were subtracted); an infinity
    that leaves the window no longer counts. Reference: math.fsum over each window's readings.
    In-process and on Spark."""
    db, executor = db_on
    stream = db.create_stream("F", "ts timestamp, g string, y double", 60, "ts")
    values = [1e17, 1.5, 1e-10, 1.5, 1.5, float("inf"), 1.5, -1e16, 1.5, 2.25, 1.5]
    rows = pd.DataFrame(
        {
            "ts": pd.to_datetime([EPOCH + 60 * k for k in range(len(values))], unit="s", utc=True),
            "g": ["a"] * len(values),
            "y": values,
        }
    )
    stream.append(rows.iloc[:6])
    db.create_stream_view(
        "CREATE VIEW FW AS SELECT g, sum(y) AS s, avg(y) AS m FROM F [WINDOW 3 MINUTES] GROUP BY g"
    )
    result = stream.append(rows.iloc[6:])
    assert executors(result.maintenance) == {executor}
    frame = db.stream_view("FW").to_pandas()
    stamps = pd.to_datetime(frame["PART_TIMESTAMP"]).dt.tz_localize(None)
    parts = ((stamps - pd.Timestamp(EPOCH, unit="s")) // pd.Timedelta(seconds=60)).tolist()
    assert sorted(parts) == list(range(len(values)))
    for part, total, mean in zip(parts, frame["s"], frame["m"], strict=True):
        window = values[max(0, part - 2) : part + 1]
        expected = float("inf") if float("inf") in window else math.fsum(window)
        assert total == expected, (part, window, total)
        assert mean == expected / len(window)
    # the case: after 1e17 left, [1.5, 1e-10, 1.5] (cumulative float sums gave 0.0 here)
    assert frame["s"][parts.index(3)] == math.fsum([1.5, 1e-10, 1.5]) != 0.0


# -- sums that must not wrap ------------------------------------------------------------------------
def _rows(schema: pa.Schema, rows: list[tuple[int, str, object]]) -> pa.Table:
    """Rows (minute, group, value) as an Arrow table of ``schema`` (ts, g, x)."""
    stamps = [pd.Timestamp((EPOCH // 60 + minute) * 60, unit="s", tz="UTC") for minute, _, _ in rows]
    return pa.table(
        [pa.array(stamps, schema.field("ts").type), [g for _, g, _ in rows], [x for _, _, x in rows]],
        schema=schema,
    )


BIG_SUMS = """CREATE VIEW big AS SELECT g, count(*) AS ct, sum(x) AS total
FROM N PATTERN [a, b+] WHERE a.x > 0 GROUP BY g"""


def test_pattern_sums_of_bigints_near_2_63_are_exact(db_on) -> None:
    """Sums of BIGINT readings near 2**63 are kept as DECIMAL(38,0): exact, as Python integers
    (in-process and on Spark)."""
    db, executor = db_on
    schema = pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("g", pa.string()), ("x", pa.int64())])
    stream = db.create_stream("N", "ts timestamp, g string, x bigint", 60, "ts")
    top, bottom = 2**63 - 1, -(2**63)
    values = {
        "p": [top, top - 1, top, 5, top],
        "q": [top, bottom, bottom, top, None],
        "r": [1, top, top, top, top],
    }
    rows = [(m, g, v) for g, column in values.items() for m, v in enumerate(column) if v is not None]
    stream.append(_rows(schema, [r for r in rows if r[0] < 2]))
    db.sql(BIG_SUMS)
    result = stream.append(_rows(schema, [r for r in rows if r[0] >= 2]))
    assert executors(result.maintenance) == {executor}
    parts = [{g: {"x": column[m]} for g, column in values.items() if column[m] is not None} for m in range(5)]
    pattern = Pattern((("a", False), ("b", True)), (Predicate("a", "x", ">", 0),))
    expected = {
        EPOCH // 60 + k: found for k, found in enumerate(pattern_results(pattern, parts, ["x"])) if found
    }
    assert max(total for found in expected.values() for _, _, total in found) > 2**64  # beyond BIGINT
    got = stored(db, "big", ["g", "ct", "total"])
    assert {p: {(g, int(ct), int(total)) for g, ct, total in rows} for p, rows in got.items()} == expected


def test_pattern_sum_overflow_is_an_error_naming_the_view_attribute_and_group(db_on) -> None:
    """DECIMAL(38,0) readings whose sum leaves DECIMAL(38,0): the view's maintenance fails with an
    error naming the view, the attribute and the group, every time, and the view keeps its parts
    (never a wrapped or null sum, never a Java trace); the same message in-process and on Spark."""
    db, _ = db_on
    schema = pa.schema(
        [("ts", pa.timestamp("us", tz="UTC")), ("g", pa.string()), ("x", pa.decimal128(38, 0))]
    )
    stream = db.create_stream("N", "ts timestamp, g string, x decimal(38,0)", 60, "ts")
    huge = Decimal(6 * 10**37)
    stream.append(_rows(schema, [(0, "big", huge), (0, "small", Decimal(1))]))
    db.sql(BIG_SUMS)
    view = db.stream_view("big")
    before = view.status()
    wanted = "pattern view big: sum(x) overflows decimal(38,0) for group g=big"
    # the append commits and reports the failed view (a failed view never makes an append raise:
    # its batch is in, and a retry would append it twice); a retry of the maintenance fails again
    result = stream.append(_rows(schema, [(1, "big", huge), (1, "small", Decimal(2))]))
    assert any(wanted in message for message in result.failed.values()), result.failed

    def unchanged() -> None:  # the view keeps its parts and state, and says why it failed
        status = view.status()
        assert wanted in status.pop("failed")
        assert status == {k: v for k, v in before.items() if k != "failed"}

    unchanged()
    stream.append(_rows(schema, [(2, "big", huge), (2, "small", Decimal(2))]))
    retried = db.maintain_streams(retry_failed=True)
    assert any(r.error is not None and wanted in r.error for r in retried), retried
    unchanged()
    assert stream.part_range() == (EPOCH // 60, EPOCH // 60 + 2)  # the appends themselves happened


# -- NULL group keys and quoted strings, on both executors ---------------------------------------------
QUOTED = r"""CREATE VIEW quoted AS
INITIALIZE quoted[i] AS SELECT src, loss FROM Q[i] WHERE src <> 'it\'s' OR src IS NULL
UPDATE quoted[j] AS SELECT src, loss FROM Q[j] WHERE src <> 'it\'s' OR src IS NULL
PARTITION LENGTH 60"""


def test_null_group_keys_and_strings_with_quotes(db_on) -> None:
    """A window view grouping by a column with NULLs and quote characters, and a hand-written view
    filtering on a literal with an escaped quote: the same parts in-process and on Spark, against
    pandas (NULL keys form one group; Spark's backslash escape means a quote)."""
    db, executor = db_on
    names = [None, "it's", 'say "hi"', "a\\b"]
    stream = db.create_stream("Q", SCHEMA, 60, "ts")
    rows = [(EPOCH + 60 * m + k, names[(m + k) % 4], "x", 3 * m + k) for m in range(4) for k in range(3)]
    frame = _frame(rows)
    stream.append(frame[frame.ts < pd.Timestamp(EPOCH + 60, unit="s", tz="UTC")])
    db.sql(
        "CREATE VIEW qsum AS SELECT src, sum(loss) AS total, count(*) AS n FROM Q [WINDOW 2 MINUTES] GROUP BY src"
    )
    db.sql(QUOTED)
    result = stream.append(frame[frame.ts >= pd.Timestamp(EPOCH + 60, unit="s", tz="UTC")])
    assert executors(result.maintenance) == {executor}
    parts = with_parts([frame])
    expected: dict[int, set[tuple]] = {}
    for part in range(int(parts.part.min()), int(parts.part.max()) + 1):
        window = parts[(parts.part > part - 2) & (parts.part <= part)]
        for src, group in window.groupby("src", dropna=False):
            key = None if pd.isna(src) else src
            expected.setdefault(part, set()).add((key, int(group.loss.sum()), len(group)))
    got = stored(db, "qsum", ["src", "total", "n"])
    got = {p: {(None if pd.isna(s) else s, t, n) for s, t, n in found} for p, found in got.items()}
    assert got == expected
    assert any(key is None for found in expected.values() for key, _, _ in found)
    kept = parts[parts.src != "it's"]
    quoted = stored(db, "quoted", ["src", "loss"])
    assert {(None if pd.isna(s) else s, v) for found in quoted.values() for s, v in found} == {
        (None if pd.isna(s) else s, int(v)) for s, v in kept[["src", "loss"]].itertuples(index=False)
    }


def test_a_group_read_several_times_in_a_part_counts_its_first_reading_nulls_first(db_on) -> None:
    """A pattern reads one row per group and part: the first in the order of the attributes read,
    NULLs first (a group with a null reading in a part has a null there). Several readings per
    group and part, some null, in-process and on Spark, against the plain-Python reference fed
    that row."""
    db, executor = db_on
    rng = np.random.default_rng(11)
    rows = []
    for minute in range(14):
        for src, dest in GROUPS:
            for _ in range(int(rng.integers(1, 4))):
                loss = None if rng.random() < 0.1 else int(rng.integers(5, 41))
                rows.append((EPOCH + 60 * minute + int(rng.integers(0, 60)), src, dest, loss))
    frame, minutes = _nullable_frame(rows)
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(frame[minutes < 3])
    db.sql(PATTERN_VIEW)
    result = stream.append(frame[minutes >= 3])
    assert executors(result.maintenance) == {executor}

    def reference(nulls_first: bool) -> dict[int, set[tuple]]:
        parts = []
        for minute in range(14):
            first: dict[tuple, int | None] = {}
            for _, src, dest, loss in (r for r in rows if (r[0] - EPOCH) // 60 == minute):
                key = (src, dest)
                if key not in first:
                    first[key] = loss
                elif loss is None or first[key] is None:
                    first[key] = None if nulls_first else (loss if first[key] is None else first[key])
                else:
                    first[key] = min(first[key], loss)
            parts.append({key: {"loss": loss} for key, loss in first.items()})
        return {
            EPOCH // 60 + k: {(g[0], g[1], ct, total) for g, ct, total in found}
            for k, found in enumerate(pattern_results(REFERENCE, parts, ["loss"]))
            if found
        }

    expected = reference(nulls_first=True)
    assert expected and expected != reference(nulls_first=False)  # the nulls decide some matches
    assert_same(stored(db, "rising", ["src", "dest", "ct", "total"]), expected)


VALLEY_VIEW = """CREATE VIEW valley AS
SELECT src, dest, count(*) AS ct, sum(loss) AS total
FROM M PATTERN [a, b+, c]
WHERE a.loss >= 20 AND b.loss < 8 AND c.loss >= 20
GROUP BY src, dest"""
VALLEY = Pattern(
    (("a", False), ("b", True), ("c", False)),
    (Predicate("a", "loss", ">=", 20), Predicate("b", "loss", "<", 8), Predicate("c", "loss", ">=", 20)),
)


def test_a_pattern_whose_variables_test_different_conditions_keeps_every_match(db_on) -> None:
    """The Helper's step joins only the rows some edge can take (a row passing one variable's own
    condition or another's); with a different condition per variable, a high reading that starts
    or ends a match and a low one that extends it must all reach the join. Null readings take no
    edge, a missing one breaks the group's sequence. In-process and on Spark, against the
    plain-Python reference."""
    db, executor = db_on
    rng = np.random.default_rng(23)
    rows = []
    for minute in range(40):
        for src, dest in [*GROUPS, ("d", "w"), ("e", "v")]:
            if rng.random() < 0.05:
                continue
            loss = None if rng.random() < 0.04 else int(rng.choice([2, 5, 12, 20, 27]))
            rows.append((EPOCH + 60 * minute + int(rng.integers(0, 60)), src, dest, loss))
    frame, minutes = _nullable_frame(rows)
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(frame[minutes < 2])
    db.sql(VALLEY_VIEW)
    stream.append(frame[(minutes >= 2) & (minutes < 20)])
    result = stream.append(frame[minutes >= 20])
    assert executors(result.maintenance) == {executor}
    parts = []
    for minute in range(40):
        here = [r for r in rows if (r[0] - EPOCH) // 60 == minute]
        parts.append({(src, dest): {"loss": loss} for _, src, dest, loss in here})
    expected = {
        EPOCH // 60 + k: {(g[0], g[1], ct, total) for g, ct, total in found}
        for k, found in enumerate(pattern_results(VALLEY, parts, ["loss"]))
        if found
    }
    # several matches, some of them with more than one low reading
    assert sum(len(found) for found in expected.values()) >= 8
    assert any(ct > 3 for found in expected.values() for _, _, ct, _ in found)
    assert_same(stored(db, "valley", ["src", "dest", "ct", "total"]), expected)
