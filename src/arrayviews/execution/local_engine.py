"""The in-process engine: the execution interface on pyarrow tables in the driver, no Spark job.

Data sets are lazy (:class:`LocalData`, a memoized thunk), so a chain of operators builds a plan
that runs when a result is collected or written, as with Spark. Task functions run here exactly as
Spark's workers run them; an arrayviews error they raise comes back as itself, any other failure as
an :class:`~arrayviews.model.errors.ExecutionError` with a one-line message (as from Spark).
"""

from __future__ import annotations

import contextlib
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from arrayviews.execution import local_cell_checks, local_cells
from arrayviews.execution.engine import (
    BatchFunction,
    ChunkRanges,
    Data,
    Engine,
    FloorKey,
    PairFunction,
    PartitionFunction,
    WrittenFile,
    conform,
)
from arrayviews.model import errors
from arrayviews.storage.chunk_cache import ChunkCache, process_cache
from arrayviews.storage.files import delete_files, new_data_file_uri, read_parquet_files, write_parquet

#: A written file holds about this many bytes before the next one starts.
TARGET_FILE_BYTES = 128 * 1024 * 1024

#: Recent reads of data files, by files, schema and chunk ranges. A data file never changes once
#: written, so a read is valid as long as its files are named: the terms of one refresh read the
#: same old chunks (both sides of a self-join), and one read serves them all. Reads larger than
#: RECENT_READ_MAX_BYTES are not kept. The budget is a quarter of the chunk cache's, at most
#: RECENT_READS_BYTES (``connect(chunk_cache_bytes=0)`` turns both off).
RECENT_READS_BYTES = 64 * 1024 * 1024
RECENT_READ_MAX_BYTES = 16 * 1024 * 1024
_RECENT_READS = ChunkCache(min(RECENT_READS_BYTES, process_cache().budget // 4))


def follow_chunk_cache_budget(chunk_cache_bytes: int) -> None:
    """Bound the recent reads by a quarter of a new chunk cache budget (at most RECENT_READS_BYTES)."""
    _RECENT_READS.resize(min(RECENT_READS_BYTES, chunk_cache_bytes // 4))


class LocalData:
    """Rows computed in the driver on first use (and kept): ``compute()`` returns a pyarrow table."""

    def __init__(self, compute: Callable[[], pa.Table], schema: pa.Schema) -> None:
        self._compute: Callable[[], pa.Table] | None = compute
        self.schema = schema
        self._table: pa.Table | None = None
        self._lock = threading.Lock()

    def table(self) -> pa.Table:
        with self._lock:
            if self._table is None:
                assert self._compute is not None
                self._table = conform(self._compute(), self.schema)
                self._compute = None
            return self._table


@contextlib.contextmanager
def _task() -> Iterator[None]:
    """Run task code: arrayviews errors pass as they are, anything else is one ExecutionError."""
    try:
        yield
    except errors.ArrayViewsError:
        raise
    except Exception as error:  # noqa: BLE001 - translated, with the traceback kept in details
        lines = str(error).strip().splitlines()
        raise errors.ExecutionError(
            f"an in-process job failed: {type(error).__name__}: {lines[0] if lines else ''}".rstrip(": "),
            details=traceback.format_exc(),
        ) from error


#: Mixed-radix group codes are re-numbered densely before they could pass this bound.
_CODE_LIMIT = 2**62


def _group_codes(table: pa.Table, keys: Sequence[str]) -> tuple[np.ndarray, int]:
    """Per row, the number of its group (rows sharing every key column, numbered in the
    lexicographic order of the key values), and the group count: one ``np.unique`` per column,
    the column codes combined into one integer (mixed radix), no per-row Python."""
    combined = np.zeros(table.num_rows, np.int64)
    count = 1
    for key in keys:
        values = table.column(key).to_numpy(zero_copy_only=False)
        uniques, codes = np.unique(values, return_inverse=True)
        radix = max(len(uniques), 1)
        if count * radix >= _CODE_LIMIT:  # keep the combined code exact: renumber densely first
            _, combined = np.unique(combined, return_inverse=True)
            combined = combined.reshape(-1).astype(np.int64)
            count = int(combined.max()) + 1 if len(combined) else 1
        combined = combined * radix + codes.reshape(-1).astype(np.int64)
        count *= radix
    if not keys:
        return combined, min(table.num_rows, 1)
    present, codes = np.unique(combined, return_inverse=True)
    return codes.reshape(-1), len(present)


def _groups(table: pa.Table, keys: Sequence[str]) -> dict[tuple, pa.Table]:
    """The rows of ``table`` per value of ``keys`` (key tuples as Python values)."""
    if table.num_rows == 0:
        return {}
    codes, count = _group_codes(table, keys)
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.concatenate([[0], np.flatnonzero(np.diff(sorted_codes)) + 1, [len(order)]])
    sorted_table = table.take(pa.array(order))
    first_rows = sorted_table.select(list(keys)).take(pa.array(starts[:-1]))
    key_columns = [first_rows.column(k).to_pylist() for k in keys]
    key_tuples = list(zip(*key_columns, strict=True)) if keys else [()]
    return {
        key: sorted_table.slice(int(starts[g]), int(starts[g + 1] - starts[g]))
        for g, key in enumerate(key_tuples)
    }


def _out(result: pa.Table | None, out_schema: pa.Schema) -> pa.Table | None:
    return None if result is None or result.num_rows == 0 else conform(result, out_schema)


def _concat(tables: list[pa.Table], out_schema: pa.Schema) -> pa.Table:
    return pa.concat_tables(tables) if tables else out_schema.empty_table()


class LocalEngine(Engine):
    """Operations run in the driver on pyarrow tables with the same per-chunk functions."""

    name = "local"

    def __init__(self) -> None:
        self._jobs = 0

    def _lazy(self, compute: Callable[[], pa.Table], schema: pa.Schema) -> LocalData:
        def counted() -> pa.Table:
            self._jobs += 1
            return compute()

        return LocalData(counted, schema)

    def read_files(self, uris, arrow_schema, chunk_columns=(), ranges: ChunkRanges = None) -> LocalData:
        uris = list(uris)
        row_filter = _ranges_filter(chunk_columns, ranges)
        key = (
            tuple(uris),
            arrow_schema,
            tuple(chunk_columns),
            None if ranges is None else tuple((int(low), int(high)) for low, high in ranges),
        )

        def read() -> pa.Table:
            table = _RECENT_READS.get(key)
            if table is None:
                table = read_parquet_files(uris, row_filter=row_filter, schema=arrow_schema)
                if table.nbytes <= RECENT_READ_MAX_BYTES:
                    _RECENT_READS.put(key, table, max(1, table.nbytes))
            return table

        return LocalData(read, arrow_schema)

    def from_arrow(self, table: pa.Table, arrow_schema: pa.Schema) -> LocalData:
        fixed = conform(table, arrow_schema)
        return LocalData(lambda: fixed, arrow_schema)

    def schema_of(self, data: LocalData) -> pa.Schema:
        return data.schema

    def union(self, parts: Sequence[LocalData]) -> LocalData:
        schema = parts[0].schema
        return LocalData(lambda: pa.concat_tables([conform(p.table(), schema) for p in parts]), schema)

    def where_ranges(self, data: LocalData, chunk_columns, ranges: ChunkRanges) -> LocalData:
        if ranges is None:
            return data

        def run() -> pa.Table:
            table = data.table()
            keep = np.ones(table.num_rows, dtype=bool)
            for column, (first, last) in zip(chunk_columns, ranges, strict=True):
                values = np.asarray(table.column(column))
                keep &= (values >= first) & (values <= last)
            return table.filter(pa.array(keep))

        return LocalData(run, data.schema)

    def where_keys(self, data: LocalData, columns, keys: np.ndarray, keep: bool = True) -> LocalData:
        wanted = np.asarray(keys, dtype=np.int64).reshape(-1, len(columns))

        def run() -> pa.Table:
            table = data.table()
            if table.num_rows == 0:
                return table
            rows = np.stack([np.asarray(table.column(c), dtype=np.int64) for c in columns], axis=1)
            both = np.vstack([wanted, rows])
            _, inverse = np.unique(both, axis=0, return_inverse=True)
            inverse = inverse.reshape(-1)
            member = np.isin(inverse[len(wanted) :], inverse[: len(wanted)])
            return table.filter(pa.array(member if keep else ~member))

        return LocalData(run, data.schema)

    def select(self, data: LocalData, columns: Sequence[str]) -> LocalData:
        schema = pa.schema([data.schema.field(c) for c in columns])
        return LocalData(lambda: data.table().select(list(columns)), schema)

    def with_floor_keys(self, data: LocalData, keys: Sequence[FloorKey]) -> LocalData:
        schema = data.schema
        for name, _, _, _ in keys:
            schema = schema.append(pa.field(name, pa.int64()))

        def run() -> pa.Table:
            table = data.table()
            for name, column, origin, length in keys:
                values = table.column(column)
                valid = np.asarray(values.is_valid())
                numbers = np.asarray(values.fill_null(origin), dtype=np.int64)
                key = np.floor_divide(numbers - origin, length)
                table = table.append_column(name, pa.array(key, pa.int64(), mask=~valid))
            return table

        return LocalData(run, schema)

    def map_batches(self, data: LocalData, function: BatchFunction, out_schema: pa.Schema) -> LocalData:
        def run() -> pa.Table:
            table = data.table()
            if table.num_rows == 0:
                return out_schema.empty_table()
            with _task():
                result = _out(function(table), out_schema)
            return out_schema.empty_table() if result is None else result

        return self._lazy(run, out_schema)

    def map_partitions_by(
        self, data: LocalData, keys, function: PartitionFunction, out_schema: pa.Schema
    ) -> LocalData:
        def run() -> pa.Table:
            table = data.table()
            if table.num_rows == 0:
                return out_schema.empty_table()
            with _task():
                results = [_out(r, out_schema) for r in function(iter([table]))]
            return _concat([r for r in results if r is not None], out_schema)

        return self._lazy(run, out_schema)

    def group(self, data: LocalData, keys, function: BatchFunction, out_schema: pa.Schema) -> LocalData:
        def run() -> pa.Table:
            results = []
            with _task():
                for part in _groups(data.table(), keys).values():
                    result = _out(function(part), out_schema)
                    if result is not None:
                        results.append(result)
            return _concat(results, out_schema)

        return self._lazy(run, out_schema)

    def cogroup(self, left, right, keys, function: PairFunction, out_schema: pa.Schema) -> LocalData:
        def run() -> pa.Table:
            left_groups = _groups(left.table(), keys)
            right_groups = _groups(right.table(), keys)
            left_empty, right_empty = left.schema.empty_table(), right.schema.empty_table()
            results = []
            with _task():
                for key in dict.fromkeys([*left_groups, *right_groups]):
                    result = _out(
                        function(left_groups.get(key, left_empty), right_groups.get(key, right_empty)),
                        out_schema,
                    )
                    if result is not None:
                        results.append(result)
            return _concat(results, out_schema)

        return self._lazy(run, out_schema)

    def collect(self, data: LocalData, arrow_schema: pa.Schema) -> pa.Table:
        return conform(data.table(), arrow_schema)

    def write_files(
        self,
        data: LocalData,
        directory_uri: str,
        arrow_schema: pa.Schema,
        stamp: Callable[[pa.Table], pa.Table] | None = None,
        target_bytes: int | None = None,
        cluster_by: Sequence[str] = (),
        tasks: int | None = None,
    ) -> list[WrittenFile]:
        table = conform(data.table(), arrow_schema)
        if table.num_rows == 0:
            return []
        if stamp is not None:
            with _task():
                table = conform(stamp(table), arrow_schema)
        if cluster_by:
            table = table.sort_by([(c, "ascending") for c in cluster_by])
        per_row = max(1, table.nbytes // table.num_rows)
        rows_per_file = max(1, (target_bytes or TARGET_FILE_BYTES) // per_row)
        written: list[WrittenFile] = []
        try:
            for start in range(0, table.num_rows, rows_per_file):
                part = table.slice(start, rows_per_file)
                uri = new_data_file_uri(directory_uri)
                size = write_parquet(part, uri)
                cells = pc.sum(part.column("n_cells")).as_py() if "n_cells" in part.column_names else 0
                written.append(WrittenFile(uri, part.num_rows, size, cells or 0))
        except BaseException:
            delete_files([w.uri for w in written])
            raise
        return written

    def owns(self, data: Data) -> bool:
        return isinstance(data, LocalData)

    def adopt(self, data: Data, arrow_schema: pa.Schema) -> LocalData:
        if isinstance(data, LocalData):
            return data
        # a Spark DataFrame (any object with toArrow): its rows collected through Spark
        return LocalData(lambda: conform(data.toArrow(), arrow_schema), arrow_schema)

    def read_cell_files(self, path: str, schema, file_format: str | None = None) -> CellData:
        """The cells of Parquet or CSV files read here with Spark's meaning (execution/local_cells.py);
        :class:`~arrayviews.execution.local_cells.NotCertain` where that meaning is not certain."""
        return CellData(local_cells.read_cell_files(path, schema, file_format))

    def checked_cells(self, cells: LocalData, schema) -> tuple[LocalData, int]:
        """Cells read from files, checked and cast as the Spark engine checks them (same errors);
        other local data sets are not a user's input."""
        if not isinstance(cells, CellData):
            return super().checked_cells(cells, schema)
        table, count = local_cell_checks.checked_cells(cells.rows, schema)
        local_cell_checks.duplicates_in_one_chunk(table, schema)
        return LocalData(lambda: table, table.schema), count

    def jobs_run(self) -> int:
        return self._jobs


class CellData(LocalData):
    """The rows of cell files read in-process, with the files they came from (for errors naming the
    first bad value in Spark's order)."""

    def __init__(self, rows: local_cells.CellRows) -> None:
        super().__init__(lambda: rows.table, rows.table.schema)
        self.rows = rows


def _ranges_filter(chunk_columns: Sequence[str], ranges: ChunkRanges):
    if ranges is None:
        return None
    expression = None
    for column, (first, last) in zip(chunk_columns, ranges, strict=True):
        term = (ds.field(column) >= first) & (ds.field(column) <= last)
        expression = term if expression is None else expression & term
    return expression
