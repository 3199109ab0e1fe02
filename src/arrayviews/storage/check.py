"""The warehouse check: find tables that cannot be read (metadata or data files missing) and files
nothing refers to (left by crashes), and repair what can be repaired: restore a table to its newest
intact metadata or version, drop what cannot be restored, register again a relation whose drop
was killed while a view still reads it, delete orphans."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from pyarrow.fs import FileSelector, FileType
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.exceptions import NoSuchNamespaceError, TableAlreadyExistsError
from pyiceberg.table import StaticTable, Table, Transaction
from pyiceberg.table.update.snapshot import ExpireSnapshots, ManageSnapshots
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from arrayviews.storage.catalog import load_failure
from arrayviews.storage.creation import delete_folder
from arrayviews.storage.expiry import live_files, snapshot_files, table_files
from arrayviews.storage.files import delete_files, filesystem

KIND_PROPERTY = "arrayviews.kind"
SCHEMA_PROPERTY = "arrayviews.schema"  # arrays and array views
NAME_PROPERTIES = ("arrayviews.name",)  # streams and stream views


@dataclass(frozen=True)
class Problem:
    """One thing wrong in the warehouse, and what a repair did (or would do) about it."""

    relation: str
    kind: str
    problem: str
    repair: str
    repaired: bool = False


@dataclass
class CheckReport:
    """What ``check`` found: the relations checked and the problems (empty when all is well)."""

    checked: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return all(p.repaired for p in self.problems)

    def __str__(self) -> str:
        if not self.problems:
            return f"{len(self.checked)} relation(s) checked: no problems"
        lines = [f"{len(self.checked)} relation(s) checked, {len(self.problems)} problem(s):"]
        for p in self.problems:
            state = "repaired" if p.repaired else "to repair"
            lines.append(f"  {p.kind} {p.relation}: {p.problem} [{state}: {p.repair}]")
        return "\n".join(lines)


def _exists(uri: str) -> bool:
    fs, path = filesystem(uri)
    return fs.get_file_info(path).type == FileType.File


def _catalog_row(catalog: SqlCatalog, namespace: str, name: str) -> str | None:
    with Session(catalog.engine) as session:
        return session.execute(
            select(IcebergTables.metadata_location).where(
                IcebergTables.catalog_name == catalog.name,
                IcebergTables.table_namespace == namespace,
                IcebergTables.table_name == name,
            )
        ).scalar_one_or_none()


def _point_catalog(catalog: SqlCatalog, namespace: str, name: str, old: str, new: str) -> bool:
    """Swap the table's metadata pointer from ``old`` to ``new`` (one SQL statement, only if it
    still is ``old``)."""
    with Session(catalog.engine) as session:
        result = session.execute(
            update(IcebergTables)
            .where(
                IcebergTables.catalog_name == catalog.name,
                IcebergTables.table_namespace == namespace,
                IcebergTables.table_name == name,
                IcebergTables.metadata_location == old,
            )
            .values(metadata_location=new, previous_metadata_location=old)
        )
        session.commit()
        return result.rowcount == 1


def _intact(table: Table, snapshot) -> bool:
    """Whether every file ``snapshot`` needs exists."""
    try:
        data, metadata = snapshot_files(table, snapshot, live_only=True)
    except (FileNotFoundError, OSError):
        return False
    return all(_exists(uri) for uri in data | metadata)


def _missing_files(table: Table) -> tuple[int, int]:
    """(missing, total) files the current version needs (its manifests and data files)."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return 0, 0
    try:
        data, metadata = snapshot_files(table, snapshot, live_only=True)
    except (FileNotFoundError, OSError):
        return 1, 1
    needed = data | metadata
    return sum(not _exists(uri) for uri in needed), len(needed)


def _label(properties: dict[str, str], fallback: str) -> tuple[str, str]:
    """(kind, name as created) of an arrayviews table, from its properties."""
    name = next((properties[k] for k in NAME_PROPERTIES if k in properties), fallback)
    if SCHEMA_PROPERTY in properties:
        name = json.loads(properties[SCHEMA_PROPERTY]).get("name", name)
    return properties.get(KIND_PROPERTY, "table"), name


def _restore_metadata(catalog: SqlCatalog, namespace: str, name: str, location: str) -> str | None:
    """The newest metadata file in the table's metadata folder that loads and whose current version
    is intact (None if there is none)."""
    folder = location.rsplit("/metadata/", 1)[0] + "/metadata"
    fs, path = filesystem(folder)
    candidates = sorted(
        (
            info.base_name
            for info in fs.get_file_info(FileSelector(path, allow_not_found=True))
            if info.is_file and info.base_name.endswith(".metadata.json")
        ),
        reverse=True,
    )
    for candidate in candidates:
        uri = f"{folder}/{candidate}"
        try:
            table = StaticTable.from_metadata(uri)
        except Exception:  # noqa: BLE001 - an unreadable candidate is skipped
            continue
        snapshot = table.current_snapshot()
        if snapshot is None or _intact(table, snapshot):
            return uri
    return None


