"""A stream view keeps the spelling of its name (as streams and arrays do): listed as created, found
and dropped in any letter case, and its drop reports the name as created."""

from __future__ import annotations

import pandas as pd

EPOCH = 1_700_000_040  # a minute boundary


def test_a_stream_views_name_is_listed_as_written_and_found_in_any_case(db) -> None:
    stream = db.create_stream("Sensors", "ts timestamp, g string, v int", 60, "ts")
    db.sql("CREATE VIEW MyWindow AS SELECT g, sum(v) AS t FROM Sensors [WINDOW 2 MINUTES] GROUP BY g")
    db.sql("CREATE VIEW lowered AS SELECT g, max(v) AS top FROM sensors [WINDOW 2 MINUTES] GROUP BY g")
    assert sorted(db.stream_views(), key=str.lower) == ["lowered", "MyWindow"]
    stream.append(
        pd.DataFrame(
            {
                "ts": pd.to_datetime([EPOCH, EPOCH + 60, EPOCH + 61], unit="s", utc=True),
                "g": ["a", "b", "a"],
                "v": [1, 2, 5],
            }
        )
    )
    rows = db.sql("SELECT g, t FROM MYWINDOW ORDER BY PART_TIMESTAMP, g").toPandas()
    # plain Python: per minute, the sums over the window's two minutes
    assert list(rows.itertuples(index=False, name=None)) == [("a", 1), ("a", 6), ("b", 2)]
    assert db.drop_stream_view("mywindow") == ["MyWindow"]
    assert db.stream_views() == ["lowered"]
