"""Insert latency over a long history of small batches, and the warehouse size before and after
compaction + expiry (issue 8: bounded metadata).

Two arrays receive the same 1,000 batches of 10 new cells (driver-side inserts, one version each):
``plain`` is never maintained; ``maintained`` forgets all versions but the current one every 25
batches (``expire_versions``) and merges small files every 100 (``compact``), the routine upkeep
of any Iceberg table with frequent small commits; its cost is reported per batch. The baseline is
the mean latency of each array's first ten inserts, measured in the same run; the figure is the
ratio of the last ten to it. Also reported: the metadata folder's size along the way, and the
whole table folder before and after a final compact + expire.

Manifest merging (issue 11): a third array, ``unmerged``, receives the same batches with Iceberg's
manifest merging switched off (``commit.manifest-merge.enabled=false``), so each commit leaves one
more manifest. After the last batch, the planning latency of a full read of the current version
(median of five plans from a fresh table handle, so nothing is cached) of ``plain`` (merging on)
is compared with ``unmerged``, with the number of manifests each current snapshot lists."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pandas as pd

from arrayviews.storage import snapshots
from arrayviews.storage.versioned import VersionedTable
from benchmarks.common import RESULTS, write_results

MERGE = snapshots.TableProperties.MANIFEST_MERGE_ENABLED


def _planning(array) -> tuple[float, int]:
    """Median seconds of planning a full read of the current version, and the manifests listed."""
    table = array.source.table.table
    times = []
    for _ in range(5):
        fresh = VersionedTable(table)  # no plan kept from earlier reads
        started = time.perf_counter()
        fresh.live_files()
        times.append(time.perf_counter() - started)
    return float(np.median(times)), len(table.current_snapshot().manifests(table.io))


def _folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _batch(k: int, per_batch: int) -> pd.DataFrame:
    start = k * per_batch
    i = np.arange(start, start + per_batch, dtype=np.int64)
    return pd.DataFrame({"i": i, "v": i.astype(np.float64) * 0.5})


def run(db, quick: bool = False) -> dict:
    batches = 120 if quick else 1000
    expire_every, compact_every = 25, 100
    per_batch = 10
    results: dict = {
        "batches": batches,
        "cells_per_batch": per_batch,
        "expire_every": expire_every,
        "compact_every": compact_every,
    }
    for label in ("plain", "maintained", "unmerged"):
        name = f"H_{label}"
        # every commit restores the standard table properties: switch merging off while it runs
        snapshots.TABLE_PROPERTIES[MERGE] = "false" if label == "unmerged" else "true"
        try:
            results[label] = _history(db, name, label, batches, per_batch, expire_every, compact_every)
        finally:
            snapshots.TABLE_PROPERTIES[MERGE] = "true"
    merged, unmerged = results["plain"], results["unmerged"]
    results["planning_ratio_unmerged_to_merged"] = unmerged["planning_s"] / merged["planning_s"]
    return results


def _history(db, name, label, batches, per_batch, expire_every, compact_every) -> dict:
    """One array's history of small inserts (with upkeep when ``label`` is "maintained")."""
    array = db.create_array(f"{name}<v:float64>[i=0:{batches * per_batch - 1}:1000]")
    folder = Path(urlparse(array.source.table.table.location()).path)
    latencies, metadata_bytes, upkeep = [], [], 0.0
    for k in range(batches):
        started = time.perf_counter()
        array.insert(_batch(k, per_batch))
        latencies.append(time.perf_counter() - started)
        if label == "maintained" and (k + 1) % expire_every == 0:
            started = time.perf_counter()
            if (k + 1) % compact_every == 0:
                array.compact()
            array.expire_versions(orphans_older_than=pd.Timedelta(0).to_pytimedelta())
            upkeep += time.perf_counter() - started
        if k % 50 == 0 or k == batches - 1:
            metadata_bytes.append((k + 1, _folder_bytes(folder / "metadata")))
    planning, manifests = _planning(array)
    first, last = float(np.mean(latencies[:10])), float(np.mean(latencies[-10:]))
    first_median, last_median = float(np.median(latencies[:10])), float(np.median(latencies[-10:]))
    before = _folder_bytes(folder)
    array.compact()
    array.expire_versions(orphans_older_than=pd.Timedelta(0).to_pytimedelta())
    after = _folder_bytes(folder)
    assert array.count() == batches * per_batch
    return {
        "planning_s": planning,
        "manifests": manifests,
        "latency_s": latencies,
        "first_ten_mean_s": first,
        "last_ten_mean_s": last,
        "ratio_last_to_first": last / first,
        "ratio_of_medians": last_median / first_median,
        "upkeep_s_per_batch": upkeep / batches,
        "metadata_bytes": metadata_bytes,
        "table_bytes_before_expiry": before,
        "table_bytes_after_expiry": after,
        "files_after_expiry": sum(1 for p in folder.rglob("*") if p.is_file()),
    }


def report(results: dict, quick: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name = "history_quick" if quick else "history"
    lean = {k: v for k, v in results.items() if k not in ("plain", "maintained", "unmerged")}
    for label in ("plain", "maintained", "unmerged"):
        r = results[label]
        print(
            f"{label:>10}: first ten {r['first_ten_mean_s'] * 1000:.0f} ms, last ten {r['last_ten_mean_s'] * 1000:.0f} ms "
            f"(ratio {r['ratio_last_to_first']:.2f}, of medians {r['ratio_of_medians']:.2f}), upkeep {r['upkeep_s_per_batch'] * 1000:.0f} ms per batch; "
            f"table {r['table_bytes_before_expiry'] / 1e6:.2f} MB before, "
            f"{r['table_bytes_after_expiry'] / 1e6:.3f} MB after compact + expire ({r['files_after_expiry']} files); "
            f"planning {r['planning_s'] * 1000:.1f} ms over {r['manifests']} manifests (before compaction)"
        )
        lean[label] = {k: v for k, v in r.items() if k != "latency_s"}
        lean[label]["latency_ms_per_50"] = [
            float(np.mean(r["latency_s"][k : k + 50]) * 1000) for k in range(0, len(r["latency_s"]), 50)
        ]
    print(
        f"planning with merging off / on: {results['planning_ratio_unmerged_to_merged']:.1f}x "
        f"({results['unmerged']['manifests']} vs {results['plain']['manifests']} manifests)"
    )
    write_results(name, lean)
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for label in ("plain", "maintained", "unmerged"):
        latencies = np.asarray(results[label]["latency_s"]) * 1000
        window = 10
        smooth = np.convolve(latencies, np.ones(window) / window, mode="valid")
        left.plot(np.arange(len(smooth)) + window, smooth, label=label)
        sizes = results[label]["metadata_bytes"]
        right.plot([s[0] for s in sizes], [s[1] / 1e6 for s in sizes], label=label)
    left.set_xlabel("insert number")
    left.set_ylabel("latency (ms, mean of 10)")
    left.set_title("insert latency over the history")
    right.set_xlabel("insert number")
    right.set_ylabel("metadata folder (MB)")
    right.set_title("metadata kept")
    for axis in (left, right):
        axis.legend()
    figure.tight_layout()
    figure.savefig(RESULTS / f"{name}.png", dpi=120)
    plt.close(figure)
