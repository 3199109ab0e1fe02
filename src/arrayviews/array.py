"""The ``Array`` handle: one stored array (at a version) or one operator result, and every method on it."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame

from arrayviews.execution import local_cells
from arrayviews.execution.cell_file_checks import vanished_input
from arrayviews.execution.failures import translating
from arrayviews.execution.spark_cells import with_labels as spark_labels
from arrayviews.model.display import Rows, as_html, as_text, described
from arrayviews.model.errors import MissingFileError, NotFoundError, ValidationError
from arrayviews.model.indexing import index_box
from arrayviews.model.labels import label_box, reach_cells, span_cells
from arrayviews.model.schema import ArraySchema
from arrayviews.model.types import accepts, first_misfit, misfit_reason
from arrayviews.operators import cellwise, join, reads, reduce, window, writes
from arrayviews.operators.ingest import CellBatch, normalize_cells, to_arrow
from arrayviews.operators.source import ComputedSource, Source, StoredSource, choose_engine, stored_box
from arrayviews.operators.xarray_into import xarray_cells
from arrayviews.storage import layout
from arrayviews.storage.array_table import expire
from arrayviews.storage.expiry import cutoffs

if TYPE_CHECKING:
    from arrayviews.database import Database

#: How many times a read follows the array to its newest version when the version it was reading
#: is expired under it by another process.
READ_ATTEMPTS = 4


@translating
class Array:
    """A named array: stored in the warehouse (optionally pinned to a version), or computed lazily.

    Operators (``subarray``, ``filter``, ``project``, ``apply``, ``regrid``, ``aggregate``,
    ``join``) return new arrays without running anything; reads (``to_numpy``, ``to_pandas``,
    ``to_spark``...) and ``store`` run them, each operation on the executor the cost model picks.
    """

    def __init__(self, database: Database, source: Source, pinned: bool = False) -> None:
        self._db = database
        self._source = source
        self._pinned = pinned

    # -- identity ----------------------------------------------------------------------------------
    @property
    def schema(self) -> ArraySchema:
        return self._source.schema

    @property
    def name(self) -> str:
        return self.schema.name

    @property
    def stored(self) -> bool:
        return isinstance(self._source, StoredSource)

    @property
    def version(self) -> int | None:
        """The version this handle reads (None for a computed array)."""
        return self._current().version if self.stored else None

    def __repr__(self) -> str:
        return as_text(*self._summary())

    def _repr_html_(self) -> str:
        return as_html(*self._summary())

    def _summary(self) -> tuple[str, Rows]:
        """Heading and rows of the repr: schema, shape, and for a stored array its version, cells
        and chunks (read from chunk metadata; a computed array runs nothing)."""
        schema = self.schema
        rows: Rows = [
            ("schema", schema.to_text()),
            ("shape", f"{' x '.join(str(n) for n in schema.shape)} ({', '.join(schema.dimension_names)})"),
        ]
        if not self.stored:
            return f"computed array {self.name}", [
                *rows,
                ("state", "lazy: nothing runs until it is read or stored"),
            ]
        return f"{self._kind} {self.name}", rows + described(self._storage_rows)

    _kind = "array"

    def _storage_rows(self) -> Rows:
        source = self._current()
        metadata = source.metadata()
        cells = int(np.sum(metadata.column(layout.N_CELLS))) if metadata.num_rows else 0
        keys = layout.chunk_columns(self.schema)
        chunks = len(set(zip(*(metadata.column(k).to_pylist() for k in keys), strict=True)))
        volume = math.prod(self.schema.shape)
        return [
            ("version", f"{source.version}" + (" (pinned)" if self._pinned else "")),
            ("cells", f"{cells} non-empty of {volume}"),
            (
                "chunks",
                f"{chunks} non-empty, {' x '.join(str(n) for n in self.schema.chunk_shape)} cells each",
            ),
        ]

    # -- numpy and xarray manners ------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The extent of every dimension (cells between its low and high coordinate)."""
        return self.schema.shape

    @property
    def ndim(self) -> int:
        return self.schema.ndim

    @property
    def dims(self) -> tuple[str, ...]:
        """The dimension names, in storage order (as xarray's ``dims``)."""
        return self.schema.dimension_names

    @property
    def attrs(self) -> dict[str, str]:
        """The attributes (the values each cell holds): name -> type, e.g. ``{"v": "float64"}``."""
        return {a.name: a.type for a in self.schema.attributes}

    def __getitem__(self, key: object) -> Array:
        """A lazy subarray in dimension coordinates: ``A[0:10, 5:20]`` (half-open slices, clipped to
        the range) or ``A[3, :]`` (an integer selects one coordinate and keeps the dimension);
        see :mod:`arrayviews.model.indexing`."""
        return self.subarray(index_box(self.schema, key))

    def sel(self, labels: Mapping[str, object] | None = None, **by_name: object) -> Array:
        """A lazy subarray by coordinate labels, as xarray's ``sel``: ``A.sel(ra=slice(10.0, 12.5))``
        holds the cells whose real coordinate (``offset + cell * step``) lies in ``[10.0, 12.5]``
        (both ends included); a single label selects the cell with exactly that coordinate and keeps
        the dimension. A dimension without a scale is labelled by its cells. See
        :mod:`arrayviews.model.labels`."""
        return self.subarray(label_box(self.schema, {**(labels or {}), **by_name}))

    def __array__(self, dtype: object = None, copy: bool | None = None) -> np.ndarray:
        """``np.asarray(A)`` for an array with one attribute: the dense block of its cells, empty cells
        NaN (NaT for datetime64, None for string). An integer or bool attribute with empty cells has no NaN to hold them: refused (use
        ``to_numpy(fill=...)`` or ``to_numpy(masked=True)``)."""
        schema = self.schema
        if len(schema.attributes) != 1:
            raise ValidationError(
                f"array {schema.name} has attributes {', '.join(schema.attribute_names) or '(none)'}: "
                "np.asarray needs one; use A.to_numpy(name) or A.project(name)",
                array=schema.name,
            )
        values = self.to_numpy(masked=True)
        mask = np.ma.getmaskarray(values)
        if mask.any() and values.dtype.kind not in "fcMO":
            raise ValidationError(
                f"array {schema.name}: attribute {schema.attributes[0].name} ({values.dtype}) has "
                f"{int(mask.sum())} empty cell(s) and no NaN to hold them; use "
                "A.to_numpy(fill=...) or A.to_numpy(masked=True)",
                array=schema.name,
                column=schema.attributes[0].name,
            )
        missing = {"M": np.datetime64("NaT", "ns"), "O": None}.get(values.dtype.kind, np.nan)
        data = np.where(mask, missing, np.ma.getdata(values)) if mask.any() else np.ma.getdata(values)
        return data if dtype is None else data.astype(dtype, copy=False)

    def _current(self) -> Source:
        """The source to read now: a stored array follows its newest version unless pinned."""
        if isinstance(self._source, StoredSource) and not self._pinned:
            table = self._source.table.refresh()
            return StoredSource(table, table.current_version())
        return self._source

    def _writable(self) -> StoredSource:
        if not isinstance(self._source, StoredSource):
            raise ValidationError(f"array {self.name} is a computed result; store it before writing to it")
        if self._pinned:
            raise ValidationError(
                f"array {self.name} is pinned to version {self._source.version}; versions are read-only"
            )
        return self._current()

    def _derive(self, source: Source, choice=None) -> Array:
        if isinstance(source, ComputedSource):
            if source.scratch is None:
                source.scratch = self._db.scratch_location
            if choice is not None:
                source.cost, source.choice = choice.estimate, choice
        return Array(self._db, source)

    def _operate(self, operator, *arguments, ranges=None, **options) -> Array:
        """Run ``operator(source, engine, ...)`` on the engine the cost model picks for it."""
        source = self._current()
        engine, choice = choose_engine(self._db.executors, source, ranges)
        return self._derive(operator(source, engine, *arguments, **options), choice)

    # -- writing -----------------------------------------------------------------------------------
    def insert(self, cells: object, on_conflict: str = "error") -> writes.WriteResult:
        """Insert a batch of cells: pandas DataFrame, pyarrow Table, Spark DataFrame or dict of arrays.

        One column per dimension and per attribute. Cells that already exist are an error unless
        ``on_conflict="replace"``. The batch is one atomic version; a rejected batch changes nothing.
        """
        source = self._writable()
        if _is_spark_frame(cells):
            # the user's Spark DataFrame is chunked and written by Spark
            return writes.insert_frame(
                source.table, self._db.executors.spark, cells, on_conflict, rewrite=self._db.executors.choose
            )
        batch = normalize_cells(cells, self.schema)
        return writes.insert_cells(source.table, self._db.executors.choose, batch, on_conflict)

    def load(self, path: str, format: str | None = None, on_conflict: str = "error") -> writes.WriteResult:
        """Insert the cells of Parquet or CSV files (a file or a folder; format from the extension)."""
        source = self._writable()
        executors = self._db.executors
        # the executor by cost, from the files' bytes (and Parquet footers' rows) as for any other work
        engine, choice = executors.choose(local_cells.load_estimate(path, format))
        reason = choice.reason
        if engine.name == "local":
            try:
                frame = engine.read_cell_files(path, self.schema, format)
                result = writes.insert_frame(
                    source.table, engine, frame, on_conflict, operation="load", rewrite=executors.choose
                )
                return writes.read_by(result, engine.name, reason)
            except local_cells.NotCertain as why:
                # the in-process reader could not be sure of Spark's meaning: Spark reads the files
                engine, reason = (
                    executors.spark,
                    f"Spark's meaning of the files is not certain in-process: {why}",
                )
        frame = engine.read_cell_files(path, self.schema, format)
        try:
            result = writes.insert_frame(
                source.table, engine, frame, on_conflict, operation="load", rewrite=executors.choose
            )
        except Exception as error:  # Spark lists the files before its jobs read them
            gone = vanished_input(error, path, f"array {self.name}")
            if gone is None:
                raise
            raise gone from None
        return writes.read_by(result, engine.name, reason)

    def write_dense(
        self,
        data: np.ndarray | Mapping[str, np.ndarray],
        attr: str | None = None,
        origin: Sequence[int] | None = None,
        on_conflict: str = "error",
    ) -> writes.WriteResult:
        """Write a dense block with its first cell at ``origin``: a cell stays empty where an
        attribute that is not nullable is masked, or every attribute is; elsewhere a nullable
        attribute's masked entries are nulls.

        ``data`` is one ndarray (for ``attr``, or the only attribute) or a mapping of attribute
        name to ndarray, all of the same shape. ``origin`` defaults to the low corner of the array.
        """
        source = self._writable()
        schema = self.schema
        arrays = _dense_arrays(schema, data, attr)
        shapes = {a.shape for a in arrays.values()}
        if len(shapes) != 1:
            raise ValidationError(
                f"array {schema.name}: dense blocks have different shapes {sorted(shapes)}",
                array=schema.name,
                value=sorted(shapes),
            )
        shape = shapes.pop()
        if len(shape) != schema.ndim:
            raise ValidationError(
                f"array {schema.name} has {schema.ndim} dimension(s); the block has {len(shape)}",
                array=schema.name,
                value=shape,
            )
        if origin is not None:
            wrong = [
                o for o in origin if isinstance(o, bool | np.bool_) or not isinstance(o, numbers.Integral)
            ]
            if wrong:
                raise ValidationError(
                    f"array {schema.name}: origin coordinates are integers, got {wrong[0]!r}",
                    array=schema.name,
                    value=repr(wrong[0]),
                )
        origin = tuple(d.low for d in schema.dimensions) if origin is None else tuple(int(o) for o in origin)
        if len(origin) != schema.ndim:
            raise ValidationError(
                f"array {schema.name}: origin needs {schema.ndim} coordinate(s), got {len(origin)}",
                array=schema.name,
                value=origin,
            )
        for dimension, start, size in zip(schema.dimensions, origin, shape, strict=True):
            if start < dimension.low or start + size - 1 > dimension.high:
                raise ValidationError(
                    f"array {schema.name}, dimension {dimension.name}: block covers {start}:{start + size - 1}, "
                    f"outside the range {dimension.low}:{'*' if dimension.unbounded else dimension.high}",
                    array=schema.name,
                    column=dimension.name,
                    value=start if start < dimension.low else start + size - 1,
                )
        present, nulls = _dense_presence(schema, arrays, shape)
        plain = {}
        for name, value in arrays.items():
            if np.ma.isMaskedArray(value):
                value = value.filled({"b": False, "O": "", "U": ""}.get(value.dtype.kind, 0))
            plain[name] = np.asarray(value, dtype=layout.attribute_dtypes(schema)[name])
        if nulls:  # nulls in non-empty cells: through the cell path, which stores them
            keep = present.reshape(-1)
            coords = np.indices(shape).reshape(len(shape), -1).T[keep] + np.asarray(origin, np.int64)
            batch = CellBatch(
                coords,
                {n: a.reshape(-1)[keep] for n, a in plain.items()},
                {n: m.reshape(-1)[keep] for n, m in nulls.items()},
            )
            return writes.insert_cells(
                source.table, self._db.executors.choose, batch, on_conflict, operation="write_dense"
            )
        return writes.write_dense(
            source.table, self._db.executors.choose, plain, origin, present, on_conflict
        )

    def write_xarray(self, data: object, on_conflict: str = "error") -> writes.WriteResult:
        """Write an xarray ``DataArray`` or ``Dataset`` into this array where its coordinates say:
        times on a time dimension, numbers on a scaled one, cells on the others (so the next day of a
        grid goes after the last). Variables are attributes by name; a cell where every variable is
        missing stays empty, a nullable attribute's missing values are nulls. One dense block, as
        :meth:`write_dense` (``on_conflict`` as there)."""
        values, origin = xarray_cells(data, self.schema)
        return self.write_dense(values, origin=origin, on_conflict=on_conflict)

    def delete(
        self,
        cells: object = None,
        *,
        box: Mapping[str, tuple[int, int]] | None = None,
        labels: Mapping[str, object] | None = None,
    ) -> writes.WriteResult:
        """Delete cells (listed like ``insert``'s input, dimension columns only), everything in a box
        of cells, or everything the ``labels`` select as ``sel`` does (``labels={"time": "2026-01-02"}``:
        that day's cells)."""
        source = self._writable()
        schema = self.schema
        if sum(x is not None for x in (cells, box, labels)) != 1:
            raise ValidationError(f"array {schema.name}: delete takes one of cells, box=... or labels=...")
        if labels is not None:
            box = label_box(schema, labels)
        if box is not None:
            low, high = _box_corners(schema, box)
            return writes.delete_box(source.table, self._db.executors.choose, low, high)
        if isinstance(cells, np.ndarray) and cells.ndim == 2:
            coords = cells
        else:
            table = to_arrow(cells, schema.name)
            dimension_only = schema.with_attributes([])
            extra = [
                c for c in table.column_names if not dimension_only.has_dimension(dimension_only.spelling(c))
            ]
            batch = normalize_cells(table.drop_columns(extra), dimension_only)
            coords = batch.coords
        return writes.delete_cells(source.table, self._db.executors.choose, coords)

    def compact(self) -> writes.WriteResult:
        """Rewrite small data files into large ones (one fragment per chunk) as one new version."""
        return writes.compact(self._writable().table, self._db.executors.choose)

    def _maintained_table(self):
        """The table that compaction and expiry work on (views override: they are not writable)."""
        return self._writable().table

    def expire_versions(
        self,
        older_than: dt.datetime | dt.timedelta | None = None,
        *,
        orphans_older_than: dt.timedelta = dt.timedelta(hours=1),
    ):
        """Forget versions older than a time (or age; default: all but the current one) and delete their files.

        Data files no version references (left by writes that crashed before committing) are
        deleted too once they are older than ``orphans_older_than``; the grace period protects the
        files a concurrent writer has staged but not committed yet.
        """
        table = self._maintained_table()
        return expire(table, *cutoffs(older_than, orphans_older_than))

    # -- versions ----------------------------------------------------------------------------------
    def versions(self) -> pd.DataFrame:
        """Every version held: number, time, operation and cell counts."""
        source = self._current()
        if not isinstance(source, StoredSource):
            raise ValidationError(f"array {self.name} is a computed result and has no versions")
        rows = [
            {
                "version": v.version,
                "time": v.time,
                "operation": v.operation,
                "cells_added": v.cells_added,
                "cells_removed": v.cells_removed,
                "cells_total": v.cells_total,
                "snapshot_id": v.snapshot_id,
            }
            for v in source.table.versions()
        ]
        return pd.DataFrame(
            rows,
            columns=[
                "version",
                "time",
                "operation",
                "cells_added",
                "cells_removed",
                "cells_total",
                "snapshot_id",
            ],
        )

    def at_version(self, version: int) -> Array:
        """A read-only handle on the array as it was at ``version`` (time travel)."""
        source = self._current()
        if not isinstance(source, StoredSource):
            raise ValidationError(f"array {self.name} is a computed result and has no versions")
        version = self._held_version(source.table, version)
        return Array(self._db, StoredSource(source.table, version), pinned=True)

    def _held_version(self, table, version: object) -> int:
        """``version`` as an int the table holds: ValidationError for a non-integer, NotFoundError
        (naming the array or view, as the table labels itself) for a version not held."""
        if isinstance(version, bool) or not isinstance(version, numbers.Integral):
            raise ValidationError(
                f"{table.label}: a version is an integer (see .versions()), got {version!r}",
                array=self.name,
                value=repr(version),
            )
        table.snapshot_of(int(version))
        return int(version)

    def chunks(self) -> pd.DataFrame:
        """Chunk metadata, read without touching cell data: cells, bytes, min/max, newest version."""
        return reads.chunk_statistics(self._current())

    # -- operators ---------------------------------------------------------------------------------
    def subarray(self, box: Mapping[str, tuple[int, int]] | None = None, **ranges: tuple[int, int]) -> Array:
        """Cells inside a box, e.g. ``A.subarray(i=(1, 3), j=(2, 8))``; coordinates are kept."""
        merged = {**(box or {}), **ranges}
        source = self._current()
        if stored_box(source) is not None:  # engine and plan chosen only if a read needs them
            executors = self._db.executors
            return self._derive(
                cellwise.deferred_subarray(source, lambda s, r: choose_engine(executors, s, r), merged)
            )
        chunk_ranges = cellwise.subarray_ranges(self.schema, merged)
        return self._operate(cellwise.subarray, merged, ranges=chunk_ranges)

    def filter(self, predicate: str) -> Array:
        """Cells where ``predicate`` (over attributes and dimensions) holds, e.g. ``"v > 0.5 and i < 10"``."""
        return self._operate(cellwise.filter_cells, predicate)

    def project(self, *attributes: str) -> Array:
        return self._operate(cellwise.project, list(attributes))

    def apply(self, name: str, expression: str) -> Array:
        """A new attribute computed per cell, e.g. ``A.apply("w", "sqrt(v) * 2")``."""
        return self._operate(cellwise.apply, name, expression)

    def regrid(self, blocks: Sequence[int] | Mapping[str, int], *aggregates: str) -> Array:
        """Aggregate non-overlapping blocks, e.g. ``A.regrid([2, 2], "avg(v)", "max(v)")`` or, on a time
        dimension, ``A.regrid({"time": "1 day"}, "avg(v)")`` (a whole number of the dimension's steps)."""
        if isinstance(blocks, Mapping):
            unknown = [n for n in blocks if not self.schema.has_dimension(n)]
            if unknown:
                self.schema.dimension(unknown[0])
            blocks = [blocks.get(d, 1) for d in self.schema.dimension_names]
        names = self.schema.dimension_names
        if not isinstance(blocks, str) and len(blocks) == len(names):
            blocks = [span_cells(self.schema, d, b) for d, b in zip(names, blocks, strict=True)]
        return self._operate(reduce.regrid, list(blocks), aggregates)

    def window(
        self,
        extents: Mapping[str, tuple[int, int]] | Sequence[int],
        *aggregates: str,
        method: str = "incremental",
    ) -> Array:
        """Window aggregates: for every non-empty cell, aggregates of the non-empty cells within
        ``before`` cells below and ``after`` cells above it in each dimension, e.g.
        ``A.window({"i": (2, 2), "j": (2, 2)}, "avg(v)")`` (SciDB's flat form ``[2, 2, 2, 2]`` works
        too). ``method`` is ``"incremental"`` (default, cost independent of the window size),
        ``"basic"`` (incremental along one dimension) or ``"naive"`` (every window scanned). On a
        dimension with a time scale, blocks and extents may be durations (``{"time": ("6 days", "0
        days")}``), each a whole number of the dimension's steps."""
        if isinstance(extents, Mapping):
            extents = {
                name: reach_cells(self.schema, name, *reach)
                if self.schema.has_dimension(name) and isinstance(reach, (tuple, list)) and len(reach) == 2
                else reach
                for name, reach in extents.items()
            }
        elif (
            isinstance(extents, Sequence | np.ndarray)
            and not isinstance(extents, str)
            and len(extents) == 2 * self.ndim
        ):
            # the flat form takes durations as a window view's definition does
            extents = [
                x
                for k, name in enumerate(self.dims)
                for x in reach_cells(self.schema, name, extents[2 * k], extents[2 * k + 1])
            ]
        return self._operate(window.window, extents, aggregates, method)

    def aggregate(self, *aggregates: str, by: Sequence[str] = ()) -> Array:
        """Aggregate all cells (one output cell) or the cells sharing each value of the ``by`` dimensions."""
        return self._operate(reduce.aggregate, aggregates, by)

    def join(self, other: Array) -> Array:
        """Cells present in both arrays, with the attributes of both (positional equi-join)."""
        left, right = self._current(), other._current()
        engine, choice = choose_engine(self._db.executors, left)
        if isinstance(right, ComputedSource) and right.engine.name != engine.name:
            engine, choice = choose_engine(self._db.executors, right)
        choice = dataclasses.replace(choice, estimate=left.estimate() + right.estimate())
        return self._derive(join.join(left, right, engine), choice)

    def explain(self) -> str:
        """Which executor computes this array's last operation, and why."""
        source = self._current()
        if isinstance(source, StoredSource):
            return f"stored array {self.name} at version {source.version}: {source.estimate().text()}"
        choice = source.choice
        where = "in-process" if source.engine.name == "local" else "on Spark"
        return f"computed {where}" + (f": {choice.reason}" if choice is not None else "")

    def store(self, name: str) -> Array:
        """Compute this array and store it as a new array ``name`` (one atomic version)."""
        return self._db._store(self, name)

    # -- reading -----------------------------------------------------------------------------------
    def _read(self, read):
        """``read(source)`` on the version to read now. When a file of that version vanished while
        it was read (another process compacted the array and expired the version), a handle that
        follows the newest version reads again; a pinned one says its version was expired."""
        for attempt in range(READ_ATTEMPTS):
            source = self._current()
            try:
                return read(source)
            except FileNotFoundError as error:
                if not isinstance(source, StoredSource):
                    raise
                table = source.table.refresh()
                if source.version in {v.version for v in table.versions()}:  # deleted, not expired
                    raise MissingFileError(
                        f"array {self.name}: a data file of version {source.version} is missing "
                        f"({error.filename or error}): the warehouse is damaged; run `arrayviews check` "
                        "(with --repair to roll the array back to its newest intact version)"
                    ) from None
                if source.version not in {v.version for v in table.versions()}:
                    if self._pinned:
                        raise NotFoundError(
                            f"array {self.name}: version {source.version} was expired by another process "
                            "while it was read"
                        ) from None
                    if attempt < READ_ATTEMPTS - 1:
                        continue
                raise
        raise AssertionError("unreachable")

    def to_numpy(self, attr: str | None = None, fill: object = None, masked: bool = False) -> np.ndarray:
        return self._read(lambda source: reads.to_numpy(source, attr, fill, masked))

    def to_arrow(self, sort: bool = True, labels: bool = False) -> pa.Table:
        """One row per cell: the dimensions' cell numbers, then the attributes. With ``labels``, a
        dimension with a scale gives each cell's coordinate instead (float64, or a UTC timestamp of
        the scale's resolution), as ``to_pandas(labels=True)`` does."""
        cells = self._read(lambda source: reads.to_arrow(source, sort))
        return reads.with_labels(cells, self.schema) if labels else cells

    def to_pandas(self, sort: bool = True, labels: bool = False) -> pd.DataFrame:
        """One row per cell: the dimensions' cell numbers, then the attributes. With ``labels``, a
        dimension with a scale gives each cell's coordinate instead (a float, or a ``datetime64``
        time), as ``to_xarray`` labels its coordinates."""
        frame = self._read(lambda source: reads.to_pandas(source, sort))
        if labels:
            for dimension in self.schema.dimensions:
                if dimension.scale is not None:
                    cells = frame[dimension.name].to_numpy(dtype=np.int64)
                    frame[dimension.name] = dimension.scale.coordinates(cells)
        return frame

    def to_spark(self, labels: bool = False) -> DataFrame:
        """A Spark DataFrame with one row per cell (dimensions' cell numbers, then attributes). With
        ``labels``, a dimension with a scale gives each cell's coordinate instead, as
        ``to_pandas(labels=True)`` does: a DOUBLE, or a TIMESTAMP (UTC) for a time; times finer than
        a microsecond are refused by name."""
        frame = reads.to_spark(self._current(), self._db.executors.spark)
        return spark_labels(frame, self.schema) if labels else frame

    def to_xarray(self):
        """An ``xarray.Dataset`` of the array (see ``reads.to_xarray``). Along an open-ended
        dimension it spans the cells that hold data, from the first to the last stored one, with
        the scale's coordinates there; an array with no cell yet is refused by name."""
        return self._over_stored_cells()._read(reads.to_xarray)

    def _over_stored_cells(self) -> Array:
        """This array, or, with an open-ended dimension, its subarray from the first to the last cell
        holding data along each such dimension (one version for both reads: another writer may
        append in between); refused by name when no cell holds data."""
        open_ended = [d.name for d in self.schema.dimensions if d.unbounded]
        if not open_ended:
            return self
        fixed = self.at_version(self.version) if self.stored else self
        extent = fixed._edge_extent(open_ended) if fixed.stored else None
        if extent is None:  # a computed array, or stored chunks that hold no cell: every cell read
            extent = fixed._read(lambda source: reads.stored_extent(source, open_ended))
        if extent is None:
            raise ValidationError(
                f"array {self.name} holds no cells yet (dimension {', '.join(open_ended)} is "
                "open-ended), and to_xarray and plot show it from its first to its last cell holding "
                f"data; write cells first, or read a subarray (e.g. {self.name}.subarray({open_ended[0]}=(0, 99)))",
                array=self.name,
            )
        return fixed.subarray(extent)

    def _edge_extent(self, names: list[str]) -> dict[str, tuple[int, int]] | None:
        """The first and last cell holding data along each dimension of ``names`` of a stored array,
        read from only its first and last chunks there (the chunk statistics say which); None when
        there is no chunk, or an edge chunk holds no cell."""
        stats = self.chunks()
        stats = stats[stats["cells"] > 0]
        if stats.empty:
            return None
        extent = {}
        for name in names:
            ends = []
            for edge, pick in (("low", "idxmin"), ("high", "idxmax")):
                row = stats.loc[getattr(stats[f"{name}_{edge}"], pick)()]
                part = self.subarray({name: (int(row[f"{name}_low"]), int(row[f"{name}_high"]))})
                found = part._read(lambda source, name=name: reads.stored_extent(source, [name]))
                if found is None:
                    return None
                ends.append(found[name][0] if edge == "low" else found[name][1])
            extent[name] = (ends[0], ends[1])
        return extent

    def plot(self, attr: str | None = None, ax=None, **style):
        """Draw a 1-D array as a line over its coordinates or a 2-D array as an image with its
        coordinates on the axes (matplotlib), an open-ended dimension over its cells that hold data;
        returns the axes."""
        from arrayviews.plotting import plot_array

        return plot_array(self._over_stored_cells(), attr, ax, **style)

    def count(self) -> int:
        """Number of non-empty cells (from chunk metadata; no cell data is read)."""
        metadata = self._current().metadata()
        return int(np.sum(metadata.column(layout.N_CELLS))) if metadata.num_rows else 0

    @property
    def source(self) -> Source:
        """Where the fragments come from (for the execution of later layers)."""
        return self._current()


