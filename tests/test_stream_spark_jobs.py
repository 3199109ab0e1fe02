"""Spark ViewDF steps as few Spark jobs: a view and the one view reading it build their new parts
in one Spark job (each part's write without a job per adaptive stage or per broadcast), with
contents equal to the in-process executor and to the naive run-length reference; a crash between
the two commits and a failing consumer leave states the next pass repairs or reports."""

from __future__ import annotations

import contextlib

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

import arrayviews
import arrayviews.streams.fusion as fusion
from arrayviews.execution.part_jobs import SparkPartTable, stage_together
from arrayviews.model.faults import InjectedFault, inject, interleave
from test_stream_views import (
    M0,
    SCHEMA,
    VIEW2,
    Truth,
    at_least,
    contents,
    folder_files,
    helper_and_reader,
    helper_text,
    network,
    run_lengths,
)

FUSED = "built in one Spark job with the helper it reads"


@pytest.fixture
def fused(monkeypatch):
    """Steps fusing a view's part with its reader's (the default; set here so the tests do not
    depend on it)."""
    monkeypatch.setattr(fusion, "FUSE_READER_PARTS", True)


def _persisted(spark) -> int:
    """How many RDDs the session keeps cached."""
    return spark.sparkContext._jsc.getPersistentRDDs().size()


