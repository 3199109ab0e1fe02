"""Uncertain arrays tried a second time as a scientist with a noisy catalog and as an adversary, where
the first round (test_uncertain_trial.py) did not go: aggregates over null and extreme values, empty
arrays and the cost model, 3-D arrays with a correlated pair, joins of correlated tuples on both
engines, history (several batches, relayouts, time travel) against a brute force over the tuples of
each version, and resource limits. References are mpmath's error functions, scipy quadrature, plain
Python sums and Python integers."""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from scipy import integrate
from scipy.stats import norm

from arrayviews.model.errors import ValidationError


# -- references -------------------------------------------------------------------------------------
@functools.cache
def mass(mu: float, sigma: float, a: float, b: float) -> float:
    """P(a <= X < b) for X ~ N(mu, sigma), mpmath at 50 digits (complementary error functions away
    from the mean, so tails keep their relative accuracy); sigma 0 is an exact position."""
    if sigma == 0:
        return 1.0 if a <= mu < b else 0.0
    with mpmath.workdps(50):
        root = mpmath.sqrt(2) * mpmath.mpf(sigma)
        za, zb = (mpmath.mpf(a) - mpmath.mpf(mu)) / root, (mpmath.mpf(b) - mpmath.mpf(mu)) / root
        if za >= 1:
            value = mpmath.erfc(za) - mpmath.erfc(zb)
        elif zb <= -1:
            value = mpmath.erfc(-zb) - mpmath.erfc(-za)
        else:
            value = mpmath.erf(zb) - mpmath.erf(za)
        return float(value / 2)


@functools.cache
def rectangle(mu: tuple, sigma: tuple, rho: float, a: tuple, b: tuple) -> float:
    """P(a <= (X, Y) < b) of a bivariate Gaussian by scipy quadrature (absolute error about 1e-15) of
    the density of X times the closed-form conditional interval probability of Y."""
    if rho == 0 or sigma[0] == 0 or sigma[1] == 0:
        return mass(mu[0], sigma[0], a[0], b[0]) * mass(mu[1], sigma[1], a[1], b[1])
    c = math.sqrt(1.0 - rho * rho)
    za = [(a[k] - mu[k]) / sigma[k] for k in range(2)]
    zb = [(b[k] - mu[k]) / sigma[k] for k in range(2)]

    def conditional(x: float) -> float:
        lo, hi = (za[1] - rho * x) / c, (zb[1] - rho * x) / c
        interval = norm.sf(lo) - norm.sf(hi) if lo > 0 else norm.cdf(hi) - norm.cdf(lo)
        return norm.pdf(x) * interval

    lo, hi = max(za[0], -40.0), min(zb[0], 40.0)
    if not hi > lo:
        return 0.0
    points = sorted({lo, hi, *(p for p in (-8, -4, -2, -1, 0, 1, 2, 4, 8) if lo < p < hi)})
    return math.fsum(
        integrate.quad(conditional, p, q, epsabs=1e-15, epsrel=1e-13, limit=200)[0]
        for p, q in zip(points[:-1], points[1:], strict=True)
    )


def selection_matches(got: dict, reference: dict, threshold: float, accuracy: float = 1e-10) -> None:
    """Exactly the keys at or above the threshold (ties within 1e-9 relative may fall either way),
    each with its reference probability."""
    must = {k for k, p in reference.items() if p >= threshold * (1 + 1e-9)}
    may = {k for k, p in reference.items() if p >= threshold * (1 - 1e-9)}
    assert must <= set(got) <= may, (sorted(must - set(got)), sorted(set(got) - may))
    for key, p in got.items():
        assert threshold <= p <= 1.0
        assert abs(p - reference[key]) <= accuracy, (key, p, reference[key])


