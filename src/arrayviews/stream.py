"""Append-only streams: a timestamp column, a partition length, one atomic commit per batch.

A row's part is ``floor(unix seconds of its time / partition length)``, computed by Spark with
exact integer arithmetic (so times before 1970 fall into negative parts). A batch is checked on the
driver (columns, types, null times), written by executors as one file per part and committed as one
snapshot; rows of parts older than the newest one are late rows and simply go to their part. A
batch reaching more than ``max_gap_parts`` parts past the newest part is refused (maintenance would
build every part in between), unless the append allows the gap.
"""

from __future__ import annotations

import datetime as dt
import numbers
import random
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.errors import ParseException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from arrayviews.execution import local_cells, local_rows
from arrayviews.execution.cell_file_checks import check_cell_files, vanished, vanished_input
from arrayviews.execution.failures import translating
from arrayviews.execution.jobs import integer_div
from arrayviews.execution.part_jobs import SparkPartTable
from arrayviews.execution.session import ensure_started
from arrayviews.execution.spark_cells import csv_reader, read_text_times
from arrayviews.model import bounds
from arrayviews.model.display import as_html, as_text, described
from arrayviews.model.errors import (
    AlreadyExistsError,
    ArrayViewsError,
    ExecutionError,
    NotFoundError,
    ParseError,
    ValidationError,
)
from arrayviews.model.faults import checkpoint
from arrayviews.model.names import INTERNAL_PREFIX, RESERVED_STREAM_COLUMNS, check_identifier
from arrayviews.model.types import accepts, always_fits, first_misfit, misfit_reason
from arrayviews.operators.ingest import whole_decimals
from arrayviews.storage import kinds, part_table
from arrayviews.storage.creation import drop_table_as_checked
from arrayviews.storage.expiry import cutoffs
from arrayviews.storage.files import filesystem, read_parquet_files
from arrayviews.storage.part_table import PART, PartVersion, StagedFile, UnpartitionedRowsError
from arrayviews.storage.snapshots import BaseMovedError, may_have_committed
from arrayviews.streams.relations import DEFAULT_MAX_GAP_PARTS, MAX_GAP_PROPERTY
from arrayviews.streams.world import StreamWorld

if TYPE_CHECKING:
    from arrayviews.database import Database

NAMESPACE = kinds.STREAMS_NAMESPACE
KIND = kinds.STORED_STREAM
#: Column names a stream may not use (the part number, and the part start time views may add).
RESERVED_COLUMNS = RESERVED_STREAM_COLUMNS
_POSITION = re.compile(r"\(line (\d+), pos (\d+)\)")


@dataclass(frozen=True)
class AppendResult:
    """What one append committed: the new version, its rows and parts, which parts got late rows,
    and what maintenance did (views that failed are listed in ``failed``, never raised: the batch
    itself is committed). ``duplicate``: the batch id was appended before, nothing was appended."""

    version: int
    rows: int
    parts: list[int]
    late_parts: list[int]
    maintenance: list = field(default_factory=list)
    batch_id: str | None = None
    duplicate: bool = False
    attempts: int = 1
    message: str = ""

    @property
    def failed(self) -> dict[str, str]:
        """Views whose maintenance failed or was skipped (view -> error)."""
        return {m.view: m.error for m in self.maintenance if getattr(m, "error", None)}

    def __str__(self) -> str:
        return self.message


#: How many times an append is committed again after another writer committed first.
MAX_ATTEMPTS = 8
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def part_number(time: Column, partition_length: int) -> Column:
    """``floor(unix seconds / partition_length)`` of a timestamp column, exactly, for any sign."""
    micros = F.unix_micros(time)
    period = F.lit(partition_length * 1_000_000)
    # Subtracting the non-negative remainder first makes the division exact, so truncation is floor.
    return integer_div(micros - F.pmod(micros, period), partition_length * 1_000_000).cast("long")


