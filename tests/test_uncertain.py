"""Uncertain arrays end to end: inserts and their validation, probabilistic Subarray and Structure-Join
under every storage scheme against brute force (every tuple / pair integrated on its own with
scipy), aggregates, fences, versions and time travel, explain."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import integrate
from scipy.special import ndtr
from scipy.stats import norm

from arrayviews.model.copy_layout import copy_counts
from arrayviews.model.errors import NotFoundError, ValidationError
from arrayviews.model.uncertain import possible_range

SCHEMES = [("store-all", 0), ("store-mean", 0), ("store-multiple", 1), ("store-multiple", (3, 2))]
TOLERANCE = 1e-9  # tuples this close to the threshold may fall either way


def catalog(rng, n, size=(60, 40), heavy=40.0, zero=0.05):
    """Tuples with SDSS-like sigmas: mostly small, a heavy tail (up to ``heavy`` times wider), some
    exact positions."""
    sigmas = rng.lognormal(np.log(0.3), 0.6, (n, 2))
    if heavy:
        tail = rng.random(n) < 0.08
        sigmas[tail] *= rng.uniform(5, heavy, (int(tail.sum()), 1))
    sigmas[rng.random(n) < zero] = 0.0
    return {
        "x": rng.uniform(0, size[0], n),
        "y": rng.uniform(0, size[1], n),
        "x_sigma": sigmas[:, 0],
        "y_sigma": sigmas[:, 1],
        "flux": rng.normal(20, 3, n),
        "flux_sigma": rng.uniform(0, 1, n),
        "mag": rng.normal(18, 1, n).astype(np.float32),
    }


SCHEMA = "{name}<flux:gaussian, mag:float32>[x=0:59:8; y=0:39:8]"


def interval(mu, s, a, b):
    """P(a <= X < b) per tuple, scipy; a zero sigma is an exact position."""
    with np.errstate(divide="ignore", invalid="ignore"):
        p = norm.cdf(b, mu, np.where(s > 0, s, 1)) - norm.cdf(a, mu, np.where(s > 0, s, 1))
    return np.where(s > 0, p, ((mu >= a) & (mu < b)).astype(float))


def check_result(result: pd.DataFrame, reference: np.ndarray, threshold: float) -> None:
    got = dict(zip(result["id"].tolist(), result["probability"].tolist(), strict=True))
    must = set(np.flatnonzero(reference >= threshold + TOLERANCE).tolist())
    may = set(np.flatnonzero(reference >= threshold - TOLERANCE).tolist())
    assert must <= set(got) <= may
    for i, p in got.items():
        assert abs(p - reference[i]) <= 1e-12
    assert result["id"].is_unique


# -- inserts and validation ------------------------------------------------------------------------
@pytest.fixture
def sky(db):
    array = db.create_uncertain_array(SCHEMA.format(name="sky"), scheme="store-multiple", step=1)
    array.insert(catalog(np.random.default_rng(0), 50))
    return array


def _bad(data: dict, **changes) -> dict:
    out = {k: np.array(v, copy=True) for k, v in data.items()}
    for key, value in changes.items():
        if value is None:
            out.pop(key)
        else:
            out[key] = value
    return out


@pytest.mark.parametrize(
    "change,column,value",
    [
        ({"x_sigma": lambda a: np.r_[a[:3], -0.5, a[4:]]}, "x_sigma", -0.5),
        ({"x": lambda a: np.r_[a[:2], 60.0, a[3:]]}, "x", 60.0),
        ({"y": lambda a: np.r_[-0.25, a[1:]]}, "y", -0.25),
        ({"x": lambda a: np.r_[a[:5], np.nan, a[6:]]}, "x", None),
        ({"flux_sigma": lambda a: np.r_[-1.0, a[1:]]}, "flux_sigma", -1.0),
        ({"y_sigma": None}, "y_sigma", None),
        ({"colour": lambda a: np.zeros(10)}, "colour", None),
        ({"id": lambda a: np.r_[np.arange(9), 3]}, "id", 3),
        ({"id": lambda a: np.arange(10, dtype=float)}, "id", "double"),
        ({"mag": lambda a: np.r_[a[:4].astype(np.float64), 1e39, a[5:]]}, "mag", 1e39),
        ({"mag": lambda a: np.r_[np.arange(3), 2**24 + 1, np.arange(6)].astype(np.int64)}, "mag", 2**24 + 1),
    ],
)
def test_bad_batches_are_rejected_and_change_nothing(sky, change, column, value):
    data = {k: v[:10] for k, v in catalog(np.random.default_rng(1), 10).items()}
    changes = {k: (None if f is None else f(data.get(k, np.zeros(10)))) for k, f in change.items()}
    before = (sky.version, sky.count())
    with pytest.raises(ValidationError) as caught:
        sky.insert(_bad(data, **changes))
    error = caught.value
    assert error.array == "sky" and error.column == column
    assert f"column {column}" in str(error)
    if isinstance(value, float):
        assert error.value == pytest.approx(value)
    elif isinstance(value, int):
        assert error.value == value
    assert (sky.version, sky.count()) == before


def test_values_are_stored_under_the_same_type_rule_as_array_cells(db):
    """float64 into float32 rounds to the nearest float32 and small integers convert exactly, as for
    array attributes (model.types.accepts); the reference is numpy's own float32 rounding."""
    data = {k: v[:10] for k, v in catalog(np.random.default_rng(2), 10).items()}
    mags = np.random.default_rng(3).normal(18, 1, 10)  # float64
    fresh = db.create_uncertain_array(SCHEMA.format(name="fresh"), scheme="store-multiple", step=1)
    fresh.insert(_bad(data, mag=mags))
    stored = fresh.to_pandas().sort_values("id")
    assert stored["mag"].dtype == np.float32
    np.testing.assert_array_equal(stored["mag"].to_numpy(), mags.astype(np.float32))
    array = db.create_array("plain<mag:float32>[i=0:9:10]")
    array.insert({"i": np.arange(10), "mag": mags})
    np.testing.assert_array_equal(array.to_numpy(), mags.astype(np.float32))


