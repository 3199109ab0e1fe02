"""A translated pattern view is one table: its stored rows are the paper's Helper (every active
partial match of each part, read back by its own next step), and every reader sees only the
complete matches with the query's columns (streams/presentation.py). One maintenance step is then
one commit. Against the plain-Python pattern reference, on both executors."""

from __future__ import annotations

import pandas as pd
import pytest

import arrayviews
from test_translated_views import (
    PATTERN_VIEW,
    SCHEMA,
    assert_same,
    pattern_reference,
    readings,
    stored,
    with_parts,
)

READER = """CREATE VIEW copied AS
INITIALIZE copied[i] AS SELECT src, dest, ct, total FROM rising[i]
UPDATE copied[j] AS SELECT src, dest, ct, total FROM rising[j]
PARTITION LENGTH 60"""


@pytest.mark.slow
def test_a_pattern_step_is_one_commit_and_every_reader_sees_the_complete_matches(db_on) -> None:
    db, executor = db_on
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    first, _ = readings(range(0, 4), seed=11, skip=0.0)
    stream.append(first)
    view = db.stream_view(db.create_stream_view(PATTERN_VIEW).name)
    db.create_stream_view(READER)
    assert set(db.stream_views(helpers=True)) == {"rising", "copied"}  # no helper table
    frames = [first]
    for minute in range(4, 9):
        now, _ = readings([minute], seed=minute, skip=0.0)
        before = view.status()["version"]
        result = stream.append(now)
        frames.append(now)
        rising = [m for m in result.maintenance if m.view == "rising"]
        assert [m.built for m in rising] == [[(first.ts.min().value // 10**9) // 60 + minute]]
        # the reader's part is built where asked (in-process it reads the presented rows there)
        assert {m.executor for m in result.maintenance} == {executor}
        assert view.status()["version"] == before + 1  # the whole step: one commit
    expected = pattern_reference(with_parts(frames))
    columns = ["src", "dest", "ct", "total"]
    assert_same(stored(db, "rising", columns), expected)
    assert_same(stored(db, "copied", columns), expected)  # a view reading it sees the same rows
    assert list(view.read().columns) == [*columns, "PART_TIMESTAMP"]
    over_sql = db.sql("SELECT src, dest, ct, total FROM rising").toPandas()
    assert sorted(map(tuple, over_sql.itertuples(index=False))) == sorted(
        row for rows in expected.values() for row in rows
    )
    # the stored rows hold the partial matches too (the next step reads them); readers never do
    table = view._handle.table
    raw = table.read_parts(db.spark, *view.parts()[:: len(view.parts()) - 1]).toPandas()
    assert raw["s3_ct"].isna().sum() > 0 and (raw["s1_ct"].notna() | raw["s2_ct"].notna()).any()
    assert len(raw) > sum(len(rows) for rows in expected.values())


def test_explain_says_what_readers_see(db_on) -> None:
    db, _ = db_on
    db.create_stream("M", SCHEMA, 60, "ts")
    shown = db.sql("EXPLAIN " + PATTERN_VIEW)
    text = shown if isinstance(shown, str) else "\n".join(str(r[0]) for r in shown.collect())
    assert "one table holding the Helper's rows; readers see src, dest, s3_ct AS ct" in text
    assert "rising[j-1]" in text and "__helper" not in text


def test_a_view_without_a_presentation_is_read_as_stored(spark, tmp_path) -> None:
    """Hand-written ViewDFs, and the helper and final views of pattern views created before this
    (their stored definitions have no presentation), are read as stored."""
    from arrayviews.model.viewdf import ViewDFDefinition

    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark)
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    rows, _ = readings(range(0, 5), seed=3, skip=0.0)
    stream.append(rows)
    db.create_stream_view(READER.replace("rising", "M").replace("src, dest, ct, total", "src, dest, loss"))
    definition = db.stream_view("copied")._handle.definition
    assert definition.presentation is None
    assert ViewDFDefinition.from_json(definition.to_json()).presentation is None
    got = db.stream_view("copied").to_pandas()  # built from the newest part (no backfill)
    newest = rows[rows.ts >= pd.Timestamp(rows.ts.max()).floor("60s")]
    assert list(got.columns) == ["src", "dest", "loss", "PART_TIMESTAMP"]
    assert sorted(got[["src", "dest", "loss"]].itertuples(index=False, name=None)) == sorted(
        newest[["src", "dest", "loss"]].itertuples(index=False, name=None)
    )
