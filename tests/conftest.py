"""Shared fixtures: one local Spark session for the whole run, a fresh warehouse per test."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

#: The Spark master of the run's one session: ``local[2]``, or what this variable names (the
#: contract suite reruns tests/test_executors.py with ``local-cluster[2,1,1024]``: separate
#: executor JVMs and Python workers, so nothing may rely on sharing the driver's process).
MASTER_VARIABLE = "ARRAYVIEWS_TEST_MASTER"


@pytest.fixture(scope="session")
def spark():
    """One Spark session (local mode, 2 cores, few shuffle partitions) shared by every test."""
    from arrayviews.execution.session import start_session

    master = os.environ.get(MASTER_VARIABLE) or "local[2]"
    config = {
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "2g",
    }
    if master.startswith("local-cluster"):
        config["spark.executor.memory"] = "1g"  # what each worker of local-cluster[2,1,1024] offers
    session = start_session(master=master, config=config, app_name="arrayviews-tests")
    yield session
    session.stop()


@pytest.fixture
def db(spark, tmp_path):
    """A database on a fresh, empty warehouse in a temporary folder (real SQLite catalog)."""
    import arrayviews

    return arrayviews.connect(str(tmp_path / "warehouse"), spark=spark)


@pytest.fixture(params=["local", "spark"])
def db_on(request, spark, tmp_path):
    """(database, executor): stream views maintained in-process or on Spark (each test runs on both)."""
    import arrayviews

    return arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution=request.param), request.param
