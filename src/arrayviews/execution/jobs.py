"""Generic Spark jobs over Arrow batches: read fragment files, map batches, group, write files.

Operators pass plain functions over ``pyarrow`` tables into these jobs; the functions run in
Python workers on the executors and must not rely on anything but their arguments (they are
pickled with the job, so the same code runs in local mode and on a cluster).
"""

from __future__ import annotations

import functools
import uuid
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from arrayviews.execution.engine import WrittenFile
from arrayviews.execution.failures import reporting
from arrayviews.execution.memory import tune_allocator
from arrayviews.storage.files import conform, write_parquet

BatchFunction = Callable[[pa.Table], pa.Table | None]


def spark_schema(arrow_schema: pa.Schema) -> StructType:
    """The Spark schema matching an Arrow schema (all fields nullable, as Spark reads them)."""
    return from_arrow_schema(arrow_schema)


#: Settings under which an action runs as one Spark job: adaptive execution runs each shuffle stage
#: as a job of its own (it re-plans between stages), and a broadcast join collects its small side in
#: a job of its own too (joins shuffle inside the one job instead).
ONE_JOB_CONF = {"spark.sql.adaptive.enabled": "false", "spark.sql.autoBroadcastJoinThreshold": "-1"}


@contextmanager
def session_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Plan the queries started inside under ``settings``; the session's own are restored after
    (settings are read when a query is planned; the session is used by one thread)."""
    conf = spark.conf
    before = {key: conf.get(key, None) for key in settings}
    for key, value in settings.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                conf.unset(key)
            else:
                conf.set(key, value)


def read_files(spark: SparkSession, uris: list[str], arrow_schema: pa.Schema) -> DataFrame:
    """A DataFrame over Parquet files with a known schema (an empty one when there are no files)."""
    schema = spark_schema(arrow_schema)
    if not uris:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*uris)


#: Frames made by :func:`map_batches`, with what made them: a write of such a frame runs the
#: function and the write in one Python task (:func:`write_files`), instead of sending every row
#: from the function's task through the JVM to the writing task (two Arrow hops of the whole
#: result: the window of 10^8 cells moved 800 MB of payloads twice).
_MAPPED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _mapped_batches(
    batches: Iterator[pa.RecordBatch], function: BatchFunction, out_schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        result = function(pa.Table.from_batches([batch]))
        if result is not None and result.num_rows:
            yield from conform(result, out_schema).to_batches()


def map_batches(frame: DataFrame, function: BatchFunction, out_schema: pa.Schema) -> DataFrame:
    """Apply ``function`` to every Arrow batch of ``frame``; it returns a table of ``out_schema`` or None."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        tune_allocator()
        with reporting():
            yield from _mapped_batches(batches, function, out_schema)

    mapped = frame.mapInArrow(run, spark_schema(out_schema))
    _MAPPED[mapped] = (frame, function, out_schema)
    return mapped


