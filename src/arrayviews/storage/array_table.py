"""One array as one Iceberg table of chunk fragments: versions, file planning and atomic commits."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression, GreaterThanOrEqual, LessThanOrEqual
from pyiceberg.table import Table

from arrayviews.model.schema import ArraySchema
from arrayviews.storage import kinds, layout
from arrayviews.storage.catalog import current_metadata_location
from arrayviews.storage.expiry import ExpireResult
from arrayviews.storage.file_bounds import live_bounds
from arrayviews.storage.files import new_data_file_uri
from arrayviews.storage.fragment_metadata import read_metadata
from arrayviews.storage.versioned import (
    KIND_PROPERTY,
    PREFIX,
    VERSION_KEY,
    SnapshotRecord,
    StoredFile,
    VersionedTable,
)


class _PayloadStatisticsFilter(logging.Filter):
    """Payload columns are written without min/max statistics on purpose (see files.write_parquet);
    pyiceberg would warn about each of them on every commit."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("PyArrow statistics missing")


logging.getLogger("pyiceberg.io.pyarrow").addFilter(_PayloadStatisticsFilter())

SCHEMA_PROPERTY = PREFIX + "schema"
OPERATION_KEY = PREFIX + "operation"
ADDED_KEY = PREFIX + "cells-added"
REMOVED_KEY = PREFIX + "cells-removed"
TOTAL_KEY = PREFIX + "cells-total"
PROPERTY_PREFIX = PREFIX


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

    @property
    def changes_cells(self) -> bool:
        """False for a version that only rewrites how cells are stored (a compaction): the array
        holds the same cells before and after it, so no view over it falls behind."""
        return self.operation not in CELL_PRESERVING_OPERATIONS


#: Operations whose versions hold exactly the cells of the version before (files rewritten only).
CELL_PRESERVING_OPERATIONS = frozenset({"compact"})


def _version_info(snapshot: SnapshotRecord) -> VersionInfo | None:
    summary = snapshot.summary
    if VERSION_KEY not in summary:
        return None
    return VersionInfo(
        version=int(summary[VERSION_KEY]),
        snapshot_id=snapshot.snapshot_id,
        time=snapshot.time,
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


#: How errors name a chunk-fragment table, per the kind property it was created with.
_LABELS = {
    kinds.STORED_ARRAY: "array",
    kinds.STORED_ARRAY_VIEW: "view",
    kinds.STORED_UNCERTAIN: "uncertain array",
}


class ArrayTable(VersionedTable):
    """The Iceberg table storing one array's fragments; all reads and commits of the array go here."""

    def __init__(self, table: Table, schema: ArraySchema) -> None:
        super().__init__(table)
        self.schema = schema

    @property
    def name(self) -> str:
        return self.schema.name

    @property
    def label(self) -> str:
        """``array A``, ``view V`` or ``uncertain array U``: how errors name this table, by its kind."""
        return f"{_LABELS.get(self.table.metadata.properties.get(KIND_PROPERTY), 'array')} {self.name}"

    def new_file_uri(self) -> str:
        return new_data_file_uri(self.data_directory)

    def refresh(self) -> ArrayTable:
        """Follow the array's newest metadata (returns self): the catalog is asked for the table's
        metadata location on every call, and only when it names other metadata than the table
        holds is the table loaded again (a metadata file is never rewritten in place, so the same
        location is the same metadata; a commit by any process moves the location)."""
        location = current_metadata_location(self.table.catalog, self.table.name())
        if location is None or location != self.table.metadata_location:
            super().refresh()
        return self

    def current_version(self) -> int:
        return self._current_of()[0]

    def snapshot_of(self, version: int) -> int | None:
        current_version, snapshot_id = self._current_of()
        if version == current_version and version != 0:
            return snapshot_id
        return super().snapshot_of(version)

    def _current_of(self) -> tuple[int, int | None]:
        """The current version and its snapshot id, worked out once per metadata object held (the
        metadata models are immutable: a refresh or a commit puts a new object in its place)."""
        metadata = self.table.metadata
        kept = self.__dict__.get("_current_kept")
        if kept is not None and kept[0] is metadata:
            return kept[1], kept[2]
        version = super().current_version()
        snapshot = self.table.current_snapshot()
        self._current_kept = (metadata, version, None if snapshot is None else snapshot.snapshot_id)
        return version, self._current_kept[2]

    # -- versions --------------------------------------------------------------------------------
    def versions(self) -> list[VersionInfo]:
        """Every version still held, oldest first (version 0, the empty array, has no snapshot)."""
        return self.versioned(_version_info)

    def current(self) -> VersionInfo | None:
        snapshot = self.current_snapshot()
        return None if snapshot is None else _version_info(snapshot)

    # -- planning --------------------------------------------------------------------------------
    def data_files(self, version: int | None = None, chunk_ranges=None) -> list[StoredFile]:
        """Data files of a version (current by default) that may hold chunks in ``chunk_ranges``
        (chosen by the chunk-number bounds of the version's listing, as a planned scan would)."""
        if chunk_ranges is None:
            return self.live_files(version)
        bounds = live_bounds(self, self.current_version() if version is None else version)
        if bounds is None:
            return self.live_files(version, chunk_box_filter(self.schema, chunk_ranges))
        return [bounds.files[k] for k in bounds.overlapping(chunk_ranges)]

    def read_metadata(self, version: int | None = None, chunk_ranges=None) -> pa.Table:
        """Per-fragment metadata (chunk numbers, cell counts, bytes, min/max, version) without cell data."""
        files = [f.file_path for f in self.data_files(version, chunk_ranges)]
        columns = layout.metadata_columns(self.schema)
        return read_metadata(files, columns, layout.fragment_schema(self.schema))

    # -- commits ---------------------------------------------------------------------------------
    def commit(
        self,
        added: list[str],
        removed: list[StoredFile],
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
        base = self.check_base(expected_version)
        current = self.current()
        total = (0 if current is None else current.cells_total) + info.cells_added - info.cells_removed
        version = expected_version + 1
        self.commit_files(base, added, removed, version_summary(version, total, info))
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
    return array.expire(older_than, orphans_before or older_than)
