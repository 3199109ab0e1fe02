"""A warehouse opened in a fresh process starts Spark only when work needs it: small array, view
and uncertain work runs in-process without the JVM; streams and Spark SQL start it on first use.
Results are checked against numpy and pandas references."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np, pandas as pd
    from pyspark import SparkContext
    import arrayviews

    out = {}
    def started():
        return SparkContext._active_spark_context is not None

    db = arrayviews.connect(sys.argv[1], execution="auto")
    out["repr"] = repr(db)
    A = db.create_array("A<v:int64>[i=0:19:10; j=0:19:10]")
    rng = np.random.default_rng(3)
    grid = rng.integers(-5, 5, (20, 20))
    i, j = np.nonzero(np.ones((20, 20), bool))
    A.insert({"i": i, "j": j, "v": grid[i, j]})
    out["sum"] = int(A.to_pandas()["v"].sum())
    out["want_sum"] = int(grid.sum())
    db.sql("CREATE ARRAY VIEW W AS SELECT * FROM window(A, 1, 1, 1, 1, sum(v))")
    A.insert({"i": [4], "j": [5], "v": [100]}, on_conflict="replace")
    grid[4, 5] = 100
    db.sql("REFRESH VIEW W")
    frame = db.array("W").to_pandas()
    padded = np.pad(grid, 1)
    want = sum(padded[1 + a : 21 + a, 1 + b : 21 + b] for a in (-1, 0, 1) for b in (-1, 0, 1))
    out["window_ok"] = bool(
        len(frame) == 400 and all(want[r.i, r.j] == r.v_sum for r in frame.itertuples())
    )
    U = db.create_uncertain_array("U<>[x=0:9:5]")
    U.insert({"x": [1.5, 7.5], "x_sigma": [0.5, 0.5]})
    out["uncertain_rows"] = len(U.subarray(x=(0, 4), threshold=0.5).to_pandas())
    out["started_after_arrays"] = started()

    S = db.create_stream("S", "ts timestamp, g string, x int", 60, "ts")
    out["started_after_stream"] = started()
    db.sql("CREATE VIEW T AS SELECT g, sum(x) AS s FROM S [WINDOW 2 MINUTES] GROUP BY g")
    S.append(pd.DataFrame({"ts": pd.to_datetime([0, 70], unit="s", utc=True), "g": ["a", "a"], "x": [1, 2]}))
    out["stream_sums"] = sorted(db.stream_view("T").to_pandas()["s"].tolist())
    print(json.dumps(out))
    """
)


@pytest.mark.slow
def test_small_work_in_a_fresh_process_never_starts_spark(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "warehouse")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["repr"].endswith("not started yet>")
    assert out["sum"] == out["want_sum"]
    assert out["window_ok"]
    assert out["uncertain_rows"] == 1  # only the tuple at 1.5 has half its mass in cells 0..4
    assert out["started_after_arrays"] is False
    assert out["started_after_stream"] is True
    assert out["stream_sums"] == [1, 3]  # pandas: the windows {1} and {1, 2}
