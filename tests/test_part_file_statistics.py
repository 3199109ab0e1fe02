"""Which columns of a part file carry Parquet min/max statistics: a stream's appended part every
column (Spark may prune row groups by its times), a view step's part only ``_part`` (its manifests
keep no other bounds and its parts are read whole); both read back equal to what was written."""

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


def test_a_view_steps_part_keeps_statistics_of_its_part_number_only(db) -> None:
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
    kept = _statistics(path)
    assert kept.pop("_part") and not any(kept.values()), kept
    stream_table = PartTable.open(catalog, "streams", "probes")
    (stream_path,) = [uri.removeprefix("file://") for uri in stream_table.files_of_parts(newest, newest)]
    assert all(_statistics(stream_path).values())
    # plain Python over the last two minutes: a = [1, -1, 2, -2] sums to 0, b = [11, 12]
    rows = db.sql(f"SELECT g, t, hi FROM totals WHERE PART_TIMESTAMP = timestamp_seconds({newest * 60})")
    assert sorted(map(tuple, rows.toPandas().itertuples(index=False))) == [("a", 0, 2), ("b", 23, 12)]
