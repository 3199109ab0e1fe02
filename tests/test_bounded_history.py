"""Stream views forget their oldest versions after maintenance (streams/bounded_history.py): the
views' contents still equal the plain-Python references through appends and late rows, the
versions held stay bounded, and no file of a forgotten version is left behind."""

from __future__ import annotations

import pandas as pd
import pytest

import arrayviews
from arrayviews.model.errors import ValidationError
from arrayviews.storage.expiry import live_files, table_files
from legacy_windows import create_legacy_window_view
from test_translated_views import (
    MAX_VIEW,
    PATTERN_VIEW,
    SCHEMA,
    SUM_VIEW,
    assert_same,
    pattern_reference,
    readings,
    stored,
    window_reference,
    with_parts,
)

KEEP = 3


@pytest.fixture()
def db(spark, tmp_path):
    return arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution="local")


def _held(db, name: str) -> int:
    table = db.stream_view(name)._handle.table
    table.refresh()
    return len(table.table.metadata.snapshots)


def _check(db, frames) -> None:
    rows = with_parts(frames)
    assert_same(stored(db, "rising", ["src", "dest", "ct", "total"]), pattern_reference(rows))
    assert_same(stored(db, "recent", ["src", "total", "n", "mean"]), window_reference(rows, 3, "sum"))
    for name in {"peaks", "old_peaks"} & set(db.stream_views()):
        assert_same(stored(db, name, ["src", "top", "low"]), window_reference(rows, 4, "max"))


@pytest.mark.slow  # about 70 part builds
def test_views_keep_a_bounded_history_and_their_contents(db) -> None:
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    now, _ = readings(range(0, 2), seed=11, skip=0.0)
    frames = [now]
    stream.append(now)
    db.create_stream_view(PATTERN_VIEW, lateness_parts=1)
    db.create_stream_view(SUM_VIEW.replace(" AS\n", " USING INCREMENTAL AS\n", 1), lateness_parts=1)
    db.create_stream_view(MAX_VIEW.replace(" AS\n", " USING INCREMENTAL AS\n", 1), lateness_parts=1)
    # the same max window as earlier versions made it: a helper, whose dropped parts late rows
    # many parts back make it rebuild (tests/legacy_windows.py)
    create_legacy_window_view(db, MAX_VIEW.replace("VIEW peaks", "VIEW old_peaks"), lateness_parts=1)
    views = db.stream_views(helpers=True)
    assert views == ["old_peaks", "old_peaks__helper", "peaks", "recent", "rising"]
    for name in views:
        db.stream_view(name).set_keep_versions(KEEP)
    expired_seen = False
    held_late = []
    for minute in range(2, 16):
        now, later = readings([minute], seed=100 + minute, skip=0.3)
        frames.append(now)
        held_late.append(later)
        stream.append(now)
        for name in views:
            held = _held(db, name)
            assert held <= KEEP + max(KEEP // 2, 1) + 1, (name, held)
            expired_seen |= held < minute
    assert expired_seen
    _check(db, frames)
    # late rows one part back (recomputed) and many parts back (rebuilt) after versions were forgotten
    late = pd.concat(held_late, ignore_index=True)
    frames.append(late)
    result = stream.append(late)
    assert any(m.recomputed for m in result.maintenance) and any(m.rebuilt for m in result.maintenance)
    _check(db, frames)
    for name in views:
        table = db.stream_view(name)._handle.table
        table.refresh()
        left = set(table_files(table.table)) - live_files(table.table)
        assert not left, f"{name}: files of forgotten versions left: {sorted(left)[:3]}"


def test_the_versions_kept_must_be_a_positive_number(db) -> None:
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(readings(range(0, 2), seed=1, skip=0.0)[0])
    db.create_stream_view(SUM_VIEW)
    view = db.stream_view("recent")
    for bad in (0, -1, 2.5, True, "10"):
        with pytest.raises(ValidationError, match="versions kept"):
            view.set_keep_versions(bad)
    view.set_keep_versions(7)
    assert view._handle.table.properties["arrayviews.viewdf.keep-versions"] == "7"
