"""Distributed maintenance plans for a similarity self-join view (paper 000, sections 4.1-4.5),
simulated: the model objective of the baseline, differential and reassign plans over sequences of
update batches, as ratios over the baseline of the same run, and each planner's time.

This is a MODEL-OBJECTIVE simulation (Eq. (1), first line: max over the 8 workers of max(network,
cpu) seconds, as arrayviews.views.maintenance_plan computes it), not a wall-clock Spark measurement.

The array: a 40 x 40 grid of chunks whose cell counts follow a Gaussian band along the rows (like
PTF's declination skew: the telescope sees one strip of sky far more than the rest), 40 bytes per
cell, so chunks weigh from tens of KB to about 2 MB. Its view is a self-join with an L-infinity(1)
neighbourhood in chunks: a delta chunk joins the existing chunks of the 3 x 3 block around it (the
base chunk and earlier batches' fragments), itself and the other delta chunks of that block; the
result merges into the view chunk of p's cell (both cells' view chunks for a delta-delta pair).
After a batch its deltas stay as fragments, existing chunks where the plan stored them.

Costs: T_ntwk = 1e-8 s/byte (about 100 MB/s sent per node) and T_cpu = 2.5e-9 s/byte of join or
merge input (about 400 MB/s per node); the 4:1 ratio is Appendix B.1's. N = 8 workers, a
coordinator holding the new chunks (its sends are reported, outside the objective).

Placements: "hash" (crc32 of the chunk id modulo 8) and "block" (row-major, 5 rows per node: a
space-filling layout that piles the band's updates onto few nodes); each view chunk starts with its
base chunk and the fixed strategy stores every delta with its cell's base chunk. Ten batches of
each kind, 50-200 delta chunks each: real (a 12 x 12 patch on the band drifting 1-2 columns per
batch, each chunk kept with probability rising with the band), random (uniform cells), correlated
(the first real batch ten times), periodic (three real patches in the order 1,2,3,3,2,1,1,2,3,3).

Plans: baseline (section 4.1), differential (Algorithm 1, views and deltas stored by the fixed
strategy) and reassign (Algorithms 1-3; it carries its own locations from batch to batch, with a
window of 5 batches, the current one first, and weights exp(-0.5 l)), each as printed in the paper
and, marked "+", with GreedyOptions REFINED (stage 1 prices the merges into the stored view chunks;
exact ties of opt_now go to the cheapest node rather than the lowest-numbered). Run
``.venv/bin/python -m benchmarks.maintenance_plans`` (``--quick``: a 20 x 20 grid, a 6 x 6 patch,
6 batches per kind).
"""

from __future__ import annotations

import argparse
import itertools
import zlib

import numpy as np

from arrayviews.views.maintenance_plan import (
    COORDINATOR,
    PAPER,
    REFINED,
    PlanInputs,
    baseline_plan,
    decay_weights,
    differential_plan,
    locations_after,
    reassign_plan,
)
from benchmarks.common import bar_plot, timed, write_results

NODES = 8
T_NTWK = 1e-8
T_CPU = 2.5e-9
BYTES_PER_CELL = 40
#: Cells of a chunk at the centre of the band, and the floor elsewhere (a fraction of it).
PEAK_CELLS, FLOOR = 50_000, 0.05
#: A delta chunk holds about this fraction of its cell's cells.
DELTA_FRACTION = 0.05
WINDOW, DECAY = 5, 0.5
SEED = 2016
KINDS = ("real", "random", "correlated", "periodic")
PLACEMENTS = ("hash", "block")
PLANS = ("baseline", "differential", "reassign", "differential+", "reassign+")
PERIODIC = (0, 1, 2, 2, 1, 0, 0, 1, 2, 2)


def band(grid: int) -> np.ndarray:
    """Relative density of each row: a Gaussian band around the middle row, over a floor."""
    rows = np.arange(grid)
    return FLOOR + (1 - FLOOR) * np.exp(-0.5 * ((rows - grid / 2) / (grid / 8)) ** 2)


def placement(kind: str, grid: int):
    """Node of a cell (every chunk of that cell, view chunk included, starts there)."""
    if kind == "hash":
        return lambda cell: zlib.crc32(repr(("A", cell)).encode()) % NODES
    return lambda cell: (cell[0] * grid + cell[1]) * NODES // (grid * grid)