# -- creating, opening, listing ---------------------------------------------------------------------
def parse_ddl(text: str, stream: str) -> T.StructType:
    """A Spark schema from DDL text (``"ts timestamp, src string"``); ParseError says where it failed."""
    try:
        return T.StructType.fromDDL(text)
    except ParseException as error:
        message = str(error).strip()
        position = _POSITION.search(message)
        reason = _POSITION.sub("", message.splitlines()[0]).strip()
        reason = re.sub(r"^\[[A-Z_.]+\]\s*", "", reason)
        reason = re.sub(r"\s*SQLSTATE: \w+\.?", "", reason)
        if position is None:
            raise ParseError(f"stream {stream}: malformed schema: {reason}", text=text) from None
        raise ParseError(
            f"stream {stream}: malformed schema: {reason}",
            text=text,
            line=int(position.group(1)),
            column=int(position.group(2)) + 1,
        ) from None


def _check_schema(name: str, schema: T.StructType, time_column: str) -> None:
    seen: set[str] = set()
    for column in schema.fields:
        if column.name.lower() in {c.lower() for c in RESERVED_COLUMNS}:
            raise ValidationError(
                f"stream {name}: column name {column.name} is reserved", array=name, column=column.name
            )
        if column.name.startswith(INTERNAL_PREFIX):
            raise ValidationError(
                f"stream {name}: column name {column.name} is reserved (names starting with "
                f"{INTERNAL_PREFIX!r} are arrayviews' own columns)",
                array=name,
                column=column.name,
            )
        if column.name.lower() in seen:
            raise ValidationError(
                f"stream {name}: column {column.name} appears twice", array=name, column=column.name
            )
        if not column.nullable:
            raise ValidationError(
                f"stream {name}, column {column.name}: NOT NULL is not supported: every stream column "
                "may hold NULL (make the field nullable)",
                array=name,
                column=column.name,
            )
        seen.add(column.name.lower())
    part_table.check_storable(schema, f"stream {name}")
    if time_column not in schema.names:
        raise ValidationError(
            f"stream {name}: time column {time_column} is not a column (columns: {', '.join(schema.names)})",
            array=name,
            column=time_column,
        )
    time_type = schema[time_column].dataType
    if not isinstance(time_type, T.TimestampType):
        raise ValidationError(
            f"stream {name}, column {time_column}: the time column must be a timestamp, "
            f"got {time_type.simpleString()}",
            array=name,
            column=time_column,
            value=time_type.simpleString(),
        )


def _check_max_gap(name: str, max_gap_parts: object) -> int:
    if isinstance(max_gap_parts, bool) or not isinstance(max_gap_parts, int) or max_gap_parts <= 0:
        raise ValidationError(
            f"stream {name}: max_gap_parts (how many parts past the stream's newest part a batch may "
            f"reach) must be a positive integer, got {max_gap_parts!r}",
            array=name,
            value=max_gap_parts,
        )
    return bounds.at_most(max_gap_parts, bounds.INT64_MAX, "max_gap_parts (MAX GAP)", f"stream {name}")


def create_stream(
    db: Database,
    name: str,
    schema: str | T.StructType,
    partition_length: int,
    time_column: str,
    max_gap_parts: int | None = None,
) -> Stream:
    """Create an empty stream (version 0) in ``db`` (an ``arrayviews.Database``).

    ``schema`` is Spark DDL (``"ts timestamp, src string, loss int"``) or a StructType;
    ``partition_length`` is in seconds; ``time_column`` names a timestamp column.
    ``max_gap_parts`` (default ``DEFAULT_MAX_GAP_PARTS``, 10,000): an append whose batch reaches
    more parts than this past the stream's newest part is refused unless it passes ``allow_gap``.
    """
    try:
        check_identifier(name, "stream", ValidationError)
    except ValidationError as error:
        raise ValidationError(str(error), value=name) from None
    if isinstance(partition_length, bool) or not isinstance(partition_length, int) or partition_length <= 0:
        raise ValidationError(
            f"stream {name}: partition length must be a positive integer (seconds), got {partition_length!r}",
            array=name,
            value=partition_length,
        )
    bounds.at_most(partition_length, bounds.MAX_SECONDS, "the partition length in seconds", f"stream {name}")
    ensure_started(db.spark)  # Spark parses the DDL; streams build pyspark columns
    if isinstance(schema, str):
        schema = parse_ddl(schema, name)
    if not isinstance(schema, T.StructType):
        raise ValidationError(
            f"stream {name}: schema must be DDL text or a StructType, got {type(schema).__name__}", array=name
        )
    _check_schema(name, schema, time_column)
    properties = {"time-column": time_column}
    if max_gap_parts is not None:
        properties[MAX_GAP_PROPERTY] = str(_check_max_gap(name, max_gap_parts))
    catalog = db.warehouse.catalog
    if SparkPartTable.exists(catalog, NAMESPACE, name):
        raise AlreadyExistsError(f"a stream named {name} already exists")
    try:
        table = SparkPartTable.create(catalog, NAMESPACE, name, schema, partition_length, KIND, properties)
    except AlreadyExistsError as error:
        if SparkPartTable.exists(catalog, NAMESPACE, name):  # another process made the stream first
            raise AlreadyExistsError(f"a stream named {name} already exists") from None
        raise AlreadyExistsError(str(error)) from None  # an array or array view holds the name
    return Stream(db, table)