# -- 1. aggregates: count(v), nulls and extreme values ----------------------------------------------
def test_count_of_an_attribute_counts_tuples_with_a_value(db):
    """Bug: count(v) multiplied each block weight by the value, as sum(v) does, so it returned the
    expected sum (v_count 5.0 for values 2 and 3 and a null; g_count 60 for three Gaussian values of
    mean 20). Reference: the sum over tuples whose value is not null of P(t in block), by mpmath."""
    array = db.create_uncertain_array("nulls<v:float64 NULL, g:gaussian>[x=-6:5:4]", scheme="store-mean")
    xs, sigmas = [-5.5, -1.25, 0.5, 3.0, 4.9], [0.0, 0.7, 2.5, 0.2, 1.0]
    values = [2.0, None, 3.0, None, -7.5]
    array.insert(
        pa.table({"x": xs, "x_sigma": sigmas, "v": pa.array(values, pa.float64()),
                  "g": [10.0, 20.0, 30.0, 40.0, 50.0], "g_sigma": [1.0] * 5})
    )  # fmt: skip
    blocks = array.regrid([3], "count(*)", "count(v)", "count(g)", "sum(v)", engine="local").to_pandas()
    assert list(blocks.columns) == ["x", "count", "v_count", "g_count", "v_sum"]
    for _, row in blocks.iterrows():
        low = -6 + 3 * (int(row["x"]) + 6)
        weights = [mass(m, s, low, low + 3) for m, s in zip(xs, sigmas, strict=True)]
        assert row["count"] == pytest.approx(math.fsum(weights), abs=1e-15)
        assert row["g_count"] == pytest.approx(math.fsum(weights), abs=1e-15)
        with_value = [w for w, v in zip(weights, values, strict=True) if v is not None]
        assert row["v_count"] == pytest.approx(math.fsum(with_value), abs=1e-15)
        assert row["v_sum"] == pytest.approx(
            math.fsum(w * v for w, v in zip(weights, values, strict=True) if v is not None), abs=1e-14
        )
    whole = array.aggregate("count(v)", engine="local").to_pandas()
    inside = [mass(m, s, -6, 6) for m, s, v in zip(xs, sigmas, values, strict=True) if v is not None]
    assert whole["v_count"].tolist() == [pytest.approx(math.fsum(inside), abs=1e-15)]


def test_the_expected_sum_of_a_uniform_near_the_float_limit_is_finite(db):
    """Bug: the uniform midpoint was (low + high) / 2, which overflows for low 1e308, high 1.7e308:
    the expected sum came out inf instead of 1.35e308 (and no error said so)."""
    array = db.create_uncertain_array("huge<u:uniform>[x=0:9:5]")
    array.insert({"x": [1.5, 2.5], "x_sigma": [0.0, 0.0], "u_low": [1e308, -2.0], "u_high": [1.7e308, 5.0]})
    result = array.aggregate("sum(u)", engine="local").to_pandas()
    expected = (10**308 + 17 * 10**307) // 2 + 1.5  # Python integers: the midpoint, exactly
    assert result["u_sum"].tolist() == [pytest.approx(float(expected), rel=1e-15)]
    assert math.isfinite(result["u_sum"].iloc[0])


# -- 2. empty arrays and the cost model ---------------------------------------------------------------
def test_the_cost_model_and_relayout_on_an_empty_array(db):
    """Bug: choose_step and relayout(step="auto") on an array without tuples failed with numpy's
    'cannot reshape array of size 0'. Now the model answers (no copies, no cost); an empty relayout
    to "auto" leaves the step to the first insert, or is refused where the array has another scheme,
    and changes nothing."""
    array = db.create_uncertain_array("empty<v:float64>[x=0:99:10; y=0:99:10]")
    choice = array.choose_step([(5, 5)])
    assert all(math.isfinite(e) and e >= 0 for e in choice.estimates.values())
    assert set(choice.copies.values()) == {0.0}
    assert not array.relayout(step="auto").committed
    assert array.version == 0 and array.layout.steps is None
    array.insert({"x": [5.0, 50.0], "x_sigma": [4.0, 4.0], "y": [5.0, 50.0], "y_sigma": [4.0, 4.0],
                  "v": [1.0, 2.0]})  # fmt: skip
    assert array.layout.steps is not None and array.version == 1
    result = array.subarray(x=(0, 10), y=(0, 10), threshold=0.5).to_pandas()
    assert result["id"].tolist() == [0]
    assert result["probability"].iloc[0] == pytest.approx(mass(5.0, 4.0, 0, 11) ** 2, abs=1e-15)

    mean = db.create_uncertain_array("empty_mean<>[x=0:99:10]", scheme="store-mean")
    with pytest.raises(ValidationError, match=r"uncertain array empty_mean has no tuples .*give a step"):
        mean.relayout(scheme="store-multiple", step="auto")
    assert mean.version == 0 and mean.layout.scheme == "store-mean"
    mean.relayout(scheme="store-multiple", step=2)  # a given step needs no tuples
    assert mean.version == 1 and mean.layout.steps == (2,) and mean.count() == 0


