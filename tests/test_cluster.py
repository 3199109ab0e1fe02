"""The contract suite in cluster mode: tests/test_executors.py run again in a child process whose one
Spark session has the master ``local-cluster[2,1,1024]``.

Two executor JVMs, each with its own Python workers, run the tasks: code that works only because
tasks share the driver's process (module state, closures over driver objects, relative paths, a
PYTHONPATH the workers lack) fails there. A second master cannot live in this test run's process,
hence the child (tests/conftest.py reads the master from ARRAYVIEWS_TEST_MASTER).
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from conftest import MASTER_VARIABLE

TESTS = Path(__file__).parent
CLUSTER = "local-cluster[2,1,1024]"


@pytest.mark.slow
def test_the_executor_contract_holds_on_local_cluster(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    env = {
        **os.environ,
        MASTER_VARIABLE: CLUSTER,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(TESTS / "test_executors.py"),
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            f"--basetemp={tmp_path / 'child'}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
        cwd=TESTS.parent,
    )
    assert process.returncode == 0, f"the contract failed on {CLUSTER}:\n{process.stdout[-6000:]}"
    suite = ElementTree.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    assert counts["failures"] == counts["errors"] == counts["skipped"] == 0, counts
    names = [case.get("name") for case in suite.iter("testcase")]
    assert "test_the_session_runs_on_the_configured_master" in names
    assert any(name.startswith("test_writes_on_every_executor") for name in names)
    assert any(name.startswith("test_viewdf_steps") for name in names)
    assert counts["tests"] >= 15, counts
