"""Expiry of old snapshots of any arrayviews table, and deletion of every file nothing needs any more:
data files, manifests and manifest lists of the expired snapshots, old metadata files, and files of
writes that crashed before committing (orphans, after a grace period)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from pyarrow.fs import FileSelector
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.update.snapshot import ExpireSnapshots

from arrayviews.model.errors import CommitConflictError
from arrayviews.storage.files import delete_files, filesystem
from arrayviews.storage.snapshots import _Transaction


def cutoffs(
    older_than: dt.datetime | dt.timedelta | None, orphans_older_than: dt.timedelta
) -> tuple[dt.datetime, dt.datetime]:
    """(expire versions before, delete orphans before) from the user's arguments: a time, an age,
    or None for every version but the current one."""
    now = dt.datetime.now(dt.UTC)
    if older_than is None:
        cutoff = now + dt.timedelta(seconds=1)
    elif isinstance(older_than, dt.timedelta):
        cutoff = now - older_than
    else:
        cutoff = older_than if older_than.tzinfo else older_than.replace(tzinfo=dt.UTC)
    return cutoff, now - orphans_older_than


@dataclass(frozen=True)
class ExpireResult:
    """What an expiry removed: the versions forgotten and the files deleted."""

    versions: list[int]
    data_files: int
    metadata_files: int


def snapshot_files(table: Table, snapshot: Snapshot, live_only: bool) -> tuple[set[str], set[str]]:
    """(data files, metadata files) a snapshot references; with ``live_only``, data files it holds
    (entries it marks deleted left out)."""
    return snapshots_files(table, [snapshot], live_only)


def snapshots_files(table: Table, snapshots: list[Snapshot], live_only: bool) -> tuple[set[str], set[str]]:
    """(data files, metadata files) any of ``snapshots`` references (see :func:`snapshot_files`).

    Snapshots of one table share most of their manifests (each commit writes one or two and
    keeps the others), and a manifest's entries are the same whichever snapshot lists it, so each
    distinct manifest is read once: the work follows the manifests, not snapshots times files."""
    data: set[str] = set()
    metadata: set[str] = set()
    for snapshot in snapshots:
        metadata.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            if manifest.manifest_path in metadata:
                continue
            metadata.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=live_only):
                if not live_only or entry.status != ManifestEntryStatus.DELETED:
                    data.add(entry.data_file.file_path)
    return data, metadata


def live_files(table: Table) -> set[str]:
    """Every file the table's current metadata needs: data files of the snapshots held, their
    manifests and manifest lists, the current metadata file, the metadata files its log names, and
    statistics files."""
    data, metadata = snapshots_files(table, list(table.metadata.snapshots), live_only=True)
    needed = data | metadata
    needed.add(table.metadata_location)
    needed.update(entry.metadata_file for entry in table.metadata.metadata_log)
    needed.update(s.statistics_path for s in table.metadata.statistics)
    needed.update(s.statistics_path for s in table.metadata.partition_statistics)
    return {_normal(uri) for uri in needed}


def expired_only_files(metadata, io, doomed: list[Snapshot]) -> tuple[set[str], set[str]] | None:
    """(data files, metadata files) that only the snapshots ``doomed`` of a table referenced
    (``metadata``: the table's metadata from before they were expired; ``io`` reads its files), when
    the table's snapshots form one line (each one's parent is the one before it) of which ``doomed``
    is the oldest part; None otherwise.

    In one line of history a file, once removed, never comes back (Iceberg names every file once).
    So a data file live in an expired snapshot and in none that remain was removed by one of the
    expired snapshots after the oldest, or by the first snapshot kept; each snapshot records the
    files it removes as deleted entries of the manifests it adds. And a manifest or manifest list
    of an expired snapshot that no remaining snapshot lists is one the first snapshot kept does not
    list. Files the oldest expired snapshot removed were removed by the first kept snapshot of an
    earlier expiry, whose files went then."""
    line = sorted(metadata.snapshots, key=lambda s: s.sequence_number)
    for before, after in zip(line, line[1:], strict=False):
        if after.parent_snapshot_id != before.snapshot_id:
            return None
    if (
        not doomed
        or len(doomed) >= len(line)
        or {s.snapshot_id for s in line[: len(doomed)]} != {s.snapshot_id for s in doomed}
    ):
        return None
    first_kept = line[len(doomed)]
    kept = {m.manifest_path for m in first_kept.manifests(io)}
    data: set[str] = set()
    listed: set[str] = set()
    for snapshot in line[: len(doomed)]:
        listed.add(_normal(snapshot.manifest_list))
        listed.update(_normal(m.manifest_path) for m in snapshot.manifests(io) if m.manifest_path not in kept)
    for snapshot in line[1 : len(doomed) + 1]:
        for manifest in snapshot.manifests(io):
            if manifest.added_snapshot_id != snapshot.snapshot_id or manifest.deleted_files_count == 0:
                continue
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                if entry.status == ManifestEntryStatus.DELETED and entry.snapshot_id == snapshot.snapshot_id:
                    data.add(_normal(entry.data_file.file_path))
    return data, listed


def table_files(table: Table) -> dict[str, float]:
    """Every file under the table's folder, with its modification time (seconds)."""
    location = table.location().rstrip("/")
    fs, root = filesystem(location)
    found = {}
    for info in fs.get_file_info(FileSelector(root, recursive=True, allow_not_found=True)):
        if info.is_file:
            found[_normal(location + info.path[len(root.rstrip("/")) :])] = (
                info.mtime.timestamp() if info.mtime else 0.0
            )
    return found


