"""Brute-force window averages over a list of cells (plain Python, bounds compared as integers)."""

from __future__ import annotations

import math


def window_averages(
    cells: list[tuple[int, int, float]], before: tuple[int, int], after: tuple[int, int]
) -> dict[tuple[int, int], float]:
    """Each cell's average (math.fsum) over the cells within ``before`` / ``after`` of it."""
    out = {}
    for i, j, _ in cells:
        inside = [
            w
            for k, m, w in cells
            if i - before[0] <= k <= i + after[0] and j - before[1] <= m <= j + after[1]
        ]
        out[(i, j)] = math.fsum(inside) / len(inside)
    return out