def _is_spark_frame(value: object) -> bool:
    return isinstance(value, DataFrame)


def _dense_presence(
    schema: ArraySchema, arrays: Mapping[str, np.ndarray], shape: tuple[int, ...]
) -> tuple[np.ndarray | None, dict[str, np.ndarray]]:
    """The non-empty cells of a dense block (None: all) and the null cells of nullable attributes.

    A cell is empty where an attribute that is not nullable is masked, or where every attribute is;
    elsewhere a nullable attribute's masked entries are its nulls (so a block read with
    ``to_numpy(masked=True)``, nulls masked, is written back with its nulls, not without the cells).
    """
    masks = {name: np.ma.getmaskarray(v) for name, v in arrays.items() if np.ma.isMaskedArray(v)}
    if not masks:
        return None, {}
    given = np.zeros(shape, bool) if len(masks) == len(arrays) else np.ones(shape, bool)
    present = np.ones(shape, bool)
    for name, mask in masks.items():
        given |= ~mask
        if not schema.attribute(name).nullable:
            present &= ~mask
    present &= given
    nulls = {}
    for name, mask in masks.items():
        if schema.attribute(name).nullable and (mask & present).any():
            nulls[name] = mask & present
    return present, nulls


def _dense_arrays(schema: ArraySchema, data: object, attr: str | None) -> dict[str, np.ndarray]:
    if isinstance(data, Mapping):
        arrays = dict(data)
    else:
        if attr is None:
            if len(schema.attributes) != 1:
                raise ValidationError(
                    f"array {schema.name} has attributes {', '.join(schema.attribute_names)}: pass attr=..., "
                    "or a mapping of attribute name to ndarray"
                )
            attr = schema.attributes[0].name
        arrays = {attr: data}
    for name in arrays:
        schema.attribute(name)
    missing = [a.name for a in schema.attributes if a.name not in arrays and not a.nullable]
    if missing:
        raise ValidationError(
            f"array {schema.name}: the dense block gives no values for attribute(s) {', '.join(missing)}",
            array=schema.name,
            column=missing[0],
        )
    checked = {}
    for name, value in arrays.items():
        value = value if np.ma.isMaskedArray(value) else np.asarray(value)
        target = schema.attribute(name).type
        if target == "string":
            checked[name] = _text_block(schema, name, value)
            continue
        if not accepts(target, value.dtype):
            raise ValidationError(
                f"array {schema.name}, attribute {name}: values of type {value.dtype} cannot be stored as {target}",
                array=schema.name,
                column=name,
                value=str(value.dtype),
            )
        data = np.ma.getdata(value)
        # a mask only for masked blocks (two block-sized boolean arrays otherwise, for nothing)
        valid = ~np.ma.getmaskarray(value).reshape(-1) if np.ma.isMaskedArray(value) else None
        misfit = first_misfit(target, data.reshape(-1), valid)
        if misfit is not None:
            index = np.unravel_index(misfit, data.shape)
            element = data.reshape(-1)[misfit].item()
            raise ValidationError(
                f"array {schema.name}, attribute {name}: {misfit_reason(target, element)} "
                f"(block index {tuple(int(i) for i in index)})",
                array=schema.name,
                column=name,
                value=element,
            )
        checked[name] = value
    # a nullable attribute left out is null in every cell the block writes
    shape = next(iter(checked.values())).shape if checked else ()
    dtypes = layout.attribute_dtypes(schema)
    for attribute in schema.attributes:
        if attribute.name not in checked:
            checked[attribute.name] = np.ma.masked_all(shape, dtype=dtypes[attribute.name])
    return checked


