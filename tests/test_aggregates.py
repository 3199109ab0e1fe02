"""Tests for aggregate-call parsing and the partial-state aggregate kernels, against per-group references."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from arrayviews.kernels.aggregates import (
    PartialStates,
    finalize,
    merge_states,
    needs_for,
    pack_states,
    partial_states,
    unpack_states,
)
from arrayviews.kernels.exact_sum import ExactSumError, SumOverflow
from arrayviews.model.aggregate_calls import (
    AggregateCall,
    check_call,
    check_calls,
    output_nullable,
    output_type,
    parse_aggregate,
)
from arrayviews.model.errors import ParseError, ValidationError
from arrayviews.model.types import numpy_dtype

ALL_PARTS = {"count", "sum", "moments", "min", "max"}
FUNCTIONS = ("count", "sum", "avg", "min", "max", "var", "stdev")
TYPES = ("int32", "int64", "float32", "float64", "bool")

# -- aggregate calls -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "function", "attribute", "name"),
    [
        ("avg(v)", "avg", "v", "v_avg"),
        ("count(*)", "count", None, "count"),
        ("count(v)", "count", "v", "v_count"),
        ("stdev(v) as s", "stdev", "v", "s"),
        ("AVG( v )", "avg", "v", "v_avg"),
        ("  Sum(x_1)AS total  ", "sum", "x_1", "total"),
        ("mean(v)", "avg", "v", "v_avg"),
        ("std(v)", "stdev", "v", "v_stdev"),
        ("stddev(v)", "stdev", "v", "v_stdev"),
        ("variance(v)", "var", "v", "v_var"),
        ("min(v)", "min", "v", "v_min"),
        ("max(v) as top", "max", "v", "top"),
    ],
)
def test_parse_aggregate_accepts(text: str, function: str, attribute: str | None, name: str) -> None:
    call = parse_aggregate(text)
    assert (call.function, call.attribute, call.output_name) == (function, attribute, name)
    assert parse_aggregate(call.to_text()) == call


@pytest.mark.parametrize(
    ("text", "column"),
    [
        ("", 1),
        ("median(v)", 1),
        ("avg v", 5),
        ("avg()", 5),
        ("sum(*)", 5),
        ("avg(v", 6),
        ("avg(v) s", 8),
        ("avg(v) as", 10),
        ("avg(v) as a b", 13),
        ("avg(v) as a__b", 11),
        ("avg(1)", 5),
    ],
)
def test_parse_aggregate_rejects_with_column(text: str, column: int) -> None:
    with pytest.raises(ParseError) as caught:
        parse_aggregate(text)
    assert caught.value.line == 1
    assert caught.value.column == column


def test_aggregate_call_constructor_normalises_and_checks() -> None:
    assert AggregateCall("MEAN", "v").function == "avg"
    with pytest.raises(ValueError):
        AggregateCall("sum", None)
    with pytest.raises(ValueError):
        AggregateCall("median", "v")


@pytest.mark.parametrize(
    ("function", "input_type", "expected"),
    [
        ("count", None, "int64"),
        ("count", "float32", "int64"),
        ("sum", "int32", "int64"),
        ("sum", "int64", "int64"),
        ("sum", "bool", "int64"),
        ("sum", "float32", "float64"),
        ("avg", "int32", "float64"),
        ("var", "float32", "float64"),
        ("stdev", "int64", "float64"),
        ("min", "int32", "int32"),
        ("max", "float32", "float32"),
        ("min", "bool", "bool"),
    ],
)
def test_output_type(function: str, input_type: str | None, expected: str) -> None:
    attribute = None if function == "count" and input_type is None else "v"
    assert output_type(AggregateCall(function, attribute), input_type) == expected


def test_output_nullable() -> None:
    assert output_nullable(parse_aggregate("var(v)")) and output_nullable(parse_aggregate("stdev(v)"))
    assert not any(output_nullable(parse_aggregate(f"{f}(v)")) for f in ("count", "sum", "avg", "min", "max"))
    assert output_nullable(parse_aggregate("avg(v)"), input_nullable=True)
    assert not output_nullable(parse_aggregate("count(v)"), input_nullable=True)


def test_check_call() -> None:
    types = {"v": "float64", "flag": "bool"}
    for text in ("count(*)", "avg(v)", "sum(flag)", "avg(flag)", "min(flag)", "count(flag)"):
        check_call(parse_aggregate(text), types)
    with pytest.raises(ValidationError, match="available: v, flag"):
        check_call(parse_aggregate("avg(w)"), types)
    for text in ("var(flag)", "stdev(flag)"):
        with pytest.raises(ValidationError, match="bool"):
            check_call(parse_aggregate(text), types)
    with pytest.raises(ValidationError, match="v_avg"):
        check_calls([parse_aggregate("avg(v)"), parse_aggregate("mean(v)")], types)


# -- reference -------------------------------------------------------------------------------------


def reference(keys: np.ndarray, values: np.ndarray, valid: np.ndarray) -> dict[int, list]:
    """Per key, the list of (non-null) values as Python numbers, built with a plain loop."""
    groups: dict[int, list] = {}
    for key, value, ok in zip(keys.tolist(), values.tolist(), valid.tolist(), strict=True):
        groups.setdefault(key, [])
        if ok:
            groups[key].append(value)
    return groups


def expected_value(function: str, items: list, is_float: bool) -> object:
    """The reference result of ``function`` over one group's values, or None for null."""
    has_nan = is_float and any(math.isnan(x) for x in items)
    if function == "count":
        return len(items)
    if not items or (function in ("var", "stdev") and len(items) < 2):
        return None
    if has_nan and function != "count":
        return math.nan
    if function == "sum":
        return math.fsum(items) if is_float else sum(int(x) for x in items)
    if function == "avg":
        return math.fsum(items) / len(items) if is_float else sum(int(x) for x in items) / len(items)
    if function in ("min", "max"):
        return min(items) if function == "min" else max(items)
    variance = statistics.variance([float(x) if is_float else int(x) for x in items])
    return variance if function == "var" else math.sqrt(variance)


