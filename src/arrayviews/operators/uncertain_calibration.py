"""Measuring the unit costs of the step-size cost model on this machine (paper 001, section 3.3: "plug
in unit cost measurements, including the seek and transfer time per chunk and per tuple validation").

Two scratch arrays with the same chunking but ten times different density give reads whose row
groups and copies vary independently; a least-squares fit of the measured I/O step times gives the
cost per row group (seek) and per copy. The kernels are timed on their own for the filter, the
bivariate integral and the join pair costs. The scratch arrays are dropped afterwards.
"""

from __future__ import annotations

import math
import time
import uuid

import numpy as np
from scipy.optimize import nnls

from arrayviews.kernels.join_pairs import pair_probabilities, pairs_in_boxes
from arrayviews.kernels.probability import box_probabilities
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.uncertain_cost import UnitCosts
from arrayviews.operators.uncertain_regions import expand, query_box
from arrayviews.storage import uncertain_layout as ul


def _io_samples(
    db, rng: np.random.Generator, densities: tuple[int, ...], side: int, repeats: int
) -> list[tuple[int, int, float]]:
    """(row groups, copies, best seconds) of I/O steps over arrays of each density; the reads of all
    arrays are interleaved, so contention from other work on the machine hits them alike."""
    arrays = []
    try:
        for tuples in densities:
            name = f"calibration_{uuid.uuid4().hex[:8]}"
            array = db.create_uncertain_array(
                f"{name}<v:float64>[x=0:{side - 1}:16; y=0:{side - 1}:16]", scheme="store-multiple", step=1
            )
            arrays.append(array)
            array.insert(
                {
                    "x": rng.uniform(0, side, tuples),
                    "y": rng.uniform(0, side, tuples),
                    "x_sigma": rng.uniform(0.05, 0.3, tuples),
                    "y_sigma": rng.uniform(0.05, 0.3, tuples),
                    "v": rng.normal(size=tuples),
                }
            )
        pinned = [a.at_version(a.version) for a in arrays]
        boxes = []
        for width in (2, 6, 14, 30, 46, 62, 94, 126, side):
            for _ in range(3):
                x0, y0 = (int(v) for v in rng.integers(0, max(1, side - width), 2))
                boxes.append({"x": (x0, x0 + width - 1), "y": (y0, y0 + width - 1)})
        best: dict[tuple[int, int], list] = {}
        for _ in range(repeats):
            for b, ranges in enumerate(boxes):
                for a, array in enumerate(pinned):
                    table, layout_ = array.table, array.layout
                    files = table.dataset(array.version)
                    box = query_box(table.schema, ranges)
                    region = expand(table, array.version, layout_, box)
                    before = files.row_groups_read
                    started = time.perf_counter()
                    fragments = ul.read_fragments(
                        files,
                        table.storage,
                        None,
                        region.chunks.ranges,
                        region.chunks.filter(ChunkGrid.of(table.storage)),
                        roles="tuples",
                    )
                    rows = ul.decode_rows(fragments, table.storage)
                    np.unique(rows.columns[ul.ID], return_index=True)
                    seconds = time.perf_counter() - started
                    entry = best.setdefault((a, b), [files.row_groups_read - before, len(rows), seconds])
                    entry[2] = min(entry[2], seconds)
        return [tuple(v) for v in best.values()]
    finally:
        for array in arrays:
            db.drop_uncertain_array(array.name)


