"""Versions: one version per committed change with its cell counts, time travel against a model,
read-only old versions, compaction and expiry (content kept, files reduced or deleted)."""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from arrayviews.model.errors import ConflictError, NotFoundError, ValidationError

SCHEMA = "A<r:int64, s:float64>[i=1:12:4; j=1:10:5]"
COLUMNS = ["i", "j", "r", "s"]
Model = dict[tuple[int, int], tuple[int, float]]


def frame(model: Model) -> pd.DataFrame:
    rows = sorted((i, j, r, s) for (i, j), (r, s) in model.items())
    return pd.DataFrame(rows, columns=COLUMNS).astype(
        {"i": np.int64, "j": np.int64, "r": np.int64, "s": np.float64}
    )


def batch(cells: list[tuple[int, int]], r: int, s: float | None = None) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "i": np.array([c[0] for c in cells], np.int64),
            "j": np.array([c[1] for c in cells], np.int64),
            "r": np.full(len(cells), r, np.int64),
            "s": np.full(len(cells), float(r) / 4 if s is None else s),
        }
    )


def assert_content(array, model: Model) -> None:
    pd.testing.assert_frame_equal(array.to_pandas(), frame(model))
    assert array.count() == len(model)


def data_folder_files(array) -> set[str]:
    folder = Path(urlparse(array.source.table.data_directory).path)
    return {"file://" + str(p) for p in folder.iterdir()} if folder.exists() else set()


def apply(model: Model, cells: pd.DataFrame) -> None:
    for row in cells.itertuples():
        model[(row.i, row.j)] = (row.r, row.s)


# -- version numbers and counts -----------------------------------------------------------------------
def test_each_change_adds_one_version_with_counts(db, tmp_path: Path) -> None:
    array = db.create_array(SCHEMA)
    assert array.version == 0 and array.versions().empty
    model: Model = {}
    expected_rows: list[tuple[int, str, int, int, int]] = []

    def check(result, operation: str, added: int, removed: int) -> None:
        version = len(expected_rows) + 1
        expected_rows.append((version, operation, added, removed, len(model)))
        assert result.committed and result.version == version == array.version
        assert (result.operation, result.cells_added, result.cells_removed) == (operation, added, removed)
        table = array.versions()
        got = list(
            table[["version", "operation", "cells_added", "cells_removed", "cells_total"]].itertuples(
                index=False, name=None
            )
        )
        assert got == expected_rows
        assert table["time"].is_monotonic_increasing and table["snapshot_id"].is_unique
        assert_content(array, model)

    first = batch([(1, 1), (2, 3), (5, 6), (12, 10), (7, 7)], 1)
    apply(model, first)
    check(array.insert(first), "insert", 5, 0)

    mixed = batch([(2, 3), (5, 6), (9, 1)], 2)  # two existing, one new
    apply(model, mixed)
    check(array.insert(mixed, on_conflict="replace"), "insert", 3, 2)

    for cell in [(1, 1), (9, 1)]:
        del model[cell]
    check(array.delete(pd.DataFrame({"i": [1, 9, 3], "j": [1, 1, 3]})), "delete", 0, 2)

    dense = np.arange(6, dtype=np.int64).reshape(2, 3)
    result = array.write_dense({"r": dense, "s": dense * 0.5}, origin=(10, 2))
    for a in range(2):
        for b in range(3):
            model[(10 + a, 2 + b)] = (int(dense[a, b]), dense[a, b] * 0.5)
    check(result, "write_dense", 6, 0)

    path = tmp_path / "more.csv"
    loaded = batch([(3, 9), (4, 10)], 3)
    loaded.to_csv(path, index=False)
    apply(model, loaded)
    check(array.load(str(path)), "load", 2, 0)

    removed = [c for c in model if 10 <= c[0] <= 12]
    for cell in removed:
        del model[cell]
    check(array.delete(box={"i": (10, 12)}), "delete", 0, len(removed))

    check(array.compact(), "compact", 0, 0)

    # writes that change nothing commit nothing
    for result in [
        array.insert(batch([], 0)),
        array.delete(pd.DataFrame({"i": [1], "j": [1]})),
        array.delete(box={"i": (10, 12)}),
    ]:
        assert not result.committed and result.version == len(expected_rows)
    assert len(array.versions()) == len(expected_rows)