def patch(rng, grid: int, side: int, row: int, col: int, density: np.ndarray) -> list:
    """The cells of a side x side patch at (row, col), each kept with probability 0.3 + 0.7 * band."""
    cells = itertools.product(range(row, min(row + side, grid)), range(col, min(col + side, grid)))
    return [cell for cell in cells if rng.random() < 0.3 + 0.7 * density[cell[0]]]


def batch_cells(kind: str, rng, grid: int, side: int, count: int, density: np.ndarray) -> list[list]:
    """``count`` batches of cells of one kind."""
    top = int(grid / 2 - side / 2)
    if kind == "random":
        every = list(itertools.product(range(grid), range(grid)))
        size = int(0.7 * side * side)
        return [[every[i] for i in sorted(rng.choice(len(every), size, replace=False))] for _ in range(count)]
    if kind == "correlated":
        return [patch(rng, grid, side, top, 1, density)] * count
    if kind == "periodic":
        starts = [(top, 1), (top - side // 3, grid // 2 - side // 2), (top + side // 3, grid - side - 1)]
        patterns = [patch(rng, grid, side, r, c, density) for r, c in starts]
        return [patterns[k] for k in PERIODIC[:count]]
    batches, col = [], 1
    for _ in range(count):
        batches.append(patch(rng, grid, side, top + int(rng.integers(-1, 2)), col, density))
        col = min(col + int(rng.integers(1, 3)), grid - side)
    return batches


def neighbours(cell, grid: int):
    r, c = cell
    return [
        (i, j) for i in range(r - 1, r + 2) for j in range(c - 1, c + 2) if 0 <= i < grid and 0 <= j < grid
    ]


def triples_of(batch: int, cells: list, fragments: dict, grid: int) -> list:
    """The update triples of one batch; ``fragments[cell]`` lists the existing chunks of a cell."""
    deltas = {cell: ("dA", batch, cell) for cell in cells}
    triples = []
    for cell, delta in deltas.items():
        view = ("V", cell)
        triples.append((delta, delta, view))
        for other in neighbours(cell, grid):
            triples.extend((delta, existing, view) for existing in fragments[other])
            if other in deltas and other > cell:
                triples.append((delta, deltas[other], view))
                triples.append((delta, deltas[other], ("V", other)))
    return triples


def make_plan(name: str, inputs: PlanInputs, history: list, batch: int, chunking: dict):
    """One plan of one batch; Algorithms 1 and 2 draw their orders from SEED + batch."""
    options = REFINED if name.endswith("+") else PAPER
    if name == "baseline":
        return baseline_plan(inputs, chunking)
    if name.startswith("differential"):
        return differential_plan(inputs, SEED + batch, chunking, options)
    weights = decay_weights(len(history), DECAY)
    return reassign_plan(history, weights, inputs, SEED + batch, options=options)


def simulate(placement_kind: str, kind: str, grid: int, side: int, count: int) -> dict:
    """One sequence of batches under one placement; each plan keeps its own locations."""
    rng = np.random.default_rng([SEED, PLACEMENTS.index(placement_kind), KINDS.index(kind)])
    density = band(grid)
    home = placement(placement_kind, grid)
    cells = list(itertools.product(range(grid), range(grid)))
    size = {
        ("A", cell): BYTES_PER_CELL * float(rng.poisson(PEAK_CELLS * density[cell[0]])) + 1 for cell in cells
    }
    start = {("A", cell): home(cell) for cell in cells} | {("V", cell): home(cell) for cell in cells}
    locations = {plan: dict(start) for plan in PLANS}
    fragments = {cell: [("A", cell)] for cell in cells}
    history: list[list] = []
    chunking = {}
    rows = []
    for batch, batch_cells_ in enumerate(batch_cells(kind, rng, grid, side, count, density)):
        for cell in batch_cells_:
            cells_in = PEAK_CELLS * density[cell[0]] * DELTA_FRACTION
            size[("dA", batch, cell)] = BYTES_PER_CELL * float(rng.poisson(cells_in) + 1)
            chunking[("dA", batch, cell)] = home(cell)
        triples = triples_of(batch, batch_cells_, fragments, grid)
        history = [triples, *history][:WINDOW]
        plans, seconds = {}, {}
        for name in PLANS:
            location = locations[name] | {("dA", batch, cell): COORDINATOR for cell in batch_cells_}
            inputs = PlanInputs(triples, NODES, location, size, t_ntwk=T_NTWK, t_cpu=T_CPU)
            seconds[name], plans[name] = timed(lambda: make_plan(name, inputs, history, batch, chunking))  # noqa: B023
            locations[name] = locations_after(inputs, plans[name])
        for cell in batch_cells_:
            fragments[cell].append(("dA", batch, cell))
        objective = {name: plans[name].cost.objective for name in PLANS}
        loads = {name: np.maximum(plans[name].cost.ntwk, plans[name].cost.cpu) for name in PLANS}
        rows.append(
            {
                "batch": batch,
                "delta_chunks": len(batch_cells_),
                "triples": len(triples),
                "pairs": len({(p, q) for p, q, _ in triples}),
                "objective_seconds": objective,
                "ratio_over_baseline": {name: objective[name] / objective["baseline"] for name in PLANS},
                "mean_over_max_load": {name: float(loads[name].mean() / loads[name].max()) for name in PLANS},
                "coordinator_seconds": {name: plans[name].cost.coordinator_ntwk for name in PLANS},
                "planning_seconds": seconds,
            }
        )
    totals = {name: sum(row["objective_seconds"][name] for row in rows) for name in PLANS}
    return {
        "placement": placement_kind,
        "kind": kind,
        "batches": rows,
        "total_objective_seconds": totals,
        "total_ratio_over_baseline": {name: totals[name] / totals["baseline"] for name in PLANS},
        "total_planning_seconds": {
            name: sum(row["planning_seconds"][name] for row in rows) for name in PLANS
        },
    }


def run(db=None, quick: bool = False) -> dict:
    """``db`` is unused (benchmarks.run passes one); these plans are simulated, not executed."""
    grid, side, count = (20, 6, 6) if quick else (40, 12, 10)
    runs = {f"{p}/{k}": simulate(p, k, grid, side, count) for p in PLACEMENTS for k in KINDS}
    return {
        "quick": quick,
        "measure": "model objective (Eq. (1), first line), not wall-clock",
        "grid_chunks": [grid, grid],
        "nodes": NODES,
        "t_ntwk_seconds_per_byte": T_NTWK,
        "t_cpu_seconds_per_byte": T_CPU,
        "bytes_per_cell": BYTES_PER_CELL,
        "window": WINDOW,
        "decay_rate": DECAY,
        "seed": SEED,
        "runs": runs,
    }


def report(results: dict, quick: bool) -> None:
    tail = "_quick" if quick else ""
    print(
        "MODEL-OBJECTIVE simulation (Eq. (1): max over nodes of max(ntwk, cpu) seconds), not a wall-clock "
        f"Spark measurement; N = {results['nodes']}, T_ntwk = {results['t_ntwk_seconds_per_byte']:g} s/B, "
        f"T_cpu = {results['t_cpu_seconds_per_byte']:g} s/B"
    )
    others = PLANS[1:]
    for label, run_ in results["runs"].items():
        ratios = "  ".join(f"{name:>13s}" for name in others)
        print(f"{label}: batch deltas pairs  baseline s  {ratios}  (ratio over baseline; planning ms)")
        for row in run_["batches"]:
            ratio, ms = row["ratio_over_baseline"], row["planning_seconds"]
            cells = "  ".join(f"{ratio[name]:6.3f} {1e3 * ms[name]:6.0f}" for name in others)
            print(
                f"  {row['batch']:>5d} {row['delta_chunks']:>6d} {row['pairs']:>5d}  "
                f"{row['objective_seconds']['baseline']:>10.3f}  {cells}   (baseline {1e3 * ms['baseline']:.0f} ms)"
            )
        total = run_["total_ratio_over_baseline"]
        summary = ", ".join(f"{name} {total[name]:.3f}" for name in others)
        print(f"  total: baseline {run_['total_objective_seconds']['baseline']:.3f} s; {summary} of it")
    write_results("maintenance_plans" + tail, results)
    labels = list(results["runs"])
    count = len(next(iter(results["runs"].values()))["batches"])
    series = {
        name: [run_["total_ratio_over_baseline"][name] for run_ in results["runs"].values()]
        for name in PLANS[1:]
    }
    bar_plot(
        "maintenance_plans" + tail,
        f"Model objective over {count} batches, ratio over baseline (simulated, not wall-clock)",
        labels,
        series,
        "sum of objectives / baseline's",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 x 20 grid, 6 x 6 patch, 6 batches per kind")
    quick = parser.parse_args().quick
    report(run(quick=quick), quick)


if __name__ == "__main__":
    main()
