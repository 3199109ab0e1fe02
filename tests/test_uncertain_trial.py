"""Uncertain arrays tried as a new user and as an adversary: every example of docs/uncertain.md run as
written, probabilities at adversarial parameters (tiny and huge sigmas, cell and chunk edges,
negative coordinates, far tails) against mpmath's error functions at 60 digits and scipy integration,
thresholds exactly at a computed probability, bad input refused with nothing written, and the
in-process and Spark engines agreeing."""

from __future__ import annotations

import functools
import itertools
import math
import re

import mpmath
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scipy import integrate
from scipy.stats import norm

from arrayviews.kernels.probability import pair_probability
from arrayviews.model.errors import ArrayViewsError, ParseError, ValidationError

NAMES = itertools.count()  # fresh array names across Hypothesis examples sharing one warehouse
FIXTURE_HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


# -- references -------------------------------------------------------------------------------------
@functools.cache
def mp_gauss_mass(mu: float, sigma: float, a: float, b: float, closed_low: bool = True) -> float:
    """P(a <= X < b) for X ~ N(mu, sigma) from mpmath's error functions at 60 digits (any exponent):
    complementary ones for an interval at least 1/sqrt(2) sigma to one side of the mean, erf near it
    (no cancellation of terms near 1). sigma 0: an exact position."""
    if not b > a:
        return 0.0
    if sigma == 0:
        low_ok = mu >= a if closed_low else mu > a
        return 1.0 if low_ok and mu < b else 0.0
    with mpmath.workdps(60):
        root = mpmath.sqrt(2) * mpmath.mpf(sigma)
        za = (mpmath.mpf(a) - mpmath.mpf(mu)) / root
        zb = (mpmath.mpf(b) - mpmath.mpf(mu)) / root
        za, zb = (min(max(z, mpmath.mpf(-60)), mpmath.mpf(60)) for z in (za, zb))  # erfc(60) ~ 1e-1566
        if za >= 1:
            mass = mpmath.erfc(za) - mpmath.erfc(zb)
        elif zb <= -1:
            mass = mpmath.erfc(-zb) - mpmath.erfc(-za)
        else:
            mass = mpmath.erf(zb) - mpmath.erf(za)
        return float(mass / 2)


def scipy_rectangle(mu, sigma, rho, a, b) -> float:
    """P(a0 <= X < b0, a1 <= Y < b1) of a bivariate Gaussian by scipy quadrature of the conditional
    form: the density of X times the (closed form) interval probability of Y given X."""
    c = math.sqrt(1.0 - rho * rho)
    za = [(a[k] - mu[k]) / sigma[k] for k in range(2)]
    zb = [(b[k] - mu[k]) / sigma[k] for k in range(2)]

    def inner(x):
        lo, hi = (za[1] - rho * x) / c, (zb[1] - rho * x) / c
        mass = norm.sf(lo) - norm.sf(hi) if lo > 0 else norm.cdf(hi) - norm.cdf(lo)
        return norm.pdf(x) * mass

    lo, hi = max(za[0], -40.0), min(zb[0], 40.0)
    if not hi > lo:
        return 0.0
    points = np.unique(np.clip([lo, -6, -2, 0, 2, 6, hi], lo, hi))
    return math.fsum(
        integrate.quad(inner, p, q, epsabs=1e-15, epsrel=1e-12, limit=200)[0]
        for p, q in zip(points[:-1], points[1:], strict=True)
    )


def band_reference(ma, sa, mb, sb, delta) -> float:
    """P(|A - B| < delta) for independent Gaussians: A - B is N(ma - mb, hypot(sa, sb)) (mpmath)."""
    return mp_gauss_mass(ma - mb, math.hypot(sa, sb), -delta, delta, closed_low=False)


def assert_close(got: float, expected: float, relative: float = 1e-10) -> None:
    assert 0.0 <= got <= 1.0
    assert abs(got - expected) <= relative * abs(expected) + 1e-300, (got, expected)


def check_selection(result: pd.DataFrame, reference: dict[int, float], threshold: float) -> None:
    """Result ids are exactly the tuples at or above the threshold (ties within 1e-9 relative may fall
    either way), each with its reference probability."""
    got = dict(zip(result["id"].tolist(), result["probability"].tolist(), strict=True))
    must = {i for i, p in reference.items() if p >= threshold * (1 + 1e-9)}
    may = {i for i, p in reference.items() if p >= threshold * (1 - 1e-9)}
    assert must <= set(got) <= may, (sorted(must - set(got)), sorted(set(got) - may))
    for i, p in got.items():
        assert p >= threshold
        assert_close(p, reference[i])