# -- 3. sigmas far wider than the cells, chunks far larger than the tuples ------------------------------
BIG = 2**46  # cells per half dimension: positions near it still resolve 1/128 of a cell


def test_store_mean_with_huge_chunks_computes_fences_on_the_tuples_only(db):
    """Bug: store-mean computed each batch's fences on the whole of every chunk a tuple touched, so
    one narrow tuple in a chunk of 2**30 x 8 cells allocated 8.6e9 cells x 3 x 8 bytes ('MemoryError:
    Allocation failed'), and smaller huge chunks were killed by the system. Now the dense block is
    the box the ranges cover inside the chunk. Subarrays against mpmath."""
    array = db.create_uncertain_array(f"wide<>[x={-BIG}:{BIG - 1}:{2**30}; y=0:7:8]", scheme="store-mean")
    xs = [-BIG + 0.5, -3.25, 0.0, 1e12 + 0.75, BIG - 1.5]
    sigmas = [0.0, 0.4, 50.0, 2.0, 0.3]
    ys, y_sigmas = [1.5, 2.5, 3.5, 4.5, 6.5], [0.2, 0.0, 0.5, 0.3, 1.0]
    array.insert({"x": xs, "x_sigma": sigmas, "y": ys, "y_sigma": y_sigmas})
    assert array.count() == 5
    for (x0, x1), (y0, y1) in [((-BIG, -BIG + 3), (0, 7)), ((-60, 40), (2, 4)), ((10**12, 10**12 + 1), (4, 4)),
                               ((BIG - 2, BIG - 1), (5, 7))]:  # fmt: skip
        result = array.subarray(x=(x0, x1), y=(y0, y1), threshold=0.2).to_pandas()
        reference = {
            i: mass(xs[i], sigmas[i], x0, x1 + 1) * mass(ys[i], y_sigmas[i], y0, y1 + 1) for i in range(5)
        }
        selection_matches(dict(zip(result["id"], result["probability"], strict=True)), reference, 0.2)


@pytest.mark.parametrize(
    "scheme,step,sigma",
    [("store-all", None, 1e9), ("store-multiple", 2, 1e12), ("store-mean", None, 1e13)],
)
def test_a_batch_too_wide_to_place_is_refused_naming_the_tuple(db, scheme, step, sigma):
    """Bug: the copies (store-all, store-multiple) or fence records (store-mean) of a tuple whose sigma
    spans much of a huge dimension were allocated blindly: 1e9 cells of sigma under store-all asked
    numpy for petabytes ('MemoryError'), and a few million cells beyond memory got the process killed.
    Now the batch is refused first, naming the array, the sigma column, the row and its value; the
    array keeps its version and tuples."""
    kwargs = {"scheme": scheme} if step is None else {"scheme": scheme, "step": step}
    array = db.create_uncertain_array(f"refuse_{scheme[6:]}<>[x={-BIG}:{BIG - 1}:{2**20}; y=0:7:8]", **kwargs)
    array.insert({"x": [0.5], "x_sigma": [1.0], "y": [1.5], "y_sigma": [0.5]})
    with pytest.raises(ValidationError, match=r"more than 20,000,000 per insert or relayout") as caught:
        array.insert({"x": [3.5, 7.5], "x_sigma": [0.5, sigma], "y": [2.5, 3.5], "y_sigma": [0.1, 0.1]})
    error = caught.value
    assert error.array == array.name and error.column == "x_sigma" and error.value == sigma
    assert str(error).startswith(f"uncertain array {array.name}, column x_sigma: ")
    assert "row 1 (id 2)" in str(error) and "nothing was written" in str(error)
    assert array.version == 1 and array.count() == 1
    assert array.subarray(x=(0, 0), y=(1, 1), threshold=0.2).to_pandas()["id"].tolist() == [0]  # P 0.26


