"""Starting or adopting the Spark session arrayviews runs on (local mode by default), quietly.

A session arrayviews starts logs nothing on the terminal by default: the JVM reads the log4j2
configuration shipped next to this module (root level from ``log_level``), and its own start-up
notices and stack dumps go to a log file (``spark_log_file()``, removed when the process ends)
instead of the terminal. A log level
other than ``OFF`` (``arrayviews --verbose`` / ``--log-level``, or ``$ARRAYVIEWS_LOG_LEVEL``) brings
everything back. A session that is already running is adopted as it is.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import tempfile
import threading
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from arrayviews.execution.failures import set_pyspark_error_log_level
from arrayviews.model.errors import ExecutionError, ValidationError

#: Settings every arrayviews session gets unless the caller overrides them.
DEFAULT_CONFIG = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
    "spark.sql.session.timeZone": "UTC",
    "spark.python.worker.reuse": "true",
    "spark.driver.memory": "4g",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
}
#: Log levels of log4j, quietest first.
LOG_LEVELS = ("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL")
LOG_LEVEL_VARIABLE = "ARRAYVIEWS_LOG_LEVEL"
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")

_log_file: str | None = None


def resolve_log_level(level: str | None = None) -> str:
    """The log level to use: ``level``, else ``$ARRAYVIEWS_LOG_LEVEL``, else ``OFF``."""
    chosen = (level or os.environ.get(LOG_LEVEL_VARIABLE) or "OFF").strip().upper()
    if chosen not in LOG_LEVELS:
        raise ValidationError(f"unknown log level {chosen!r}; use one of {', '.join(LOG_LEVELS)}")
    return chosen


def spark_log_file() -> str | None:
    """Where the JVM of a quiet session writes what it would have printed (None if not redirected)."""
    return _log_file


def start_session(
    master: str | None = None,
    config: dict[str, str] | None = None,
    app_name: str = "arrayviews",
    log_level: str | None = None,
) -> SparkSession:
    """Start (or return the running) Spark session.

    ``master`` defaults to ``local[*]`` (all cores); any Spark master URL works
    (``spark://host:7077``, ``yarn``, ``local-cluster[2,1,1024]``). Python workers use this
    interpreter, so the installed ``arrayviews`` package is importable inside tasks. ``log_level``
    (see :func:`resolve_log_level`) sets how much Spark prints.
    """
    level = resolve_log_level(log_level)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    cores = os.cpu_count() or 2
    settings = {**DEFAULT_CONFIG, "spark.sql.shuffle.partitions": str(max(4, 2 * cores)), **(config or {})}
    if SparkContext._active_spark_context is None:
        options = settings.get("spark.driver.extraJavaOptions", "")
        if "log4j2.configurationFile" not in options:
            ours = (
                f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()} -Darrayviews.log.level={level.lower()}"
            )
            settings["spark.driver.extraJavaOptions"] = f"{options} {ours}".strip()
        if level == "OFF":
            _start_quiet_context(master or "local[*]", app_name, settings)
    builder = SparkSession.builder.appName(app_name).master(master or "local[*]")
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(level)
    _query_context_logs(level)
    return session


def _query_context_logs(level: str) -> None:
    """PySpark logs every SQL error it captures, with the JVM's stack trace, as JSON lines on
    stderr, also for a query the user runs on a DataFrame arrayviews gave: those loggers print only
    at the level asked for (``OFF`` by default, as the JVM's own log)."""
    set_pyspark_error_log_level(
        logging.CRITICAL + 1 if level == "OFF" else getattr(logging, level, logging.DEBUG)
    )


class LazySession:
    """A Spark session started on first use: a warehouse opened for small, in-process work (a
    syntax check, a listing, a one-chunk read or refresh) never waits for the JVM to start. Every
    attribute is the started session's (``LazySession`` stands wherever a ``SparkSession`` goes)."""

    def __init__(self, master: str | None = None, config: dict[str, str] | None = None) -> None:
        self._master, self._config = master, dict(config or {})
        self._session: SparkSession | None = None
        self._starting = threading.Lock()

    @property
    def started(self) -> bool:
        """Whether the session has been started (by a use of this object or by anyone else)."""
        return self._session is not None or SparkContext._active_spark_context is not None

    @property
    def master(self) -> str:
        """The master URL asked for (the session's own once it runs), without starting it."""
        if self._session is not None:
            return self._session.sparkContext.master
        return self._master or "local[*]"

    def session(self) -> SparkSession:
        """The session, started now if it was not."""
        with self._starting:  # two threads' first uses start one session
            if self._session is None:
                self._session = start_session(master=self._master, config=self._config)
        return self._session

    def stop(self) -> None:
        """Stop the session if it was started (a session never started is not started to stop it)."""
        if self._session is not None:
            self._session.stop()
            self._session = None

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("_session", "_master", "_config", "_starting"):
            raise AttributeError(name)  # copy, pickle and repr probes do not start Spark
        return getattr(self.session(), name)


def ensure_started(spark):
    """``spark`` with its session running: a :class:`LazySession` is started now (code that calls
    pyspark functions needing an active session, as streams do, calls this first)."""
    if isinstance(spark, LazySession):
        spark.session()
    return spark


def _start_quiet_context(master: str, app_name: str, settings: dict[str, str]) -> None:
    """Start the JVM with its standard error going to a log file, and a SparkContext on it."""
    from pyspark.java_gateway import launch_gateway

    global _log_file
    conf = SparkConf(loadDefaults=False).setMaster(master).setAppName(app_name)
    for key, value in settings.items():
        conf.set(key, value)
    handle, path = tempfile.mkstemp(prefix="arrayviews-spark-", suffix=".log")
    try:
        with os.fdopen(handle, "w") as log:
            gateway = launch_gateway(conf, popen_kwargs={"stderr": log})
    except Exception as error:  # noqa: BLE001 - Java missing or the JVM died while starting
        tail = Path(path).read_text(errors="replace").strip().splitlines()[-5:]
        raise ExecutionError(
            f"Spark could not start ({error}); its last words: {' | '.join(tail) or 'none'} (log: {path})"
        ) from None
    _log_file = path
    atexit.register(_remove_log, path)
    SparkContext(conf=conf, gateway=gateway)


def _remove_log(path: str) -> None:
    """The JVM's log of a session that ran to its end is not kept (``--verbose`` shows it live)."""
    with contextlib.suppress(OSError):
        os.remove(path)