def test_time_travel_reads_every_old_version(db) -> None:
    array = db.create_array(SCHEMA)
    model: Model = {}
    snapshots: dict[int, pd.DataFrame] = {0: frame(model)}
    rng = np.random.default_rng(11)
    all_cells = [(i, j) for i in range(1, 13) for j in range(1, 11)]
    for step in range(1, 9):
        kind = ["insert", "replace", "delete", "insert", "delete-box", "replace", "insert", "delete"][
            step - 1
        ]
        if kind == "insert":
            free = [c for c in all_cells if c not in model]
            cells = [free[k] for k in rng.choice(len(free), size=10, replace=False)]
            array.insert(batch(cells, step))
            apply(model, batch(cells, step))
        elif kind == "replace":
            cells = [all_cells[k] for k in rng.choice(len(all_cells), size=15, replace=False)]
            array.insert(batch(cells, step), on_conflict="replace")
            apply(model, batch(cells, step))
        elif kind == "delete":
            cells = [all_cells[k] for k in rng.choice(len(all_cells), size=20, replace=False)]
            array.delete(pd.DataFrame(cells, columns=["i", "j"]))
            for cell in cells:
                model.pop(cell, None)
        else:
            array.delete(box={"i": (3, 6), "j": (4, 8)})
            for cell in [c for c in model if 3 <= c[0] <= 6 and 4 <= c[1] <= 8]:
                del model[cell]
        assert array.version == step
        snapshots[step] = frame(model)
    for version, expected in snapshots.items():
        old = array.at_version(version)
        assert old.version == version
        pd.testing.assert_frame_equal(old.to_pandas(), expected, obj=f"version {version}")
        assert old.count() == len(expected)
        dense = old.to_numpy("r", fill=-999)
        want = np.full((12, 10), -999, np.int64)
        want[expected["i"] - 1, expected["j"] - 1] = expected["r"]
        np.testing.assert_array_equal(dense, want)
    # a pinned handle stays at its version while the array moves on
    pinned = array.at_version(3)
    array.insert(batch([c for c in all_cells if c not in model][:2], 99))
    pd.testing.assert_frame_equal(pinned.to_pandas(), snapshots[3])
    assert array.version == 9


def test_unknown_version_is_not_found(db) -> None:
    array = db.create_array(SCHEMA)
    array.insert(batch([(1, 1)], 1))
    for version in (2, 7, -1):
        with pytest.raises(NotFoundError, match=f"no version {version}"):
            array.at_version(version)


def test_old_versions_are_read_only(db) -> None:
    array = db.create_array(SCHEMA)
    array.insert(batch([(1, 1), (2, 2)], 1))
    array.insert(batch([(3, 3)], 2))
    old = array.at_version(1)
    writes = [
        lambda: old.insert(batch([(4, 4)], 3)),
        lambda: old.insert(batch([(1, 1)], 3), on_conflict="replace"),
        lambda: old.write_dense({"r": np.ones((1, 1), np.int64), "s": np.ones((1, 1))}, origin=(5, 5)),
        lambda: old.delete(pd.DataFrame({"i": [1], "j": [1]})),
        lambda: old.delete(box={"i": (1, 12)}),
        lambda: old.compact(),
        lambda: old.expire_versions(),
    ]
    for write in writes:
        with pytest.raises(ValidationError, match="version 1"):
            write()
    assert array.version == 2 and len(array.versions()) == 2
    assert_content(array, {(1, 1): (1, 0.25), (2, 2): (1, 0.25), (3, 3): (2, 0.5)})
    assert old.count() == 2


