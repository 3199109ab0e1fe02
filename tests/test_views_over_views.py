"""Views over views: a similarity view and a window view reading another view's public aggregates,
refreshed incrementally from that view's version delta, checked after inserts, replacements and
deletes against plain-Python brute force computed from the base array's cells alone."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import arrayviews
from arrayviews import ValidationError
from arrayviews.views.definition import window

SIZE = 20
LOWER = (
    "CREATE ARRAY VIEW V1 AS SELECT count(*) AS n, sum(b.v) AS s, avg(b.v) AS m "
    "FROM A a SIMILARITY JOIN A b WITH SHAPE L1(1) GROUP BY a.i, a.j"
)
UPPER = (
    "CREATE ARRAY VIEW V2 AS SELECT count(*) AS k, sum(b.s) AS ss, max(b.n) AS mx, min(b.m) AS lo "
    "FROM V1 a SIMILARITY JOIN V1 b WITH SHAPE LINF(1) GROUP BY a.i, a.j"
)
L1_OFFSETS = ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1))
LINF_OFFSETS = tuple((a, b) for a in (-1, 0, 1) for b in (-1, 0, 1))


def _lower(cells: dict) -> dict:
    """V1 by brute force: per cell, (n, s, m) over the cells within L1 distance 1."""
    out = {}
    for i, j in cells:
        found = [cells[(i + a, j + b)] for a, b in L1_OFFSETS if (i + a, j + b) in cells]
        out[(i, j)] = (len(found), sum(found), sum(found) / len(found))
    return out


def _upper(lower: dict) -> dict:
    """V2 by brute force from V1's brute force: (k, ss, mx, lo) over the Linf(1) neighbourhood."""
    out = {}
    for i, j in lower:
        found = [lower[(i + a, j + b)] for a, b in LINF_OFFSETS if (i + a, j + b) in lower]
        out[(i, j)] = (
            len(found),
            sum(f[1] for f in found),
            max(f[0] for f in found),
            min(f[2] for f in found),
        )
    return out


def _window(lower: dict) -> dict:
    """The window view sum(s) over i +-1, j +-2 of V1, by brute force."""
    out = {}
    for i, j in lower:
        found = [
            lower[(i + a, j + b)][1] for a in (-1, 0, 1) for b in (-2, -1, 0, 1, 2) if (i + a, j + b) in lower
        ]
        out[(i, j)] = sum(found)
    return out


def _cells_of(array) -> dict:
    frame = array.to_pandas()
    return {(int(i), int(j)): int(v) for i, j, v in zip(frame.i, frame.j, frame.v, strict=True)}


def _check(db) -> None:
    lower = _lower(_cells_of(db.array("A")))
    upper = _upper(lower)
    v1 = db.view("V1").to_pandas()
    assert {
        (int(i), int(j)): (int(n), int(s)) for i, j, n, s in zip(v1.i, v1.j, v1.n, v1.s, strict=True)
    } == {c: (n, s) for c, (n, s, _) in lower.items()}
    v2 = db.view("V2").to_pandas()
    got = {(int(r.i), int(r.j)): (int(r.k), int(r.ss), int(r.mx), float(r.lo)) for r in v2.itertuples()}
    assert set(got) == set(upper)
    for cell, (k, ss, mx, lo) in upper.items():
        assert got[cell][:3] == (k, ss, mx), cell
        assert got[cell][3] == pytest.approx(lo, rel=1e-15, abs=0), cell  # avg rounded once per cell
    w = db.view("W").to_pandas()
    assert {(int(i), int(j)): int(s) for i, j, s in zip(w.i, w.j, w.s_sum, strict=True)} == _window(lower)


