"""``connect`` and the ``Database``: a Spark session plus a warehouse of relations in one catalog."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os

import pandas as pd
import pyarrow as pa
from pyspark.sql import SparkSession

from arrayviews import stream as streams_api
from arrayviews import stream_view as stream_views_api
from arrayviews.array import Array
from arrayviews.array import _dense_arrays as dense_arrays
from arrayviews.execution.cost import MODES
from arrayviews.execution.executors import Executors
from arrayviews.execution.failures import translated, translating
from arrayviews.execution.local_engine import follow_chunk_cache_budget
from arrayviews.execution.memory import tune_allocator
from arrayviews.execution.session import LazySession
from arrayviews.language import syntax as ast
from arrayviews.language.executor import execute, execute_text
from arrayviews.language.parser import parse_statement
from arrayviews.language.view_executor import view_definition_from_text
from arrayviews.model.errors import (
    AlreadyExistsError,
    ArrayViewsError,
    MaintenanceError,
    NotFoundError,
    SchemaError,
    ValidationError,
)
from arrayviews.model.faults import checkpoint
from arrayviews.model.names import check_identifier
from arrayviews.model.schema import ArraySchema
from arrayviews.model.schema_parser import parse_schema
from arrayviews.model.uncertain import UncertainSchema
from arrayviews.model.uncertain_schema_parser import parse_uncertain_schema
from arrayviews.operators.calibration import calibrate
from arrayviews.operators.source import StoredSource, choose_engine
from arrayviews.operators.uncertain_calibration import calibrate_engines
from arrayviews.operators.writes import WriteResult
from arrayviews.operators.xarray_block import xarray_block
from arrayviews.scheduling.maintenance_pass import MaintenancePass, in_dependency_order, run_pass
from arrayviews.similarity_join import similarity_join
from arrayviews.storage import kinds, layout
from arrayviews.storage.array_table import CommitInfo
from arrayviews.storage.check import check_warehouse
from arrayviews.storage.chunk_cache import process_cache
from arrayviews.storage.creation import drop_table_as_checked
from arrayviews.storage.part_table import PartTable
from arrayviews.storage.uncertain_table import UncertainTable
from arrayviews.storage.warehouse import Warehouse, check_folder
from arrayviews.stream import Stream
from arrayviews.stream_view import StreamView
from arrayviews.streams.calibration import calibrate_stream_steps
from arrayviews.streams.maintainer import maintain_all
from arrayviews.streams.world import StreamWorld
from arrayviews.uncertain import UncertainArray, layout_of, workload_of
from arrayviews.view import View, create_view, open_view
from arrayviews.views.catalog import RelationCatalog

DEFAULT_WAREHOUSE = "warehouse"
#: The method that drops a relation of each kind (named in errors).
DROP_METHODS = {
    kinds.ARRAY: "drop_array",
    kinds.ARRAY_VIEW: "drop_view",
    kinds.UNCERTAIN_ARRAY: "drop_uncertain_array",
    kinds.STREAM: "drop_stream",
    kinds.STREAM_VIEW: "drop_stream_view",
}


@translated
def connect(
    path: str | None = None,
    *,
    spark: SparkSession | None = None,
    master: str | None = None,
    catalog_uri: str | None = None,
    spark_config: dict[str, str] | None = None,
    create_in_existing_folder: bool = False,
    allow_unsafe_sql: bool = False,
    execution: str = "auto",
    chunk_cache_bytes: int | None = None,
) -> Database:
    """Open (creating if needed) a warehouse and the Spark session to work on it.

    Without ``spark``, the session is started on first use (``execution/session.py``
    ``LazySession``): small array, view and uncertain work that runs in-process never waits for the
    JVM; streams, Spark SQL and work the cost model sends to Spark start it.

    ``path`` is a local folder (default ``./warehouse``) or a URL of any Hadoop-compatible file
    system pyarrow reaches (``hdfs://...``, ``s3://...``). The embedded default runs Spark in local
    mode with all cores and keeps the catalog in ``catalog.db`` (SQLite) inside the warehouse.
    On a cluster, pass an existing ``spark`` session or a ``master`` URL, and a shared
    ``catalog_uri`` (a SQLAlchemy URL such as ``postgresql+psycopg2://user@host/db``).

    A folder that does not exist or is empty becomes a warehouse, and an existing warehouse opens;
    a folder holding anything else is refused (nothing is written there) unless
    ``create_in_existing_folder=True``; a folder whose ``catalog.db`` is not arrayviews' always is.
    Spark SQL queries through :meth:`Database.sql` may only read streams and stream views, with no
    Java reflection, unless ``allow_unsafe_sql=True``.

    ``execution`` picks where operators and view refreshes run: ``"auto"`` (default) chooses per
    operation by a cost model over chunk metadata (small work in-process with pyarrow and numpy,
    large work on Spark; thresholds from ``db.calibrate()``, stored in the warehouse, or defaults);
    ``"spark"`` or ``"local"`` always use that engine.

    ``chunk_cache_bytes`` bounds the cache of decoded chunks that small reads (``to_numpy`` of an
    array or subarray touching at most 2^22 cells of chunks) share in this process: the least recently
    used chunks leave first; 0 turns it off. It is one cache per process, so the last value given
    holds for every connection; by default 256 MiB (or ``ARRAYVIEWS_CHUNK_CACHE_BYTES``). The
    in-process engine's recent reads of data files (which one refresh's terms share) get a quarter
    of it, at most 64 MiB, and are off with it.
    """
    if execution not in MODES:
        raise ValidationError(f"execution must be one of {', '.join(MODES)}, got {execution!r}")
    if chunk_cache_bytes is not None:
        if (
            isinstance(chunk_cache_bytes, bool)
            or not isinstance(chunk_cache_bytes, int)
            or chunk_cache_bytes < 0
        ):
            raise ValidationError(
                f"chunk_cache_bytes must be a number of bytes >= 0, got {chunk_cache_bytes!r}"
            )
        process_cache().resize(chunk_cache_bytes)
        follow_chunk_cache_budget(chunk_cache_bytes)
    tune_allocator()
    location = path or os.environ.get("ARRAYVIEWS_WAREHOUSE", DEFAULT_WAREHOUSE)
    check_folder(location, catalog_uri, create_in_existing_folder)
    session = spark or LazySession(master=master, config=spark_config)
    warehouse = Warehouse(location, catalog_uri, create_in_existing_folder)
    return Database(warehouse, session, allow_unsafe_sql=allow_unsafe_sql, execution=execution)


@translating
class Database:
    """Arrays in one warehouse, computed with one Spark session."""

    def __init__(
        self,
        warehouse: Warehouse,
        spark: SparkSession,
        allow_unsafe_sql: bool = False,
        execution: str = "auto",
    ) -> None:
        self.warehouse = warehouse
        self.spark = spark
        self.allow_unsafe_sql = allow_unsafe_sql
        #: The Spark and in-process engines and the cost model choosing between them.
        self.executors = Executors(spark, self.scratch_location, warehouse.location, execution)

    @property
    def scratch_location(self) -> str:
        """Folder for short-lived result files that executors hand to the driver."""
        return self.warehouse.location.rstrip("/") + "/_scratch"

    def __repr__(self) -> str:
        if isinstance(self.spark, LazySession):
            waiting = "" if self.spark.started else ", not started yet"
            return f"<Database {self.warehouse.location} on Spark {self.spark.master}{waiting}>"
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

    def from_xarray(self, data, name: str) -> Array:
        """A new array ``name`` holding an ``xarray.DataArray`` (one attribute, named after it or
        ``value``) or ``Dataset`` (one attribute per variable), with its dimension coordinates:
        ``db.from_xarray(A.to_xarray(), "B")`` copies ``A``, scales included. Integer coordinates must be
        consecutive (they are the cells); evenly spaced float coordinates become a coordinate scale and
        evenly spaced ``datetime64`` coordinates a time scale (docs/notebooks.md); cells where every
        variable is NaN are empty, and a variable NaN where another has a value is a nullable
        attribute with nulls there. The values are checked before the array is created."""
        schema, values, origin = xarray_block(data, name)
        dense_arrays(schema, values, None)  # refuse bad values before anything is created
        array = self.create_array(schema)
        try:
            array.write_dense(values, origin=origin)
        except BaseException:
            self.warehouse.drop(name)
            raise
        return self.array(name)

    def array(self, name: str) -> Array:
        """The stored array ``name`` (reads follow its newest version); for a view, the view."""
        table = self.warehouse.open(name)
        if table.kind == kinds.STORED_ARRAY_VIEW:
            return self.view(name)
        if table.kind == kinds.STORED_UNCERTAIN:
            return self.uncertain_array(name)
        return Array(self, StoredSource(table, table.current_version()))

    def arrays(self) -> list[str]:
        """Names of the arrays (views are listed by :meth:`views`)."""
        return self.catalog.names(kinds.ARRAY)

    def drop_array(self, name: str) -> None:
        """Drop an array and delete its data (refused while a view is defined over it)."""
        self.drop(name, kinds.ARRAY)

    # -- the catalog of relations ----------------------------------------------------------------------
    @property
    def catalog(self) -> RelationCatalog:
        """Every relation of the warehouse with its kind, and what each view reads."""
        return RelationCatalog(self.warehouse, self.spark)

    def relations(self, helpers: bool = False) -> pd.DataFrame:
        """One row per relation: ``name``, ``kind`` (array, array view, uncertain array, stream,
        stream view), current ``version`` and, for views, whether base data is ``pending`` (not yet
        reflected; None for relations that are not views). Helper stream views only with ``helpers``."""
        rows = []
        for entry in self.catalog.entries(helpers):
            pending = None
            try:
                if entry.kind == kinds.ARRAY_VIEW:
                    pending = bool(self.view(entry.name).status()["pending"])
                elif entry.kind == kinds.STREAM_VIEW:
                    pending = bool(self.stream_view(entry.name).pending())
            except NotFoundError:  # a source without a catalog entry (``check`` says what to do)
                pending = None
            rows.append(
                {"name": entry.name, "kind": entry.kind, "version": entry.version, "pending": pending}
            )
        return pd.DataFrame(rows, columns=["name", "kind", "version", "pending"])

    def kind_of(self, name: str) -> str | None:
        """The kind of the relation called ``name`` (case-insensitive), or None when there is none."""
        entry = self.catalog.entry(name)
        return None if entry is None else entry.kind

    def drop(self, name: str, kind: str | None = None) -> list[str]:
        """Drop the relation ``name`` (of ``kind``, when given) and delete its data; refused while a
        view reads it (the error names those views). Dropping a stream view also drops the helper
        views only it read. Returns the names dropped."""
        catalog = self.catalog
        entry = catalog.require(name) if kind is None else catalog.entry(name, kind)
        if entry is None:
            noun = "view" if kind == kinds.ARRAY_VIEW else kind
            known = ", ".join(catalog.names(kind)) or "none"
            raise NotFoundError(f"no {noun} named {name} ({noun}s: {known})")
        if kind is not None and entry.kind != kind:
            raise ValidationError(
                f"{entry.name} is {kinds.with_article(entry.kind)}, not {kinds.with_article(kind)}: "
                f"use {DROP_METHODS[entry.kind]}",
                array=entry.name,
            )
        # the array as checked for readers: one dropped and created again meanwhile is not dropped
        if entry.kind in (kinds.STREAM, kinds.STREAM_VIEW):
            identity = PartTable.open(self.warehouse.catalog, kinds.STREAMS_NAMESPACE, entry.name).identity
        else:
            identity = self.warehouse.open(entry.name).identity
        catalog.refuse_if_read(entry)

        def refuse() -> None:  # again as the drop commits: a view created meanwhile keeps it
            self.catalog.refuse_if_read(entry)

        if entry.kind == kinds.STREAM:
            streams_api.drop_stream(self, entry.name, identity, refuse)
            return [entry.name]
        if entry.kind == kinds.STREAM_VIEW:
            return stream_views_api.drop_view(
                self.spark, self.warehouse.catalog, entry.name, identity, refuse
            )
        drop_table_as_checked(
            self.warehouse.catalog,
            (kinds.ARRAYS_NAMESPACE, entry.name.lower()),
            identity,
            f"{entry.kind} {entry.name}",
            refuse,
        )
        return [entry.name]

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
    def create_view(self, name: str, definition, chunks=None) -> View:
        """Create a materialized view (computed now, stored as an array) from a definition object or
        the text of ``SELECT ... FROM A A1 SIMILARITY JOIN B A2 ON ... WITH SHAPE ... GROUP BY ...``."""
        check_identifier(name, "view", ValidationError)
        if isinstance(definition, str):
            definition = view_definition_from_text(self, definition)
        return create_view(self, name, definition, chunks)

    def similarity_join(self, alpha, beta, shape, mapping=None, value=None):
        """For each non-empty cell of ``alpha``, the non-empty cells of ``beta`` inside ``shape`` centred
        on the mapped cell; ``.aggregate("count(*) as cnt", ...)`` groups by alpha's cells without
        materializing pairs, ``.materialize()`` gives the 2d-dimensional array of pairs."""
        return similarity_join(self, alpha, beta, shape, mapping, value)

    def view(self, name: str) -> View:
        """The view ``name``."""
        if not self.warehouse.exists(name):
            raise NotFoundError(f"no view named {name} (views: {', '.join(self.views()) or 'none'})")
        return open_view(self, name)

    def views(self) -> list[str]:
        """Names of the array views (stream views are listed by :meth:`stream_views`)."""
        return self.catalog.names(kinds.ARRAY_VIEW)

    def drop_view(self, name: str) -> None:
        """Drop an array view (refused while another view is defined over it)."""
        self.drop(name, kinds.ARRAY_VIEW)

    # -- uncertain arrays (paper 001) ----------------------------------------------------------------
    def create_uncertain_array(
        self,
        schema,
        scheme: str = "store-multiple",
        step="auto",
        sigmas: float = 3.0,
        workload=None,
        name: str | None = None,
    ):
        """Create an empty uncertain array: tuples with Gaussian positions (schema text such as
        ``sky<flux:gaussian>[x=0:999:32; y=0:999:32; corr(x, y)]``), stored as ``store-all``,
        ``store-mean`` (with fences) or ``store-multiple`` with ``step`` k per dimension (an int, one
        per dimension, or ``"auto"``: chosen by the cost model from the first batch and ``workload``,
        a list of query sizes in cells per dimension or a ``Workload``). The possible range of a
        tuple is mean +- ``sigmas`` standard deviations."""
        if isinstance(schema, str):
            schema = parse_uncertain_schema(schema, name)
        elif isinstance(schema, UncertainSchema):
            schema = schema.renamed(name) if name is not None else schema
        else:
            raise SchemaError(
                f"create_uncertain_array needs a schema text or UncertainSchema, got {type(schema).__name__}"
            )
        layout = layout_of(schema, scheme, step, sigmas)
        workload = workload_of(schema, workload)
        table = UncertainTable.create(self.warehouse, schema, layout, workload)
        return UncertainArray(self, table)

    def uncertain_array(self, name: str) -> UncertainArray:
        """The stored uncertain array ``name``."""
        table = self.warehouse.open(name)
        if not UncertainTable.is_uncertain(table):
            raise NotFoundError(
                f"{table.name} is not an uncertain array (uncertain arrays: {', '.join(self.uncertain_arrays()) or 'none'})"
            )
        return UncertainArray(self, UncertainTable(table))

    def uncertain_arrays(self) -> list[str]:
        return self.catalog.names(kinds.UNCERTAIN_ARRAY)

    def drop_uncertain_array(self, name: str) -> None:
        self.drop(name, kinds.UNCERTAIN_ARRAY)

    # -- streams (paper 004) ---------------------------------------------------------------------------
    def create_stream(
        self,
        name: str,
        schema,
        partition_length: int,
        time_column: str,
        max_gap_parts: int | None = None,
    ) -> Stream:
        """An append-only stream of rows (schema as Spark DDL text or a StructType) cut into parts of
        ``partition_length`` seconds of ``time_column``; each append maintains the stream views.
        ``max_gap_parts`` (default 10,000): how many parts past the stream's newest part a batch may
        reach before its append is refused (``append(..., allow_gap=True)`` appends it anyway)."""
        return streams_api.create_stream(self, name, schema, partition_length, time_column, max_gap_parts)

    def stream(self, name: str) -> Stream:
        return streams_api.open_stream(self, name)

    def streams(self) -> list[str]:
        return self.catalog.names(kinds.STREAM)

    def drop_stream(self, name: str) -> None:
        """Drop a stream; refused while a stream view reads it."""
        self.drop(name, kinds.STREAM)

    def create_stream_view(
        self, definition, lateness_parts: int | None = None, *, window_plan: str | None = None
    ) -> StreamView:
        """Create a view maintained by View Delta Functions over streams: a ``CREATE VIEW`` statement
        (hand-written INITIALIZE/UPDATE, or a PATTERN or WINDOW query translated automatically), a
        ViewDFDefinition, or a list of them (helpers first). Builds its parts now; returns the view.
        ``lateness_parts``: how many parts of late rows a helper view keeps its old parts for;
        ``window_plan``: a translated window view's plan as stored with it (streams/windows.py)."""
        if isinstance(definition, str):
            return self._create_stream_view_from_text(definition, lateness_parts)
        definitions = list(definition) if isinstance(definition, list | tuple) else [definition]
        stream_views_api.create_views(
            self.spark,
            self.warehouse.catalog,
            definitions,
            lateness_parts,
            self.executors.mode,
            self.executors.costs,
            window_plan,
            allow_unsafe=self.allow_unsafe_sql,
        )
        return StreamView(self.spark, self.warehouse.catalog, definitions[-1].name)

    def stream_view(self, name: str) -> StreamView:
        return StreamView(self.spark, self.warehouse.catalog, name)

    def stream_views(self, helpers: bool = False) -> list[str]:
        return self.catalog.names(kinds.STREAM_VIEW, helpers=helpers)

    def drop_stream_view(self, name: str) -> list[str]:
        """Drop a stream view and the helper views only it reads; returns the names dropped."""
        return self.drop(name, kinds.STREAM_VIEW)

    def maintain_views(self) -> list:
        """One scheduling decision for every array view with a refresh limit
        (``V.set_refresh_limit``): each is refreshed on just enough of its bases to keep a complete
        refresh within its limit (``View.keep_within_limit``), each after the views it reads (as
        in a maintenance pass). Returns the decisions. A view whose decision fails does not stop the
        others: once all are taken, MaintenanceError names each failed view (``views``) and holds
        the decisions taken (``report``)."""
        decisions, errors = [], {}
        for view in in_dependency_order(self):
            if view.refresh_limit is not None:
                try:
                    decisions.append(view.keep_within_limit())
                except ArrayViewsError as error:
                    errors[view.name] = str(error)
        if errors:
            failed = "; ".join(f"{name}: {text.splitlines()[0]}" for name, text in errors.items())
            raise MaintenanceError(
                f"maintain_views: {len(errors)} view(s) failed ({failed}); the other views were decided",
                views=errors,
                report=decisions,
            )
        return decisions

    def maintain_streams(self, retry_failed: bool = False):
        """Bring every stream view up to date (new parts, late rows, retention). Views whose
        maintenance failed are reported (``MaintenanceResult.error``) and skipped on later passes,
        with the views that read them, until ``retry_failed=True``."""
        world = StreamWorld(self.spark, self.warehouse.catalog, self.executors.mode, self.executors.costs)
        return maintain_all(self.spark, world, retry_failed=retry_failed)

    def maintain(self, refresh_all: bool = False) -> MaintenancePass:
        """One maintenance pass (what ``arrayviews maintain`` runs, once or every few seconds):
        stream views brought up to date, array views with a refresh limit kept within it, and with
        ``refresh_all`` every other array view with pending batches refreshed. A view that fails is
        named in the result's ``errors`` and the others are still maintained."""
        return run_pass(self, refresh_all)

    # -- the warehouse check --------------------------------------------------------------------------
    def check(self, repair: bool = False, orphans_older_than: dt.timedelta = dt.timedelta(hours=1)):
        """Find relations that cannot be read (metadata or data files missing) and files nothing
        refers to; with ``repair``, restore a relation to its newest intact metadata or version, or
        drop it when nothing intact is left (never while other relations depend on it), register
        again a relation a killed drop left without its catalog entry while views read it, and
        delete orphans older than ``orphans_older_than`` (younger ones may belong to a write in
        progress).
        Returns a CheckReport (``healthy``, ``problems``, printable)."""
        catalog = self.catalog

        def refuse_drop(kind: str, name: str) -> str | None:
            dependents = catalog.dependents(name)
            return f"view(s) {', '.join(d.name for d in dependents)} read it" if dependents else None

        return check_warehouse(
            self.warehouse.catalog,
            self.warehouse.location,
            kinds.NAMESPACES,
            repair,
            dt.datetime.now(dt.UTC) - orphans_older_than,
            refuse_drop,
        )

    # -- execution ---------------------------------------------------------------------------------
    def calibrate(self, repeats: int = 2, uncertain_sizes: tuple[int, ...] = (500, 1500, 4000)) -> dict:
        """Time both executors on this machine and store the fitted costs in the warehouse
        (``execution.json``); ``execution="auto"`` uses them from now on. Returns the model.

        First the array terms (a window operation at two sizes), then the uncertain operators'
        terms (regrid, group-by and both structure-join plans over scratch uncertain arrays of
        ``uncertain_sizes`` tuples, dropped afterwards), then the in-process stream step terms
        (window views of both plans over scratch streams, dropped afterwards), stored together."""
        calibrate(self.executors, repeats)
        calibrate_engines(self, uncertain_sizes, repeats=repeats)
        calibrate_stream_steps(self)
        return dataclasses.asdict(self.executors.costs)

    # -- storing results ---------------------------------------------------------------------------
    def _store(self, array: Array, name: str) -> Array:
        """Compute ``array`` and store it as the new array ``name``: created and filled in one
        commit, so a crash leaves either the whole array or no array (and a retry works)."""
        schema = array.schema.renamed(name)
        if self.warehouse.exists(name):
            holder = kinds.with_article(self.kind_of(name) or kinds.ARRAY)
            raise AlreadyExistsError(f"{holder} named {name} already exists")
        arrow_schema = layout.fragment_schema(schema)

        def stamp(rows: pa.Table) -> pa.Table:
            index = rows.schema.get_field_index(layout.VERSION)
            return rows.set_column(index, layout.VERSION, pa.array([1] * rows.num_rows, pa.int64()))

        source = array.source
        engine, _ = choose_engine(self.executors, source)

        def fill(data_directory: str) -> tuple[list[str], CommitInfo]:
            written = engine.write_files(source.data(engine), data_directory, arrow_schema, stamp=stamp)
            checkpoint("store.before-commit")
            return [w.uri for w in written], CommitInfo("store", cells_added=sum(w.cells for w in written))

        table = self.warehouse.create(schema, fill=fill)
        return Array(self, StoredSource(table, table.current_version()))

    # -- statements --------------------------------------------------------------------------------
    def sql(self, text: str):
        """Run statements of the statement language (any mix of arrays, array views, streams and
        stream views, and Spark SQL queries over them); returns the result of the last one."""
        return execute_text(self, text)

    def _create_stream_view_from_text(self, text: str, lateness_parts: int | None):
        statement = parse_statement(text)
        if not isinstance(statement, ast.CreateViewDF | ast.CreatePatternView | ast.CreateWindowView):
            raise ValidationError(
                "create_stream_view takes one CREATE VIEW statement (a ViewDF, a PATTERN or a WINDOW query)"
            )
        if lateness_parts is not None:
            statement = dataclasses.replace(statement, lateness=lateness_parts)
        return execute(self, statement)


__all__ = ["Database", "WriteResult", "connect"]