def assert_matches(function: str, got: object, want: object, items: list, is_float: bool) -> None:
    """Integers and min/max exactly; floats to 1e-9 relative with an absolute floor set by the data scale.

    The floor is 1e-12 * sum|x| for sums and averages (cancellation), and 1e-12 * max|x|^2 for the
    variance (1e-6 * max|x| for the standard deviation): variance is ill-conditioned when the spread is
    tiny compared with the magnitude, and that case has its own robustness test below.
    """
    if isinstance(want, float) and math.isnan(want):
        assert math.isnan(got), (function, got, items)
        return
    if function in ("count", "min", "max") or (function == "sum" and not is_float):
        assert got == want, (function, got, want, items)
        return
    scale = max((abs(float(x)) for x in items), default=0.0)
    floor = {"sum": 1e-12 * scale * len(items), "avg": 1e-12 * scale, "var": 1e-12 * scale**2}
    floor["stdev"] = 1e-6 * scale
    assert math.isclose(got, want, rel_tol=1e-9, abs_tol=floor[function]), (function, got, want, items)


def check_against_reference(
    states: PartialStates, keys: np.ndarray, values: np.ndarray, valid: np.ndarray, value_type: str
) -> None:
    groups = reference(keys, values, valid)
    assert states.keys.tolist() == sorted(groups)
    is_float = value_type.startswith("float")
    for function in FUNCTIONS:
        if value_type == "bool" and function in ("var", "stdev"):
            continue
        result, null = finalize(states, function)
        attribute = None if function == "count" else "v"
        assert result.dtype == numpy_dtype(output_type(AggregateCall(function, attribute), value_type))
        for i, key in enumerate(states.keys.tolist()):
            want = expected_value(function, groups[key], is_float)
            if want is None:
                assert null is not None and null[i], (function, key)
                continue
            assert null is None or not null[i], (function, key)
            assert_matches(function, result[i].item(), want, groups[key], is_float)


# -- hypothesis: random data, random splits, random merge order -------------------------------------

