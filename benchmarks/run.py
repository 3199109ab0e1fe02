"""Benchmark runner: ``python -m benchmarks.run NAME [--quick] [--warehouse DIR]``; writes benchmarks/results/NAME.json and .png."""

from __future__ import annotations

import argparse
import importlib
import shutil

from benchmarks.common import note_cleanup, scratch_dir, wait_for_quiet_files

BENCHMARKS = (
    "ingest",
    "layout",
    "window",
    "window_spark",
    "views",
    "viewdf",
    "viewdf_scope",
    "viewdf_history",
    "viewdf_large_parts",
    "viewdf_commit",
    "viewdf_queue_layout",
    "viewdf_cold_kernel",
    "halo",
    "history",
    "uncertain",
    "uncertain_engine",
    "engine",
    "refresh_jobs",
    "asymmetric_plans",
    "maintenance_plans",
    "refresh_limit",
    "query_through_view",
    "view_chain",
    "cold_start",
    "idle_views",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("name", choices=BENCHMARKS)
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the benchmark itself")
    parser.add_argument("--warehouse", default=None, help="warehouse folder (default: a temporary one)")
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="start at once, without waiting for new files to be quick to create (benchmarks/common.py)",
    )
    arguments = parser.parse_args()
    import arrayviews

    probes = scratch_dir("creation-probes-")
    if not arguments.no_wait:
        wait_for_quiet_files(probes)

    module = importlib.import_module(f"benchmarks.{arguments.name}")
    folder = arguments.warehouse or scratch_dir("arrayviews-warehouse-")
    db = arrayviews.connect(folder)
    try:
        results = module.run(db, quick=arguments.quick)
        module.report(results, arguments.quick)
    finally:
        db.spark.stop()
        if arguments.warehouse is None:
            shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(probes, ignore_errors=True)
        note_cleanup()


if __name__ == "__main__":
    main()
