"""A refresh-time limit kept on a live two-base view (paper 003 at run time): the seconds spent
refreshing, and the longest refresh, under three policies run on the same batches in the same run.

- EAGER, the baseline: refresh every base after every step (the view is always fresh);
- NAIVE (the paper's symmetric plan): when refreshing everything pending is predicted above the
  limit C, refresh every base;
- ONLINE (``View.keep_within_limit``): when it is, refresh the greedy minimal set of bases with the
  least amortized cost, widened to every base when one refresh of every base is predicted within
  10% of that set's.

"Everything pending" is priced as one refresh of every base (``views.pending.joint_seconds``) for
both NAIVE and ONLINE.

Each step inserts a small batch into the sparse left array L (each new left cell joins the right
cells around it) and a larger one into the dense right array R. After the last step the view is
refreshed completely (the user's refresh at T), and checked against a recomputation. The limit C
is :data:`LIMIT_STEPS` times the predicted cost of one refresh of the first step's batches (the same
rule for every policy, each on its own view): below one step's cost, so the expensive base must be
refreshed every step and the cheap one's batches can wait.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

from arrayviews.model.shapes import Linf
from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate
from arrayviews.views.pending import joint_seconds
from benchmarks.common import bar_plot, write_results

EXTENT = 2000
CHUNK = 250
SEED = 2026
POLICIES = ("EAGER", "NAIVE", "ONLINE")
#: The limit C in predicted costs of one step's batches.
LIMIT_STEPS = 0.6
TRACE = False


def cells(rng: np.random.Generator, count: int, taken: set) -> pa.Table:
    """``count`` new cells at random coordinates not in ``taken`` (added to it), integer values."""
    coords = []
    while len(coords) < count:
        i, j = (int(x) for x in rng.integers(0, EXTENT, 2))
        if (i, j) not in taken:
            taken.add((i, j))
            coords.append((i, j))
    coords.sort()
    return pa.table(
        {
            "i": pa.array([c[0] for c in coords], pa.int64()),
            "j": pa.array([c[1] for c in coords], pa.int64()),
            "v": pa.array(rng.integers(-100, 100, len(coords)), pa.int64()),
        }
    )


def batches(steps: int, sizes: dict) -> tuple[dict, list[dict]]:
    """The first cells of L and R and each step's batches, the same for every policy (one seed)."""
    rng = np.random.default_rng(SEED)
    taken = {"L": set(), "R": set()}
    first = {name: cells(rng, sizes[name + "0"], taken[name]) for name in ("L", "R")}
    return first, [{name: cells(rng, sizes[name], taken[name]) for name in ("L", "R")} for _ in range(steps)]


