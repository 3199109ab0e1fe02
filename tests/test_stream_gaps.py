"""A batch reaching far past a stream's newest part is refused at append time, changing nothing.

Maintenance builds every view part from a view's next part up to the stream's newest part, one
query each; one row years ahead (a sensor sending 2099, seconds read as milliseconds) would make
the next maintenance build millions of empty parts, a hang rather than an error. ``Stream.append``
therefore refuses a batch whose newest part lies more than ``max_gap_parts`` parts (10,000 by
default, set per stream at creation) past the stream's newest part (for an empty stream: past the
batch's own oldest part), unless ``allow_gap=True``. Late rows and gaps within the limit append as
before; an allowed gap is maintained like any other batch, checked against a pandas recomputation.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pandas as pd
import pytest

import arrayviews
from arrayviews.model.errors import ValidationError
from arrayviews.stream import DEFAULT_MAX_GAP_PARTS
from arrayviews.streams import maintainer

EPOCH = 1_420_070_400  # 2015-01-01 00:00:00 UTC, a whole hour
M0 = EPOCH // 60  # the part holding minute 0
SCHEMA = "ts timestamp, src string, loss int"
FUTURE = pd.Timestamp("2099-06-01 00:00:00", tz="UTC")
FUTURE_PART = int(FUTURE.timestamp()) // 60

RECENT = """CREATE VIEW Recent AS
INITIALIZE Recent[i] AS SELECT src, sum(loss) AS total, count(*) AS n FROM M[i-2 .. i] GROUP BY src
UPDATE Recent[j] AS SELECT src, sum(loss) AS total, count(*) AS n FROM M[j-2 .. j] GROUP BY src
PARTITION LENGTH 60"""


def readings(minutes: list[int], first_loss: int = 1) -> pd.DataFrame:
    """One reading of each of two sources per minute (relative to EPOCH), 7 and 31 s into it."""
    seconds = [EPOCH + 60 * m + offset for m in minutes for offset in (7, 31)]
    return pd.DataFrame(
        {
            "ts": pd.to_datetime(seconds, unit="s", utc=True),
            "src": ["a", "b"] * len(minutes),
            "loss": range(first_loss, first_loss + 2 * len(minutes)),
        }
    )


def future_batch() -> pd.DataFrame:
    """Two sane readings in minute 5 and one reading in June 2099."""
    sane = pd.Timestamp(EPOCH + 300, unit="s", tz="UTC")
    times = [sane + pd.Timedelta(seconds=7), sane + pd.Timedelta(seconds=31), FUTURE]
    return pd.DataFrame({"ts": pd.DatetimeIndex(times), "src": ["a", "b", "a"], "loss": [100, 101, 7]})


def disk_files(stream) -> set[str]:
    folder = Path(urlparse(stream.table.location).path)
    return {str(p) for p in folder.rglob("*") if p.is_file()} if folder.exists() else set()


def unchanged(stream) -> tuple:
    """Everything a refused batch must leave as it was."""
    stream.table.refresh()
    return (
        stream.version,
        [(v.version, v.snapshot_id) for v in stream.versions()],
        stream.part_range(),
        sorted(stream.table.all_files()),
        disk_files(stream),
    )


@pytest.fixture
def builds(monkeypatch):
    """Counts the view parts maintenance builds; more than 50 in one test is the hang starting."""
    counted: list[int] = []
    original = maintainer._Round.build

    def counting(self, part: int, initialize: bool) -> None:
        counted.append(part)
        if len(counted) > 50:
            raise RuntimeError(f"maintenance is building part after part ({len(counted)} so far)")
        original(self, part, initialize)

    monkeypatch.setattr(maintainer._Round, "build", counting)
    return counted


def recent_reference(rows: pd.DataFrame, first: int, last: int) -> dict[int, list[tuple]]:
    """Recent recomputed with pandas: per part p and src, loss sum and count over parts p-2 .. p."""
    parts = (rows["ts"] - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=60)
    rows = rows.assign(part=parts)
    result = {}
    for part in range(first, last + 1):
        chosen = rows[(rows["part"] > part - 3) & (rows["part"] <= part)]
        grouped = chosen.groupby("src")["loss"].agg(["sum", "count"])
        found = sorted((str(src), int(s), int(n)) for src, (s, n) in grouped.iterrows())
        if found:
            result[part] = found
    return result


def view_contents(db, name: str) -> dict[int, list[tuple]]:
    frame = db.stream_view(name).to_pandas()
    stamps = pd.to_datetime(frame["PART_TIMESTAMP"])
    stamps = stamps.dt.tz_localize("UTC") if stamps.dt.tz is None else stamps.dt.tz_convert("UTC")
    frame = frame.assign(part=(stamps - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=60))
    result: dict[int, list[tuple]] = {}
    for part, group in frame.groupby("part"):
        result[int(part)] = sorted(
            (str(s), int(t), int(n)) for s, t, n in group[["src", "total", "n"]].itertuples(index=False)
        )
    return result


# -- the hang, and its refusal ----------------------------------------------------------------------
def test_one_row_years_ahead_is_refused_before_maintenance_builds_anything(db, builds) -> None:
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(readings([0, 1, 2, 3, 4]))
    db.sql(RECENT)
    builds.clear()
    before = unchanged(stream)
    try:
        result = stream.append(future_batch())
    except ValidationError as error:
        refused = error
    else:
        pytest.fail(
            f"the batch was appended (version {result.version}); maintenance then built "
            f"{len(builds)} part(s) of the {FUTURE_PART - M0 - 4} up to 2099 before this test stopped it "
            f"(failed: {result.failed})"
        )
    assert builds == [], "maintenance ran for a refused batch"
    assert unchanged(stream) == before
    assert db.stream_view("Recent").state().next == M0 + 5
    message = str(refused)
    newest = M0 + 4
    gap = FUTURE_PART - newest
    for field in (
        "stream M",
        "time column ts",
        "2099-06-01T00:00:00+00:00",  # the newest time in the batch
        f"part {FUTURE_PART}",
        f"newest part {newest}",
        "2015-01-01T00:04:00+00:00",  # where the stream's newest part starts
        f"{gap} parts",
        f"limit of {DEFAULT_MAX_GAP_PARTS} parts",
        "allow_gap=True",
        "max_gap_parts",
        "nothing was appended",
    ):
        assert field in message, f"{field!r} missing from: {message}"
    assert refused.array == "M"
    assert refused.column == "ts"
    # the sane rows alone append and are maintained as before
    result = stream.append(readings([5], first_loss=100))
    assert result.parts == [M0 + 5] and not result.failed
    assert [m.built for m in result.maintenance] == [[M0 + 5]]


def test_a_spark_batch_is_refused_the_same_way(db, spark, builds) -> None:
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(readings([0, 1, 2]))
    db.sql(RECENT)
    builds.clear()
    before = unchanged(stream)
    with pytest.raises(ValidationError) as refused:
        stream.append(spark.createDataFrame(future_batch(), SCHEMA))
    assert builds == []
    assert unchanged(stream) == before  # the files the executors staged are deleted too
    message = str(refused.value)
    assert "2099-06-01T00:00:00+00:00" in message and f"part {FUTURE_PART}" in message
    assert f"{FUTURE_PART - (M0 + 2)} parts" in message


def test_load_goes_through_the_same_check(db, tmp_path, builds) -> None:
    stream = db.create_stream("M", SCHEMA, 60, "ts", max_gap_parts=3)
    stream.append(readings([0, 1]))
    db.sql(RECENT)
    path = str(tmp_path / "far.parquet")
    readings([9]).astype({"loss": "int32"}).to_parquet(path)
    before = unchanged(stream)
    with pytest.raises(ValidationError, match="limit of 3 parts"):
        stream.load(path)
    assert unchanged(stream) == before
    result = stream.load(path, allow_gap=True)
    assert result.parts == [M0 + 9] and not result.failed


def test_an_empty_stream_measures_the_gap_within_the_batch(db) -> None:
    stream = db.create_stream("M", SCHEMA, 60, "ts", max_gap_parts=3)
    before = unchanged(stream)
    with pytest.raises(ValidationError) as refused:
        stream.append(readings([0, 4]))
    assert unchanged(stream) == before and stream.version == 0
    message = str(refused.value)
    assert f"oldest part {M0}" in message and "2015-01-01T00:00:00+00:00" in message
    assert "4 parts" in message and "2015-01-01T00:04:31+00:00" in message
    assert stream.append(readings([0, 3])).parts == [M0, M0 + 3]


# -- the limit --------------------------------------------------------------------------------------
def test_late_rows_and_gaps_within_the_limit_append_as_before(db) -> None:
    stream = db.create_stream("M", SCHEMA, 60, "ts", max_gap_parts=3)
    assert stream.max_gap_parts == 3
    stream.append(readings([100]))
    result = stream.append(readings([97]))  # late, 3 parts before the oldest: within the limit
    assert result.late_parts == [M0 + 97]
    with pytest.raises(ValidationError, match="4 parts before the stream's oldest part"):
        stream.append(readings([93]))  # translated views would be rebuilt from it
    assert stream.append(readings([0]), allow_gap=True).late_parts == [M0]
    result = stream.append(readings([50]))  # 50 parts late, within the stream's span: no gap
    assert result.late_parts == [M0 + 50]
    result = stream.append(readings([103]))  # exactly the limit
    assert result.parts == [M0 + 103]
    assert stream.part_range() == (M0, M0 + 103)
    with pytest.raises(ValidationError, match="4 parts past"):
        stream.append(readings([107]))


def test_the_default_limit(db) -> None:
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    assert stream.max_gap_parts == DEFAULT_MAX_GAP_PARTS == 10_000
    stream.append(readings([0]))
    assert stream.append(readings([10_000])).parts == [M0 + 10_000]
    with pytest.raises(ValidationError, match="10001 parts past"):
        stream.append(readings([20_001]))


def test_the_limit_persists_for_another_connection(db, spark, tmp_path) -> None:
    db.create_stream("M", SCHEMA, 60, "ts", max_gap_parts=3).append(readings([0]))
    other = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark).stream("M")
    assert other.max_gap_parts == 3
    with pytest.raises(ValidationError, match="limit of 3 parts"):
        other.append(readings([4]))
    assert other.append(readings([3])).parts == [M0 + 3]


def test_an_allowed_gap_is_appended_and_maintained(db, builds) -> None:
    stream = db.create_stream("M", SCHEMA, 60, "ts", max_gap_parts=3)
    rows = [readings([0, 1, 2])]
    stream.append(rows[-1])
    db.sql(RECENT)
    with pytest.raises(ValidationError):
        stream.append(readings([11], first_loss=50))
    builds.clear()
    rows.append(readings([11], first_loss=50))
    result = stream.append(rows[-1], allow_gap=True)
    assert result.parts == [M0 + 11] and not result.failed
    assert builds == list(range(M0 + 3, M0 + 12))  # every part of the gap, empty ones too
    assert db.stream_view("Recent").state().next == M0 + 12
    assert view_contents(db, "Recent") == recent_reference(pd.concat(rows), M0 + 2, M0 + 11)


def test_the_statement_language_sets_the_limit(db) -> None:
    db.sql(
        "CREATE STREAM M (ts timestamp, src string, loss int) PARTITION LENGTH 60 TIME COLUMN ts WITH MAX GAP 3 PARTS"
    )
    stream = db.stream("M")
    assert stream.max_gap_parts == 3
    stream.append(readings([0]))
    with pytest.raises(ValidationError, match="limit of 3 parts"):
        stream.append(readings([4]))


def test_insert_and_load_statements_allow_a_gap(db, tmp_path) -> None:
    db.sql(
        "CREATE STREAM M (ts timestamp, src string, loss int) PARTITION LENGTH 60 TIME COLUMN ts WITH MAX GAP 3 PARTS"
    )
    stream = db.stream("M")
    db.sql("INSERT INTO M VALUES ('2015-01-01 00:00:05', 'a', 1)")
    before = unchanged(stream)
    with pytest.raises(ValidationError, match="ALLOW GAP"):
        db.sql("INSERT INTO M VALUES ('2015-01-01 00:09:05', 'a', 2)")
    assert unchanged(stream) == before
    assert db.sql("INSERT INTO M VALUES ('2015-01-01 00:09:05', 'a', 2) ALLOW GAP").parts == [M0 + 9]
    path = str(tmp_path / "far.parquet")
    readings([20]).astype({"loss": "int32"}).to_parquet(path)
    with pytest.raises(ValidationError, match="limit of 3 parts"):
        db.sql(f"LOAD M FROM '{path}'")
    assert db.sql(f"LOAD M FROM '{path}' ALLOW GAP").parts == [M0 + 20]
    db.sql("CREATE ARRAY A <v:int64> [i=1:4:2]")
    with pytest.raises(ValidationError, match="A is not a stream"):
        db.sql("INSERT INTO A VALUES (1, 5) ALLOW GAP")


def test_the_limit_can_be_changed(db, spark, tmp_path) -> None:
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(readings([0]))
    version = stream.version
    stream.set_max_gap_parts(2)
    assert stream.version == version  # a setting, not a version
    other = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark).stream("M")
    assert other.max_gap_parts == 2
    with pytest.raises(ValidationError, match="limit of 2 parts"):
        other.append(readings([3]))
    with pytest.raises(ValidationError, match="max_gap_parts"):
        stream.set_max_gap_parts(0)
    assert stream.max_gap_parts == 2


# -- bad settings -----------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "100"])
def test_bad_limits_are_refused(db, bad) -> None:
    with pytest.raises(ValidationError, match="max_gap_parts") as refused:
        db.create_stream("M", SCHEMA, 60, "ts", max_gap_parts=bad)
    assert "stream M" in str(refused.value)
    assert db.streams() == []


def test_allow_gap_must_be_a_boolean(db) -> None:
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    with pytest.raises(ValidationError, match="allow_gap"):
        stream.append(readings([0]), allow_gap="yes")
    assert stream.version == 0
