"""``connect`` and the ``Database``: a Spark session plus a warehouse of arrays in one catalog."""

from __future__ import annotations

import dataclasses
import os

import pandas as pd
import pyarrow as pa
from pyspark.sql import SparkSession

from arrayviews.array import Array
from arrayviews.execution import jobs
from arrayviews.execution.memory import tune_allocator
from arrayviews.execution.session import start_session
from arrayviews.model.errors import NotFoundError, SchemaError, ValidationError
from arrayviews.model.faults import checkpoint
from arrayviews.model.schema import ArraySchema
from arrayviews.model.schema_parser import parse_schema
from arrayviews.operators.source import StoredSource
from arrayviews.operators.writes import WriteResult
from arrayviews.storage import layout
from arrayviews.storage.array_table import KIND_PROPERTY, CommitInfo
from arrayviews.storage.files import delete_files
from arrayviews.storage.warehouse import Warehouse

DEFAULT_WAREHOUSE = "warehouse"


def connect(
    path: str | None = None,
    *,
    spark: SparkSession | None = None,
    master: str | None = None,
    catalog_uri: str | None = None,
    spark_config: dict[str, str] | None = None,
) -> Database:
    """Open (creating if needed) a warehouse and the Spark session to work on it.

    ``path`` is a local folder (default ``./warehouse``) or a URL of any Hadoop-compatible file
    system pyarrow reaches (``hdfs://...``, ``s3://...``). The embedded default runs Spark in local
    mode with all cores and keeps the catalog in ``catalog.db`` (SQLite) inside the warehouse.
    On a cluster, pass an existing ``spark`` session or a ``master`` URL, and a shared
    ``catalog_uri`` (a SQLAlchemy URL such as ``postgresql+psycopg2://user@host/db``).
    """
    tune_allocator()
    location = path or os.environ.get("ARRAYVIEWS_WAREHOUSE", DEFAULT_WAREHOUSE)
    session = spark or start_session(master=master, config=spark_config)
    return Database(Warehouse(location, catalog_uri), session)


