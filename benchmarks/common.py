"""Shared benchmark plumbing: timing, result files (JSON) and plots (PNG)."""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
#: Where benchmarks keep their warehouses and scratch files unless ARRAYVIEWS_BENCH_DIR says: beside
#: the results, not the system's temporary folder. Creating a file in /tmp on the machine these
#: figures come from was once measured at 0.31 ms against 0.02 ms elsewhere on the same disk, which
#: would charge every Iceberg commit (4 new files) for the folder rather than for its work. Round 29
#: found why (not a sandbox hook, as first thought): the disk is ext4 without a journal, where a file
#: created within a minute of a mass deletion nearby takes 20-50 times as long, and test runs delete
#: thousands of files in /tmp (docs/performance.md, round 29; /tmp measured 0.012 ms when quiet).
#: The embedded default keeps its warehouse under the working directory too (./warehouse).
SCRATCH = Path(__file__).resolve().parent / "results" / "tmp"


def scratch_dir(prefix: str) -> str:
    """A new empty folder for one benchmark's warehouse or files (the caller removes it)."""
    import os
    import tempfile

    root = Path(os.environ.get("ARRAYVIEWS_BENCH_DIR") or SCRATCH)
    root.mkdir(parents=True, exist_ok=True)
    return tempfile.mkdtemp(prefix=prefix, dir=root)


def timed(function: Callable[[], object], repeat: int = 1) -> tuple[float, object]:
    """Best wall time of ``repeat`` runs of ``function`` and the last result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def machine() -> dict:
    import os

    return {"python": platform.python_version(), "machine": platform.machine(), "cores": os.cpu_count()}


def write_results(name: str, results: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {
        "benchmark": name,
        "machine": machine(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **results,
    }
    path.write_text(json.dumps(payload, indent=2, default=float) + "\n")
    return path


def bar_plot(name: str, title: str, labels: list[str], series: dict[str, list[float]], ylabel: str) -> Path:
    """A grouped bar chart, one group per label and one bar per series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    figure, axis = plt.subplots(figsize=(max(6, 1.6 * len(labels)), 4))
    width = 0.8 / max(1, len(series))
    positions = np.arange(len(labels))
    for k, (label, values) in enumerate(series.items()):
        axis.bar(positions + k * width, values, width, label=label)
    axis.set_xticks(positions + width * (len(series) - 1) / 2, labels, rotation=15, ha="right")
    axis.set_ylabel(ylabel)
    axis.set_title(title)
    axis.legend()
    figure.tight_layout()
    path = RESULTS / f"{name}.png"
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
