"""Array operators tried as a demanding new user: int64 extremes in aggregates, 4-D regrid and
windows, indexing, against Python integers and numpy brute force, on both executors."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews.kernels.aggregates import finalize, merge_states, pack_states, partial_states, unpack_states
from arrayviews.kernels.exact_sum import SumOverflow
from arrayviews.model.errors import RangeError, ValidationError

BIG = 2**62
# 1-D, chunks of 3 over -4..5: every block of int64 values near the int64 limits
BIG_VALUES = np.array([BIG, BIG, BIG, -5, 2**63 - 1, 2**63 - 1, -(2**63), -(2**63), -1, 7], np.int64)


def _python_mean(values) -> float:
    """The float64 nearest the exact mean (Python's int / int rounds correctly)."""
    values = [int(v) for v in values]
    return sum(values) / len(values)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=12),
    st.integers(1, 4),
    st.randoms(use_true_random=False),
)
def test_int64_sums_are_exact_past_int64_in_partials_and_merges(values, pieces, shuffle) -> None:
    """Before: avg of int64 values whose sum leaves int64 raised OverflowError (Spark's avg of
    BIGINT is a number); now partial states carry the sum exactly however they are split."""
    data = np.array(values, np.int64)
    keys = np.array([k % 2 for k in range(len(values))], np.int64)
    cuts = sorted(shuffle.sample(range(1, len(values) + 1), min(pieces, len(values)) - 1))
    parts = [
        unpack_states(pack_states(partial_states(keys[a:b], data[a:b], {"sum"})))
        for a, b in itertools.pairwise([0, *cuts, len(values)])
    ]
    merged = merge_states(parts)
    for group, key in enumerate(merged.keys.tolist()):
        mine = [v for v, k in zip(values, keys.tolist(), strict=True) if k == key]
        assert finalize(merged, "avg")[0][group] == _python_mean(mine)
    totals = {k: sum(v for v, kk in zip(values, keys.tolist(), strict=True) if kk == k) for k in (0, 1)}
    beyond = [k for k in merged.keys.tolist() if not -(2**63) <= totals[k] < 2**63]
    if beyond:
        with pytest.raises(SumOverflow) as caught:
            finalize(merged, "sum")
        assert caught.value.value == totals[merged.keys.tolist()[caught.value.index]]
    else:
        assert finalize(merged, "sum")[0].tolist() == [totals[k] for k in merged.keys.tolist()]


def _big(db):
    A = db.create_array("A<n:int64>[i=-4:5:3]")
    A.write_dense(BIG_VALUES)
    return A


def _block_means() -> dict[int, float]:
    block_of = (np.arange(-4, 6) + 4) // 3  # regrid blocks of 3: cells -4..-2, -1..1, 2..4, 5
    return {b - 4: _python_mean(BIG_VALUES[block_of == b]) for b in range(4)}


def test_int64_means_and_counts_beside_strings_agree_on_both_executors(db_on) -> None:
    """Before: regrid/aggregate avg(n) failed with "an in-process job failed: OverflowError: an int64
    sum left the int64 range" ("a Spark job failed: ..." on Spark), though the means are ordinary
    numbers (Spark's avg of BIGINT is a DOUBLE; the window's avg(n) already worked); sum(n) failed
    with the same message, naming neither the array, the attribute nor the cell."""
    db, _ = db_on
    A = _big(db)
    got = A.filter("i > -100").regrid([3], "avg(n)").to_pandas()  # the two-stage reduction
    assert dict(zip(got.i.tolist(), got.n_avg.tolist(), strict=True)) == _block_means()
    # counts beside a string and a datetime64 attribute (before: "cannot aggregate values of dtype
    # datetime64[ns]" on both executors)
    M, cells = _mixed(db)
    got = M.window({"i": (9, 9)}, "count(*)", "count(t)").to_pandas()
    per_j = {
        j: (sum(1 for (_, jj) in cells if jj == j), sum(h for (_, jj), h in cells.items() if jj == j))
        for j in range(3)
    }
    assert {(r.i, r.j): (r.count, r.t_count) for r in got.itertuples()} == {c: per_j[c[1]] for c in cells}


