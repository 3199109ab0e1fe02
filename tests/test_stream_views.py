"""Hand-written ViewDF stream views (paper 004, sections 2 and 4) against naive references.

Every reference recomputes each view part from the whole stream with pandas (never with the code
under test): the paper's Helper/View2 pair as run lengths of consecutive high readings, a sliding
window over the last three parts, hourly sums over a minute stream. The view's rows, grouped by
their PART_TIMESTAMP, must equal the reference part by part (sorted row sets, integers exact),
after new parts, after late rows (section 4.3) and after retention drops old helper parts. Errors
and injected crashes must leave streams and views as they were.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from urllib.parse import urlparse

import pandas as pd
import pytest

import arrayviews
from arrayviews.execution.part_jobs import SparkPartTable as PartTable
from arrayviews.language.parser import parse_statement
from arrayviews.model.errors import AlreadyExistsError, NotFoundError, ParseError, ValidationError
from arrayviews.model.faults import InjectedFault, inject

EPOCH = 1_420_070_400  # 2015-01-01 00:00:00 UTC (the paper's example day), a whole hour
M0 = EPOCH // 60  # part of M holding minute 0 (23667840 in the paper)
H0 = EPOCH // 3600  # hourly part holding hour 0 (394464 in the paper)
SCHEMA = "ts timestamp, src string, dest string, loss int"
PAIRS = {
    "A": ("10.0.0.1", "192.168.0.1"),
    "B": ("10.0.0.2", "192.168.0.2"),
    "C": ("10.0.0.3", "192.168.0.3"),
    "D": ("10.0.0.4", "192.168.0.4"),
}


def helper_text(name: str = "Helper", source: str = "M") -> str:
    """The paper's Helper (section 2), with the join condition the paper leaves implicit."""
    return f"""CREATE VIEW {name} AS
INITIALIZE {name}[i] AS
  SELECT src, dest, 1 AS ct, loss AS sum_loss
  FROM {source}[i]
  WHERE loss > 10
UPDATE {name}[j] AS
  SELECT src, dest, coalesce(ct, 0) + 1 AS ct, coalesce(sum_loss, 0) + loss AS sum_loss
  FROM (
    SELECT New.src AS src, New.dest AS dest, Prev.ct AS ct, Prev.sum_loss AS sum_loss,
           New.loss AS loss
    FROM {source}[j] AS New
    LEFT OUTER JOIN {name}[j-1] AS Prev ON New.src = Prev.src AND New.dest = Prev.dest
    WHERE New.loss > 10)
PARTITION LENGTH 60"""


VIEW2 = """CREATE VIEW View2 AS
INITIALIZE View2[i] AS
  SELECT src, dest, ct, sum_loss
  FROM Helper[i]
  WHERE ct >= 4
UPDATE View2[j] AS
  SELECT src, dest, ct, sum_loss
  FROM Helper[j]
  WHERE ct >= 4
PARTITION LENGTH 60"""

RECENT = """CREATE VIEW Recent AS
INITIALIZE Recent[i] AS SELECT src, sum(loss) AS total, count(*) AS n FROM M[i-2 .. i] GROUP BY src
UPDATE Recent[j] AS SELECT src, sum(loss) AS total, count(*) AS n FROM M[j-2 .. j] GROUP BY src
PARTITION LENGTH 60"""


def hourly_text(name: str, low: str, high: str) -> str:
    return f"""CREATE VIEW {name} AS
INITIALIZE {name}[i] AS
  SELECT src, dest, sum(loss) AS sum_loss, count(*) AS n FROM M[{low.replace("@", "i")} .. {high.replace("@", "i")}]
  GROUP BY src, dest
UPDATE {name}[j] AS
  SELECT src, dest, sum(loss) AS sum_loss, count(*) AS n FROM M[{low.replace("@", "j")} .. {high.replace("@", "j")}]
  GROUP BY src, dest
PARTITION LENGTH 3600"""


# -- data -----------------------------------------------------------------------------------------
def batch(rows: list[tuple[int, str, int]]) -> pd.DataFrame:
    """Readings (minute relative to EPOCH, pair key, loss), each some seconds into its minute."""
    offsets = {"A": 0, "B": 17, "C": 42, "D": 59}
    return pd.DataFrame(
        {
            "ts": pd.to_datetime([EPOCH + 60 * m + offsets[p] for m, p, _ in rows], unit="s", utc=True),
            "src": [PAIRS[p][0] for _, p, _ in rows],
            "dest": [PAIRS[p][1] for _, p, _ in rows],
            "loss": [loss for _, _, loss in rows],
        }
    )


def network(minutes, missing: tuple[int, ...] = ()) -> pd.DataFrame:
    """One reading per pair and minute: A always high, B low every fourth minute, C high but without
    readings in the ``missing`` minutes (late rows fill them), D always low."""
    rows = []
    for m in minutes:
        rows.append((m, "A", 20 + m))
        rows.append((m, "B", 3 if m % 4 == 3 else 30 + m))
        if m not in missing:
            rows.append((m, "C", 11 + m % 3))
        rows.append((m, "D", 5))
    return batch(rows)


