"""Views whose numbers stay exact under add and subtract: float sums equal math.fsum of the current
neighbours to the last bit, integer sums never wrap (a sum that does not fit int64 is a clear error
naming the view, attribute and cell), and min/max under deletes recompute only the cells whose
extreme left. References: math.fsum and Python integers over a dict model of the base array."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

import arrayviews
from arrayviews.model.shapes import L1, Linf
from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate

INF, NAN = float("inf"), float("nan")
COUNT = ViewAggregate("count", None, None, "n")


def float_table(cells: dict[int, float]) -> pa.Table:
    keys = sorted(cells)
    return pa.table({"i": pa.array(keys, pa.int64()), "v": pa.array([cells[k] for k in keys], pa.float64())})


def int_table(cells: dict[int, int], name: str = "k") -> pa.Table:
    keys = sorted(cells)
    return pa.table({"i": pa.array(keys, pa.int64()), name: pa.array([cells[k] for k in keys], pa.int64())})


def rows(view) -> dict[int, dict]:
    return {int(r["i"]): r for r in view.to_pandas().to_dict("records")}


def sum_reference(terms: list[float]) -> float:
    """np.sum's treatment of non-finite values, math.fsum of the finite ones."""
    if any(math.isnan(t) for t in terms) or (INF in terms and -INF in terms):
        return NAN
    if INF in terms or -INF in terms:
        return INF if INF in terms else -INF
    return math.fsum(terms)


def same(got: float, want: float) -> bool:
    return (math.isnan(got) and math.isnan(want)) or got == want


def raised_text(call) -> str:
    """The message of the error ``call`` raises (an error inside a Spark task arrives wrapped)."""
    with pytest.raises(Exception) as caught:  # noqa: B017 - the type depends on where it was raised
        call()
    return str(caught.value)


# -- float sums ------------------------------------------------------------------------------------------


def test_deleting_a_huge_neighbour_leaves_the_small_ones_exactly(db) -> None:
    """The issue's case: neighbours 1e16 and 1.0; after the 1e16 neighbour is deleted the cell holds 1.0
    (it held 0.0 when sums were maintained in float64), and verify() agrees."""
    array = db.create_array("H<v:float64>[i=0:9:5]")
    array.insert(float_table({0: 1e16, 1: 1.0, 2: 1e-10}))
    aggregates = (COUNT, ViewAggregate("sum", "right", "v", "s"), ViewAggregate("avg", "right", "v", "m"))
    view = db.create_view("HV", SimilarityViewDefinition("H", "H", L1(1, 1), aggregates))
    assert rows(view)[1]["s"] == math.fsum([1e16, 1.0, 1e-10])
    array.delete(np.array([[0]]))
    view.refresh("baseline")
    got = rows(view)
    assert got[1]["s"] == math.fsum([1.0, 1e-10]) and got[2]["s"] == math.fsum([1.0, 1e-10])
    assert got[1]["m"] == math.fsum([1.0, 1e-10]) / 2
    assert view.verify()


def test_an_infinity_added_and_deleted_leaves_a_finite_sum(db) -> None:
    array = db.create_array("N<v:float64>[i=0:9:5]")
    array.insert(float_table({0: 2.5, 1: 0.25}))
    aggregates = (ViewAggregate("sum", "right", "v", "s"),)
    view = db.create_view("NV", SimilarityViewDefinition("N", "N", L1(1, 1), aggregates))
    array.insert(float_table({2: INF, 3: NAN}))
    view.refresh("baseline")
    assert rows(view)[1]["s"] == INF and math.isnan(rows(view)[2]["s"])
    array.delete(np.array([[2], [3]]))
    result = view.refresh("baseline")
    assert result.cells_recomputed == 0  # undone by counting, not by recomputing
    assert rows(view)[1]["s"] == 2.75 and view.verify()


# -- integer sums -----------------------------------------------------------------------------------------


