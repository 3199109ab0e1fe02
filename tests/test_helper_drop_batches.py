"""Retention of a helper view's parts: a part below the held range is gone for every reader the
moment the view's state says so, while its files are removed in batches (streams/maintainer.py,
``DROP_BATCH_PARTS``). Checked against pandas recomputation of the window over the whole stream,
and against the table's files and versions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from arrayviews.model.errors import NotFoundError
from arrayviews.streams import maintainer
from legacy_windows import create_legacy_window_view

EPOCH = 1_420_070_400
SCHEMA = "ts timestamp, src string, loss int"
WIDTH = 3
# a window with max made as earlier versions made it: a helper and a view (tests/legacy_windows.py)
WINDOW_VIEW = f"""CREATE VIEW w USING INCREMENTAL AS
SELECT src, max(loss) AS top, sum(loss) AS total, count(*) AS n FROM M [WINDOW {WIDTH} MINUTES] GROUP BY src"""
HELPER = "w__helper"


def minute_rows(minute: int, seed: int, count: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "ts": pd.to_datetime(EPOCH + 60 * minute + rng.integers(0, 60, count), unit="s", utc=True),
            "src": rng.choice(["a", "b", "c"], count),
            "loss": pd.array(rng.integers(-20, 40, count), dtype="int32"),
        }
    )


def window_reference(frames: list[pd.DataFrame]) -> dict[int, set[tuple]]:
    """Per part p: (src, sum, count) over the rows of parts p-WIDTH+1 .. p, plain pandas."""
    rows = pd.concat(frames, ignore_index=True)
    parts = (rows.ts - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=60)
    rows = rows.assign(part=parts)
    result = {}
    for part in range(int(parts.min()), int(parts.max()) + 1):
        window = rows[(rows.part > part - WIDTH) & (rows.part <= part)]
        found = {(src, int(g.loss.astype(int).sum()), len(g)) for src, g in window.groupby("src")}
        if found:
            result[part] = found
    return result


def stored(db) -> dict[int, set[tuple]]:
    frame = db.stream_view("w").to_pandas()
    result: dict[int, set[tuple]] = {}
    stamps = pd.to_datetime(frame["PART_TIMESTAMP"]).dt.tz_localize(None)
    for stamp, src, total, n in zip(stamps, frame.src, frame.total, frame.n, strict=True):
        part = int((stamp - pd.Timestamp(0)) // pd.Timedelta(seconds=60))
        result.setdefault(part, set()).add((src, int(total), int(n)))
    return result


def helper_table(db):
    from arrayviews.streams.world import StreamWorld

    return StreamWorld(db.spark, db.warehouse.catalog).table(HELPER).refresh()


@pytest.mark.slow  # about 45 maintenance steps in-process
def test_a_helper_removes_the_files_of_dropped_parts_in_batches_and_no_reader_sees_them(
    spark, tmp_path
) -> None:
    import arrayviews

    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution="local")
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    frames = [minute_rows(0, seed=0)]
    stream.append(frames[0])
    create_legacy_window_view(db, WINDOW_VIEW, lateness_parts=1)
    steps = 2 * maintainer.DROP_BATCH_PARTS + 6
    waiting_seen = checked = 0
    for minute in range(1, steps + 1):
        frames.append(minute_rows(minute, seed=minute))
        result = stream.append(frames[-1])
        assert all(m.error is None for m in result.maintenance)
        status = db.stream_view(HELPER).status()
        table = helper_table(db)
        lowest = table.lowest_part()
        # the files of parts no longer held wait for at most one batch
        assert lowest is not None and status["retained"] - maintainer.DROP_BATCH_PARTS < lowest
        waiting = status["retained"] - lowest
        waiting_seen = max(waiting_seen, waiting)
        if waiting in (1, maintainer.DROP_BATCH_PARTS - 1) and checked < 2:
            checked += 1  # a part below the held range still has files: no reader sees it
            with pytest.raises(NotFoundError):
                db.stream_view(HELPER).to_pandas(part=lowest)
            held_rows = len(db.stream_view(HELPER).to_pandas())
            assert db.sql(f"SELECT count(*) AS c FROM {HELPER}").collect()[0].c == held_rows
            stored_rows = sum(f.record_count for f in table._files_of_range(lowest, status["next"]))
            assert stored_rows > held_rows
    assert waiting_seen == maintainer.DROP_BATCH_PARTS - 1 and checked == 2
    assert stored(db) == window_reference(frames)
    # versions that removed files: one per batch, not one per step
    removals = [v for v in helper_table(db).versions() if v.dropped_below is not None]
    assert 1 <= len(removals) <= steps // maintainer.DROP_BATCH_PARTS + 1


@pytest.mark.slow  # about 30 maintenance steps in-process
def test_late_rows_beyond_the_held_range_rebuild_the_helper_over_files_waiting_for_removal(
    spark, tmp_path
) -> None:
    """Rows arriving later than the allowance, into parts whose files were removed and into parts
    whose files still wait: the helper is rebuilt and holds every part once (no file of a part is
    kept twice), and the window view equals the recomputation over the whole stream."""
    import arrayviews

    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution="local")
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    frames = [minute_rows(0, seed=0)]
    stream.append(frames[0])
    create_legacy_window_view(db, WINDOW_VIEW, lateness_parts=1)
    for minute in range(1, maintainer.DROP_BATCH_PARTS + 8):
        frames.append(minute_rows(minute, seed=minute))
        stream.append(frames[-1])
    table = helper_table(db)
    retained = db.stream_view(HELPER).status()["retained"]
    assert table.lowest_part() < retained  # some parts' files wait for removal
    assert [v for v in table.versions() if v.dropped_below is not None]  # and some were removed
    late = pd.concat(
        [
            minute_rows(2, seed=100, count=3),  # a part whose files were removed
            minute_rows(table.lowest_part() - EPOCH // 60, seed=101, count=3),  # a part whose files wait
        ],
        ignore_index=True,
    )
    frames.append(late)
    result = stream.append(late)
    assert any(m.rebuilt for m in result.maintenance)
    assert stored(db) == window_reference(frames)
    table = helper_table(db)
    by_part = table.files_by_part()
    held = db.stream_view(HELPER).parts()
    assert all(len(by_part[p]) == 1 for p in held if p in by_part)  # each held part written once
    frames.append(minute_rows(40, seed=40))
    stream.append(frames[-1])
    assert stored(db) == window_reference(frames)
