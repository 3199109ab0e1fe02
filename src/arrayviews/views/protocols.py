"""What the view layer needs of arrays and of the database: a read protocol, not the API classes.

The public handles (``arrayviews.Array``, ``arrayviews.Database``) sit above this layer and
satisfy these protocols; views only ever read an array's schema, its source of fragments and its
version, and find arrays by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from arrayviews.model.schema import ArraySchema
    from arrayviews.operators.source import Source
    from arrayviews.storage.warehouse import Warehouse


class ReadableArray(Protocol):
    """An array as views read it (a stored array at a version, or a computed one)."""

    @property
    def name(self) -> str: ...

    @property
    def schema(self) -> ArraySchema: ...

    @property
    def source(self) -> Source: ...

    @property
    def version(self) -> int | None: ...

    def window(self, extents, *aggregates: str) -> ReadableArray: ...

    def to_pandas(self, sort: bool = True): ...


class ArrayDatabase(Protocol):
    """Where views find their base arrays, compute and store: one warehouse and one Spark session."""

    spark: SparkSession
    warehouse: Warehouse

    @property
    def scratch_location(self) -> str: ...

    def array(self, name: str) -> ReadableArray: ...


__all__ = ["ArrayDatabase", "ReadableArray"]
