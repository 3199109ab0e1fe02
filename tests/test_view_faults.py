"""Crash safety of views: a fault injected at any checkpoint of a refresh leaves the view exactly as it
was (versions, content, pending status, data folder) and the next refresh completes correctly; a fault
while creating a view leaves no view and no files behind."""

from __future__ import annotations

import itertools
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pyarrow as pa
import pytest

import arrayviews
from arrayviews.model.errors import NotFoundError
from arrayviews.model.faults import InjectedFault, inject
from arrayviews.model.shapes import L1
from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate, WindowViewDefinition

SIMILARITY_CHECKPOINTS = (
    "refresh.start",
    "refresh.delta",
    "refresh.planned",
    "refresh.computed",
    "refresh.written",
    "refresh.before-commit",
)
AGGREGATES = (
    ViewAggregate("count", None, None, "cnt"),
    ViewAggregate("sum", "right", "v", "total"),
    ViewAggregate("min", "right", "v", "low"),
)
EXTENT = 16


class Model:
    """The base array's cells, kept alongside the writes; the reference view is computed from it."""

    def __init__(self, array) -> None:
        self.array = array
        self.cells: dict[tuple[int, int], int] = {}
        self.rng = np.random.default_rng(2024)

    def insert(self, count: int) -> None:
        free = [(i, j) for i in range(EXTENT) for j in range(EXTENT) if (i, j) not in self.cells]
        chosen = [free[k] for k in self.rng.choice(len(free), count, replace=False)]
        new = {c: int(self.rng.integers(-20, 21)) for c in chosen}
        self.array.insert(
            pa.table(
                {
                    "i": pa.array([c[0] for c in new], pa.int64()),
                    "j": pa.array([c[1] for c in new], pa.int64()),
                    "v": pa.array(list(new.values()), pa.int64()),
                }
            )
        )
        self.cells.update(new)

    def delete(self, count: int) -> None:
        present = sorted(self.cells)
        chosen = [present[k] for k in self.rng.choice(len(present), count, replace=False)]
        self.array.delete(np.array(chosen, dtype=np.int64))
        for c in chosen:
            del self.cells[c]

    def expected_view(self) -> list[dict]:
        """COUNT(*), SUM(v), MIN(v) over the cross L1(1) around every cell (brute force)."""
        rows = []
        for (i, j), _ in sorted(self.cells.items()):
            near = [
                self.cells[c]
                for c in ((i, j), (i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1))
                if c in self.cells
            ]
            rows.append({"i": i, "j": j, "cnt": len(near), "total": sum(near), "low": min(near)})
        return rows


def folder(view) -> Path:
    return Path(urlparse(view.source.table.data_directory).path)


def listing(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


def snapshot(view):
    return view.versions(), view.to_arrow().to_pylist(), view.status(), listing(folder(view))


def assert_unchanged(view, before) -> None:
    versions, content, status, files = before
    assert view.versions().equals(versions)
    assert view.to_arrow().to_pylist() == content
    assert view.status() == status and status["pending"]
    assert listing(folder(view)) == files, "files were left in the view's data folder"


@pytest.fixture(scope="module")
def setup(spark, tmp_path_factory):
    """One warehouse, base array and view for every checkpoint (each test brings its own batch)."""
    db = arrayviews.connect(str(tmp_path_factory.mktemp("view_faults") / "warehouse"), spark=spark)
    model = Model(db.create_array("A<v:int64>[i=0:15:4; j=0:15:4]"))
    model.insert(60)
    view = db.create_view("V", SimilarityViewDefinition("A", "A", L1(1), AGGREGATES))
    assert view.to_arrow().to_pylist() == model.expected_view()
    return db, model, view


@pytest.mark.slow
@pytest.mark.parametrize(
    ("checkpoint", "strategy", "deletes"),
    [(c, "baseline", k % 2 == 1) for k, c in enumerate(SIMILARITY_CHECKPOINTS)]
    + [("refresh.computed", "full", True), ("refresh.before-commit", "full", False)],
)
def test_fault_during_refresh(setup, checkpoint: str, strategy: str, deletes: bool) -> None:
    db, model, view = setup
    model.insert(6)  # a batch of inserts (maintained by adding) ...
    if deletes:
        model.delete(5)  # ... or with deletes (min is recomputed)
    before = snapshot(view)
    with inject(checkpoint), pytest.raises(InjectedFault):
        view.refresh(strategy)
    assert_unchanged(view, before)
    assert_unchanged(db.view("V"), before)  # a fresh handle sees the same
    result = view.refresh(strategy)
    assert result.committed
    assert len(view.versions()) == len(before[0]) + 1
    assert view.status()["pending"] is False
    assert view.to_arrow().to_pylist() == model.expected_view()
    assert view.verify() is True


@pytest.mark.slow
@pytest.mark.parametrize("checkpoint", ["refresh.delta", "refresh.written"])
def test_fault_during_window_view_refresh(setup, checkpoint: str) -> None:
    db, model, _ = setup
    if "W" not in db.views():
        db.create_view("W", WindowViewDefinition("A", (1, 1), (1, 1), ("sum(v)", "count(*)")))
    view = db.view("W")
    model.insert(3)
    before = snapshot(view)
    with inject(checkpoint), pytest.raises(InjectedFault):
        view.refresh("baseline")
    assert_unchanged(view, before)
    assert view.refresh("baseline").committed
    assert view.verify() is True


CREATE_CHECKPOINTS = ("refresh.start", "refresh.computed", "refresh.written", "refresh.before-commit")
_names = itertools.count()


def warehouse_files(db) -> set[str]:
    root = Path(urlparse(db.warehouse.location).path)
    return {
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and not p.name.endswith((".db", ".db-journal", ".sqlite"))
    }


@pytest.mark.slow
def test_fault_during_create_view_leaves_nothing(setup) -> None:
    db, model, _ = setup
    definition = SimilarityViewDefinition("A", "A", L1(1), AGGREGATES)
    for checkpoint in CREATE_CHECKPOINTS:
        name = f"X{next(_names)}"
        views, files = db.views(), warehouse_files(db)
        with inject(checkpoint), pytest.raises(InjectedFault):
            db.create_view(name, definition)
        assert db.views() == views, checkpoint
        assert not db.warehouse.exists(name), checkpoint
        with pytest.raises(NotFoundError):
            db.view(name)
        assert warehouse_files(db) == files, f"files left behind by a create failing at {checkpoint}"
    # the same name can then be used
    view = db.create_view(name, definition)
    assert view.to_arrow().to_pylist() == model.expected_view()
    db.drop_view(name)
    assert name not in db.views()
    assert warehouse_files(db) == files, "drop_view left files behind"
