"""A stateful property test: random sequences of inserts, deletes, updates and refreshes on one small
array with a COUNT(*) + SUM + MIN view, against a model that recomputes the view from scratch with
numpy after every refresh."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import arrayviews
from arrayviews.model.shapes import Linf
from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate

EXTENT = 8
AGGREGATES = (
    ViewAggregate("count", None, None, "cnt"),
    ViewAggregate("sum", "right", "v", "total"),
    ViewAggregate("min", "right", "v", "low"),
)
coordinates = st.tuples(st.integers(0, EXTENT - 1), st.integers(0, EXTENT - 1))
values = st.integers(-100, 100)


def expected_view(cells: dict[tuple[int, int], int]) -> list[dict]:
    """COUNT(*), SUM(v), MIN(v) over the 3x3 box Linf(1) around every present cell, on a dense grid."""
    present = np.zeros((EXTENT + 2, EXTENT + 2), dtype=bool)
    value = np.zeros((EXTENT + 2, EXTENT + 2), dtype=np.int64)
    for (i, j), v in cells.items():
        present[i + 1, j + 1] = True
        value[i + 1, j + 1] = v
    count = np.zeros((EXTENT, EXTENT), dtype=np.int64)
    total = np.zeros((EXTENT, EXTENT), dtype=np.int64)
    low = np.full((EXTENT, EXTENT), np.iinfo(np.int64).max)
    for di, dj in itertools.product(range(3), repeat=2):
        window = (slice(di, di + EXTENT), slice(dj, dj + EXTENT))
        count += present[window]
        total += np.where(present[window], value[window], 0)
        low = np.where(present[window], np.minimum(low, value[window]), low)
    return [
        {"i": i, "j": j, "cnt": int(count[i, j]), "total": int(total[i, j]), "low": int(low[i, j])}
        for i, j in sorted(cells)
    ]


def batch(cells: dict[tuple[int, int], int]) -> pa.Table:
    coords = sorted(cells)
    return pa.table(
        {
            "i": pa.array([c[0] for c in coords], pa.int64()),
            "j": pa.array([c[1] for c in coords], pa.int64()),
            "v": pa.array([cells[c] for c in coords], pa.int64()),
        }
    )


@pytest.mark.slow
def test_view_state_machine(spark, tmp_path) -> None:
    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark)
    names = itertools.count()

    class ViewMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            n = next(names)
            self.array = db.create_array(f"S{n}<v:int64>[i=0:{EXTENT - 1}:3; j=0:{EXTENT - 1}:3]")
            self.cells: dict[tuple[int, int], int] = {}
            self.pending = False  # a write committed since the last refresh
            self.view = None

        @initialize(first=st.dictionaries(coordinates, values, max_size=24))
        def create(self, first) -> None:
            """The view over the array's first cells (possibly none)."""
            if first:
                self.array.insert(batch(first))
                self.cells.update(first)
            definition = SimilarityViewDefinition(self.array.name, self.array.name, Linf(1), AGGREGATES)
            self.view = db.create_view(f"V{self.array.name}", definition)
            assert self.view.to_arrow().to_pylist() == expected_view(self.cells)

        @rule(new=st.dictionaries(coordinates, values, min_size=1, max_size=8))
        def insert(self, new) -> None:
            new = {c: v for c, v in new.items() if c not in self.cells}
            if new:
                assert self.array.insert(batch(new)).committed
                self.cells.update(new)
                self.pending = True

        @precondition(lambda self: self.cells)
        @rule(data=st.data())
        def delete(self, data) -> None:
            chosen = data.draw(
                st.lists(st.sampled_from(sorted(self.cells)), min_size=1, max_size=5, unique=True)
            )
            assert self.array.delete(np.array(chosen, dtype=np.int64)).committed
            for c in chosen:
                del self.cells[c]
            self.pending = True

        @precondition(lambda self: self.cells)
        @rule(data=st.data())
        def update(self, data) -> None:
            chosen = data.draw(
                st.lists(st.sampled_from(sorted(self.cells)), min_size=1, max_size=5, unique=True)
            )
            new = {c: data.draw(values) for c in chosen}
            extra = data.draw(st.dictionaries(coordinates, values, max_size=2))  # replace may insert too
            new.update(extra)
            result = self.array.insert(batch(new), on_conflict="replace")
            if any(self.cells.get(c) != v for c, v in new.items()):
                assert result.committed
                self.pending = True
            self.cells.update(new)
            self.pending = self.pending or result.committed

        @precondition(lambda self: self.pending)
        @rule(strategy=st.sampled_from(["baseline", "baseline", "baseline", "full"]))
        def refresh(self, strategy) -> None:
            versions = len(self.view.versions())
            assert self.view.refresh(strategy).committed
            assert len(self.view.versions()) == versions + 1
            self.pending = False
            assert self.view.to_arrow().to_pylist() == expected_view(self.cells)
            # nothing pending now: returns at once, commits nothing
            assert not self.view.refresh("baseline").committed
            assert len(self.view.versions()) == versions + 1

        @invariant()
        def status_tracks_writes(self) -> None:
            if self.view is not None:
                assert self.view.status()["pending"] == self.pending

        def teardown(self) -> None:
            if self.view is not None and self.pending:
                self.refresh("baseline")

    run_state_machine_as_test(
        ViewMachine,
        settings=settings(
            max_examples=4,
            stateful_step_count=8,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )
