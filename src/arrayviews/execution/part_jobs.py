"""Spark jobs over a part table: read parts, stage rows as one file per part, compact small files."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from arrayviews.execution.failures import file_gone
from arrayviews.execution.jobs import ONE_JOB_CONF, session_settings, spark_schema
from arrayviews.execution.memory import tune_allocator
from arrayviews.storage.part_table import (
    PART,
    STAGED_SCHEMA,
    TARGET_FILE_BYTES,
    PartTable,
    StagedFile,
    delete_token_files,
    part_writer,
)
from arrayviews.storage.snapshots import BaseMovedError, may_have_committed

#: Attempts of a compaction that loses its commit to other writers before it gives up.
COMPACT_ATTEMPTS = 8
#: How many times a read of the newest version looks again after its files were expired meanwhile.
READ_ATTEMPTS = 3


def _one_job(spark: SparkSession):
    """Plan the queries started inside as one Spark job each (``jobs.ONE_JOB_CONF``: adaptive
    execution, which runs every shuffle stage as a job of its own, and broadcast joins, which
    collect their small side in a job of its own, are off for those queries only)."""
    return session_settings(spark, ONE_JOB_CONF)


class SparkPartTable(PartTable):
    """A part table read and written by Spark jobs (the storage side is :class:`PartTable`)."""

    # -- reading ----------------------------------------------------------------------------------
    def read_parts(
        self,
        spark: SparkSession,
        low: int,
        high: int,
        version: int | None = None,
        extra_files: Iterable[str] = (),
    ) -> DataFrame:
        """The rows (user columns and ``_part``) of parts ``low`` to ``high``, plus the rows of
        ``extra_files`` (staged files, read whole). Reading the newest version, files another
        process's compaction and expiry deleted since this table was loaded are found again on
        the newest version (Spark resolves the files when the frame is made)."""
        for attempt in range(READ_ATTEMPTS):
            try:
                return self.read_files(spark, self.files_of_parts(low, high, version) + list(extra_files))
            except Exception as error:
                if version is not None or attempt == READ_ATTEMPTS - 1 or not file_gone(error):
                    raise
                self.refresh()
        raise AssertionError("unreachable")

    def read_files(self, spark: SparkSession, uris: Iterable[str]) -> DataFrame:
        """The rows (user columns and ``_part``) of some data files of this table, committed or staged."""
        uris = list(uris)
        if not uris:
            return spark.createDataFrame([], self.read_schema)
        return spark.read.schema(self.read_schema).parquet(*uris)

    # -- writing ----------------------------------------------------------------------------------
    def stage(
        self,
        frame: DataFrame,
        target_bytes: int = TARGET_FILE_BYTES,
        single_part: bool = False,
        input_bytes: int | None = None,
    ) -> list[StagedFile]:
        """Executors write the rows of ``frame`` (user columns and ``_part``) as Parquet files under the
        data folder, each file holding one part; nothing is committed. ``single_part``: the caller
        knows every row has the same part, so the rows are written where they are (no shuffle), and
        the write runs as one Spark job; when the caller also knows the part's inputs are smaller
        than one file (``input_bytes`` below ``target_bytes``), one task writes it.

        Rows with a null ``_part`` are not written: if there are any, the files of this job are
        deleted and UnpartitionedRowsError is raised. If the job fails, its files are deleted too.
        """
        arrow_schema = self.arrow_schema
        token = uuid.uuid4().hex[:12]
        write = part_writer(self.data_directory, arrow_schema, token, target_bytes)

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            tune_allocator()
            yield from write(batches)

        columns = [F.col(f"`{name}`") for name in arrow_schema.names]
        ordered = frame.select(*columns)
        if not single_part:
            ordered = ordered.repartition(F.col(PART)).sortWithinPartitions(PART)
        elif input_bytes is not None and input_bytes < target_bytes:
            # One task writes a small part: without adaptive execution's coalescing the last stage
            # would keep every shuffle partition, each a task starting a Python worker (measured:
            # 3.0 s a step against 1.7 s with one task). A large part keeps its parallelism
            # (coalescing without a shuffle would make its whole stage one task).
            ordered = ordered.coalesce(1)
        try:
            with _one_job(frame.sparkSession):
                rows = ordered.mapInArrow(run, spark_schema(STAGED_SCHEMA)).collect()
        except BaseException:
            delete_token_files(self.data_directory, token)
            raise
        return self.staged_from(rows)

    # -- keeping the history bounded ---------------------------------------------------------------
    def compact(self, spark: SparkSession, small_file_bytes: int = TARGET_FILE_BYTES // 4) -> int | None:
        """Merge the small files of every part that has several into one file per part, as one
        snapshot recording those parts as restored (same rows, so readers need not recompute
        anything) and carrying the current snapshot's properties (a view's state). Returns the new
        version, or None when no part has several small files."""
        for attempt in range(1, COMPACT_ATTEMPTS + 1):
            self.refresh()
            expected = self.current_version()
            small = self.small_files(small_file_bytes)
            if not small:
                return None
            parts = sorted(small)
            staged = self.stage(self.read_files(spark, [u for p in parts for u in small[p]]))
            try:
                return self.commit(
                    staged,
                    replace_parts=parts,
                    restored_parts=parts,
                    operation="compact",
                    properties=self.latest_properties(),
                    expected_version=expected,
                )
            except BaseMovedError:
                self.discard(staged)
                if attempt == COMPACT_ATTEMPTS:
                    raise
            except BaseException as error:
                if not may_have_committed(error):
                    self.discard(staged)
                raise
        return None


#: The column of a fused write's reports naming the table (its position in the call) a file belongs to.
TABLE_INDEX = "table_index"


@contextmanager
def _computed_once(frames: Iterable[DataFrame]) -> Iterator[None]:
    """Compute each of ``frames`` once in the action run inside, however many branches of its plan
    read it: each is cached (lazily: its blocks are stored by the first task that computes them and
    read back by the others, in the same job) and uncached after. Exchange reuse cannot do this
    when the branches read different columns: the optimizer prunes each branch's copy of the
    shared plan to its own columns, and the pruned copies are no longer the same plan."""
    frames = list(frames)
    for frame in frames:
        frame.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        yield
    finally:
        for frame in frames:
            frame.unpersist()


def stage_together(
    pairs: list[tuple[SparkPartTable, DataFrame]], shared: Iterable[DataFrame] = ()
) -> list[list[StagedFile]]:
    """Stage the rows of several tables' frames (user columns and ``_part``, one part each, small:
    one task holds them) with one Spark action: the frames are unioned, each under a struct column
    of its own (the others null there), and one task splits each batch by that column and writes
    each table's rows to its own files. ``shared``: frames that several of them are built from
    (a helper's new rows read by its reader's query), computed once. Returns each table's staged
    files, in the order given; if the action fails, every file of it is deleted and the error
    raised (nothing is staged)."""
    if not pairs:
        return []
    spark = pairs[0][1].sparkSession
    token = uuid.uuid4().hex[:12]
    keys = [f"t{number}" for number in range(len(pairs))]
    structs = [F.struct(*[F.col(f"`{name}`") for name in table.arrow_schema.names]) for table, _ in pairs]
    types = [
        frame.select(struct.alias("s")).schema["s"].dataType
        for (_, frame), struct in zip(pairs, structs, strict=True)
    ]
    union = None
    for number, (_, frame) in enumerate(pairs):
        columns = [
            (structs[number] if other == number else F.lit(None).cast(types[other])).alias(keys[other])
            for other in range(len(pairs))
        ]
        selected = frame.select(*columns)
        union = selected if union is None else union.unionByName(selected)
    writers = [  # only picklable things: the task function is shipped to the executors
        (key, part_writer(table.data_directory, table.arrow_schema, token, TARGET_FILE_BYTES))
        for key, (table, _) in zip(keys, pairs, strict=True)
    ]
    report_schema = pa.schema([*STAGED_SCHEMA, pa.field(TABLE_INDEX, pa.int32())])

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        tune_allocator()
        rows: list[list[pa.RecordBatch]] = [[] for _ in writers]
        for batch in batches:
            for number, (key, _) in enumerate(writers):
                column = batch.column(key)
                present = column.filter(column.is_valid())
                if len(present):
                    rows[number].append(pa.RecordBatch.from_struct_array(present))
        for number, (_, write) in enumerate(writers):
            for report in write(iter(rows[number])):
                index = pa.array([number] * report.num_rows, type=pa.int32())
                yield pa.RecordBatch.from_arrays([*report.columns, index], schema=report_schema)

    try:
        with _one_job(spark), _computed_once(shared):
            found = union.coalesce(1).mapInArrow(run, spark_schema(report_schema)).collect()
    except BaseException:
        for table, _ in pairs:
            delete_token_files(table.data_directory, token)
        raise
    staged: list[list[StagedFile]] = []
    try:
        for number, (table, _) in enumerate(pairs):
            staged.append(table.staged_from(r for r in found if r[TABLE_INDEX] == number))
    except BaseException:
        for number, (table, _) in enumerate(pairs):
            table.discard(table.staged_from(r for r in found if r[TABLE_INDEX] == number and r["uri"]))
        raise
    return staged


__all__ = ["SparkPartTable", "stage_together"]