# -- 1. the examples of docs/uncertain.md, as written ----------------------------------------------
def doc_catalog(rng, n):
    return {
        "x": rng.uniform(0, 512, n),
        "x_sigma": rng.uniform(0, 1.5, n),
        "y": rng.uniform(0, 512, n),
        "y_sigma": rng.uniform(0, 1.5, n),
        "x_y_corr": rng.uniform(-0.9, 0.9, n),
        "mag": rng.normal(18, 1, n),
        "flux": rng.normal(20, 3, n),
        "flux_sigma": rng.uniform(0, 1, n),
        "size_low": rng.uniform(0, 1, n),
        "size_high": rng.uniform(1, 2, n),
    }


def test_data_model_and_operator_examples_of_the_doc(db):
    sky = db.create_uncertain_array(
        "sky<mag:float64, flux:gaussian, size:uniform>[x=0:511:16; y=0:511:16; corr(x, y)]",
        scheme="store-multiple",
        step="auto",
        sigmas=3.0,
        workload=[(5, 5), (51, 51)],
    )
    rng = np.random.default_rng(7)
    data = doc_catalog(rng, 400)
    data["x"][:40] = rng.uniform(10, 20, 40)  # some tuples in the doc's query box
    data["y"][:40] = rng.uniform(0, 5, 40)
    sky.insert(data)
    assert sky.count() == 400

    result = sky.subarray(x=(10, 19), y=(0, 4), threshold=0.9).to_pandas()
    reference = {
        i: scipy_rectangle(
            (data["x"][i], data["y"][i]),
            (data["x_sigma"][i], data["y_sigma"][i]),
            data["x_y_corr"][i],
            (10, 0),
            (20, 5),
        )
        if data["x_sigma"][i] > 0 and data["y_sigma"][i] > 0
        else float(10 <= data["x"][i] < 20 and 0 <= data["y"][i] < 5)
        for i in range(40)
    }
    assert set(result["id"]) <= set(range(40))  # the others lie far from the box
    check_selection(result, reference, 0.9)
    plan = sky.subarray(x=(10, 19), y=(0, 4), threshold=0.9).explain()
    assert plan["scheme"] == "store-multiple" and plan["query"] == {"x": [10, 19], "y": [0, 4]}
    k = plan["step"]
    assert plan["expanded_region"] == {"x": [10 - k[0], 19 + k[0]], "y": [0, 4 + k[1]]}  # Prop. 3.1

    other = db.create_uncertain_array(
        "other<mag:float64, flux:gaussian, size:uniform>[x=0:511:16; y=0:511:16; corr(x, y)]"
    )
    near = {key: np.array(value, copy=True) for key, value in doc_catalog(rng, 300).items()}
    near["x"][:200] = np.clip(data["x"][:200] + rng.normal(0, 1, 200), 0, 511.9)
    near["y"][:200] = np.clip(data["y"][:200] + rng.normal(0, 1, 200), 0, 511.9)
    other.insert(near)
    join = sky.structure_join(other, delta=2, threshold=0.5)
    assert join.explain()["engine"] in ("local", "spark")  # the default engine is the database's choice
    pairs = join.to_pandas()
    assert len(pairs) > 50 and not pairs.duplicated(["id_left", "id_right"]).any()
    for method in ("sbj", "bnl", "index"):
        again = sky.structure_join(other, delta=2, threshold=0.5, method=method, engine="local").to_pandas()
        pd.testing.assert_frame_equal(
            again.sort_values(["id_left", "id_right"]).reset_index(drop=True),
            pairs.sort_values(["id_left", "id_right"]).reset_index(drop=True),
        )

    regrid = sky.regrid({"x": 64, "y": 64}, "count(*)", "sum(flux)").to_pandas()
    by_y = sky.aggregate("count(*)", by=["y"]).to_pandas()
    # every tuple's mass inside the frame, counted once over all blocks (mass outside is nobody's)
    # (a tuple 12 or more cells from every edge, sigma <= 1.5, lies inside up to 1e-15)
    inside = [
        scipy_rectangle(
            (data["x"][i], data["y"][i]),
            (max(data["x_sigma"][i], 1e-12), max(data["y_sigma"][i], 1e-12)),
            data["x_y_corr"][i],
            (0, 0),
            (512, 512),
        )
        if min(data["x"][i], data["y"][i], 512 - data["x"][i], 512 - data["y"][i]) < 12
        else 1.0
        for i in range(400)
    ]
    assert math.fsum(regrid["count"]) == pytest.approx(math.fsum(inside), abs=1e-9)
    assert math.fsum(by_y["count"]) == pytest.approx(math.fsum(inside), abs=1e-9)
    stored = sky.regrid({"x": 64, "y": 64}, "count(*)", "sum(flux)").store("sky_blocks")
    assert stored.schema.to_text().startswith("sky_blocks<count:float64, flux_sum:float64>")


