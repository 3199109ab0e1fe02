"""The refresh report kept with each view version (snapshot summary properties) and the table of
past refreshes read back from it, for planners and schedulers."""

from __future__ import annotations

import json

import pandas as pd

from arrayviews.storage.array_table import ArrayTable
from arrayviews.views.refresh_cost import StrategyCost

REQUESTED = "refresh.requested"
EXECUTOR = "refresh.executor"
REASON = "refresh.reason"
STRATEGY_REASON = "refresh.strategy-reason"
DECISION = "refresh.decision"
ESTIMATES = "refresh.estimates"
OPERATIONS = "refresh.operations"
SECONDS = "refresh.seconds"
#: Per base, ``base.<name>``: the version of it the view version reflects.
BASE_PREFIX = "base."
#: Per base, ``base-snapshot.<name>``: the snapshot id of that version, telling it from another
#: commit given the same number after the base was rolled back (``db.check(repair=True)``).
BASE_SNAPSHOT_PREFIX = "base-snapshot."
#: The bases a refresh brought forward, comma-separated (absent before partial refreshes existed,
#: and on a creation: all of them).
ADVANCED = "advanced"

COLUMNS = [
    "version",
    "time",
    "operation",
    "requested",
    "strategy",
    "executor",
    "reason",
    "decision",
    "strategy_reason",
    "estimated_cells",
    "estimated_chunks",
    "model_seconds",
    "correction",
    "predicted_seconds",
    "measured_seconds",
    "compute_seconds",
    "cells_added",
    "cells_total",
    "update_triples",
    "reflected",
    "advanced",
    "estimates",
]


def report_properties(
    requested: str,
    chosen: StrategyCost,
    strategy_reason: str,
    estimates: dict,
    decision: str,
    operations: list[dict],
    seconds: float,
) -> dict[str, str]:
    """The properties of a refresh's commit that describe how it was chosen and what it cost."""
    return {
        REQUESTED: requested,
        EXECUTOR: chosen.choice.executor,
        REASON: chosen.choice.reason,
        STRATEGY_REASON: strategy_reason,
        DECISION: decision,
        ESTIMATES: json.dumps(estimates, sort_keys=True),
        OPERATIONS: json.dumps(operations),
        SECONDS: f"{seconds:.6f}",
    }


def refresh_history(table: ArrayTable) -> pd.DataFrame:
    """One row per version still held: the strategy asked for and run, the executor and why, the
    kind of decision and why, the chosen strategy's estimate (cells, chunks, model seconds, the
    view's correction, predicted seconds), the measured seconds up to the commit (and of the
    compute+write step), the version's cells and update triples, the base versions it reflects
    and the bases it brought forward (a partial refresh names only those; paper 003), and every
    strategy's estimate."""
    rows = []
    for info in table.versions():
        properties = info.properties
        strategy = properties.get("strategy", "")
        estimates = json.loads(properties.get(ESTIMATES, "{}") or "{}")
        chosen = estimates.get(strategy, {})
        operations = json.loads(properties.get(OPERATIONS, "[]") or "[]")
        compute = next((o["seconds"] for o in operations if o.get("operation") == "compute+write"), None)
        reflected = {
            key[len(BASE_PREFIX) :]: int(value)
            for key, value in properties.items()
            if key.startswith(BASE_PREFIX)
        }
        advanced = properties.get(ADVANCED)
        rows.append(
            {
                "version": info.version,
                "time": info.time,
                "operation": info.operation,
                "requested": properties.get(REQUESTED, strategy),
                "strategy": strategy,
                "executor": properties.get(EXECUTOR, ""),
                "reason": properties.get(REASON, ""),
                "decision": properties.get(DECISION, ""),
                "strategy_reason": properties.get(STRATEGY_REASON, ""),
                "estimated_cells": chosen.get("cells"),
                "estimated_chunks": chosen.get("chunks"),
                "model_seconds": chosen.get("model_seconds"),
                "correction": chosen.get("correction"),
                "predicted_seconds": chosen.get("predicted_seconds"),
                "measured_seconds": float(properties[SECONDS]) if SECONDS in properties else None,
                "compute_seconds": compute,
                "cells_added": info.cells_added,
                "cells_total": info.cells_total,
                "update_triples": int(properties.get("update-triples", 0)),
                "reflected": reflected,
                "advanced": tuple(reflected) if advanced is None else tuple(advanced.split(",")),
                "estimates": estimates,
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)
