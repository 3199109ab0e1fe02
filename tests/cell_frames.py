"""The 2-D cells the storage trial tests write and read back: a dict {(i, j): v} as a batch, and an
array's cells as such a dict (the plain-Python reference they are compared with)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def frame(cells: dict[tuple[int, int], int]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "i": np.array([c[0] for c in cells], np.int64),
            "j": np.array([c[1] for c in cells], np.int64),
            "v": np.array(list(cells.values()), np.int64),
        }
    )


def content(array) -> dict[tuple[int, int], int]:
    return {(int(r.i), int(r.j)): int(r.v) for r in array.to_pandas().itertuples()}
