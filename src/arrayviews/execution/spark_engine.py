"""The Spark engine: every operation of the execution interface as Spark jobs over Arrow batches."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
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
        wanted = self.spark.createDataFrame(key_table(columns, keys))
        return data.join(F.broadcast(wanted), on=list(columns), how="left_semi" if keep else "left_anti")

    def select(self, data: DataFrame, columns: Sequence[str]) -> DataFrame:
        return data.select(*columns)

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
        written = jobs.write_files(data.select(*arrow_schema.names), folder, arrow_schema)
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

    def jobs_run(self) -> int:
        return len(self.spark.sparkContext.statusTracker().getJobIdsForGroup())
