"""Which columns of a part file carry Parquet min/max statistics: a stream's appended part every
column (Spark may prune row groups by its times), a view step's part only ``_part`` (its manifests
keep no other bounds and its parts are read whole); both read back equal to what was written. A
window view's part (one row per group) gives its text columns no dictionary; a stream's part does."""

from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq

from arrayviews.storage.part_table import PartTable

EPOCH = 1_700_000_040  # a minute boundary


def _statistics(path: str) -> dict[str, bool]:
    footer = pq.read_metadata(path)
    group = footer.row_group(0)
    return {
        group.column(k).path_in_schema: group.column(k).statistics is not None
        for k in range(group.num_columns)
    }


def _dictionaries(path: str) -> dict[str, bool]:
    group = pq.read_metadata(path).row_group(0)
    return {
        group.column(k).path_in_schema: group.column(k).has_dictionary_page for k in range(group.num_columns)
    }


def _window_view_over_three_minutes(db):
    """A stream of three minutes and a window view over it (stepped in process); the paths of the
    newest part's file of the view and of the stream."""
    db.executors.mode = "local"
    stream = db.create_stream("probes", "ts timestamp, g string, v int", 60, "ts")
    db.sql(
        "CREATE VIEW totals AS SELECT g, sum(v) AS t, max(v) AS hi FROM probes [WINDOW 2 MINUTES] GROUP BY g"
    )
    for minute in range(3):
        stream.append(
            pd.DataFrame(
                {
                    "ts": pd.to_datetime([EPOCH + 60 * minute] * 3, unit="s", utc=True),
                    "g": ["a", "b", "a"],
                    "v": [minute, 10 + minute, -minute],
                }
            )
        )
    catalog = db.warehouse.catalog
    view = PartTable.open(catalog, "streams", "totals")
    newest = view.part_range()[1]
    (path,) = [uri.removeprefix("file://") for uri in view.files_of_parts(newest, newest)]
    stream_table = PartTable.open(catalog, "streams", "probes")
    (stream_path,) = [uri.removeprefix("file://") for uri in stream_table.files_of_parts(newest, newest)]
    return newest, path, stream_path


def test_a_view_steps_part_keeps_statistics_of_its_part_number_only(db) -> None:
    newest, path, stream_path = _window_view_over_three_minutes(db)
    kept = _statistics(path)
    assert kept.pop("_part") and not any(kept.values()), kept
    assert all(_statistics(stream_path).values())
    # plain Python over the last two minutes: a = [1, -1, 2, -2] sums to 0, b = [11, 12]
    rows = db.sql(f"SELECT g, t, hi FROM totals WHERE PART_TIMESTAMP = timestamp_seconds({newest * 60})")
    assert sorted(map(tuple, rows.toPandas().itertuples(index=False))) == [("a", 0, 2), ("b", 23, 12)]


def test_a_window_views_part_gives_its_text_keys_no_dictionary(db) -> None:
    newest, path, stream_path = _window_view_over_three_minutes(db)
    assert _dictionaries(path)["g"] is False
    assert _dictionaries(path)["_part"] is True
    assert _dictionaries(stream_path)["g"] is True
    rows = db.sql(f"SELECT g, t, hi FROM totals WHERE PART_TIMESTAMP = timestamp_seconds({newest * 60})")
    assert sorted(map(tuple, rows.toPandas().itertuples(index=False))) == [("a", 0, 2), ("b", 23, 12)]
