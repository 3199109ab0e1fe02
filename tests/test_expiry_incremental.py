"""The routine expiry of a view's oldest versions finds the files only those versions referenced
from their own manifests (storage/expiry.py ``expired_only_files``): on random histories of appends,
part replacements, retention drops, manifest merges and earlier expiries, the files it names equal
the plain set difference of what the expired snapshots referenced and what the remaining ones
need (files already deleted by earlier expiries left out), and the table reads the same after it."""

from __future__ import annotations

import datetime as dt
import os
import random
import time

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from arrayviews.model.names import PART
from arrayviews.storage import expiry
from arrayviews.storage.part_table import PartTable

SCHEMA = T.StructType([T.StructField("src", T.StringType()), T.StructField("n", T.LongType())])


def _table(db, name: str) -> PartTable:
    return PartTable.create(
        db.warehouse.catalog, "testing", name, SCHEMA, 60, "viewdf", {"definition": "test"}
    )


def _rows(part: int, count: int = 4) -> pa.Table:
    return pa.table(
        {
            "src": pa.array([f"s{part}_{i}" for i in range(count)]),
            "n": pa.array(np.arange(count, dtype=np.int64)),
            PART: pa.array([part] * count, pa.int64()),
        }
    )


def _exists(uri: str) -> bool:
    return os.path.exists(uri.removeprefix("file://").removeprefix("file:"))


def _reference(table, snapshots, k) -> tuple[set[str], set[str]]:
    """What the first ``k`` snapshots referenced and the rest do not need, by reading everything."""
    doomed_data, doomed_metadata = expiry.snapshots_files(table, snapshots[:k], live_only=False)
    kept_data, kept_metadata = expiry.snapshots_files(table, snapshots[k:], live_only=True)
    data = {expiry._normal(u) for u in doomed_data - kept_data if _exists(u)}
    return data, {expiry._normal(u) for u in doomed_metadata - kept_metadata}


@pytest.mark.parametrize("seed", range(4))
def test_files_only_expired_snapshots_referenced_equal_the_set_difference(db, seed) -> None:
    rng = random.Random(seed)
    table = _table(db, f"t{seed}")
    live: dict[int, int] = {}  # part -> rows, the plain-Python reference of what the table holds
    for part in range(rng.randint(25, 60)):
        choice = rng.random()
        options = {}
        if choice < 0.3:
            options["drop_below"] = part - rng.randint(1, 6)
        elif choice < 0.5 and part > 0:
            options["replace_parts"] = [part - rng.randint(0, min(3, part))]
        rows = _rows(part)
        staged = table.stage_local(rows.cast(table.arrow_schema))
        table.commit(staged, operation="x", expected_version=table.current_version(), **options)
        if "drop_below" in options:
            live = {p: r for p, r in live.items() if p >= options["drop_below"]}
        for replaced in options.get("replace_parts", []):
            live.pop(replaced, None)
        live[part] = rows.num_rows
        if rng.random() < 0.12:  # earlier routine expiries
            table.expire(
                *expiry.cutoffs(None, dt.timedelta(hours=1)),
                keep_after=table.current_version() - rng.randint(1, 8),
                sweep_orphans=False,
            )
    iceberg = table.table.refresh()
    line = sorted(iceberg.metadata.snapshots, key=lambda s: s.sequence_number)
    for k in sorted({1, rng.randint(1, len(line) - 1), len(line) - 1}):
        assert expiry.expired_only_files(iceberg.metadata, iceberg.io, line[:k]) == _reference(
            iceberg, line, k
        )
    # the expiry itself: the table still holds every live part's rows, and nothing it needs is gone
    before = table.current_version()
    orphan = _orphan(table)
    table.expire(*expiry.cutoffs(None, dt.timedelta(hours=1)), keep_after=before - 2, sweep_orphans=False)
    assert os.path.exists(orphan)  # found from the manifests: the folder was not swept
    table.refresh()
    assert all(_exists(uri) for uri in expiry.live_files(table.table))
    assert {p: sum(f[2] for f in table.sized_files_of_parts(p, p)) for p in live} == live
    assert table.part_range() == (min(live), max(live))
    table.expire(*expiry.cutoffs(None, dt.timedelta(hours=1)), keep_after=before - 1)
    assert not os.path.exists(orphan)  # the full expiry sweeps files nothing names after the grace


def _orphan(table: PartTable) -> str:
    """A file in the table's data folder no snapshot names, written two hours ago (a crashed writer's)."""
    folder = table.data_directory.removeprefix("file://").removeprefix("file:")
    path = os.path.join(folder, "orphan-from-a-crash.parquet")
    with open(path, "wb") as handle:
        handle.write(b"PAR1")
    old = time.time() - 7200
    os.utime(path, (old, old))
    return path


def test_a_history_that_is_not_one_line_is_left_to_the_full_expiry(db) -> None:
    table = _table(db, "branched")
    for part in range(4):
        table.commit(
            table.stage_local(_rows(part).cast(table.arrow_schema)),
            operation="x",
            expected_version=table.current_version(),
        )
    iceberg = table.table.refresh()
    line = sorted(iceberg.metadata.snapshots, key=lambda s: s.sequence_number)
    # the expired snapshots must be the oldest part of the line
    assert expiry.expired_only_files(iceberg.metadata, iceberg.io, line[1:2]) is None
    assert expiry.expired_only_files(iceberg.metadata, iceberg.io, line) is None
    assert expiry.expired_only_files(iceberg.metadata, iceberg.io, line[:2]) is not None
