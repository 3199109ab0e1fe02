"""The maintenance report kept with each stream view version (snapshot summary properties), and the
table of past maintenance steps read back from it, for planners and schedulers (paper 003)."""

from __future__ import annotations

import json

import pandas as pd

from arrayviews.storage.part_table import PartTable

EXECUTOR = "maintenance.executor"
REASON = "maintenance.reason"
PARTS = "maintenance.parts"
SECONDS = "maintenance.seconds"

COLUMNS = [
    "version",
    "time",
    "operation",
    "parts_written",
    "executor",
    "reason",
    "estimated_cells",
    "estimated_bytes",
    "predicted_seconds",
    "build_seconds",
    "measured_seconds",
    "parts",
]


def report_properties(
    executor: str | None, reason: str | None, parts: list[dict], seconds: float
) -> dict[str, str]:
    """The properties of a maintenance commit that say where each part was built, what the cost
    model predicted for it and what it took (``parts``: one dict per part built), and the step's
    seconds up to the commit."""
    return {
        EXECUTOR: executor or "",
        REASON: reason or "",
        PARTS: json.dumps(parts, sort_keys=True),
        SECONDS: f"{seconds:.6f}",
    }


def maintenance_history(table: PartTable) -> pd.DataFrame:
    """One row per version of a stream view still held: the parts it wrote, where they were built
    and why, the cost model's estimate and prediction summed over its parts, the measured seconds of
    building them and of the whole step up to its commit, and the per-part detail."""
    rows = []
    for info in table.versions():
        properties = info.properties
        parts = json.loads(properties.get(PARTS, "[]") or "[]")
        rows.append(
            {
                "version": info.version,
                "time": info.time,
                "operation": info.operation,
                "parts_written": info.parts,
                "executor": properties.get(EXECUTOR, ""),
                "reason": properties.get(REASON, ""),
                "estimated_cells": sum(p["cells"] for p in parts) if parts else None,
                "estimated_bytes": sum(p["bytes"] for p in parts) if parts else None,
                "predicted_seconds": sum(p["predicted_seconds"] for p in parts) if parts else None,
                "build_seconds": sum(p["seconds"] for p in parts) if parts else None,
                "measured_seconds": float(properties[SECONDS]) if SECONDS in properties else None,
                "parts": parts,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)
