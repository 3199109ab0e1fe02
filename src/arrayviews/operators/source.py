"""Where an array's fragments come from: a stored table at one version, or a Spark plan still to run."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from arrayviews.execution import jobs
from arrayviews.model.schema import ArraySchema
from arrayviews.storage import layout
from arrayviews.storage.array_table import ArrayTable
from arrayviews.storage.files import delete_files, read_parquet_files

ChunkRanges = Sequence[tuple[int, int]] | None


def _spark_range_filter(frame: DataFrame, schema: ArraySchema, ranges: ChunkRanges) -> DataFrame:
    if ranges is None:
        return frame
    condition = None
    for dimension, (first, last) in zip(schema.dimension_names, ranges, strict=True):
        column = F.col(layout.chunk_column(dimension))
        term = column.between(first, last)
        condition = term if condition is None else condition & term
    return frame.where(condition)


@dataclass
class StoredSource:
    """Fragments of a stored array as of one version."""

    table: ArrayTable
    version: int

    @property
    def schema(self) -> ArraySchema:
        return self.table.schema

    def file_uris(self, ranges: ChunkRanges = None) -> list[str]:
        return [f.file_path for f in self.table.data_files(self.version, ranges)]

    def frame(self, spark: SparkSession, ranges: ChunkRanges = None) -> DataFrame:
        arrow_schema = layout.fragment_schema(self.schema)
        frame = jobs.read_files(spark, self.file_uris(ranges), arrow_schema)
        return _spark_range_filter(frame, self.schema, ranges)

    def local(self, ranges: ChunkRanges = None, columns: list[str] | None = None) -> pa.Table:
        arrow_schema = layout.fragment_schema(self.schema)
        return read_parquet_files(
            self.file_uris(ranges),
            columns=columns,
            row_filter=layout.chunk_ranges_filter(self.schema, ranges),
            schema=arrow_schema,
        )

    def metadata(self, ranges: ChunkRanges = None) -> pa.Table:
        return self.local(ranges, columns=layout.metadata_columns(self.schema))


@dataclass
class ComputedSource:
    """Fragments produced by a Spark plan (an operator result not stored yet)."""

    schema: ArraySchema
    plan: DataFrame
    #: A folder where executors may leave result files for the driver to read (see ``local``).
    scratch: str | None = None

    def frame(self, spark: SparkSession, ranges: ChunkRanges = None) -> DataFrame:
        return _spark_range_filter(self.plan, self.schema, ranges)

    def local(self, ranges: ChunkRanges = None, columns: list[str] | None = None) -> pa.Table:
        """Run the plan and bring its fragments (or some columns of them) to the driver.

        Cell payloads travel through files: executors write Parquet into the scratch folder and the
        driver reads it with pyarrow, which is several times faster than collecting large binary
        values through Spark's driver connection. Small projections (metadata) are collected directly.
        """
        arrow_schema = layout.fragment_schema(self.schema)
        frame = _spark_range_filter(self.plan, self.schema, ranges)
        payloads = columns is None or any(c.startswith(("v__", "z__")) or c == layout.CELLS for c in columns)
        if self.scratch is not None and payloads:
            folder = self.scratch.rstrip("/") + "/" + uuid.uuid4().hex
            written = jobs.write_files(frame, folder, arrow_schema)
            try:
                return read_parquet_files([w.uri for w in written], columns=columns, schema=arrow_schema)
            finally:
                delete_files([w.uri for w in written])
        if columns is not None:
            frame = frame.select(*columns)
            arrow_schema = pa.schema([arrow_schema.field(c) for c in columns])
        return jobs.collect(frame, arrow_schema)

    def metadata(self, ranges: ChunkRanges = None) -> pa.Table:
        return self.local(ranges, columns=layout.metadata_columns(self.schema))


Source = StoredSource | ComputedSource