# -- compaction ---------------------------------------------------------------------------------------
def test_compact_merges_small_files_and_keeps_content(db) -> None:
    array = db.create_array(SCHEMA)
    model: Model = {}
    cells = [(i, j) for i in range(1, 13) for j in range(1, 11)]
    rng = np.random.default_rng(12)
    order = rng.permutation(len(cells))
    for step in range(20):
        chosen = [cells[k] for k in order[step * 5 : step * 5 + 5]]  # spread over several chunks
        array.insert(batch(chosen, step))
        apply(model, batch(chosen, step))
    files_before = len(array.source.file_uris())
    assert files_before >= 20
    chunks_before = array.chunks()
    content_before = array.to_pandas()
    result = array.compact()
    assert (result.operation, result.version, result.committed) == ("compact", 21, True)
    assert (result.cells_added, result.cells_removed) == (0, 0)
    last = array.versions().iloc[-1]
    assert (last["version"], last["operation"], last["cells_total"]) == (21, "compact", 100)
    files_after = len(array.source.file_uris())
    assert files_after < files_before and files_after <= 2
    pd.testing.assert_frame_equal(array.to_pandas(), content_before)
    assert_content(array, model)
    chunks = array.chunks()
    assert (chunks["fragments"] == 1).all()
    pd.testing.assert_series_equal(chunks["cells"], chunks_before["cells"])
    pd.testing.assert_frame_equal(array.at_version(20).to_pandas(), content_before)
    again = array.compact()
    assert not again.committed and "nothing to compact" in str(again)


# -- expiry -------------------------------------------------------------------------------------------
def test_expire_versions_drops_old_versions_and_their_files(db) -> None:
    array = db.create_array(SCHEMA)
    model: Model = {}
    first = batch([(1, 1), (2, 2), (6, 7)], 1)
    array.insert(first)
    apply(model, first)
    replaced = batch([(1, 1), (11, 9)], 2)
    array.insert(replaced, on_conflict="replace")
    apply(model, replaced)
    array.delete(pd.DataFrame({"i": [2], "j": [2]}))
    del model[(2, 2)]
    array.insert(batch([(12, 10)], 4))
    apply(model, batch([(12, 10)], 4))
    array.compact()
    assert array.version == 5
    content = array.to_pandas()
    assert data_folder_files(array) > set(array.source.file_uris())

    # an age cut-off older than every version expires nothing
    kept = array.expire_versions(dt.timedelta(days=1))
    assert kept.versions == [] and len(array.versions()) == 5

    result = array.expire_versions()
    assert result.versions == [1, 2, 3, 4]
    table = array.versions()
    assert table["version"].tolist() == [5] and table["operation"].tolist() == ["compact"]
    assert array.version == 5
    pd.testing.assert_frame_equal(array.to_pandas(), content)
    assert_content(array, model)
    for version in (1, 2, 3, 4):
        with pytest.raises(NotFoundError):
            array.at_version(version)
    # only the files of the current version are left in the warehouse folder
    assert data_folder_files(array) == set(array.source.file_uris())
    # the array keeps working and numbering continues
    assert array.insert(batch([(3, 3)], 6)).version == 6


def test_expire_versions_older_than_a_time_keeps_newer_versions(db) -> None:
    array = db.create_array(SCHEMA)
    snapshots = {}
    model: Model = {}
    for step, cells in enumerate([[(1, 1)], [(2, 2), (3, 3)], [(4, 4)], [(5, 5)]], start=1):
        array.insert(batch(cells, step))
        apply(model, batch(cells, step))
        snapshots[step] = frame(model)
    times = array.versions().set_index("version")["time"]
    result = array.expire_versions(times[3].to_pydatetime())
    assert result.versions == [1, 2]
    assert array.versions()["version"].tolist() == [3, 4]
    for version in (3, 4):
        pd.testing.assert_frame_equal(array.at_version(version).to_pandas(), snapshots[version])
    with pytest.raises(NotFoundError):
        array.at_version(2)
    # version 1's file is still referenced by versions 3 and 4: nothing of theirs was deleted
    assert set(array.source.file_uris()) <= data_folder_files(array)


# -- random sequences against a model -------------------------------------------------------------------
CELLS = st.tuples(st.integers(0, 11), st.integers(0, 9))
_names = itertools.count()


