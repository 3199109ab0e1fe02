"""Starting or adopting the Spark session arrayviews runs on (local mode by default)."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

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


def start_session(
    master: str | None = None, config: dict[str, str] | None = None, app_name: str = "arrayviews"
) -> SparkSession:
    """Start (or return the running) Spark session.

    ``master`` defaults to ``local[*]`` (all cores); any Spark master URL works
    (``spark://host:7077``, ``yarn``, ``local-cluster[2,1,1024]``). Python workers use this
    interpreter, so the installed ``arrayviews`` package is importable inside tasks.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    cores = os.cpu_count() or 2
    settings = {**DEFAULT_CONFIG, "spark.sql.shuffle.partitions": str(max(4, 2 * cores)), **(config or {})}
    builder = SparkSession.builder.appName(app_name).master(master or "local[*]")
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