def _batch(rng, array, kind: str) -> None:
    cells = array.to_pandas()
    if kind == "insert":
        taken = set(zip(cells.i, cells.j, strict=True))
        new = {(int(a), int(b)) for a, b in rng.integers(0, SIZE, (12, 2)) if (int(a), int(b)) not in taken}
        array.insert(
            pd.DataFrame(
                {"i": [c[0] for c in new], "j": [c[1] for c in new], "v": rng.integers(-50, 50, len(new))}
            )
        )
    elif kind == "replace":
        some = cells.sample(8, random_state=int(rng.integers(1000)))
        array.insert(some.assign(v=rng.integers(-50, 50, len(some))), on_conflict="replace")
    else:
        array.delete(cells.sample(6, random_state=int(rng.integers(1000)))[["i", "j"]])


@pytest.mark.parametrize("executor", ["local", "spark"])
def test_a_chain_of_views_refreshed_incrementally_equals_brute_force(spark, tmp_path, executor) -> None:
    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution=executor)
    rng = np.random.default_rng(3)
    flat = rng.choice(SIZE * SIZE, 90, replace=False)
    a = db.create_array(f"A<v:int64>[i=0:{SIZE - 1}:5; j=0:{SIZE - 1}:5]")
    a.insert(pd.DataFrame({"i": flat // SIZE, "j": flat % SIZE, "v": rng.integers(-50, 50, 90)}))
    db.sql(LOWER)
    db.sql(UPPER)
    db.create_view("W", window("V1", [1, 1, 2, 2], ["sum(s)"]))
    _check(db)
    kinds = ("insert", "replace", "delete") if executor == "local" else ("replace",)
    for kind in kinds:
        _batch(rng, a, kind)
        assert db.view("V1").status()["pending"] and not db.view("V2").status()["pending"]
        first = db.view("V1").refresh("baseline")
        assert first.committed
        assert db.view("V2").status()["bases"] == [
            {"base": "V1", "reflected": first.version - 1, "current": first.version, "pending_batches": 1}
        ]
        upper = db.view("V2").refresh("baseline")
        window_view = db.view("W").refresh("baseline")
        assert upper.committed and window_view.committed
        assert f"reflecting V1 v{first.version}" in str(upper)
        _check(db)


def test_one_pass_refreshes_the_chain_in_order_and_drops_are_refused(db) -> None:
    rng = np.random.default_rng(8)
    flat = rng.choice(SIZE * SIZE, 70, replace=False)
    a = db.create_array(f"A<v:int64>[i=0:{SIZE - 1}:5; j=0:{SIZE - 1}:5]")
    a.insert(pd.DataFrame({"i": flat // SIZE, "j": flat % SIZE, "v": rng.integers(-50, 50, 70)}))
    db.sql(LOWER)
    db.sql(UPPER.replace("V2", "AV2", 1))  # a name sorting before V1: the order must come from reads
    db.sql(UPPER)
    db.create_view("W", window("V1", [1, 1, 2, 2], ["sum(s)"]))
    _batch(rng, a, "insert")
    report = db.maintain(refresh_all=True)
    assert report.ok and [r.view for r in report.refreshed][0] == "V1"
    assert sorted(r.view for r in report.refreshed) == ["AV2", "V1", "V2", "W"]
    _check(db)
    assert not db.maintain(refresh_all=True).changed

    with pytest.raises(ValidationError, match="V2"):
        db.drop_view("V1")
    assert "V1" in db.views()
    with pytest.raises(ValidationError, match="cannot read itself"):
        db.create_view("V1", window("V1", [1, 1, 1, 1], ["sum(s)"]))


def test_the_view_below_is_read_as_its_public_aggregates(db) -> None:
    """The view above sees V1's schema as users do (its state columns are not attributes)."""
    a = db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    a.insert(pd.DataFrame({"i": [1, 1, 2], "j": [1, 2, 1], "v": [3, 4, 5]}))
    db.sql(LOWER)
    v1 = db.view("V1")
    assert [x.name for x in v1.schema.attributes] == ["n", "s", "m"]
    with pytest.raises(ValidationError):
        db.sql(
            "CREATE ARRAY VIEW X AS SELECT sum(b.__pairs) AS p FROM V1 a SIMILARITY JOIN V1 b "
            "WITH SHAPE L1(1) GROUP BY a.i, a.j"
        )
