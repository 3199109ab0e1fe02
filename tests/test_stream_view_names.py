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


def test_maintenance_results_errors_and_status_name_views_as_created(db) -> None:
    """What a maintenance pass reports (results, failures and their messages) and a view's status
    (the versions it reflects, per source) name views and streams as they were created."""
    stream = db.create_stream("Gauges", "ts timestamp, g string, v int", 60, "ts")
    db.sql("CREATE VIEW PerMinute AS SELECT g, sum(v) AS t FROM gauges [WINDOW 1 MINUTES] GROUP BY g")
    db.sql(
        "CREATE VIEW Checked AS INITIALIZE Checked[i] AS SELECT g, v FROM Gauges[i] WHERE assert_true(v < 100) IS NULL "
        "UPDATE Checked[j] AS SELECT g, v FROM Gauges[j] WHERE assert_true(v < 100) IS NULL PARTITION LENGTH 60"
    )
    result = stream.append(
        pd.DataFrame(
            {"ts": pd.to_datetime([EPOCH, EPOCH + 60], unit="s", utc=True), "g": ["a", "b"], "v": [1, 500]}
        )
    )
    assert sorted(m.view for m in result.maintenance) == ["Checked", "PerMinute"]
    assert list(result.failed) == ["Checked"]
    assert result.failed["Checked"].startswith("MaintenanceError: view Checked, part ")
    status = db.stream_view("perminute").status()
    assert status["view"] == "PerMinute" and status["seen"] == {"Gauges": stream.version}
    assert [base for base, _, _ in db.stream_view("PERMINUTE").bases()] == ["Gauges"]
