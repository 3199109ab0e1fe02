"""An Iceberg table partitioned by time part: one snapshot per change, parts read by range, per-part history.

Rows are the user's columns plus ``_part``, the part number (``floor(unix seconds / partition
length)``); the table is partitioned by identity(``_part``) and every data file holds rows of one
part only, so a part is replaced or dropped by swapping whole files. Every change is one snapshot
whose summary names the version, the operation and the parts it wrote (``"5-9,12"``); the history
of parts (what changed since a version, when each part was last written) is read from those
summaries alone.
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import json
import logging
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow.fs import FileSelector
from pyiceberg import types as iceberg
from pyiceberg.catalog import Catalog
from pyiceberg.conversions import from_bytes
from pyiceberg.exceptions import (
    NoSuchNamespaceError,
    NoSuchTableError,
)
from pyiceberg.manifest import ManifestContent, ManifestFile
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.table import Table
from pyiceberg.transforms import IdentityTransform
from pyspark.sql import types as T

from arrayviews.model.errors import NotFoundError, ValidationError
from arrayviews.model.names import PART
from arrayviews.storage import kinds, part_index, recent_parts
from arrayviews.storage.catalog import ensure_namespace, load_failure, load_tables
from arrayviews.storage.column_types import (
    arrow_schema_of,
    check_storable,
    iceberg_schema_of,
    with_part,
)
from arrayviews.storage.creation import create_table, delete_folder
from arrayviews.storage.expiry import ExpireResult
from arrayviews.storage.files import conform, delete_files, filesystem, new_data_file_uri, write_parquet
from arrayviews.storage.versioned import (
    KIND_PROPERTY,
    PREFIX,
    VERSION_KEY,
    SnapshotRecord,
    StoredFile,
    VersionedTable,
)

logger = logging.getLogger(__name__)

LENGTH_PROPERTY = PREFIX + "partition-length"
TIME_COLUMN_PROPERTY = PREFIX + "time-column"
DEFINITION_PROPERTY = PREFIX + "definition"
NAME_PROPERTY = PREFIX + "name"
SCHEMA_PROPERTY = PREFIX + "spark-schema"
#: Table property of a stream view: "true" for a helper view generated to serve another one.
HELPER_PROPERTY = PREFIX + "viewdf.helper"

OPERATION_KEY = PREFIX + "operation"
PARTS_KEY = PREFIX + "parts"
RESTORED_KEY = PREFIX + "restored-parts"
DROPPED_BELOW_KEY = PREFIX + "dropped-below"
BATCH_KEY = PREFIX + "batch-id"
_RESERVED_KEYS = (VERSION_KEY, OPERATION_KEY, PARTS_KEY, RESTORED_KEY, DROPPED_BELOW_KEY, BATCH_KEY)
#: Table property: batch ids of expired versions (JSON: id -> version), so they stay known.
EXPIRED_BATCHES_PROPERTY = PREFIX + "expired-batch-ids"
#: Iceberg properties of every part table made from now on. A part table's files are found by their
#: part (the partition value), never by other columns' statistics, so manifests keep metrics of
#: ``_part`` only (its bounds are what the partition value is taken from when a file is committed):
#: an entry then encodes a few fields instead of six maps over every column, which makes writing
#: (and merging, and reading back) the manifests of a per-step commit several times cheaper.
PART_TABLE_PROPERTIES = {
    "write.metadata.metrics.default": "none",
    f"write.metadata.metrics.column.{PART}": "full",
}

#: Files bigger than this are split (each still holding one part).
TARGET_FILE_BYTES = 128 * 1024 * 1024


# -- part sets as text ------------------------------------------------------------------------------
def format_parts(parts: Iterable[int]) -> str:
    """Parts as compact text: runs of consecutive parts become ``low-high`` (``"-3--1,5-9,12"``)."""
    values = np.unique(np.fromiter(parts, dtype=np.int64))
    if values.size == 0:
        return ""
    breaks = np.flatnonzero(np.diff(values) != 1) + 1
    starts = values[np.concatenate([[0], breaks])]
    ends = values[np.concatenate([breaks - 1, [values.size - 1]])]
    return ",".join(str(s) if s == e else f"{s}-{e}" for s, e in zip(starts, ends, strict=True))


_RUN = re.compile(r"^(-?\d+)(?:-(-?\d+))?$")


def parse_parts(text: str) -> list[int]:
    """The sorted parts named by text written by :func:`format_parts`."""
    parts: list[int] = []
    for piece in filter(None, (p.strip() for p in text.split(","))):
        match = _RUN.match(piece)
        if match is None:
            raise ValueError(f"malformed part list {text!r}")
        low = int(match.group(1))
        high = low if match.group(2) is None else int(match.group(2))
        parts.extend(range(low, high + 1))
    return sorted(set(parts))


# -- types ------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def _schema_of(text: str) -> T.StructType:
    """A table's Spark schema from its property text (parsed once per text: schemas are read for
    every part built and every file staged)."""
    return T.StructType.fromJson(json.loads(text))


@functools.lru_cache(maxsize=256)
def _arrow_schema_of_text(text: str) -> pa.Schema:
    return arrow_schema_of(_schema_of(text))


def _prefixed(key: str) -> str:
    return key if key.startswith(PREFIX) else PREFIX + key


def _caller_properties(properties: dict[str, str]) -> dict[str, str]:
    """``arrayviews.*`` entries other than the reserved ones, without the prefix."""
    return {
        key[len(PREFIX) :]: value
        for key, value in properties.items()
        if key.startswith(PREFIX) and key not in _RESERVED_KEYS
    }


_part_of = part_index.part_of


# -- results ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StagedFile:
    """A data file written by an executor (rows of one part), not yet committed."""

    uri: str
    part: int
    rows: int
    nbytes: int


@dataclass(frozen=True)
class PartVersion:
    """One committed version of a part table."""

    version: int
    snapshot_id: int
    time: dt.datetime
    operation: str
    parts: list[int]
    properties: dict[str, str] = field(default_factory=dict)
    dropped_below: int | None = None
    #: Parts written again with unchanged content (re-materialized after retention dropped them).
    restored: list[int] = field(default_factory=list)
    batch_id: str | None = None


class UnpartitionedRowsError(ValidationError):
    """Rows reached staging without a part number (their time was null); nothing was staged."""

    def __init__(self, message: str, rows: int) -> None:
        super().__init__(message, column=PART, value=rows)
        self.rows = rows


# -- the staging job --------------------------------------------------------------------------------
STAGED_SCHEMA = pa.schema(
    [("uri", pa.string()), ("part", pa.int64()), ("rows", pa.int64()), ("nbytes", pa.int64())]
)


def part_writer(
    directory: str, arrow_schema: pa.Schema, token: str, target_bytes: int, keep_rows: bool = False
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The task function of staging (here and in Spark tasks): rows arrive sorted by part; each run
    of one part becomes a file (split past ``target_bytes``). Reports (uri, part, rows, bytes) per
    file and one row with a null uri counting the rows that had no part. With ``keep_rows`` (staging
    in the process that will read the parts next) the rows written stay in memory
    (``storage.recent_parts``)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        reports: list[tuple[str | None, int | None, int, int]] = []
        pending: list[pa.Table] = []
        pending_part: int | None = None
        pending_bytes = 0
        partless = 0

        def flush() -> None:
            table = pa.concat_tables(pending)
            uri = new_data_file_uri(directory, prefix=f"{token}-")
            reports.append((uri, pending_part, table.num_rows, write_parquet(table, uri)))
            if keep_rows:
                recent_parts.remember(uri, table, directory, pending_part)

        for batch in batches:
            table = conform(batch, arrow_schema)
            if table.column(PART).null_count:
                partless += table.column(PART).null_count
                table = table.filter(pc.is_valid(table.column(PART)))
            if table.num_rows == 0:
                continue
            parts = table.column(PART).to_numpy()
            starts = np.concatenate([[0], np.flatnonzero(np.diff(parts)) + 1])
            ends = np.append(starts[1:], parts.size)
            for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
                part = int(parts[start])
                if pending and (part != pending_part or pending_bytes >= target_bytes):
                    flush()
                    pending, pending_bytes = [], 0
                piece = table.slice(start, end - start)
                pending.append(piece)
                pending_part = part
                pending_bytes += piece.nbytes
        if pending:
            flush()
        if partless:
            reports.append((None, None, partless, 0))
        if reports:
            columns = list(zip(*reports, strict=True))
            yield pa.RecordBatch.from_arrays(
                [pa.array(column, type=f.type) for column, f in zip(columns, STAGED_SCHEMA, strict=True)],
                schema=STAGED_SCHEMA,
            )

    return run


def delete_token_files(directory: str, token: str) -> None:
    """Delete the files of one staging job (named ``<token>-...``), e.g. after some of its tasks failed."""
    fs, path = filesystem(directory)
    found = fs.get_file_info(FileSelector(path, allow_not_found=True))
    delete_files(
        [
            f"{directory}/{info.base_name}"
            for info in found
            if info.is_file and info.base_name.startswith(token)
        ]
    )


# -- the table --------------------------------------------------------------------------------------
class PartTable(VersionedTable):
    """One part-partitioned Iceberg table: metadata, planning by part range, staging and commits
    (the Spark jobs over it are in ``execution.part_jobs``)."""

    def __init__(self, catalog: Catalog, table: Table) -> None:
        super().__init__(table)
        self.catalog = catalog

    # -- creating and finding ---------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        catalog: Catalog,
        namespace: str,
        name: str,
        spark_schema: T.StructType,
        partition_length: int,
        kind: str,
        properties: dict[str, str] | None = None,
    ) -> PartTable:
        """Create an empty table (version 0) of ``spark_schema`` plus ``_part``.

        ``properties`` become table properties (``arrayviews.`` is prefixed when missing), e.g.
        ``{"time-column": "ts"}`` or ``{"definition": "..."}``.
        """
        label = f"{kind} {name}"
        if (
            isinstance(partition_length, bool)
            or not isinstance(partition_length, int)
            or partition_length <= 0
        ):
            raise ValidationError(
                f"{label}: partition length must be a positive integer (seconds), got {partition_length!r}",
                array=name,
                value=partition_length,
            )
        check_storable(spark_schema, label, nested=kind == kinds.STORED_STREAM_VIEW)
        schema = iceberg_schema_of(spark_schema)
        part_field = schema.find_field(PART)
        spec = PartitionSpec(
            PartitionField(
                source_id=part_field.field_id, field_id=1000, transform=IdentityTransform(), name=PART
            )
        )
        table_properties = {
            KIND_PROPERTY: kind,
            LENGTH_PROPERTY: str(partition_length),
            NAME_PROPERTY: name,
            SCHEMA_PROPERTY: spark_schema.json(),
            **PART_TABLE_PROPERTIES,
            **{_prefixed(k): str(v) for k, v in (properties or {}).items()},
        }
        ensure_namespace(catalog, namespace)
        table = create_table(
            catalog,
            namespace,
            name,
            schema,
            table_properties,
            f"a table named {name} in {namespace}",
            partition_spec=spec,
        )
        return cls(catalog, table)

    @classmethod
    def open(cls, catalog: Catalog, namespace: str, name: str) -> PartTable:
        try:
            return cls(catalog, catalog.load_table((namespace, name.lower())))
        except (NoSuchTableError, NoSuchNamespaceError):
            raise NotFoundError(f"no table named {name} in {namespace}") from None
        except Exception as error:  # noqa: BLE001 - e.g. its metadata file is gone
            raise NotFoundError(
                f"{name} cannot be read ({load_failure(error)}); run `arrayviews check`"
            ) from None

    @staticmethod
    def exists(catalog: Catalog, namespace: str, name: str) -> bool:
        return catalog.table_exists((namespace, name.lower()))

    @classmethod
    def load_all(cls, catalog: Catalog, namespace: str) -> list[PartTable]:
        """Every readable part table of ``namespace``, each loaded once (broken ones are logged)."""
        try:
            loaded = load_tables(catalog, namespace)
        except NoSuchNamespaceError:
            return []
        found = []
        for identifier, table in loaded:
            if isinstance(table, Exception):  # a broken table is reported by check()
                logger.warning(
                    "table %s cannot be read (%s); run `arrayviews check`",
                    identifier[-1],
                    load_failure(table),
                )
            elif NAME_PROPERTY in table.metadata.properties:
                found.append(cls(catalog, table))
        return found

    @classmethod
    def names(cls, catalog: Catalog, namespace: str, kind: str | None = None) -> list[str]:
        """Names (as created) of the part tables in ``namespace``, optionally only those of one kind."""
        return sorted(
            table.name for table in cls.load_all(catalog, namespace) if kind is None or table.kind == kind
        )

    def drop(self, missing_ok: bool = False) -> None:
        """Drop the table from the catalog and delete its files (``missing_ok``: a table another
        process dropped already is not an error)."""
        location = self.location
        try:
            self.catalog.drop_table(self.table.name())
        except NoSuchTableError:
            if not missing_ok:
                raise
        delete_folder(location)

    # -- description ------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.properties[NAME_PROPERTY]

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"

    @property
    def partition_length(self) -> int:
        return int(self.properties[LENGTH_PROPERTY])

    def set_properties(self, **properties: str) -> None:
        """Set table properties (settings such as a view's lateness allowance) in one commit."""
        self.update_properties(properties)

    @property
    def table_properties(self) -> dict[str, str]:
        """The ``arrayviews.*`` table properties, without the prefix (``time-column``, ``definition``...)."""
        return {k[len(PREFIX) :]: v for k, v in self.properties.items() if k.startswith(PREFIX)}

    @property
    def spark_schema(self) -> T.StructType:
        """The user columns (without ``_part``)."""
        return _schema_of(self.table.metadata.properties[SCHEMA_PROPERTY])

    @property
    def read_schema(self) -> T.StructType:
        """The user columns and ``_part``, as reads return them."""
        return with_part(self.spark_schema)

    @property
    def arrow_schema(self) -> pa.Schema:
        return _arrow_schema_of_text(self.table.metadata.properties[SCHEMA_PROPERTY])

    # -- versions ---------------------------------------------------------------------------------
    def versions(self, after: int = 0) -> list[PartVersion]:
        """Every version still held (after version ``after`` only), oldest first (version 0, the
        empty table, has no snapshot)."""

        def record(snapshot: SnapshotRecord) -> PartVersion:
            summary = snapshot.summary
            dropped = summary.get(DROPPED_BELOW_KEY)
            return PartVersion(
                version=int(summary[VERSION_KEY]),
                snapshot_id=snapshot.snapshot_id,
                time=snapshot.time,
                operation=summary.get(OPERATION_KEY, "?"),
                parts=parse_parts(summary.get(PARTS_KEY, "")),
                properties=_caller_properties(summary),
                dropped_below=None if dropped is None else int(dropped),
                restored=parse_parts(summary.get(RESTORED_KEY, "")),
                batch_id=summary.get(BATCH_KEY),
            )

        return self.versioned(record, after)

    def latest_properties(self) -> dict[str, str]:
        """The caller properties of the current snapshot (without the ``arrayviews.`` prefix)."""
        return _caller_properties(self.current_summary())

    def part_updated(self) -> dict[int, dt.datetime]:
        """For each part holding data, the time of the latest snapshot still held that wrote it
        (parts removed by retention are left out)."""
        updated: dict[int, dt.datetime] = {}
        for info in self.versions():
            if info.dropped_below is not None:
                updated = {p: t for p, t in updated.items() if p >= info.dropped_below}
            updated.update(dict.fromkeys(info.parts, info.time))
            updated.update(dict.fromkeys(info.restored, info.time))
        return dict(sorted(updated.items()))

    def changes_since(self, version: int) -> list[int]:
        """Parts whose content changed in the versions after ``version``: written or replaced
        (retention drops and parts restored with unchanged content not included)."""
        return sorted({p for info in self.versions(after=version) for p in info.parts})

    def batch_version(self, batch_id: str) -> int | None:
        """The version that appended the batch ``batch_id`` (versions expired since included), or None."""
        for info in self.versions():
            if info.batch_id == batch_id:
                return info.version
        expired = json.loads(self.properties.get(EXPIRED_BATCHES_PROPERTY, "{}"))
        return expired.get(batch_id)

    # -- planning ---------------------------------------------------------------------------------
    def _live_files(
        self, keep: Callable[[int], bool] | None = None, version: int | None = None
    ) -> list[StoredFile]:
        """The data files of a version (current by default) whose part ``keep`` accepts (all without
        it). Every file holds one part, so this is exact; the listing of a snapshot is kept and carried
        forward from commit to commit (``VersionedTable.live_files``), not planned again per range."""
        files = self.live_files(version)
        return files if keep is None else [f for f in files if keep(_part_of(f))]

    def _files_of_range(self, low: int, high: int, version: int | None = None) -> list[StoredFile]:
        """The data files of parts ``low`` to ``high`` (inclusive) of a version (current by default),
        in part order: a bisection of the snapshot's files sorted by part, which is kept per
        snapshot, so a step's reads of a view holding many parts do not filter all of them."""
        parts, files = self._part_index(version)
        return files[bisect.bisect_left(parts, low) : bisect.bisect_right(parts, high)]

    def lowest_part(self, version: int | None = None) -> int | None:
        """The lowest part with data files in a version (current by default); None when none has."""
        parts, _ = self._part_index(version)
        return parts[0] if parts else None

    def _part_index(self, version: int | None) -> tuple[list[int], list[StoredFile]]:
        """The data files of a version sorted by part, with their parts (kept per snapshot)."""
        snapshot_id = self.snapshot_of(self.current_version() if version is None else version)
        if snapshot_id is None:
            return [], []
        table_uuid = str(self.table.metadata.table_uuid)
        found = part_index.kept_index(table_uuid, snapshot_id)
        if found is None:
            found = part_index.index_of_listing(table_uuid, snapshot_id, self._listed(snapshot_id))
        return found

    def _note_commit(
        self, base_snapshot_id: int | None, added: list[StoredFile], removed: Sequence[StoredFile]
    ) -> None:
        """Also carry the base snapshot's files sorted by part forward to the snapshot just
        committed (storage/part_index.py): sorting every file again made a stream's step cost
        grow with the stream's length."""
        super()._note_commit(base_snapshot_id, added, removed)
        snapshot_id = self.table.metadata.current_snapshot_id
        if base_snapshot_id is not None and snapshot_id in self._listing:
            part_index.carry_forward(
                str(self.table.metadata.table_uuid), base_snapshot_id, snapshot_id, added, removed
            )

    def files_of_parts(self, low: int, high: int, version: int | None = None) -> list[str]:
        """URIs of the data files of parts ``low`` to ``high`` (inclusive) in a version (current by
        default), in part order."""
        return [f.file_path for f in self._files_of_range(low, high, version)]

    def sized_files_of_parts(self, low: int, high: int) -> list[tuple[str, int, int, int]]:
        """(uri, part, rows, bytes) of the data files of parts ``low`` to ``high`` now, in part
        order, from the manifests (no data is read)."""
        return [
            (f.file_path, _part_of(f), f.record_count, f.file_size_in_bytes)
            for f in self._files_of_range(low, high)
        ]

    def files_by_part(self, version: int | None = None) -> dict[int, list[str]]:
        """The data file URIs of every part of a version (current by default)."""
        found: dict[int, list[str]] = {}
        for data_file in self._live_files(None, version):
            found.setdefault(_part_of(data_file), []).append(data_file.file_path)
        return dict(sorted(found.items()))

    def part_range(self) -> tuple[int, int] | None:
        """Lowest and highest part holding data now, from manifest metadata only (no data is read;
        kept per snapshot, and each manifest's bounds per manifest: storage/part_index.py)."""
        snapshot = self.table.current_snapshot()
        if snapshot is None:
            return None
        return part_index.part_range(
            str(self.table.metadata.table_uuid), snapshot, self.table.io, self._manifest_bounds
        )

    def _manifest_bounds(self, manifest: ManifestFile) -> tuple[int, int] | None:
        if manifest.content != ManifestContent.DATA:
            return None
        if not (manifest.has_added_files() or manifest.has_existing_files()):
            return None
        summary = manifest.partitions[0] if manifest.partitions else None
        # The manifest's summary also covers entries it marks deleted: trust it only when there are none.
        if manifest.deleted_files_count == 0 and summary is not None and summary.lower_bound is not None:
            long_type = iceberg.LongType()
            return from_bytes(long_type, summary.lower_bound), from_bytes(long_type, summary.upper_bound)
        parts = [
            _part_of(e.data_file) for e in manifest.fetch_manifest_entry(self.table.io, discard_deleted=True)
        ]
        return (min(parts), max(parts)) if parts else None

    # -- writing ----------------------------------------------------------------------------------
    def hold_recent(self, depth: int) -> None:
        """This process reads parts of this table again up to ``depth`` parts after writing them
        (a view reading its own part j-depth, a query over the parts j-depth .. j): the rows of the
        newest ``depth + 1`` parts it stages are held in memory for those reads
        (``storage.recent_parts``)."""
        recent_parts.hold(self.data_directory, depth)

    def stage_local(
        self,
        rows: pa.Table,
        target_bytes: int = TARGET_FILE_BYTES,
        statistics: list[str] | None = None,
        text_dictionaries: bool = True,
    ) -> list[StagedFile]:
        """Write rows held by the driver (user columns in storage types and ``_part``) as Parquet
        files, one part per file, in this process: no Spark job for a small batch. Same files,
        checks and cleanup as staging by Spark (``execution.part_jobs``). For one part's rows in one
        file: ``statistics``, the only columns given Parquet statistics; ``text_dictionaries``
        False, no dictionaries for its text columns (storage/files.py). Rows past one file are
        written with the defaults of ``part_writer``."""
        token = uuid.uuid4().hex[:12]
        parts = rows.column(PART)
        bounds = pc.min_max(parts)
        one_part = parts.null_count == 0 and bounds["min"] == bounds["max"]
        # one file, as part_writer would (the buffers' total bounds Table.nbytes, at a fraction of its
        # cost; an empty table still has buffers, and makes no file)
        if one_part and rows.num_rows and rows.get_total_buffer_size() < target_bytes:
            return [
                self._stage_one_file(
                    conform(rows, self.arrow_schema),
                    token,
                    bounds["min"].as_py(),
                    statistics,
                    text_dictionaries,
                )
            ]
        # one part (a stream view's step) is already in part order
        ordered = rows if one_part else rows.take(pc.sort_indices(rows, [(PART, "ascending")]))
        run = part_writer(self.data_directory, self.arrow_schema, token, target_bytes, keep_rows=True)
        try:
            reports = pa.Table.from_batches(list(run(iter(ordered.to_batches()))), schema=STAGED_SCHEMA)
        except BaseException:
            delete_token_files(self.data_directory, token)
            raise
        return self.staged_from(reports.to_pylist())

    def _stage_one_file(
        self, rows: pa.Table, token: str, part: int, statistics: list[str] | None, text_dictionaries: bool
    ) -> StagedFile:
        """``rows`` of one part as one staged file (what ``part_writer`` makes of them, without its
        run-splitting and its reports)."""
        uri = new_data_file_uri(self.data_directory, prefix=f"{token}-")
        try:
            size = write_parquet(rows, uri, statistics=statistics, text_dictionaries=text_dictionaries)
        except BaseException:
            delete_token_files(self.data_directory, token)
            raise
        recent_parts.remember(uri, rows, self.data_directory, part)
        return StagedFile(uri, part, rows.num_rows, size)

    def staged_from(self, reports: Iterable) -> list[StagedFile]:
        """The staged files named by the reports of :func:`part_writer` (rows with uri, part, rows,
        nbytes, from any executor), in part order; when some rows had no part number, every file is
        deleted and UnpartitionedRowsError raised."""
        reports = list(reports)
        staged = [StagedFile(r["uri"], r["part"], r["rows"], r["nbytes"]) for r in reports if r["uri"]]
        partless = sum(r["rows"] for r in reports if r["uri"] is None)
        if partless:
            self.discard(staged)
            raise UnpartitionedRowsError(
                f"{self.kind} {self.name}: {partless} row(s) have no part number; nothing was written",
                partless,
            )
        return sorted(staged, key=lambda s: (s.part, s.uri))

    def discard(self, staged: Iterable[StagedFile]) -> None:
        """Delete staged files that will not be committed."""
        delete_files([s.uri for s in staged])

    def commit(
        self,
        added: list[StagedFile],
        *,
        replace_parts: Iterable[int] = (),
        drop_below: int | None = None,
        operation: str,
        properties: dict[str, str] | None = None,
        expected_version: int,
        restored_parts: Iterable[int] = (),
        batch_id: str | None = None,
    ) -> int:
        """Commit **one** snapshot that removes every data file of ``replace_parts`` and of the parts
        below ``drop_below`` and adds the staged files; returns the new version.

        The summary records the version, ``operation``, the parts added or replaced and the caller's
        ``properties`` (stored with the ``arrayviews.`` prefix); parts in ``restored_parts`` are
        recorded as restored (content unchanged), not as changed, and ``batch_id`` names the batch
        an append wrote (so it is appended only once). With nothing to add, remove or record,
        no snapshot is made and the current version is returned. Raises BaseMovedError (a
        CommitConflictError, committing nothing) if the table is no longer at ``expected_version``.
        """
        # The table as loaded is checked first: a commit states its base snapshot, which the catalog
        # checks as it swaps the metadata, so a handle gone stale meanwhile fails there (BaseMovedError);
        # a handle older than ``expected_version`` is loaded again.
        if self.current_version() != expected_version:
            self.refresh()
        base = self.check_base(expected_version)
        current = expected_version
        replaced = sorted(set(replace_parts))
        removed = self._removed_files(replaced, drop_below)
        restored = set(restored_parts)
        written = sorted(({s.part for s in added} | set(replaced)) - restored)
        caller = {_prefixed(k): str(v) for k, v in (properties or {}).items()}
        if not (added or removed or written or caller):
            return current
        version = current + 1
        summary = {
            **caller,
            VERSION_KEY: str(version),
            OPERATION_KEY: operation,
            PARTS_KEY: _format_sorted_parts(written),
        }
        if restored:
            summary[RESTORED_KEY] = format_parts(restored)
        if batch_id is not None:
            summary[BATCH_KEY] = batch_id
        if drop_below is not None:
            summary[DROPPED_BELOW_KEY] = str(drop_below)
        self.commit_files(base, [s.uri for s in added], removed, summary)
        return version

    def _removed_files(self, replaced: list[int], drop_below: int | None) -> list[StoredFile]:
        if not replaced and drop_below is None:
            return []
        if drop_below is None:  # each part's files found by bisection, not by a scan of every file
            return [f for part in replaced for f in self._files_of_range(part, part)]
        doomed = set(replaced)
        return self._live_files(lambda p: p in doomed or p < drop_below)

    # -- keeping the history bounded ---------------------------------------------------------------
    def small_files(self, small_file_bytes: int = TARGET_FILE_BYTES // 4) -> dict[int, list[str]]:
        """The data files smaller than ``small_file_bytes`` of each part that has several of them
        (what compaction merges), current version."""
        small: dict[int, list[str]] = {}
        for data_file in self._live_files():
            if data_file.file_size_in_bytes < small_file_bytes:
                small.setdefault(_part_of(data_file), []).append(data_file.file_path)
        return {p: files for p, files in sorted(small.items()) if len(files) > 1}

    def expire(
        self,
        older_than: dt.datetime,
        orphans_before: dt.datetime,
        keep_after: int | None = None,
        sweep_orphans: bool = True,
    ) -> ExpireResult:
        """Forget the versions committed before ``older_than`` (never the current one, nor those
        after ``keep_after``: versions a view reading this table has not seen yet) and delete every
        file no remaining version needs (without ``sweep_orphans``: every file only the forgotten
        versions needed). Batch ids of the versions forgotten are kept in a table property, so
        those batches stay appended exactly once."""

        def keep(snapshot: SnapshotRecord) -> bool:
            return keep_after is not None and snapshot.version is not None and snapshot.version > keep_after

        def archived_batches(properties: dict[str, str], doomed: list[SnapshotRecord]) -> dict[str, str]:
            known = json.loads(properties.get(EXPIRED_BATCHES_PROPERTY, "{}"))
            added = {}
            for snapshot in doomed:
                if BATCH_KEY in snapshot.summary and snapshot.summary[BATCH_KEY] not in known:
                    added[snapshot.summary[BATCH_KEY]] = snapshot.version
            return {EXPIRED_BATCHES_PROPERTY: json.dumps({**known, **added})} if added else {}

        return super().expire(
            older_than, orphans_before, keep=keep, properties=archived_batches, sweep_orphans=sweep_orphans
        )

    def all_files(self, version: int | None = None) -> list[str]:
        """URIs of every data file of a version (current by default)."""
        return [f.file_path for f in self._live_files(None, version)]


def _format_sorted_parts(parts: list[int]) -> str:
    """:func:`format_parts` of sorted distinct parts, in Python for the one or two parts of a
    typical commit (numpy's setup cost more than the rest of the summary)."""
    if len(parts) > 8:
        return format_parts(parts)
    runs: list[str] = []
    start = previous = None
    for part in parts:
        if previous is not None and part == previous + 1:
            previous = part
            continue
        if start is not None:
            runs.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = part
    if start is not None:
        runs.append(str(start) if start == previous else f"{start}-{previous}")
    return ",".join(runs)
