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
    import tempfile

    root = scratch_root()
    root.mkdir(parents=True, exist_ok=True)
    return tempfile.mkdtemp(prefix=prefix, dir=root)


#: How fast a new file must be made in the scratch folder for the run to start (see SCRATCH): about
#: 15 us when no deletion is recent, up to 300 us within minutes of one.
QUIET_CREATION_SECONDS = 50e-6
#: The longest wait for that: the kernel skips an inode freed in the last 60 s, or the last 360 s
#: while its inode table block is still dirty (which new files in the same block keep it).
QUIET_WAIT_SECONDS = 420.0
#: What the run's start found (``wait_for_quiet_files``), written into every result file.
START_CONDITIONS: dict = {}


def file_creation_seconds(folder: str, count: int = 12) -> float:
    """The median time to create one empty file in ``folder`` (``count`` new files, left in place:
    deleting them would slow the next creations)."""
    import os
    import statistics
    import uuid

    times = []
    for _ in range(count):
        path = os.path.join(folder, f"probe-{uuid.uuid4().hex}")
        start = time.perf_counter()
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


#: A file in the scratch root whose time is that of the last benchmark cleanup (deleting a run's
#: warehouses): a new folder may well take its inodes from the block groups that cleanup freed,
#: which a probe in another folder does not see, so the wait also counts from it.
CLEANUP_MARK = ".last-cleanup"


def scratch_root() -> Path:
    import os

    return Path(os.environ.get("ARRAYVIEWS_BENCH_DIR") or SCRATCH)


def note_cleanup() -> None:
    """Record that a benchmark deleted its folders now (see CLEANUP_MARK)."""
    root = scratch_root()
    root.mkdir(parents=True, exist_ok=True)
    (root / CLEANUP_MARK).write_text(f"{time.time():.0f}\n")


def wait_for_quiet_files(
    folder: str, limit: float = QUIET_CREATION_SECONDS, timeout: float = QUIET_WAIT_SECONDS
) -> dict:
    """Wait (at most ``timeout`` seconds in all) until the last benchmark cleanup is ``timeout``
    seconds old and creating a file in ``folder`` takes under ``limit``: a run started minutes after
    another run (or a test suite) deleted its thousands of files pays up to 20 times as much for each
    file its commits create, which a baseline that rewrites one file does not. Returns, and records
    in START_CONDITIONS, the seconds waited and the creation time found."""
    started = time.perf_counter()
    mark = scratch_root() / CLEANUP_MARK
    try:
        since_cleanup = time.time() - float(mark.read_text().strip())
    except (OSError, ValueError):
        since_cleanup = None
    if since_cleanup is not None and 0 <= since_cleanup < timeout:
        print(
            f"the last benchmark cleanup was {since_cleanup:.0f} s ago: waiting {timeout - since_cleanup:.0f} s"
        )
        time.sleep(timeout - since_cleanup)
    creation = file_creation_seconds(folder)
    while creation > limit and time.perf_counter() - started < timeout:
        time.sleep(10)
        creation = file_creation_seconds(folder)
    waited = time.perf_counter() - started
    START_CONDITIONS.update(
        {"waited_for_quiet_files_s": round(waited, 1), "file_creation_at_start_s": creation}
    )
    print(
        f"file creation at start: {creation * 1e6:.0f} us (waited {waited:.0f} s for under {limit * 1e6:.0f} us)"
    )
    return dict(START_CONDITIONS)


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
        **({"start": START_CONDITIONS} if START_CONDITIONS else {}),
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
