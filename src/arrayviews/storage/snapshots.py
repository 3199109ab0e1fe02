"""One Iceberg snapshot, planned on a stated base snapshot, that removes some data files and adds
others with summary properties: the single commit path of array tables and stream part tables.

Serializable by construction: the commit states the snapshot it was planned on and lands only if
that is still the table's current snapshot (Iceberg's ``assert-ref-snapshot-id`` requirement,
checked by the catalog in the same SQL statement that swaps the metadata pointer). pyiceberg's own
retry, which would rebase the commit onto a newer snapshot after arrayviews' checks (conflicts,
version number, cell totals) were made against the old one, is switched off by a table property;
a commit whose base moved raises :class:`BaseMovedError`, and the caller re-plans from the new
state (cheap for arrayviews' writes) or gives up with CommitConflictError naming the relation.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

import pyarrow.parquet as pq
import pyiceberg.table.update.snapshot as snapshot_producers
from pyiceberg.conversions import to_bytes
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.expressions.visitors import _ManifestEvalVisitor
from pyiceberg.io.pyarrow import (
    MetricModeTypes,
    MetricsMode,
    _check_pyarrow_schema_compatible,
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestContent
from pyiceberg.schema import Schema
from pyiceberg.table import Table, TableProperties, Transaction
from pyiceberg.table.snapshots import (
    ADDED_DATA_FILES,
    ADDED_DELETE_FILES,
    ADDED_EQUALITY_DELETES,
    ADDED_FILE_SIZE,
    ADDED_POSITION_DELETES,
    ADDED_RECORDS,
    DELETED_DATA_FILES,
    DELETED_RECORDS,
    REMOVED_DELETE_FILES,
    REMOVED_EQUALITY_DELETES,
    REMOVED_FILE_SIZE,
    REMOVED_POSITION_DELETES,
    TOTAL_DATA_FILES,
    TOTAL_DELETE_FILES,
    TOTAL_EQUALITY_DELETES,
    TOTAL_FILE_SIZE,
    TOTAL_POSITION_DELETES,
    TOTAL_RECORDS,
    Operation,
    Summary,
)
from pyiceberg.table.update.snapshot import _ManifestMergeManager
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import IntegerType, LongType
from pyiceberg.utils.properties import property_as_bool, property_as_int

from arrayviews.model.errors import CatalogBusyError, CommitConflictError
from arrayviews.model.faults import checkpoint
from arrayviews.storage.files import WrittenFooter, delete_files, written_footer
from arrayviews.storage.metadata_updates import apply_updates

T = TypeVar("T")

#: Table properties every arrayviews table carries (set at creation; older tables get them on
#: their first commit).
TABLE_PROPERTIES = {
    # never rebase a failed commit onto a newer snapshot: arrayviews re-validates and re-plans
    TableProperties.COMMIT_NUM_RETRIES: "0",
    # keep the metadata folder bounded: old metadata.json files are deleted after each commit
    TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED: "true",
    TableProperties.METADATA_PREVIOUS_VERSIONS_MAX: "8",
    # merge small manifests as commits go, so planning stays fast after many small batches
    TableProperties.MANIFEST_MERGE_ENABLED: "true",
    TableProperties.MANIFEST_MIN_MERGE_COUNT: "16",
}


class _GoneManifestsFilter(logging.Filter):
    """A commit that failed because another process dropped the table: pyiceberg then deletes the
    manifests it wrote, which went with the table's folder, and would log a warning with a full
    traceback for each ("Failed to delete uncommitted manifest"). A file already gone is what the
    clean-up wanted; other failures to delete are still logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        gone = record.exc_info is not None and isinstance(record.exc_info[1], FileNotFoundError)
        return not (gone and record.getMessage().startswith("Failed to delete uncommitted manifest"))


logging.getLogger(snapshot_producers.__name__).addFilter(_GoneManifestsFilter())


#: Set on an exception raised while or after the catalog swapped a table's metadata.
_MAYBE_COMMITTED = "_arrayviews_maybe_committed"


def mark_maybe_committed(error: BaseException) -> None:
    """Record on ``error`` that the commit it interrupted may have happened."""
    setattr(error, _MAYBE_COMMITTED, True)


