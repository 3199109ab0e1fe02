"""A PTF-like sky catalog: detections over [time, ra, dec] arriving in nightly batches.

Sources (stars and galaxies, many of them in groups) are scattered over the sky with a density that
peaks in a band of declination around the telescope's latitude, as in the Palomar Transient Factory
survey. Each night the telescope visits a few fields (ra windows) and detects the sources there,
with a small positional jitter, so the same source shows up at nearby cells on different nights.
Coordinates are integer cells of 0.001 degree; time is the night number.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SkySurvey:
    """The survey geometry: ``nights`` x ``ra_cells`` x ``dec_cells`` cells."""

    nights: int = 400
    ra_cells: int = 360_000
    dec_cells: int = 180_000
    latitude_cell: int = 123_000  # dec 33 degrees north, offset by 90 degrees
    band_width: int = 12_000
    sources: int = 60_000
    group_fraction: float = 0.5
    group_size: int = 6
    fields_per_night: int = 3
    field_width: int = 6_000
    seed: int = 2026

    def schema(self, name: str = "ptf", chunks: tuple[int, int, int] = (50, 10_000, 10_000)) -> str:
        return (
            f"{name}<mag:float64>[time=0:{self.nights - 1}:{chunks[0]}; ra=0:{self.ra_cells - 1}:{chunks[1]}; "
            f"dec=0:{self.dec_cells - 1}:{chunks[2]}]"
        )

    def source_positions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rng = np.random.default_rng(self.seed)
        grouped = int(self.sources * self.group_fraction)
        centres = grouped // self.group_size
        ra_c = rng.integers(0, self.ra_cells, centres)
        dec_c = np.clip(
            rng.normal(self.latitude_cell, self.band_width, centres), 0, self.dec_cells - 1
        ).astype(np.int64)
        ra_g = (
            np.repeat(ra_c, self.group_size) + rng.integers(-3, 4, centres * self.group_size)
        ) % self.ra_cells
        dec_g = np.clip(
            np.repeat(dec_c, self.group_size) + rng.integers(-3, 4, centres * self.group_size),
            0,
            self.dec_cells - 1,
        )
        single = self.sources - len(ra_g)
        ra_s = rng.integers(0, self.ra_cells, single)
        dec_s = np.clip(
            rng.normal(self.latitude_cell, 2 * self.band_width, single), 0, self.dec_cells - 1
        ).astype(np.int64)
        ra = np.concatenate([ra_g, ra_s]).astype(np.int64)
        dec = np.concatenate([dec_g, dec_s]).astype(np.int64)
        mag = rng.uniform(14, 21, len(ra))
        return ra, dec, mag

    def night(self, night: int, fields: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The detections of one night (one batch): sources inside the night's fields, jittered."""
        ra, dec, mag = self.source_positions()
        rng = np.random.default_rng(self.seed * 100_003 + night)
        if fields is None:
            fields = rng.integers(0, self.ra_cells - self.field_width, self.fields_per_night)
        visible = np.zeros(len(ra), dtype=bool)
        for start in fields:
            visible |= (ra >= start) & (ra < start + self.field_width)
        detected = visible & (rng.random(len(ra)) < 0.9)
        ra_n = np.clip(ra[detected] + rng.integers(-1, 2, detected.sum()), 0, self.ra_cells - 1)
        dec_n = np.clip(dec[detected] + rng.integers(-1, 2, detected.sum()), 0, self.dec_cells - 1)
        keys = ra_n * self.dec_cells + dec_n
        _, first = np.unique(keys, return_index=True)
        return {
            "time": np.full(len(first), night, dtype=np.int64),
            "ra": ra_n[first],
            "dec": dec_n[first],
            "mag": (mag[detected] + rng.normal(0, 0.05, detected.sum()))[first],
        }

    def nights_in_order(self, count: int, start: int = 0) -> Iterator[dict[str, np.ndarray]]:
        for night in range(start, start + count):
            yield self.night(night)


def density(survey: SkySurvey, cells: int) -> float:
    return cells / (survey.nights * survey.ra_cells * survey.dec_cells)