def test_an_int64_sum_beyond_int64_is_an_error_naming_view_attribute_and_cell(db) -> None:
    """[2**62, 2**62] summed to a negative number; now the view is not created and says why."""
    array = db.create_array("W<k:int64>[i=0:9:5]")
    array.insert(int_table({0: 2**62, 1: 2**62}))
    aggregates = (ViewAggregate("sum", "right", "k", "total"),)
    text = raised_text(lambda: db.create_view("WV", SimilarityViewDefinition("W", "W", L1(1, 1), aggregates)))
    assert "view WV" in text and "sum(right.k)" in text and "(i=0)" in text and str(2**63) in text
    assert "WV" not in db.arrays()


def test_avg_of_int64_values_whose_sum_leaves_int64(db) -> None:
    """avg(2**63 - 1, 2**63 - 1) is 2**63 - 1 (the wrapped int64 sum gave -1.0); the sum itself
    is kept in 128 bits."""
    array = db.create_array("X<k:int64>[i=0:9:5]")
    array.insert(int_table({0: 2**63 - 1, 1: 2**63 - 1}))
    aggregates = (ViewAggregate("avg", "right", "k", "mean"),)
    view = db.create_view("XV", SimilarityViewDefinition("X", "X", L1(1, 1), aggregates))
    assert rows(view)[0]["mean"] == float(2**63 - 1) and view.verify()


def test_a_failed_refresh_changes_nothing_and_sums_come_back_within_int64(db) -> None:
    """Sums beyond int64 stop the refresh with the first such cell named; after more changes the sums
    fit again (one is exactly 2**63 - 1) and the view is exact."""
    array = db.create_array("Y<k:int64>[i=0:9:5]")
    array.insert(int_table({0: 2**62, 1: -(2**62), 2: 2**62}))
    aggregates = (ViewAggregate("sum", "right", "k", "total"), ViewAggregate("avg", "right", "k", "mean"))
    view = db.create_view("YV", SimilarityViewDefinition("Y", "Y", L1(1, 1), aggregates))
    assert rows(view)[1]["total"] == 2**62
    array.insert(int_table({1: 2**62}), on_conflict="replace")  # sums 2**63, 3 * 2**62, 2**63
    text = raised_text(view.refresh)
    assert "view YV" in text and "sum(right.k)" in text and "(i=0)" in text and str(2**63) in text
    assert rows(view)[1]["total"] == 2**62 and view.version == 1  # the failed refresh changed nothing
    array.insert(int_table({1: -1}), on_conflict="replace")
    view.refresh("baseline")
    got = rows(view)
    assert [got[i]["total"] for i in range(3)] == [2**62 - 1, 2**63 - 1, 2**62 - 1]
    assert got[1]["mean"] == float(2**63 - 1) / 3
    assert view.verify()


def test_left_count_times_value_never_wraps(db) -> None:
    array = db.create_array("L<k:int64>[i=0:9:5]")
    array.insert(int_table({0: 2**62, 1: 5}))
    aggregates = (ViewAggregate("sum", "left", "k", "lsum"),)
    text = raised_text(lambda: db.create_view("LV", SimilarityViewDefinition("L", "L", L1(1, 1), aggregates)))
    assert "view LV" in text and "sum(left.k)" in text and "(i=0)" in text and str(2**63) in text


# -- min/max under deletes -------------------------------------------------------------------------------