def may_have_committed(error: BaseException) -> bool:
    """True when ``error`` was raised while or after a commit swapped a table's metadata: the files
    written for that commit may now belong to the table, so a failing writer must keep them (if the
    commit did not happen they are orphans, which expiry and ``check --repair`` delete)."""
    return bool(getattr(error, _MAYBE_COMMITTED, False))


def discard_unless_committed(uris: Sequence[str], error: BaseException) -> None:
    """Delete files written for a commit that failed, unless the commit may have happened."""
    if not may_have_committed(error):
        delete_files(list(uris))


class BaseMovedError(CommitConflictError):
    """The table's current snapshot is no longer the one the commit was planned on; nothing was
    committed. ``label`` names the relation."""

    def __init__(self, label: str, detail: str) -> None:
        self.label = label
        super().__init__(f"{label} changed while writing ({detail}); nothing was committed")


def missing_properties(table: Table) -> dict[str, str]:
    properties = table.metadata.properties
    return {k: v for k, v in TABLE_PROPERTIES.items() if properties.get(k) != v}


def update_properties(
    table: Table,
    updates: dict[str, str],
    removals: Sequence[str] = (),
    only_if: Callable[[Table], bool] | None = None,
) -> Table:
    """Set and remove table properties in one metadata-only commit (no snapshot), repeated if
    another process committed meanwhile (properties never conflict with data commits). With
    ``only_if``, nothing changes unless it holds for the table as last committed (checked again
    after each conflict: the catalog's swap fails if the table moved since it was read). Returns
    the refreshed table."""
    for _ in range(20):
        table = table.refresh()
        if only_if is not None and not only_if(table):
            return table
        current = table.metadata.properties
        changes = {k: v for k, v in updates.items() if current.get(k) != v}
        gone = [k for k in removals if k in current]
        if not changes and not gone:
            return table
        try:
            with table.transaction() as transaction:
                if changes:
                    transaction.set_properties(**changes)
                if gone:
                    transaction.remove_properties(*gone)
        except CommitFailedException:
            continue
    raise CommitConflictError(f"table {table.name()}: could not update its properties (busy)")


def ensure_properties(table: Table) -> Table:
    """Give an older table the commit properties above. Returns the refreshed table."""
    return update_properties(table, missing_properties(table)) if missing_properties(table) else table


def _serialize_evaluators(producer) -> None:
    """pyiceberg 0.12 evaluates one manifest-partition evaluator (a visitor that keeps the manifest
    being evaluated in an attribute) from several threads when it looks for the entries an
    overwrite deletes; two threads can then judge one manifest by another's partition bounds, skip
    it, and fail with ``Missing required files to delete`` (or worse, keep the file). Each
    evaluation here holds a lock, so it always sees its own manifest (and one evaluator serves
    both of the overwrite's passes over the manifests, judging each manifest once: a manifest
    record and the filter do not change within the commit)."""
    lock = threading.Lock()
    built: dict[int, tuple] = {}

    def build_locked(spec_id: int):
        # built once per spec and partition filter (the entries deleted, then the manifests kept,
        # each asked for one over the same filter)
        partition_filter = producer.partition_filters[spec_id]
        found = built.get(spec_id)
        if found is None or found[0] is not partition_filter:
            evaluate = _manifest_evaluator(producer, spec_id)
            judged: dict[int, tuple] = {}  # the verdict on each manifest (held, so its id stays)

            def evaluate_locked(manifest) -> bool:
                with lock:
                    verdict = judged.get(id(manifest))
                    if verdict is None or verdict[0] is not manifest:
                        verdict = judged[id(manifest)] = (manifest, evaluate(manifest))
                    return verdict[1]

            found = built[spec_id] = (partition_filter, evaluate_locked)
        return found[1]

    producer._build_manifest_evaluator = build_locked


_partition_schemas: dict[tuple[int, int], tuple] = {}


def _manifest_evaluator(producer, spec_id: int):
    """pyiceberg's ``manifest_evaluator`` of the producer's partition filter for ``spec_id`` (what
    its ``_build_manifest_evaluator`` returns), over the partition schema of the spec and table
    schema built once: pyiceberg builds the schema and its field indexes again for every
    evaluator, which cost more than binding the filter."""
    spec, schema = producer.spec(spec_id), producer.schema()
    key = (id(spec), id(schema))
    found = _partition_schemas.get(key)
    if found is None or found[1] is not spec or found[2] is not schema:
        found = (Schema(*spec.partition_type(schema).fields), spec, schema)  # holds spec and schema
        if len(_partition_schemas) > 256:
            _partition_schemas.clear()
        _partition_schemas[key] = found
    return _ManifestEvalVisitor(found[0], producer.partition_filters[spec_id], producer._case_sensitive).eval