def open_stream(db: Database, name: str) -> Stream:
    """The stream ``name``; NotFoundError lists the streams there are."""
    try:
        table = SparkPartTable.open(db.warehouse.catalog, NAMESPACE, name)
    except NotFoundError:
        table = None
    if table is None or table.table_properties.get("kind") != KIND:
        known = ", ".join(stream_names(db)) or "none"
        raise NotFoundError(f"no stream named {name} (streams: {known})")
    return Stream(db, table)


def stream_names(db: Database) -> list[str]:
    return SparkPartTable.names(db.warehouse.catalog, NAMESPACE, kind=KIND)


def drop_stream(db: Database, name: str, identity: str | None = None, refuse=None) -> None:
    """Drop a stream and delete its files; with ``identity``, only the stream the caller checked
    (one dropped and created again by another process meanwhile is not dropped); ``refuse``: the
    check that no view reads it, run again as the drop commits (``drop_table_as_checked``)."""
    table = open_stream(db, name).table
    drop_table_as_checked(
        db.warehouse.catalog, table.table.name(), identity or table.identity, f"stream {table.name}", refuse
    )


# -- checking batches -------------------------------------------------------------------------------
def _arrow_accepts(target: pa.DataType, given: pa.DataType) -> bool:
    """Whether values of Arrow type ``given`` may be stored in a column of ``target`` (after a value check)."""
    return accepts(target, given)


def _spark_accepts(target: T.DataType, given: T.DataType) -> bool:
    """Whether Spark type ``given`` casts to ``target`` without any value being able to fail or change."""
    if given == target or isinstance(given, T.NullType):
        return True
    try:
        return always_fits(to_arrow_type(target), to_arrow_type(given))
    except Exception:  # noqa: BLE001 - a type Arrow cannot map is not accepted
        return False


def _iso(micros: int) -> str:
    """An instant given in microseconds since 1970 as an ISO timestamp in UTC."""
    return (_EPOCH + dt.timedelta(microseconds=micros)).isoformat()