def test_correlations_outside_the_open_interval_are_rejected(db):
    array = db.create_uncertain_array("c<>[x=0:9:5; y=0:9:5; corr(x, y)]")
    base = {"x": [1.0, 2.0], "y": [1.0, 2.0], "x_sigma": [0.1, 0.1], "y_sigma": [0.1, 0.1]}
    for bad in (1.0, -1.0, 1.5):
        with pytest.raises(ValidationError, match=r"column x_y_corr: correlation") as caught:
            array.insert({**base, "x_y_corr": [0.0, bad]})
        assert caught.value.value == bad and caught.value.column == "x_y_corr"
    assert array.version == 0
    array.insert(base)  # the correlation column is optional (independent positions)
    assert array.count() == 2


def test_ids_are_generated_kept_and_never_repeated(sky):
    assert sky.to_pandas()["id"].tolist() == list(range(50))
    more = catalog(np.random.default_rng(2), 5)
    sky.insert(more)
    assert sky.to_pandas()["id"].tolist() == list(range(55))
    with pytest.raises(ValidationError, match="id 52 is already stored") as caught:
        sky.insert({**catalog(np.random.default_rng(3), 2), "id": np.array([100, 52])})
    assert caught.value.column == "id" and caught.value.value == 52
    sky.insert({**catalog(np.random.default_rng(3), 2), "id": np.array([100, 7_000_000_000])})
    assert sky.to_pandas()["id"].tolist()[-2:] == [100, 7_000_000_000]
    assert sky.count() == 57


def test_stored_tuples_round_trip(db):
    data = catalog(np.random.default_rng(5), 200)
    array = db.create_uncertain_array(SCHEMA.format(name="rt"), scheme="store-all")
    array.insert(data)
    frame = array.to_pandas()
    for column in ("x", "y", "x_sigma", "y_sigma", "flux", "flux_sigma", "mag"):
        assert np.array_equal(frame[column].to_numpy(), data[column]), column


