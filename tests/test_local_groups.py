"""The in-process engine's grouping by several keys against a plain-Python dictionary of rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.execution.local_engine import _groups


def _reference(rows: list[tuple], keys: list[int]) -> dict[tuple, list[tuple]]:
    groups: dict[tuple, list[tuple]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in keys), []).append(row)
    return {key: groups[key] for key in sorted(groups)}


def _check(rows: list[tuple], names: list[str], keys: list[int]) -> None:
    table = pa.table({name: [row[j] for row in rows] for j, name in enumerate(names)})
    got = _groups(table, [names[k] for k in keys])
    expected = _reference(rows, keys)
    assert list(got) == list(expected)  # same groups, in lexicographic key order
    for key, part in got.items():
        assert [tuple(r.values()) for r in part.to_pylist()] == expected[key]  # rows in input order


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-3, 3), st.sampled_from(["a", "b", "c"]), st.integers(-(2**62), 2**62), st.integers()),
        max_size=40,
    ),
    st.lists(st.integers(0, 2), min_size=1, max_size=3, unique=True),
)
def test_groups_match_a_dictionary_of_rows(rows, keys) -> None:
    rows = [(a, b, c, i) for i, (a, b, c, _) in enumerate(rows)]
    _check(rows, ["a", "b", "c", "i"], keys)


def test_many_wide_keys_keep_exact_group_codes() -> None:
    # 8 key columns of 600 distinct values each: 600**8 > 2**62, so the combined code is renumbered
    rng = np.random.default_rng(3)
    n = 600
    columns = [rng.permutation(n).astype(np.int64) * (2**40) for _ in range(8)]
    columns[7][:300] = columns[7][300:]  # some rows equal in the last key only
    rows = [tuple(int(c[i]) for c in columns) + (i,) for i in range(n)]
    rows += [rows[5][:8] + (n,)]  # one group of two rows
    _check(rows, [f"k{j}" for j in range(8)] + ["i"], list(range(8)))


def test_no_keys_is_one_group() -> None:
    table = pa.table({"v": [3, 1, 2]})
    assert list(_groups(table, [])) == [()]
    assert _groups(table, [])[()].column("v").to_pylist() == [3, 1, 2]
