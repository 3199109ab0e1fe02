"""Serializable commits: a write or refresh whose base moved between planning and commit is
re-validated by arrayviews (conflicts, version number, cell totals) and re-planned or rejected,
never rebased blindly; a refresh reads its bases at one pinned snapshot and records exactly it.

Other writers are forced in at the worst instants, deterministically: inside the Iceberg commit
call (after arrayviews' own checks, before the catalog swap) and at fault checkpoints."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd
import pytest
from pyiceberg.table import StagedTable, Table

import arrayviews
from arrayviews.model.errors import CommitConflictError, ConflictError
from arrayviews.model.faults import interleave
from arrayviews.model.shapes import L1
from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate

SCHEMA = "A<v:int64>[i=0:15:4; j=0:15:4]"
AGGREGATES = (ViewAggregate("count", None, None, "cnt"), ViewAggregate("sum", "right", "v", "total"))


def cells(pairs: list[tuple[int, int]], value: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "i": np.array([p[0] for p in pairs], np.int64),
            "j": np.array([p[1] for p in pairs], np.int64),
            "v": np.full(len(pairs), value, np.int64),
        }
    )


@contextlib.contextmanager
def inside_next_iceberg_commit(action: Callable[[], None]) -> Iterator[None]:
    """The next Iceberg commit of an existing table by this thread first runs ``action`` (another
    writer committing after arrayviews checked the table but before the catalog swap). Both commit
    paths, pyiceberg's transaction and storage/append_commit.py, hand their updates to the catalog
    through ``Table._do_commit``; a table being created is a StagedTable and is passed over."""
    original = Table._do_commit
    pending = {threading.get_ident(): action}

    def patched(self, updates, requirements):
        run = None if isinstance(self, StagedTable) else pending.pop(threading.get_ident(), None)
        if run is not None:
            run()
        return original(self, updates, requirements)

    Table._do_commit = patched
    try:
        yield
    finally:
        Table._do_commit = original


def stored_cells(array) -> list[tuple[int, int, int]]:
    frame = array.to_pandas()
    return sorted(zip(frame.i.tolist(), frame.j.tolist(), frame.v.tolist(), strict=True))


def assert_versions_sound(array, expected_total: int) -> None:
    versions = array.versions()
    numbers = versions["version"].tolist()
    assert numbers == list(range(1, len(numbers) + 1)), f"version numbers reused or skipped: {numbers}"
    running = 0
    for row in versions.itertuples():
        running += row.cells_added - row.cells_removed
        assert row.cells_total == running, (
            f"version {row.version}: cells_total {row.cells_total} != {running}"
        )
    assert running == expected_total == array.count()


def test_same_cells_inserted_inside_another_commit_are_a_conflict(db) -> None:
    array = db.create_array(SCHEMA)
    array.insert(cells([(0, 0)], 1))
    mine, theirs = cells([(1, 1), (2, 2), (9, 9)], 10), cells([(2, 2), (9, 9), (3, 3)], 20)
    with (
        inside_next_iceberg_commit(lambda: db.array("A").insert(theirs)),
        pytest.raises(ConflictError, match="already exist"),
    ):
        array.insert(mine)
    assert stored_cells(array) == [(0, 0, 1), (2, 2, 20), (3, 3, 20), (9, 9, 20)]
    assert_versions_sound(array, 4)


def test_disjoint_cells_inserted_inside_another_commit_both_land_with_their_own_versions(db) -> None:
    array = db.create_array(SCHEMA)
    array.insert(cells([(0, 0)], 1))
    mine, theirs = cells([(1, 1), (5, 5)], 10), cells([(1, 2), (5, 6), (14, 14)], 20)
    with inside_next_iceberg_commit(lambda: db.array("A").insert(theirs)):
        result = array.insert(mine)
    assert result.committed and result.version == 3 and result.attempts == 2
    assert stored_cells(array) == sorted(
        [(0, 0, 1), (1, 1, 10), (5, 5, 10), (1, 2, 20), (5, 6, 20), (14, 14, 20)]
    )
    assert_versions_sound(array, 6)
    assert array.versions()["cells_added"].tolist() == [1, 3, 2]


def test_replace_inside_another_commit_replaces_the_newer_cells(db) -> None:
    array = db.create_array(SCHEMA)
    array.insert(cells([(0, 0), (4, 4)], 1))
    with inside_next_iceberg_commit(lambda: db.array("A").insert(cells([(4, 4)], 2), on_conflict="replace")):
        array.insert(cells([(4, 4), (8, 8)], 3), on_conflict="replace")
    assert stored_cells(array) == [(0, 0, 1), (4, 4, 3), (8, 8, 3)]
    assert_versions_sound(array, 3)


def test_delete_inside_another_commit_sees_the_cells_written_meanwhile(db) -> None:
    array = db.create_array(SCHEMA)
    array.insert(cells([(0, 0), (1, 1), (2, 2)], 1))
    with inside_next_iceberg_commit(lambda: db.array("A").insert(cells([(1, 2), (3, 3)], 2))):
        array.delete(box={"i": (0, 1), "j": (0, 3)})
    assert stored_cells(array) == [(2, 2, 1), (3, 3, 2)]
    assert_versions_sound(array, 2)


def test_a_commit_racing_at_the_checkpoint_is_replanned(db) -> None:
    array = db.create_array(SCHEMA)
    with interleave("insert.before-commit", lambda: db.array("A").insert(cells([(7, 7)], 5))):
        result = array.insert(cells([(6, 6)], 4))
    assert result.version == 2
    assert stored_cells(array) == [(6, 6, 4), (7, 7, 5)]
    assert_versions_sound(array, 2)


def test_iceberg_tables_do_not_rebase_commits(db) -> None:
    array = db.create_array(SCHEMA)
    properties = array.source.table.table.metadata.properties
    assert properties["commit.retry.num-retries"] == "0"


def test_a_writer_that_keeps_losing_gives_up_naming_the_array(db, monkeypatch) -> None:
    from arrayviews.operators import writes

    array = db.create_array(SCHEMA)
    monkeypatch.setattr(writes, "MAX_ATTEMPTS", 3)
    counter = iter(range(100))

    def rival() -> None:
        db.array("A").insert(cells([(10, next(counter) % 16)], 9))

    original = Table._do_commit

    def always_beaten(self, updates, requirements):
        if threading.current_thread().name != "rival" and not isinstance(self, StagedTable):
            thread = threading.Thread(target=rival, name="rival")
            thread.start()
            thread.join()
        return original(self, updates, requirements)

    monkeypatch.setattr(Table, "_do_commit", always_beaten)
    with pytest.raises(CommitConflictError, match="array A"):
        array.insert(cells([(0, 0)], 1))
    monkeypatch.setattr(Table, "_do_commit", original)
    assert (0, 0, 1) not in stored_cells(array)
    assert_versions_sound(array, 3)


# -- views ----------------------------------------------------------------------------------------------
def brute_force_view(model: dict[tuple[int, int], int]) -> list[tuple[int, int, int, int]]:
    rows = []
    for (i, j), _ in sorted(model.items()):
        near = [model[c] for c in ((i, j), (i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)) if c in model]
        rows.append((i, j, len(near), sum(near)))
    return rows


def view_rows(view) -> list[tuple[int, int, int, int]]:
    frame = view.to_pandas()
    return sorted(
        zip(frame.i.tolist(), frame.j.tolist(), frame.cnt.tolist(), frame.total.tolist(), strict=True)
    )


@pytest.fixture
def viewed(db):
    array = db.create_array(SCHEMA)
    model = {(i, j): i * 16 + j for i in range(0, 16, 3) for j in range(0, 16, 2)}
    array.insert(cells(list(model), 0).assign(v=list(model.values())))
    view = db.create_view("V", SimilarityViewDefinition("A", "A", L1(1), AGGREGATES))
    return db, array, model, view


def test_insert_during_a_full_refresh_is_counted_once(viewed) -> None:
    db, array, model, view = viewed
    array.insert(cells([(1, 0)], 7))
    model[(1, 0)] = 7

    def meanwhile() -> None:
        db.array("A").insert(cells([(1, 2)], 11))
        model[(1, 2)] = 11

    with interleave("refresh.start", meanwhile):
        view.refresh("full")
    reflected = {row["base"]: row["reflected"] for row in view.status()["bases"]}
    assert reflected == {"A": 2}, "the refresh must record the version it read, not a newer one"
    assert view.refresh("baseline").committed
    assert view_rows(view) == brute_force_view(model)
    assert view.verify() is True


def test_insert_during_create_view_is_counted_once(db) -> None:
    array = db.create_array(SCHEMA)
    model = {(2, 2): 3, (2, 3): 4}
    array.insert(cells(list(model), 0).assign(v=list(model.values())))

    def meanwhile() -> None:
        db.array("A").insert(cells([(2, 4)], 5))
        model[(2, 4)] = 5

    with interleave("refresh.start", meanwhile):
        view = db.create_view("V", SimilarityViewDefinition("A", "A", L1(1), AGGREGATES))
    assert view_rows(view) == brute_force_view({(2, 2): 3, (2, 3): 4})
    assert view.refresh("baseline").committed
    assert view_rows(view) == brute_force_view(model)
    assert view.verify() is True


def test_two_refreshes_of_one_view_commit_once(viewed) -> None:
    db, array, model, view = viewed
    array.insert(cells([(1, 0), (4, 5)], 7))
    model.update({(1, 0): 7, (4, 5): 7})
    other: list = []
    with inside_next_iceberg_commit(lambda: other.append(db.view("V").refresh("baseline"))):
        mine = view.refresh("baseline")
    assert other[0].committed
    assert not mine.committed and "already" in mine.message
    assert view.versions()["version"].tolist() == [1, 2]
    assert view_rows(view) == brute_force_view(model)
    assert view.verify() is True


def test_refresh_race_across_two_connections(viewed, spark, tmp_path) -> None:
    db, array, model, view = viewed
    other_db = arrayviews.connect(db.warehouse.location, spark=spark)
    array.insert(cells([(7, 7)], 1))
    model[(7, 7)] = 1
    results: list = []
    with inside_next_iceberg_commit(lambda: results.append(other_db.view("v").refresh("full"))):
        results.append(view.refresh("baseline"))
    assert [r.committed for r in results] == [True, False]
    assert view.versions()["version"].tolist() == [1, 2]
    assert view.verify() is True