@pytest.mark.parametrize("fuse", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_a_helper_and_its_reader_are_one_spark_job_a_step_with_contents_of_both_executors(
    spark, tmp_path, monkeypatch, fuse
) -> None:
    """Helper (a left join of the new minute with the helper's previous part: a shuffle and a join)
    and View2 over it, one minute a step: one Spark job a step for both views' parts (two with
    fusion off); nothing stays cached after a step; the contents equal the same steps run
    in-process and the plain-Python run-length reference."""
    monkeypatch.setattr(fusion, "FUSE_READER_PARTS", fuse)
    cached = _persisted(spark)
    truth = Truth()
    db, stream = helper_and_reader(spark, tmp_path / "spark", truth, "spark")
    local, local_stream = helper_and_reader(spark, tmp_path / "local", Truth(), "local")
    tracker = spark.sparkContext.statusTracker()
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    jobs = []
    for minute in range(2, 8):
        rows = truth.add(network([minute]))
        group = f"one-job-step-{fuse}-{minute}"
        spark.sparkContext.setJobGroup(group, "a stream step")
        try:
            result = stream.append(rows)
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        local_stream.append(rows)
        assert [(r.view, r.built, r.executor) for r in result.maintenance] == [
            ("Helper", [M0 + minute], "spark"),
            ("View2", [M0 + minute], "spark"),
        ]
        assert (FUSED in result.maintenance[1].executor_reason) == fuse
        assert _persisted(spark) == cached  # the helper's rows shared by the fused job are uncached
        jobs.append(len(tracker.getJobIdsForGroup(group)))
    # before: 3 a step (adaptive shuffle stage and broadcast each a job), then 2 (one per view part)
    assert jobs == [1 if fuse else 2] * 6
    assert spark.conf.get("spark.sql.adaptive.enabled") == adaptive  # the session's setting is back
    reference = run_lengths(truth.rows(), M0 + 1, M0 + 7)
    assert contents(db, "Helper") == reference == contents(local, "Helper")
    assert contents(db, "View2") == at_least(reference) == contents(local, "View2")
    assert contents(db, "View2")  # not trivially empty


@pytest.mark.slow  # about 12 Spark part builds
def test_a_crash_between_the_two_commits_is_repaired_by_the_next_pass(spark, tmp_path, fused) -> None:
    """The process "dies" after the helper's commit, as View2 is about to commit the part staged in
    the fused job: the helper holds the new part, View2 does not (its staged files are gone), and the
    next pass builds View2's part from the helper's committed files."""
    truth = Truth()
    db, stream = helper_and_reader(spark, tmp_path / "w", truth, "spark")
    for minute in range(2, 6):
        stream.append(truth.add(network([minute])))
    view2 = db.stream_view("View2")
    before = view2.status()
    files_before = folder_files(view2._handle.table)
    stream.append(truth.add(network([6])), maintain=False)
    with contextlib.ExitStack() as stack:
        # the first commit to finish is the helper's; from then on View2's step dies before its commit
        stack.enter_context(
            interleave("commit.done", lambda: stack.enter_context(inject("viewdf.before-commit")))
        )
        with pytest.raises(InjectedFault):
            db.maintain_streams()
    reference = run_lengths(truth.rows(), M0 + 1, M0 + 6)
    assert contents(db, "Helper") == reference  # the helper's part 6 is committed
    assert db.stream_view("View2").status() == before  # View2 is as it was
    assert folder_files(view2._handle.table) == files_before  # its part staged in the fused job is gone
    assert M0 + 6 not in contents(db, "View2")
    results = db.maintain_streams()
    assert [(r.view, r.built, r.error) for r in results] == [("View2", [M0 + 6], None)]
    assert contents(db, "View2") == at_least(reference)
    assert M0 + 6 in contents(db, "View2")


@pytest.mark.slow  # about 14 Spark part builds
def test_a_failing_reader_does_not_block_the_helper_it_is_fused_with(spark, tmp_path, fused) -> None:
    """A reader whose query fails on Spark (assert_true once a run reaches 5) fails the fused job;
    the helper is then built alone and committed, and only the reader is marked failed."""
    truth = Truth()
    db = arrayviews.connect(str(tmp_path / "w"), spark=spark, execution="spark")
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(truth.add(network(range(2))))
    db.sql(helper_text())
    db.sql(VIEW2.replace("View2", "Fragile").replace("WHERE ct >= 4", "WHERE assert_true(ct < 5) IS NULL"))
    failed = None
    for minute in range(2, 8):
        result = stream.append(truth.add(network([minute])))
        by_view = {r.view: r for r in result.maintenance}
        assert by_view["Helper"].built == [M0 + minute] and by_view["Helper"].error is None
        if by_view["Fragile"].error is not None and failed is None:
            failed = minute
    assert failed is not None, "the reader never failed: the test does not test anything"
    assert contents(db, "Helper") == run_lengths(truth.rows(), M0 + 1, M0 + 7)


def _staged_rows(staged) -> list[tuple]:
    rows = []
    for found in staged:
        table = pq.read_table(found.uri.removeprefix("file:"))
        rows.extend(tuple(r.values()) for r in table.to_pylist())
    return sorted(rows)


@pytest.mark.parametrize("shared", [True, False])
def test_a_frame_both_staged_frames_are_built_from_is_computed_once(spark, tmp_path, shared) -> None:
    """Two tables staged in one action from one grouped frame, each reading other columns of it (as
    a reader's query reads some of its helper's columns): with the frame shared it is computed once
    (a Python function in it sees each key once), not once per branch (the optimizer prunes each
    branch's copy of the frame to that branch's columns, so the exchange is not reused); both
    tables get the rows of a plain-Python reference, in one Spark job."""
    db = arrayviews.connect(str(tmp_path / "w"), spark=spark, execution="spark")
    catalog = db.warehouse.catalog
    wide = T.StructType([T.StructField(n, T.LongType()) for n in ("k", "n", "total", "seen")])
    narrow = T.StructType([T.StructField(n, T.LongType()) for n in ("k", "n", "seen")])
    tables = [
        SparkPartTable.create(catalog, "streams", name, schema, 60, "viewdf", {"definition": "test"})
        for name, schema in (("wide", wide), ("narrow", narrow))
    ]
    calls = spark.sparkContext.accumulator(0)

    def seen(key):
        calls.add(1)
        return key * 10

    values = [(k % 7, k) for k in range(200)]
    rows = spark.createDataFrame(values, "k long, v long")
    grouped = rows.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))
    base = grouped.withColumn("seen", F.udf(seen, "long")("k"))
    part = F.lit(5).cast("long").alias("_part")
    frames = [base.select("k", "n", "total", "seen", part), base.select("k", "n", "seen", part)]
    group = f"shared-{shared}"
    spark.sparkContext.setJobGroup(group, "stage together")
    try:
        staged = stage_together(list(zip(tables, frames, strict=True)), shared=[base] if shared else [])
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup(group)) == 1
    counts: dict[int, list[int]] = {}
    for key, value in values:
        counts.setdefault(key, []).append(value)
    reference = {k: (len(v), sum(v), k * 10) for k, v in counts.items()}
    assert _staged_rows(staged[0]) == sorted((k, n, t, s, 5) for k, (n, t, s) in reference.items())
    assert _staged_rows(staged[1]) == sorted((k, n, s, 5) for k, (n, _, s) in reference.items())
    # each key's row computed once when shared; once per branch when not (what the fused step did)
    assert calls.value == (7 if shared else 14)
    for table, files in zip(tables, staged, strict=True):
        table.discard(files)