def _bound_manifests(producer, transaction: Transaction) -> None:
    """An overwrite keeps every manifest of its parent, even those that only record deletions of
    earlier snapshots, and never merges: tables that are mostly rewritten (views) would gather
    manifests forever. Here an overwrite drops manifests with no live entry and merges small ones
    like an append does (same table properties)."""
    existing = producer._existing_manifests
    snapshot_id = producer.snapshot_id

    def live_existing():
        return [
            m
            for m in existing()
            if m.has_added_files() or m.has_existing_files() or m.added_snapshot_id == snapshot_id
        ]

    properties = transaction.table_metadata.properties
    manager = _ManifestMergeManager(
        target_size_bytes=property_as_int(
            properties,
            TableProperties.MANIFEST_TARGET_SIZE_BYTES,
            TableProperties.MANIFEST_TARGET_SIZE_BYTES_DEFAULT,
        ),
        min_count_to_merge=property_as_int(
            properties,
            TableProperties.MANIFEST_MIN_MERGE_COUNT,
            TableProperties.MANIFEST_MIN_MERGE_COUNT_DEFAULT,
        ),
        merge_enabled=property_as_bool(
            properties, TableProperties.MANIFEST_MERGE_ENABLED, TableProperties.MANIFEST_MERGE_ENABLED_DEFAULT
        ),
        snapshot_producer=producer,
    )

    producer._existing_manifests = live_existing
    producer._process_manifests = functools.partial(_merged, manager)


def _merged(manager: _ManifestMergeManager, manifests: list) -> list:
    """The manifests of a new snapshot after merging (data manifests, then delete manifests, as
    pyiceberg orders them): nothing is merged below the table's minimum count; from there, when
    the manifests share one spec and fit the target size, the newest run chosen by
    :func:`merge_run` is merged into one; otherwise pyiceberg's merge manager decides."""
    data = [m for m in manifests if m.content == ManifestContent.DATA]
    deletes = [m for m in manifests if m.content == ManifestContent.DELETES]
    if merge_keeps(data, manager._target_size_bytes, manager._min_count_to_merge, manager._merge_enabled):
        return data + deletes
    if len(data) >= manager._min_count_to_merge and fits_one_bin(data, manager._target_size_bytes):
        run = merge_run([_entries(m) for m in data])
        return [manager._create_manifest(data[0].partition_spec_id, data[:run]), *data[run:]] + deletes
    return manager.merge_manifests(data) + deletes


def _entries(manifest) -> int:
    return (manifest.added_files_count or 0) + (manifest.existing_files_count or 0)


def fits_one_bin(data: list, target_size_bytes: int) -> bool:
    """Whether data manifests share one partition spec and fit one bin of the target size."""
    return (
        len({m.partition_spec_id for m in data}) == 1
        and sum(m.manifest_length for m in data) <= target_size_bytes
    )


def merge_run(entries: Sequence[int]) -> int:
    """How many of the newest manifests (``entries``: their live entries, newest first, the new
    snapshot's own manifest first) one merge rewrites: the newest two, then each older one while it
    holds at most twice the entries gathered so far.

    pyiceberg merges every manifest of a small table into one each time the minimum count is
    reached, so a table of N files rewrites all N entries every 15 commits (Python encodes each
    entry, ~0.3 ms apiece). With this rule the manifests, going older, each hold more than twice
    the entries of all newer ones together once merged, so an entry is rewritten about log2(N)
    times in all and a table keeps about log2(N) merged manifests beside its newest ones."""
    run, gathered = 0, 0
    for count in entries:
        if run >= 2 and count > 2 * gathered:
            break
        run += 1
        gathered += count
    return run


