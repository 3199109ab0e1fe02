"""Similarity views tried as an adversary: every refresh strategy, time travel, answering through a
view and mappings near int64's end, against a plain-Python brute force over the cells (Python
integers for counts and integer sums, math.fsum for float sums)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aggregate_reference import extreme, float_sum
from arrayviews import L1, Linf, NotFoundError, ValidationError, box, similarity, stencil
from arrayviews.model.mappings import IMAGE_LIMIT, AxisMap, Mapping

AGGREGATES = (
    "count(*) as n",
    "sum(right.v) as s",
    "min(right.v) as lo",
    "max(right.v) as hi",
    "avg(right.v) as a",
    "sum(right.w) as sw",
    "min(right.w) as lw",
    "max(right.w) as hw",
    "avg(right.w) as aw",
    "sum(left.w) as lsw",
)


def brute_force(
    left: pd.DataFrame, left_dims, right: pd.DataFrame, right_dims, offsets, image
) -> pd.DataFrame:
    """Per left cell with a right cell at ``image(cell) + offset``: the aggregates, by plain Python."""
    where = {tuple(int(r[d]) for d in right_dims): r for r in right.to_dict("records")}
    rows = []
    for cell in left.to_dict("records"):
        key = tuple(int(cell[d]) for d in left_dims)
        centre = image(key)
        found = [
            where[k]
            for k in (tuple(c + int(o) for c, o in zip(centre, offset, strict=True)) for offset in offsets)
            if k in where
        ]
        if not found:
            continue
        vs = [float(f["v"]) for f in found]
        ws = [int(f["w"]) for f in found]
        total = float_sum(vs)
        row = dict(zip(left_dims, key, strict=True))
        row.update(
            n=len(found),
            s=total,
            lo=extreme(vs, min),
            hi=extreme(vs, max),
            a=total / len(vs),
            sw=sum(ws),
            lw=min(ws),
            hw=max(ws),
            aw=sum(ws) / len(ws),  # Python integers: the exact mean, rounded once
            lsw=int(cell["w"]) * len(found),
        )
        rows.append(row)
    return pd.DataFrame(rows, columns=[*left_dims, "n", "s", "lo", "hi", "a", "sw", "lw", "hw", "aw", "lsw"])


def same_cells(got: pd.DataFrame, expected: pd.DataFrame, dims) -> None:
    got = got.sort_values(list(dims)).reset_index(drop=True)
    expected = expected.sort_values(list(dims)).reset_index(drop=True)
    assert got[list(dims)].values.tolist() == expected[list(dims)].values.tolist()
    for column in expected.columns:
        if column in dims or column not in got.columns:
            continue
        for k, (g, e) in enumerate(zip(got[column].tolist(), expected[column].tolist(), strict=True)):
            if isinstance(e, float):
                assert (math.isnan(g) and math.isnan(e)) or g == e, (
                    column,
                    expected.loc[k, list(dims)].tolist(),
                )
            else:
                assert int(g) == e, (column, expected.loc[k, list(dims)].tolist())


def identity(key):
    return key


def random_cells(rng, schema, m: int) -> pd.DataFrame:
    """``m`` distinct cells of the array's box; float values with NaN and infinities, int64 values
    whose sums over 13 neighbours still fit int64."""
    sizes = [d.high - d.low + 1 for d in schema.dimensions]
    flat = rng.choice(int(np.prod(sizes)), size=min(m, int(np.prod(sizes))), replace=False)
    columns = {}
    for d, size in zip(reversed(schema.dimensions), reversed(sizes), strict=True):
        columns[d.name] = flat % size + d.low
        flat = flat // size
    n = len(flat)
    v = rng.normal(size=n) * 10.0 ** rng.integers(-3, 8, size=n)
    pick = rng.random(n)
    v[pick < 0.06] = np.nan
    v[(pick > 0.1) & (pick < 0.14)] = np.inf
    v[(pick > 0.2) & (pick < 0.23)] = -np.inf
    columns["v"] = v
    columns["w"] = rng.integers(-(2**59), 2**59, size=n)
    return pd.DataFrame(columns)


@pytest.mark.parametrize(
    ("schema", "shape"),
    [
        ("A <v:double, w:int64> [i=-9:0:1]", L1(2, 1)),  # chunk size 1, negative range
        ("A <v:double, w:int64> [i=-2:2:2; j=0:3:10; k=-3:0:2]", Linf(1, 3)),  # chunks larger than the array
        ("A <v:double, w:int64> [i=-4:3:3; j=-4:3:100]", box([(-2, 0), (1, 2)])),
        ("A <v:double, w:int64> [i=-4:3:1; j=-4:3:1]", L1(0)),
    ],
)
def test_every_strategy_and_every_version_equal_brute_force(db, schema, shape):
    rng = np.random.default_rng(len(schema))
    A = db.create_array(schema)
    dims = A.dims
    V = db.create_view("V", similarity("A", "A", shape, AGGREGATES))
    offsets = shape.offsets()
    seen = [(A.version, V.version)]
    batches = ["insert", "overwrite", "delete", "empty", "bad", "insert"]
    for step, kind in enumerate(batches):
        if kind in ("insert", "overwrite"):
            A.insert(random_cells(rng, A.schema, 8), on_conflict="replace")
        elif kind == "delete":
            A.delete(A.to_pandas().iloc[::3][list(dims)])
        elif kind == "empty":
            A.insert(random_cells(rng, A.schema, 0), on_conflict="replace")
        else:  # a batch failing validation in its middle changes nothing
            bad = random_cells(rng, A.schema, 6)
            bad.loc[3, dims[0]] = A.schema.dimensions[0].high + 1
            before = A.version
            with pytest.raises(Exception, match=dims[0]):
                A.insert(bad, on_conflict="replace")
            assert A.version == before and V.status()["pending"] is False
        V.refresh(("auto", "full", "baseline")[step % 3])
        cells = A.to_pandas()
        same_cells(V.to_pandas(), brute_force(cells, dims, cells, dims, offsets, identity), dims)
        seen.append((A.version, V.version))
    for base_version, view_version in seen:
        if base_version is None:
            continue
        cells = A.at_version(base_version).to_pandas()
        expected = brute_force(cells, dims, cells, dims, offsets, identity)
        same_cells(V.at_version(view_version).to_pandas(), expected, dims)


def test_affine_mappings_under_every_strategy_and_answering_through_the_view(db):
    rng = np.random.default_rng(5)
    L = db.create_array("L <v:double, w:int64> [p=-6:5:4; q=-3:4:3]")
    R = db.create_array("R <v:double, w:int64> [x=-20:20:7; y=-10:10:5]")
    mapping = Mapping((AxisMap("x", "q", -3, 1, 0), AxisMap("y", "p", 1, 2, 0)))

    def image(key):
        return (-3 * key[1], key[0] // 2)

    L.insert(random_cells(rng, L.schema, 40))
    R.insert(random_cells(rng, R.schema, 150))
    V = db.create_view("V", similarity("L", "R", Linf(1), AGGREGATES, mapping))
    for step in range(3):
        if step == 0:
            R.insert(random_cells(rng, R.schema, 40), on_conflict="replace")
        elif step == 1:
            L.insert(random_cells(rng, L.schema, 10), on_conflict="replace")
            R.delete(R.to_pandas().iloc[::4][["x", "y"]])
        else:
            L.delete(L.to_pandas().iloc[::3][["p", "q"]])
        left, right = L.to_pandas(), R.to_pandas()
        # the view is behind here: it is brought forward in memory to answer, nothing is stored
        for query in (L1(1), L1(2), box([(-1, 1), (0, 0)])):
            expected = brute_force(left, ("p", "q"), right, ("x", "y"), query.offsets(), image)
            join = db.similarity_join("L", "R", query, mapping)
            same_cells(join.aggregate(*AGGREGATES, through="V").to_pandas(), expected, ("p", "q"))
        version = V.version
        V.refresh(("baseline", "full", "auto")[step])
        assert V.version == version + 1
        expected = brute_force(left, ("p", "q"), right, ("x", "y"), Linf(1).offsets(), image)
        same_cells(V.to_pandas(), expected, ("p", "q"))


def test_answers_through_a_view_with_subset_and_superset_shapes(db):
    rng = np.random.default_rng(11)
    A = db.create_array("A <v:double, w:int64> [i=-8:7:5; j=-8:7:4]")
    A.insert(random_cells(rng, A.schema, 120))
    db.create_view("Vsmall", similarity("A", "A", L1(1), AGGREGATES))
    db.create_view("Vbig", similarity("A", "A", Linf(2), AGGREGATES))
    cells = A.to_pandas()
    corners = stencil(np.array([[1, 0, 1], [0, 0, 0], [1, 0, 1]], dtype=bool))
    for query in (L1(0), L1(2), Linf(1), corners):
        expected = brute_force(cells, ("i", "j"), cells, ("i", "j"), query.offsets(), identity)
        for through in ("Vsmall", "Vbig", "auto"):
            answer = db.similarity_join("A", "A", query).aggregate(*AGGREGATES, through=through)
            same_cells(answer.to_pandas(), expected, ("i", "j"))


def test_a_mapped_image_beyond_int64_pairs_with_nothing(db):
    """5 * p for p near 2**62 wrapped around int64 onto a real right cell (the cell at
    2**62 - 9 paired with a left cell whose true image is 2.3e19)."""
    top = 2**62 - 1
    L = db.create_array(f"L <v:double, w:int64> [p=-{top}:{top}:1000]")
    R = db.create_array(f"R <v:double, w:int64> [x=-{top}:{top}:1000]")
    p = top - 1
    wrapped = (5 * p + 2**63) % 2**64 - 2**63
    assert abs(wrapped) <= top  # the wrapped image lands inside R
    left = pd.DataFrame({"p": [p, 0, -p], "v": [1.0, 2.0, 3.0], "w": [1, 2, 3]})
    right = pd.DataFrame({"x": [wrapped, 0, -wrapped], "v": [7.0, 8.0, 9.0], "w": [7, 8, 9]})
    L.insert(left)
    R.insert(right)
    mapping = Mapping((AxisMap("x", "p", 5, 1, 0),))
    expected = brute_force(left, ("p",), right, ("x",), L1(1, 1).offsets(), lambda k: (5 * k[0],))
    assert expected.p.tolist() == [0]
    join = db.similarity_join("L", "R", L1(1, 1), mapping)
    same_cells(join.aggregate(*AGGREGATES, through="none").to_pandas(), expected, ("p",))
    V = db.create_view("V", similarity("L", "R", L1(1, 1), AGGREGATES, mapping))
    same_cells(V.to_pandas(), expected, ("p",))
    R.insert(pd.DataFrame({"x": [wrapped + 1], "v": [1.5], "w": [4]}))
    V.refresh("baseline")
    same_cells(V.to_pandas(), expected, ("p",))


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.integers(-(2**62) + 1, 2**62 - 1), min_size=1, max_size=8),
    multiplier=st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-9, 9)).filter(lambda m: m != 0),
    divisor=st.one_of(st.integers(1, 2**63 - 1), st.integers(1, 9)),
    offset=st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-9, 9)),
)
def test_axis_image_is_the_exact_affine_map_saturated(values, multiplier, divisor, offset):
    axis = AxisMap("x", "p", multiplier, divisor, offset)
    got = axis.image(np.array(values, dtype=np.int64)).tolist()
    exact = [(v * multiplier) // divisor + offset for v in values]  # Python integers
    assert got == [min(max(e, -IMAGE_LIMIT), IMAGE_LIMIT) for e in exact]


def test_a_ball_with_a_dimension_count_other_than_the_arrays_is_refused_where_written(db):
    db.create_array("A <v:double, w:int64> [i=0:9:3; j=0:9:3]")
    statements = {
        "CREATE ARRAY VIEW V AS SELECT count(*) AS n FROM A a SIMILARITY JOIN A b WITH SHAPE\n"
        "  L1(1, 3) GROUP BY a.i, a.j": r"L1\(1, 3\) has 3 dimension\(s\) but the shape needs 2 \(at line 2, column 3\)",
        "SELECT count(*) AS n FROM A a SIMILARITY JOIN A b WITH SHAPE UNION(LINF(1, 1), L1(1)) "
        "GROUP BY a.i, a.j": r"LINF\(1, 1\) has 1 dimension\(s\) but the shape needs 2 \(at line 1, column 62\)",
    }
    for statement, message in statements.items():
        with pytest.raises(ValidationError, match=message):
            db.sql(statement)
    assert db.views() == []
    with pytest.raises(ValidationError, match=r"has 1 dimension\(s\), the right array A 2"):
        db.similarity_join("A", "A", L1(1, 1))
    # a count that agrees is taken, and a ball inside a product takes its own count
    db.sql(
        "CREATE ARRAY VIEW V AS SELECT count(*) AS n FROM A a SIMILARITY JOIN A b "
        "WITH SHAPE PRODUCT(L1(1, 1), LINF(1, 1)) GROUP BY a.i, a.j"
    )
    assert db.view("V").definition.shape == Linf(1)


def test_through_names_a_view_without_regard_to_case_and_refuses_what_is_not_one(db):
    A = db.create_array("A <v:double, w:int64> [i=0:9:3; j=0:9:3]")
    A.insert({"i": [0, 1, 2, 5], "j": [0, 1, 1, 5], "v": [1.0, 2.0, 3.0, 4.0], "w": [1, 2, 3, 4]})
    db.create_view("Near", similarity("A", "A", L1(1), ["count(*) as n"]))
    join = db.similarity_join("A", "A", L1(2))
    for spelling in ("near", "NEAR"):
        plan = join.plan("count(*) as n", through=spelling)
        assert plan.chosen == "view" and plan.view == "Near"
        assert join.aggregate("count(*) as n", through=spelling).to_pandas().n.tolist() == [2, 3, 2, 1]
    answer = db.sql(
        "SELECT count(*) AS n FROM A a SIMILARITY JOIN A b WITH SHAPE L1(2) GROUP BY a.i, a.j USING VIEW near"
    )
    assert answer.to_pandas().n.tolist() == [2, 3, 2, 1]
    with pytest.raises(NotFoundError, match=r"no view named Nope .*views: Near"):
        join.aggregate("count(*) as n", through="Nope")
    with pytest.raises(ValidationError, match=r"A is an array, not an array view"):
        join.aggregate("count(*) as n", through="A")
    with pytest.raises(NotFoundError, match=r"no view named nope .*\(statement at line 1, column 1\)"):
        db.sql(
            "SELECT count(*) AS n FROM A a SIMILARITY JOIN A b WITH SHAPE L1(2) GROUP BY a.i, a.j USING VIEW nope"
        )


def test_views_between_arrays_over_unbounded_dimensions_refresh_and_answer(db):
    """A right batch made the baseline plan list every left chunk of the unbounded dimension
    (2**60 of them: MemoryError), so neither a refresh nor an answer through the behind view ran."""
    rng = np.random.default_rng(3)
    L = db.create_array("L <v:double, w:int64> [i=-5:*:4; j=0:*:3]")
    R = db.create_array("R <v:double, w:int64> [x=-5:*:5; y=0:*:2]")

    def cells(m: int, a: str, b: str) -> pd.DataFrame:
        frame = pd.DataFrame(
            {
                a: rng.integers(-5, 20, m),
                b: rng.integers(0, 15, m),
                "v": rng.normal(size=m),
                "w": rng.integers(-9, 9, m),
            }
        )
        return frame.drop_duplicates([a, b])

    L.insert(cells(30, "i", "j"))
    R.insert(cells(60, "x", "y"))
    mapping = Mapping((AxisMap("x", "i"), AxisMap("y", "j")))
    V = db.create_view("V", similarity("L", "R", L1(1), AGGREGATES, mapping))
    for step, strategy in enumerate(("baseline", "auto")):
        R.insert(cells(10, "x", "y"), on_conflict="replace")
        if step:
            L.insert(cells(5, "i", "j"), on_conflict="replace")
        left, right = L.to_pandas(), R.to_pandas()
        query = Linf(1)
        expected = brute_force(left, ("i", "j"), right, ("x", "y"), query.offsets(), identity)
        answer = db.similarity_join("L", "R", query, mapping).aggregate(*AGGREGATES, through="V")
        same_cells(answer.to_pandas(), expected, ("i", "j"))
        V.refresh(strategy)
        expected = brute_force(left, ("i", "j"), right, ("x", "y"), L1(1).offsets(), identity)
        same_cells(V.to_pandas(), expected, ("i", "j"))


@settings(max_examples=40, deadline=None)
@given(
    multiplier=st.sampled_from([-3, -2, -1, 1, 2, 3]),
    divisor=st.integers(1, 3),
    offset=st.integers(-6, 6),
    before=st.integers(0, 2),
    after=st.integers(0, 2),
    right_chunk=st.integers(0, 6),
)
def test_left_chunk_box_is_the_run_of_left_chunks_reaching_the_right_chunk(
    multiplier, divisor, offset, before, after, right_chunk
):
    from arrayviews.model.schema_parser import parse_schema
    from arrayviews.operators.simjoin import JoinSpec

    left = parse_schema("L <v:double> [p=-7:12:3]")
    right = parse_schema("R <v:double> [x=-10:10:3]")
    spec = JoinSpec(
        left, right, box([(-before, after)]), Mapping((AxisMap("x", "p", multiplier, divisor, offset),))
    )
    low, high = -10 + 3 * right_chunk, min(-10 + 3 * right_chunk + 2, 10)
    # by enumeration: the left chunks whose cells' images span, widened by the shape, meets the chunk
    reaching = []
    for chunk in range(7):
        images = [
            (p * multiplier) // divisor + offset
            for p in range(-7 + 3 * chunk, min(-7 + 3 * chunk + 2, 12) + 1)
        ]
        if min(images) - before <= high and max(images) + after >= low:
            reaching.append(chunk)
    got = spec.left_chunk_box(np.array([[right_chunk]]))
    assert got == (None if not reaching else ((min(reaching), max(reaching)),))


def test_mapping_factors_outside_int64_are_refused_by_name(db):
    """A statement refuses them as int64 literals; the API let a divisor of 10**30 through to an
    OverflowError inside the join, and took a float multiplier."""
    A = db.create_array("A <v:double, w:int64> [i=0:9:3; j=0:9:3]")
    A.insert({"i": [0, 1], "j": [0, 1], "v": [1.0, 2.0], "w": [1, 2]})
    for factors, message in (
        ((1, 10**30, 0), "mapping of i: divisor 10{30} is outside the int64 range"),
        ((-(2**63) - 1, 1, 0), "mapping of i: multiplier -9223372036854775809 is outside the int64 range"),
        ((1.5, 1, 0), "mapping of i: multiplier must be an integer, got 1.5"),
        ((1, 1, True), "mapping of i: offset must be an integer, got True"),
    ):
        with pytest.raises(ValidationError, match=message.replace("10{30}", "1" + "0" * 30)):
            Mapping((AxisMap("i", "i", *factors), AxisMap("j", "j")))
    assert db.views() == []


def test_a_query_through_a_view_never_fails_on_a_view_aggregate_it_does_not_ask_for(db):
    """The merge evaluated every aggregate of the view over the query's shape: the view's
    sum(left.w), fine over its own shape, left int64 over the query's and the query asking only
    count(*) and max(right.w) failed with a RangeError through the view (also with through='auto')."""
    A = db.create_array("A <v:double, w:int64> [i=0:5:3; j=0:5:3]")
    cells = pd.DataFrame({"i": [0, 0, 1, 1], "j": [0, 1, 0, 1], "v": [1.0, 2.0, 3.0, 4.0]})
    cells["w"] = [2**61, 2**61 + 1, 2**61 + 2, -5]
    A.insert(cells)
    V = db.create_view("V", similarity("A", "A", L1(0), ["sum(left.w) as lsw", "max(right.w) as hw"]))
    assert V.to_pandas().lsw.tolist() == cells.w.tolist()
    expected = brute_force(cells, ("i", "j"), cells, ("i", "j"), Linf(1).offsets(), identity)
    assert max(expected.lsw) > 2**63  # sum(left.w) over the query's shape does not fit int64
    for through in ("V", "auto", "none"):
        answer = db.similarity_join("A", "A", Linf(1)).aggregate(
            "count(*) as n", "max(right.w) as hw", through=through
        )
        same_cells(answer.to_pandas(), expected[["i", "j", "n", "hw"]], ("i", "j"))
    with pytest.raises(Exception, match=r"sum\(left.w\) .* does not fit int64"):
        db.similarity_join("A", "A", Linf(1)).aggregate("sum(left.w) as lsw", through="V").to_pandas()
    # from the base arrays the error named "view A" (A is the array; there is no such view)
    with pytest.raises(
        Exception, match=r"^similarity join of A and A: sum\(left.w\) \(lsw\) at cell \(i=0, j=0\)"
    ):
        db.similarity_join("A", "A", Linf(1)).aggregate("sum(left.w) as lsw", through="none").to_pandas()


def test_view_statements_and_refreshed_bases_take_names_in_any_case(db):
    """Names are compared without regard to case (one namespace), and SELECT * FROM vv read view Vv,
    but REFRESH / VERIFY / SHOW STATUS OF vv said 'no view named vv (views: Vv)' and ON a said 'a
    is not a base array of the view (its bases: A)'."""
    db.sql("CREATE ARRAY A <v:double, w:int64> [i=0:9:3; j=0:9:3]")
    db.sql("INSERT INTO A VALUES (0, 0, 1.0, 1), (1, 1, 2.0, 2)")
    db.sql(
        "CREATE ARRAY VIEW Vv AS SELECT count(*) AS n FROM A a SIMILARITY JOIN A b WITH SHAPE L1(1) "
        "GROUP BY a.i, a.j"
    )
    db.sql("INSERT INTO A VALUES (0, 1, 3.0, 3)")
    assert db.sql("SHOW STATUS OF vv").pending.tolist() == [True]
    db.sql("REFRESH VIEW vv USING BASELINE ON a")
    assert db.view("Vv").status()["pending"] is False and db.sql("VERIFY VIEW VV") is True
    assert db.view("Vv").to_pandas().n.tolist() == [2, 3, 2]  # (0,0)~(0,1), (0,1)~both, (1,1)~(0,1)
    db.sql("INSERT INTO A VALUES (5, 5, 4.0, 4)")
    assert db.view("Vv").refresh(bases=["a"]).strategy in ("baseline", "full")
    assert db.view("Vv").status()["pending"] is False
    with pytest.raises(ValidationError, match=r"Nope is not a base array of the view \(its bases: A\)"):
        db.sql("REFRESH VIEW vv ON Nope")
    with pytest.raises(ValidationError, match="a is an array, not a view"):
        db.sql("REFRESH VIEW a")
    with pytest.raises(NotFoundError, match=r"no view named Nope \(views: Vv\)"):
        db.sql("VERIFY VIEW Nope")


def test_show_views_gives_the_mapping_of_a_view_made_in_python(db):
    """SHOW VIEWS said 'similarity join of L and R with shape L1(1, 2)' for a view whose mapping
    mirrors and shifts the axes, as if the mapping were the identity."""
    db.create_array("L <v:double> [p=0:9:3; q=0:9:3]")
    db.create_array("R <v:double> [x=0:9:3; y=0:9:3]")
    mapping = Mapping((AxisMap("x", "q", -3, 2, 1), AxisMap("y", "p", 1, 1, -4)))
    db.create_view("V", similarity("L", "R", L1(1), ["count(*) as n"], mapping))
    db.create_view("W", similarity("L", "R", L1(1), ["count(*) as n"]))
    assert db.sql("SHOW VIEWS").definition.tolist() == [
        "similarity join of L and R with shape L1(1, 2) mapping x = q * -3 / 2 + 1, y = p - 4",
        "similarity join of L and R with shape L1(1, 2)",
    ]