# -- 4. history: batches, relayouts and time travel against the tuples of each version -----------------
def test_every_version_answers_for_its_own_tuples(db):
    """Three batches (sigmas from 0 to 15 cells, a correlated pair, negative cells), a relayout to
    another step and one to store-mean: each version's subarray and expected count match mpmath over
    the tuples that version holds (this held). at_version(1.5) read version 1 silently (int()); now a
    non-integer version is refused, as for arrays."""
    array = db.create_uncertain_array("hist<v:float64>[x=-30:29:7; y=-5:4:3; corr(x, y)]", step=1)
    rng = np.random.default_rng(9)
    held: dict[int, list[tuple]] = {}
    tuples: list[tuple] = []
    for wide in (0.1, 5.0, 15.0):
        n = 12
        batch = {"x": rng.uniform(-30, 29.99, n), "x_sigma": rng.choice([0.0, 0.2, 1.0, wide], n),
                 "y": rng.uniform(-5, 4.99, n), "y_sigma": rng.choice([0.0, 0.3, 2.0], n),
                 "x_y_corr": rng.uniform(-0.9, 0.9, n), "v": rng.normal(0, 1, n)}  # fmt: skip
        array.insert(batch)
        tuples += [tuple(float(batch[c][i]) for c in ("x", "y", "x_sigma", "y_sigma", "x_y_corr")) for i in range(n)]
        held[array.version] = list(tuples)
    array.relayout(step=3)
    held[array.version] = list(tuples)
    array.relayout(scheme="store-mean")
    held[array.version] = list(tuples)
    assert sorted(held) == [1, 2, 3, 4, 5]
    for version, members in held.items():
        pinned = array.at_version(version)
        assert pinned.count() == len(members)
        for (x0, y0, x1, y1), threshold in [((-9, -2, 3, 1), 0.3), ((-30, 0, -28, 0), 0.01)]:
            result = pinned.subarray(x=(x0, x1), y=(y0, y1), threshold=threshold).to_pandas()
            reference = {
                i: rectangle((x, y), (sx, sy), rho, (x0, y0), (x1 + 1, y1 + 1))
                for i, (x, y, sx, sy, rho) in enumerate(members)
            }
            selection_matches(dict(zip(result["id"], result["probability"], strict=True)), reference, threshold, 1e-9)
        total = pinned.regrid([7, 3], "count(*)", engine="local").to_pandas()["count"]
        inside = [rectangle((x, y), (sx, sy), rho, (-30, -5), (30, 5)) for x, y, sx, sy, rho in members]
        assert math.fsum(total) == pytest.approx(math.fsum(inside), abs=1e-9)
    for bad in (1.5, "2", True, None):
        with pytest.raises(ValidationError, match=r"uncertain array hist: a version is an integer"):
            array.at_version(bad)
    assert array.at_version(np.int64(2)).count() == 24


# -- 5. every exact attribute type the docs promise ---------------------------------------------------
def test_text_and_time_attributes_are_stored_queried_and_counted(db):
    """Bugs: an uncertain array with a string attribute could not store anything (the API failed with
    numpy's 'Cannot change data-type for array of references', INSERT with "'abc' is a string, not a
    string value", a null with pyarrow's 'Expected bytes, got a int'), nor with a datetime64 one
    ('Invalid integer data type M'); count(b) of a bool was refused as a sum, and sum(t) of times
    returned nanoseconds since 1970. Values must come back as given; counts against mpmath."""
    array = db.create_uncertain_array("labels<name:string NULL, seen:datetime64 NULL, ok:bool>[x=0:9:5]",
                                      scheme="store-all")  # fmt: skip
    names = ["a", None, "ünï ✓", ""]
    seen = [np.datetime64("2026-01-01T06", "ns"), None, np.datetime64("1969-12-31", "ns"), None]
    xs, sigmas = [1.5, 2.5, 7.0, 9.5], [0.0, 1.0, 2.0, 0.25]
    array.insert(pa.table({"x": xs, "x_sigma": sigmas, "name": pa.array(names, pa.string()),
                           "seen": pa.array(seen, pa.timestamp("ns")), "ok": [True, False, True, False]}))  # fmt: skip
    array.relayout(scheme="store-mean")  # read back and written again, fences included
    stored = array.to_pandas()
    assert [None if isinstance(v, float) else v for v in stored["name"]] == names
    assert [None if pd.isna(v) else np.datetime64(v, "ns") for v in stored["seen"]] == seen
    inside = array.subarray(x=(0, 3), threshold=0.1).to_pandas()
    assert inside["id"].tolist() == [0, 1] and inside["name"].iloc[0] == "a"
    counts = array.aggregate("count(name)", "count(seen)", "count(ok)", engine="local").to_pandas()
    weights = [mass(m, s, 0, 10) for m, s in zip(xs, sigmas, strict=True)]
    named = [w for w, n in zip(weights, names, strict=True) if n is not None]
    assert counts["name_count"].iloc[0] == pytest.approx(math.fsum(named), abs=1e-15)
    assert counts["seen_count"].iloc[0] == pytest.approx(weights[0] + weights[2], abs=1e-15)
    assert counts["ok_count"].iloc[0] == pytest.approx(math.fsum(weights), abs=1e-15)
    for column in ("name", "seen", "ok"):
        with pytest.raises(ValidationError, match=rf"sum over the \w+ attribute {column} is not supported"):
            array.aggregate(f"sum({column})")
    db.sql("CREATE UNCERTAIN ARRAY tags <tag:string> [x=0:9:5];")
    db.sql("INSERT INTO tags VALUES (1.5, 0, 'abc'), (2.5, 0.5, '');")
    assert db.sql("SELECT * FROM tags").to_pandas()["tag"].tolist() == ["abc", ""]
    with pytest.raises(ValidationError, match=r"column tag: 5 is not a string \(quote it"):
        db.sql("INSERT INTO tags VALUES (1.5, 0, 5);")
    assert db.uncertain_array("tags").version == 1