def merge_keeps(data: list, target_size_bytes: int, min_count_to_merge: int, merge_enabled: bool) -> bool:
    """Whether pyiceberg's manifest merging (``_ManifestMergeManager.merge_manifests``) returns
    the data manifests ``data`` as they are: merging is off, or they share one partition spec and
    fit one bin of the target size (so its packing makes one bin, which holds the new manifest,
    and such a bin is merged only from ``min_count_to_merge`` manifests up). Its packing and
    grouping cost more than a step's other manifest work, for a merge that happens once in a
    hundred commits."""
    if not merge_enabled or not data:
        return True
    return len(data) < min_count_to_merge and fits_one_bin(data, target_size_bytes)


def _append_producer(update):
    """pyiceberg's merging append, which asks its merge manager only when it would merge."""
    producer = update.merge_append()
    manager = _ManifestMergeManager(
        target_size_bytes=producer._target_size_bytes,
        min_count_to_merge=producer._min_count_to_merge,
        merge_enabled=producer._merge_enabled,
        snapshot_producer=producer,
    )
    producer._process_manifests = functools.partial(_merged, manager)
    return producer


class _Transaction(Transaction):
    """pyiceberg 0.12's Transaction rebuilds (deep-copies) the whole table metadata each time it
    is asked for it, a dozen times per commit, which made a commit's cost grow with the number of
    snapshots held (77 ms per access at 150 snapshots). The metadata models are frozen: it is built
    without the copy (``storage.metadata_updates``) and kept until the next update is staged."""

    @property
    def table_metadata(self):
        if not self._updates:
            return self._table.metadata
        cached = self.__dict__.get("_arrayviews_metadata")
        if cached is None or cached[0] is not self._updates:
            cached = (self._updates, apply_updates(self._table.metadata, self._updates))
            self.__dict__["_arrayviews_metadata"] = cached
        return cached[1]


def data_file_record(io, metadata, uri: str) -> DataFile:
    """The Iceberg data file record of Parquet file ``uri``: from the footer this process kept
    when it wrote the file, or (a file written elsewhere, a Spark task say) read from the file.

    pyiceberg records every column's size before it looks at the column's metrics mode; Iceberg's
    reference implementation keeps none for a column whose mode is "none" (in part tables, every
    column but ``_part``), and so do the records made here, on both paths."""
    schema = metadata.schema()
    plan, mapping = _statistics_plan(
        metadata.table_uuid, metadata.current_schema_id, schema, metadata.properties
    )
    written = written_footer(uri)
    if written is None:  # pyiceberg's parquet_file_to_data_file, with the sizes below
        input_file = io.new_input(uri)
        with input_file.open() as stream:
            footer = pq.read_metadata(stream)
        written = WrittenFooter(footer, len(input_file), footer.schema.to_arrow_schema())
    _check_schema(
        metadata.table_uuid, metadata.current_schema_id, metadata.format_version, written.arrow_schema, schema
    )
    spec = metadata.spec()
    quick = _part_statistics(written, plan, mapping, spec)
    if quick is not None:
        return DataFile.from_args(
            content=DataFileContent.DATA,
            file_path=uri,
            file_format=FileFormat.PARQUET,
            file_size_in_bytes=written.size,
            sort_order_id=None,
            spec_id=metadata.default_spec_id,
            equality_ids=None,
            key_metadata=None,
            **quick,
        )
    footer = _measured_columns(written.footer, written.arrow_schema, plan, mapping)
    statistics = data_file_statistics_from_parquet_metadata(
        parquet_metadata=footer, stats_columns=plan, parquet_column_mapping=mapping
    )
    statistics = dataclasses.replace(statistics, column_sizes=_measured_sizes(statistics.column_sizes, plan))
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=uri,
        file_format=FileFormat.PARQUET,
        partition=statistics.partition(spec, schema),
        file_size_in_bytes=written.size,
        sort_order_id=None,
        spec_id=metadata.default_spec_id,
        equality_ids=None,
        key_metadata=None,
        **statistics.to_serialized_dict(),
    )


#: Per statistics plan and partition spec: the one measured column's field id and Parquet path
#: when :func:`_part_statistics` applies, else None.
_part_columns: dict[tuple, tuple] = {}
_PART_TYPES = (LongType(), IntegerType())


