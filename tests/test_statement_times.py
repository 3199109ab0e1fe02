"""INSERT gives a datetime64 attribute and a time dimension as ISO text, read as the instants
Python's ``datetime`` arithmetic names (UTC, or the offset written)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arrayviews import ValidationError

_NUMBERS = iter(range(10**6))


@pytest.fixture(scope="module")
def times_db(spark, tmp_path_factory):
    import arrayviews

    return arrayviews.connect(str(tmp_path_factory.mktemp("times") / "wh"), spark=spark, execution="local")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    moments=st.lists(st.datetimes(dt.datetime(1700, 1, 1), dt.datetime(2260, 1, 1)), min_size=1, max_size=5),
    minutes=st.integers(-14 * 60, 14 * 60),
)
def test_a_datetime64_attribute_takes_iso_text(times_db, moments, minutes):
    """Before: INSERT INTO E VALUES (0, '2026-01-01') was refused ("'2026-01-01' is a string, not
    a datetime64 value"), and no other literal was a time either."""
    name = f"stamped_{next(_NUMBERS)}"
    times_db.sql(f"CREATE ARRAY {name} <t:datetime64, n:datetime64 NULL> [i=0:9:4]")
    zone = dt.timezone(dt.timedelta(minutes=minutes))
    rows = ", ".join(
        f"({i}, '{m.replace(tzinfo=dt.UTC).astimezone(zone).isoformat()}', NULL)" for i, m in enumerate(moments)
    )
    times_db.sql(f"INSERT INTO {name} VALUES {rows}")
    frame = times_db.array(name).to_pandas().sort_values("i")
    assert frame["t"].tolist() == [np.datetime64(m, "ns") for m in moments]
    assert frame["n"].isna().all()


def test_a_time_dimension_takes_iso_text_and_bad_times_are_placed(times_db):
    times_db.sql("CREATE ARRAY sixh <v:int64> [time=0:*:10 SCALE 6 HOURS OFFSET '2026-01-01']")
    times_db.sql("INSERT INTO sixh VALUES ('2026-01-01T12:00', 1), ('2026-01-02T08:00+02:00', 2)")
    frame = times_db.array("sixh").to_pandas()
    assert dict(zip(frame["time"], frame["v"], strict=True)) == {2: 1, 5: 2}  # Jan 1 12:00, Jan 2 06:00 UTC
    times_db.sql("CREATE ARRAY stamped <t:datetime64> [i=0:9:4]")
    for statement, message in [
        ("INSERT INTO stamped VALUES (0, 5)", r"attribute t: 5 is not a time .* at line 1, column 32"),
        ("INSERT INTO stamped VALUES (0, 'soon')", r"'soon' is not an ISO 8601 time"),
        ("INSERT INTO stamped VALUES (0, '2300-01-01')", r"outside the datetime64\[ns\] range"),
        ("INSERT INTO sixh VALUES ('2026-01-01T13:00', 1)", r"labels no cell of the dimension"),
        ("INSERT INTO sixh VALUES ('2026-01-01T18:00', 1), (7, 2)", r"'2026-01-01T18:00' is a time where other rows"),
    ]:
        with pytest.raises(ValidationError, match=message):
            times_db.sql(statement)
    assert times_db.array("stamped").version == 0 and times_db.array("sixh").version == 1
