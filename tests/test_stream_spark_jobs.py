"""Spark ViewDF steps as few Spark jobs: each view part built on Spark is one job (no job per
adaptive stage or per broadcast), with contents equal to the naive run-length reference."""

from __future__ import annotations

import arrayviews
from test_stream_views import M0, SCHEMA, VIEW2, Truth, at_least, contents, helper_text, network, run_lengths


def test_each_part_built_on_spark_is_one_job_and_contents_match_the_reference(spark, tmp_path) -> None:
    """Helper (a left join of the new minute with the helper's previous part: a shuffle and a join)
    and View2 over it, one minute a step: two Spark jobs a step, one per view part."""
    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution="spark")
    truth = Truth()
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(truth.add(network(range(2))))
    db.sql(helper_text())
    db.sql(VIEW2)
    tracker = spark.sparkContext.statusTracker()
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    jobs = []
    for minute in range(2, 8):
        group = f"one-job-step-{minute}"
        spark.sparkContext.setJobGroup(group, "a stream step")
        try:
            result = stream.append(truth.add(network([minute])))
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        assert [(r.view, r.built, r.executor) for r in result.maintenance] == [
            ("helper", [M0 + minute], "spark"),
            ("view2", [M0 + minute], "spark"),
        ]
        jobs.append(len(tracker.getJobIdsForGroup(group)))
    assert jobs == [2] * 6  # before: 3 a step (the adaptive shuffle stage and the broadcast each a job)
    assert spark.conf.get("spark.sql.adaptive.enabled") == adaptive  # the session's setting is back
    reference = run_lengths(truth.rows(), M0 + 1, M0 + 7)
    assert contents(db, "Helper") == reference
    assert contents(db, "View2") == at_least(reference)
    assert contents(db, "View2")  # not trivially empty
