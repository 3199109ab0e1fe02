"""Windows with long extents over unbounded dimensions, against a brute-force numpy reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

INT64_MAX = 2**63 - 1
CALLS = "sum(v), avg(v), count(v), min(v), max(v)"


def _reference(cells: dict, before, after) -> dict:
    """Per stored cell: (sum, avg, count, min, max) of the stored values within the extent (O(n^2))."""
    coords = np.array(list(cells), dtype=object)  # Python integers: no overflow at the int64 edge
    values = list(cells.values())
    result = {}
    for x in cells:
        inside = [
            v
            for y, v in zip(coords, values, strict=True)
            if all(xk - b <= yk <= xk + a for xk, yk, b, a in zip(x, y, before, after, strict=True))
        ]
        result[x] = (
            math.fsum(inside),
            math.fsum(inside) / len(inside),
            len(inside),
            min(inside),
            max(inside),
        )
    return result


def _rows(frame, dims) -> dict:
    keys = zip(*(frame[d] for d in dims), strict=True)
    columns = zip(frame.v_sum, frame.v_avg, frame.v_count, frame.v_min, frame.v_max, strict=True)
    return {tuple(int(k) for k in key): tuple(row) for key, row in zip(keys, columns, strict=True)}


def _check(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for key, row in want.items():
        assert got[key] == pytest.approx(row, rel=1e-12, abs=1e-9), key


def _insert(db, cells: dict) -> None:
    values = ", ".join(f"({', '.join(map(str, k))}, {v})" for k, v in cells.items())
    db.sql(f"INSERT INTO A VALUES {values}")


CASES = [
    # (array dimensions, per-dimension before, per-dimension after, executor): each long reach once,
    # Spark for the longest (the halo is cut the same way on both engines)
    ("[j=0:*:50]", (INT64_MAX,), (0,), "local"),
    ("[j=0:*:50]", (0,), (INT64_MAX,), "local"),
    ("[i=1:40:10; j=0:*:50]", (0, INT64_MAX), (3, 0), "local"),
    ("[i=1:40:10; j=0:*:50]", (INT64_MAX, INT64_MAX), (INT64_MAX, INT64_MAX), "spark"),
    ("[i=1:40:10; j=0:*:50]", (4, 130), (1, 60), "local"),  # a short reach: the halo as before
]


@pytest.mark.parametrize(("dims", "before", "after", "db_on"), CASES, indirect=["db_on"])
def test_long_windows_over_unbounded_dimensions(db_on, dims, before, after) -> None:
    """Before: a huge extent along ``j=0:*`` enumerated ~2**61 / 50 chunks (out of memory)."""
    db, _ = db_on
    rng = np.random.default_rng(len(dims) + before[0] % 7 + after[0] % 5)
    ndim = len(before)
    names = ["i", "j"][-ndim:] if ndim == 2 else ["j"]
    db.sql(f"CREATE ARRAY A <v:double> {dims}")
    cells = {}
    for _ in range(40):
        j = int(rng.choice([rng.integers(0, 200), rng.integers(2000, 2600)]))
        key = (int(rng.integers(1, 41)), j) if ndim == 2 else (j,)
        cells[key] = float(rng.integers(-50, 50)) / 4
    _insert(db, cells)
    flat = [x for pair in zip(before, after, strict=True) for x in pair]
    want = _reference(cells, before, after)
    _check(_rows(db.array("A").window(flat, *CALLS.split(", ")).to_pandas(), names), want)
    arguments = ", ".join(map(str, flat))
    db.sql(f"CREATE ARRAY VIEW W AS SELECT * FROM window(A, {arguments}, {CALLS})")
    _check(_rows(db.sql("SELECT * FROM W").to_pandas(), names), want)
    # an insert far out along j and a delete of a whole run, each refreshed incrementally
    added = {((5, 9000) if ndim == 2 else (9000,)): 2.5, ((7, 1000) if ndim == 2 else (1000,)): -1.0}
    _insert(db, added)
    cells.update(added)
    db.sql("REFRESH VIEW W")
    _check(_rows(db.sql("SELECT * FROM W").to_pandas(), names), _reference(cells, before, after))
    if ndim == 2:
        db.sql("DELETE FROM subarray(A, 1, 2000, 40, 2600)")
        cells = {k: v for k, v in cells.items() if not 2000 <= k[1] <= 2600}
    else:
        db.sql("DELETE FROM subarray(A, 2000, 2600)")
        cells = {k: v for k, v in cells.items() if not 2000 <= k[0] <= 2600}
    db.sql("REFRESH VIEW W")
    _check(_rows(db.sql("SELECT * FROM W").to_pandas(), names), _reference(cells, before, after))
    assert db.sql("VERIFY VIEW W") is True
