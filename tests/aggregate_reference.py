"""Plain-Python references for float aggregates as arrays and views define them: a sum by
``math.fsum`` (NaN with a NaN or with both infinities, else the infinity present), and min/max
where a NaN among the values wins."""

from __future__ import annotations

import math


def float_sum(values: list[float]) -> float:
    if any(math.isnan(x) for x in values) or (math.inf in values and -math.inf in values):
        return math.nan
    if math.inf in values or -math.inf in values:
        return math.inf if math.inf in values else -math.inf
    return math.fsum(values)


def extreme(values: list[float], pick) -> float:
    """min/max as arrays and views take them: a NaN among the values wins."""
    return math.nan if any(math.isnan(x) for x in values) else pick(values)