def calibrate(db, seed: int = 0, repeats: int = 5) -> tuple[UnitCosts, dict]:
    """Unit costs measured here, and the raw measurements behind them."""
    rng = np.random.default_rng(seed)
    samples = _io_samples(db, rng, (150_000, 15_000), 256, repeats)
    design = np.array([[1.0, g, c] for g, c, _ in samples])
    seconds = np.array([t for _, _, t in samples])
    # non-negative least squares: a fixed cost per read, a cost per row group and one per copy
    (fixed, seek, copy), _ = nnls(design, seconds)
    seek, copy = max(seek, 1e-7), max(copy, 1e-9)

    # CPU: closed-form filters (independent positions) and bivariate integrals (correlated).
    n = 400_000
    means = rng.uniform(0, 100, (n, 2))
    sigmas = rng.uniform(0.1, 3, (n, 2))
    lows, highs = np.array([40.0, 40.0]), np.array([60.0, 60.0])
    singles, no_pairs = np.array([0, 1]), np.zeros((0, 2), np.int64)
    box_probabilities(means[:10], sigmas[:10], np.zeros((10, 0)), lows, highs, singles, no_pairs, 0.0)
    started = time.perf_counter()
    box_probabilities(means, sigmas, np.zeros((n, 0)), lows, highs, singles, no_pairs, 0.0)
    filter_cost = (time.perf_counter() - started) / n
    m = 50_000
    corrs = rng.uniform(-0.9, 0.9, (m, 1))
    near = rng.uniform(38, 62, (m, 2))
    pair = np.array([[0, 1]])
    box_probabilities(near[:10], sigmas[:10], corrs[:10], lows, highs, np.zeros(0, np.int64), pair, 0.0)
    started = time.perf_counter()
    _, integrals = box_probabilities(near, sigmas[:m], corrs, lows, highs, np.zeros(0, np.int64), pair, 0.0)
    integral_cost = max(1e-9, (time.perf_counter() - started) / max(1, integrals) - filter_cost)

    # Join pairs: candidate search in boxes and the closed-form pair probabilities.
    na, nb = 20_000, 60_000
    a_cells = rng.integers(0, 300, (na, 2))
    b_cells = rng.integers(0, 300, (nb, 2))
    a_first, b_first = a_cells.astype(float), b_cells.astype(float)
    b_tuple = np.arange(nb, dtype=np.int64)
    pairs_in_boxes(
        a_cells[:10] - 2,
        a_cells[:10] + 2,
        a_first[:10],
        a_first[:10],
        b_cells,
        b_first,
        b_first,
        b_tuple,
        1.0,
    )
    started = time.perf_counter()
    ia, ib, looked = pairs_in_boxes(
        a_cells - 2, a_cells + 2, a_first, a_first, b_cells, b_first, b_first, b_tuple, 1.0
    )
    search = time.perf_counter() - started
    am, asg = rng.uniform(0, 300, (na, 2)), rng.uniform(0.1, 1, (na, 2))
    bm, bsg = rng.uniform(0, 300, (nb, 2)), rng.uniform(0.1, 1, (nb, 2))
    pair_probabilities(
        ia[:10], ib[:10], am, asg, np.zeros((na, 0)), bm, bsg, np.zeros((nb, 0)), 1.0, singles, no_pairs, 0.0
    )
    started = time.perf_counter()
    pair_probabilities(
        ia, ib, am, asg, np.zeros((na, 0)), bm, bsg, np.zeros((nb, 0)), 1.0, singles, no_pairs, 0.0
    )
    validate = time.perf_counter() - started
    pair_cost = (search + validate) / max(1, looked)

    units = UnitCosts(
        seek=float(seek), copy=float(copy), filter=filter_cost, integral=integral_cost, pair=pair_cost
    )
    raw = {
        "io_fit": {"fixed_seconds": float(fixed), "seek": float(seek), "copy": float(copy)},
        "io_samples": [{"row_groups": g, "copies": c, "seconds": t} for g, c, t in samples],
        "filter_per_tuple": filter_cost,
        "integral_per_tuple": integral_cost,
        "pair_per_candidate": pair_cost,
    }
    return units, raw


#: The work of an estimate the uncertain terms price (``Estimate`` fields), kept with each sample.
WORK = ("copies", "pairs", "aggregates", "contributions", "blocks", "routed", "groups", "routed_pairs")
#: The ``EngineCost`` term pricing each kind of work.
TERMS = {
    "copies": "per_copy",
    "pairs": "per_pair",
    "aggregates": "per_aggregate",
    "contributions": "per_contribution",
    "blocks": "per_block",
    "routed": "per_route",
    "groups": "per_group",
    "routed_pairs": "per_routed_pair",
}


def _fit(points: list[dict], columns: tuple[str, ...], offsets: dict[str, float]) -> dict[str, float]:
    """Non-negative least squares of the samples' seconds, less what ``offsets`` already price, over
    the work ``columns``: the seconds per unit of each."""
    if not points:
        return {}
    design = np.array([[p[c] for c in columns] for p in points], np.float64)
    target = np.array([p["seconds"] - sum(t * p[c] for c, t in offsets.items()) for p in points])
    scale = np.maximum(design.max(axis=0), 1e-300)  # columns span 1 to 1e8: fit in scaled units
    solution, _ = nnls(design / scale, np.maximum(target, 0.0))
    return {c: float(v) for c, v in zip(columns, solution / scale, strict=True)}