def test_min_max_recompute_only_the_cells_whose_extreme_left(db) -> None:
    """One chunk of 20 x 20 cells with min/max over the 3 x 3 box: deleting a cell that is nobody's
    extreme recomputes nothing; deleting the global minimum recomputes at most its 9 neighbours (the
    whole 400-cell chunk was recomputed before)."""
    rng = np.random.default_rng(3)
    values = rng.permutation(400).reshape(20, 20).astype(np.int64)
    array = db.create_array("M<v:int64>[i=0:19:20; j=0:19:20]")
    i, j = np.indices((20, 20))
    array.insert({"i": i.ravel(), "j": j.ravel(), "v": values.ravel()})
    aggregates = (ViewAggregate("min", "right", "v", "lo"), ViewAggregate("max", "right", "v", "hi"))
    view = db.create_view("MV", SimilarityViewDefinition("M", "M", Linf(1, 2), aggregates))

    def expected(present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        padded = np.pad(np.where(present, values, -1), 1, constant_values=-1)
        windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3))
        high = windows.max(axis=(2, 3))
        low = np.where(windows < 0, 10**9, windows).min(axis=(2, 3))
        return low, high

    present = np.ones((20, 20), bool)
    # a cell that is no neighbour's min or max: neither the min nor the max of its 3 x 3 box
    low, high = expected(present)
    quiet = next(
        (a, b)
        for a in range(1, 19)
        for b in range(1, 19)
        if not np.any(low[a - 1 : a + 2, b - 1 : b + 2] == values[a, b])
        and not np.any(high[a - 1 : a + 2, b - 1 : b + 2] == values[a, b])
    )
    array.delete(np.array([quiet]))
    present[quiet] = False
    assert view.refresh("baseline").cells_recomputed == 0
    smallest = tuple(int(x) for x in np.argwhere(values == values[present].min())[0])
    array.delete(np.array([smallest]))
    present[smallest] = False
    result = view.refresh("baseline")
    assert 1 <= result.cells_recomputed <= 8  # the neighbours of the deleted cell that remain
    low, high = expected(present)
    frame = view.to_pandas()
    got_low = np.full((20, 20), -1)
    got_high = np.full((20, 20), -1)
    got_low[frame["i"], frame["j"]] = frame["lo"]
    got_high[frame["i"], frame["j"]] = frame["hi"]
    np.testing.assert_array_equal(got_low[present], low[present])
    np.testing.assert_array_equal(got_high[present], high[present])


# -- end to end: random inserts and deletes of adversarial magnitudes ----------------------------------------

EXTENT = 10
adversarial = st.builds(lambda sign, m: sign * m, st.sampled_from([1.0, -1.0]), st.floats(1e-10, 1e17))
values = st.one_of(adversarial, adversarial, adversarial, st.sampled_from([1e17, 1.5, INF, -INF, NAN]))


@pytest.mark.slow
def test_float_sums_equal_fsum_under_random_inserts_and_deletes(spark, tmp_path) -> None:
    """A state machine of inserts, updates and deletes (several versions between refreshes) on a 1-D
    array with values spanning 1e-10 .. 1e17 (and some inf/nan); after every refresh each cell's sum
    equals math.fsum of its current neighbours (|offset| <= 2) to the last bit, avg equals that over
    the count, and verify() holds."""
    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark)
    names = iter(range(1000))
    aggregates = (COUNT, ViewAggregate("sum", "right", "v", "s"), ViewAggregate("avg", "right", "v", "m"))

    class Machine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            n = next(names)
            self.array = db.create_array(f"E{n}<v:float64>[i=0:{EXTENT - 1}:4]")
            self.cells: dict[int, float] = {}
            self.view = db.create_view(
                f"EV{n}", SimilarityViewDefinition(f"E{n}", f"E{n}", L1(2, 1), aggregates)
            )

        @rule(new=st.dictionaries(st.integers(0, EXTENT - 1), values, min_size=1, max_size=4))
        def write(self, new) -> None:
            self.array.insert(float_table(new), on_conflict="replace")
            self.cells.update(new)

        @precondition(lambda self: self.cells)
        @rule(data=st.data())
        def delete(self, data) -> None:
            gone = data.draw(
                st.lists(st.sampled_from(sorted(self.cells)), min_size=1, max_size=3, unique=True)
            )
            self.array.delete(np.array(gone, dtype=np.int64).reshape(-1, 1))
            for cell in gone:
                del self.cells[cell]

        @rule()
        def refresh(self) -> None:
            self.view.refresh("baseline")
            got = rows(self.view)
            assert set(got) == set(self.cells)
            for cell, row in got.items():
                terms = [self.cells[c] for c in range(cell - 2, cell + 3) if c in self.cells]
                want = sum_reference(terms)
                assert row["n"] == len(terms)
                assert same(row["s"], want), (cell, terms, row["s"], want)
                assert same(row["m"], want / len(terms)), (cell, terms)

        def teardown(self) -> None:
            self.view.refresh("baseline")  # writes may be pending
            assert self.view.verify()

    settings_ = settings(
        max_examples=3,
        stateful_step_count=8,
        deadline=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: each step runs Spark
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    run_state_machine_as_test(Machine, settings=settings_)
