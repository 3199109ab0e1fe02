"""The Spark engine: every operation of the execution interface as Spark jobs over Arrow batches."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from arrayviews.execution import jobs, spark_cells
from arrayviews.execution.engine import (
    BatchFunction,
    ChunkRanges,
    Data,
    Engine,
    FloorKey,
    PairFunction,
    PartitionFunction,
    WrittenFile,
    key_table,
)
from arrayviews.execution.local_engine import LocalData
from arrayviews.storage.files import delete_files, read_parquet_files

#: Collected results with payload columns larger than this travel through scratch files.
DIRECT_COLLECT_BYTES = 8 * 1024 * 1024


#: Cells a shuffle partition of a one-job action takes (about 64 MB of Arrow rows, the size adaptive
#: execution coalesces small partitions to).
CELLS_PER_TASK = 1_000_000
#: Key sets up to this size select rows by a filter expression; larger ones by a broadcast join.
FILTER_KEYS = 4096


def _any_key(columns: list[str], keys: np.ndarray) -> Column:
    """Whether a row's ``columns`` equal one of the rows of ``keys``: the first column's values
    (``isin``) where there is one column; else, per value of the first column, the rest matched
    the same way, OR-ed as a balanced tree (the depth of the expression grows as the logarithm of
    the keys, not with them)."""
    if len(keys) == 0:
        return F.lit(False)
    if len(columns) == 1:
        return F.col(columns[0]).isin([int(k) for k in keys[:, 0]])
    terms = []
    for first in np.unique(keys[:, 0]):
        rest = keys[keys[:, 0] == first][:, 1:]
        terms.append((F.col(columns[0]) == F.lit(int(first))) & _any_key(columns[1:], rest))
    while len(terms) > 1:
        terms = [a | b for a, b in zip(terms[::2], terms[1::2], strict=False)] + (
            [terms[-1]] if len(terms) % 2 else []
        )
    return terms[0]


class SparkEngine(Engine):
    """Operations as Spark jobs on one session; data sets are Spark DataFrames."""

    name = "spark"

    def __init__(self, spark: SparkSession, scratch: str | None = None) -> None:
        self.spark = spark
        #: A folder where executors leave large results for the driver to read with pyarrow.
        self.scratch = scratch

    def read_files(self, uris, arrow_schema, chunk_columns=(), ranges: ChunkRanges = None) -> DataFrame:
        return self.where_ranges(jobs.read_files(self.spark, list(uris), arrow_schema), chunk_columns, ranges)

    def from_arrow(self, table: pa.Table, arrow_schema: pa.Schema) -> DataFrame:
        return self.spark.createDataFrame(
            jobs.conform(table, arrow_schema), schema=jobs.spark_schema(arrow_schema)
        )

    def one_task_each(self, table: pa.Table) -> DataFrame:
        rows = [tuple(row.values()) for row in table.to_pylist()]
        slices = self.spark.sparkContext.parallelize(rows, max(1, len(rows)))
        return self.spark.createDataFrame(slices, schema=jobs.spark_schema(table.schema))

    def parallelism(self) -> int:
        return int(self.spark.sparkContext.defaultParallelism)

    def schema_of(self, data: DataFrame) -> pa.Schema:
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(data.schema)

    def union(self, parts: Sequence[DataFrame]) -> DataFrame:
        result = parts[0]
        for part in parts[1:]:
            result = result.unionByName(part)
        return result

    def where_ranges(self, data: DataFrame, chunk_columns: Sequence[str], ranges: ChunkRanges) -> DataFrame:
        if ranges is None:
            return data
        condition = None
        for column, (first, last) in zip(chunk_columns, ranges, strict=True):
            term = F.col(column).between(first, last)
            condition = term if condition is None else condition & term
        return data.where(condition)

    def where_keys(self, data: DataFrame, columns, keys: np.ndarray, keep: bool = True) -> DataFrame:
        keys = np.asarray(keys, dtype=np.int64).reshape(-1, len(columns))
        if len(keys) <= FILTER_KEYS:  # a filter: no broadcast, so no job of its own to collect the keys
            found = _any_key(list(columns), np.unique(keys, axis=0))
            return data.where(F.coalesce(found, F.lit(False)) if keep else ~F.coalesce(found, F.lit(False)))
        wanted = self.spark.createDataFrame(key_table(columns, keys))
        return data.join(F.broadcast(wanted), on=list(columns), how="left_semi" if keep else "left_anti")

    def select(self, data: DataFrame, columns: Sequence[str]) -> DataFrame:
        return jobs.select_columns(data, columns)

    def with_floor_keys(self, data: DataFrame, keys: Sequence[FloorKey]) -> DataFrame:
        for name, column, origin, length in keys:
            offset = F.col(column) - F.lit(origin)
            # exact floor division for any sign: subtract the non-negative remainder first
            data = data.withColumn(name, jobs.integer_div(offset - F.pmod(offset, F.lit(length)), length))
        return data

    def map_batches(self, data: DataFrame, function: BatchFunction, out_schema: pa.Schema) -> DataFrame:
        return jobs.map_batches(data, function, out_schema)

    def map_partitions_by(
        self, data: DataFrame, keys: Sequence[str], function: PartitionFunction, out_schema: pa.Schema
    ) -> DataFrame:
        return jobs.map_partitions(data.repartition(*keys), function, out_schema)

    def group(self, data: DataFrame, keys, function: BatchFunction, out_schema: pa.Schema) -> DataFrame:
        return jobs.group_tables(data, list(keys), function, out_schema)

    def cogroup(self, left, right, keys, function: PairFunction, out_schema: pa.Schema) -> DataFrame:
        return jobs.cogroup_tables(left, right, list(keys), function, out_schema)

    def collect(self, data: DataFrame, arrow_schema: pa.Schema) -> pa.Table:
        """Small results come through Spark's driver connection; cell payloads travel through files
        (executors write Parquet into the scratch folder, the driver reads it with pyarrow, several
        times faster than collecting large binary values)."""
        payloads = any(pa.types.is_binary(f.type) for f in arrow_schema)
        if self.scratch is None or not payloads:
            return jobs.collect(data.select(*arrow_schema.names), arrow_schema)
        folder = self.scratch.rstrip("/") + "/" + uuid.uuid4().hex
        # a mapped frame is computed and written by one task (the files hold only arrow_schema's columns)
        frame = data if jobs.is_mapped(data) else data.select(*arrow_schema.names)
        written = jobs.write_files(frame, folder, arrow_schema)
        try:
            return read_parquet_files([w.uri for w in written], schema=arrow_schema)
        finally:
            delete_files([w.uri for w in written])

    def write_files(
        self,
        data: DataFrame,
        directory_uri: str,
        arrow_schema: pa.Schema,
        stamp: Callable[[pa.Table], pa.Table] | None = None,
        target_bytes: int | None = None,
        cluster_by: Sequence[str] = (),
        tasks: int | None = None,
    ) -> list[WrittenFile]:
        if tasks is not None:
            data = data.coalesce(max(1, tasks))
        if cluster_by:
            data = data.sortWithinPartitions(*cluster_by)
        if target_bytes is None:
            return jobs.write_files(data, directory_uri, arrow_schema, stamp=stamp)
        return jobs.write_files(data, directory_uri, arrow_schema, stamp=stamp, target_bytes=target_bytes)

    def owns(self, data: Data) -> bool:
        return isinstance(data, DataFrame)

    def adopt(self, data: Data, arrow_schema: pa.Schema) -> DataFrame:
        if isinstance(data, DataFrame):
            return data
        if isinstance(data, LocalData):
            return self.from_arrow(data.table(), arrow_schema)
        raise TypeError(f"not a data set: {type(data).__name__}")

    def checked_cells(self, cells: DataFrame, schema) -> tuple[DataFrame, int]:
        checked = spark_cells.conform_frame(cells, schema)
        return checked, spark_cells.check_frame(checked, schema)

    def read_cell_files(self, path: str, schema, file_format: str | None = None) -> DataFrame:
        return spark_cells.read_cell_files(self.spark, path, schema, file_format)

    def one_job(self, cells: int | None = None) -> AbstractContextManager[None]:
        """Actions planned inside run as one job each: adaptive execution and broadcast joins off.
        Without adaptive coalescing every shuffle partition is a task (a Python worker's call per
        group), so the shuffles get one partition per CELLS_PER_TASK of the ``cells`` planned, at
        least one and at most twice the parallelism, as coalescing would have left them."""
        settings = dict(jobs.ONE_JOB_CONF)
        if cells is not None:
            partitions = min(max(1, -(-int(cells) // CELLS_PER_TASK)), 2 * self.parallelism())
            settings["spark.sql.shuffle.partitions"] = str(partitions)
        return jobs.session_settings(self.spark, settings)

    def jobs_run(self) -> int:
        return len(self.spark.sparkContext.statusTracker().getJobIdsForGroup())
