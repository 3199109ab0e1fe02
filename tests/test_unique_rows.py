"""kernels/rows.unique_rows against numpy's np.unique(axis=0): the same rows, order and inverse, for
any int64 coordinates (negative, huge spans that cannot be folded, one column, empty)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from arrayviews.kernels.rows import unique_rows

coordinates = st.one_of(st.integers(-5, 5), st.integers(-(2**40), 2**40), st.integers(-(2**63), 2**63 - 1))


@settings(max_examples=300, deadline=None)
@given(
    rows=st.integers(1, 4).flatmap(
        lambda d: hnp.arrays(np.int64, st.tuples(st.integers(0, 40), st.just(d)), elements=coordinates)
    )
)
def test_unique_rows_is_numpys(rows):
    expected, inverse = np.unique(rows, axis=0, return_inverse=True)
    got, got_inverse = unique_rows(rows, return_inverse=True)
    assert got.dtype == np.int64 and np.array_equal(got, expected.reshape(-1, rows.shape[1]))
    assert np.array_equal(got_inverse, inverse.reshape(-1))
    assert np.array_equal(unique_rows(rows), expected.reshape(-1, rows.shape[1]))
