"""The live files of a table, kept per snapshot and carried forward from commit to commit, are
exactly the files pyiceberg plans from the manifests, for every handle, after any mix of appends,
replacements and drops made through two catalogs (two processes), at every version still held.
Commits apply their updates to the metadata without pyiceberg's deep copy and give the same
metadata as pyiceberg's own update function."""

from __future__ import annotations

import itertools
import tempfile

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.table.update import update_table_metadata
from pyspark.sql import types as T

from arrayviews.model.names import PART
from arrayviews.storage import manifest_cache
from arrayviews.storage.catalog import open_catalog
from arrayviews.storage.metadata_updates import apply_updates
from arrayviews.storage.part_table import PartTable

WAREHOUSE = tempfile.mkdtemp(prefix="live-listing-")
CATALOGS = (open_catalog(WAREHOUSE), open_catalog(WAREHOUSE))  # two processes' catalog objects
SCHEMA = T.StructType([T.StructField("k", T.IntegerType()), T.StructField("v", T.DoubleType())])
NAMES = itertools.count()

# one change: (which process, what, parts); "add" appends a file to each part, "replace" rewrites
# the parts, "drop" removes every part below the lowest one named
changes = st.tuples(
    st.integers(0, 1),
    st.sampled_from(["add", "replace", "drop", "add"]),
    st.lists(st.integers(-3, 8), min_size=1, max_size=3, unique=True),
)


def _rows(parts: list[int], tag: int) -> pa.Table:
    return pa.table(
        {
            "k": pa.array([tag] * len(parts), pa.int32()),
            "v": pa.array([float(p) for p in parts], pa.float64()),
            PART: pa.array(parts, pa.int64()),
        }
    )


def _planned(table: PartTable, snapshot_id: int | None) -> dict[int, set[str]]:
    """The reference: the files pyiceberg's own scan plans for a snapshot, by part, from manifests
    decoded afresh (not those this process keeps)."""
    found: dict[int, set[str]] = {}
    if snapshot_id is None:
        return found
    manifest_cache.forget()
    for task in table.table.scan(snapshot_id=snapshot_id).plan_files():
        found.setdefault(int(task.file.partition[0]), set()).add(task.file.file_path)
    return found


def _listed(table: PartTable, version: int | None = None) -> dict[int, set[str]]:
    return {part: set(files) for part, files in table.files_by_part(version).items()}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(changes, min_size=1, max_size=10))
def test_listing_matches_the_planned_files_through_two_catalogs(steps) -> None:
    name = f"listing_{next(NAMES)}"
    PartTable.create(CATALOGS[0], "views", name, SCHEMA, 60, "viewdf", {"definition": "SELECT 1"})
    handles = [PartTable.open(catalog, "views", name) for catalog in CATALOGS]
    model: dict[int, set[str]] = {}  # plain Python: part -> files, replayed from the changes
    history: list[tuple[int, dict[int, set[str]]]] = []
    for tag, (who, what, parts) in enumerate(steps):
        table = handles[who].refresh()
        version = table.current_version()
        if what == "drop":
            below = min(parts)
            table.commit([], drop_below=below, operation="drop", expected_version=version)
            model = {p: files for p, files in model.items() if p >= below}
        else:
            staged = table.stage_local(_rows(parts, tag))
            replaced = parts if what == "replace" else []
            table.commit(staged, replace_parts=replaced, operation=what, expected_version=version)
            for part in replaced:
                model.pop(part, None)
            for file in staged:
                model.setdefault(file.part, set()).add(file.uri)
        model = {p: files for p, files in model.items() if files}
        history.append((table.current_version(), {p: set(f) for p, f in model.items()}))
        for handle in handles:  # the writer's kept listing and the other process's carried one
            handle.refresh()
            assert _listed(handle) == model
            assert _planned(handle, handle.table.metadata.current_snapshot_id) == model
    reader = handles[1].refresh()
    for version, expected in history:  # older versions too (a time-travel read)
        assert _listed(reader, version) == expected


def test_a_dropped_part_written_by_this_process_is_removed() -> None:
    """A file this process added (listed from its own commit, never read from a manifest) can be
    dropped later: pyiceberg needs its partition spec, which a manifest read would have set."""
    name = f"listing_{next(NAMES)}"
    table = PartTable.create(CATALOGS[0], "views", name, SCHEMA, 60, "viewdf", {"definition": "SELECT 1"})
    for part in range(4):
        table.commit(table.stage_local(_rows([part], part)), operation="add", expected_version=part)
    table.commit([], drop_below=2, operation="drop", expected_version=4)
    assert sorted(_listed(table)) == [2, 3]
    assert sorted(_planned(table, table.table.metadata.current_snapshot_id)) == [2, 3]


def test_commits_give_the_metadata_pyiceberg_would() -> None:
    """The metadata a commit stages equals pyiceberg's own update of the same base, apart from
    the update time (the snapshot, its ref, properties and the metadata log)."""
    name = f"listing_{next(NAMES)}"
    table = PartTable.create(CATALOGS[0], "views", name, SCHEMA, 60, "viewdf", {"definition": "SELECT 1"})
    table.commit(table.stage_local(_rows([0, 1], 0)), operation="add", expected_version=0)
    iceberg = table.refresh().table
    transaction = iceberg.transaction()
    transaction.set_properties(note="x")
    with transaction.update_snapshot().fast_append() as append:
        for file in table.live_files():
            append.append_data_file(file)
    updates = transaction._updates
    ours = apply_updates(iceberg.metadata, updates, iceberg.metadata_location)
    theirs = update_table_metadata(iceberg.metadata, updates, metadata_location=iceberg.metadata_location)
    assert ours.model_copy(update={"last_updated_ms": 0}) == theirs.model_copy(update={"last_updated_ms": 0})
    assert ours.metadata_log[-1].metadata_file == iceberg.metadata_location
