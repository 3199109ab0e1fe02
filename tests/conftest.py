"""Shared fixtures: one local Spark session for the whole run, a fresh warehouse per test."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark():
    """One Spark session (local mode, 2 cores, few shuffle partitions) shared by every test."""
    from arrayviews.execution.session import start_session

    session = start_session(
        master="local[2]",
        config={
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "2g",
        },
        app_name="arrayviews-tests",
    )
    yield session
    session.stop()


@pytest.fixture
def db(spark, tmp_path):
    """A database on a fresh, empty warehouse in a temporary folder (real SQLite catalog)."""
    import arrayviews

    return arrayviews.connect(str(tmp_path / "warehouse"), spark=spark)