def test_int64_avg_and_sum_past_int64_in_process(local_db) -> None:
    A = _big(local_db)
    got = A.regrid([3], "avg(n)", "count(*)").to_pandas()  # the dense box path
    assert dict(zip(got.i.tolist(), got.n_avg.tolist(), strict=True)) == _block_means()
    assert A.aggregate("avg(n)").to_pandas().n_avg.tolist() == [_python_mean(BIG_VALUES)]
    statement = local_db.sql("SELECT * FROM aggregate(A, avg(n))").to_pandas()
    assert statement.n_avg.tolist() == [_python_mean(BIG_VALUES)]
    for source in (A, A.filter("i > -100")):  # the dense box path and the two-stage one
        with pytest.raises(
            RangeError, match=r"A: the sum of n at cell \(i=-4\): the sum is 13835058055282163712,"
        ):
            source.regrid([3], "sum(n)").to_pandas()
    with pytest.raises(RangeError) as caught:
        A.aggregate("sum(n)").store("A_total")
    assert (caught.value.array, caught.value.column) == ("A", "n")
    assert caught.value.value == sum(int(v) for v in BIG_VALUES) == 3 * BIG - 1
    assert "A_total" not in local_db.relations().name.tolist()
    assert A.version == 1


@pytest.fixture(scope="module")
def local_db(spark, tmp_path_factory):
    return arrayviews.connect(str(tmp_path_factory.mktemp("arrays_trial")), spark=spark, execution="local")


@pytest.fixture(scope="module")
def four(local_db):
    """A sparse 4-D float array with negative ranges, chunks of 1 and chunks larger than the array,
    NaN, infinities and -0.0 among its values; and its dense reference (NaN where empty)."""
    rng = np.random.default_rng(19)
    shape = (5, 3, 4, 2)
    values = rng.normal(size=shape)
    values[0, 0, 0, 0], values[1, 1, 1, 1], values[2, 2, 2, 0] = np.inf, -0.0, -np.inf
    empty = rng.random(shape) < 0.45
    empty[:, :, 3, :] = True  # whole empty chunks along k
    F = local_db.create_array("F<v:float64>[a=-3:1:10; b=0:2:1; k=-2:1:1; d=7:8:2]")
    F.write_dense(np.ma.array(values, mask=empty))
    return F, np.where(empty, np.nan, values), ~empty


def test_four_dimensional_reads_and_indexing_match_numpy(four) -> None:
    F, dense, _ = four
    assert np.array_equal(np.asarray(F), dense, equal_nan=True)
    assert np.signbit(np.asarray(F)[1, 1, 1, 1])  # -0.0 kept
    # coordinates, not positions: a=-1 is position 2, k=-2:0 positions 0..1, d=8 position 1
    assert np.array_equal(np.asarray(F[-1, ..., -2:0, 8]), dense[2:3, :, 0:2, 1:2], equal_nan=True)
    assert np.array_equal(np.asarray(F[-100:100, 1:]), dense[:, 1:], equal_nan=True)  # clipped
    for bad in ((..., slice(None, None, 2)), 5, (..., slice(2, 2)), 0.5, (..., ..., 1), (1, 1, 1, 1, 1)):
        with pytest.raises(ValidationError) as caught:
            F[bad]
        assert caught.value.array == "F"
    with pytest.raises(ValidationError, match="outside the dimension range"):
        np.asarray(F.subarray(a=(10, 20)))


