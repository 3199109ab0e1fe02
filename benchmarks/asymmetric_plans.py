"""Asymmetric batch maintenance plans (paper 003, section 5), simulated: the cost of NAIVE, ADAPT and
ONLINE as a ratio over the best LGM plan (OPT^LGM, found by A* in the same run), and A*'s planning time.

Two delta tables with linear cost fits in seconds: f1(k) = 0.02 k + 1.0 (a large setup, then cheap per
modification) and f2(k) = 0.3 k + 2.0.

1. Refresh time (Fig. 6): one modification per table per step, C = 12 s, T = 100, 200, ..., 1000.
2. Non-uniform streams (Fig. 7), C = 20 s, T = 1000: at each step a table receives a batch with
   probability p (slow 0.5, fast 0.9) of ceil(X) modifications, X ~ Normal(1, sigma) conditioned on
   X > 0 (stable sigma = 1, unstable 5); numpy Generator, fixed seed; SS, SU, FS, FU.

ADAPT reuses a plan made for T0 = 500 (from the first 501 arrivals; repeated when T > 500); ONLINE
uses the mean arrivals of the last 10 steps. Pure Python, no Spark: run
``.venv/bin/python -m benchmarks.asymmetric_plans`` or ``.venv/bin/python -m benchmarks.run
asymmetric_plans`` (``--quick``: T up to 300, ADAPT planned for 150).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from arrayviews.scheduling import (
    MaintenanceProblem,
    adapted_plan,
    is_valid,
    lgm_search,
    naive_plan,
    online_plan,
    plan_cost,
)
from benchmarks.common import bar_plot, timed, write_results

#: (seconds per modification, setup seconds) of each delta table's linear cost fit.
FITS = ((0.02, 1.0), (0.3, 2.0))
SEED = 2005
#: name: (p, sigma) of section 5's non-uniform streams (mu = 1).
STREAMS = {"SS": (0.5, 1.0), "SU": (0.5, 5.0), "FS": (0.9, 1.0), "FU": (0.9, 5.0)}
PLANS = ("NAIVE", "OPT^LGM", "ADAPT", "ONLINE")


def linear_cost(per_modification: float, setup: float):
    return lambda k: per_modification * k + setup if k else 0.0


COSTS = [linear_cost(*fit) for fit in FITS]


def arrival_stream(rng: np.random.Generator, p: float, sigma: float, mu: float, steps: int) -> list[int]:
    """Per step: 0 with probability 1 - p, else ceil(X) with X ~ Normal(mu, sigma) drawn until X > 0."""
    counts = []
    for _ in range(steps):
        if rng.random() < p:
            x = rng.normal(mu, sigma)
            while x <= 0:
                x = rng.normal(mu, sigma)
            counts.append(math.ceil(x))
        else:
            counts.append(0)
    return counts


def compare(problem: MaintenanceProblem, planned_horizon: int) -> dict:
    """Every plan's cost, ratio over OPT^LGM, and A*'s planning time on ``problem``."""
    seconds, search = timed(lambda: lgm_search(problem))
    plans = {
        "NAIVE": naive_plan(problem),
        "OPT^LGM": search.plan,
        "ADAPT": adapted_plan(problem, planned_horizon),
        "ONLINE": online_plan(problem),
    }
    for name, plan in plans.items():
        assert is_valid(problem, plan), name
    costs = {name: plan_cost(problem, plan) for name, plan in plans.items()}
    per_modification = sum(fit[0] * total for fit, total in zip(FITS, problem.totals, strict=True))
    return {
        "T": problem.horizon,
        "arrivals": list(problem.totals),
        "cost_seconds": costs,
        "ratio_over_opt_lgm": {name: cost / search.cost for name, cost in costs.items()},
        # the part every plan pays alike (a_i per modification); plans differ only in setups paid
        "per_modification_seconds": per_modification,
        "astar_seconds": seconds,
        "astar_expanded": search.expanded,
        "astar_generated": search.generated,
    }


def run(db=None, quick: bool = False) -> dict:
    """``db`` is unused (benchmarks.run passes one); these plans are simulated, not executed."""
    planned = 150 if quick else 500
    horizons = range(100, 301 if quick else 1001, 100)
    refresh = {}
    for horizon in horizons:
        problem = MaintenanceProblem(COSTS, [(1, 1)] * (horizon + 1), 12.0)
        refresh[str(horizon)] = compare(problem, planned)
    rng = np.random.default_rng(SEED)
    steps = (300 if quick else 1000) + 1
    streams = {}
    for name, (p, sigma) in STREAMS.items():
        columns = [arrival_stream(rng, p, sigma, 1.0, steps) for _ in FITS]
        problem = MaintenanceProblem(COSTS, list(zip(*columns, strict=True)), 20.0)
        streams[name] = {"p": p, "sigma": sigma, "mu": 1.0, **compare(problem, planned)}
    return {
        "quick": quick,
        "cost_fits_seconds": [{"per_modification": a, "setup": b} for a, b in FITS],
        "seed": SEED,
        "adapt_planned_horizon": planned,
        "online_rate_window": 10,
        "refresh_time": {"limit_seconds": 12.0, "cases": refresh},
        "streams": {"limit_seconds": 20.0, "cases": streams},
    }


def report(results: dict, quick: bool) -> None:
    tail = "_quick" if quick else ""
    for section in ("refresh_time", "streams"):
        print(f"{section} (C = {results[section]['limit_seconds']} s): cost / OPT^LGM, A* seconds")
        for label, row in results[section]["cases"].items():
            ratios = "  ".join(f"{plan} {row['ratio_over_opt_lgm'][plan]:.3f}" for plan in PLANS)
            print(
                f"  {label:>5s}: OPT^LGM {row['cost_seconds']['OPT^LGM']:8.2f} s  {ratios}  "
                f"A* {row['astar_seconds']:.3f} s ({row['astar_expanded']} nodes)"
            )
    write_results("asymmetric_plans" + tail, results)
    streams_horizon = next(iter(results["streams"]["cases"].values()))["T"]
    for section, title, name in (
        ("refresh_time", "Cost above OPT^LGM vs refresh time T (C = 12 s)", "asymmetric_plans"),
        (
            "streams",
            f"Cost above OPT^LGM, non-uniform streams (C = 20 s, T = {streams_horizon})",
            "asymmetric_plans-streams",
        ),
    ):
        cases = results[section]["cases"]
        labels = [f"T={label}" if section == "refresh_time" else label for label in cases]
        series = {
            plan: [100 * (row["ratio_over_opt_lgm"][plan] - 1) for row in cases.values()]
            for plan in PLANS
            if plan != "OPT^LGM"
        }
        bar_plot(name + tail, title, labels, series, "% above OPT^LGM (A*, same run)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="T up to 300, ADAPT planned for 150")
    quick = parser.parse_args().quick
    report(run(quick=quick), quick)


if __name__ == "__main__":
    main()
