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


def test_inside_an_arrayviews_call_the_error_loggers_stay_silent_at_any_level(spark) -> None:
    """Inside an arrayviews call (any thread, nested calls) PySpark's error loggers print nothing,
    also when a log level asks for their records; outside, they print at that level."""
    import threading

    from pyspark.logger import PySparkLogger

    from arrayviews.execution.failures import PYSPARK_ERROR_LOGGERS, translated_errors

    kept = _Kept()
    loggers = [PySparkLogger.getLogger(name) for name in PYSPARK_ERROR_LOGGERS]
    for logger in loggers:
        logger.addHandler(kept)
    try:
        session._query_context_logs("ERROR")
        with translated_errors():
            with translated_errors():
                loggers[0].error("inside, nested")
            loggers[1].error("inside")
            other = threading.Thread(target=lambda: loggers[0].error("another thread, during the call"))
            other.start()
            other.join()
        loggers[0].error("outside")
        assert [r.getMessage() for r in kept.records] == ["outside"]
        session._query_context_logs("OFF")
        loggers[1].error("outside, level OFF")
        assert [r.getMessage() for r in kept.records] == ["outside"]
    finally:
        session._query_context_logs("OFF")
        for logger in loggers:
            logger.removeHandler(kept)