def test_four_dimensional_regrid_with_uneven_blocks_matches_numpy(four) -> None:
    F, dense, present = four
    blocks = (2, 2, 3, 2)  # none divides its range
    got = F.regrid(list(blocks), "sum(v)", "count(v)", "max(v)").to_pandas()
    lows = (-3, 0, -2, 7)
    expected = {}
    for index in zip(*np.nonzero(present), strict=True):
        out = tuple(low + i // b for i, low, b in zip(index, lows, blocks, strict=True))
        expected.setdefault(out, []).append(dense[index])
    rows = {
        tuple(r[:4]): r[4:]
        for r in got[["a", "b", "k", "d", "v_sum", "v_count", "v_max"]].itertuples(index=False)
    }
    assert rows.keys() == expected.keys()
    for out, items in expected.items():
        total, count, largest = rows[out]
        assert count == len(items) and largest == max(items)
        reference = math.fsum(items) if np.isfinite(items).all() else float(np.sum(items))
        assert total == reference  # sums are exact, then rounded once (infinities: +inf or -inf here)


def test_window_larger_than_the_array_matches_brute_force(four) -> None:
    F, dense, present = four
    got = F.window({"a": (9, 0), "k": (0, 7)}, "count(v)", "min(v)").to_pandas()
    lows = np.array([-3, 0, -2, 7])
    expected = {}
    for index in zip(*np.nonzero(present), strict=True):
        a, b, k, d = index
        near = dense[: a + 1, b : b + 1, k:, d : d + 1]
        kept = near[present[: a + 1, b : b + 1, k:, d : d + 1]]
        expected[tuple(int(x) for x in np.array(index) + lows)] = (len(kept), np.min(kept))
    rows = {
        tuple(r[:4]): tuple(r[4:])
        for r in got[["a", "b", "k", "d", "v_count", "v_min"]].itertuples(index=False)
    }
    assert rows == expected


def test_text_with_nul_characters_from_lists_and_numpy_is_kept(local_db) -> None:
    """Before: a dict batch of a Python list or numpy str array cut every string at its first NUL
    ('a\\x00b' stored as 'a', length 1) and numpy dropped trailing NULs; pandas and Arrow kept them."""
    S = local_db.create_array("S_nul<s:string>[i=0:5:4]")
    texts = ["a\x00b", "x\x00", "\x00", "", "é\x00🙂"]
    S.insert({"i": [0, 1, 2, 3], "s": texts[:4]})
    S.insert({"i": np.array([4]), "s": np.array(texts[4:])})
    assert S.to_pandas().s.tolist() == texts
    assert S.apply("n", "length(s)").to_pandas().n.tolist() == [len(t) for t in texts]
    assert S.filter("s = 'a\\u0000b'").to_pandas().i.tolist() == [0]
    # a column mixing text and numbers is refused by name (before: a raw ArrowInvalid, or the
    # numbers silently stored as text), and nothing is written
    for cells, column, value in (
        ({"i": [5, 6], "s": [1, "a"]}, "s", "'a'"),
        ({"i": ["5", 6], "s": ["p", "q"]}, "i", "6"),
    ):
        with pytest.raises(ValidationError, match=f"column {column} mixes text and other values") as caught:
            S.insert(cells)
        assert (caught.value.array, caught.value.column, caught.value.value) == ("S_nul", column, value)
    assert S.version == 2


def test_string_arrays_with_empty_cells_round_trip_through_xarray(local_db) -> None:
    """Before: from_xarray(A.to_xarray()) of a string array with an empty cell failed with "nan is
    not a string": None/NaN in an object variable was not read as xarray's missing value."""
    S = local_db.create_array("S_xr<s:string, v:int16>[i=-2:2:2]")
    S.insert({"i": [-2, 0, 2], "s": ["", "ü", "z\x00"], "v": np.array([-32768, 0, 32767], np.int16)})
    copy = local_db.from_xarray(S.to_xarray(), "S_xr_copy")
    assert copy.schema.dimension("i").low == -2
    assert copy.to_pandas().to_dict("list") == {
        "i": [-2, 0, 2],
        "s": ["", "ü", "z\x00"],
        "v": [-32768.0, 0.0, 32767.0],
    }


MIXED_SCHEMA = "M<s:string, t:datetime64 NULL, u:uint64>[i=-3:4:3; j=0:2:2]"


def _mixed(db):
    """A sparse array with a string, a nullable datetime64 and a uint64 attribute, and its cells as
    plain Python: {(i, j): t is not null}."""
    cells = [(-3, 0, True), (-3, 1, False), (-2, 2, True), (0, 0, True), (1, 1, False), (4, 2, True)]
    M = db.create_array(MIXED_SCHEMA)
    M.insert(
        {
            "i": [c[0] for c in cells],
            "j": [c[1] for c in cells],
            "s": ["", "ü", "x\x00y", "a", "b", "c"],
            "t": pa.array(
                [np.datetime64("2020-01-01", "ns") if c[2] else None for c in cells], pa.timestamp("ns")
            ),
            "u": np.array([0, 2**64 - 1, 1, 2, 3, 4], np.uint64),
        }
    )
    return M, {(c[0], c[1]): c[2] for c in cells}


def _counted(cells: dict, blocks: tuple[int, int], lows=(-3, 0)) -> dict:
    """Per regrid block: (count(*), count(t)) by brute force."""
    out: dict = {}
    for (i, j), has_t in cells.items():
        key = (lows[0] + (i - lows[0]) // blocks[0], lows[1] + (j - lows[1]) // blocks[1])
        total, timed = out.get(key, (0, 0))
        out[key] = (total + 1, timed + has_t)
    return out


def test_counts_over_arrays_with_string_and_datetime_attributes(local_db) -> None:
    """Before: regrid and window of an array holding a string attribute failed in-process with
    "cannot create an OBJECT array from memory buffer" whatever they counted; aggregate("count(t)")
    of a datetime64 attribute with "Invalid integer data type 'M'", window count(t) with "cannot
    aggregate values of dtype datetime64[ns]" (docs: every type is counted)."""
    M, cells = _mixed(local_db)
    expected = _counted(cells, (2, 3))
    for source in (M, M.filter("i > -100")):
        got = source.regrid([2, 3], "count(*)", "count(t)", "count(u)").to_pandas()
        rows = {(r.i, r.j): (r.count, r.t_count) for r in got.itertuples()}
        assert rows == expected and got.u_count.tolist() == got["count"].tolist()
    whole = M.aggregate("count(*)", "count(t)", "count(s)").to_pandas()
    assert whole[["count", "t_count", "s_count"]].values.tolist() == [[6, sum(cells.values()), 6]]
    window = M.window({"i": (1, 2), "j": (0, 1)}, "count(*)", "count(t)").to_pandas()
    for r in window.itertuples():
        near = [has_t for (i, j), has_t in cells.items() if r.i - 1 <= i <= r.i + 2 and r.j <= j <= r.j + 1]
        assert (r.count, r.t_count) == (len(near), sum(near))
    assert sorted((r.i, r.j) for r in window.itertuples()) == sorted(cells)


def test_regrid_and_window_of_dense_chunks_beside_a_string_attribute(local_db) -> None:
    """Before: a whole (dense) chunk of an array with a string attribute was decoded with
    np.frombuffer into an object array: "cannot create an OBJECT array from memory buffer"."""
    D = local_db.create_array("D<s:string, v:float64>[i=0:5:2]")
    v = np.array([0.5, -1.0, 2.25, 8.0, -0.0, 3.0])
    D.write_dense({"s": np.array(["a", "", "é", "z\x00", "b", "c"], object), "v": v})
    got = D.regrid([4], "sum(v)", "count(*)", "max(s)").to_pandas()
    assert got.v_sum.tolist() == [v[:4].sum(), v[4:].sum()]
    assert got["count"].tolist() == [4, 2] and got.s_max.tolist() == ["é", "c"]
    window = D.window([1, 2], "sum(v)").to_pandas()
    assert window.v_sum.tolist() == [math.fsum(v[max(0, k - 1) : k + 3]) for k in range(6)]


def test_float_window_sums_that_overflow_are_loud_on_every_method(local_db) -> None:
    """Before: a window whose finite values' float sum overflowed gave inf (with a numpy
    RuntimeWarning) where aggregate and regrid raise RangeError: same-sign windows on every method,
    and cancelling ones ([1e308, 1e308, -1e308]) with method="naive" and on sparse points."""
    D = local_db.create_array("W_big<v:float64>[i=0:4:5]")
    D.write_dense(np.array([1e308, 1e308, 1.0, -1e308, 2.0]))
    P = local_db.create_array("W_sparse<v:float64>[i=0:*:1000000]")
    P.insert({"i": [0, 5, 10, 10**9], "v": [1e308, 1e308, -1e308, 3.0]})
    with pytest.raises(RangeError) as caught:
        D.aggregate("sum(v)").to_pandas()
    assert caught.value.array == "W_big"
    for method in ("incremental", "basic", "naive"):
        with pytest.raises(RangeError, match=r"W_big: the window sum of v at cell \(i=1\)"):
            D.window([1, 0], "sum(v)", method=method).to_pandas()
        with pytest.raises(RangeError, match=r"W_sparse: the window sum of v at cell \(i=5\)"):
            P.window([5, 0], "avg(v)", method=method).to_pandas()
        # where no window overflows the sums are exact (Python fractions), whatever the method
        fine = D.subarray(i=(1, 4)).window([0, 1], "sum(v)", method=method).to_pandas()
        values = [1e308, 1.0, -1e308, 2.0]
        expected = [float(sum(map(Fraction, values[k : k + 2]))) for k in range(4)]
        assert fine.v_sum.tolist() == expected
        sparse = P.subarray(i=(5, 10**9)).window([5, 0], "sum(v)", method=method).to_pandas()
        assert sparse.v_sum.tolist() == [1e308, 0.0, 3.0]


def test_a_single_subarray_bound_and_a_text_version_are_refused_by_name(local_db) -> None:
    """Before: A.subarray(i=3) raised a bare TypeError ("cannot unpack non-iterable int object"),
    and A.at_version("1") said "array A has no version 1 (versions held: 1)"."""
    A = local_db.create_array("Bounds<v:int64>[i=-2:2:2]")
    A.write_dense(np.array([5, -6, 7, -8, 9], np.int64))
    with pytest.raises(ValidationError, match=r"bounds of i are a \(low, high\) pair.*got 3") as caught:
        A.subarray(i=3)
    assert (caught.value.array, caught.value.column) == ("Bounds", "i")
    with pytest.raises(ValidationError, match="subarray bound i=1:-1 is empty") as caught:
        A.subarray(i=(1, -1))
    assert (caught.value.array, caught.value.column, caught.value.value) == ("Bounds", "i", (1, -1))
    with pytest.raises(ValidationError, match="a version is an integer") as caught:
        A.at_version("1")
    assert caught.value.value == "'1'"
    assert A.at_version(np.int64(1)).to_numpy().tolist() == [5, -6, 7, -8, 9]
    assert A.subarray(i=(-1, -1)).to_numpy().tolist() == [-6] and A.version == 1
    # bounds that are not integers are refused by name (before: True taken for 1, a str bound a bare
    # TypeError), numpy integers of any width accepted (before: np.int8 refused)
    for bounds in ((True, 1), ("0", 1), (0.0, 1)):
        with pytest.raises(ValidationError, match="bounds of i are a") as caught:
            A.subarray(i=bounds)
        assert caught.value.value == repr(bounds)
    assert A.subarray(i=(np.int8(-1), np.uint16(1))).to_numpy().tolist() == [-6, 7, -8]


def test_to_numpy_fill_values_the_result_cannot_hold_are_refused_by_name(local_db) -> None:
    """Before: A.to_numpy("n", fill=1000) on int8 raised numpy's bare OverflowError ("Python
    integer 1000 out of bounds for int8"), as did fill=-1 on uint64."""
    A = local_db.create_array("Fills<n:int8, u:uint64>[i=0:3:2]")
    A.insert({"i": [0, 2], "n": np.array([-128, 127], np.int8), "u": np.array([2**64 - 1, 0], np.uint64)})
    for attribute, fill in (("n", 1000), ("u", -1), ("n", "x")):
        with pytest.raises(ValidationError, match="does not fit") as caught:
            A.to_numpy(attribute, fill=fill)
        assert (caught.value.array, caught.value.column, caught.value.value) == (
            "Fills",
            attribute,
            repr(fill),
        )
    got = A.to_numpy("n", fill=-1)
    assert got.dtype == np.int8 and got.tolist() == [-128, -1, 127, -1]
    wide = A.to_numpy("u", fill=np.nan)  # numpy's rule: a float fill makes the result float64
    assert np.array_equal(wide, np.array([2.0**64, np.nan, 0.0, np.nan]), equal_nan=True)
    assert A.to_numpy("u", fill=7).tolist() == [2**64 - 1, 7, 0, 7]


def test_fractional_origins_and_boolean_extents_change_nothing(local_db) -> None:
    """Before: write_dense(..., origin=(-2.5, 0)) wrote the block at i=-2 (int() truncated the
    coordinate), and regrid([True, 1]) / window([True, 0, 0, 0]) took True for 1."""
    A = local_db.create_array("Origins<v:float64>[i=-3:2:2; j=0:1:2]")
    with pytest.raises(ValidationError, match=r"origin coordinates are integers, got -2\.5") as caught:
        A.write_dense(np.ones((2, 2)), origin=(-2.5, 0))
    assert caught.value.array == "Origins" and A.version == 0 and A.count() == 0
    A.write_dense(np.arange(4.0).reshape(2, 2), origin=(np.int64(-1), 0))
    assert A.to_pandas().values.tolist() == [[-1, 0, 0.0], [-1, 1, 1.0], [0, 0, 2.0], [0, 1, 3.0]]
    with pytest.raises(ValidationError, match="regrid block size for i") as caught:
        A.regrid([True, 1], "sum(v)")
    assert (caught.value.column, caught.value.value) == ("i", "True")
    with pytest.raises(ValidationError, match="window extent for i") as caught:
        A.window([True, 0, 0, 0], "sum(v)")
    assert caught.value.column == "i"


def test_delete_boxes_with_fractional_or_single_bounds_delete_nothing(local_db) -> None:
    """Before: A.delete(box={"i": (0.5, 1.5)}) deleted cells 0 and 1 (int() truncated the bounds),
    and box={"i": 3} raised a bare TypeError ("'int' object is not subscriptable")."""
    A = local_db.create_array("Boxes<v:float64>[i=0:5:2]")
    A.write_dense(np.arange(6.0))
    for bounds in ((0.5, 1.5), 3, (1, True)):
        with pytest.raises(ValidationError, match="the box bounds of i are a") as caught:
            A.delete(box={"i": bounds})
        assert (caught.value.array, caught.value.column, caught.value.value) == ("Boxes", "i", repr(bounds))
    assert A.version == 1 and A.to_numpy().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    A.delete(box={"i": (np.int64(1), 2)})
    assert np.array_equal(A.to_numpy(), [0.0, np.nan, np.nan, 3.0, 4.0, 5.0], equal_nan=True)


def test_to_xarray_never_rounds_an_integer_it_turns_to_float(db) -> None:
    """Before: an int64 or uint64 attribute with an empty cell went to xarray as float64, and a value
    beyond 2**53 was silently rounded (2**53 + 1 read back as 2**53). Now every value float64 holds
    exactly goes through (checked against Python's float of the integer), and the first one it does
    not is refused by name; without empty cells the integer dtype is kept, every value exact."""
    exact = [2**53, -(2**53), 2**60, -(2**63), 3]
    A = db.create_array("A<n:int64>[i=0:7:4]")
    A.insert({"i": list(range(len(exact))), "n": exact})
    got = A.to_xarray()["n"].values
    assert got.dtype == np.float64 and np.isnan(got[len(exact) :]).all()
    assert [int(v) for v in got[: len(exact)]] == exact and all(float(v) == v for v in exact)
    for k, (kind, value) in enumerate((("int64", 2**53 + 1), ("int64", 2**63 - 1), ("uint64", 2**64 - 1))):
        B = db.create_array(f"B{k}<n:{kind}>[i=0:3:4]")
        B.insert({"i": [0, 1], "n": np.array([1, value], dtype=kind)})
        with pytest.raises(ValidationError, match=f"array B{k}, attribute n: {value} has no exact float64"):
            B.to_xarray()
        B.insert({"i": [2, 3], "n": np.array([5, 6], dtype=kind)})  # now no empty cell: kept exactly
        full = B.to_xarray()["n"].values
        assert full.dtype == np.dtype(kind) and [int(v) for v in full] == [1, value, 5, 6]
