"""INSERT into a stream reads a timestamp written with ``Z`` or a UTC offset as that instant (Spark
reads such text the same way); checked against Python's ``datetime`` arithmetic."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews import ValidationError
from arrayviews.language.stream_executor import stream_rows

UTC = dt.UTC

instants = st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1))
offsets = st.integers(-14 * 60, 14 * 60).map(lambda minutes: dt.timezone(dt.timedelta(minutes=minutes)))


def _written(moment: dt.datetime, zone: dt.timezone | None, style: str) -> str:
    """``moment`` (naive, UTC) as text a user writes: zone-less, with ``Z`` or with an offset."""
    if zone is None:
        return moment.isoformat(sep=" ")
    text = moment.replace(tzinfo=UTC).astimezone(zone).isoformat(sep=style)
    return text[:-6] + "Z" if zone.utcoffset(None) == dt.timedelta(0) and style == "T" else text


class _Stream:
    """What stream_rows reads of a stream: its name and Spark schema (no warehouse needed)."""

    def __init__(self):
        from pyspark.sql.types import LongType, StructField, StructType, TimestampType

        self.name = "feed"
        self.schema = StructType([StructField("ts", TimestampType()), StructField("v", LongType())])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(instants, st.none() | offsets, st.sampled_from(["T", " "])), min_size=1, max_size=6))
def test_timestamps_with_zones_are_the_instants_they_name(rows):
    """Before: '2015-01-01T00:00:10Z' and '...+02:00' were refused ("is not a timestamp")."""
    values = tuple((_written(moment, zone, style), k) for k, (moment, zone, style) in enumerate(rows))
    table = stream_rows(_Stream(), values)
    assert table.column("ts").to_pylist() == [moment for moment, _, _ in rows]


@pytest.mark.parametrize("text", ["2015-01-01T00:00:10+25:00", "2015-01-01T00:00:10 UTC+2", "2015-13-01Z"])
def test_a_malformed_zone_is_refused_naming_the_value(text):
    with pytest.raises(ValidationError, match=rf"column ts: '{re.escape(text)}' is not a timestamp .* in row 1"):
        stream_rows(_Stream(), ((text, 1),))


def test_insert_statement_stores_the_utc_instant(db):
    db.sql("CREATE STREAM zoned (ts timestamp, v bigint) PARTITION LENGTH 60 TIME COLUMN ts")
    db.sql(
        "INSERT INTO zoned VALUES ('2015-01-01T00:00:10Z', 1), ('2015-01-01T02:00:20+02:00', 2), "
        "('2015-01-01 00:00:30', 3)"
    )
    rows = sorted(db.stream("zoned").read().select("ts", "v").collect(), key=lambda row: row.v)
    assert [row.ts for row in rows] == [dt.datetime(2015, 1, 1, 0, 0, s) for s in (10, 20, 30)]
