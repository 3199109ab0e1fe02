"""Bounded metadata: old metadata files are deleted as commits go, manifests stay few, and compaction
plus expiry work for arrays, array views, streams and stream views, after which the warehouse holds
exactly the files the current metadata of its tables refers to (checked against the file system)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pandas as pd
import pytest

from arrayviews.language.parser import parse_statement
from arrayviews.model.shapes import L1
from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate
from test_stream_views import (
    COMBINED,
    M0,
    PARTIALS,
    RECENT_COLUMNS,
    SCHEMA,
    Truth,
    contents,
    network,
    windows,
)

NOW = dt.timedelta(0)
AGGREGATES = (ViewAggregate("count", None, None, "cnt"), ViewAggregate("sum", "right", "v", "total"))


def cells(pairs, value: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "i": np.array([p[0] for p in pairs], np.int64),
            "j": np.array([p[1] for p in pairs], np.int64),
            "v": np.full(len(pairs), value, np.int64),
        }
    )


def folder_of(table) -> Path:
    return Path(urlparse(table.location()).path)


def metadata_json(table) -> list[Path]:
    return sorted((folder_of(table) / "metadata").glob("*.metadata.json"))


def on_disk(db) -> set[str]:
    """Every file of every table folder in the warehouse (the catalog and marker left out)."""
    root = Path(urlparse(db.warehouse.location).path)
    found = set()
    for namespace in ("arrays.db", "streams.db"):
        for path in (root / namespace).rglob("*"):
            if path.is_file():
                found.add("file://" + str(path))
    return found


def all_live(db) -> set[str]:
    from arrayviews.storage.expiry import live_files

    catalog = db.warehouse.catalog
    needed = set()
    for namespace in ("arrays", "streams"):
        if (namespace,) not in catalog.list_namespaces():
            continue
        for identifier in catalog.list_tables(namespace):
            needed |= live_files(catalog.load_table(identifier))
    return needed


def test_old_metadata_files_are_deleted_as_commits_go(db) -> None:
    array = db.create_array("A<v:int64>[i=0:99:10; j=0:9:10]")
    for k in range(30):
        array.insert(cells([(k, 0)], k))
    table = array.source.table.table
    assert len(metadata_json(table)) <= 9, "metadata.json files pile up"
    manifests = table.current_snapshot().manifests(table.io)
    assert len(manifests) <= 16
    assert array.count() == 30 and array.versions()["version"].tolist() == list(range(1, 31))


@pytest.mark.slow  # 48 commits and 48 version reads
def test_many_small_commits_keep_manifests_few_and_every_version_reads_back(db) -> None:
    """Appends and replaces (overwrite commits) in turn: the current snapshot lists a bounded number
    of manifests (they merge once 16 gather), and every version reads back the cells a plain-Python
    dictionary replaying the same batches holds."""
    from arrayviews.storage.snapshots import TABLE_PROPERTIES, TableProperties

    bound = int(TABLE_PROPERTIES[TableProperties.MANIFEST_MIN_MERGE_COUNT])
    array = db.create_array("M<v:int64>[i=0:199:10; j=0:9:10]")
    rng = np.random.default_rng(8)
    truth: dict[tuple[int, int], int] = {}
    expected, most = [], 0
    for k in range(3 * bound):
        if k % 3 == 2:  # replace three cells already held (files removed: an overwrite commit)
            held = sorted(truth)
            pairs = [held[int(x)] for x in rng.choice(len(held), 3, replace=False)]
            array.insert(cells(pairs, 1000 + k), on_conflict="replace")
        else:  # two new cells in a new row
            pairs = [(k, int(j)) for j in rng.choice(10, 2, replace=False)]
            array.insert(cells(pairs, k))
        truth.update({p: (1000 + k if k % 3 == 2 else k) for p in pairs})
        expected.append(dict(truth))
        table = array.source.table.table
        most = max(most, len(table.current_snapshot().manifests(table.io)))
    assert most <= bound, f"{most} manifests after small commits"
    for version, reference in enumerate(expected, start=1):
        frame = array.at_version(version).to_pandas()
        got = {(int(i), int(j)): int(v) for i, j, v in zip(frame["i"], frame["j"], frame["v"], strict=True)}
        assert got == reference, f"version {version}"


def test_an_older_table_gets_the_commit_properties_on_its_next_commit(db) -> None:
    from arrayviews.storage.snapshots import update_properties

    array = db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    table = array.source.table
    table.table = update_properties(table.table, {}, ["commit.retry.num-retries"])
    assert "commit.retry.num-retries" not in table.table.metadata.properties
    array.insert(cells([(1, 1)], 1))
    assert db.array("A").source.table.table.metadata.properties["commit.retry.num-retries"] == "0"


@pytest.mark.slow  # a view, a stream view and about 20 commits
def test_compaction_and_expiry_leave_only_live_files_for_every_kind(db) -> None:
    array = db.create_array("A<v:int64>[i=0:15:4; j=0:15:4]")
    model = {}
    for k in range(12):
        batch = {(k, j): k * 16 + j for j in range(0, 16, 5)}
        array.insert(cells(list(batch), 0).assign(v=list(batch.values())))
        model.update(batch)
    view = db.create_view("V", SimilarityViewDefinition("A", "A", L1(1), AGGREGATES))
    for k in range(3):
        array.insert(cells([(k, 1)], 100 + k))
        model[(k, 1)] = 100 + k
        view.refresh("baseline")
    array.delete(box={"i": (0, 0), "j": (0, 15)})
    model = {c: v for c, v in model.items() if c[0] != 0}
    view.refresh("baseline")

    truth = Truth()
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(truth.add(network(range(3))))
    partials = dataclasses.replace(parse_statement(PARTIALS).definition, helper=True)
    db.create_stream_view([partials, parse_statement(COMBINED).definition], lateness_parts=1)
    for minute in range(3, 7):
        stream.append(truth.add(network([minute])))
        stream.append(truth.add(network([minute]).assign(loss=1, src="10.9.9.9")))  # two files per part
    before = on_disk(db)

    assert array.compact().committed
    compacted = view.compact()  # refreshes may already have left one file (each rewrites its files)
    assert compacted.committed or "small file(s): nothing to compact" in compacted.message
    assert stream.compact() is not None
    assert db.stream_view("W").compact() is None  # one file per part already
    results = db.maintain_streams()
    assert all(not r.recomputed for r in results), "compaction changes no rows: nothing to recompute"
    for handle in (array, view, stream, db.stream_view("P"), db.stream_view("W")):
        handle.expire_versions(orphans_older_than=NOW)

    assert on_disk(db) == all_live(db), "files nobody refers to were left behind"
    assert len(on_disk(db)) < len(before)
    # everything still reads right and keeps working
    assert sorted(zip(*[array.to_pandas()[c].tolist() for c in "ijv"], strict=True)) == sorted(
        (i, j, v) for (i, j), v in model.items()
    )
    assert view.verify() is True
    assert view.versions()["version"].tolist() == [view.version]
    array.insert(cells([(15, 15)], 7))
    assert view.refresh("baseline").committed and view.verify() is True
    stream.append(truth.add(network([7])))
    rows = truth.rows()
    assert contents(db, "W", RECENT_COLUMNS) == windows(rows[rows["part"] >= M0 + 2], M0 + 2, M0 + 7)
    assert len(stream.versions()) <= 3