def _normal(uri: str) -> str:
    """One spelling per local file: ``file:/x`` and ``file:///x`` both become ``file:///x``."""
    if uri.startswith("file:") and not uri.startswith("file://"):
        return "file://" + uri[len("file:") :]
    return uri


def expire_table(
    table: Table,
    older_than: dt.datetime,
    orphans_before: dt.datetime,
    version_of: Callable[[Snapshot], int | None],
    keep: Callable[[Snapshot], bool] = lambda snapshot: False,
    properties: Callable[[Table, list[Snapshot]], dict[str, str]] | None = None,
    sweep_orphans: bool = True,
) -> tuple[Table, ExpireResult]:
    """Expire the snapshots of ``table`` committed before ``older_than`` (never the current one, nor
    those ``keep`` asks for), in one metadata commit that also sets ``properties(table, expired)``; then
    delete every file under the table's folder the remaining metadata does not need: at once when
    an expired snapshot referenced it, after ``orphans_before`` otherwise (a concurrent writer may
    own a file it has staged but not committed yet).

    Without ``sweep_orphans`` only the files the expired snapshots referenced are looked at, and
    when the snapshots form one line of history with the expired ones its oldest part, they are
    found from the expired snapshots' own manifests and the first one kept
    (:func:`expired_only_files`), without reading what every remaining snapshot references or
    listing the folder (the routine expiry of a view's oldest versions)."""
    cutoff_ms = older_than.timestamp() * 1000
    for _ in range(20):
        table = table.refresh()
        before = table.metadata  # the commit below gives ``table`` the metadata after it
        current = table.metadata.current_snapshot_id
        doomed = [
            s
            for s in table.metadata.snapshots
            if s.timestamp_ms < cutoff_ms and s.snapshot_id != current and not keep(s)
        ]
        if not doomed:
            break
        try:
            # the transaction that does not deep-copy the metadata at each access: pyiceberg's
            # expiry reads it once per snapshot expired (seconds for a hundred snapshots)
            transaction = _Transaction(table)
            if properties is not None and (updates := properties(table, doomed)):
                transaction.set_properties(**updates)
            ExpireSnapshots(transaction).by_ids([s.snapshot_id for s in doomed]).commit()
            transaction.commit_transaction()
            break
        except CommitFailedException:
            continue
    else:
        raise CommitConflictError(f"table {table.name()}: expiry kept losing to other commits")
    if doomed and not sweep_orphans:
        found = expired_only_files(before, table.io, doomed)
        if found is not None:
            data, metadata = found
            delete_files(sorted(data) + sorted(metadata))
            versions = sorted(v for v in (version_of(s) for s in doomed) if v is not None)
            return table.refresh(), ExpireResult(versions, len(data), len(metadata))
    data, metadata = snapshots_files(table, doomed, live_only=False)
    referenced_by_expired = {_normal(u) for u in data | metadata}
    table = table.refresh()
    needed = live_files(table)
    orphan_cutoff = orphans_before.timestamp()
    data_deleted, metadata_deleted = [], []
    for uri, mtime in table_files(table).items():
        if uri in needed or (uri not in referenced_by_expired and mtime >= orphan_cutoff):
            continue
        (metadata_deleted if "/metadata/" in uri else data_deleted).append(uri)
    delete_files(data_deleted + metadata_deleted)
    versions = sorted(v for v in (version_of(s) for s in doomed) if v is not None)
    return table, ExpireResult(versions, len(data_deleted), len(metadata_deleted))
