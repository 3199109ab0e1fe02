"""Integer means correctly rounded (kernels/exact_divide.py) against Python's ``int / int``, which
CPython rounds correctly: random, extreme and adversarial (near float64 halfway points) quotients."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.kernels.exact_divide import int_quotient, wide_quotient

INT64 = st.integers(-(2**63), 2**63 - 1)
COUNT = st.one_of(st.integers(1, 10), st.integers(1, 2**20), st.integers(1, 2**63 - 1))


@settings(max_examples=400, deadline=None)
@given(pairs=st.lists(st.tuples(INT64, COUNT), min_size=1, max_size=30))
def test_int_quotient_is_correctly_rounded(pairs):
    totals = np.array([t for t, _ in pairs], np.int64)
    counts = np.array([c for _, c in pairs], np.int64)
    got = int_quotient(totals, counts)
    assert got.tolist() == [t / c for t, c in pairs]


@settings(max_examples=300, deadline=None)
@given(
    mantissa=st.integers(2**52, 2**53 - 1),
    shift=st.integers(1, 9),
    count=st.integers(2, 2**9),
    sign=st.sampled_from([1, -1]),
    nudge=st.integers(-3, 3),
)
def test_near_halfway_points(mantissa, shift, count, sign, nudge):
    """Totals whose quotient lies next to a point halfway between two float64 values (the double
    rounding of q + r / count goes wrong exactly there)."""
    halfway = (2 * mantissa + 1) << shift  # (m + 1/2) * 2**(shift + 1), halfway at that scale
    total = sign * (halfway * count // 2 + nudge)
    if not -(2**63) <= total < 2**63:
        return
    assert int_quotient(np.array([total]), np.array([count])).tolist() == [total / count]


@settings(max_examples=200, deadline=None)
@given(total=st.integers(-(2**127), 2**127 - 1), count=st.integers(1, 2**62))
def test_wide_quotient(total, count):
    high, low = total >> 64, total & (2**64 - 1)
    got = wide_quotient(np.array([high], np.int64), np.array([low], np.uint64), np.array([count]))
    assert got.tolist() == [total / count]


def test_known_double_rounding_case():
    """q + r / c in float64 rounds twice; this mean came out one unit too high before."""
    total, count = 764824518918699309, 17  # q + r / c gave 4.49896775834529e+16
    assert int_quotient(np.array([total]), np.array([count])).tolist() == [total / count]
