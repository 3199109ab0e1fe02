"""Network-monitoring-like streams (paper 004, section 7): every minute one packet-loss reading per
source-destination pair, a given share of them high (loss > 10), or several readings per pair."""

from __future__ import annotations

import numpy as np
import pandas as pd

EPOCH = 1_420_070_400  # 2015-01-01 00:00:00 UTC, the paper's example day


def pair_names(pairs: int) -> tuple[np.ndarray, np.ndarray]:
    """Source and destination addresses of ``pairs`` monitored pairs."""
    index = np.arange(pairs)
    sources = np.char.add("10.0.", (index // 256).astype(str))
    sources = np.char.add(np.char.add(sources, "."), (index % 256).astype(str))
    destinations = np.char.add("192.168.0.", (index % 97).astype(str))
    return sources.astype(object), destinations.astype(object)


def minute_batch(
    minute: int,
    pairs: int,
    high_share: float = 0.1,
    readings_per_pair: int = 1,
    seed: int = 0,
    start: int = EPOCH,
    persistence: float = 0.8,
) -> pd.DataFrame:
    """The readings of minute number ``minute`` (0 = ``start``): columns ts, src, dest, loss.

    High loss comes in runs: a pair that was high stays high with probability ``persistence``;
    the overall share of high readings stays ``high_share``.
    """
    rng = np.random.default_rng([seed, minute])
    sources, destinations = pair_names(pairs)
    count = pairs * readings_per_pair
    # a per-pair latent run state that persists across minutes, drawn reproducibly per pair
    state_rng = np.random.default_rng([seed, 10_000_019, minute // 4])
    bursty = state_rng.random(pairs) < high_share
    high = np.where(
        np.repeat(bursty, readings_per_pair),
        rng.random(count) < persistence,
        rng.random(count) < high_share * (1 - persistence) / max(1 - high_share, 1e-9),
    )
    loss = np.where(high, rng.integers(11, 60, count), rng.integers(0, 11, count)).astype(np.int32)
    offsets = rng.integers(0, 60, count) if readings_per_pair > 1 else np.zeros(count, np.int64)
    seconds = start + 60 * minute + offsets
    return pd.DataFrame(
        {
            "ts": pd.to_datetime(seconds, unit="s", utc=True),
            "src": np.repeat(sources, readings_per_pair),
            "dest": np.repeat(destinations, readings_per_pair),
            "loss": loss,
        }
    )
