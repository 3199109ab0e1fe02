"""The execution interface every operator and view refresh calls: data sets of Arrow rows and the
few bulk operations over them (read, map, group, cogroup, union, collect, write files).

Two engines implement it (xarray's ChunkManager idea: one operator code, several parallel back
ends): :class:`~arrayviews.execution.spark_engine.SparkEngine` runs each operation as Spark jobs
over ``mapInArrow`` / ``applyInArrow``, :class:`~arrayviews.execution.local_engine.LocalEngine`
runs the same functions in the driver process on pyarrow tables. A data set belongs to the engine
that made it; :meth:`Engine.adopt` moves one across.

Functions passed in (``BatchFunction`` and friends) see only their arguments: they are pickled to
Spark's workers, and the local engine calls them in-process, so they behave alike on both.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from arrayviews.model.errors import ValidationError
from arrayviews.storage.files import conform  # noqa: F401 - operators take it from the interface

BatchFunction = Callable[[pa.Table], pa.Table | None]
PairFunction = Callable[[pa.Table, pa.Table], pa.Table | None]
PartitionFunction = Callable[[Iterator[pa.Table]], Iterator[pa.Table]]
ChunkRanges = Sequence[tuple[int, int]] | None

#: A data set handle: a Spark DataFrame for the Spark engine, a LocalData for the local one.
Data = Any
#: An integer key column to add: (name, source column, origin, length) gives
#: floor((source - origin) / length), the chunk number of a coordinate.
FloorKey = tuple[str, str, int, int]


@dataclass(frozen=True)
class WrittenFile:
    """A data file an engine wrote, not yet committed."""

    uri: str
    rows: int
    nbytes: int
    cells: int


def key_table(names: Sequence[str], keys: np.ndarray) -> pa.Table:
    """A table of int64 key columns ``names`` from the rows of ``keys``."""
    keys = np.asarray(keys, dtype=np.int64).reshape(-1, len(names))
    return pa.table({name: pa.array(keys[:, k], pa.int64()) for k, name in enumerate(names)})


class Engine(abc.ABC):
    """What operators may ask of an executor; every method is one bulk operation over a data set."""

    #: "spark" or "local": the name reports and EXPLAIN use.
    name: str = ""

    @abc.abstractmethod
    def read_files(
        self,
        uris: list[str],
        arrow_schema: pa.Schema,
        chunk_columns: Sequence[str] = (),
        ranges: ChunkRanges = None,
    ) -> Data:
        """Rows of Parquet files (of ``arrow_schema``), only those whose ``chunk_columns`` lie in
        the per-column ``ranges`` (inclusive) when given."""

    @abc.abstractmethod
    def from_arrow(self, table: pa.Table, arrow_schema: pa.Schema) -> Data:
        """A data set holding the rows of a driver-side table."""

    def empty(self, arrow_schema: pa.Schema) -> Data:
        """A data set without rows."""
        return self.from_arrow(arrow_schema.empty_table(), arrow_schema)

    def one_task_each(self, table: pa.Table) -> Data:
        """A data set of a driver-side table's rows, one row per task, so that a map over it runs each
        row's work in its own task (work descriptions: tiles of chunks, files to read)."""
        return self.from_arrow(table, table.schema)

    def parallelism(self) -> int:
        """How many tasks the executor runs at once."""
        return 1

    @abc.abstractmethod
    def schema_of(self, data: Data) -> pa.Schema:
        """The Arrow schema of a data set's rows."""

    @abc.abstractmethod
    def union(self, parts: Sequence[Data]) -> Data:
        """All rows of the parts (same columns, matched by name)."""

    @abc.abstractmethod
    def where_ranges(self, data: Data, chunk_columns: Sequence[str], ranges: ChunkRanges) -> Data:
        """Rows whose ``chunk_columns`` lie inside per-column (first, last) ``ranges``."""

    @abc.abstractmethod
    def where_keys(self, data: Data, columns: Sequence[str], keys: np.ndarray, keep: bool = True) -> Data:
        """Rows whose ``columns`` equal (``keep``) or differ from (not ``keep``) a row of ``keys``."""

    @abc.abstractmethod
    def select(self, data: Data, columns: Sequence[str]) -> Data:
        """Only ``columns``, in this order."""

    @abc.abstractmethod
    def with_floor_keys(self, data: Data, keys: Sequence[FloorKey]) -> Data:
        """``data`` with an int64 column per key: floor((source - origin) / length) (rows whose
        source is null get a null key)."""

    @abc.abstractmethod
    def map_batches(self, data: Data, function: BatchFunction, out_schema: pa.Schema) -> Data:
        """``function`` applied to every batch of rows; it returns a table of ``out_schema`` or None."""

    @abc.abstractmethod
    def map_partitions_by(
        self, data: Data, keys: Sequence[str], function: PartitionFunction, out_schema: pa.Schema
    ) -> Data:
        """Rows repartitioned so rows sharing ``keys`` meet, then ``function`` over each partition's
        tables (a partition may hold several keys)."""

    @abc.abstractmethod
    def group(self, data: Data, keys: Sequence[str], function: BatchFunction, out_schema: pa.Schema) -> Data:
        """``function`` applied to all rows sharing each value of ``keys`` (one table per group)."""

    @abc.abstractmethod
    def cogroup(
        self, left: Data, right: Data, keys: Sequence[str], function: PairFunction, out_schema: pa.Schema
    ) -> Data:
        """``function`` applied to the rows of both sets sharing each value of ``keys`` (a side
        without rows for a key gets an empty table)."""

    @abc.abstractmethod
    def collect(self, data: Data, arrow_schema: pa.Schema) -> pa.Table:
        """Run the plan and bring its rows to the driver as a table of ``arrow_schema``."""

    @abc.abstractmethod
    def write_files(
        self,
        data: Data,
        directory_uri: str,
        arrow_schema: pa.Schema,
        stamp: Callable[[pa.Table], pa.Table] | None = None,
        target_bytes: int | None = None,
        cluster_by: Sequence[str] = (),
        tasks: int | None = None,
    ) -> list[WrittenFile]:
        """Write the rows as Parquet files under ``directory_uri`` (nothing references them until the
        driver commits them); ``stamp`` may rewrite a table before it is written. A file holds about
        ``target_bytes`` of rows (default: the engine's large-file target); with ``cluster_by``, rows
        are sorted by those columns before they are cut into files, so each file holds a run of
        neighbouring keys (a later rewrite of a few keys rewrites a few small files). ``tasks``:
        at most this many writing tasks (fewer, fuller files; the in-process engine has one)."""

    @abc.abstractmethod
    def owns(self, data: Data) -> bool:
        """Whether ``data`` is a data set of this engine."""

    @abc.abstractmethod
    def adopt(self, data: Data, arrow_schema: pa.Schema) -> Data:
        """A data set of this engine holding the rows of ``data`` (from any engine)."""

    def checked_cells(self, cells: Data, schema) -> tuple[Data, int]:
        """A user's cell data set (a Spark DataFrame for the Spark engine) checked against the
        ``schema`` of an array (columns, types, coordinate ranges, nulls) and cast to its types,
        with its cell count. Only an engine whose data sets users hand in implements it."""
        raise ValidationError(
            f"array {schema.name}: the {self.name} engine takes no cell data sets; give the cells as "
            "numpy, pandas or pyarrow"
        )

    def read_cell_files(self, path: str, schema, file_format: str | None = None) -> Data:
        """The cells of Parquet or CSV files at ``path`` as a data set to pass to ``checked_cells``."""
        raise ValidationError(f"array {schema.name}: the {self.name} engine does not read cell files")

    def jobs_run(self) -> int:
        """How many jobs this engine has run so far (reports count the jobs of an operation)."""
        return 0

    def one_job(self, cells: int | None = None) -> contextlib.AbstractContextManager[None]:
        """Run each action started inside as one job (``cells``: the cells the plan will move, which
        sizes its shuffles); nothing to do where no action is split into jobs."""
        del cells
        return contextlib.nullcontext()