def test_statement_examples_of_the_doc(db, tmp_path):
    db.sql(
        "CREATE UNCERTAIN ARRAY sky <mag:float32, flux:gaussian, size:uniform> "
        "[x=0:511:16; y=0:511:16; corr(x, y)]\n"
        "  STORE MULTIPLE STEP (1, 2) SIGMAS 3 WORKLOAD (5, 5), (51, 51) THRESHOLD 0.9;"
    )
    db.sql("INSERT INTO sky VALUES (10.5, 0.3, 20.25, 1, -0.5, 18.5, 21, 0.5, 1, 2);")
    db.sql(
        "INSERT INTO sky (id, x, x_sigma, y, y_sigma, flux, flux_sigma, mag, size_low, size_high) "
        "VALUES (7, 12.5, 0.4, 2.5, 0.3, 20, 1, 18, 1, 2);"
    )
    frame = pd.DataFrame(
        {
            "x": [15.5],
            "x_sigma": [0.2],
            "y": [3.5],
            "y_sigma": [0.2],
            "x_y_corr": [0.3],
            "mag": np.float32([17]),
            "flux": [1.0],
            "flux_sigma": [0.1],
            "size_low": [0.0],
            "size_high": [1.0],
        }
    )
    frame.to_parquet(tmp_path / "tuples.parquet")
    frame.to_csv(tmp_path / "tuples.csv", index=False)
    db.sql(f"LOAD sky FROM '{tmp_path / 'tuples.parquet'}';")
    db.sql(f"LOAD sky FROM '{tmp_path / 'tuples.csv'}' AS CSV;")
    everything = db.sql("SELECT * FROM sky;").to_pandas()
    assert len(everything) == 4 and 7 in set(everything["id"])
    sub = db.sql("SELECT * FROM subarray(sky, 10, 0, 19, 4, THRESHOLD 0.9);").to_pandas()
    expected = {
        7: scipy_rectangle((12.5, 2.5), (0.4, 0.3), 0.0, (10, 0), (20, 5)),
        8: scipy_rectangle((15.5, 3.5), (0.2, 0.2), 0.3, (10, 0), (20, 5)),
        9: scipy_rectangle((15.5, 3.5), (0.2, 0.2), 0.3, (10, 0), (20, 5)),
    }
    check_selection(sub, expected, 0.9)
    db.sql("CREATE UNCERTAIN ARRAY other <v:float64> [x=0:511:16; y=0:511:16];")
    db.sql("INSERT INTO other VALUES (12, 0.5, 2, 0.5, 1.0), (15, 0.2, 3, 0.1, 2.0);")
    pairs = db.sql("SELECT * FROM structure_join(sky, other, 2, 0.5);").to_pandas()
    options = db.sql(
        "SELECT * FROM structure_join(sky, other, 2, 0.5, METHOD BNL, ENGINE LOCAL, OUTER RIGHT);"
    ).to_pandas()
    key = ["id_left", "id_right"]
    pd.testing.assert_frame_equal(
        pairs.sort_values(key).reset_index(drop=True), options.sort_values(key).reset_index(drop=True)
    )
    p = band_reference(12.5, 0.4, 12, 0.5, 2) * band_reference(2.5, 0.3, 2, 0.5, 2)
    row = pairs[(pairs["id_left"] == 7) & (pairs["id_right"] == 0)]
    assert_close(float(row["probability"].iloc[0]), p)
    text = db.sql("EXPLAIN SELECT * FROM subarray(sky, 10, 0, 19, 4, THRESHOLD 0.9);")
    assert "x 9..20, y 0..6" in text and "Prop. 3.1" in text  # widened by the steps (1, 2)
    for statement in ("SHOW ARRAYS", "SHOW RELATIONS", "SHOW VERSIONS OF sky", "SHOW SCHEMA OF sky"):
        db.sql(statement + ";")
    db.sql("DROP ARRAY sky;")
    assert db.uncertain_arrays() == ["other"]


# -- 2. probabilities at adversarial parameters ------------------------------------------------------
SIGMAS = [0.0, 5e-324, 1e-300, 1e-9, 0.3, 1.0, 6.5, 1e3, 1e200]
#: means on cell edges, just inside them, at chunk edges (chunks of 5 from -13) and the domain ends
MEANS = [-13.0, -12.5, -8.0, -8.0 - 2**-40, -3.0, -0.5, 0.0, 2.0, 2.0 + 2**-40, 7.0, 11.25, 12.999999]


@pytest.fixture
def edge_catalog(db):
    """A 1-D array over negative and positive cells with every mean x sigma of the lists above, kept
    with k = 37 sigmas (epsilon 1.15e-299: thresholds down to there are allowed)."""
    means, sigmas = np.meshgrid(MEANS, SIGMAS, indexing="ij")
    array = db.create_uncertain_array("edges<>[x=-13:12:5]", scheme="store-all", sigmas=37)
    array.insert({"x": means.ravel(), "x_sigma": sigmas.ravel()})
    return array, means.ravel(), sigmas.ravel()


