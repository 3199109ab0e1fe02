"""The structure join of uncertain arrays over different domains: a pair whose probability mass
meets outside one or both arrays' domains is found by every method, scheme and engine (against
brute force: the band probability of independent Gaussians, per dimension, by scipy)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import norm

DELTA, THRESHOLD = 4.0, 0.05
#: (left domain, right domain) per dimension: side by side with a gap, overlapping, nested.
DOMAINS = {
    "apart": (((0, 19), (0, 9)), ((30, 59), (0, 9))),
    "overlapping": (((0, 19), (0, 19)), ((15, 44), (-10, 9))),
    "nested": (((0, 39), (0, 19)), ((10, 19), (5, 9))),
}
#: (scheme, step) of each side's layout.
LAYOUTS = [("store-mean", None), ("store-multiple", 1), ("store-multiple", 2), ("store-all", None)]
_names = itertools.count()


def band_mass(ma: np.ndarray, sa: np.ndarray, mb: np.ndarray, sb: np.ndarray) -> np.ndarray:
    """P(|A - B| < DELTA) for independent Gaussians A, B: A - B is N(ma - mb, hypot(sa, sb))."""
    difference, spread = ma - mb, np.hypot(sa, sb)
    return norm.cdf(DELTA, difference, spread) - norm.cdf(-DELTA, difference, spread)


def tuples(rng: np.random.Generator, domain, n: int) -> dict[str, np.ndarray]:
    """Tuples crowding the domain's edges (means within 3 cells of them), sigmas up to 8 cells."""
    columns = {}
    for name, (low, high) in zip(("x", "y"), domain, strict=True):
        edge = rng.choice([low, high + 1], n)
        columns[name] = np.clip(edge + rng.uniform(-3, 3, n), low, high + 0.999)
        columns[f"{name}_sigma"] = rng.uniform(0.3, 8.0, n)
    return columns


def schema(name: str, domain) -> str:
    (xl, xh), (yl, yh) = domain
    return f"{name}<>[x={xl}:{xh}:5; y={yl}:{yh}:5]"


def create(db, domain, layout, columns):
    scheme, step = layout
    name = f"dom{next(_names)}"
    options = {"scheme": scheme} | ({"step": step} if step else {})
    array = db.create_uncertain_array(schema(name, domain), **options)
    array.insert(columns)
    return array


def reference_pairs(left: dict, right: dict) -> tuple[set, set]:
    """Pairs that must be in the join (probability above the threshold by a margin) and that may be."""
    mass = np.ones((len(left["x"]), len(right["x"])))
    for d in ("x", "y"):
        mass *= band_mass(
            left[d][:, None], left[f"{d}_sigma"][:, None], right[d][None, :], right[f"{d}_sigma"][None, :]
        )
    must = {(int(i), int(j)) for i, j in zip(*np.nonzero(mass >= THRESHOLD * (1 + 1e-9)), strict=True)}
    may = {(int(i), int(j)) for i, j in zip(*np.nonzero(mass >= THRESHOLD * (1 - 1e-9)), strict=True)}
    return must, may


#: each layout on the left once (the next one on the right), the domain cases in turn
CASES = [(layout, sorted(DOMAINS)[n % len(DOMAINS)]) for n, layout in enumerate(LAYOUTS)]


@pytest.mark.parametrize(
    "left_layout,domains", CASES, ids=lambda v: v if isinstance(v, str) else f"{v[0]}{v[1] or ''}"
)
def test_pairs_meeting_outside_the_domains_are_found_by_every_method(db, left_layout, domains) -> None:
    """Bug: possible ranges were clipped to each array's own domain, so the Prop. 4.1 filter and the
    candidate regions missed pairs whose mass meets beyond a domain's edge (silently dropped)."""
    rng = np.random.default_rng(sorted(DOMAINS).index(domains) * 10 + LAYOUTS.index(left_layout))
    left_domain, right_domain = DOMAINS[domains]
    left_columns, right_columns = tuples(rng, left_domain, 40), tuples(rng, right_domain, 40)
    right_layout = LAYOUTS[(LAYOUTS.index(left_layout) + 1) % len(LAYOUTS)]
    left = create(db, left_domain, left_layout, left_columns)
    right = create(db, right_domain, right_layout, right_columns)
    left_ids = {int(i): n for n, i in enumerate(left.to_pandas().sort_values("id")["id"])}
    right_ids = {int(i): n for n, i in enumerate(right.to_pandas().sort_values("id")["id"])}
    must, may = reference_pairs(left_columns, right_columns)
    assert must, "the case must have pairs to find"
    runs = [(m, "local") for m in ("sbj", "bnl", "index")] + [("sbj", "spark")]
    for (method, engine), (outer, inner, flip) in itertools.product(
        runs, [(left, right, False), (right, left, True)]
    ):
        pairs = outer.structure_join(inner, DELTA, THRESHOLD, method=method, engine=engine).to_pandas()
        found = set()
        for a, b in zip(pairs["id_left"], pairs["id_right"], strict=True):
            first, second = (b, a) if flip else (a, b)
            found.add((left_ids[int(first)], right_ids[int(second)]))
        assert must <= found <= may, (method, engine, flip, sorted(must - found), sorted(found - may))