@dataclass(frozen=True)
class _StillRead:
    """A relation in a folder no table owns that views still read."""

    name: str
    kind: str
    metadata: str  # its newest intact metadata file
    updated: int  # when that metadata was written (ms)
    readers: str  # which views read it


def _still_read(
    catalog: SqlCatalog, namespaces, folder: str, refuse_drop: Callable[[str, str], str | None]
) -> _StillRead | None:
    """The relation in a folder no table owns when views read a relation of its name and no table
    holds the name: a drop killed between deleting its catalog row and putting it back for a view
    created meanwhile (storage/creation.py). None otherwise (the folder is an orphan)."""
    metadata = _restore_metadata(catalog, "", "", f"{folder}/metadata/")
    if metadata is None:
        return None
    try:
        loaded = StaticTable.from_metadata(metadata).metadata
    except Exception:  # noqa: BLE001 - _restore_metadata loaded it; a failure now leaves an orphan
        return None
    properties = loaded.properties
    if not any(key in properties for key in (KIND_PROPERTY, SCHEMA_PROPERTY, *NAME_PROPERTIES)):
        return None
    kind, name = _label(properties, "")
    if not name or any(catalog.table_exists((other, name.lower())) for other in namespaces):
        return None
    readers = refuse_drop(kind, name)
    if readers is None:
        return None
    return _StillRead(name, kind, metadata, loaded.last_updated_ms, readers)


def _register_again(catalog: SqlCatalog, namespace: str, relation: _StillRead, repair: bool) -> Problem:
    """Register ``relation`` again under its name (with ``repair``), as the drop would have put it back."""
    problem = f"no catalog entry (a drop killed before it could put it back) while {relation.readers}"
    action = "register it again from its newest intact metadata"
    if not repair:
        return Problem(relation.name, relation.kind, problem, action)
    try:
        catalog.register_table((namespace, relation.name.lower()), relation.metadata)
    except TableAlreadyExistsError:  # created again by another process since the look above
        return Problem(
            relation.name, relation.kind, problem, "none: the name is held again; the folder stays"
        )
    return Problem(relation.name, relation.kind, problem, action, True)


def _roll_back(table: Table) -> int | None:
    """Make the newest intact snapshot current and forget the newer ones, in one commit; returns
    its id (None if no snapshot is intact)."""
    current = table.current_snapshot()
    ancestors = []
    snapshot = current
    while snapshot is not None:
        ancestors.append(snapshot)
        snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
    for candidate in ancestors[1:]:
        if _intact(table, candidate):
            newer = [s.snapshot_id for s in ancestors if s.sequence_number > candidate.sequence_number]
            transaction = Transaction(table)
            ManageSnapshots(transaction).set_current_snapshot(candidate.snapshot_id).commit()
            ExpireSnapshots(transaction).by_ids(newer).commit()
            transaction.commit_transaction()
            return candidate.snapshot_id
    return None


def check_warehouse(
    catalog: SqlCatalog,
    warehouse: str,
    namespaces: tuple[str, ...],
    repair: bool,
    orphans_before: dt.datetime,
    refuse_drop: Callable[[str, str], str | None] = lambda kind, name: None,
) -> CheckReport:
    """Check every table of ``namespaces`` and the folders under the warehouse; with ``repair``,
    repair what can be. ``refuse_drop(kind, name)`` gives a reason not to drop a relation (other
    relations depend on it), or None."""
    report = CheckReport()
    cutoff = orphans_before.timestamp()
    owned: set[str] = set()
    for namespace in namespaces:
        try:
            identifiers = catalog.list_tables(namespace)
        except NoSuchNamespaceError:
            continue
        for identifier in identifiers:
            name = identifier[-1]
            location = _catalog_row(catalog, namespace, name)
            if location is not None:
                owned.add(location.rsplit("/metadata/", 1)[0])
            try:
                table = catalog.load_table(identifier)
            except Exception as error:  # noqa: BLE001 - any load failure is the problem reported
                report.checked.append(name)
                report.problems.append(
                    _repair_unloadable(catalog, namespace, name, location, error, repair, refuse_drop)
                )
                continue
            kind, label = _label(table.metadata.properties, name)
            report.checked.append(label)
            owned.add(table.location().rstrip("/"))
            missing, total = _missing_files(table)
            if missing:
                report.problems.append(
                    _repair_missing_data(catalog, table, kind, label, missing, total, repair, refuse_drop)
                )
                continue
            orphans = _orphan_files(table, cutoff)
            if orphans:
                if repair:
                    delete_files(orphans)
                report.problems.append(
                    Problem(label, kind, f"{len(orphans)} file(s) nothing refers to", "delete them", repair)
                )
    report.problems.extend(
        _orphan_folders(catalog, warehouse, namespaces, owned, cutoff, repair, refuse_drop)
    )
    return report