@settings(max_examples=25, deadline=None, suppress_health_check=FIXTURE_HEALTH)
@given(
    lo=st.integers(-16, 14),
    width=st.integers(0, 8),
    log_threshold=st.floats(-298.9, 0.0),
)
def test_subarray_probabilities_at_edges_and_in_far_tails(edge_catalog, lo, width, log_threshold):
    array, means, sigmas = edge_catalog
    threshold = 10.0**log_threshold
    hi = lo + width
    a, b = max(lo, -13), min(hi, 12) + 1  # the query box, clipped to the domain
    reference = {i: mp_gauss_mass(means[i], sigmas[i], a, b) for i in range(len(means))}
    result = array.subarray(x=(lo, hi), threshold=threshold).to_pandas()
    if a >= b:
        assert result.empty
        return
    check_selection(result, reference, threshold)


def test_a_huge_sigma_keeps_its_tiny_probability(db):
    """Bug: the interval holding the mean was 1 - (both tails), so a tuple with sigma 1e200 had
    P(cell) = 1 - 1 = 0 instead of 4e-201, and a threshold of 1e-290 (allowed with 37 sigmas) lost it."""
    array = db.create_uncertain_array("wide<>[x=-8:7:4]", scheme="store-all", sigmas=37)
    array.insert({"x": [0.0, 3.5], "x_sigma": [1e200, 1e-300]})
    for method in ("scheme", "rtree"):
        result = array.subarray(x=(0, 0), threshold=1e-290, method=method).to_pandas()
        assert result["id"].tolist() == [0]
        assert_close(float(result["probability"].iloc[0]), mp_gauss_mass(0.0, 1e200, 0, 1), 1e-13)


def test_a_tiny_sigma_on_a_cell_boundary_reaches_the_cell_below(db):
    """Bug: the possible range's low bound 2 - 3e-17 rounds to 2.0, so the range was cell 2 alone and
    the half of the mass in cell 1 was never read: P(x in cell 1) = 0.5 went missing. Store-all and
    store-mean, where copies and fences follow the possible range."""
    for scheme in ("store-all", "store-mean"):
        array = db.create_uncertain_array(f"b{next(NAMES)}<>[x=-4:5:2]", scheme=scheme)
        array.insert({"x": [2.0, -2.0, 3.0], "x_sigma": [1e-17, 5e-324, 0.0]})
        result = array.subarray(x=(-4, 1), threshold=0.5).to_pandas()
        assert result["id"].tolist() == [0, 1]
        assert result["probability"].tolist() == [0.5, 1.0]  # erf(inf) / 2 and P(-2 <= X) = 1