def test_an_aggregate_reaching_too_many_blocks_is_refused(db):
    """Bug: regrid and group-by allocated every (tuple, block) contribution within 8.3 sigma blindly:
    grouping by x a tuple of sigma 5e9 cells (stored as 1,500 copies with a step of 10**7) asked for
    8.3e10 contributions ('MemoryError'), a thousand times fewer got the process killed. Now refused
    first, naming the array, the sigma column, the tuple and its value; larger blocks still work."""
    array = db.create_uncertain_array(f"spread<v:float64>[x={-BIG}:{BIG - 1}:{2**30}]", step=10**7)
    array.insert({"x": [0.5, 10.0], "x_sigma": [5e9, 1.0], "v": [1.0, 2.0]})
    with pytest.raises(ValidationError, match=r"more than 20,000,000; tuple 0 \(sigma 5e\+09\)") as caught:
        array.aggregate("count(*)", by=["x"], engine="local").to_pandas()
    assert caught.value.column == "x_sigma" and caught.value.value == 5e9
    coarse = array.regrid([2**36], "count(*)", engine="local").to_pandas()
    assert coarse["count"].sum() == pytest.approx(2.0, abs=1e-12)
    near = coarse[coarse["x"] == -BIG + 2**10]  # block 1024 from the low end: [0, 2**36) in cells
    assert near["count"].tolist() == [pytest.approx(1.0 + mass(0.5, 5e9, 0, 2**36), abs=1e-12)]


def test_a_wide_outer_tuple_routes_only_to_inner_chunks_with_tuples(db):
    """Bug: the join on Spark emitted each outer tuple once per inner chunk its candidate box
    overlaps, empty ones included: a tuple of sigma 5e9 cells over inner chunks of 16 cells asked for
    3.7e9 routed rows ('MemoryError' in the task), and over chunks of 2**20 took minutes for nothing.
    Now routed to the inner chunks holding tuples only. Pairs against mpmath's closed form."""
    left = db.create_uncertain_array(f"far_a<>[x={-BIG}:{BIG - 1}:{2**30}]", step=10**7)
    right = db.create_uncertain_array(f"far_b<>[x={-BIG}:{BIG - 1}:16]", step=1)
    a = [(0.5, 5e9), (10.0, 1.0), (-3e10, 1e9)]
    b = [(3.0, 0.0), (1e10, 2.0), (-BIG + 1.0, 0.5), (12.0, 2.0)]
    left.insert({"x": [m for m, _ in a], "x_sigma": [s for _, s in a]})
    right.insert({"x": [m for m, _ in b], "x_sigma": [s for _, s in b]})
    delta, threshold = 5e9, 0.05
    reference = {
        (i, j): mass(ma - mb, math.hypot(sa, sb), -delta, delta)
        for i, (ma, sa) in enumerate(a)
        for j, (mb, sb) in enumerate(b)
    }
    pairs = left.structure_join(right, delta, threshold, engine="spark", outer="left").to_pandas()
    got = {(i, j): p for i, j, p in pairs.itertuples(index=False)}
    selection_matches(got, reference, threshold, 1e-12)
    assert {(0, 0), (0, 1), (0, 3), (1, 0), (1, 3)} == set(got)