_ELEMENTS = {
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**55), 2**55),
    "float32": st.floats(-1e6, 1e6, width=32) | st.just(math.nan),
    "float64": st.floats(-1e9, 1e9) | st.just(math.nan),
    "bool": st.booleans(),
}


@st.composite
def datasets(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    value_type = draw(st.sampled_from(TYPES))
    size = draw(st.integers(0, 120))
    few = draw(st.booleans())
    key_range = 3 if few else 10_000
    base = draw(st.sampled_from([0, -(2**40), 2**60]))
    keys = draw(hnp.arrays(np.int64, size, elements=st.integers(0, key_range - 1))) + base
    values = draw(hnp.arrays(numpy_dtype(value_type), size, elements=_ELEMENTS[value_type]))
    if draw(st.booleans()):
        valid = draw(hnp.arrays(np.bool_, size, elements=st.booleans()))
    else:
        valid = np.ones(size, dtype=bool)
    return keys, values, valid, value_type


@settings(max_examples=300, deadline=None)
@given(datasets(), st.data())
def test_split_and_merge_matches_reference(dataset, data: st.DataObject) -> None:
    keys, values, valid, value_type = dataset
    parts_count = data.draw(st.integers(1, 5), label="partials")
    owner = data.draw(
        hnp.arrays(np.int64, len(keys), elements=st.integers(0, parts_count - 1)), label="owner"
    )
    use_mask = not valid.all()
    try:
        parts = [
            partial_states(
                keys[owner == p], values[owner == p], ALL_PARTS, valid=valid[owner == p] if use_mask else None
            )
            for p in range(parts_count)
        ]
        parts = data.draw(st.permutations(parts), label="order")
        if data.draw(st.booleans(), label="through bytes"):
            parts = [unpack_states(pack_states(p)) for p in parts]
        if data.draw(st.booleans(), label="pairwise tree"):
            while len(parts) > 1:
                i = data.draw(st.integers(0, len(parts) - 2), label="pair")
                parts[i : i + 2] = [merge_states(parts[i : i + 2])]
            merged = parts[0]
        else:
            merged = merge_states(parts)
        single = partial_states(keys, values, ALL_PARTS, valid=valid if use_mask else None)
    except ExactSumError:
        # float sums are exact or refused: a refusal is allowed only beyond the magnitudes whose
        # exact sums four components always hold (1e-10 .. 1e17, kernels/exact_sum.py)
        terms = np.abs(values[valid & np.isfinite(values)].astype(np.float64))
        terms = terms[terms > 0]
        assert ((terms < 1e-10) | (terms > 1e17)).any(), terms
        return
    check_against_reference(merged, keys, values, valid, value_type)
    check_against_reference(single, keys, values, valid, value_type)


# -- numerical robustness --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "centre", "spread"),
    [(np.float64, 1e8, 1.0), (np.float32, 1e8, 1.0), (np.float32, 1e8, 50.0), (np.float32, 1e4, 1.0)],
)
def test_variance_is_robust_for_large_mean_small_spread(dtype, centre: float, spread: float) -> None:
    """Tolerance: 1e-6 relative to a float64 two-pass variance over the same (already rounded) values.

    float32 near 1e8 has a spacing of 8, so with spread 1 most values round to 1e8 exactly; the
    variance is then tiny but well defined and must still come out right.
    """
    rng = np.random.default_rng(7)
    size = 200_000
    keys = rng.integers(0, 3, size)
    values = (centre + rng.normal(0.0, spread, size)).astype(dtype)
    owner = rng.integers(0, 64, size)
    parts = [partial_states(keys[owner == p], values[owner == p], {"moments"}) for p in range(64)]
    merged = merge_states([parts[i] for i in rng.permutation(64)])
    got, null = finalize(merged, "var")
    assert null is None
    for group in range(3):
        x = values[keys == group].astype(np.float64)
        deviation = x - x.mean()
        want = (deviation @ deviation) / (len(x) - 1)
        assert want > 0
        assert abs(got[group] - want) <= 1e-6 * want
        if dtype == np.float64:  # the naive sum-of-squares formula fails here, so the test has teeth
            naive = (x @ x - x.sum() ** 2 / len(x)) / (len(x) - 1)
            assert abs(naive - want) > 1e-3 * want