def _orphan_files(table: Table, cutoff: float) -> list[str]:
    needed = live_files(table)
    return sorted(uri for uri, mtime in table_files(table).items() if uri not in needed and mtime < cutoff)


def _repair_unloadable(catalog, namespace, name, location, error, repair, refuse_drop) -> Problem:
    problem = f"its metadata cannot be read ({load_failure(error)})"
    restored = _restore_metadata(catalog, namespace, name, location) if location else None
    if restored is not None:
        if repair and _point_catalog(catalog, namespace, name, location, restored):
            return Problem(name, "table", problem, f"restored from {restored.rsplit('/', 1)[-1]}", True)
        return Problem(name, "table", problem, f"restore from {restored.rsplit('/', 1)[-1]}", False)
    reason = refuse_drop("table", name)
    if reason:
        return Problem(name, "table", problem, f"cannot drop it: {reason}", False)
    if repair:
        catalog.drop_table((namespace, name))
        if location:
            delete_folder(location.rsplit("/metadata/", 1)[0])
        return Problem(name, "table", problem, "dropped (no intact metadata left)", True)
    return Problem(name, "table", problem, "drop it (no intact metadata left)", False)


def _repair_missing_data(catalog, table, kind, label, missing, total, repair, refuse_drop) -> Problem:
    problem = f"{missing} of {total} file(s) its current version needs are missing"
    if not repair:
        return Problem(label, kind, problem, "roll back to the newest intact version, else drop", False)
    if _roll_back(table) is not None:
        return Problem(label, kind, problem, "rolled back to the newest intact version", True)
    reason = refuse_drop(kind, label)
    if reason:
        return Problem(label, kind, problem, f"no intact version, and cannot drop it: {reason}", False)
    location = table.location()
    catalog.drop_table(table.name())
    delete_folder(location)
    return Problem(label, kind, problem, "dropped (no intact version)", True)


def _orphan_folders(
    catalog: SqlCatalog,
    warehouse: str,
    namespaces,
    owned: set[str],
    cutoff: float,
    repair: bool,
    refuse_drop: Callable[[str, str], str | None],
) -> list[Problem]:
    """Folders under the namespaces' folders that no table owns (a creation that crashed), and old
    scratch files. A folder holding a relation that views still read (a drop killed before it put
    the catalog row back) is registered again instead of deleted."""
    problems = []
    orphans: list[tuple[str, str]] = []  # (folder, its name)
    # by relation name: (namespace, folder, the folder's name, what it holds)
    read: dict[str, list[tuple[str, str, str, _StillRead]]] = {}
    for namespace in namespaces:
        root = f"{warehouse.rstrip('/')}/{namespace}.db"
        fs, path = filesystem(root)
        for info in fs.get_file_info(FileSelector(path, allow_not_found=True)):
            uri = f"{root}/{info.base_name}"
            if uri in owned or info.type != FileType.Directory:
                continue
            newest = max(
                [
                    f.mtime.timestamp()
                    for f in fs.get_file_info(FileSelector(info.path, recursive=True))
                    if f.mtime
                ]
                or [info.mtime.timestamp() if info.mtime else 0.0]
            )
            if newest >= cutoff:
                continue  # perhaps a table being created right now
            still_read = _still_read(catalog, namespaces, uri, refuse_drop)
            if still_read is None:
                orphans.append((uri, info.base_name))
            else:
                read.setdefault(still_read.name.lower(), []).append(
                    (namespace, uri, info.base_name, still_read)
                )
    for candidates in read.values():
        # the newest (the one dropped last); older folders of the name are orphans
        candidates.sort(key=lambda c: c[3].updated)
        orphans.extend((uri, base_name) for _, uri, base_name, _ in candidates[:-1])
        namespace, _, _, newest = candidates[-1]
        problems.append(_register_again(catalog, namespace, newest, repair))
    for uri, base_name in orphans:
        if repair:
            delete_folder(uri)
        problems.append(
            Problem(base_name, "folder", "no table owns it (left by a crash)", "delete it", repair)
        )
    scratch = f"{warehouse.rstrip('/')}/_scratch"
    fs, path = filesystem(scratch)
    old = [
        f"{scratch}/{info.path[len(path.rstrip('/')) + 1 :]}"
        for info in fs.get_file_info(FileSelector(path, recursive=True, allow_not_found=True))
        if info.is_file and info.mtime and info.mtime.timestamp() < cutoff
    ]
    if old:
        if repair:
            delete_files(old)
        problems.append(
            Problem("_scratch", "folder", f"{len(old)} leftover scratch file(s)", "delete them", repair)
        )
    return problems