def run_policy(db, policy: str, first: dict, steps: list[dict], tag: str) -> dict:
    schema = f"<v:int64>[i=0:{EXTENT - 1}:{CHUNK}; j=0:{EXTENT - 1}:{CHUNK}]"
    names = {"L": f"L_{tag}", "R": f"R_{tag}"}
    arrays = {base: db.create_array(names[base] + schema) for base in ("L", "R")}
    for base, table in first.items():
        arrays[base].insert(table)
    aggregates = (ViewAggregate("count", None, None, "cnt"), ViewAggregate("sum", "right", "v", "total"))
    view = db.create_view(f"V_{tag}", SimilarityViewDefinition(names["L"], names["R"], Linf(3), aggregates))
    limit = None
    spent, deciding, longest, refreshes = 0.0, 0.0, 0.0, {"L": 0, "R": 0}
    predicted_before = []
    for batch in steps:
        for base, table in batch.items():
            arrays[base].insert(table)
        if limit is None:  # C: LIMIT_STEPS times the predicted cost of the first step's batches
            limit = LIMIT_STEPS * joint_seconds(db, view)
            view.set_refresh_limit(limit)
        started = time.perf_counter()  # a decision's planning counts with its refresh
        if policy == "EAGER":
            pending, advanced = 0.0, tuple(names.values())
            refreshed = view.refresh("auto")
        elif policy == "NAIVE":
            pending = joint_seconds(db, view)  # one refresh of every base, as ONLINE's check prices it
            advanced = tuple(names.values()) if pending > limit else ()
            refreshed = view.refresh("auto") if advanced else None
        else:
            decision = view.keep_within_limit()
            pending, advanced, refreshed = decision.pending_seconds, decision.advanced, decision.result
        seconds = time.perf_counter() - started
        spent += seconds
        deciding += seconds - (refreshed.seconds if refreshed is not None else 0.0)
        predicted_before.append(pending)
        if advanced:
            longest = max(longest, seconds)
        for base, name in names.items():
            refreshes[base] += int(name in advanced)
        if TRACE:
            print(policy, round(pending, 3), advanced)
    started = time.perf_counter()
    final = view.refresh("auto")
    final_seconds = time.perf_counter() - started if final.committed else 0.0
    assert view.verify(), f"{policy}: the view differs from its recomputation"
    for name in (f"V_{tag}", names["L"], names["R"]):
        db.drop(name)
    return {
        "maintenance_seconds": spent,
        "deciding_seconds": deciding,
        "final_refresh_seconds": final_seconds,
        "total_seconds": spent + final_seconds,
        "longest_refresh_seconds": max(longest, final_seconds),
        "refreshes": refreshes,
        "max_predicted_pending_seconds": max(predicted_before, default=0.0),
        "limit_seconds": limit,
    }


def run(db, quick: bool = False) -> dict:
    steps = 8 if quick else 30
    sizes = {"L0": 2000, "R0": 40000, "L": 20, "R": 300}
    first, batches_ = batches(steps, sizes)
    results = {"steps": steps, "sizes": sizes, "limit_steps": LIMIT_STEPS}
    for number, policy in enumerate(POLICIES):
        results[policy] = run_policy(db, policy, first, batches_, f"p{number}")
    for policy in POLICIES:
        results[policy]["total_over_eager"] = (
            results[policy]["total_seconds"] / results["EAGER"]["total_seconds"]
        )
        results[policy]["total_over_naive"] = (
            results[policy]["total_seconds"] / results["NAIVE"]["total_seconds"]
        )
    return results


def report(results: dict, quick: bool = False) -> None:
    tail = "_quick" if quick else ""
    print(
        f"refresh limit C = {results['limit_steps']} x the first step's predicted cost, {results['steps']} steps"
    )
    for policy in POLICIES:
        row = results[policy]
        print(
            f"  {policy:>6s} (C {row['limit_seconds']:.3f} s): maintenance {row['maintenance_seconds']:.2f} s + final refresh "
            f"{row['final_refresh_seconds']:.2f} s = {row['total_seconds']:.2f} s (deciding {row['deciding_seconds']:.2f} s) "
            f"({row['total_over_eager']:.2f}x EAGER, {row['total_over_naive']:.2f}x NAIVE); longest refresh "
            f"{row['longest_refresh_seconds']:.2f} s; refreshes of L {row['refreshes']['L']}, "
            f"of R {row['refreshes']['R']}"
        )
    write_results("refresh_limit" + tail, results)
    bar_plot(
        "refresh_limit" + tail,
        f"Seconds refreshing a two-base view over {results['steps']} steps (C = {results['limit_steps']} x step 1)",
        ["total", "final refresh", "longest refresh"],
        {
            policy: [
                results[policy]["total_seconds"],
                results[policy]["final_refresh_seconds"],
                results[policy]["longest_refresh_seconds"],
            ]
            for policy in POLICIES
        },
        "seconds (same run)",
    )


def main() -> None:
    import arrayviews
    from benchmarks.common import scratch_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 steps")
    quick = parser.parse_args().quick
    db = arrayviews.connect(scratch_dir("refresh-limit-"))
    try:
        report(run(db, quick=quick), quick)
    finally:
        db.spark.stop()


if __name__ == "__main__":
    main()