def map_partitions(
    frame: DataFrame, function: Callable[[Iterator[pa.Table]], Iterator[pa.Table]], out_schema: pa.Schema
) -> DataFrame:
    """Apply ``function`` to the stream of Arrow tables of each partition."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        tune_allocator()
        tables = (pa.Table.from_batches([b]) for b in batches)
        with reporting():
            for result in function(tables):
                if result is not None and result.num_rows:
                    yield from conform(result, out_schema).to_batches()

    return frame.mapInArrow(run, spark_schema(out_schema))


def group_tables(
    frame: DataFrame, keys: list[str], function: BatchFunction, out_schema: pa.Schema
) -> DataFrame:
    """Apply ``function`` to all rows sharing each value of ``keys`` (one Arrow table per group)."""

    def run(table: pa.Table) -> pa.Table:
        tune_allocator()
        with reporting():
            result = function(table)
            return out_schema.empty_table() if result is None else conform(result, out_schema)

    return frame.groupBy(*keys).applyInArrow(run, spark_schema(out_schema))


def cogroup_tables(
    left: DataFrame,
    right: DataFrame,
    keys: list[str],
    function: Callable[[pa.Table, pa.Table], pa.Table | None],
    out_schema: pa.Schema,
) -> DataFrame:
    """Apply ``function`` to the rows of both frames sharing each value of ``keys``."""

    def run(left_rows: pa.Table, right_rows: pa.Table) -> pa.Table:
        tune_allocator()
        with reporting():
            result = function(left_rows, right_rows)
            return out_schema.empty_table() if result is None else conform(result, out_schema)

    return left.groupBy(*keys).cogroup(right.groupBy(*keys)).applyInArrow(run, spark_schema(out_schema))


def collect(frame: DataFrame, arrow_schema: pa.Schema) -> pa.Table:
    """Bring a frame to the driver as an Arrow table of ``arrow_schema``."""
    return conform(frame.toArrow(), arrow_schema)


WRITTEN_SCHEMA = pa.schema(
    [("uri", pa.string()), ("rows", pa.int64()), ("nbytes", pa.int64()), ("cells", pa.int64())]
)


def written_batch(files: list[tuple[str, int, int, int]]) -> pa.RecordBatch:
    """The Arrow form of (uri, rows, bytes, cells) tuples, as write tasks report them."""
    columns = list(zip(*files, strict=True)) if files else [[], [], [], []]
    return pa.RecordBatch.from_arrays(
        [pa.array(columns[0], pa.string())] + [pa.array(c, pa.int64()) for c in columns[1:]],
        schema=WRITTEN_SCHEMA,
    )


def write_files(
    frame: DataFrame,
    directory_uri: str,
    arrow_schema: pa.Schema,
    stamp: Callable[[pa.Table], pa.Table] | None = None,
    target_bytes: int = 128 * 1024 * 1024,
) -> list[WrittenFile]:
    """Each partition of ``frame`` writes its rows (the columns of ``arrow_schema``) as Parquet
    files under ``directory_uri``; a frame of :func:`map_batches` is computed and written by the
    same task.

    ``stamp`` may rewrite a table before it is written (for example to set the version column).
    Returns the files written, which nobody references until the driver commits them.
    """
    origin = _MAPPED.get(frame)
    source = frame if origin is None else origin[0]
    mapping = None if origin is None else origin[1:]  # the task gets the function, not the frame

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        tune_allocator()
        if mapping is not None:
            batches = _mapped_batches(batches, *mapping)
        pending: list[pa.Table] = []
        pending_bytes = 0
        written = []

        def flush() -> None:
            table = conform(pa.concat_tables(pending), arrow_schema)
            if stamp is not None:
                table = conform(stamp(table), arrow_schema)
            uri = directory_uri.rstrip("/") + "/" + new_file_name()
            size = write_parquet(table, uri)
            cells = pc.sum(table.column("n_cells")).as_py() if "n_cells" in table.column_names else 0
            written.append((uri, table.num_rows, size, cells or 0))

        with reporting():
            for batch in batches:
                # a batch larger than what the file still takes is split by its average row size
                # (Arrow batches of 10,000 chunk payloads made files of hundreds of megabytes)
                per_row = max(1, batch.nbytes // max(1, batch.num_rows))
                while batch.num_rows:
                    fits = max(1, (target_bytes - pending_bytes) // per_row)
                    piece, batch = batch.slice(0, fits), batch.slice(fits)
                    pending.append(pa.Table.from_batches([piece]))
                    pending_bytes += piece.num_rows * per_row
                    if pending_bytes >= target_bytes:
                        flush()
                        pending, pending_bytes = [], 0
            if pending:
                flush()
        if written:
            yield written_batch(written)

    return collect_written(source.mapInArrow(run, spark_schema(WRITTEN_SCHEMA)))


def select_columns(frame: DataFrame, columns: Sequence[str]) -> DataFrame:
    """``frame``'s ``columns``; a frame of :func:`map_batches` stays one (its function's tables
    are cut to the columns), so a write of it still runs in the mapping task."""
    selected = frame.select(*columns)
    origin = _MAPPED.get(frame)
    if origin is not None:
        source, function, out_schema = origin
        names = list(columns)
        schema = pa.schema([out_schema.field(name) for name in names])
        _MAPPED[selected] = (source, functools.partial(_selected, function=function, names=names), schema)
    return selected


def _selected(table: pa.Table, function: BatchFunction, names: list[str]) -> pa.Table | None:
    result = function(table)
    return None if result is None else result.select(names)


def is_mapped(frame: DataFrame) -> bool:
    """Whether ``frame`` came from :func:`map_batches` (a write of it runs in the mapping task)."""
    return frame in _MAPPED


def collect_written(frame: DataFrame) -> list[WrittenFile]:
    """Run a job whose tasks report written files, and gather the reports on the driver."""
    rows = frame.collect()
    return [WrittenFile(row["uri"], row["rows"], row["nbytes"], row["cells"]) for row in rows]


def new_file_name() -> str:
    """A fresh, unique data file name."""
    return f"{uuid.uuid4().hex}.parquet"


def integer_div(column: Column, divisor: int) -> Column:
    """Exact integer division of a non-negative long column (Spark's ``div``)."""
    return F.call_function("div", column, F.lit(divisor))