def fit_uncertain_terms(points: list[dict], local: bool) -> dict[str, float]:
    """``EngineCost`` uncertain terms from timed samples (``calibrate_engines``), in three stages so
    each term is fitted where it varies: the aggregates give the cost per copy, per aggregate run
    and per block contribution; the block join (on Spark, the Spark join) then the cost per outer
    block and per candidate pair; the routed in-process join the cost per inner chunk co-grouped,
    per outer copy routed and per pair searched within a chunk."""
    aggregates = [p for p in points if p["operation"] in ("regrid", "group_by")]
    terms = _fit(aggregates, ("copies", "aggregates", "contributions"), {})
    terms["copies"] = max(terms.get("copies", 0.0), 1e-9)
    terms["contributions"] = max(terms.get("contributions", 0.0), 1e-10)
    copies = {"copies": terms["copies"]}
    joins = [p for p in points if p["operation"] in ("join", "join_block")]
    terms.update(_fit(joins, ("blocks", "pairs") if local else ("pairs",), copies))
    terms["pairs"] = max(terms.get("pairs", 0.0), 1e-11)
    if local:
        routed = [p for p in points if p["operation"] == "join_routed"]
        terms.update(_fit(routed, ("groups", "routed", "routed_pairs"), copies))
        terms["routed_pairs"] = max(terms.get("routed_pairs", 0.0), 1e-11)
    return {TERMS[name]: value for name, value in terms.items()}


def calibrate_engines(db, sizes: tuple[int, ...] = (500, 1500, 4000), repeats: int = 2, seed: int = 0):
    """Measure the executor cost model's uncertain terms (``EngineCost.per_copy``, ``per_pair``,
    ``per_aggregate``, ``per_contribution`` and the in-process join plans' ``per_block``,
    ``per_route``, ``per_group``, ``per_routed_pair``) on both engines and store them with the
    database's calibrated costs (``execution.json``).

    At each size a scratch store-multiple array (k = 1) and a store-mean array three times larger
    are regridded (10 x 10 blocks), grouped by both dimensions (many contributions per tuple) and
    structure-joined on each engine, the in-process join with each of its plans; what the array
    terms already predict (fixed, per job) is subtracted and ``fit_uncertain_terms`` fits the rest
    over the estimates' work (metadata only, as the choice sees it). The scratch arrays are dropped."""
    from dataclasses import replace

    rng = np.random.default_rng(seed)
    schema = "{name}<v:float64>[x=0:119:20; y=0:79:20]"
    samples: dict[str, list[dict]] = {"local": [], "spark": []}
    model = db.executors.costs

    def tuples(n: int) -> dict:
        sigmas = rng.lognormal(np.log(0.3), 0.6, (n, 2))
        return {
            "x": rng.uniform(0, 120, n),
            "y": rng.uniform(0, 80, n),
            "x_sigma": sigmas[:, 0],
            "y_sigma": sigmas[:, 1],
            "v": rng.normal(size=n),
        }

    created = []
    try:
        for n in sizes:
            tag = uuid.uuid4().hex[:8]
            outer = db.create_uncertain_array(
                schema.format(name=f"calibration_a_{tag}"), scheme="store-multiple", step=1
            )
            created.append(outer)
            outer.insert(tuples(n))
            inner = db.create_uncertain_array(schema.format(name=f"calibration_b_{tag}"), scheme="store-mean")
            created.append(inner)
            inner.insert(tuples(3 * n))
            operations = {
                "regrid": lambda e: outer.regrid({"x": 10, "y": 10}, "count(*)", "sum(v)", engine=e),  # noqa: B023
                "group_by": lambda e: outer.aggregate("count(*)", "sum(v)", by=["x", "y"], engine=e),  # noqa: B023
                "join": lambda e: outer.structure_join(inner, 1.0, 0.5, engine=e, outer="left"),  # noqa: B023
            }
            for name, make in operations.items():
                for engine in ("local", "spark"):
                    for plan in ("block", "routed") if name == "join" and engine == "local" else (None,):

                        def operation(make=make, engine=engine, plan=plan):
                            op = make(engine)
                            return op if plan is None else op.force_plan(plan)

                        chosen = operation()
                        estimate = chosen.choose().estimate
                        if plan is not None:
                            estimate = chosen.plan.estimates[plan]
                        if n == sizes[0]:
                            operation().to_arrow()  # warm-up (Python workers, numba compilation)
                        best = math.inf
                        for _ in range(repeats):
                            started = time.perf_counter()
                            operation().to_arrow()
                            best = min(best, time.perf_counter() - started)
                        terms = model.local if engine == "local" else model.spark
                        samples[engine].append(
                            {
                                "operation": name if plan is None else f"{name}_{plan}",
                                "tuples": n,
                                **{w: float(getattr(estimate, w)) for w in WORK},
                                "seconds": max(0.0, best - terms.fixed - terms.per_job * estimate.jobs),
                                "measured": best,
                            }
                        )
    finally:
        for array in created:
            db.drop_uncertain_array(array.name)
    calibrated = replace(
        model,
        local=replace(model.local, **fit_uncertain_terms(samples["local"], local=True)),
        spark=replace(model.spark, **fit_uncertain_terms(samples["spark"], local=False)),
    )
    calibrated = calibrated.stamped({**model.notes, "uncertain": samples})
    db.executors.store_costs(calibrated)
    return calibrated