def test_thresholds_exactly_at_the_computed_probability(edge_catalog):
    """'at least lambda': a threshold equal to a returned probability keeps that tuple, the next
    float above it drops it."""
    array, _, _ = edge_catalog
    low = array.subarray(x=(-5, 1), threshold=2e-299).to_pandas()
    probabilities = sorted(set(low["probability"]) - {1.0})
    assert len(probabilities) > 5
    for p in probabilities[:: max(1, len(probabilities) // 6)]:
        at = array.subarray(x=(-5, 1), threshold=p).to_pandas()
        assert set(at["id"]) == set(low.loc[low["probability"] >= p, "id"])
        above = array.subarray(x=(-5, 1), threshold=float(np.nextafter(p, 2.0))).to_pandas()
        assert set(above["id"]) == set(low.loc[low["probability"] > p, "id"])
    ones = array.subarray(x=(-5, 1), threshold=1.0).to_pandas()
    assert set(ones["id"]) == set(low.loc[low["probability"] == 1.0, "id"]) and len(ones) > 0


@settings(max_examples=15, deadline=None, suppress_health_check=FIXTURE_HEALTH)
@given(
    rho=st.sampled_from([-0.99, -0.6, -0.1, 0.0, 0.35, 0.93, 0.999]),
    sx=st.sampled_from([1e-6, 0.2, 0.7, 3.0]),
    sy=st.sampled_from([1e-6, 0.2, 0.7, 3.0]),
    mx=st.sampled_from([-4.0, -3.5, -0.25, 0.0, 2.999]),
    my=st.sampled_from([-10.0, -9.0, 0.5, 9.75]),
    box=st.tuples(st.integers(-6, 2), st.integers(0, 4), st.integers(-10, 8), st.integers(0, 3)),
    threshold=st.floats(0.003, 1.0),
)
# a box past the dimension's last cell (9): clipped to it, as an array's subarray is (the mass
# beyond 10 lies in no cell); the reference integrated up to 11 and failed about one run in many
@example(rho=-0.99, sx=1e-06, sy=0.2, mx=-4.0, my=9.75, box=(-5, 1, 7, 3), threshold=0.5)
def test_correlated_subarray_against_scipy_integration(db, rho, sx, sy, mx, my, box, threshold):
    """A correlated pair (Genz's bivariate normal; documented accuracy about 1e-15 absolute)
    against scipy quadrature of the conditional density, negative cells, chunk edges at multiples
    of 3 from -10."""
    name = f"c{next(NAMES)}"
    array = db.create_uncertain_array(f"{name}<>[x=-10:9:3; y=-10:9:3; corr(x, y)]", scheme="store-mean")
    array.insert({"x": [mx], "x_sigma": [sx], "y": [my], "y_sigma": [sy], "x_y_corr": [rho]})
    x0, xw, y0, yw = box
    ends = (min(x0 + xw, 9) + 1, min(y0 + yw, 9) + 1)  # the box within the cells -10..9
    expected = scipy_rectangle((mx, my), (sx, sy), rho, (x0, y0), ends)
    result = array.subarray(x=(x0, x0 + xw), y=(y0, y0 + yw), threshold=threshold).to_pandas()
    if expected >= threshold + 1e-12:
        assert result["id"].tolist() == [0]
    elif expected < threshold - 1e-12:
        assert result.empty
    if len(result):
        p = float(result["probability"].iloc[0])
        assert threshold <= p <= 1.0 and abs(p - expected) <= 1e-12


def test_correlated_far_tail_probability_is_not_lost(db):
    array = db.create_uncertain_array(
        "tail<>[x=-4:15:5; y=-4:15:5; corr(x, y)]", scheme="store-all", sigmas=20
    )
    array.insert({"x": [0.5], "x_sigma": [1.0], "y": [0.5], "y_sigma": [1.0], "x_y_corr": [-0.5]})
    with mpmath.workdps(40):
        c, root2 = mpmath.sqrt(1 - mpmath.mpf(0.25)), mpmath.sqrt(2)

        def density(x):  # P(8.5 < Y < 9.5 | X = x) by upper tails: relatively exact
            low, high = (8.5 + 0.5 * x) / c, (9.5 + 0.5 * x) / c
            return mpmath.npdf(x) * (mpmath.erfc(low / root2) - mpmath.erfc(high / root2)) / 2

        expected = float(mpmath.quad(density, mpmath.linspace(8.5, 9.5, 41)))
    assert 1e-70 < expected < 1e-50
    result = array.subarray(x=(9, 9), y=(9, 9), threshold=1e-80).to_pandas()
    assert result["id"].tolist() == [0]
    assert abs(result["probability"].iloc[0] - expected) <= 1e-10 * expected


# -- structure join ----------------------------------------------------------------------------------
@settings(max_examples=12, deadline=None, suppress_health_check=FIXTURE_HEALTH)
@given(
    a=st.lists(
        st.tuples(st.sampled_from(MEANS), st.sampled_from(SIGMAS[:-1] + [40.0])), min_size=1, max_size=6
    ),
    b=st.lists(
        st.tuples(st.sampled_from(MEANS), st.sampled_from(SIGMAS[:-1] + [40.0])), min_size=1, max_size=6
    ),
    delta=st.sampled_from([1e-6, 0.5, 1.0, 2.75, 30.0]),
    threshold=st.sampled_from([1e-30, 1e-6, 0.01, 0.5, 0.99, 1.0]),
    schemes=st.sampled_from([("store-all", "store-mean"), ("store-multiple", "store-multiple")]),
)
def test_join_probabilities_against_the_difference_of_gaussians(db, a, b, delta, threshold, schemes):
    """1-D joins (negative cells, means on cell and chunk edges, sigmas 0 to 40) under every method;
    k = 12 sigmas allows thresholds down to 1e-30."""
    name = f"j{next(NAMES)}"
    left = db.create_uncertain_array(f"{name}a<>[x=-13:12:5]", scheme=schemes[0], step=1, sigmas=12)
    right = db.create_uncertain_array(f"{name}b<>[x=-13:12:5]", scheme=schemes[1], step=2, sigmas=12)
    left.insert({"x": [m for m, _ in a], "x_sigma": [s for _, s in a]})
    right.insert({"x": [m for m, _ in b], "x_sigma": [s for _, s in b]})
    reference = {
        (i, j): band_reference(ma, sa, mb, sb, delta)
        for i, (ma, sa) in enumerate(a)
        for j, (mb, sb) in enumerate(b)
    }
    must = {k for k, p in reference.items() if p >= threshold * (1 + 1e-9)}
    may = {k for k, p in reference.items() if p >= threshold * (1 - 1e-9)}
    for method in ("sbj", "bnl", "index"):
        pairs = left.structure_join(right, delta, threshold, method=method, engine="local").to_pandas()
        got = {(i, j): p for i, j, p in pairs.itertuples(index=False)}
        assert must <= set(got) <= may, method
        for key, p in got.items():
            assert p >= threshold
            assert_close(p, reference[key], 1e-9)


def test_join_with_huge_sigmas_keeps_tiny_probabilities(db):
    """Bugs: the difference's sigma was sqrt(sa^2 + sb^2), infinite for sigmas near 1e160, and the
    band holding the mean was 1 - tails: both made a 5.6e-146 probability 0 (37 sigmas allow
    thresholds down to 1.2e-299)."""
    left = db.create_uncertain_array("ha<>[x=0:9:5]", sigmas=37)
    right = db.create_uncertain_array("hb<>[x=0:9:5]", sigmas=37)
    big = 1e160
    left.insert({"x": [1.0], "x_sigma": [big]})
    right.insert({"x": [3.0], "x_sigma": [big]})
    expected = mp_gauss_mass(-2.0, math.hypot(big, big), -1e15, 1e15, closed_low=False)
    assert 1e-146 < expected < 1e-145
    for method in ("sbj", "bnl", "index"):
        pairs = left.structure_join(right, 1e15, 1e-200, method=method, engine="local").to_pandas()
        assert pairs[["id_left", "id_right"]].values.tolist() == [[0, 0]]
        assert_close(float(pairs["probability"].iloc[0]), expected, 1e-12)
    with pytest.raises(ValidationError, match=r"delta must be a positive number of cells up to 2\*\*52"):
        left.structure_join(right, 1e150, 0.5)  # regions in whole cells would overflow int64


def test_correlated_pair_probability_of_huge_sigmas():
    """Bug: the covariance of the difference was ca sa_x sa_y + cb sb_x sb_y over s_x s_y, inf / inf
    = nan for sigmas near 1e160; now scaled before multiplying. Reference: scipy quadrature (a band
    of 0.07 sigma: Genz's method is accurate to about 1e-15 absolute, not for tiny rectangles)."""
    big = 1e160
    pair = np.array([[0, 1]], np.int64)
    p, _ = pair_probability(
        np.array([1.0, 2.0]), np.array([big, big]), np.array([0.5]),
        np.array([3.0, 2.5]), np.array([big, big]), np.array([0.5]),
        1e159, np.zeros(0, np.int64), pair, 0.0,
    )  # fmt: skip
    s = math.hypot(big, big)
    expected = scipy_rectangle((-2.0, -0.5), (s, s), 0.5, (-1e159, -1e159), (1e159, 1e159))
    assert 0.001 < expected < 0.01
    assert abs(p - expected) <= 1e-12


def test_join_of_arrays_over_different_domains(db):
    """Bug: possible ranges were clipped to each array's own domain, so a pair whose mass meets
    outside both domains failed Prop. 4.1 and was never validated (a silently dropped match)."""
    left = db.create_uncertain_array("da<>[x=0:9:5]", scheme="store-multiple", step=1)
    right = db.create_uncertain_array("db<>[x=40:49:5]", scheme="store-multiple", step=1)
    left.insert({"x": [9.9], "x_sigma": [20.0]})
    right.insert({"x": [40.1], "x_sigma": [20.0]})
    expected = band_reference(9.9, 20.0, 40.1, 20.0, 25.0)
    assert expected > 0.3
    for method in ("sbj", "bnl", "index"):
        pairs = left.structure_join(right, 25.0, 0.3, method=method, engine="local").to_pandas()
        assert len(pairs) == 1, method


# -- 1-D arrays and the R-tree baseline ---------------------------------------------------------------
def test_rtree_subarray_and_index_join_on_one_dimension(db):
    """Bug: libspatialindex refuses 1-D trees, so subarray(method="rtree") and the index join of 1-D
    arrays failed with an RTreeError."""
    left = db.create_uncertain_array("r1<>[t=-20:19:8]", scheme="store-mean")
    right = db.create_uncertain_array("r2<>[t=-20:19:8]")
    rng = np.random.default_rng(5)
    ma, sa = rng.uniform(-20, 20, 30), rng.uniform(0, 2, 30)
    mb, sb = rng.uniform(-20, 20, 40), rng.uniform(0, 2, 40)
    left.insert({"t": ma, "t_sigma": sa})
    right.insert({"t": mb, "t_sigma": sb})
    by_scheme = left.subarray(t=(-4, 3), threshold=0.4).to_pandas()
    by_tree = left.subarray(t=(-4, 3), threshold=0.4, method="rtree").to_pandas()
    pd.testing.assert_frame_equal(by_tree, by_scheme)
    check_selection(by_tree, {i: mp_gauss_mass(ma[i], sa[i], -4, 4) for i in range(30)}, 0.4)
    key = ["id_left", "id_right"]
    sbj = left.structure_join(right, 1.5, 0.3, engine="local").to_pandas().sort_values(key)
    index = left.structure_join(right, 1.5, 0.3, method="index").to_pandas().sort_values(key)
    pd.testing.assert_frame_equal(index.reset_index(drop=True), sbj.reset_index(drop=True))
    reference = {
        (i, j): band_reference(ma[i], sa[i], mb[j], sb[j], 1.5) for i in range(30) for j in range(40)
    }
    assert {(i, j) for i, j in sbj[key].itertuples(index=False)} == {
        k for k, p in reference.items() if p >= 0.3
    }


# -- 3. bad input -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "workload,value",
    [
        ([(5, 5)], (5, 5)),  # two sizes for one dimension: every insert failed with a zip() error
        ([(-5,)], -5),
        ([(float("nan"),)], None),
        ([(0,)], 0),
        ([("a",)], "a"),
        ([(float("inf"),)], float("inf")),
    ],
)
def test_a_bad_workload_is_refused_at_creation(db, workload, value):
    """Bug: workloads were not checked, so a wrong number of sizes was stored and broke every later
    insert with a bare ValueError; negative, zero or NaN sizes and text fed the cost model."""
    with pytest.raises(ValidationError, match=r"uncertain array w: workload") as caught:
        db.create_uncertain_array("w<v:float64>[x=0:99:10]", workload=workload)
    assert caught.value.array == "w"
    if value is not None:
        assert caught.value.value == value
    assert "w" not in db.uncertain_arrays()


def test_a_bad_workload_is_refused_in_statements_and_choose_step(db):
    with pytest.raises(ParseError, match=r"workload query size gives 1 positive numbers.*line 1, column 59"):
        db.sql("CREATE UNCERTAIN ARRAY w <v:float64> [x=0:99:10] WORKLOAD (5, 5);")
    assert "w" not in db.uncertain_arrays()
    with pytest.raises(ArrayViewsError, match=r"1.5"):
        db.sql("CREATE UNCERTAIN ARRAY w <v:float64> [x=0:99:10] WORKLOAD (5) THRESHOLD 1.5;")
    assert "w" not in db.uncertain_arrays()
    array = db.create_uncertain_array("w<v:float64>[x=0:99:10]", step=1, workload=[(5,)])
    array.insert({"x": [1.5, 50.0], "x_sigma": [0.5, 2.0], "v": [1.0, 2.0]})
    assert array.choose_step([(4,)]).steps is not None
    with pytest.raises(ValidationError, match=r"workload query sizes need one size in cells per dimension"):
        array.choose_step([(4, 4)])
    assert array.version == 1


SIGMA_COLUMNS = ["x_sigma", "y_sigma", "v_sigma"]


@pytest.fixture
def target(db):
    array = db.create_uncertain_array("t<v:gaussian, w:uniform, e:int32>[x=-8:7:4; y=0:9:5; corr(x, y)]")
    array.insert(
        {
            "x": [-0.5],
            "x_sigma": [0.3],
            "y": [1.0],
            "y_sigma": [0.2],
            "x_y_corr": [0.1],
            "v": [1.0],
            "v_sigma": [0.1],
            "w_low": [0.0],
            "w_high": [1.0],
            "e": [3],
        }
    )
    return array


@pytest.mark.parametrize("column", SIGMA_COLUMNS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), -1.0, -5e-324])
def test_bad_sigmas_are_refused_naming_array_column_and_value(target, column, bad):
    row = {"x": [-8.0, 7.5], "x_sigma": [0.3, 0.0], "y": [0.0, 9.99], "y_sigma": [1.0, 2.0],
           "x_y_corr": [0.0, -0.5], "v": [1.0, 2.0], "v_sigma": [0.0, 1.0], "w_low": [0.0, 1.0],
           "w_high": [0.0, 2.0], "e": [1, 2]}  # fmt: skip
    row[column] = [row[column][0], bad]
    with pytest.raises(ValidationError) as caught:
        target.insert(row)
    error = caught.value
    assert error.array == "t" and error.column == column and "row 1" in str(error)
    assert str(error).startswith(f"uncertain array t, column {column}: ")
    assert re.search(r"(not a finite number|negative standard deviation)", str(error))
    assert error.value == bad or (math.isnan(bad) and math.isnan(error.value))
    assert target.version == 1 and target.count() == 1