@pytest.mark.slow
def test_random_write_sequences_match_a_model(spark, tmp_path: Path) -> None:
    import arrayviews

    db = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark)

    class Writes(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.array = db.create_array(f"H{next(_names)}<v:float64>[i=0:11:4; j=0:9:5]")
            self.model: dict[tuple[int, int], float] = {}
            self.log: list[tuple[str, int, int]] = []  # operation, cells added, cells removed

        def _frame(self, cells, value: float) -> pd.DataFrame:
            cells = sorted(cells)
            return pd.DataFrame(
                {"i": [c[0] for c in cells], "j": [c[1] for c in cells], "v": [value] * len(cells)}
            ).astype({"i": np.int64, "j": np.int64, "v": np.float64})

        @rule(cells=st.sets(CELLS, min_size=1, max_size=12), value=st.integers(-50, 50))
        def insert(self, cells, value) -> None:
            if any(c in self.model for c in cells):
                with pytest.raises(ConflictError):
                    self.array.insert(self._frame(cells, value))
                return
            self.array.insert(self._frame(cells, value))
            self.model.update(dict.fromkeys(cells, float(value)))
            self.log.append(("insert", len(cells), 0))

        @initialize(cells=st.sets(CELLS, min_size=5, max_size=30), value=st.integers(-50, 50))
        def start(self, cells, value) -> None:
            self.insert(cells, value)

        def _some_existing(self, data, extra_max: int) -> set[tuple[int, int]]:
            """A few cells that exist (if any) and a few random ones."""
            existing = set()
            if self.model:
                existing = data.draw(st.sets(st.sampled_from(sorted(self.model)), min_size=1, max_size=6))
            return existing | data.draw(st.sets(CELLS, min_size=0 if existing else 1, max_size=extra_max))

        @rule(data=st.data(), value=st.integers(-50, 50))
        def replace(self, data, value) -> None:
            cells = self._some_existing(data, 6)
            overlap = sum(c in self.model for c in cells)
            result = self.array.insert(self._frame(cells, value), on_conflict="replace")
            assert (result.cells_added, result.cells_removed) == (len(cells), overlap)
            self.model.update(dict.fromkeys(cells, float(value)))
            self.log.append(("insert", len(cells), overlap))

        @rule(data=st.data())
        def delete(self, data) -> None:
            cells = self._some_existing(data, 3)
            result = self.array.delete(pd.DataFrame(sorted(cells), columns=["i", "j"]))
            gone = [c for c in cells if c in self.model]
            assert result.committed == bool(gone) and result.cells_removed == len(gone)
            for cell in gone:
                del self.model[cell]
            if gone:
                self.log.append(("delete", 0, len(gone)))

        @rule(low=CELLS, size=st.tuples(st.integers(1, 6), st.integers(1, 6)))
        def delete_box(self, low, size) -> None:
            high = (low[0] + size[0] - 1, low[1] + size[1] - 1)
            result = self.array.delete(box={"i": (low[0], high[0]), "j": (low[1], high[1])})
            gone = [c for c in self.model if low[0] <= c[0] <= high[0] and low[1] <= c[1] <= high[1]]
            assert result.committed == bool(gone) and result.cells_removed == len(gone)
            for cell in gone:
                del self.model[cell]
            if gone:
                self.log.append(("delete", 0, len(gone)))

        @rule()
        def compact(self) -> None:
            files = len(self.array.source.file_uris())
            result = self.array.compact()
            assert result.committed == (files >= 2)
            if result.committed:
                self.log.append(("compact", 0, 0))
                assert len(self.array.source.file_uris()) <= files

        @invariant()
        def matches_model(self) -> None:
            cells = sorted(self.model.items())
            expected = pd.DataFrame(
                {"i": [c[0][0] for c in cells], "j": [c[0][1] for c in cells], "v": [c[1] for c in cells]}
            ).astype({"i": np.int64, "j": np.int64, "v": np.float64})
            pd.testing.assert_frame_equal(self.array.to_pandas(), expected)
            table = self.array.versions()
            assert self.array.version == len(self.log)
            assert table["version"].tolist() == list(range(1, len(self.log) + 1))
            got = list(
                table[["operation", "cells_added", "cells_removed"]].itertuples(index=False, name=None)
            )
            assert got == self.log
            if len(table):
                assert table["cells_total"].iloc[-1] == len(self.model)

    run_state_machine_as_test(
        Writes,
        settings=settings(
            max_examples=5,
            stateful_step_count=6,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        ),
    )
