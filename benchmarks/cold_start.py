"""A fresh process doing small array work: Spark started on first use (what ``connect`` does) against
Spark started at connect (before), alternated in the same run; wall time per process."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.common import bar_plot, write_results

#: The work of one process: open a new warehouse, create, insert, read a subarray, create and
#: refresh a window view (all small: in-process by cost). ``EAGER`` starts Spark first.
WORK = """
import sys
import numpy as np
import arrayviews
from arrayviews.execution.session import start_session
if sys.argv[2] == "eager":
    start_session()
db = arrayviews.connect(sys.argv[1])
A = db.create_array("A<v:float64>[i=0:99:10; j=0:99:10]")
A.insert({"i": np.arange(100), "j": np.arange(100)[::-1], "v": np.ones(100)})
assert len(A.subarray(i=(0, 49)).to_pandas()) == 50
db.sql("CREATE ARRAY VIEW W AS SELECT * FROM window(A, 1, 1, 1, 1, sum(v))")
A.insert({"i": [5], "j": [5], "v": [2.0]})
db.sql("REFRESH VIEW W")
"""


def _one(mode: str) -> float:
    folder = tempfile.mkdtemp(prefix="cold-start-")
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", WORK, f"{folder}/w", mode], check=True, capture_output=True)
    return time.perf_counter() - started


def run(db, quick: bool = False) -> dict:
    rounds = 2 if quick else 5
    times: dict[str, list[float]] = {"lazy": [], "eager": []}
    for _ in range(rounds):  # alternated, so both see the same machine
        for mode in ("eager", "lazy"):
            times[mode].append(_one(mode))
    lazy, eager = statistics.median(times["lazy"]), statistics.median(times["eager"])
    return {
        "rounds": rounds,
        "seconds": times,
        "lazy_median_s": lazy,
        "eager_median_s": eager,
        "eager_over_lazy": eager / lazy,
    }


def report(results: dict, quick: bool) -> None:
    print(
        f"fresh process, small work: Spark at connect {results['eager_median_s']:.2f} s, "
        f"on first use {results['lazy_median_s']:.2f} s: {results['eager_over_lazy']:.2f}x "
        f"(medians of {results['rounds']} alternated runs)"
    )
    tail = "_quick" if quick else ""
    write_results("cold_start" + tail, results)
    bar_plot(
        "cold_start" + tail,
        "A fresh process doing small array work (create, insert, subarray, window view refresh)",
        [f"run {k + 1}" for k in range(results["rounds"])],
        {
            "Spark started at connect (before)": results["seconds"]["eager"],
            "Spark started on first use (now)": results["seconds"]["lazy"],
        },
        "seconds",
    )