def _part_column(plan: dict, mapping: dict[str, int], spec) -> tuple[int, str] | None:
    key = (id(plan), id(spec))
    found = _part_columns.get(key)
    if found is None or found[1] is not plan or found[2] is not spec:
        measured = [(field_id, c) for field_id, c in plan.items() if c.mode != _NO_METRICS]
        column = None
        if (
            len(measured) == 1
            and measured[0][1].mode == _FULL_METRICS
            and measured[0][1].iceberg_type in _PART_TYPES
            and len(spec.fields) == 1
            and spec.fields[0].source_id == measured[0][0]
            and isinstance(spec.fields[0].transform, IdentityTransform)
        ):
            paths = [path for path, field_id in mapping.items() if field_id == measured[0][0]]
            column = (measured[0][0], paths[0]) if len(paths) == 1 else None
        found = (column, plan, spec)  # holds plan and spec: their ids are not reused meanwhile
        if len(_part_columns) > 256:
            _part_columns.clear()
        _part_columns[key] = found
    return found[0]


def _part_statistics(written: WrittenFooter, plan: dict, mapping: dict[str, int], spec) -> dict | None:
    """The statistics and partition pyiceberg derives from a file's footer (``record_count`` ..
    ``split_offsets`` and ``partition``, as ``DataFile.from_args`` takes them) for a table whose one
    measured column, an integer column with full metrics, is the source of its one identity
    partition field (a part table's ``_part``), read from that column and the first in a few calls
    per row group: pyiceberg's aggregators, bound serializers and partition inference took a
    seventh of a stream view's commit. None where another table or file needs pyiceberg's path (a
    column without statistics, values of several partitions, no row group)."""
    column = _part_column(plan, mapping, spec)
    footer = written.footer
    if column is None or footer.num_row_groups == 0:
        return None
    field_id, path = column
    size = values = nulls = 0
    has_nulls = False
    low = high = None
    offsets = []
    for number in range(footer.num_row_groups):
        group = footer.row_group(number)
        first = group.column(0)
        data_offset, dictionary_offset = first.data_page_offset, first.dictionary_page_offset
        offsets.append(
            dictionary_offset
            if first.has_dictionary_page and dictionary_offset < data_offset
            else data_offset
        )
        position = 0 if first.path_in_schema == path else _position_of(group, path)
        if position is None:
            return None
        chunk = group.column(position)
        size += chunk.total_compressed_size
        values += chunk.num_values
        statistics = chunk.statistics if chunk.is_stats_set else None
        if (
            statistics is None
            or not statistics.has_min_max
            or statistics.physical_type not in ("INT32", "INT64")
        ):
            return None
        if statistics.has_null_count:
            has_nulls = True
            nulls += statistics.null_count
        smallest, largest = statistics.min, statistics.max
        low = smallest if low is None or smallest < low else low
        high = largest if high is None or largest > high else high
    if low != high:
        return None  # pyiceberg's inference names the partitions
    kind = plan[field_id].iceberg_type
    offsets.sort()
    return {
        "partition": Record(low),
        "record_count": footer.num_rows,
        "column_sizes": {field_id: size},
        "value_counts": {field_id: values},
        "null_value_counts": {field_id: nulls} if has_nulls else {},
        "nan_value_counts": {},
        "lower_bounds": {field_id: to_bytes(kind, low)},
        "upper_bounds": {field_id: to_bytes(kind, high)},
        "split_offsets": offsets,
    }


def _position_of(group, path: str) -> int | None:
    for position in range(group.num_columns):
        if group.column(position).path_in_schema == path:
            return position
    return None


class _SomeColumns:
    """A Parquet footer seen through some of its columns (by position in the file), for
    pyiceberg's statistics: the first column (split offsets come from it) and those whose metrics
    mode is not none. The others only add their size, which :func:`_measured_sizes` drops, and
    their metadata objects cost more than everything else of a commit's data file record."""

    def __init__(self, footer, positions: tuple[int, ...]) -> None:
        self._footer = footer
        self._positions = positions
        self.num_row_groups = footer.num_row_groups
        self.num_columns = len(positions)
        self.num_rows = footer.num_rows

    def row_group(self, number: int) -> _GroupColumns:
        group = self._footer.row_group(number)
        return _GroupColumns(group, self._positions)


class _GroupColumns:
    def __init__(self, group, positions: tuple[int, ...]) -> None:
        self._group = group
        self._positions = positions

    def column(self, number: int):
        return self._group.column(self._positions[number])


_positions: dict[tuple, tuple[tuple[int, ...], tuple[str, ...]]] = {}


