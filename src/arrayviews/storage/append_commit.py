"""A snapshot that only adds data files, committed without pyiceberg's transaction and snapshot
producer: the same manifest, manifest list, snapshot and catalog swap, made directly.

A stream view's maintenance step commits one such snapshot per part (one new Parquet file, nothing
removed). pyiceberg's path builds a transaction, a merging-append producer (its table metadata
with the updates applied, its manifest merge manager, three futures for the added, deleted and
existing manifests) and then the same files this module writes: 0.25 ms of a 1.7 ms commit went
to that machinery. Here the snapshot is made as Iceberg's fast append makes it (section "Snapshots"
and "Manifest Lists" of the table spec): one new manifest holding the added files as ADDED entries
of the new snapshot, a manifest list naming it before every live manifest of the parent snapshot,
the summary pyiceberg's collector makes (plus arrayviews' properties and the parent's totals), and
the ``add-snapshot`` and ``set-snapshot-ref`` updates under ``assert-ref-snapshot-id`` and
``assert-table-uuid``, handed to the catalog's compare-and-swap as pyiceberg's commit would. The
manifest and list writers are pyiceberg's own (with this package's cached encoders), so the files
are byte for byte what pyiceberg writes.

Only the common case takes this path: a format-version-2 table carrying arrayviews' commit
properties, files added and none removed, and no manifest merge due (the merge happens once in a
table's minimum-merge-count commits). Everything else returns None before anything is written,
or after deleting the one manifest written, and the caller commits through pyiceberg
(storage/snapshots.py ``commit_snapshot``).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    write_manifest,
    write_manifest_list,
)
from pyiceberg.table import Table, TableProperties
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, SnapshotSummaryCollector, Summary
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    AssertRefSnapshotId,
    AssertTableUUID,
    SetSnapshotRefUpdate,
)
from pyiceberg.table.update.snapshot import _new_manifest_file_name, _new_manifest_list_file_name
from pyiceberg.utils.properties import property_as_bool, property_as_int

from arrayviews.model.errors import CatalogBusyError
from arrayviews.model.faults import checkpoint
from arrayviews.storage.snapshots import (
    BaseMovedError,
    data_file_record,
    mark_maybe_committed,
    merge_keeps,
    missing_properties,
    update_snapshot_summaries,
)


def commit_append(
    table: Table, base_snapshot_id: int | None, added: Sequence[str], properties: dict[str, str], label: str
) -> tuple[Table, list[DataFile]] | None:
    """Commit the Parquet files ``added`` as one appending snapshot carrying ``properties`` on top
    of ``base_snapshot_id``, as ``commit_snapshot`` would with nothing removed; None (nothing
    committed, no file left) where this path does not apply. Raises BaseMovedError as
    ``commit_snapshot`` does, and marks other errors raised while or after the catalog swapped the
    metadata as maybe committed."""
    metadata = table.metadata
    if not added or metadata.format_version != 2 or missing_properties(table):
        return None
    if metadata.current_snapshot_id != base_snapshot_id:
        raise BaseMovedError(
            label, f"planned on snapshot {base_snapshot_id}, table at {metadata.current_snapshot_id}"
        )
    io = table.io
    settings = metadata.properties
    data_files = [data_file_record(io, metadata, uri) for uri in added]
    parent = None if base_snapshot_id is None else metadata.snapshot_by_id(base_snapshot_id)
    if base_snapshot_id is not None and parent is None:
        return None
    # a fast append keeps every manifest of the parent that still lists a live file
    existing = (
        []
        if parent is None
        else [m for m in parent.manifests(io) if m.has_added_files() or m.has_existing_files()]
    )
    snapshot_id = metadata.new_snapshot_id()
    commit_uuid = uuid.uuid4()
    compression = settings.get(
        TableProperties.WRITE_AVRO_COMPRESSION, TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT
    )
    locations = table.location_provider()
    spec, schema = metadata.spec(), metadata.schema()
    manifest_path = locations.new_metadata_location(_new_manifest_file_name(0, commit_uuid))
    with write_manifest(
        format_version=2,
        spec=spec,
        schema=schema,
        output_file=io.new_output(manifest_path),
        snapshot_id=snapshot_id,
        avro_compression=compression,
    ) as writer:
        for data_file in data_files:
            writer.add(
                ManifestEntry.from_args(
                    status=ManifestEntryStatus.ADDED,
                    snapshot_id=snapshot_id,
                    sequence_number=None,
                    file_sequence_number=None,
                    data_file=data_file,
                )
            )
    manifests = [writer.to_manifest_file(), *existing]
    data = [m for m in manifests if m.content == ManifestContent.DATA]
    deletes = [m for m in manifests if m.content == ManifestContent.DELETES]
    if not merge_keeps(
        data,
        property_as_int(
            settings,
            TableProperties.MANIFEST_TARGET_SIZE_BYTES,
            TableProperties.MANIFEST_TARGET_SIZE_BYTES_DEFAULT,
        ),
        property_as_int(
            settings,
            TableProperties.MANIFEST_MIN_MERGE_COUNT,
            TableProperties.MANIFEST_MIN_MERGE_COUNT_DEFAULT,
        ),
        property_as_bool(
            settings, TableProperties.MANIFEST_MERGE_ENABLED, TableProperties.MANIFEST_MERGE_ENABLED_DEFAULT
        ),
    ):
        _delete_quietly(io, [manifest_path])  # a merge is due: pyiceberg's merging append makes it
        return None
    summary = _summary(metadata, data_files, properties, parent)
    sequence_number = metadata.next_sequence_number()
    list_path = locations.new_metadata_location(
        _new_manifest_list_file_name(snapshot_id=snapshot_id, attempt=0, commit_uuid=commit_uuid)
    )
    with write_manifest_list(
        format_version=2,
        output_file=io.new_output(list_path),
        snapshot_id=snapshot_id,
        parent_snapshot_id=base_snapshot_id,
        sequence_number=sequence_number,
        avro_compression=compression,
    ) as list_writer:
        list_writer.add_manifests(data + deletes)
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=base_snapshot_id,
        manifest_list=list_path,
        sequence_number=sequence_number,
        summary=summary,
        schema_id=metadata.current_schema_id,
    )
    main = metadata.refs.get(MAIN_BRANCH)
    updates = (
        AddSnapshotUpdate(snapshot=snapshot),
        SetSnapshotRefUpdate(
            snapshot_id=snapshot_id,
            parent_snapshot_id=base_snapshot_id,
            ref_name=MAIN_BRANCH,
            type=SnapshotRefType.BRANCH,
        ),
    )
    requirements = (
        AssertRefSnapshotId(snapshot_id=None if main is None else main.snapshot_id, ref=MAIN_BRANCH),
        AssertTableUUID(uuid=metadata.table_uuid),
    )
    checkpoint("commit.staged")
    try:
        table._do_commit(updates=updates, requirements=requirements)
    except CommitFailedException as error:  # the swap did not happen: the two files are nobody's
        _delete_quietly(io, [manifest_path, list_path])
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
    return table, data_files


def _summary(metadata, data_files: list[DataFile], properties: dict[str, str], parent) -> Summary:
    """The snapshot summary pyiceberg's producer writes for an append of ``data_files``."""
    collector = SnapshotSummaryCollector(
        partition_summary_limit=int(
            metadata.properties.get(
                TableProperties.WRITE_PARTITION_SUMMARY_LIMIT,
                TableProperties.WRITE_PARTITION_SUMMARY_LIMIT_DEFAULT,
            )
        )
    )
    spec, schema = metadata.spec(), metadata.schema()
    for data_file in data_files:
        collector.add_file(data_file=data_file, partition_spec=spec, schema=schema)
    return update_snapshot_summaries(
        summary=Summary(operation=Operation.APPEND, **collector.build(), **properties),
        previous_summary=None if parent is None else parent.summary,
    )


def _delete_quietly(io, paths: list[str]) -> None:
    for path in paths:  # one that cannot be deleted is an orphan, which ``check --repair`` deletes
        with contextlib.suppress(OSError):
            io.delete(path)
