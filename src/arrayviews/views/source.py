"""A view's table read as an array: its public aggregates only, the maintenance state left out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from arrayviews.execution.spark_engine import SparkEngine
from arrayviews.model.schema import ArraySchema
from arrayviews.operators.source import ChunkRanges, StoredSource
from arrayviews.storage import kinds, layout
from arrayviews.storage.array_table import ArrayTable

if TYPE_CHECKING:  # only named in the hints of ``frame``, the Spark form callers may ask for
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class ViewSource(StoredSource):
    """Fragments of a stored view as of one version, projected to the public attributes.

    Attributes are stored column by column, so leaving the state out reads nothing extra.
    """

    public: ArraySchema | None = None

    @property
    def schema(self) -> ArraySchema:
        return self.public

    @property
    def stored_schema(self) -> ArraySchema:
        return self.table.schema

    def frame(self, spark: SparkSession, ranges: ChunkRanges = None) -> DataFrame:
        frame = StoredSource.frame(self, spark, ranges)
        return SparkEngine(spark).select(frame, layout.fragment_schema(self.public).names)

    def local(self, ranges: ChunkRanges = None, columns: list[str] | None = None) -> pa.Table:
        columns = columns if columns is not None else layout.fragment_schema(self.public).names
        return StoredSource.local(self, ranges, columns)

    def metadata(self, ranges: ChunkRanges = None) -> pa.Table:
        return StoredSource.metadata(self, ranges)  # the public attributes' columns (self.schema)


def public_schema(stored: ArraySchema) -> ArraySchema:
    """A stored view's schema without its maintenance state: the attributes users see."""
    return stored.with_attributes([a for a in stored.attributes if not a.internal])


def base_source(table: ArrayTable, version: int) -> StoredSource:
    """A view's base as of ``version``: a stored array as it is, a view (views over views) as its
    public aggregates, so the view above reads and diffs only what users of the view below see."""
    if table.kind == kinds.STORED_ARRAY_VIEW:
        return ViewSource(table, version, public_schema(table.schema))
    return StoredSource(table, version)