def _measured_columns(footer, arrow_schema, plan: dict, mapping: dict[str, int]):
    """``footer`` through :class:`_SomeColumns` when it leaves columns out: the positions are
    found once per plan and file schema, and checked against each file's column paths."""
    if footer.num_row_groups == 0:
        return footer
    key = (id(plan), arrow_schema, footer.num_columns)
    found = _positions.get(key)
    group = footer.row_group(0)
    if found is None:
        paths = [group.column(i).path_in_schema for i in range(footer.num_columns)]
        kept = tuple(
            i
            for i, path in enumerate(paths)
            if i == 0
            or path not in mapping
            or mapping[path] not in plan
            or plan[mapping[path]].mode != _NO_METRICS
        )
        found = (kept, tuple(paths[i] for i in kept), plan)
        if len(_positions) > 256:
            _positions.clear()
        _positions[key] = found
    kept, paths = found[0], found[1]
    if len(kept) == footer.num_columns:
        return footer
    if any(group.column(i).path_in_schema != path for i, path in zip(kept, paths, strict=True)):
        return footer  # another layout of the same schema: every column
    return _SomeColumns(footer, kept)


def _measured_sizes(sizes: dict[int, int], plan: dict) -> dict[int, int]:
    """Column sizes of the columns whose metrics mode is not none."""
    return {
        field_id: size
        for field_id, size in sizes.items()
        if field_id not in plan or plan[field_id].mode != _NO_METRICS
    }


_NO_METRICS = MetricsMode(MetricModeTypes.NONE)
_FULL_METRICS = MetricsMode(MetricModeTypes.FULL)
_checked_schemas: set[tuple] = set()
_plans: dict[tuple, tuple] = {}


def _check_schema(table_uuid, schema_id: int, format_version: int, arrow_schema, schema) -> None:
    """pyiceberg's check that a file's Arrow schema fits the table's, once per table schema and
    file schema (the check is the same for every file written with one schema)."""
    key = (str(table_uuid), schema_id, format_version, arrow_schema)
    if key not in _checked_schemas:
        _check_pyarrow_schema_compatible(schema, arrow_schema, format_version=format_version)
        if len(_checked_schemas) > 1024:
            _checked_schemas.clear()
        _checked_schemas.add(key)


def _statistics_plan(table_uuid, schema_id: int, schema, properties) -> tuple:
    """Which column statistics the table keeps, and the Parquet column of each field id."""
    key = (str(table_uuid), schema_id, tuple(sorted(properties.items())))
    found = _plans.get(key)
    if found is None:
        found = (compute_statistics_plan(schema, properties), parquet_path_to_id_mapping(schema))
        if len(_plans) > 256:
            _plans.clear()
        _plans[key] = found
    return found


def stage_snapshot(
    transaction: Transaction, added: Sequence[str], removed: Sequence[DataFile], properties: dict[str, str]
) -> list[DataFile]:
    """Stage, inside ``transaction``, one snapshot adding the Parquet files ``added`` and removing
    ``removed``, with summary ``properties``; a snapshot with nothing to add or remove is still made.
    Returns the data files added (with the statistics read from their footers)."""
    metadata = transaction.table_metadata
    data_files = [data_file_record(transaction._table.io, metadata, uri) for uri in added]
    update = transaction.update_snapshot(snapshot_properties=properties)
    if removed:
        producer = update.overwrite()
        _serialize_evaluators(producer)
        _bound_manifests(producer, transaction)
    else:
        producer = _append_producer(update)
    with producer as snapshot:
        for data_file in removed:
            snapshot.delete_data_file(data_file)
        for data_file in data_files:
            snapshot.append_data_file(data_file)
    return data_files


def commit_snapshot(
    table: Table,
    base_snapshot_id: int | None,
    added: Sequence[str],
    removed: Sequence[DataFile],
    properties: dict[str, str],
    label: str,
) -> tuple[Table, list[DataFile]]:
    """Commit ``added`` Parquet files and the removal of ``removed`` as one snapshot carrying
    ``properties``, on top of ``base_snapshot_id`` (None: the table has no snapshot yet).

    ``table`` must be loaded at that base. Raises BaseMovedError, naming ``label``, if the table's
    current snapshot is another one when the catalog swaps the metadata (nothing is committed).
    Returns the table as committed and the data files it added."""
    if table.metadata.current_snapshot_id != base_snapshot_id:
        raise BaseMovedError(
            label, f"planned on snapshot {base_snapshot_id}, table at {table.metadata.current_snapshot_id}"
        )
    if missing_properties(table):
        table = ensure_properties(table)
        if table.metadata.current_snapshot_id != base_snapshot_id:
            raise BaseMovedError(label, "another writer committed meanwhile")
    transaction = _Transaction(table)
    data_files = stage_snapshot(transaction, added, removed, properties)
    # the snapshot's own requirement asserts that ``main`` still points at the base snapshot
    return swap(transaction.commit_transaction, label), data_files


