"""Where an array's fragments come from: a stored table at one version, or a plan of an engine
still to run; and what reading them costs, from metadata alone."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from arrayviews.execution.cost import Choice, Estimate
from arrayviews.execution.engine import Data, Engine
from arrayviews.execution.executors import Executors
from arrayviews.execution.local_engine import LocalData
from arrayviews.execution.spark_engine import SparkEngine
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.storage import layout
from arrayviews.storage.array_table import ArrayTable
from arrayviews.storage.files import read_parquet_files
from arrayviews.storage.fragment_metadata import read_metadata

if TYPE_CHECKING:  # only named in the hints of ``frame``, the Spark form callers may ask for
    from pyspark.sql import DataFrame, SparkSession

ChunkRanges = Sequence[tuple[int, int]] | None


def ranges_volume(schema: ArraySchema, ranges: ChunkRanges) -> int:
    """Cells of the box covered by chunk ranges (the whole array when None)."""
    if ranges is None:
        return math.prod(schema.shape)
    grid = ChunkGrid.of(schema)
    total = 1
    for dimension, (first, last) in zip(grid.dimensions, ranges, strict=True):
        total *= max(0, dimension.chunk_span(int(last))[1] - dimension.chunk_span(int(first))[0] + 1)
    return total


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

    def estimate(self, ranges: ChunkRanges = None) -> Estimate:
        """Cells and bytes a read of ``ranges`` touches, from the snapshot summary and the manifest
        (the planned files' sizes and fragment counts); no data file is opened. A read of the whole
        current version takes its bytes and fragments from the snapshot summary's totals, unplanned."""
        info = self.table.current() if self.version == self.table.current_version() else None
        summary = self.table.current_summary() if info is not None and ranges is None else {}
        if info is not None and "total-files-size" in summary and "total-records" in summary:
            cells = min(info.cells_total, ranges_volume(self.schema, None))
            return Estimate(cells, int(summary["total-files-size"]), int(summary["total-records"]))
        files = self.table.data_files(self.version, ranges)
        if info is None:
            total = next((v.cells_total for v in self.table.versions() if v.version == self.version), 0)
        else:
            total = info.cells_total
        cells = min(total, ranges_volume(self.schema, ranges))
        return Estimate(cells, sum(f.file_size_in_bytes for f in files), sum(f.record_count for f in files))

    def data(self, engine: Engine, ranges: ChunkRanges = None) -> Data:
        """The fragments (of ``ranges`` of chunks) as a data set of ``engine``."""
        arrow_schema = layout.fragment_schema(self.schema)
        return engine.read_files(
            self.file_uris(ranges), arrow_schema, layout.chunk_columns(self.schema), ranges
        )

    def frame(self, spark: SparkSession, ranges: ChunkRanges = None) -> DataFrame:
        """The fragments as a Spark DataFrame."""
        return self.data(SparkEngine(spark), ranges)

    def local(self, ranges: ChunkRanges = None, columns: list[str] | None = None) -> pa.Table:
        arrow_schema = layout.fragment_schema(self.schema)
        return read_parquet_files(
            self.file_uris(ranges),
            columns=columns,
            row_filter=layout.chunk_ranges_filter(self.schema, ranges),
            schema=arrow_schema,
        )

    def metadata(self, ranges: ChunkRanges = None) -> pa.Table:
        """The metadata columns of the fragments (of ``ranges`` of chunks): files read once per
        process (storage/fragment_metadata.py)."""
        return read_metadata(
            self.file_uris(ranges),
            layout.metadata_columns(self.schema),
            layout.fragment_schema(self.schema),
            layout.chunk_ranges_filter(self.schema, ranges),
        )


@dataclass(frozen=True)
class StoredBox:
    """A box (inclusive cell corners) of a stored array at one version: what a subarray of a stored
    array holds, so that reads of it can take its chunks straight from storage."""

    source: StoredSource
    low: tuple[int, ...]
    high: tuple[int, ...]


@dataclass
class ComputedSource:
    """Fragments produced by an engine's plan (an operator result not stored yet)."""

    schema: ArraySchema
    plan: Data
    #: A folder where Spark executors may leave result files for the driver to read.
    scratch: str | None = None
    #: The engine the plan belongs to (a Spark plan given without one gets a Spark engine).
    engine: Engine | None = None
    #: What the plan reads, estimated from the metadata of the stored arrays it starts from.
    cost: Estimate | None = None
    #: Which executor runs the plan's last operation, and why.
    choice: Choice | None = None
    #: When the plan is a subarray of a stored array: that array's version and the box.
    box: StoredBox | None = None

    def __post_init__(self) -> None:
        if self.engine is None:
            if isinstance(self.plan, LocalData):
                raise TypeError("a local plan needs its engine")
            self.engine = SparkEngine(self.plan.sparkSession, self.scratch)

    def estimate(self, ranges: ChunkRanges = None) -> Estimate:
        return self.cost if self.cost is not None else Estimate()

    def data(self, engine: Engine, ranges: ChunkRanges = None) -> Data:
        arrow_schema = layout.fragment_schema(self.schema)
        plan = self.engine.where_ranges(self.plan, layout.chunk_columns(self.schema), ranges)
        return plan if engine.owns(plan) else engine.adopt(plan, arrow_schema)

    def frame(self, spark: SparkSession, ranges: ChunkRanges = None) -> DataFrame:
        return self.data(SparkEngine(spark, self.scratch), ranges)

    def local(self, ranges: ChunkRanges = None, columns: list[str] | None = None) -> pa.Table:
        """Run the plan and bring its fragments (or some columns of them) to the driver."""
        arrow_schema = layout.fragment_schema(self.schema)
        plan = self.engine.where_ranges(self.plan, layout.chunk_columns(self.schema), ranges)
        if columns is not None:
            plan = self.engine.select(plan, columns)
            arrow_schema = pa.schema([arrow_schema.field(c) for c in columns])
        return self.engine.collect(plan, arrow_schema)

    def metadata(self, ranges: ChunkRanges = None) -> pa.Table:
        return self.local(ranges, columns=layout.metadata_columns(self.schema))


class DeferredSource(ComputedSource):
    """A computed source whose plan, engine and executor choice are made when first asked for.

    A read that needs none of them (``to_numpy`` of a subarray of a stored array, which takes the
    box's chunks straight from storage) then pays neither the engine choice nor the plan. ``build``
    returns the computed source and the choice that placed it; it runs at most once.
    """

    def __init__(
        self,
        schema: ArraySchema,
        build: Callable[[], tuple[ComputedSource, Choice | None]],
        box: StoredBox | None = None,
        scratch: str | None = None,
    ) -> None:
        self.schema = schema
        self.box = box
        self.scratch = scratch
        self._build: Callable[[], tuple[ComputedSource, Choice | None]] | None = build
        self._built: ComputedSource | None = None
        self._lock = threading.Lock()

    def made(self) -> ComputedSource:
        """The computed source, built on the first call."""
        with self._lock:
            if self._built is None:
                assert self._build is not None
                built, choice = self._build()
                if choice is not None:
                    built.cost, built.choice = choice.estimate, choice
                if built.scratch is None:
                    built.scratch = self.scratch
                self._built, self._build = built, None
            return self._built

    @property
    def plan(self) -> Data:
        return self.made().plan

    @property
    def engine(self) -> Engine:
        return self.made().engine

    @property
    def cost(self) -> Estimate | None:
        return self.made().cost

    @property
    def choice(self) -> Choice | None:
        return self.made().choice


Source = StoredSource | ComputedSource


def stored_box(source: Source) -> StoredBox | None:
    """The stored array, version and box ``source`` holds the cells of (a stored source: all of it),
    or None when it is computed otherwise."""
    if isinstance(source, StoredSource):
        dimensions = source.schema.dimensions
        return StoredBox(source, tuple(d.low for d in dimensions), tuple(d.high for d in dimensions))
    return source.box


def choose_engine(executors: Executors, source: Source, ranges: ChunkRanges = None) -> tuple[Engine, Choice]:
    """The engine for an operation over ``source`` (only ``ranges`` of chunks when given): a stored
    source by the cost of what it reads, from metadata; a computed one stays on its plan's engine
    (moving a plan across engines costs more than it saves) unless the mode forces an engine."""
    estimate = source.estimate(ranges)
    if isinstance(source, ComputedSource) and executors.mode == "auto":
        engine = executors.engine(source.engine.name)
        reason = f"its input is computed {'in-process' if engine.name == 'local' else 'on Spark'}"
        return engine, Choice(engine.name, reason, estimate, {})
    return executors.choose(estimate)
