"""Uncertain catalogs for benchmarks and the demo (paper 001, section 5.1).

* ``sdss_like``: a sky catalog with Gaussian positions (rowc, colc in cells) like SDSS PhotoObj: the
  errors of most objects are a fraction of a cell, so a possible range (mean +- 3 sigma) spans about
  2.5 cells per dimension on average, with a heavy tail of faint objects (a few percent) whose errors
  reach tens of cells, and a handful of broken measurements spanning the whole frame. The two errors
  of one object share a scale (a faint object is uncertain in both), as in SDSS.
* ``synthetic``: the paper's Table 2 data sets: 1-3 dimensions, means uniform or normal over the
  domain, sigmas drawn from ten typical SDSS-like values and rescaled so the possible range grows by
  S_sigma (S_sigma^(1/d) per dimension), correlated positions (a correlated pair) from 2-D on.
"""

from __future__ import annotations

import numpy as np

#: Body of the error distribution: lognormal with this median (cells) and log standard deviation.
BODY_MEDIAN, BODY_SPREAD = 0.18, 0.45
#: Heavy tail: this fraction of objects, Pareto(alpha) from TAIL_MIN cells, capped at TAIL_MAX.
TAIL_FRACTION, TAIL_ALPHA, TAIL_MIN, TAIL_MAX = 0.03, 1.3, 0.5, 30.0
#: Broken measurements: about this fraction, with sigmas of 20-40% of the frame side.
EXTREME_FRACTION = 1e-5


def sdss_sigmas(rng: np.random.Generator, n: int, side: int) -> np.ndarray:
    """(n, 2) position errors in cells."""
    scale = BODY_MEDIAN * np.exp(rng.normal(0.0, BODY_SPREAD, n))
    tail = rng.random(n) < TAIL_FRACTION
    scale[tail] = np.minimum(TAIL_MIN * (1.0 - rng.random(int(tail.sum()))) ** (-1.0 / TAIL_ALPHA), TAIL_MAX)
    extremes = max(1, round(n * EXTREME_FRACTION)) if n >= 10_000 else 0
    if extremes:
        chosen = rng.choice(n, extremes, replace=False)
        scale[chosen] = rng.uniform(0.2, 0.4, extremes) * side
    jitter = np.exp(rng.normal(0.0, 0.15, (n, 2)))
    return scale[:, None] * jitter


def sdss_like(n: int, side: int = 512, seed: int = 2026) -> dict[str, np.ndarray]:
    """Columns of an SDSS-like catalog on a side x side frame: positions (x, y) with errors, a
    psf magnitude (exact) and a flux with its error (Gaussian)."""
    rng = np.random.default_rng(seed)
    sigmas = sdss_sigmas(rng, n, side)
    mag = rng.normal(20.0, 1.5, n)
    flux = 10 ** (-0.4 * (mag - 22.5))
    return {
        "x": rng.uniform(0, side, n),
        "y": rng.uniform(0, side, n),
        "x_sigma": sigmas[:, 0],
        "y_sigma": sigmas[:, 1],
        "mag": mag,
        "flux": flux,
        "flux_sigma": flux * rng.uniform(0.01, 0.2, n),
    }


def sdss_schema(name: str, side: int = 512, chunk: int = 16) -> str:
    return f"{name}<mag:float64, flux:gaussian>[x=0:{side - 1}:{chunk}; y=0:{side - 1}:{chunk}]"


def typical_sigmas() -> np.ndarray:
    """Ten typical error values of the SDSS-like body (its deciles), the paper's "top 10 frequent"."""
    quantiles = (np.arange(10) + 0.5) / 10
    from scipy.stats import norm

    return BODY_MEDIAN * np.exp(BODY_SPREAD * norm.ppf(quantiles))


def synthetic(
    ndim: int, means: str, s_sigma: float, n: int, cells: int, seed: int = 7
) -> tuple[str, dict[str, np.ndarray], tuple[int, ...]]:
    """A Table 2 data set: (schema text without a name, columns, domain shape)."""
    rng = np.random.default_rng(seed)
    side = max(4, round(cells ** (1.0 / ndim)))
    names = ("x", "y", "z")[:ndim]
    chunk = max(2, round(256 ** (1.0 / ndim)))
    per_dimension = s_sigma ** (1.0 / ndim)
    sigma_values = typical_sigmas() * per_dimension
    data: dict[str, np.ndarray] = {}
    for name in names:
        if means == "U":
            data[name] = rng.uniform(0, side, n)
        else:
            data[name] = np.clip(rng.normal(side / 2, side / 6, n), 0, np.nextafter(side, 0))
        data[f"{name}_sigma"] = rng.choice(sigma_values, n)
    dims = "; ".join(f"{name}=0:{side - 1}:{chunk}" for name in names)
    if ndim >= 2:
        data["x_y_corr"] = rng.uniform(-0.8, 0.8, n)
        dims += "; corr(x, y)"
    return f"<>[{dims}]", data, (side,) * ndim
