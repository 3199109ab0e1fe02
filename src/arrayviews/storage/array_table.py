"""One array as one Iceberg table of chunk fragments: versions, file planning and atomic commits."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, GreaterThanOrEqual, LessThanOrEqual
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from arrayviews.model.errors import NotFoundError
from arrayviews.model.schema import ArraySchema
from arrayviews.storage import layout
from arrayviews.storage.expiry import ExpireResult, expire_table
from arrayviews.storage.files import new_data_file_uri, read_parquet_files
from arrayviews.storage.snapshots import BaseMovedError, commit_snapshot


class _PayloadStatisticsFilter(logging.Filter):
    """Payload columns are written without min/max statistics on purpose (see files.write_parquet);
    pyiceberg would warn about each of them on every commit."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("PyArrow statistics missing")


logging.getLogger("pyiceberg.io.pyarrow").addFilter(_PayloadStatisticsFilter())

SCHEMA_PROPERTY = "arrayviews.schema"
KIND_PROPERTY = "arrayviews.kind"
VERSION_KEY = "arrayviews.version"
OPERATION_KEY = "arrayviews.operation"
ADDED_KEY = "arrayviews.cells-added"
REMOVED_KEY = "arrayviews.cells-removed"
TOTAL_KEY = "arrayviews.cells-total"
PROPERTY_PREFIX = "arrayviews."


@dataclass(frozen=True)
class VersionInfo:
    """One committed version of an array."""

    version: int
    snapshot_id: int
    time: dt.datetime
    operation: str
    cells_added: int
    cells_removed: int
    cells_total: int
    properties: dict[str, str] = field(default_factory=dict)


def _version_info(snapshot) -> VersionInfo | None:
    summary = snapshot.summary.additional_properties if snapshot.summary else {}
    if VERSION_KEY not in summary:
        return None
    return VersionInfo(
        version=int(summary[VERSION_KEY]),
        snapshot_id=snapshot.snapshot_id,
        time=dt.datetime.fromtimestamp(snapshot.timestamp_ms / 1000, tz=dt.UTC),
        operation=summary.get(OPERATION_KEY, "?"),
        cells_added=int(summary.get(ADDED_KEY, 0)),
        cells_removed=int(summary.get(REMOVED_KEY, 0)),
        cells_total=int(summary.get(TOTAL_KEY, 0)),
        properties={
            k[len(PROPERTY_PREFIX) :]: v
            for k, v in summary.items()
            if k.startswith(PROPERTY_PREFIX)
            and k not in (VERSION_KEY, OPERATION_KEY, ADDED_KEY, REMOVED_KEY, TOTAL_KEY)
        },
    )


@dataclass(frozen=True)
class CommitInfo:
    """What a commit did, recorded in the snapshot summary."""

    operation: str
    cells_added: int = 0
    cells_removed: int = 0
    properties: dict[str, str] = field(default_factory=dict)


def chunk_box_filter(schema: ArraySchema, ranges: Sequence[tuple[int, int]] | None) -> BooleanExpression:
    """An Iceberg row filter selecting fragments whose chunk numbers lie in per-dimension ranges."""
    if ranges is None:
        return AlwaysTrue()
    expression: BooleanExpression = AlwaysTrue()
    for dimension, (first, last) in zip(schema.dimension_names, ranges, strict=True):
        column = layout.chunk_column(dimension)
        expression = And(expression, And(GreaterThanOrEqual(column, first), LessThanOrEqual(column, last)))
    return expression