# -- Subarray against brute force ------------------------------------------------------------------
@pytest.mark.parametrize("scheme,step", SCHEMES)
def test_subarray_matches_brute_force(db, scheme, step):
    rng = np.random.default_rng(10)
    data = catalog(rng, 1500)
    array = db.create_uncertain_array(SCHEMA.format(name="u"), scheme=scheme, step=step)
    half = 700
    array.insert({k: v[:half] for k, v in data.items()})
    array.insert({k: v[half:] for k, v in data.items()})
    for _ in range(6):
        x0, y0 = int(rng.integers(0, 55)), int(rng.integers(0, 36))
        w, h = int(rng.integers(0, 8)), int(rng.integers(0, 6))
        threshold = float(rng.choice([0.01, 0.3, 0.5, 0.9, 1.0]))
        query = array.subarray(x=(x0, x0 + w), y=(y0, y0 + h), threshold=threshold)
        result = query.to_pandas()
        reference = interval(data["x"], data["x_sigma"], x0, min(60, x0 + w + 1)) * interval(
            data["y"], data["y_sigma"], y0, min(40, y0 + h + 1)
        )
        check_result(result, reference, threshold)
        row = result.set_index("id")
        for i in row.index[:5]:
            assert row.loc[i, "flux"] == data["flux"][i] and row.loc[i, "mag"] == data["mag"][i]
    # a dimension left out is unconstrained (the whole line)
    result = array.subarray(x=(10, 12), threshold=0.5).to_pandas()
    check_result(result, interval(data["x"], data["x_sigma"], 10, 13), 0.5)


def test_store_mean_fences_cover_every_overlapping_tuple(db):
    rng = np.random.default_rng(12)
    data = catalog(rng, 600)
    array = db.create_uncertain_array(SCHEMA.format(name="fm"), scheme="store-mean")
    array.insert(data)
    first_x, last_x = possible_range(data["x"], data["x_sigma"], 3.0, 0, 59)
    first_y, last_y = possible_range(data["y"], data["y_sigma"], 3.0, 0, 39)
    mean_cells = np.stack([np.floor(data["x"]), np.floor(data["y"])], axis=1).astype(int)
    for _ in range(10):
        x0, y0 = int(rng.integers(0, 58)), int(rng.integers(0, 38))
        plan = array.subarray(x=(x0, x0 + 1), y=(y0, y0 + 1), threshold=0.5).plan()
        overlapping = (first_x <= x0 + 1) & (last_x >= x0) & (first_y <= y0 + 1) & (last_y >= y0)
        if not overlapping.any():
            assert plan.region.chunks.ranges is None
            continue
        region = plan.region
        cells = mean_cells[overlapping]
        # the fences walk to every overlapping tuple's mean cell, and no further than the widest one
        assert (cells >= region.low).all() and (cells <= region.high).all()
        assert tuple(cells.min(axis=0)) == region.low and tuple(cells.max(axis=0)) == region.high


def test_correlated_subarray_matches_integration(db):
    rng = np.random.default_rng(21)
    n = 150
    data = {
        "x": rng.uniform(0, 20, n),
        "y": rng.uniform(0, 20, n),
        "z": rng.uniform(0, 10, n),
        "x_sigma": rng.uniform(0.1, 2, n),
        "y_sigma": rng.uniform(0.1, 2, n),
        "z_sigma": rng.uniform(0.0, 1, n),
        "x_y_corr": rng.uniform(-0.95, 0.95, n),
    }
    array = db.create_uncertain_array(
        "corr3<>[x=0:19:6; y=0:19:6; z=0:9:4; corr(x, y)]", scheme="store-multiple", step=1
    )
    array.insert(data)
    x0, x1, y0, y1, z0, z1 = 6, 11, 5, 12, 2, 6
    threshold = 0.2
    result = array.subarray(x=(x0, x1), y=(y0, y1), z=(z0, z1), threshold=threshold).to_pandas()

    def pair(i):  # P(x0 <= X < x1+1, y0 <= Y < y1+1): integrate the conditional over x (scipy quad)
        mx, my, sx, sy, r = (
            data["x"][i],
            data["y"][i],
            data["x_sigma"][i],
            data["y_sigma"][i],
            data["x_y_corr"][i],
        )
        c = math.sqrt(1 - r * r)

        def inner(x):
            m = my + r * sy * (x - mx) / sx
            return norm.pdf(x, mx, sx) * (ndtr((y1 + 1 - m) / (sy * c)) - ndtr((y0 - m) / (sy * c)))

        return integrate.quad(inner, x0, x1 + 1, epsabs=1e-13, epsrel=1e-12, limit=200)[0]

    reference = np.array([pair(i) for i in range(n)]) * interval(data["z"], data["z_sigma"], z0, z1 + 1)
    got = dict(zip(result["id"], result["probability"], strict=True))
    assert (
        set(np.flatnonzero(reference >= threshold + 1e-7))
        <= set(got)
        <= set(np.flatnonzero(reference >= threshold - 1e-7))
    )
    for i, p in got.items():
        assert p == pytest.approx(reference[i], abs=1e-8)