# -- edge cases ------------------------------------------------------------------------------------


def test_one_group() -> None:
    values = np.array([4, 8, 15, 16, 23, 42], dtype=np.int32)
    keys = np.full(6, 9)
    states = merge_states(
        [partial_states(keys[:2], values[:2], ALL_PARTS), partial_states(keys[2:], values[2:], ALL_PARTS)]
    )
    assert states.keys.tolist() == [9]
    assert finalize(states, "sum")[0].tolist() == [108]
    assert finalize(states, "avg")[0].tolist() == [18.0]
    assert finalize(states, "min")[0].tolist() == [4] and finalize(states, "max")[0].tolist() == [42]
    assert math.isclose(finalize(states, "var")[0][0], statistics.variance(values.tolist()), rel_tol=1e-12)
    assert math.isclose(finalize(states, "stdev")[0][0], statistics.stdev(values.tolist()), rel_tol=1e-12)


def test_one_element_per_group_gives_null_variance() -> None:
    keys = np.array([5, 1, 3])
    values = np.array([2.0, 7.0, -1.0])
    states = partial_states(keys, values, ALL_PARTS)
    for function in ("var", "stdev"):
        result, null = finalize(states, function)
        assert null.tolist() == [True, True, True] and result.tolist() == [0.0, 0.0, 0.0]
    assert finalize(states, "avg")[0].tolist() == [7.0, -1.0, 2.0]
    # Two single-value partials of the same key make a group of two: variance no longer null.
    merged = merge_states([partial_states([1], [1.0], ALL_PARTS), partial_states([1], [3.0], ALL_PARTS)])
    assert finalize(merged, "var")[0].tolist() == [2.0]


def test_empty_input() -> None:
    for value_type in TYPES:
        empty = partial_states(np.empty(0, np.int64), np.empty(0, numpy_dtype(value_type)), ALL_PARTS)
        assert len(empty) == 0
        merged = merge_states([empty, unpack_states(pack_states(empty))])
        assert len(merged) == 0
        for function in FUNCTIONS:
            if value_type == "bool" and function in ("var", "stdev"):
                continue
            result, null = finalize(merged, function)
            assert len(result) == 0 and null is None
            assert result.dtype == numpy_dtype(output_type(AggregateCall(function, "v"), value_type))
    counted = partial_states(np.empty(0, np.int64), None, {"count"})
    assert finalize(merge_states([counted, partial_states([4, 4], None, {"count"})]), "count")[
        0
    ].tolist() == [2]


def test_int64_sums_near_2_62_are_exact() -> None:
    big = 2**62
    values = np.array([big + 1, big - 7, -3, 5, 2**53 + 1, 1], dtype=np.int64)
    keys = np.array([0, 0, 0, 1, 1, 1])
    parts = [partial_states(keys[i : i + 1], values[i : i + 1], {"sum"}) for i in range(6)]
    merged = merge_states(parts[::-1])
    assert finalize(merged, "sum")[0].tolist() == [2 * big - 9, 2**53 + 7]
    averages = finalize(merged, "avg")[0].tolist()
    assert averages[1] == (2**53 + 7) // 3  # an exact quotient above 2**53 stays exact
    assert math.isclose(averages[0], (2 * big - 9) / 3, rel_tol=2**-52)


def test_int64_sum_overflow_is_detected() -> None:
    """An int64 sum beyond int64 is refused by finalize("sum") with its exact value, whether it
    overflowed within one partial or in the merge; its avg is still the correctly rounded mean."""
    values = np.array([2**62, 2**62], dtype=np.int64)
    whole = partial_states(np.zeros(2, np.int64), values, {"sum"})
    halves = [partial_states([0], values[:1], {"sum"}), partial_states([0], values[1:], {"sum"})]
    for states in (whole, merge_states(halves)):
        with pytest.raises(SumOverflow) as caught:
            finalize(states, "sum")
        assert caught.value.value == 2**63
        assert finalize(states, "avg")[0].tolist() == [float(2**62)]
    fine = np.array([2**62, 2**62, -(2**62)], dtype=np.int64)  # wraps on the way, ends in range
    assert finalize(partial_states(np.zeros(3, np.int64), fine, {"sum"}), "sum")[0].tolist() == [2**62]


