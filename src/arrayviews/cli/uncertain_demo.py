"""Demo part 4: an SDSS-like catalog whose object positions are uncertain (paper 001). Nightly batches
are stored under store-multiple with the step the cost model chose; a probabilistic Subarray and a
neighbour structure join (on Spark) are checked against exact integration of every tuple / pair with
scipy; expected counts per block come from existence probabilities."""

from __future__ import annotations

import time

import numpy as np
from rich.console import Console
from rich.table import Table
from scipy.special import ndtr

from arrayviews.database import Database
from arrayviews.datasets.uncertain import sdss_like, sdss_schema

console = Console()
CATALOG, PATCH = "photo_obj", "photo_obj_patch"
SIDE = 512


def _interval(mu, sigma, a, b):
    """P(a <= X < b) per tuple with scipy's normal CDF (exact positions where sigma is 0)."""
    safe = np.where(sigma > 0, sigma, 1.0)
    p = ndtr((b - mu) / safe) - ndtr((a - mu) / safe)
    return np.where(sigma > 0, p, ((mu >= a) & (mu < b)).astype(float))


def _brute_force_join(a: dict, b: dict, delta: float, threshold: float) -> dict[tuple[int, int], float]:
    """Every pair of tuples integrated on its own: P(|dx| < delta) P(|dy| < delta), in blocks."""
    found = {}
    for start in range(0, len(a["x"]), 200):
        rows = slice(start, start + 200)
        p = np.ones((len(a["x"][rows]), len(b["x"])))
        for d in ("x", "y"):
            m = a[d][rows, None] - b[d][None, :]
            s = np.hypot(a[f"{d}_sigma"][rows, None], b[f"{d}_sigma"][None, :])
            p *= ndtr((delta - m) / s) - ndtr((-delta - m) / s)
        for i, j in zip(*np.nonzero(p >= threshold), strict=True):
            found[(int(a["id"][start + i]), int(b["id"][j]))] = float(p[i, j])
    return found


def run_uncertain_demo(db: Database, tuples: int = 60_000, nights: int = 3) -> dict:
    started = time.perf_counter()
    checks: list[tuple[str, bool]] = []
    for name in (PATCH, CATALOG):
        if name in db.uncertain_arrays():
            db.drop_uncertain_array(name)
    data = sdss_like(tuples, SIDE, seed=404)
    data["id"] = np.arange(tuples, dtype=np.int64)
    console.print(
        f"[bold]uncertain catalog[/bold]: {tuples} objects on a {SIDE} x {SIDE}-cell frame, positions "
        "N(rowc, rowcErr) x N(colc, colcErr), possible range mean +- 3 sigma"
    )
    catalog = db.create_uncertain_array(
        sdss_schema(CATALOG, SIDE, 16),
        scheme="store-multiple",
        step="auto",
        workload=[(5, 5), (16, 16), (51, 51)],
    )
    for part in np.array_split(np.arange(tuples), nights):
        catalog.insert({k: v[part] for k, v in data.items()})
    layout = catalog.layout
    copies = catalog.copy_statistics()
    one = int(copies.loc[copies.copies == 1, "tuples"].sum())
    three = int(copies.loc[copies.copies <= 3, "tuples"].sum())
    console.print(
        f"{nights} nightly batches, {catalog.count()} tuples as {catalog.copies()} copies; cost model chose "
        f"{layout.describe()}: {one / tuples:.1%} of objects have one copy, {three / tuples:.1%} at most three"
    )

    # A probabilistic Subarray, checked against every tuple integrated with scipy.
    box = {"x": (200, 219), "y": (300, 319)}
    query = catalog.subarray(**box, threshold=0.9)
    plan = query.explain()
    result = query.to_pandas()
    reference = _interval(data["x"], data["x_sigma"], 200, 220) * _interval(
        data["y"], data["y_sigma"], 300, 320
    )
    expected = set(np.flatnonzero(reference >= 0.9).tolist())
    got = dict(zip(result["id"], result["probability"], strict=True))
    checks.append(
        (
            "subarray = every tuple integrated (scipy)",
            set(got) == expected and all(abs(p - reference[i]) < 1e-12 for i, p in got.items()),
        )
    )
    console.print(
        f"subarray x 200:219, y 300:319, lambda 0.9: {len(result)} objects; expanded region "
        f"{plan['expanded_region']} ({plan['expanded_cells']} cells, {plan['chunks_to_read']} chunks), "
        f"{query.statistics.copies_read} copies read, {query.statistics.tuples_in_range} tuples integrated"
    )

    # A neighbour structure join of a patch with the catalog, on Spark.
    inside = (data["x"] >= 240) & (data["x"] < 290) & (data["y"] >= 240) & (data["y"] < 290)
    patch_data = {k: v[inside] for k, v in data.items()}
    patch = db.create_uncertain_array(
        sdss_schema(PATCH, SIDE, 16), scheme="store-multiple", step=layout.steps
    )
    patch.insert(patch_data)
    delta, threshold = 1.0, 0.5
    join = patch.structure_join(catalog, delta, threshold, method="sbj", engine="spark")
    join_plan = join.explain()
    pairs = join.to_pandas()
    reference_pairs = _brute_force_join(patch_data, data, delta, threshold)
    got_pairs = {
        (int(i), int(j)): p for i, j, p in zip(pairs.id_left, pairs.id_right, pairs.probability, strict=True)
    }
    checks.append(
        (
            "structure join = every pair integrated (scipy)",
            set(got_pairs) == set(reference_pairs)
            and all(abs(p - reference_pairs[k]) < 1e-12 for k, p in got_pairs.items()),
        )
    )
    neighbours = pairs[pairs.id_left != pairs.id_right]
    console.print(
        f"neighbour join |d rowc| < 1, |d colc| < 1, lambda {threshold}: {len(pairs)} pairs "
        f"({len(neighbours)} between different objects) of {int(inside.sum())} x {tuples} objects; "
        f"{join_plan['outer_cell_region']}"
    )

    # Expected counts per 64 x 64 block, and time travel to the first night.
    blocks = catalog.regrid({"x": 64, "y": 64}, "count(*)", "sum(flux)").to_pandas()
    row = blocks[(blocks.x == 3) & (blocks.y == 4)].iloc[0]
    p = _interval(data["x"], data["x_sigma"], 192, 256) * _interval(data["y"], data["y_sigma"], 256, 320)
    checks.append(("expected count of a block (scipy)", abs(row["count"] - p.sum()) < 1e-8))
    first_night = catalog.at_version(1)
    checks.append(
        ("time travel to night 1", first_night.count() == len(np.array_split(np.arange(tuples), nights)[0]))
    )

    summary = Table(title="uncertain catalog")
    summary.add_column("step")
    summary.add_column("result")
    summary.add_row("storage", f"{layout.describe()}, {catalog.copies()} copies of {tuples} tuples")
    summary.add_row("subarray", f"{len(result)} objects with P >= 0.9")
    summary.add_row("structure join", f"{len(pairs)} pairs with P >= {threshold}")
    summary.add_row("expected count, block (3, 4)", f"{row['count']:.3f}")
    console.print(summary)
    for name, ok in checks:
        console.print(f"  [{'green' if ok else 'red'}]{'ok  ' if ok else 'FAIL'}[/] {name}")
    total = time.perf_counter() - started
    console.print(f"uncertain part done in {total:.1f} s")
    return {"checks": dict(checks), "seconds": total}