def late_c(*minutes: int) -> pd.DataFrame:
    return batch([(m, "C", 50) for m in minutes])


class Truth:
    """Every row appended to the stream, kept in pandas for the references."""

    def __init__(self) -> None:
        self.frames: list[pd.DataFrame] = []

    def add(self, frame: pd.DataFrame) -> pd.DataFrame:
        self.frames.append(frame)
        return frame

    def rows(self, length: int = 60) -> pd.DataFrame:
        rows = pd.concat(self.frames, ignore_index=True)
        seconds = (rows["ts"] - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)
        return rows.assign(part=seconds // length)


# -- naive references -----------------------------------------------------------------------------
def run_lengths(rows: pd.DataFrame, first: int, last: int) -> dict[int, list[tuple]]:
    """Helper as the paper means it: per part p and pair with a high reading (loss > 10) at p, the
    number and loss sum of the consecutive high readings ending at p, counted from part ``first``
    (the part the view was initialised at; earlier history is not seen)."""
    readings: dict[tuple[str, str, int], int] = {}
    for src, dest, part, loss in rows[["src", "dest", "part", "loss"]].itertuples(index=False):
        assert (src, dest, int(part)) not in readings, "the reference needs one reading per pair and part"
        readings[(src, dest, int(part))] = int(loss)
    result: dict[int, list[tuple]] = {}
    for (src, dest, part), loss in readings.items():
        if not first <= part <= last or loss <= 10:
            continue
        count, total, k = 0, 0, part
        while k >= first and readings.get((src, dest, k), 0) > 10:
            count, total, k = count + 1, total + readings[(src, dest, k)], k - 1
        result.setdefault(part, []).append((src, dest, count, total))
    return {p: sorted(r) for p, r in sorted(result.items())}


def at_least(reference: dict[int, list[tuple]], count: int = 4) -> dict[int, list[tuple]]:
    """View2 from the Helper reference: pairs with ct >= 4."""
    kept = {p: [r for r in rows if r[2] >= count] for p, rows in reference.items()}
    return {p: rows for p, rows in kept.items() if rows}


def windows(rows: pd.DataFrame, first: int, last: int, width: int = 3) -> dict[int, list[tuple]]:
    """Per part p and src: loss sum and count of the rows of parts p-width+1 .. p."""
    result = {}
    for part in range(first, last + 1):
        chosen = rows[(rows["part"] > part - width) & (rows["part"] <= part)]
        grouped = chosen.groupby("src")["loss"].agg(["sum", "count"])
        found = sorted((src, int(s), int(n)) for src, (s, n) in grouped.iterrows())
        if found:
            result[part] = found
    return result


def hours(rows: pd.DataFrame, first: int, last: int, low: int, high: int) -> dict[int, list[tuple]]:
    """Per hourly part h and pair: loss sum and count of the minute parts h*60+low .. h*60+high."""
    result = {}
    for hour in range(first, last + 1):
        chosen = rows[(rows["part"] >= hour * 60 + low) & (rows["part"] <= hour * 60 + high)]
        grouped = chosen.groupby(["src", "dest"])["loss"].agg(["sum", "count"])
        found = sorted((s, d, int(t), int(n)) for (s, d), (t, n) in grouped.iterrows())
        if found:
            result[hour] = found
    return result


def restricted(reference: dict[int, list[tuple]], low: int) -> dict[int, list[tuple]]:
    return {p: r for p, r in reference.items() if p >= low}


# -- reading views --------------------------------------------------------------------------------
def _plain(value):
    return value.item() if hasattr(value, "item") else value


def by_part(frame: pd.DataFrame, length: int, columns: list[str], integers: list[str]) -> dict[int, list]:
    """The rows of a view (with PART_TIMESTAMP) as part number -> sorted row tuples."""
    if frame.empty:
        return {}
    for column in integers:
        assert frame[column].dtype.kind in "iu", f"{column} is {frame[column].dtype}, not an integer"
    stamps = pd.to_datetime(frame["PART_TIMESTAMP"])
    stamps = stamps.dt.tz_localize("UTC") if stamps.dt.tz is None else stamps.dt.tz_convert("UTC")
    seconds = (stamps - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)
    result: dict[int, list] = {}
    for second, row in zip(seconds, frame[columns].itertuples(index=False, name=None), strict=True):
        assert second % length == 0, f"PART_TIMESTAMP {second} is not the start of a part"
        result.setdefault(int(second) // length, []).append(tuple(_plain(v) for v in row))
    return {p: sorted(r) for p, r in sorted(result.items())}


HELPER_COLUMNS = (["src", "dest", "ct", "sum_loss"], ["ct", "sum_loss"])
RECENT_COLUMNS = (["src", "total", "n"], ["total", "n"])
HOURLY_COLUMNS = (["src", "dest", "sum_loss", "n"], ["sum_loss", "n"])


def helper_and_reader(spark, path, truth: Truth, execution: str = "local", reader: str = VIEW2):
    """A warehouse at ``path`` with stream M (two minutes of readings, kept in ``truth``), the
    Helper view and ``reader`` over it, maintained on ``execution``; (database, stream)."""
    import arrayviews

    db = arrayviews.connect(str(path), spark=spark, execution=execution)
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(truth.add(network(range(2))))
    db.sql(helper_text())
    db.sql(reader)
    return db, stream


def contents(db, name: str, columns=HELPER_COLUMNS, length: int = 60) -> dict[int, list]:
    return by_part(db.stream_view(name).to_pandas(), length, *columns)


def folder_files(table: PartTable) -> set[str]:
    folder = Path(urlparse(table.data_directory).path)
    return {p.name for p in folder.rglob("*") if p.is_file()} if folder.exists() else set()


def snapshot(db) -> dict:
    """Everything an error or a crash must leave unchanged: tables, versions, view states and files."""
    catalog = db.warehouse.catalog
    tables = sorted(".".join(t) for t in catalog.list_tables("streams"))
    state = {"tables": tables}
    for identifier in tables:
        table = PartTable.open(catalog, "streams", identifier.split(".")[-1])
        state[identifier] = (
            table.current_version(),
            table.latest_properties(),
            sorted(table.all_files()),
            folder_files(table),
        )
    return state


def new_database(tmp_path_factory, spark, label: str):
    return arrayviews.connect(str(tmp_path_factory.mktemp(label) / "warehouse"), spark=spark)


# -- 1 and 8: the paper's Helper and View2 ----------------------------------------------------------
@pytest.fixture(scope="module")
def paper(spark, tmp_path_factory):
    """Minutes 0-2 in M, then Helper (initialised at minute 2) and View2 over it, then minutes 3-5
    (C without a reading in minute 4) in one batch and minute 6 in another.

    The late-rows test appends C's minute 4 to this same stream (recording it in ``truth``); the
    other tests compare with references computed from ``truth`` when they run, so they hold before
    and after it.
    """
    db = new_database(tmp_path_factory, spark, "paper")
    truth = Truth()
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(truth.add(network(range(3))))
    helper = db.sql(helper_text())
    view2 = db.sql(VIEW2)
    created = (helper.status(), view2.status())
    appended = [
        stream.append(truth.add(network(range(3, 6), missing=(4,)))),
        stream.append(truth.add(network([6]))),
    ]
    return db, truth, created, appended


def test_helper_and_view2_equal_run_lengths_from_the_newest_part_at_creation(paper) -> None:
    db, truth, (helper_created, view2_created), appended = paper
    # a hand-written ViewDF starts at the newest part existing at creation (paper 4.1)
    assert (helper_created["first"], helper_created["next"]) == (M0 + 2, M0 + 3)
    assert (view2_created["first"], view2_created["next"]) == (M0 + 2, M0 + 3)
    assert [(r.view, r.built, r.recomputed) for r in appended[0].maintenance] == [
        ("Helper", [M0 + 3, M0 + 4, M0 + 5], []),
        ("View2", [M0 + 3, M0 + 4, M0 + 5], []),
    ]
    assert [(r.view, r.built) for r in appended[1].maintenance] == [
        ("Helper", [M0 + 6]),
        ("View2", [M0 + 6]),
    ]
    reference = run_lengths(truth.rows(), M0 + 2, M0 + 6)
    assert contents(db, "Helper") == reference
    assert contents(db, "View2") == at_least(reference)
    # minutes 0 and 1 are not seen: A's run at minute 6 counts minutes 2..6
    assert (*PAIRS["A"], 5, sum(20 + m for m in range(2, 7))) in reference[M0 + 6]
    assert contents(db, "View2")  # the reference is not trivially empty
    status = db.stream_view("View2").status()
    assert (status["first"], status["next"], status["retained"]) == (M0 + 2, M0 + 7, M0 + 2)
    assert status["seen"] == {"Helper": db.stream_view("Helper").status()["version"]}
    assert list(db.stream_view("Helper").parts()) == list(range(M0 + 2, M0 + 7))
    assert db.stream_views() == ["Helper", "View2"]  # as created (lower case before round 27)


def test_reading_one_part_and_querying_through_sql(paper) -> None:
    db, truth, _, _ = paper
    reference = at_least(run_lengths(truth.rows(), M0 + 2, M0 + 6))
    one = by_part(db.stream_view("View2").to_pandas(part=M0 + 5), 60, *HELPER_COLUMNS)
    assert one == {M0 + 5: reference[M0 + 5]}

    frame = db.sql("SELECT * FROM View2 WHERE PART_TIMESTAMP = '2015-01-01 00:05:00'").toPandas()
    assert list(frame.columns) == ["src", "dest", "ct", "sum_loss", "PART_TIMESTAMP"]
    assert by_part(frame, 60, *HELPER_COLUMNS) == {M0 + 5: reference[M0 + 5]}

    # a timestamp literal without seconds names the same instant
    frame = db.sql("SELECT * FROM View2 WHERE PART_TIMESTAMP = timestamp'2015-01-01 00:05'").toPandas()
    assert by_part(frame, 60, *HELPER_COLUMNS) == {M0 + 5: reference[M0 + 5]}

    rows = truth.rows()
    totals = db.sql(
        "SELECT src, dest, count(*) AS n, sum(loss) AS total FROM M WHERE loss > 10 GROUP BY src, dest"
    ).toPandas()
    high = rows[rows["loss"] > 10].groupby(["src", "dest"])["loss"].agg(["count", "sum"])
    assert sorted((s, d, int(n), int(t)) for s, d, n, t in totals.itertuples(index=False)) == sorted(
        (s, d, int(n), int(t)) for (s, d), (n, t) in high.iterrows()
    )
    minute = db.sql("SELECT src, loss FROM M WHERE PART_TIMESTAMP = '2015-01-01 00:04:00'").toPandas()
    expected = rows[rows["part"] == M0 + 4]
    assert sorted(minute.itertuples(index=False, name=None)) == sorted(
        (s, int(v)) for s, v in expected[["src", "loss"]].itertuples(index=False, name=None)
    )


# -- 4: late rows, views over views, self-references ------------------------------------------------
def test_late_rows_recompute_dependent_parts_downstream(paper) -> None:
    db, truth, _, _ = paper
    stream = db.stream("M")
    helper_before = db.stream_view("Helper").last_updated().set_index("part")["updated"]
    view2_before = db.stream_view("View2").last_updated().set_index("part")["updated"]
    stream_version = stream.version

    # C's reading of minute 4 arrives late: Helper[4] reads it, Helper[5..6] read Helper[j-1] (all
    # later parts), View2[4..6] read those
    result = stream.append(truth.add(late_c(4)))
    assert result.version == stream_version + 1
    assert result.late_parts == [M0 + 4]
    late = [M0 + 4, M0 + 5, M0 + 6]
    assert [(r.view, r.built, r.recomputed, r.rebuilt) for r in result.maintenance] == [
        ("Helper", [], late, False),
        ("View2", [], late, False),
    ]
    reference = run_lengths(truth.rows(), M0 + 2, M0 + 6)
    assert contents(db, "Helper") == reference
    assert contents(db, "View2") == at_least(reference)
    # minutes 2..6 of C are now one run (they were two before)
    assert (*PAIRS["C"], 5, 13 + 11 + 50 + 13 + 11) in reference[M0 + 6]

    for name, before in (("Helper", helper_before), ("View2", view2_before)):
        after = db.stream_view(name).last_updated().set_index("part")["updated"]
        assert list(after.index) == list(range(M0 + 2, M0 + 7))
        assert [p for p in after.index if after[p] > before[p]] == late
        assert all(after[p] == before[p] for p in (M0 + 2, M0 + 3))
    assert db.maintain_streams() == []  # nothing more to do


# -- 2: a sliding window written by hand ------------------------------------------------------------
def test_sliding_window_over_a_part_range_with_late_rows(db_on) -> None:
    """In-process and on Spark: the same parts, built where the step reports."""
    db, executor = db_on
    truth = Truth()
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(truth.add(network(range(3), missing=(1,))))
    view = db.sql(RECENT)
    assert (view.status()["first"], view.status()["next"]) == (M0 + 2, M0 + 3)
    result = stream.append(truth.add(network(range(3, 6), missing=(4,))))
    assert [(r.view, r.built) for r in result.maintenance] == [("Recent", [M0 + 3, M0 + 4, M0 + 5])]
    assert contents(db, "Recent", RECENT_COLUMNS) == windows(truth.rows(), M0 + 2, M0 + 5)
    rows_before_late = truth.rows()

    # late rows in part 1 (before the first part) change the first part (its INITIALIZE reads parts
    # 0..2) and part 3 (its window is 1..3), not parts 4 and 5
    before = view.last_updated().set_index("part")["updated"]
    result = stream.append(truth.add(late_c(1)))
    assert result.late_parts == [M0 + 1]
    assert [(r.view, r.built, r.recomputed) for r in result.maintenance] == [("Recent", [], [M0 + 2, M0 + 3])]
    assert [r.executor for r in result.maintenance] == [executor]
    assert contents(db, "Recent", RECENT_COLUMNS) == windows(truth.rows(), M0 + 2, M0 + 5)
    after = view.last_updated().set_index("part")["updated"]
    assert [after[p] > before[p] for p in range(M0 + 2, M0 + 6)] == [True, True, False, False]

    # every step's report is kept with its version: parts written, where, the estimate (cells of
    # the stream rows read: 4 columns per row of parts p-2..p, counted from the appended rows)
    history = view.maintenance_history().set_index("version")
    assert list(history.index) == [1, 2, 3]
    assert history.loc[2, "parts_written"] == [M0 + 3, M0 + 4, M0 + 5]
    assert history.loc[3, "parts_written"] == [M0 + 2, M0 + 3]
    assert set(history["executor"]) == {executor}
    for version, rows in ((2, rows_before_late), (3, truth.rows())):
        parts = history.loc[version, "parts"]
        assert [p["part"] for p in parts] == history.loc[version, "parts_written"]
        for report in parts:
            read = rows["part"].between(report["part"] - 2, report["part"]).sum()
            assert (report["executor"], report["cells"]) == (executor, 4 * int(read))
            assert report["seconds"] > 0 and report["predicted_seconds"] > 0
        assert history.loc[version, "measured_seconds"] >= history.loc[version, "build_seconds"] > 0


# -- 3: an hourly view over a minute stream -----------------------------------------------------------
def test_hourly_view_is_built_once_its_minutes_are_complete(db) -> None:
    truth = Truth()
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    # minutes -1 (the hour before), 0, 10 and 59 of hour 0
    stream.append(truth.add(batch([(-1, "A", 7), (0, "A", 1), (0, "B", 2), (10, "A", 30), (59, "B", 40)])))
    aligned = db.sql(hourly_text("Hourly", "@*60", "@*60+59"))
    paper_form = db.sql(hourly_text("Hourly3", "@*60-59", "@*60"))  # the paper's View3 (section 4.2)
    assert aligned.partition_length == 3600
    assert (aligned.status()["first"], aligned.status()["next"]) == (H0, H0 + 1)
    assert contents(db, "Hourly", HOURLY_COLUMNS, 3600) == hours(truth.rows(), H0, H0, 0, 59)
    assert contents(db, "Hourly3", HOURLY_COLUMNS, 3600) == hours(truth.rows(), H0, H0, -59, 0)

    # minutes 0 and 30 of hour 1: hour 1 is not complete, so it is not built
    result = stream.append(truth.add(batch([(60, "A", 3), (90, "B", 4)])))
    assert "Hourly" not in [r.view for r in result.maintenance]
    assert list(aligned.parts()) == [H0]
    # the last minute of hour 1 completes it
    result = stream.append(truth.add(batch([(119, "A", 5)])))
    assert [(r.view, r.built) for r in result.maintenance if r.view == "Hourly"] == [("Hourly", [H0 + 1])]
    assert contents(db, "Hourly", HOURLY_COLUMNS, 3600) == hours(truth.rows(), H0, H0 + 1, 0, 59)
    held = paper_form.parts()
    assert contents(db, "Hourly3", HOURLY_COLUMNS, 3600) == hours(
        truth.rows(), held.start, held.stop - 1, -59, 0
    )

    # a late reading of minute 30 changes hour 0 of Hourly and hour 1 of the paper's form
    result = stream.append(truth.add(batch([(30, "B", 9)])))
    assert sorted((r.view, r.built, r.recomputed) for r in result.maintenance) == [
        ("Hourly", [], [H0]),
        ("Hourly3", [], [H0 + 1]),
    ]
    assert contents(db, "Hourly", HOURLY_COLUMNS, 3600) == hours(truth.rows(), H0, H0 + 1, 0, 59)
    assert contents(db, "Hourly3", HOURLY_COLUMNS, 3600) == hours(
        truth.rows(), held.start, held.stop - 1, -59, 0
    )


# -- 5: retention of helper parts ------------------------------------------------------------------
@pytest.mark.slow  # about 24 part builds
def test_helper_retention_and_rows_later_than_the_allowance(db) -> None:
    truth = Truth()
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(truth.add(network(range(2))))
    helper = dataclasses.replace(parse_statement(helper_text()).definition, helper=True)
    final = parse_statement(VIEW2).definition
    view2 = db.create_stream_view([helper, final], lateness_parts=2)
    assert view2.name == "View2"  # names as created (lower case before round 27)
    assert db.stream_views() == ["View2"]
    assert db.stream_views(helpers=True) == ["Helper", "View2"]

    def retained() -> int:
        return db.stream_view("Helper").status()["retained"]

    seen = [retained()]
    stream.append(truth.add(network(range(2, 5), missing=(2, 4))))
    seen.append(retained())
    result = stream.append(truth.add(network([5])))
    seen.append(retained())
    assert seen[0] == seen[1] == M0 + 1
    assert M0 + 1 < seen[2] <= M0 + 3  # parts 4 and 5 and the Helper[j-1] they read are kept
    assert [r.dropped_below for r in result.maintenance if r.view == "Helper"] == [seen[2]]
    assert db.stream_view("View2").status()["retained"] == M0 + 1  # a final view keeps every part

    with pytest.raises(NotFoundError) as error:
        db.stream_view("Helper").to_pandas(part=M0 + 1)
    assert "helper" in str(error.value).lower() and str(M0 + 1) in str(error.value)
    reference = run_lengths(truth.rows(), M0 + 1, M0 + 5)
    assert contents(db, "Helper") == restricted(reference, seen[2])
    assert contents(db, "View2") == at_least(reference)

    # C's minute 4 arrives one part late: within the allowance, recomputed from the kept parts
    result = stream.append(truth.add(late_c(4)))
    assert [(r.view, r.recomputed, r.rebuilt) for r in result.maintenance] == [
        ("Helper", [M0 + 4, M0 + 5], False),
        ("View2", [M0 + 4, M0 + 5], False),
    ]
    reference = run_lengths(truth.rows(), M0 + 1, M0 + 5)
    assert contents(db, "Helper") == restricted(reference, retained())
    assert contents(db, "View2") == at_least(reference)

    # C's minute 2 arrives three parts late: Helper[1] it would need is gone, so Helper is rebuilt
    # from its first part; Helper[1] is held again with its old content (restored, not changed),
    # so View2 recomputes only the parts that read changed Helper parts
    result = stream.append(truth.add(late_c(2)))
    everything = list(range(M0 + 1, M0 + 6))
    assert [(r.view, r.recomputed, r.rebuilt, r.restored) for r in result.maintenance] == [
        ("Helper", everything, True, [M0 + 1]),
        ("View2", everything[1:], False, []),
    ]
    reference = run_lengths(truth.rows(), M0 + 1, M0 + 5)
    assert (*PAIRS["C"], 5, 12 + 50 + 11 + 50 + 13) in reference[M0 + 5]
    assert contents(db, "Helper") == restricted(reference, retained())
    assert contents(db, "View2") == at_least(reference)

    # the next minute drops old helper parts again
    stream.append(truth.add(network([6])))
    assert retained() > M0 + 1
    reference = run_lengths(truth.rows(), M0 + 1, M0 + 6)
    assert contents(db, "Helper") == restricted(reference, retained())
    assert contents(db, "View2") == at_least(reference)


@pytest.mark.slow  # about 12 part builds
def test_late_rows_in_the_first_part_of_a_helper_after_retention(db) -> None:
    """Late rows in the helper's first part, once retention dropped it: the helper is rebuilt and
    keeps the recomputed parts, which View2 then reads (before the fix in maintainer.py the
    recomputed parts below ``retained`` were discarded and View2 failed with MaintenanceError on
    every later maintenance)."""
    truth = Truth()
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(truth.add(network(range(2), missing=(1,))))
    helper = dataclasses.replace(parse_statement(helper_text()).definition, helper=True)
    db.create_stream_view([helper, parse_statement(VIEW2).definition], lateness_parts=0)
    stream.append(truth.add(network(range(2, 4))))
    assert db.stream_view("Helper").status()["retained"] > M0 + 1
    result = stream.append(truth.add(late_c(1)))
    everything = [M0 + 1, M0 + 2, M0 + 3]
    assert [(r.view, r.recomputed, r.rebuilt) for r in result.maintenance] == [
        ("Helper", everything, True),
        ("View2", everything, False),
    ]
    reference = run_lengths(truth.rows(), M0 + 1, M0 + 3)
    assert contents(db, "View2") == at_least(reference)
    assert contents(db, "Helper") == restricted(reference, db.stream_view("Helper").status()["retained"])


PARTIALS = """CREATE VIEW P AS
INITIALIZE P[i] AS SELECT src, sum(loss) AS total, count(*) AS n FROM M[i] GROUP BY src
UPDATE P[j] AS SELECT src, sum(loss) AS total, count(*) AS n FROM M[j] GROUP BY src
PARTITION LENGTH 60"""
COMBINED = """CREATE VIEW W AS
INITIALIZE W[i] AS SELECT src, sum(total) AS total, sum(n) AS n FROM P[i-2 .. i] GROUP BY src
UPDATE W[j] AS SELECT src, sum(total) AS total, sum(n) AS n FROM P[j-2 .. j] GROUP BY src
PARTITION LENGTH 60"""


@pytest.mark.slow  # about 9 part builds
def test_late_rows_beyond_retention_under_a_window_over_a_helper(db) -> None:
    truth = Truth()
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(truth.add(network(range(3), missing=(2,))))
    partials = dataclasses.replace(parse_statement(PARTIALS).definition, helper=True)
    db.create_stream_view([partials, parse_statement(COMBINED).definition], lateness_parts=0)
    stream.append(truth.add(network(range(3, 5))))
    stream.append(truth.add(network([5])))
    assert db.stream_view("P").status()["retained"] > M0 + 2
    stream.append(truth.add(late_c(2)))
    rows = truth.rows()
    seen = rows[rows["part"] >= M0 + 2]  # P starts at its newest part at creation
    assert contents(db, "W", RECENT_COLUMNS) == windows(seen, M0 + 2, M0 + 5)


# -- 6: errors leave everything unchanged ------------------------------------------------------------
HIGH = """CREATE VIEW High AS
INITIALIZE High[i] AS SELECT src, dest, loss FROM M[i] WHERE loss > 10
UPDATE High[j] AS SELECT src, dest, loss FROM M[j] WHERE loss > 10
PARTITION LENGTH 60"""


def bad(initialize: str = "M[i]", update: str = "M[j]", length: str = "60", select: str = "*") -> str:
    return (
        "CREATE VIEW Bad AS\n"
        f"INITIALIZE Bad[i] AS SELECT {select} FROM {initialize}\n"
        f"UPDATE Bad[j] AS SELECT * FROM {update}\n"
        f"PARTITION LENGTH {length}"
    )


def test_rejected_definitions_and_reads_change_nothing(db) -> None:
    truth = Truth()
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(truth.add(network(range(2))))
    db.sql(HIGH)
    before = snapshot(db)
    assert before["tables"] == ["streams.high", "streams.m"]

    def rejected(error_type, text_or_definition, *fragments: str, line=None, column=None):
        with pytest.raises(error_type) as error:
            if isinstance(text_or_definition, str):
                db.sql(text_or_definition)
            else:
                db.create_stream_view(text_or_definition)
        message = str(error.value).lower()
        for fragment in fragments:
            assert fragment.lower() in message, message
        if line is not None:
            assert (error.value.line, error.value.column) == (line, column)
        assert snapshot(db) == before
        return error.value

    # an unknown relation, a reference to the future, a partition length that does not divide
    rejected(ParseError, bad(update="Nope[j]"), "nope", line=3, column=32)
    rejected(ParseError, bad(initialize="M[i] JOIN Nope[i] ON true"), "nope", line=2, column=46)
    rejected(ParseError, bad(update="M[j+1]"), "future", line=3, column=32)
    rejected(ParseError, bad(update="M[j-1 .. j+1]"), "future", line=3, column=32)
    rejected(ParseError, bad(length="90"), "multiple", line=2, column=36)
    # malformed statements
    rejected(ParseError, bad(update="M[j +]"), "part index", line=3, column=37)
    rejected(ParseError, bad(length="sixty"), "partition length", line=4, column=18)
    rejected(ParseError, bad(update="Bad[j]"), "Bad", line=3, column=32)  # reads itself at j
    # invalid Spark SQL in a body, or bodies that disagree on the columns
    error = rejected(ValidationError, bad(select="nosuch"), "initialize")
    assert "nosuch" in str(error).lower()
    rejected(ValidationError, bad(select="src"), "columns")
    # taken names (case-insensitive), of a view or of a stream
    rejected(AlreadyExistsError, HIGH.replace("High", "HIGH"), "high")
    rejected(AlreadyExistsError, bad("High[i]", "High[j]").replace("Bad", "m"), "m")
    with pytest.raises(AlreadyExistsError):
        db.create_stream("High", SCHEMA, 60, "ts")
    assert snapshot(db) == before
    # a list whose second view is invalid creates none of them
    good = parse_statement(bad().replace("Bad", "Good")).definition
    rejected(ParseError, [good, parse_statement(bad(update="Nope[j]")).definition], "nope")

    # reads of what does not exist
    with pytest.raises(NotFoundError) as error:
        db.stream_view("High").to_pandas(part=M0 + 7)
    assert "high" in str(error.value).lower() and str(M0 + 7) in str(error.value)
    with pytest.raises(NotFoundError):
        db.stream_view("Nope")
    with pytest.raises(NotFoundError):
        db.stream_view("M")  # a stream, not a view
    # a stream a view reads cannot be dropped
    with pytest.raises(ValidationError, match="High|high"):
        db.drop_stream("M")
    assert snapshot(db) == before
    rows = truth.rows()
    assert by_part(db.stream_view("High").to_pandas(), 60, ["src", "dest", "loss"], ["loss"]) == {
        M0 + 1: sorted(
            (s, d, int(v))
            for s, d, v, p in rows[["src", "dest", "loss", "part"]].itertuples(index=False)
            if p == M0 + 1 and v > 10
        )
    }


def _position(text: str, piece: str) -> tuple[int, int]:
    """1-based line and column of the first ``piece`` in ``text``."""
    offset = text.index(piece)
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def test_hourly_view_must_read_sixty_minutes_per_hour(db) -> None:
    """``M[i]`` in an hourly view over a minute stream would read minute i, not hour i."""
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(network(range(2)))
    before = snapshot(db)
    for initialize, update, wrong in (
        ("M[i]", "M[j*60 .. j*60+59]", "M[i]"),
        ("M[i*60 .. i*60+59]", "M[j-1 .. j*60+59]", "M[j-1 .. j*60+59]"),
        ("M[i*60 .. i*60+59]", "M[j*60 .. j*60+59] JOIN M[j*30] USING (src)", "M[j*30]"),
    ):
        text = hourly_text("Hourly", "@", "@").replace("M[i .. i]", initialize).replace("M[j .. j]", update)
        with pytest.raises(ParseError) as error:
            db.sql(text)
        message = str(error.value)
        assert "scale" in message and "60 part(s) of m" in message.lower(), message
        assert (error.value.line, error.value.column) == _position(text, wrong)
        assert snapshot(db) == before
    good = hourly_text("Hourly", "@*60", "@*60+59")
    db.sql(good)  # the ends grow 60 minutes per hour: accepted, and starts at an hour
    assert db.stream_view("Hourly").status()["first"] in (H0 - 1, H0)


def test_update_columns_are_matched_by_name_and_type(db) -> None:
    truth = Truth()
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(truth.add(network(range(2))))

    def view(name: str, initialize: str, update: str) -> str:
        return (
            f"CREATE VIEW {name} AS\nINITIALIZE {name}[i] AS SELECT {initialize} FROM M[i]\n"
            f"UPDATE {name}[j] AS SELECT {update} FROM M[j]\nPARTITION LENGTH 60"
        )

    # the UPDATE lists the columns in another order: each lands in its own column
    db.sql(view("Swapped", "src, dest, loss", "dest, loss, src"))
    stream.append(truth.add(network([2])))
    rows = truth.rows()
    expected = sorted(
        (s, d, int(v))
        for s, d, v, p in rows[["src", "dest", "loss", "part"]].itertuples(index=False)
        if p >= M0 + 1
    )
    got = contents(db, "Swapped", (["src", "dest", "loss"], ["loss"]))
    assert sorted(row for part in got.values() for row in part) == expected
    before = snapshot(db)
    for update, where, reason in (
        ("src, dest, loss + 1", "loss + 1 FROM", "column 3 ((loss + 1)) is not a column of the view"),
        ("src, dest, CAST(loss AS BIGINT) AS loss", "loss AS BIGINT", "does not hold"),
        (
            "src, dest, CAST(loss AS SMALLINT) AS loss, src AS dest",
            "src AS dest",
            "returns column dest twice",
        ),
        ("src, dest", None, "lacks loss"),
    ):
        text = view("Bad", "src, dest, CAST(loss AS SMALLINT) AS loss", update)
        with pytest.raises(ValidationError) as error:
            db.sql(text)
        message = str(error.value)
        assert "view bad" in message.lower() and reason in message, message
        if where is not None:
            line, at = _position(text, where)
            assert f"(at line {line}, column {at})" in message, message
        assert snapshot(db) == before
    # the narrowing names both types
    with pytest.raises(ValidationError, match="bigint but the view's column loss .* is smallint"):
        db.sql(
            view(
                "Bad", "src, dest, CAST(loss AS SMALLINT) AS loss", "src, dest, CAST(loss AS BIGINT) AS loss"
            )
        )


def test_drop_view_through_sql_drops_helpers_only_it_reads(db) -> None:
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(network(range(2)))
    helper = dataclasses.replace(parse_statement(helper_text()).definition, helper=True)
    db.create_stream_view([helper, parse_statement(VIEW2).definition])
    db.sql(VIEW2.replace("View2", "Twice").replace("ct >= 4", "ct >= 2"))
    catalog = db.warehouse.catalog
    locations = {
        n: Path(urlparse(PartTable.open(catalog, "streams", n).table.location()).path)
        for n in ("helper", "view2", "twice")
    }
    assert all(path.exists() for path in locations.values())

    with pytest.raises(ValidationError, match="View2"):
        db.drop_stream_view("Helper")  # still read by View2 and Twice
    assert db.sql("DROP VIEW View2") is None
    assert db.stream_views(helpers=True) == ["Helper", "Twice"]  # Twice still reads Helper
    assert not locations["view2"].exists()
    assert db.sql("drop view twice;") is None
    assert db.stream_views(helpers=True) == []
    assert sorted(".".join(t) for t in catalog.list_tables("streams")) == ["streams.m"]
    assert not any(path.exists() for path in locations.values())
    with pytest.raises(NotFoundError):
        db.drop_stream_view("Twice")
    db.drop_stream("M")  # nothing reads it any more
    assert db.streams() == []


# -- 7: crashes during maintenance ------------------------------------------------------------------
def view_state(db, name: str) -> tuple:
    table = PartTable.open(db.warehouse.catalog, "streams", name)
    return table.current_version(), table.latest_properties(), sorted(table.all_files()), folder_files(table)


def test_crashes_during_appends_and_maintenance(db) -> None:
    truth = Truth()
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(truth.add(network(range(2), missing=(1,))))
    db.sql(helper_text())

    # a crash before the stream's commit: nothing changes anywhere
    before = snapshot(db)
    with inject("stream.before-commit"), pytest.raises(InjectedFault):
        stream.append(network(range(2, 4)))
    assert snapshot(db) == before
    assert db.maintain_streams() == []

    # crashes while maintaining the view after an append
    for point, rows, built, recomputed in (
        ("viewdf.staged", network([2]), [M0 + 2], []),  # a new part
        ("viewdf.before-commit", late_c(1), [], [M0 + 1, M0 + 2]),  # late rows in the first part
    ):
        stream_version = stream.version
        before = view_state(db, "helper")
        with inject(point), pytest.raises(InjectedFault):
            stream.append(truth.add(rows))
        assert stream.version == stream_version + 1  # the append itself is committed
        assert view_state(db, "helper") == before  # no new version, no new (or leftover) files
        results = db.maintain_streams()
        assert [(r.view, r.built, r.recomputed) for r in results] == [("Helper", built, recomputed)]
        assert contents(db, "Helper") == run_lengths(truth.rows(), M0 + 1, M0 + 2)
    assert db.maintain_streams() == []


# -- 9: views created over a stream with history ------------------------------------------------------
def test_hand_written_views_start_at_the_newest_part_backfilled_ones_at_the_oldest(db) -> None:
    truth = Truth()
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(truth.add(network(range(5), missing=(2,))))
    newest = stream.part_range()[1]
    assert newest == M0 + 4
    latest = db.sql(helper_text())
    assert (latest.status()["first"], latest.status()["next"]) == (newest, newest + 1)
    assert contents(db, "Helper") == run_lengths(truth.rows(), newest, newest)

    full = dataclasses.replace(parse_statement(helper_text("Full")).definition, backfill=True)
    view = db.create_stream_view(full)
    assert (view.status()["first"], view.status()["next"]) == (M0, newest + 1)
    assert contents(db, "Full") == run_lengths(truth.rows(), M0, newest)