def test_nan_propagates_to_min_and_max_and_moments() -> None:
    keys = np.array([0, 0, 0, 1, 1])
    values = np.array([3.0, np.nan, 1.0, 2.0, 5.0], dtype=np.float32)
    halves = [
        partial_states(keys[:2], values[:2], ALL_PARTS),
        partial_states(keys[2:], values[2:], ALL_PARTS),
    ]
    states = merge_states(halves)
    for function in ("sum", "avg", "min", "max", "var", "stdev"):
        result, _ = finalize(states, function)
        assert math.isnan(result[0]) and not math.isnan(result[1]), function
    assert finalize(states, "count")[0].tolist() == [3, 2]


def test_infinity_behaves_like_numpy() -> None:
    values = np.array([np.inf, 1.0, -np.inf, np.inf])
    states = partial_states(np.array([0, 0, 1, 1]), values, ALL_PARTS)
    assert finalize(states, "avg")[0][0] == np.inf and math.isnan(finalize(states, "avg")[0][1])
    assert math.isnan(finalize(states, "var")[0][0])
    assert finalize(states, "max")[0].tolist() == [np.inf, np.inf]


def test_bool_sum_avg_min_max() -> None:
    keys = np.array([0, 0, 0, 1, 1])
    values = np.array([True, False, True, False, False])
    states = partial_states(keys, values, needs_for(["sum", "avg", "min", "max"]))
    assert finalize(states, "sum")[0].tolist() == [2, 0]
    assert finalize(states, "avg")[0].tolist() == [2 / 3, 0.0]
    assert finalize(states, "min")[0].tolist() == [False, False]
    assert finalize(states, "max")[0].tolist() == [True, False]
    assert finalize(states, "max")[0].dtype == np.bool_


def test_all_null_group_has_count_zero_and_null_results() -> None:
    keys = np.array([0, 0, 1, 1])
    values = np.array([1, 2, 3, 4], dtype=np.int32)
    valid = np.array([True, True, False, False])
    states = merge_states(
        [
            partial_states(keys, values, ALL_PARTS, valid=valid),
            partial_states([1], values[:1], ALL_PARTS, valid=[False]),
        ]
    )
    assert finalize(states, "count")[0].tolist() == [2, 0]
    for function in ("sum", "avg", "min", "max", "var", "stdev"):
        _, null = finalize(states, function)
        assert null.tolist() == [False, True], function
    assert finalize(states, "min")[0].tolist() == [1, 0]


def test_needs_and_mismatched_merge() -> None:
    assert needs_for("avg") == {"count", "sum"}
    assert needs_for(["var", "max"]) == {"count", "moments", "max"}
    with pytest.raises(ValueError):
        partial_states([1], None, {"sum"})
    with pytest.raises(ValueError):
        partial_states([1], [1.0], {"median"})
    with pytest.raises(ValueError):
        merge_states([partial_states([1], [1.0], {"sum"}), partial_states([1], [1.0], {"min"})])
    with pytest.raises(ValueError):
        merge_states([partial_states([1], [1.0], {"sum"}), partial_states([1], [1], {"sum"})])
    with pytest.raises(ValueError):
        finalize(partial_states([1], [1.0], {"sum"}), "var")


def test_pack_format() -> None:
    states = partial_states(np.array([3, 1]), np.array([1.5, 2.5], dtype=np.float32), ALL_PARTS)
    blob = pack_states(states)
    assert blob[:4] == b"AVPS"
    back = unpack_states(blob)
    assert back.value_type == "float32"
    back_arrays = back.arrays()
    assert list(back_arrays) == list(states.arrays())
    for name, array in states.arrays().items():
        np.testing.assert_array_equal(back_arrays[name], array)
        assert back_arrays[name].dtype == array.dtype
    with pytest.raises(ValueError):
        unpack_states(blob + b"\0")
    with pytest.raises(ValueError):
        unpack_states(b"XXXX" + blob[4:])