class Database:
    """Arrays in one warehouse, computed with one Spark session."""

    def __init__(self, warehouse: Warehouse, spark: SparkSession) -> None:
        self.warehouse = warehouse
        self.spark = spark

    @property
    def scratch_location(self) -> str:
        """Folder for short-lived result files that executors hand to the driver."""
        return self.warehouse.location.rstrip("/") + "/_scratch"

    def __repr__(self) -> str:
        return f"<Database {self.warehouse.location} on Spark {self.spark.sparkContext.master}>"

    # -- arrays ------------------------------------------------------------------------------------
    def create_array(self, schema: str | ArraySchema, name: str | None = None) -> Array:
        """Create an empty array from a schema (SciDB text such as ``A<v:float64>[i=1:100:10]``)."""
        if isinstance(schema, str):
            schema = parse_schema(schema, name)
        elif name is not None:
            schema = schema.renamed(name)
        if not isinstance(schema, ArraySchema):
            raise SchemaError(f"create_array needs a schema text or ArraySchema, got {type(schema).__name__}")
        table = self.warehouse.create(schema)
        return Array(self, StoredSource(table, 0))

    def array(self, name: str) -> Array:
        """The stored array ``name`` (reads follow its newest version); for a view, the view."""
        table = self.warehouse.open(name)
        if table.table.metadata.properties.get(KIND_PROPERTY) == "view":
            return self.view(name)
        return Array(self, StoredSource(table, table.current_version()))

    def arrays(self) -> list[str]:
        """Names of the arrays (views are listed by :meth:`views`)."""
        return self.warehouse.names(kind="array")

    def drop_array(self, name: str) -> None:
        """Drop an array and delete its data (refused while a view is defined over it)."""
        table = self.warehouse.open(name)
        if table.table.metadata.properties.get(KIND_PROPERTY) == "view":
            raise ValidationError(f"{table.name} is a view: use drop_view")
        dependants = [
            v
            for v in self.views()
            if table.name.lower() in {b.lower() for b in self.view(v).definition.bases}
        ]
        if dependants:
            raise ValidationError(
                f"array {table.name} is the base of view(s) {', '.join(dependants)}: drop them first"
            )
        self.warehouse.drop(name)

    def describe(self) -> pd.DataFrame:
        """One row per array: name, schema, version, cells."""
        rows = []
        for name in self.arrays():
            array = self.array(name)
            rows.append(
                {
                    "name": array.name,
                    "schema": array.schema.to_text(),
                    "version": array.version,
                    "cells": array.count(),
                }
            )
        return pd.DataFrame(rows, columns=["name", "schema", "version", "cells"])

    # -- views ----------------------------------------------------------------------------------------
    def create_view(self, name: str, definition, chunks=None):
        """Create a materialized view (computed now, stored as an array) from a definition object or
        the text of ``SELECT ... FROM A A1 SIMILARITY JOIN B A2 ON ... WITH SHAPE ... GROUP BY ...``."""
        from arrayviews.views.view import create_view

        if isinstance(definition, str):
            from arrayviews.language.view_executor import view_definition_from_text

            definition = view_definition_from_text(self, definition)
        return create_view(self, name, definition, chunks)

    def similarity_join(self, alpha, beta, shape, mapping=None, value=None):
        """For each non-empty cell of ``alpha``, the non-empty cells of ``beta`` inside ``shape`` centred
        on the mapped cell; ``.aggregate("count(*) as cnt", ...)`` groups by alpha's cells without
        materializing pairs, ``.materialize()`` gives the 2d-dimensional array of pairs."""
        from arrayviews.views.join import similarity_join

        return similarity_join(self, alpha, beta, shape, mapping, value)

    def view(self, name: str):
        """The view ``name``."""
        from arrayviews.views.view import open_view

        if not self.warehouse.exists(name):
            raise NotFoundError(f"no view named {name} (views: {', '.join(self.views()) or 'none'})")
        return open_view(self, name)

    def views(self) -> list[str]:
        return self.warehouse.names(kind="view")

    def drop_view(self, name: str) -> None:
        self.view(name)  # raises if it is not a view
        self.warehouse.drop(name)

    # -- streams (paper 004) ---------------------------------------------------------------------------
    def create_stream(self, name: str, schema, partition_length: int, time_column: str):
        """An append-only stream of rows (schema as Spark DDL text or a StructType) cut into parts of
        ``partition_length`` seconds of ``time_column``; each append maintains the stream views."""
        from arrayviews.streams.stream import create_stream

        return create_stream(self, name, schema, partition_length, time_column)

    def stream(self, name: str):
        from arrayviews.streams.stream import open_stream

        return open_stream(self, name)

    def streams(self) -> list[str]:
        from arrayviews.streams.stream import stream_names

        return stream_names(self)

    def drop_stream(self, name: str) -> None:
        """Drop a stream; refused while a stream view reads it."""
        from arrayviews.streams.stream import drop_stream
        from arrayviews.streams.world import StreamWorld

        readers = sorted(
            d.name
            for d in StreamWorld(self.spark, self.warehouse.catalog).definitions().values()
            if name.lower() in d.sources()
        )
        if readers:
            raise ValidationError(f"stream {name} is read by view(s) {', '.join(readers)}; drop those first")
        drop_stream(self, name)

    def create_stream_view(self, definition, lateness_parts: int | None = None):
        """Create a view maintained by View Delta Functions over streams: a ``CREATE VIEW`` statement
        (hand-written INITIALIZE/UPDATE, or a PATTERN or WINDOW query translated automatically), a
        ViewDFDefinition, or a list of them (helpers first). Builds its parts now; returns the view.
        ``lateness_parts``: how many parts of late rows a helper view keeps its old parts for."""
        from arrayviews.streams.stream_views import StreamView, create_views

        if isinstance(definition, str):
            return self._create_stream_view_from_text(definition, lateness_parts)
        definitions = list(definition) if isinstance(definition, list | tuple) else [definition]
        create_views(self.spark, self.warehouse.catalog, definitions, lateness_parts)
        return StreamView(self.spark, self.warehouse.catalog, definitions[-1].name)

    def stream_view(self, name: str):
        from arrayviews.streams.stream_views import StreamView

        return StreamView(self.spark, self.warehouse.catalog, name)

    def stream_views(self, helpers: bool = False) -> list[str]:
        from arrayviews.streams.world import StreamWorld

        definitions = StreamWorld(self.spark, self.warehouse.catalog).definitions()
        return sorted(n for n, d in definitions.items() if helpers or not d.helper)

    def drop_stream_view(self, name: str) -> list[str]:
        """Drop a stream view and the helper views only it reads; returns the names dropped."""
        from arrayviews.streams.stream_views import drop_view

        return drop_view(self.spark, self.warehouse.catalog, name)

    def maintain_streams(self):
        """Bring every stream view up to date (new parts, late rows, retention)."""
        from arrayviews.streams.maintainer import maintain_all
        from arrayviews.streams.world import StreamWorld

        return maintain_all(self.spark, StreamWorld(self.spark, self.warehouse.catalog))

    # -- storing results ---------------------------------------------------------------------------
    def _store(self, array: Array, name: str) -> Array:
        schema = array.schema.renamed(name)
        table = self.warehouse.create(schema)
        written: list[jobs.WrittenFile] = []
        try:
            arrow_schema = layout.fragment_schema(schema)
            frame = array.source.frame(self.spark)

            def stamp(rows: pa.Table) -> pa.Table:
                index = rows.schema.get_field_index(layout.VERSION)
                return rows.set_column(index, layout.VERSION, pa.array([1] * rows.num_rows, pa.int64()))

            written = jobs.write_files(frame, table.data_directory, arrow_schema, stamp=stamp)
            checkpoint("store.before-commit")
            table.commit(
                [w.uri for w in written],
                [],
                CommitInfo("store", cells_added=sum(w.cells for w in written)),
                0,
            )
        except BaseException:
            delete_files([w.uri for w in written])
            self.warehouse.drop(name)
            raise
        return Array(self, StoredSource(table, table.current_version()))

    # -- statements --------------------------------------------------------------------------------
    def sql(self, text: str):
        """Run statements of the statement language (any mix of arrays, array views, streams and
        stream views, and Spark SQL queries over them); returns the result of the last one."""
        from arrayviews.language.executor import execute_text

        return execute_text(self, text)

    def _create_stream_view_from_text(self, text: str, lateness_parts: int | None):
        from arrayviews.language import syntax as ast
        from arrayviews.language.executor import execute
        from arrayviews.language.parser import parse_statement

        statement = parse_statement(text)
        if not isinstance(statement, ast.CreateViewDF | ast.CreatePatternView | ast.CreateWindowView):
            raise ValidationError(
                "create_stream_view takes one CREATE VIEW statement (a ViewDF, a PATTERN or a WINDOW query)"
            )
        if lateness_parts is not None:
            statement = dataclasses.replace(statement, lateness=lateness_parts)
        return execute(self, statement)

__all__ = ["Database", "WriteResult", "connect"]
