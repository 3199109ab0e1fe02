"""The files of a part table's snapshot sorted by part, carried forward from each commit to the
next snapshot (storage/part_index.py), and its lowest and highest part, from manifest bounds kept
per manifest, equal a fresh plan of that snapshot sorted in plain Python:
over appends, parts out of order, several files of one part, replacements and drops, made through
two catalogs (two processes) so that some snapshots are carried and others listed afresh. The
namespace listing a maintenance pass makes (the catalog's rows, on SQLite through a plain
connection) sees tables created, committed to and dropped through another catalog at once."""

from __future__ import annotations

import itertools
import random
import tempfile

import pyarrow as pa
from pyspark.sql import types as T

from arrayviews.model.names import PART
from arrayviews.storage import part_index
from arrayviews.storage.catalog import load_tables, open_catalog
from arrayviews.storage.part_table import PartTable

WAREHOUSE = tempfile.mkdtemp(prefix="part-index-")
CATALOGS = (open_catalog(WAREHOUSE), open_catalog(WAREHOUSE))
SCHEMA = T.StructType([T.StructField("v", T.LongType())])
NAMES = itertools.count()


def _create(namespace: str = "streams") -> PartTable:
    return PartTable.create(CATALOGS[0], namespace, f"t{next(NAMES)}", SCHEMA, 60, "stream", {})


def _rows(part: int, tag: int) -> pa.Table:
    return pa.table({"v": pa.array([tag], pa.int64()), PART: pa.array([part], pa.int64())})


def _reference(table: PartTable) -> tuple[list[int], dict[int, set[str]]]:
    """The current snapshot's files from pyiceberg's own scan plan: parts sorted, paths by part."""
    files: dict[int, set[str]] = {}
    for task in table.table.scan().plan_files():
        files.setdefault(int(task.file.partition[0]), set()).add(task.file.file_path)
    return sorted(p for p, paths in files.items() for _ in paths), files


def _indexed(table: PartTable) -> tuple[list[int], dict[int, set[str]]]:
    parts, files = table._part_index(None)
    by_part: dict[int, set[str]] = {}
    for part, data_file in zip(parts, files, strict=True):
        by_part.setdefault(part, set()).add(data_file.file_path)
    return list(parts), by_part


def test_carried_indexes_equal_a_fresh_plan_over_mixed_commits() -> None:
    rng = random.Random(2026)
    table = _create()
    handles = [table, PartTable.open(CATALOGS[1], "streams", table.name)]
    carried = 0
    for step in range(60):
        handle = handles[0] if step % 5 else handles[1]  # every fifth commit by the other process
        handle.refresh()
        version = handle.current_version()
        handle._part_index(None)  # the base's index is kept, as a step's planning leaves it
        choice = rng.random()
        if choice < 0.1 and version:
            handle.commit(
                [], drop_below=rng.randrange(0, step + 1), operation="drop", expected_version=version
            )
        else:
            part = rng.choice([step, step, rng.randrange(0, step + 1)])  # mostly new, some older parts
            staged = handle.stage_local(_rows(part, step))
            replaced = [part] if choice > 0.8 else []
            handle.commit(staged, replace_parts=replaced, operation="add", expected_version=version)
        snapshot_id = handle.table.metadata.current_snapshot_id
        if snapshot_id is not None and part_index.kept_index(handle.identity, snapshot_id) is not None:
            carried += 1
        for reader in (handle, PartTable.open(CATALOGS[step % 2], "streams", table.name)):
            assert _indexed(reader) == _reference(reader)
            parts, _ = reader._part_index(None)
            assert parts == sorted(parts)
            reference = _reference(reader)[0]
            assert reader.part_range() == ((reference[0], reference[-1]) if reference else None)
    assert carried >= 40  # most snapshots were carried forward, not listed and sorted again


def test_an_index_is_carried_only_from_its_own_base() -> None:
    """A commit whose base index is not kept carries nothing; the next read lists the snapshot."""
    table = _create()
    table.commit(table.stage_local(_rows(0, 0)), operation="add", expected_version=0)
    table.commit(table.stage_local(_rows(1, 1)), operation="add", expected_version=1)
    snapshot_id = table.table.metadata.current_snapshot_id
    assert part_index.kept_index(table.identity, snapshot_id) is None  # no index of version 1 was made
    assert _indexed(table) == _reference(table)


def test_the_namespace_listing_sees_another_catalog_s_changes_at_once() -> None:
    namespace = f"listing{next(NAMES)}"
    first = _create(namespace)

    def listed(catalog) -> dict[str, str]:
        return {
            identifier[-1]: table.metadata_location for identifier, table in load_tables(catalog, namespace)
        }

    assert set(listed(CATALOGS[1])) == {first.name}
    second = PartTable.create(CATALOGS[1], namespace, "second", SCHEMA, 60, "stream", {})
    assert set(listed(CATALOGS[0])) == {first.name, "second"}
    second.commit(second.stage_local(_rows(3, 3)), operation="add", expected_version=0)
    assert listed(CATALOGS[0])["second"] == second.table.metadata_location
    first.drop()
    assert set(listed(CATALOGS[0])) == {"second"}
    assert set(listed(CATALOGS[1])) == {"second"}