class ArrayTable:
    """The Iceberg table storing one array's fragments; all reads and commits of the array go here."""

    def __init__(self, table: Table, schema: ArraySchema) -> None:
        self.table = table
        self.schema = schema

    @property
    def name(self) -> str:
        return self.schema.name

    @property
    def data_directory(self) -> str:
        return self.table.location().rstrip("/") + "/data"

    def new_file_uri(self) -> str:
        return new_data_file_uri(self.data_directory)

    def refresh(self) -> ArrayTable:
        self.table = self.table.refresh()
        return self

    # -- versions --------------------------------------------------------------------------------
    def versions(self) -> list[VersionInfo]:
        """Every version still held, oldest first (version 0, the empty array, has no snapshot)."""
        result = [_version_info(s) for s in self.table.metadata.snapshots]
        return sorted((v for v in result if v is not None), key=lambda v: v.version)

    def current(self) -> VersionInfo | None:
        snapshot = self.table.current_snapshot()
        return None if snapshot is None else _version_info(snapshot)

    def current_version(self) -> int:
        info = self.current()
        return 0 if info is None else info.version

    def snapshot_of(self, version: int) -> int | None:
        """Snapshot id of ``version`` (None for version 0), or NotFoundError if it is unknown or expired."""
        if version == 0:
            return None
        current = self.current()
        if current is not None and current.version == version:
            return current.snapshot_id
        for snapshot in self.table.metadata.snapshots:
            summary = snapshot.summary.additional_properties if snapshot.summary else {}
            if summary.get(VERSION_KEY) == str(version):
                return snapshot.snapshot_id
        known = ", ".join(str(v.version) for v in self.versions()) or "none"
        raise NotFoundError(f"array {self.name} has no version {version} (versions held: {known})")

    # -- planning --------------------------------------------------------------------------------
    def data_files(self, version: int | None = None, chunk_ranges=None) -> list[DataFile]:
        """Data files of a version (current by default) that may hold chunks in ``chunk_ranges``."""
        version = self.current_version() if version is None else version
        snapshot_id = self.snapshot_of(version)
        if snapshot_id is None:
            return []
        scan = self.table.scan(
            row_filter=chunk_box_filter(self.schema, chunk_ranges), snapshot_id=snapshot_id
        )
        return [task.file for task in scan.plan_files()]

    def read_metadata(self, version: int | None = None, chunk_ranges=None) -> pa.Table:
        """Per-fragment metadata (chunk numbers, cell counts, bytes, min/max, version) without cell data."""
        files = [f.file_path for f in self.data_files(version, chunk_ranges)]
        columns = layout.metadata_columns(self.schema)
        return read_parquet_files(files, columns=columns, schema=layout.fragment_schema(self.schema))

    # -- commits ---------------------------------------------------------------------------------
    def commit(
        self,
        added: list[str],
        removed: list[DataFile],
        info: CommitInfo,
        expected_version: int,
    ) -> int:
        """Commit added data files and removed ones as **one** snapshot on top of version
        ``expected_version`` (the version the write was planned on); returns the new version.

        The table object must still hold the metadata the write was planned on (it is not read
        again here: the catalog checks, as it swaps the metadata, that the array is still at that
        snapshot). Raises BaseMovedError (a CommitConflictError; nothing committed) if it is not,
        so the version number, the cell total and every check the caller made hold for what is
        committed.
        """
        label = f"array {self.name}"
        current = self.current()
        current_version = 0 if current is None else current.version
        base = self.table.metadata.current_snapshot_id
        if current_version != expected_version or base != (None if current is None else current.snapshot_id):
            raise BaseMovedError(
                label, f"now version {current_version}, planned on version {expected_version}"
            )
        total = (0 if current is None else current.cells_total) + info.cells_added - info.cells_removed
        version = current_version + 1
        properties = version_summary(version, total, info)
        self.table = commit_snapshot(self.table, base, added, removed, properties, label)
        return version


def version_summary(version: int, total: int, info: CommitInfo) -> dict[str, str]:
    """The snapshot summary of array version ``version`` holding ``total`` cells after ``info``."""
    return {
        VERSION_KEY: str(version),
        OPERATION_KEY: info.operation,
        ADDED_KEY: str(info.cells_added),
        REMOVED_KEY: str(info.cells_removed),
        TOTAL_KEY: str(total),
        **{PROPERTY_PREFIX + k: str(v) for k, v in info.properties.items()},
    }


def expire(
    array: ArrayTable, older_than: dt.datetime, orphans_before: dt.datetime | None = None
) -> ExpireResult:
    """Drop versions committed before ``older_than`` (never the current one) and delete every file no
    remaining version needs, including files of writes that crashed before committing."""

    def version_of(snapshot) -> int | None:
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        return int(summary[VERSION_KEY]) if VERSION_KEY in summary else None

    array.table, result = expire_table(array.table, older_than, orphans_before or older_than, version_of)
    return result