@pytest.mark.parametrize("threshold", [0.0, 0.002, -0.5, 1.0000001, float("nan"), float("inf"), "high"])
def test_thresholds_outside_the_allowed_range_are_refused(target, threshold):
    with pytest.raises(ValidationError, match=r"uncertain array t: subarray threshold") as caught:
        target.subarray(x=(0, 1), threshold=threshold)
    assert caught.value.array == "t"
    with pytest.raises(ValidationError, match=r"uncertain array t: structure join threshold"):
        target.structure_join(target, 1.0, threshold)
    if threshold not in (0.0, 0.002):
        with pytest.raises(
            ValidationError, match=r"uncertain array t: aggregate threshold must lie in \[0, 1\]"
        ):
            target.regrid([2, 2], threshold=threshold)
    assert target.version == 1


def test_wrong_dimensions_and_unknown_kinds_are_refused(db, target):
    with pytest.raises(ValidationError, match=r"uncertain array t has no dimension 'z'"):
        target.subarray(z=(0, 1), threshold=0.5)
    with pytest.raises(
        ValidationError, match=r"uncertain array t: regrid needs one block size per dimension \(2\)"
    ):
        target.regrid([2])
    one = db.create_uncertain_array("one<>[x=-8:7:4]")
    with pytest.raises(ValidationError, match=r"structure join of t \(2 dimensions\) and one \(1\)"):
        target.structure_join(one, 1.0, 0.5)
    with pytest.raises(ParseError, match=r"unknown attribute type 'poisson'.*line 1, column 7"):
        db.create_uncertain_array("bad<v:poisson>[x=0:9]")
    with pytest.raises(ParseError) as caught:
        db.sql("CREATE UNCERTAIN ARRAY bad <v:lognormal> [x=0:9];")
    assert "line 1" in str(caught.value) and "lognormal" in str(caught.value)
    with pytest.raises(ValidationError, match=r"uncertain array t, column x: .*dimension range \[-8, 8\)"):
        db.sql("INSERT INTO t VALUES (8.0, 0.1, 1.0, 0.1, 0.0, 1.0, 0.1, 0.0, 1.0, 1);")
    with pytest.raises(ArrayViewsError, match=r"t"):
        db.sql("INSERT INTO t VALUES (1.0, 0.1, 1.0);")
    assert target.version == 1 and "bad" not in db.uncertain_arrays()


