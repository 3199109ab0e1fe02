"""Cluster mode: the same job on two executor JVMs (local-cluster) gives the numpy reference results.

tests/cluster_job.py runs in a child process (it needs its own Spark application with a
``local-cluster[2,1,1024]`` master); its inputs come from ``cluster_job.make_data()``, from which
this test computes every expected result with numpy. Nothing may rely on driver state inside tasks.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

JOB = Path(__file__).with_name("cluster_job.py")


def _job_module():
    spec = importlib.util.spec_from_file_location("cluster_job", JOB)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_job(master: str, warehouse: Path) -> dict:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    process = subprocess.run(
        [sys.executable, str(JOB), master, str(warehouse)],
        capture_output=True,
        text=True,
        env=env,
        timeout=420,
        cwd=warehouse.parent,
    )
    assert process.returncode == 0, f"cluster job failed:\n{process.stderr[-4000:]}"
    return json.loads(process.stdout.strip().splitlines()[-1])


def _rows_close(actual: list[list], expected: list[list], what: str) -> None:
    assert len(actual) == len(expected), f"{what}: {len(actual)} rows, expected {len(expected)}"
    for got, want in zip(actual, expected, strict=True):
        assert len(got) == len(want), f"{what}: row {got} vs {want}"
        for x, y in zip(got, want, strict=True):
            if isinstance(y, float) or isinstance(x, float):
                assert x is not None and math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12), (
                    f"{what}: {got} vs {want}"
                )
            else:
                assert x == y, f"{what}: {got} vs {want}"


def _references(job) -> dict:
    data = job.make_data()
    i, j, v, k, w = data["i"], data["j"], data["v"], data["k"], data["w"]
    cells = sorted(zip(i.tolist(), j.tolist(), v.tolist(), k.tolist(), strict=True))
    ref: dict = {"insert": [1, len(cells)], "write_dense": [1, w.size]}
    ref["subarray"] = [list(c) for c in cells if 4 <= c[0] <= 15 and 3 <= c[1] <= 11]
    ref["filter"] = [list(c) for c in cells if c[2] > 0.5 and c[3] < 20]
    regrid = []
    for bi in range(math.ceil(job.SHAPE[0] / 5)):
        for bj in range(math.ceil(job.SHAPE[1] / 4)):
            block = w[bi * 5 : bi * 5 + 5, bj * 4 : bj * 4 + 4]
            regrid.append([bi, bj, float(block.mean()), float(block.max()), int(block.size)])
    ref["regrid"] = regrid
    ref["aggregate"] = [[0, int(k.sum()), len(cells), float(v.max())]]
    ref["aggregate_by"] = [[int(x), int(k[i == x].sum()), int((i == x).sum())] for x in np.unique(i)]
    ref["join"] = [[a, b, c, d, float(w[a, b])] for a, b, c, d in cells]
    (ilo, ihi), (jlo, jhi) = job.DELETE_BOX["i"], job.DELETE_BOX["j"]
    kept = [list(c) for c in cells if not (ilo <= c[0] <= ihi and jlo <= c[1] <= jhi)]
    ref["delete"] = [2, len(cells) - len(kept)]
    ref["after_delete"] = kept
    ref["count"] = len(kept)
    return ref


@pytest.mark.slow
def test_job_on_local_cluster_matches_numpy_references(tmp_path: Path) -> None:
    job = _job_module()
    results = _run_job("local-cluster[2,1,1024]", tmp_path / "warehouse")
    assert results["master"] == "local-cluster[2,1,1024]"
    assert results["executors"] == 2
    expected = _references(job)
    assert results["insert"] == expected["insert"]
    assert results["write_dense"] == expected["write_dense"]
    assert results["delete"] == expected["delete"]
    assert results["count"] == expected["count"]
    for key in ("subarray", "filter", "regrid", "aggregate", "aggregate_by", "join", "after_delete"):
        _rows_close(results[key], expected[key], key)
