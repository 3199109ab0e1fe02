"""One versioned table over Iceberg: versions, snapshots, properties and commits, for every relation kind.

Every relation arrayviews stores (arrays, array views, uncertain arrays, streams, stream views) is
one Iceberg table whose snapshots carry an ``arrayviews.version`` number in their summary. This
class owns the pyiceberg table and is the only way the rest of the code reads its versions,
snapshots and properties or commits to it; :class:`~arrayviews.storage.array_table.ArrayTable` and
:class:`~arrayviews.storage.part_table.PartTable` add what is particular to their layout (chunk
fragments, time parts). Nothing outside ``storage/`` touches a pyiceberg object.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import AlwaysTrue, BooleanExpression
from pyiceberg.manifest import DataFile, ManifestContent, ManifestEntryStatus
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from arrayviews.model.errors import NotFoundError
from arrayviews.storage.append_commit import commit_append
from arrayviews.storage.catalog import kept_listing, kept_plans
from arrayviews.storage.expiry import ExpireResult, expire_table
from arrayviews.storage.snapshot_index import snapshots_after
from arrayviews.storage.snapshots import BaseMovedError, commit_snapshot, update_properties

#: Every key arrayviews writes (table properties and snapshot summaries) starts with this.
PREFIX = "arrayviews."
#: Snapshot summary: the relation's version number (1, 2, ...; version 0 has no snapshot).
VERSION_KEY = PREFIX + "version"
#: Table property: the relation's kind (see ``storage.relations``).
KIND_PROPERTY = PREFIX + "kind"

#: A data file of a table, as planning returns it and commits remove it (an opaque handle to the
#: rest of the code, which reads only its ``file_path``, ``record_count`` and ``file_size_in_bytes``).
StoredFile = DataFile

V = TypeVar("V")

#: Plans kept per table (a snapshot's files never change, so a plan is valid while its snapshot is).
PLANS_KEPT = 16
#: Snapshots a kept listing of live files is carried forward over (beyond that: listed afresh).
LISTING_REACH = 64
#: Listings kept per table (the newest snapshots listed).
LISTINGS_KEPT = 4


@dataclass(frozen=True)
class SnapshotRecord:
    """One snapshot as arrayviews sees it: id, commit time and summary."""

    snapshot_id: int
    time: dt.datetime
    summary: dict[str, str]

    @property
    def version(self) -> int | None:
        return int(self.summary[VERSION_KEY]) if VERSION_KEY in self.summary else None


def _record(snapshot: Snapshot) -> SnapshotRecord:
    return SnapshotRecord(
        snapshot.snapshot_id,
        dt.datetime.fromtimestamp(snapshot.timestamp_ms / 1000, tz=dt.UTC),
        dict(snapshot.summary.additional_properties) if snapshot.summary is not None else {},
    )


class VersionedTable:
    """One Iceberg table with numbered versions (one snapshot each) and ``arrayviews.*`` properties."""

    def __init__(self, table: Table) -> None:
        self.table = table
        # shared by every load of this table through the same catalog object
        self._plans: dict[tuple[int, str], list[StoredFile]] = kept_plans(
            table.catalog, table.metadata.table_uuid
        )
        self._listing: dict[int, dict[str, StoredFile]] = kept_listing(
            table.catalog, table.metadata.table_uuid
        )

    # -- identity ----------------------------------------------------------------------------------
    @property
    def label(self) -> str:
        """How errors name the relation (``array A``, ``stream M``)."""
        return f"table {self.table.name()[-1]}"

    @property
    def location(self) -> str:
        return self.table.location()

    @property
    def identity(self) -> str:
        """The table's unique id: a relation dropped and created again under its name is another one."""
        return str(self.table.metadata.table_uuid)

    @property
    def data_directory(self) -> str:
        return self.location.rstrip("/") + "/data"

    def refresh(self):
        """Load the table's newest metadata (returns self). A table that another process dropped,
        or dropped and created again under the same name (another table now), raises NotFoundError:
        what this object planned or read belongs to a table that no longer exists."""
        with self._dropped_as_not_found():
            fresh = self.table.catalog.load_table(self.table.name())
        if fresh.metadata.table_uuid != self.table.metadata.table_uuid:
            raise self._dropped(again=True)
        # in place, as pyiceberg's refresh: whoever holds the table object sees the new metadata
        self.table.metadata = fresh.metadata
        self.table.io = fresh.io
        self.table.metadata_location = fresh.metadata_location
        return self

    def _dropped(self, again: bool) -> NotFoundError:
        if again:
            return NotFoundError(
                f"{self.label} was dropped and created again by another process since it was opened; "
                "nothing was changed by this operation (open it again)"
            )
        return NotFoundError(
            f"{self.label} was dropped by another process; nothing was changed by this operation"
        )

    @contextlib.contextmanager
    def _dropped_as_not_found(self) -> Iterator[None]:
        """Within the block, the table being gone from the catalog (dropped by another process, its
        metadata file deleted with it) or replaced by another table of the same name (pyiceberg's
        refresh refuses a table whose identity changed) raises NotFoundError naming the relation."""
        try:
            yield
        except NoSuchTableError:
            raise self._dropped(again=False) from None
        except FileNotFoundError:
            if self.table.catalog.table_exists(self.table.name()):
                raise
            raise self._dropped(again=False) from None
        except ValueError as error:
            if "Table UUID does not match" not in str(error):
                raise
            raise self._dropped(again=True) from None

    # -- properties --------------------------------------------------------------------------------
    @property
    def properties(self) -> dict[str, str]:
        """The table properties (settings kept outside snapshots), as loaded."""
        return dict(self.table.metadata.properties)

    @property
    def kind(self) -> str | None:
        return self.table.metadata.properties.get(KIND_PROPERTY)

    def update_properties(
        self,
        updates: dict[str, str],
        removals: Sequence[str] = (),
        only_if: Callable[[Table], bool] | None = None,
    ) -> bool:
        """Set and remove table properties in one metadata commit (no new version); with ``only_if``,
        only while it holds for the table as last committed. Returns whether they are set now."""
        with self._dropped_as_not_found():
            self.table = update_properties(self.table, updates, removals, only_if)
        current = self.table.metadata.properties
        return all(current.get(k) == v for k, v in updates.items()) and not any(
            k in current for k in removals
        )

    # -- versions ----------------------------------------------------------------------------------
    def snapshots(self) -> Iterator[SnapshotRecord]:
        """Every snapshot still held, in the order the metadata lists them."""
        for snapshot in self.table.metadata.snapshots:
            yield _record(snapshot)

    def current_snapshot(self) -> SnapshotRecord | None:
        snapshot = self.table.current_snapshot()
        return None if snapshot is None else _record(snapshot)

    def current_summary(self) -> dict[str, str]:
        """The summary of the current snapshot ({} for an empty table)."""
        return dict(self._current_properties())

    def current_version(self) -> int:
        return int(self._current_properties().get(VERSION_KEY, 0))

    def _current_properties(self) -> Mapping[str, str]:
        """The current snapshot's summary properties as held (not copied: read only), without
        the snapshot record's time conversion: a maintenance pass asks for versions dozens of
        times."""
        snapshot = self.table.current_snapshot()
        if snapshot is None or snapshot.summary is None:
            return {}
        return snapshot.summary.additional_properties

    def versioned(self, record: Callable[[SnapshotRecord], V | None], after: int = 0) -> list[V]:
        """``record`` of every versioned snapshot still held (only those after version ``after``),
        oldest version first. Snapshots at or before ``after`` are skipped before they are read
        into records, so asking for what changed lately does not grow with the history held."""
        found = snapshots_after(self.table.metadata, VERSION_KEY, after)
        return [v for snapshot in found if (v := record(_record(snapshot))) is not None]

    def snapshot_of(self, version: int) -> int | None:
        """Snapshot id of ``version`` (None for version 0); NotFoundError if it is unknown or expired."""
        if version == 0:
            return None
        current = self.current_snapshot()
        if current is not None and current.version == version:
            return current.snapshot_id
        held = []
        for snapshot in self.snapshots():
            if snapshot.version == version:
                return snapshot.snapshot_id
            if snapshot.version is not None:
                held.append(snapshot.version)
        known = ", ".join(str(v) for v in sorted(held)) or "none"
        raise NotFoundError(f"{self.label} has no version {version} (versions held: {known})")

    # -- planning ----------------------------------------------------------------------------------
    def live_files(
        self, version: int | None = None, row_filter: BooleanExpression | None = None
    ) -> list[StoredFile]:
        """Data files of a version (current by default) that may hold rows matching ``row_filter``."""
        snapshot_id = self.snapshot_of(self.current_version() if version is None else version)
        if snapshot_id is None:
            return []
        if row_filter is None or isinstance(row_filter, AlwaysTrue):
            return list(self._listed(snapshot_id).values())
        # An operation plans the same read twice (its cost estimate, then the read): a snapshot is
        # immutable, so the plan of (snapshot, filter) is kept rather than reading the manifests again.
        key = (snapshot_id, repr(row_filter or AlwaysTrue()))
        if key not in self._plans:
            scan = self.table.scan(row_filter=row_filter or AlwaysTrue(), snapshot_id=snapshot_id)
            if len(self._plans) >= PLANS_KEPT:
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = [task.file for task in scan.plan_files()]
        return list(self._plans[key])

    def _listed(self, snapshot_id: int) -> dict[str, StoredFile]:
        """Every data file of a snapshot, by path. The listings of the last snapshots asked for are
        kept (per table, across loads) and carried forward to a newer snapshot by reading only the
        manifests each snapshot in between wrote (the files it added and removed, Iceberg's entry
        status), so listing after each small commit reads one or two manifests, not all of them."""
        if snapshot_id in self._listing:
            return self._listing[snapshot_id]
        files = None
        for kept_id in reversed(list(self._listing)):  # the newest listing first
            files = self._carried_forward(kept_id, self._listing[kept_id], snapshot_id)
            if files is not None:
                break
        if files is None:
            files = self._listed_afresh(snapshot_id)
        if len(self._listing) >= LISTINGS_KEPT:
            self._listing.pop(next(iter(self._listing)))
        self._listing[snapshot_id] = files
        return files

    def _listed_afresh(self, snapshot_id: int) -> dict[str, StoredFile]:
        metadata, io = self.table.metadata, self.table.io
        snapshot = metadata.snapshot_by_id(snapshot_id)
        files: dict[str, StoredFile] = {}
        manifests = snapshot.manifests(io)
        if any(m.content != ManifestContent.DATA for m in manifests):  # row deletes: pyiceberg plans
            scan = self.table.scan(snapshot_id=snapshot_id)
            return {task.file.file_path: task.file for task in scan.plan_files()}
        for manifest in manifests:
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                files[entry.data_file.file_path] = entry.data_file
        return files

    def _carried_forward(
        self, from_id: int, files: dict[str, StoredFile], to_id: int
    ) -> dict[str, StoredFile] | None:
        """The listing of snapshot ``to_id`` from that of its ancestor ``from_id``; None when
        ``from_id`` is not among its last LISTING_REACH ancestors (rolled back, expired...)."""
        metadata, io = self.table.metadata, self.table.io
        chain = []
        snapshot = metadata.snapshot_by_id(to_id)
        while snapshot is not None and snapshot.snapshot_id != from_id and len(chain) < LISTING_REACH:
            chain.append(snapshot)
            parent = snapshot.parent_snapshot_id
            snapshot = None if parent is None else metadata.snapshot_by_id(parent)
        if snapshot is None or snapshot.snapshot_id != from_id:
            return None
        files = dict(files)
        for step in reversed(chain):
            for manifest in step.manifests(io):
                if manifest.added_snapshot_id != step.snapshot_id:
                    continue  # written by an earlier snapshot: no change of this one is in it
                if manifest.content != ManifestContent.DATA:
                    return None
                for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                    if entry.snapshot_id != step.snapshot_id:
                        continue  # carried over (existing) by a manifest merge
                    if entry.status == ManifestEntryStatus.ADDED:
                        files[entry.data_file.file_path] = entry.data_file
                    elif entry.status == ManifestEntryStatus.DELETED:
                        files.pop(entry.data_file.file_path, None)
        return files

    # -- commits -----------------------------------------------------------------------------------
    def check_base(self, expected_version: int) -> int | None:
        """The current snapshot id, after checking the table (as loaded) is still at
        ``expected_version``; BaseMovedError (nothing committed) otherwise."""
        current = self.current_snapshot()
        now = 0 if current is None else int(current.summary.get(VERSION_KEY, 0))
        if now != expected_version:
            raise BaseMovedError(self.label, f"now version {now}, planned on version {expected_version}")
        return None if current is None else current.snapshot_id

    def commit_files(
        self,
        base_snapshot_id: int | None,
        added: Sequence[str],
        removed: Sequence[StoredFile],
        summary: dict[str, str],
    ) -> None:
        """Commit added Parquet files and removed data files as **one** snapshot carrying
        ``summary``, on top of ``base_snapshot_id`` (validated by the catalog as it swaps the
        metadata: BaseMovedError, nothing committed, if another writer committed first)."""
        committed = (
            None if removed else commit_append(self.table, base_snapshot_id, added, summary, self.label)
        )
        self.table, data_files = committed or commit_snapshot(
            self.table, base_snapshot_id, added, removed, summary, self.label
        )
        self._note_commit(base_snapshot_id, data_files, removed)

    def _note_commit(
        self, base_snapshot_id: int | None, added: list[StoredFile], removed: Sequence[StoredFile]
    ) -> None:
        """Keep the listing of the snapshot just committed, from its base's listing and the files it
        added and removed (when the base was listed), so the next read lists nothing."""
        base = {} if base_snapshot_id is None else self._listing.get(base_snapshot_id)
        snapshot_id = self.table.metadata.current_snapshot_id
        if base is None or snapshot_id is None:
            return
        files = dict(base)
        for data_file in removed:
            files.pop(data_file.file_path, None)
        spec_id = self.table.metadata.default_spec_id  # as a manifest read would give it
        for data_file in added:
            data_file.spec_id = spec_id
            files[data_file.file_path] = data_file
        if len(self._listing) >= LISTINGS_KEPT:
            self._listing.pop(next(iter(self._listing)))
        self._listing[snapshot_id] = files

    def expire(
        self,
        older_than: dt.datetime,
        orphans_before: dt.datetime,
        keep: Callable[[SnapshotRecord], bool] = lambda snapshot: False,
        properties: Callable[[dict[str, str], list[SnapshotRecord]], dict[str, str]] | None = None,
        sweep_orphans: bool = True,
    ) -> ExpireResult:
        """Forget the snapshots committed before ``older_than`` (never the current one, nor those
        ``keep`` asks for), setting ``properties(table properties, forgotten)`` in the same commit,
        and delete every file no remaining snapshot needs (see ``storage.expiry``; without
        ``sweep_orphans``, only files the forgotten snapshots referenced)."""

        def version_of(snapshot: Snapshot) -> int | None:
            return _record(snapshot).version

        def properties_of(table: Table, doomed: list[Snapshot]) -> dict[str, str]:
            return properties(dict(table.metadata.properties), [_record(s) for s in doomed])

        with self._dropped_as_not_found():
            self.table, result = expire_table(
                self.table,
                older_than,
                orphans_before,
                version_of,
                keep=lambda snapshot: keep(_record(snapshot)),
                properties=None if properties is None else properties_of,
                sweep_orphans=sweep_orphans,
            )
        return result


__all__ = ["KIND_PROPERTY", "PREFIX", "VERSION_KEY", "SnapshotRecord", "StoredFile", "VersionedTable"]
