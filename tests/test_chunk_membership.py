"""Row membership of chunk lists (views/similarity.py, vectorized for refresh planning) against
Python sets of tuples."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.views.similarity import _rows_among

rows = st.integers(1, 3).flatmap(
    lambda d: st.tuples(
        st.lists(st.tuples(*[st.integers(-3, 3)] * d), max_size=30),
        st.lists(st.tuples(*[st.integers(-3, 3)] * d), max_size=30),
        st.just(d),
    )
)


@settings(max_examples=150, deadline=None)
@given(rows)
def test_rows_among_matches_python_sets(case) -> None:
    asked, among, d = case
    got = _rows_among(np.array(asked, dtype=np.int64).reshape(-1, d), np.array(among, dtype=np.int64).reshape(-1, d))
    held = set(among)
    assert got.tolist() == [row in held for row in asked]