def test_rtree_subarray_baseline_matches(db):
    rng = np.random.default_rng(13)
    data = catalog(rng, 800)
    array = db.create_uncertain_array(SCHEMA.format(name="rt2"), scheme="store-mean")
    array.insert(data)
    native = array.subarray(x=(20, 30), y=(10, 14), threshold=0.4)
    index = array.subarray(x=(20, 30), y=(10, 14), threshold=0.4, method="rtree")
    pd.testing.assert_frame_equal(native.to_pandas(), index.to_pandas())
    assert index.statistics.extra["index_candidates"] >= index.statistics.results


def test_threshold_must_exceed_the_tail_mass(sky):
    for bad in (0.001, 0.0, -0.5, 1.5, "high"):
        with pytest.raises(ValidationError, match="threshold"):
            sky.subarray(x=(1, 2), threshold=bad)
    with pytest.raises(ValidationError, match="whole cells"):
        sky.subarray(x=(1.5, 3.3))
    with pytest.raises(ValidationError, match="no dimension 'z'"):
        sky.subarray(z=(1, 2))
    assert sky.subarray(x=(100, 120)).count() == 0  # outside the domain


# -- Structure-Join against brute force ------------------------------------------------------------
def band(ma, sa, mb, sb, delta):
    s = np.hypot(sa[:, None], sb[None, :])
    m = ma[:, None] - mb[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        p = ndtr((delta - m) / s) - ndtr((-delta - m) / s)
    return np.where(s > 0, p, (np.abs(m) < delta).astype(float))


def join_reference(a, b, delta):
    return band(a["x"], a["x_sigma"], b["x"], b["x_sigma"], delta) * band(
        a["y"], a["y_sigma"], b["y"], b["y_sigma"], delta
    )


def check_join(result: pd.DataFrame, reference: np.ndarray, threshold: float) -> None:
    got = {
        (i, j): p
        for i, j, p in zip(result["id_left"], result["id_right"], result["probability"], strict=True)
    }
    must = set(zip(*np.nonzero(reference >= threshold + TOLERANCE), strict=True))
    may = set(zip(*np.nonzero(reference >= threshold - TOLERANCE), strict=True))
    assert must <= set(got) <= may
    for (i, j), p in got.items():
        assert abs(p - reference[i, j]) <= 1e-12
    assert not result.duplicated(["id_left", "id_right"]).any()


@pytest.mark.parametrize(
    "left,right", [(SCHEMES[2], SCHEMES[2]), (SCHEMES[1], SCHEMES[3]), (SCHEMES[0], SCHEMES[1])]
)
@pytest.mark.parametrize("method", ["sbj", "bnl", "index"])
def test_structure_join_matches_brute_force(db, left, right, method):
    rng = np.random.default_rng(30)
    a, b = catalog(rng, 150, heavy=12.0), catalog(rng, 400)
    outer = db.create_uncertain_array(SCHEMA.format(name="ja"), scheme=left[0], step=left[1])
    inner = db.create_uncertain_array(SCHEMA.format(name="jb"), scheme=right[0], step=right[1])
    outer.insert(a)
    inner.insert(b)
    for delta, threshold in [(1.0, 0.5), (2.5, 0.05)]:
        join = outer.structure_join(inner, delta, threshold, method=method, engine="local")
        check_join(join.to_pandas(), join_reference(a, b, delta), threshold)
    # the other side as the outer gives the same pairs (ids stay left/right)
    swapped = outer.structure_join(inner, 1.0, 0.5, method=method, engine="local", outer="right")
    check_join(swapped.to_pandas(), join_reference(a, b, 1.0), 0.5)


@pytest.mark.slow
def test_subarray_based_join_on_spark(db):
    rng = np.random.default_rng(31)
    a, b = catalog(rng, 200), catalog(rng, 600)
    outer = db.create_uncertain_array(SCHEMA.format(name="sa"), scheme="store-multiple", step=1)
    inner = db.create_uncertain_array(SCHEMA.format(name="sb"), scheme="store-mean")
    outer.insert(a)
    inner.insert(b)
    join = outer.structure_join(inner, 1.5, 0.3, method="sbj", engine="spark")
    check_join(join.to_pandas(), join_reference(a, b, 1.5), 0.3)


def test_correlated_structure_join(db):
    rng = np.random.default_rng(32)

    def tuples(n):
        return {
            "x": rng.uniform(0, 15, n),
            "y": rng.uniform(0, 15, n),
            "x_sigma": rng.uniform(0.2, 1.2, n),
            "y_sigma": rng.uniform(0.2, 1.2, n),
            "x_y_corr": rng.uniform(-0.9, 0.9, n),
        }

    a, b = tuples(40), tuples(80)
    left = db.create_uncertain_array("ca<>[x=0:14:5; y=0:14:5; corr(x, y)]", step=1)
    right = db.create_uncertain_array("cb<>[x=0:14:5; y=0:14:5; corr(x, y)]", step=2)
    left.insert(a)
    right.insert(b)
    delta, threshold = 1.5, 0.2
    result = left.structure_join(right, delta, threshold, engine="local").to_pandas()
    got = {
        (i, j): p
        for i, j, p in zip(result["id_left"], result["id_right"], result["probability"], strict=True)
    }
    # reference: the difference D = A - B is bivariate normal with covariance Sigma_A + Sigma_B;
    # integrate P(|D1| < delta, |D2| < delta) by the conditional over d1 (scipy quad)
    for i in range(len(a["x"])):
        for j in range(len(b["x"])):
            cov = np.zeros((2, 2))
            for t, s in ((a, i), (b, j)):
                sx, sy, r = t["x_sigma"][s], t["y_sigma"][s], t["x_y_corr"][s]
                cov += [[sx * sx, r * sx * sy], [r * sx * sy, sy * sy]]
            m = np.array([a["x"][i] - b["x"][j], a["y"][i] - b["y"][j]])
            if abs(m[0]) > 8 or abs(m[1]) > 8:
                assert (i, j) not in got
                continue
            s1, s2 = math.sqrt(cov[0, 0]), math.sqrt(cov[1, 1])
            rho = cov[0, 1] / (s1 * s2)
            c = math.sqrt(1 - rho * rho)

            def inner(x, m=m, s1=s1, s2=s2, rho=rho, c=c):
                mu = m[1] + rho * s2 * (x - m[0]) / s1
                return norm.pdf(x, m[0], s1) * (
                    ndtr((delta - mu) / (s2 * c)) - ndtr((-delta - mu) / (s2 * c))
                )

            p = integrate.quad(inner, -delta, delta, epsabs=1e-13, limit=200)[0]
            if p >= threshold + 1e-7:
                assert got[(i, j)] == pytest.approx(p, abs=1e-8)
            elif p < threshold - 1e-7:
                assert (i, j) not in got


def test_join_validation(db, sky):
    other = db.create_uncertain_array("line<>[x=0:59:8]")
    with pytest.raises(ValidationError, match="same number of dimensions"):
        sky.structure_join(other, 1.0)
    for bad in (0, -1, float("inf"), "wide"):
        with pytest.raises(ValidationError, match="delta"):
            sky.structure_join(sky, bad)
    with pytest.raises(ValidationError, match="method"):
        sky.structure_join(sky, 1.0, method="hash")


# -- aggregates ------------------------------------------------------------------------------------
def test_expected_aggregates_match_reference(db):
    rng = np.random.default_rng(40)
    data = catalog(rng, 400)
    data["flux_sigma"] = np.abs(data["flux_sigma"])
    array = db.create_uncertain_array(SCHEMA.format(name="ag"), scheme="store-multiple", step=2)
    array.insert(data)
    result = array.regrid({"x": 20, "y": 10}, "count(*)", "sum(flux)", "sum(mag) as m").to_pandas()
    assert len(result) == 12
    for _, row in result.iterrows():
        bx, by = int(row["x"]), int(row["y"])
        p = interval(data["x"], data["x_sigma"], 20 * bx, 20 * bx + 20) * interval(
            data["y"], data["y_sigma"], 10 * by, 10 * by + 10
        )
        assert row["count"] == pytest.approx(math.fsum(p), abs=1e-9)
        assert row["flux_sum"] == pytest.approx(math.fsum(p * data["flux"]), abs=1e-8)
        assert row["m"] == pytest.approx(math.fsum(p * data["mag"].astype(float)), abs=1e-8)
    # every tuple lies somewhere in the domain or outside it: the blocks add up to the mass inside
    inside = interval(data["x"], data["x_sigma"], 0, 60) * interval(data["y"], data["y_sigma"], 0, 40)
    assert result["count"].sum() == pytest.approx(inside.sum(), abs=1e-9)
    by_y = array.aggregate("count(*)", by=["y"], threshold=0.5).to_pandas()
    for _, row in by_y.iterrows():
        p = interval(data["y"], data["y_sigma"], row["y"], row["y"] + 1) * interval(
            data["x"], data["x_sigma"], 0, 60
        )
        assert row["count"] == pytest.approx(p[p >= 0.5].sum(), abs=1e-9)
    with pytest.raises(ValidationError, match="not supported"):
        array.regrid([2, 2], "max(flux)")


@pytest.mark.parametrize("engine", ["spark", "local"])
def test_expected_sums_are_exact_under_cancellation(db, engine):
    # three tuples surely inside one block (P = 1.0 exactly): the expected sum is 1e16 + 1 - 1e16 = 1,
    # which a float64 running sum (numpy's bincount, Spark's sum) rounds to 0
    array = db.create_uncertain_array("cancel<v:float64>[x=0:19:10; y=0:9:10]", scheme="store-mean")
    array.insert(
        {
            "x": [10.0] * 3,
            "y": [5.0] * 3,
            "x_sigma": [0.01] * 3,
            "y_sigma": [0.01] * 3,
            "v": [1e16, 1.0, -1e16],
        }
    )
    result = array.regrid([20, 10], "count(*)", "sum(v)", engine=engine).to_pandas()
    assert result["count"].tolist() == [3.0]
    assert result["v_sum"].tolist() == [math.fsum([1e16, 1.0, -1e16])] == [1.0]
    assert array.aggregate("sum(v)", engine=engine).to_pandas()["v_sum"].tolist() == [1.0]


def test_expected_aggregates_are_the_same_bits_on_both_engines_however_split(db):
    # the tuples in three inserts (files, tasks) or in one: the correctly rounded sums of the same
    # contributions, so every engine and every split gives the same bits, within 1e-9 of scipy
    rng = np.random.default_rng(41)
    data = catalog(rng, 300)
    data["flux"] = data["flux"] * rng.choice([1e12, -1e12, 1.0], 300)
    one = db.create_uncertain_array(SCHEMA.format(name="s1"), scheme="store-multiple", step=1)
    one.insert(data)
    split = db.create_uncertain_array(SCHEMA.format(name="s3"), scheme="store-multiple", step=1)
    for part in np.array_split(np.arange(300), 3):
        split.insert({k: v[part] for k, v in data.items()})
    results = [
        array.regrid({"x": 15, "y": 10}, "count(*)", "sum(flux)", engine=engine).to_pandas()
        for array in (one, split)
        for engine in ("spark", "local")
    ]
    for other in results[1:]:
        pd.testing.assert_frame_equal(results[0], other, check_exact=True)
    for _, row in results[0].iterrows():
        bx, by = int(row["x"]), int(row["y"])
        p = interval(data["x"], data["x_sigma"], 15 * bx, 15 * bx + 15) * interval(
            data["y"], data["y_sigma"], 10 * by, 10 * by + 10
        )
        assert row["count"] == pytest.approx(math.fsum(p), abs=1e-9)
        assert row["flux_sum"] == pytest.approx(math.fsum(p * data["flux"]), abs=1e-9 * 1e12)


# -- versions, time travel, layouts, explain -------------------------------------------------------
def test_versions_time_travel_and_relayout(db):
    rng = np.random.default_rng(50)
    first, second = catalog(rng, 300), catalog(rng, 300)
    array = db.create_uncertain_array(SCHEMA.format(name="tv"), scheme="store-multiple", step=1)
    array.insert(first)
    array.insert(second)
    both = {k: np.concatenate([first[k], second[k]]) for k in first}
    versions = array.versions()
    assert versions["version"].tolist() == [1, 2]
    assert versions["tuples_total"].tolist() == [300, 600]
    assert versions["scheme"].tolist() == ["store-multiple"] * 2
    query = {"x": (10, 30), "y": (5, 20)}
    old = array.at_version(1).subarray(**query, threshold=0.5).to_pandas()
    reference = interval(first["x"], first["x_sigma"], 10, 31) * interval(first["y"], first["y_sigma"], 5, 21)
    check_result(old, reference, 0.5)
    with pytest.raises(ValidationError, match="pinned"):
        array.at_version(1).insert(first)
    with pytest.raises(NotFoundError):
        array.at_version(7)
    now = array.subarray(**query, threshold=0.5).to_pandas()
    result = array.relayout("store-mean")
    assert result.version == 3 and array.layout.scheme == "store-mean"
    assert array.at_version(2).layout.steps == (1, 1)
    pd.testing.assert_frame_equal(array.subarray(**query, threshold=0.5).to_pandas(), now)
    pd.testing.assert_frame_equal(array.at_version(2).subarray(**query, threshold=0.5).to_pandas(), now)
    reference = interval(both["x"], both["x_sigma"], 10, 31) * interval(both["y"], both["y_sigma"], 5, 21)
    check_result(now, reference, 0.5)
    assert array.count() == 600 and array.at_version(1).count() == 300


def test_auto_step_is_recorded_and_copies_follow_prop_3_2(db):
    rng = np.random.default_rng(60)
    data = catalog(rng, 500)
    array = db.create_uncertain_array(SCHEMA.format(name="auto"), step="auto", workload=[(6, 4)])
    assert array.layout.steps is None
    array.insert(data)
    steps = array.layout.steps
    assert steps is not None and array.versions()["step"].tolist() == [list(steps)]
    first = np.stack(
        [possible_range(data[d], data[f"{d}_sigma"], 3.0, 0, h)[0] for d, h in (("x", 59), ("y", 39))], 1
    )
    last = np.stack(
        [possible_range(data[d], data[f"{d}_sigma"], 3.0, 0, h)[1] for d, h in (("x", 59), ("y", 39))], 1
    )
    counts = copy_counts(first, last, steps)
    stats = array.copy_statistics()
    expected = pd.Series(counts).value_counts().sort_index()
    assert stats.set_index("copies")["tuples"].to_dict() == expected.to_dict()
    assert array.copies() == counts.sum()
    choice = array.choose_step(queries=[(6, 4)])
    assert choice.steps == steps  # the same data and workload give the same choice on request


def test_explain_shows_regions_and_steps(db, sky):
    plan = sky.subarray(x=(10, 12), y=(0, 3), threshold=0.8).explain()
    assert plan["scheme"] == "store-multiple" and plan["step"] == [1, 1]
    assert plan["query"] == {"x": [10, 12], "y": [0, 3]}
    assert plan["expanded_region"] == {"x": [9, 13], "y": [0, 4]}  # Prop. 3.1, clipped at 0
    assert plan["expanded_cells"] == 25
    mean = db.create_uncertain_array(SCHEMA.format(name="ex"), scheme="store-mean")
    mean.insert(catalog(np.random.default_rng(0), 50))
    plan = mean.subarray(x=(10, 12), threshold=0.8).explain()
    assert plan["scheme"] == "store-mean" and "fence_boxes" in plan
    join = sky.structure_join(mean, 1.0, 0.5).explain()
    assert join["outer"]["array"] == "sky" and join["inner"]["scheme"] == "store-mean"
    assert "Prop. 4.3" in join["outer_cell_region"]


def test_catalog_lists_opens_and_drops(db, sky):
    assert db.uncertain_arrays() == ["sky"]
    assert "sky" not in db.arrays()
    again = db.array("sky")
    assert again.count() == 50 and again.layout.steps == (1, 1)
    db.drop_uncertain_array("sky")
    assert db.uncertain_arrays() == []