@translating
class Stream:
    """An append-only, time-partitioned table of rows."""

    def __init__(self, db: Database, table: SparkPartTable) -> None:
        ensure_started(db.spark)
        self.db = db
        self.table = table

    def __repr__(self) -> str:
        return as_text(f"stream {self.name}", described(self._summary_rows))

    def _repr_html_(self) -> str:
        return as_html(f"stream {self.name}", described(self._summary_rows))

    def _summary_rows(self) -> list[tuple[str, str]]:
        parts = self.part_range()
        return [
            ("columns", ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in self.schema.fields)),
            ("parts", f"every {self.partition_length} s of {self.time_column}"),
            ("version", str(self.version)),
            ("held", "none yet" if parts is None else f"parts {parts[0]}..{parts[1]}"),
        ]

    @property
    def name(self) -> str:
        return self.table.name

    @property
    def partition_length(self) -> int:
        return self.table.partition_length

    @property
    def time_column(self) -> str:
        return self.table.table_properties["time-column"]

    @property
    def schema(self) -> T.StructType:
        return self.table.spark_schema

    @property
    def max_gap_parts(self) -> int:
        """How many parts past the newest part a batch may reach (``append(..., allow_gap=True)``
        lifts the limit for one batch)."""
        return int(self.table.table_properties.get(MAX_GAP_PROPERTY, DEFAULT_MAX_GAP_PARTS))

    def set_max_gap_parts(self, parts: int) -> None:
        """Change the stream's gap limit (see :attr:`max_gap_parts`; kept in its table properties, so
        every process sees it; no new version)."""
        limit = _check_max_gap(self.name, parts)
        self.table.set_properties(**{part_table.PREFIX + MAX_GAP_PROPERTY: str(limit)})

    @property
    def version(self) -> int:
        return self.table.refresh().current_version()

    def versions(self) -> list[PartVersion]:
        return self.table.refresh().versions()

    def part_range(self) -> tuple[int, int] | None:
        return self.table.refresh().part_range()

    def compact(self) -> int | None:
        """Merge each part's small files into one (one new version, rows unchanged, nothing for the
        views to recompute); returns the new version, or None if there was nothing to merge."""
        return self.table.compact(self.db.spark)

    def expire_versions(
        self,
        older_than: dt.datetime | dt.timedelta | None = None,
        *,
        orphans_older_than: dt.timedelta = dt.timedelta(hours=1),
    ):
        """Forget versions older than a time or age (default: all but the current one) and delete
        the files only they needed. Versions a stream view has not seen yet are kept (its next
        maintenance reads what changed since the version it saw); batch ids stay known."""
        keep_after = StreamWorld(self.db.spark, self.db.warehouse.catalog).oldest_seen(self.name)
        return self.table.expire(*cutoffs(older_than, orphans_older_than), keep_after=keep_after)

    def read(self, low: int | None = None, high: int | None = None) -> DataFrame:
        """The rows (all columns plus ``_part``) of parts ``low`` to ``high`` (default: all parts);
        a bound that is no part number (an integer) is refused, naming the stream and the value."""
        for bound in (low, high):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, numbers.Integral)):
                raise ValidationError(
                    f"stream {self.name}: read() takes part numbers (integers: floor(unix seconds / "
                    f"{self.partition_length})), got {bound!r}",
                    array=self.name,
                    value=bound,
                )
        bounds = self.part_range()
        if bounds is None:
            return self.db.spark.createDataFrame([], self.table.read_schema)
        low = bounds[0] if low is None else int(low)
        high = bounds[1] if high is None else int(high)
        return self.table.read_parts(self.db.spark, low, high)

    def load(self, path: str, format: str | None = None, allow_gap: bool = False) -> AppendResult:
        """Append the rows of Parquet or CSV files (a file or a folder; format from the extension;
        columns by name) as one batch (``allow_gap`` as in :meth:`append`)."""
        fs, inner = filesystem(path)
        if fs.get_file_info(inner).type.name == "NotFound":
            raise NotFoundError(f"stream {self.name}: no file or folder at {path}")
        file_format = local_cells.format_of(path, format)  # .csv and .csv.gz are CSV
        check_cell_files(path, file_format, f"stream {self.name}")  # what both readers refuse alike
        engine, _ = self.db.executors.choose(local_cells.load_estimate(path, file_format))
        if engine.name == "local" and file_format in ("csv", "parquet"):
            target = part_table.arrow_schema_of(self.schema)
            try:
                rows = local_rows.read_stream_rows(
                    path, file_format, pa.schema(list(target)[:-1]), self.time_column
                )
            except local_cells.NotCertain:
                rows = None  # not certain of Spark's meaning of the files: Spark reads them below
            except FileNotFoundError as error:  # removed since the listing: Spark's job fails alike
                raise vanished(f"stream {self.name}", path, error.filename or path) from None
            if rows is not None:
                return self.append(rows, allow_gap=allow_gap)
        if file_format == "csv":
            # columns by the header's names: with a schema given, Spark's reader takes them by
            # position, so a file naming the columns in another order was read into the wrong ones
            header = csv_reader(self.db.spark).csv(path).columns
            self._check_names(header)
            # times as text, read as an array's LOAD reads them (a zone after the minutes too)
            times = [n for n in header if isinstance(self.schema[n].dataType, T.TimestampType)]
            ordered = T.StructType(
                [T.StructField(n, T.StringType()) if n in times else self.schema[n] for n in header]
            )
            frame = csv_reader(self.db.spark).option("mode", "FAILFAST").schema(ordered).csv(path)
            try:
                frame = read_text_times(frame, times, path, self.name) if times else frame
                return self.append(frame, allow_gap=allow_gap)
            except ExecutionError as error:
                gone = vanished_input(error, path, f"stream {self.name}")
                raise gone or self._csv_field_error(path, header, error) from None
        elif file_format == "parquet":
            frame = self.db.spark.read.parquet(path)
            # Parquet files written without a time zone (pandas' default) hold times in UTC, the
            # session's zone.
            frame = frame.select(
                *[
                    F.col(f"`{f.name}`").cast(T.TimestampType()).alias(f.name)
                    if isinstance(f.dataType, T.TimestampNTZType)
                    else F.col(f"`{f.name}`")
                    for f in frame.schema.fields
                ]
            )
            texts = [  # times written as text: read as a CSV's are
                f.name
                for f in frame.schema.fields
                if isinstance(f.dataType, T.StringType)
                and f.name in self.schema.names
                and isinstance(self.schema[f.name].dataType, T.TimestampType)
            ]
            frame = read_text_times(frame, texts, path, self.name) if texts else frame
        else:
            raise ValidationError(
                f"stream {self.name}: unknown file format {file_format!r} (use parquet or csv)",
                array=self.name,
            )
        try:
            return self.append(frame, allow_gap=allow_gap)
        except Exception as error:  # Spark lists the files before its jobs read them
            gone = vanished_input(error, path, f"stream {self.name}")
            if gone is None:
                raise
            raise gone from None

    def _csv_field_error(self, path: str, header: list[str], error: ExecutionError) -> ArrayViewsError:
        """The error of a CSV field Spark's reader refused, naming the stream, the column, the value
        and the file (Spark's own message names only the value); ``error`` itself when the value
        is not found in a typed column."""
        found = re.search(r'For input string: "(.*)"', str(error)) or re.search(
            r"The value '(.*)' of the type \"STRING\" cannot be cast", str(error)
        )
        typed = [n for n in header if not isinstance(self.schema[n].dataType, T.StringType)]
        if found is None or not typed:
            return error
        value = found.group(1)
        texts = csv_reader(self.db.spark).csv(path)
        holding = texts.agg(
            *[F.max((F.col(f"`{n}`") == F.lit(value)).cast("int")).alias(n) for n in typed]
        ).first()
        column = next((n for n in typed if holding[n]), None)
        if column is None:
            return error
        kind = self.schema[column].dataType.simpleString()
        return ValidationError(
            f"stream {self.name}, column {column}: {value!r} in {path} is not a {kind} value; nothing was appended",
            array=self.name,
            column=column,
            value=value,
        )

    # -- appending --------------------------------------------------------------------------------
    def append(
        self,
        batch: pd.DataFrame | pa.Table | DataFrame,
        maintain: bool = True,
        batch_id: str | None = None,
        allow_gap: bool = False,
    ) -> AppendResult:
        """Append a batch (pandas, Arrow or Spark) as one version; rows of old parts are late rows.
        With ``maintain`` (the default) the stream views are then brought up to date
        (``AppendResult.maintenance`` says what each view did; a view whose maintenance fails is
        marked failed and reported in ``AppendResult.failed``, the others are still maintained).

        ``batch_id`` makes the append exactly-once: the id is recorded in the version that appends
        the batch, and appending the same id again appends nothing and says so (a retry after a
        crash or a lost reply is safe, also when two processes retry at once).

        Nothing is written if any column is missing, unknown or of the wrong type, or any time is
        null. An empty batch commits nothing and returns the current version. pandas and Arrow
        batches are written by this process; Spark DataFrames by the executors.

        Nothing is written either if the batch reaches more than :attr:`max_gap_parts` parts past the
        stream's newest part (past its own oldest part when the stream is empty), or before its
        oldest part: maintenance would build every part in between, so a time years off (a clock or
        unit error) would hang it. ``allow_gap=True`` appends such a batch all the same. Late rows
        within the stream's span are never a gap.
        """
        if batch_id is not None and (not isinstance(batch_id, str) or not batch_id.strip()):
            raise ValidationError(
                f"stream {self.name}: batch_id must be a non-empty string, got {batch_id!r}",
                array=self.name,
                value=batch_id,
            )
        if not isinstance(allow_gap, bool):
            raise ValidationError(
                f"stream {self.name}: allow_gap must be True or False, got {allow_gap!r}",
                array=self.name,
                value=allow_gap,
            )
        prepared = self._prepare(batch)
        self.table.refresh()
        duplicate = self._already_appended(batch_id, maintain)
        if duplicate is not None:
            return duplicate
        if prepared is None:
            return self._nothing_appended(batch_id)
        staged: list[StagedFile] = []
        try:
            try:
                staged = self._stage(prepared)
            except UnpartitionedRowsError as error:
                raise self._null_times(error.rows) from None
            checkpoint("stream.staged")
            if not staged:
                return self._nothing_appended(batch_id)
            if not allow_gap:
                self._check_gap(staged)
            for attempt in range(1, MAX_ATTEMPTS + 1):
                expected = self.table.current_version()
                bounds = self.table.part_range()
                checkpoint("stream.before-commit")
                try:
                    version = self.table.commit(
                        staged, operation="append", expected_version=expected, batch_id=batch_id
                    )
                    break
                except BaseMovedError:
                    # Appends commute: re-validated (the batch id) and committed on the new version.
                    self.table.refresh()
                    duplicate = self._already_appended(batch_id, maintain)
                    if duplicate is not None:
                        self.table.discard(staged)
                        return duplicate
                    if attempt == MAX_ATTEMPTS:
                        raise
                    time.sleep(random.uniform(0.0, 0.01 * 2 ** min(attempt, 6)))
        except BaseException as error:
            if not may_have_committed(error):  # committed files stay: a retry finds the batch id
                self.table.discard(staged)
            raise
        parts = sorted({s.part for s in staged})
        late = [p for p in parts if bounds is not None and p < bounds[1]]
        rows = sum(s.rows for s in staged)
        maintenance = self.db.maintain_streams() if maintain else []
        named = f" (batch {batch_id})" if batch_id is not None else ""
        return AppendResult(
            version,
            rows,
            parts,
            late,
            maintenance,
            batch_id,
            attempts=attempt,
            message=f"appended {rows} row(s){named} to stream {self.name}, now at version {version}",
        )

    def _nothing_appended(self, batch_id: str | None) -> AppendResult:
        """The result of an empty batch: no version, no rows, and a message saying so (its
        ``str`` was empty)."""
        version = self.table.current_version()
        named = f" (batch {batch_id}, not recorded)" if batch_id is not None else ""
        return AppendResult(
            version,
            0,
            [],
            [],
            batch_id=batch_id,
            message=f"the batch{named} has no rows: nothing was appended to stream {self.name}, "
            f"still at version {version}",
        )

    def _check_gap(self, staged: list[StagedFile]) -> None:
        """Refuse staged files reaching more than max_gap_parts past the stream's newest part (past
        the batch's oldest part for an empty stream), or before its oldest part. Only the staged files' parts are compared; the
        newest time is read, for the message, from the newest part's files (those of the refused
        batch, already written: no Spark job)."""
        limit = self.max_gap_parts
        bounds = self.table.part_range()
        newest = max(s.part for s in staged)
        reference = min(s.part for s in staged) if bounds is None else bounds[1]
        gap = newest - reference
        if bounds is not None and bounds[0] - min(s.part for s in staged) > limit:
            self._refuse_gap_before(staged, bounds[0], limit)
        if gap <= limit:
            return
        times = read_parquet_files([s.uri for s in staged if s.part == newest], columns=[self.time_column])
        latest = pc.max(pc.cast(times.column(self.time_column), pa.int64())).as_py()
        start = _iso(reference * self.partition_length * 1_000_000)
        if bounds is None:
            since = f"the batch's own oldest part {reference} (starting {start}; the stream is empty)"
        else:
            since = f"the stream's newest part {reference} (starting {start})"
        raise ValidationError(
            f"stream {self.name}, time column {self.time_column}: the batch's newest time {_iso(latest)} "
            f"falls in part {newest}, {gap} parts past {since}; that is more than the limit of {limit} "
            f"parts (max_gap_parts), so nothing was appended. Maintenance would build every part in "
            f"between. If the time is right, append the batch with allow_gap=True (ALLOW GAP in the "
            f"language), or raise the stream's limit: set_max_gap_parts(n), or max_gap_parts=n at "
            f"creation",
            array=self.name,
            column=self.time_column,
            value=_iso(latest),
        )

    def _refuse_gap_before(self, staged: list[StagedFile], oldest: int, limit: int) -> None:
        """Refuse staged files reaching more than max_gap_parts before the stream's oldest part:
        views translated from queries are rebuilt from the stream's oldest part, so one row of 1970
        in a stream of 2015 would have them build millions of parts (a hang, not an error)."""
        earliest = min(s.part for s in staged)
        times = read_parquet_files([s.uri for s in staged if s.part == earliest], columns=[self.time_column])
        first = pc.min(pc.cast(times.column(self.time_column), pa.int64())).as_py()
        start = _iso(oldest * self.partition_length * 1_000_000)
        raise ValidationError(
            f"stream {self.name}, time column {self.time_column}: the batch's oldest time {_iso(first)} "
            f"falls in part {earliest}, {oldest - earliest} parts before the stream's oldest part "
            f"{oldest} (starting {start}); that is more than the limit of {limit} parts "
            f"(max_gap_parts), so nothing was appended. Views translated from queries would be "
            f"rebuilt from it, building every part in between. If the time is right, append the "
            f"batch with allow_gap=True (ALLOW GAP in the language), or raise the stream's limit",
            array=self.name,
            column=self.time_column,
            value=_iso(first),
        )

    def _already_appended(self, batch_id: str | None, maintain: bool) -> AppendResult | None:
        """The no-op result of appending ``batch_id`` again (maintenance still runs, so work a crash
        interrupted after the first append completes), or None if it is new."""
        if batch_id is None:
            return None
        version = self.table.batch_version(batch_id)
        if version is None:
            return None
        maintenance = self.db.maintain_streams() if maintain else []
        return AppendResult(
            self.table.current_version(),
            0,
            [],
            [],
            maintenance,
            batch_id,
            duplicate=True,
            message=f"batch {batch_id} was already appended to stream {self.name} (version {version}); "
            "nothing was appended",
        )

    def _prepare(self, batch) -> DataFrame | pa.Table | None:
        """The checked batch with its part numbers: an Arrow table (pandas and Arrow input) or a
        Spark DataFrame; None if it is empty."""
        if isinstance(batch, DataFrame):
            frame = self._spark_frame(batch)
            return frame.withColumn(PART, part_number(F.col(f"`{self.time_column}`"), self.partition_length))
        table = self._arrow_batch(batch)
        if table.num_rows == 0:
            return None
        micros = np.asarray(
            pc.cast(table.column(self.time_column), pa.int64()).to_numpy(zero_copy_only=False)
        )
        # numpy's integer floor division is exact and rounds toward minus infinity, like part_number.
        parts = np.floor_divide(micros, np.int64(self.partition_length) * 1_000_000)
        return table.append_column(PART, pa.array(parts, pa.int64()))

    def _stage(self, prepared: DataFrame | pa.Table) -> list[StagedFile]:
        if isinstance(prepared, pa.Table):
            return self.table.stage_local(prepared)
        return self.table.stage(prepared)

    def _null_times(self, rows: int) -> ValidationError:
        return ValidationError(
            f"stream {self.name}, column {self.time_column}: {rows} row(s) have a null time; nothing was written",
            array=self.name,
            column=self.time_column,
            value=rows,
        )

    def _check_names(self, columns: list[str]) -> None:
        expected = self.schema.names
        unknown = [c for c in columns if c not in expected]
        if unknown:
            raise ValidationError(
                f"stream {self.name}: unknown column {unknown[0]} (columns: {', '.join(expected)})",
                array=self.name,
                column=unknown[0],
            )
        missing = [c for c in expected if c not in columns]
        if missing:
            raise ValidationError(
                f"stream {self.name}: column {missing[0]} is missing from the batch",
                array=self.name,
                column=missing[0],
            )

    def _check_values(self, name: str, target: pa.DataType, column: pa.ChunkedArray | pa.Array) -> None:
        """Numbers must fit ``target`` (model.types.value_limits); the first that does not is named."""
        if not pa.types.is_integer(column.type) and not pa.types.is_floating(column.type):
            return
        column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        valid = None if column.null_count == 0 else ~np.asarray(column.is_null())
        values = np.asarray(column.fill_null(0) if column.null_count else column)
        misfit = first_misfit(target, values, valid)
        if misfit is not None:
            value = values[misfit].item()
            raise ValidationError(
                f"stream {self.name}, column {name}: {misfit_reason(target, value)} (row {misfit})",
                array=self.name,
                column=name,
                value=value,
            )

    def _type_error(self, column: str, target: str, given: str) -> ValidationError:
        return ValidationError(
            f"stream {self.name}, column {column}: expected {target}, got {given}",
            array=self.name,
            column=column,
            value=given,
        )

    def _spark_frame(self, frame: DataFrame) -> DataFrame:
        self._check_names(frame.columns)
        given = {f.name: f.dataType for f in frame.schema.fields}
        columns = []
        for target in self.schema.fields:
            if not _spark_accepts(target.dataType, given[target.name]):
                raise self._type_error(
                    target.name, target.dataType.simpleString(), given[target.name].simpleString()
                )
            columns.append(frame[target.name].cast(target.dataType).alias(target.name))
        return frame.select(*columns)

    def _arrow_batch(self, batch: pd.DataFrame | pa.Table) -> pa.Table:
        """A pandas or Arrow batch checked and cast to the stored Arrow types."""
        if isinstance(batch, pd.DataFrame):
            self._check_names([str(c) for c in batch.columns])
            if batch.empty:  # pandas gives empty columns arbitrary types: nothing to check
                return part_table.arrow_schema_of(self.schema).empty_table()
            arrays = {}
            for name in self.schema.names:
                try:
                    arrays[name] = pa.array(batch[name], from_pandas=True)
                except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
                    raise self._type_error(
                        name, self.schema[name].dataType.simpleString(), str(error)
                    ) from None
            table = pa.table(arrays)
        elif isinstance(batch, pa.Table | pa.RecordBatch):
            self._check_names(batch.schema.names)
            table = pa.table({name: batch.column(name) for name in self.schema.names})
        else:
            raise ValidationError(
                f"stream {self.name}: a batch must be a pandas DataFrame, pyarrow Table or Spark "
                f"DataFrame, got {type(batch).__name__}",
                array=self.name,
            )
        target_schema = part_table.arrow_schema_of(self.schema)
        columns = []
        for name in self.schema.names:
            target = target_schema.field(name).type
            column = table.column(name)
            if not _arrow_accepts(target, column.type):
                raise self._type_error(name, str(target), str(column.type))
            column = whole_decimals(
                column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column,
                target,
                lambda reason, value, name=name: ValidationError(
                    f"stream {self.name}, column {name}: {reason}", array=self.name, column=name, value=value
                ),
            )
            self._check_values(name, target, column)
            try:
                # Timestamps keep microseconds (finer digits are dropped); other values must fit exactly.
                columns.append(pc.cast(column, target, safe=not pa.types.is_timestamp(target)))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise ValidationError(
                    f"stream {self.name}, column {name}: values do not fit {target} ({error})",
                    array=self.name,
                    column=name,
                ) from None
        table = pa.table(columns, names=self.schema.names)
        if table.column(self.time_column).null_count:
            raise self._null_times(table.column(self.time_column).null_count)
        return table