def swap(commit: Callable[[], T], label: str, refused: Callable[[], None] = lambda: None) -> T:
    """Run ``commit`` (the catalog's swap of a staged snapshot) between the ``commit.staged`` and
    ``commit.done`` checkpoints: BaseMovedError naming ``label`` when the catalog refused it
    (after ``refused``, which deletes what nobody will read), CatalogBusyError as raised (its
    statement changed nothing), and any other error marked as maybe committed."""
    checkpoint("commit.staged")
    try:
        committed = commit()
    except CommitFailedException as error:
        refused()
        raise BaseMovedError(label, f"another writer committed first: {error}") from None
    except CatalogBusyError:  # the catalog stayed locked: its statement changed nothing
        raise
    except BaseException as error:  # the catalog may have swapped the metadata before it failed
        mark_maybe_committed(error)
        raise
    try:
        checkpoint("commit.done")
    except BaseException as error:
        mark_maybe_committed(error)
        raise
    return committed


#: pyiceberg's own totals of a snapshot summary (the reference of the one below).
PYICEBERG_UPDATE_SUMMARIES = snapshot_producers.update_snapshot_summaries
_TOTALS = (
    (TOTAL_DATA_FILES, ADDED_DATA_FILES, DELETED_DATA_FILES),
    (TOTAL_DELETE_FILES, ADDED_DELETE_FILES, REMOVED_DELETE_FILES),
    (TOTAL_RECORDS, ADDED_RECORDS, DELETED_RECORDS),
    (TOTAL_FILE_SIZE, ADDED_FILE_SIZE, REMOVED_FILE_SIZE),
    (TOTAL_POSITION_DELETES, ADDED_POSITION_DELETES, REMOVED_POSITION_DELETES),
    (TOTAL_EQUALITY_DELETES, ADDED_EQUALITY_DELETES, REMOVED_EQUALITY_DELETES),
)
_NO_TOTALS = {total: "0" for total, _, _ in _TOTALS}
_TOTALLED = frozenset((Operation.APPEND, Operation.OVERWRITE, Operation.DELETE))


def update_snapshot_summaries(summary, previous_summary=None):
    """pyiceberg's ``update_snapshot_summaries`` (a new snapshot's totals: the parent's, plus what
    it added, less what it removed, each kept only when not negative), on the summaries' property
    dicts: pyiceberg reads each through the summary model's mapping methods (two dozen Python
    calls and private-attribute lookups for six numbers, 70 us a commit)."""
    if not isinstance(summary, Summary) or (
        previous_summary and not isinstance(previous_summary, (Summary, dict))
    ):
        return PYICEBERG_UPDATE_SUMMARIES(summary, previous_summary)
    if summary.operation not in _TOTALLED:
        raise ValueError(f"Operation not implemented: {summary.operation}")
    if not previous_summary:
        previous = _NO_TOTALS
    elif isinstance(previous_summary, Summary):
        previous = previous_summary.additional_properties
    else:
        previous = previous_summary
    properties = summary.additional_properties
    for total, added_key, removed_key in _TOTALS:
        if previous_total := previous.get(total):
            try:
                new_total = int(previous_total)
                if new_total >= 0 and (added := properties.get(added_key)):
                    new_total += int(added)
                if new_total >= 0 and (removed := properties.get(removed_key)):
                    new_total -= int(removed)
            except ValueError as error:
                raise ValueError(
                    f"Could not parse summary property {total} to an int: {previous_total}"
                ) from error
            if new_total >= 0:
                properties[total] = str(new_total)
    return summary


def install() -> None:
    """Make pyiceberg's snapshot producers total their summaries with the function above."""
    snapshot_producers.update_snapshot_summaries = update_snapshot_summaries


install()  # with the commit path: every commit of arrayviews goes through this module
