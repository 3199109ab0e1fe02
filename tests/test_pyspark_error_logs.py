"""PySpark writes every SQL error it captures, with the JVM's stack trace, as JSON lines on stderr.
arrayviews silenced them only inside its own calls, so a query the user ran on a DataFrame that
``db.sql`` gave still printed kilobytes of Java trace beside the exception. They now log only at
the log level asked for (execution/session.py), as the JVM's own log does."""

from __future__ import annotations

import logging

import pytest
from pyspark.errors import PySparkException

from arrayviews.execution import session


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _failing_collect(db) -> None:
    frame = db.sql("SELECT CAST(g AS INT) AS n FROM T GROUP BY g")  # lazy: fails on the user's collect
    with pytest.raises(PySparkException, match="CAST_INVALID_INPUT"):
        frame.collect()


def test_a_failing_query_on_a_users_dataframe_logs_no_java_trace(db):
    db.sql("CREATE ARRAY T <g:string> [i=0:9:10]")
    db.sql("INSERT INTO T VALUES (1, 'x')")
    kept = _Kept()
    logger = logging.getLogger("SQLQueryContextLogger")
    logger.addHandler(kept)
    try:
        _failing_collect(db)
        assert kept.records == []  # before: one ERROR record, printed as JSON with the Java frames
        session._query_context_logs("ERROR")  # a log level asked for brings them back
        _failing_collect(db)
        assert [r.levelname for r in kept.records] == ["ERROR"]
    finally:
        session._query_context_logs("OFF")
        logger.removeHandler(kept)