# -- 4. both engines ----------------------------------------------------------------------------------
def test_engines_agree_on_joins_and_aggregates(spark, tmp_path):
    """The same warehouse read with execution='local' and 'spark': joins give the same pairs and
    probabilities, aggregates the same bits (and match brute force via math.fsum)."""
    import arrayviews

    location = str(tmp_path / "warehouse")
    seed = arrayviews.connect(location, spark=spark, execution="local")
    rng = np.random.default_rng(11)
    n = 60
    data = {"x": rng.uniform(-16, 15.99, n), "x_sigma": rng.choice([0.0, 1e-9, 0.4, 2.0, 30.0], n),
            "y": rng.uniform(-3, 4.99, n), "y_sigma": rng.choice([0.0, 0.2, 1.0, 5.0], n),
            "v": rng.normal(0, 10, n)}  # fmt: skip
    a = seed.create_uncertain_array("ea<v:float64>[x=-16:15:6; y=-3:4:3]", scheme="store-mean")
    b = seed.create_uncertain_array("eb<v:float64>[x=-16:15:6; y=-3:4:3]", step=(1, 0))
    a.insert(data)
    b.insert(
        {k: v[::-1] + (0.3 if k in ("x", "y") else 0) for k, v in data.items()}
        | {"x": np.clip(data["x"][::-1] + 0.3, -16, 15.99), "y": np.clip(data["y"][::-1] + 0.3, -3, 4.99)}
    )
    dbs = {mode: arrayviews.connect(location, spark=spark, execution=mode) for mode in ("local", "spark")}
    results = {}
    for mode, db in dbs.items():
        left, right = db.uncertain_array("ea"), db.uncertain_array("eb")
        join = left.structure_join(right, 1.25, 0.2, engine=mode)
        pairs = join.to_pandas().sort_values(["id_left", "id_right"]).reset_index(drop=True)
        assert join.explain()["engine"] == mode
        regrid = left.regrid({"x": 5, "y": 3}, "count(*)", "sum(v)", engine=mode)
        group = left.aggregate("count(*)", by=["y"], threshold=0.25, engine=mode)
        results[mode] = (pairs, regrid.to_pandas(), group.to_pandas())
    for local, distributed in zip(results["local"], results["spark"], strict=True):
        pd.testing.assert_frame_equal(local, distributed, check_exact=True)
    pairs, regrid, group = results["local"]
    assert len(pairs) > 20
    # brute force: the expected count of each block of 5 x 3 cells starting at the domain's low end
    xs, ys = data["x"], data["y"]
    for _, row in regrid.sample(5, random_state=1).iterrows():
        bx, by = int(row["x"]) - (-16), int(row["y"]) - (-3)
        x_lo, y_lo = -16 + 5 * bx, -3 + 3 * by
        x_hi, y_hi = min(x_lo + 5, 16), min(y_lo + 3, 5)
        terms = [
            mp_gauss_mass(xs[i], data["x_sigma"][i], x_lo, x_hi)
            * mp_gauss_mass(ys[i], data["y_sigma"][i], y_lo, y_hi)
            for i in range(n)
        ]
        assert row["count"] == pytest.approx(math.fsum(terms), abs=1e-13)
        assert row["v_sum"] == pytest.approx(
            math.fsum(t * v for t, v in zip(terms, data["v"], strict=True)), abs=1e-11
        )
