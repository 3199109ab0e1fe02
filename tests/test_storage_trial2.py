"""Two processes on one warehouse and kill -9, second trial round: the create/insert/drop race of
one name (a table seen by the catalog while another process drops it), time-axis writes racing and
killed, stream appends racing maintenance, compaction and expiry racing inserts and refreshes, and
the catalog under contention. References are Python sets and dicts of what each process was told
was committed."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
from pyiceberg.table import CreateTableTransaction

import arrayviews
from arrayviews.model import faults
from arrayviews.model.errors import AlreadyExistsError, NotFoundError
from arrayviews.storage.catalog import _Catalog

SCHEMA = "B<v:int64>[i=0:15:4; j=0:15:4]"


def frame(cells: dict[tuple[int, int], int]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "i": np.array([c[0] for c in cells], np.int64),
            "j": np.array([c[1] for c in cells], np.int64),
            "v": np.array(list(cells.values()), np.int64),
        }
    )


def content(array) -> dict[tuple[int, int], int]:
    return {(int(r.i), int(r.j)): int(r.v) for r in array.to_pandas().itertuples()}


# -- the third cause of the create/insert/drop race ----------------------------------------------------
def test_a_table_dropped_between_its_catalog_row_and_its_metadata_file_is_not_there(
    spark, tmp_path, monkeypatch
):
    """Another process drops B between this process's read of B's catalog row and its read of the
    metadata file the row names. Before: FileNotFoundError of the metadata file from
    ``create_array`` (its check that the name is free) and "array B cannot be read ... run
    `arrayviews check`" from ``db.array`` (1 run in 7 of the two-process create/insert/drop race)."""
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    original = _Catalog._convert_orm_to_iceberg
    armed = []

    def dropped_meanwhile(self, row):
        if armed and row.table_name == "b":
            armed.clear()
            arrayviews.connect(location, spark=spark, execution="local").drop_array("B")
        return original(self, row)

    monkeypatch.setattr(_Catalog, "_convert_orm_to_iceberg", dropped_meanwhile)
    db.create_array(SCHEMA).insert(frame({(1, 1): 1}))
    armed.append(True)
    with pytest.raises(NotFoundError, match="no array named B"):
        db.array("B")
    assert db.arrays() == []
    db.create_array(SCHEMA).insert(frame({(2, 2): 2}))
    armed.append(True)
    created = db.create_array(SCHEMA)  # the name fell free while the check looked at it
    assert created.version == 0 and content(db.array("B")) == {}
    db.array("B").insert(frame({(3, 3): 3}))
    armed.append(True)
    assert db.arrays() == []  # a listing leaves out a table dropped while it was listed
    assert not armed


def test_a_creation_losing_to_a_table_created_and_dropped_at_once_is_already_exists(
    spark, tmp_path, monkeypatch
):
    """Another process creates B after this creation's check that the name is free, and drops it
    again before this one's commit failure is looked at. Before: pyiceberg's raw
    ``CommitFailedException: Table already exists``."""
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    original = CreateTableTransaction.commit_transaction

    def raced(self):
        other = arrayviews.connect(location, spark=spark, execution="local")
        monkeypatch.setattr(CreateTableTransaction, "commit_transaction", original)
        other.create_array(SCHEMA)
        try:
            return original(self)
        finally:
            other.drop_array("B")

    monkeypatch.setattr(CreateTableTransaction, "commit_transaction", raced)
    with pytest.raises(AlreadyExistsError, match="an array named B already exists"):
        db.create_array(SCHEMA)
    assert db.arrays() == []
    assert list((tmp_path / "warehouse" / "arrays.db").iterdir()) == []  # the loser's folder is gone
    db.create_array(SCHEMA).insert(frame({(1, 1): 1}))  # the retry succeeds
    assert content(db.array("B")) == {(1, 1): 1}


def test_a_creation_whose_table_is_dropped_at_once_returns_a_handle_that_names_the_drop(
    spark, tmp_path, monkeypatch
):
    """Another process drops B right after this process created it. Before: pyiceberg's
    ``NoSuchTableError: Table does not exist: arrays.b`` from ``create_array`` (which had
    succeeded); now the creation returns its array, and writing to it says it was dropped."""
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    original = CreateTableTransaction.commit_transaction

    def dropped_at_once(self):
        created = original(self)
        monkeypatch.setattr(CreateTableTransaction, "commit_transaction", original)
        arrayviews.connect(location, spark=spark, execution="local").drop_array("B")
        return created

    monkeypatch.setattr(CreateTableTransaction, "commit_transaction", dropped_at_once)
    array = db.create_array(SCHEMA)
    with pytest.raises(NotFoundError, match="array B was dropped by another process"):
        array.insert(frame({(1, 1): 1}))
    assert db.arrays() == []


def test_an_insert_losing_to_a_drop_logs_no_traceback_of_manifests_already_gone(spark, tmp_path, caplog):
    """Another process drops B between an insert's staging and its commit. Before: besides the
    clear NotFoundError, pyiceberg logged two warnings with full tracebacks ("Failed to delete
    uncommitted manifest ... FileNotFoundError"): the manifests it cleans up went with the folder."""
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    array = db.create_array(SCHEMA)
    array.insert(frame({(1, 1): 1}))

    def other_drops():
        arrayviews.connect(location, spark=spark, execution="local").drop_array("B")

    with (
        faults.interleave("commit.staged", other_drops),
        pytest.raises(NotFoundError, match="array B was dropped by another process"),
    ):
        array.insert(frame({(2, 2): 2}))
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert db.arrays() == []