def _text_block(schema: ArraySchema, name: str, value: np.ndarray) -> np.ndarray:
    """A block for a string attribute as an object array of str (masked entries kept masked)."""
    data = np.ma.getdata(value)
    if data.dtype.kind not in "UOT":
        raise ValidationError(
            f"array {schema.name}, attribute {name}: values of type {data.dtype} cannot be stored as string",
            array=schema.name,
            column=name,
            value=str(data.dtype),
        )
    flat = data.reshape(-1)
    mask = np.ma.getmaskarray(value).reshape(-1)
    if data.dtype.kind == "O":
        kinds = np.frompyfunc(lambda v: isinstance(v, str), 1, 1)(flat).astype(bool) | mask
        if not kinds.all():
            bad = int(np.flatnonzero(~kinds)[0])
            index = tuple(int(i) for i in np.unravel_index(bad, data.shape))
            raise ValidationError(
                f"array {schema.name}, attribute {name}: {flat[bad]!r} is not a string (block index {index})",
                array=schema.name,
                column=name,
                value=repr(flat[bad]),
            )
    text = np.asarray(data, dtype=object)
    return np.ma.MaskedArray(text, mask=np.ma.getmaskarray(value)) if np.ma.isMaskedArray(value) else text


def _box_corners(
    schema: ArraySchema, box: Mapping[str, tuple[int, int]]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    for name, bounds in box.items():
        schema.dimension(name)
        pair = isinstance(bounds, tuple | list) and len(bounds) == 2
        if not pair or any(
            isinstance(b, bool | np.bool_) or not isinstance(b, numbers.Integral) for b in bounds
        ):
            raise ValidationError(
                f"array {schema.name}: the box bounds of {name} are a (low, high) pair of integer "
                f"coordinates, both included, got {bounds!r}",
                array=schema.name,
                column=name,
                value=repr(bounds),
            )
    low = tuple(int(box.get(d.name, (d.low, d.high))[0]) for d in schema.dimensions)
    high = tuple(int(box.get(d.name, (d.low, d.high))[1]) for d in schema.dimensions)
    return low, high


__all__ = ["Array", "ComputedSource"]
