"""Writes to a stored array: insert cells, write a dense block, delete cells or a box, compact.

Each write that changes anything commits exactly one snapshot (one new version); a write that
would change nothing (an empty batch, a delete of absent cells) commits nothing and says so. Bulk
work (rewriting chunks, compacting, chunking a data set of cells) runs on the engine given, through
the execution interface only; chunk rewrites and compaction may instead be given a chooser, which
picks the engine by the cost of the files they rewrite (from metadata) and says why.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from arrayviews.execution.cost import Choice, Estimate
from arrayviews.execution.engine import Engine, WrittenFile
from arrayviews.model.errors import CatalogBusyError, CommitConflictError, ConflictError, ValidationError
from arrayviews.model.faults import checkpoint
from arrayviews.model.geometry import ChunkGrid
from arrayviews.operators import ingest_parallel, staging
from arrayviews.operators.ingest import CellBatch, check_inside, describe_cells
from arrayviews.storage import codec, layout
from arrayviews.storage.array_table import ArrayTable, CommitInfo
from arrayviews.storage.assemble import TARGET_FILE_BYTES, encode_sorted, merge_fragments, sort_cells
from arrayviews.storage.files import delete_files, filesystem, read_parquet_files
from arrayviews.storage.snapshots import BaseMovedError, discard_unless_committed
from arrayviews.storage.uncertain_table import UncertainTable

ON_CONFLICT = ("error", "replace")
#: How many times a write is planned again after another writer committed first.
MAX_ATTEMPTS = 8


@dataclass(frozen=True)
class WriteResult:
    """What a write did."""

    array: str
    operation: str
    version: int
    committed: bool
    cells_added: int = 0
    cells_removed: int = 0
    message: str = ""
    #: How many times the write was planned: more than one when other writers committed first.
    attempts: int = 1
    #: Which executor ran the write's bulk work ("spark" or "local") and why: the files a compaction,
    #: delete or replacing write rewrote (chosen by cost when given a chooser); for a LOAD that
    #: rewrote nothing, the executor that read the files; empty when a write rewrote nothing (a
    #: plain insert: the driver or the frame's engine wrote the new files).
    executor: str = ""
    executor_reason: str = ""

    def __str__(self) -> str:
        return self.message


#: Picks the engine for work reading an estimate, and says why (``Executors.choose``).
Chooser = Callable[[Estimate], tuple[Engine, Choice]]


def _engine_for(engine: Engine | Chooser, estimate: Callable[[], Estimate]) -> tuple[Engine, Choice | None]:
    """``engine`` itself, or the one a chooser picks for the work ``estimate`` describes (computed
    only when there is a choice to make)."""
    if isinstance(engine, Engine):
        return engine, None
    return engine(estimate())


def _files_estimate(files: list, cells: int) -> Estimate:
    """What rewriting ``files`` reads: their bytes and fragments from the manifest, and ``cells``
    (the fragments' cell counts)."""
    return Estimate(cells, sum(f.file_size_in_bytes for f in files), sum(f.record_count for f in files))


def _where(engine: Engine, choice: Choice | None) -> str:
    """The message's note of where the work ran and why, when it was chosen by cost."""
    if choice is None:
        return ""
    return f" ({'in-process' if engine.name == 'local' else 'on Spark'}: {choice.reason})"


def _no_change(array: ArrayTable, operation: str, reason: str) -> WriteResult:
    version = array.current_version()
    return WriteResult(
        array.name,
        operation,
        version,
        False,
        message=f"{reason}; {array.label} stays at version {version}",
    )


def _check_on_conflict(on_conflict: str, array: str) -> None:
    if on_conflict not in ON_CONFLICT:
        raise ValidationError(
            f"array {array}: on_conflict must be one of {', '.join(ON_CONFLICT)}, got {on_conflict!r}",
            array=array,
            value=on_conflict,
        )


def replanned(
    array: ArrayTable | UncertainTable, operation: str, attempt: Callable[[], WriteResult]
) -> WriteResult:
    """Run ``attempt`` (plan on the array's current version, stage, check, commit) until it commits
    on the version it planned on. When another writer committed first, the write is planned again
    from scratch on the new version: conflicts are checked against the cells now stored, and the
    version number and cell total follow the new version. Gives up with CommitConflictError after
    MAX_ATTEMPTS lost races."""
    lost: BaseMovedError | None = None
    for number in range(1, MAX_ATTEMPTS + 1):
        if number > 1:  # the caller read the array just before the first attempt
            array.refresh()
        try:
            result = attempt()
        except BaseMovedError as moved:
            lost = moved
            time.sleep(random.uniform(0.0, 0.01 * 2 ** min(number, 6)))
            continue
        except CatalogBusyError as busy:
            raise CatalogBusyError(f"{array.label}, {operation}: {busy}", table=array.name) from None
        except FileNotFoundError:
            # a file of the array vanished under the write: if another process dropped the array
            # (its folder goes with it), say so (refresh raises NotFoundError naming the array)
            array.refresh()
            raise
        return dataclasses.replace(result, attempts=number)
    raise CommitConflictError(
        f"{array.label}: {operation} lost the commit to other writers {MAX_ATTEMPTS} times "
        f"({lost}); nothing was committed"
    )


def commit_staged(
    array: ArrayTable,
    engine: Engine | Chooser,
    staged: list[WrittenFile],
    touched: np.ndarray,
    expected: int,
    on_conflict: str,
    operation: str,
) -> WriteResult:
    """Check staged new fragments against what is stored, replace if asked, and commit one snapshot.
    The chunks whose cells are replaced are rewritten on ``engine``, or on the engine a chooser picks
    by the files' bytes, fragments and cells."""
    schema = array.schema
    rewritten: list[WrittenFile] = []
    rewriter, choice = None, None
    try:
        checkpoint(f"{operation}.staged")
        overlap = staging.find_overlap(array, expected, touched)
        removed_files, cells_removed = [], 0
        if len(overlap.chunks):
            conflicts = staging.find_conflicts(
                schema, [f.file_path for f in overlap.files], [w.uri for w in staged], overlap.chunks
            )
            if conflicts:
                cells = staging.conflict_cells(schema, conflicts)
                if on_conflict == "error":
                    raise ConflictError(
                        f"array {schema.name}: {len(cells)} cell(s) of the batch already exist, e.g. "
                        f"{describe_cells(schema, cells)}; nothing was written (pass on_conflict='replace' "
                        "to overwrite them)",
                        array=schema.name,
                        value=tuple(int(c) for c in cells[0]),
                    )
                chunks = np.array(list(conflicts), dtype=np.int64).reshape(-1, schema.ndim)
                removed_files = overlap.files_holding(chunks)
                rewriter, choice = _engine_for(
                    engine, lambda: _files_estimate(removed_files, overlap.cells_in(removed_files))
                )
                rewritten = staging.rewrite_files(
                    rewriter, array, removed_files, expected + 1, removal=conflicts
                )
                cells_removed = overlap.cells_in(removed_files) - sum(w.cells for w in rewritten)
        checkpoint(f"{operation}.before-commit")
        added = sum(w.cells for w in staged)
        version = array.commit(
            [w.uri for w in staged + rewritten],
            removed_files,
            CommitInfo(operation, cells_added=added, cells_removed=cells_removed),
            expected,
        )
    except BaseException as error:
        discard_unless_committed([w.uri for w in staged + rewritten], error)
        raise
    replaced = f", replacing {cells_removed}" if cells_removed else ""
    return WriteResult(
        schema.name,
        operation,
        version,
        True,
        added,
        cells_removed,
        f"{operation}: wrote {added} cell(s){replaced} into array {schema.name}, now at version {version}"
        + ("" if rewriter is None else _where(rewriter, choice)),
        executor="" if rewriter is None else rewriter.name,
        executor_reason="" if choice is None else choice.reason,
    )


def insert_cells(
    array: ArrayTable,
    engine: Engine | Chooser,
    batch: CellBatch,
    on_conflict: str = "error",
    operation: str = "insert",
) -> WriteResult:
    """Insert a validated driver-side batch (chunked and written by the driver; chunks whose cells
    it replaces are rewritten on ``engine``, or where a chooser says)."""
    _check_on_conflict(on_conflict, array.name)
    if batch.size == 0:
        return _no_change(array, operation, "empty batch: nothing written")
    schema = array.schema
    cells = sort_cells(batch.coords, batch.values, batch.nulls, schema)
    duplicates = cells.duplicates()
    if len(duplicates):
        raise ValidationError(
            f"array {schema.name}: the batch holds {len(duplicates)} cell(s) more than once, e.g. "
            f"{describe_cells(schema, duplicates)}; nothing was written",
            array=schema.name,
            value=tuple(int(c) for c in duplicates[0]),
        )

    def attempt() -> WriteResult:
        expected = array.current_version()
        staged = staging.stage_tables(array, encode_sorted(cells, schema, expected + 1))
        return commit_staged(array, engine, staged, cells.chunks, expected, on_conflict, operation)

    return replanned(array, operation, attempt)


def write_dense(
    array: ArrayTable,
    engine: Engine | Chooser,
    arrays: dict[str, np.ndarray],
    origin: tuple[int, ...],
    present: np.ndarray | None,
    on_conflict: str = "error",
) -> WriteResult:
    """Write a dense block whose first cell sits at ``origin``; ``present`` marks non-empty cells."""
    _check_on_conflict(on_conflict, array.name)
    schema = array.schema
    shape = next(iter(arrays.values())).shape if arrays else present.shape
    cells_in_block = math.prod(shape)
    if cells_in_block == 0 or (present is not None and not present.any()):
        return _no_change(array, "write_dense", "empty block: nothing written")
    grid = ChunkGrid.of(schema)
    low = np.asarray(origin, dtype=np.int64)
    high = low + np.asarray(shape, dtype=np.int64) - 1
    ranges = grid.chunk_ranges_overlapping(low, high)
    chunk_count = math.prod(b - a + 1 for a, b in ranges)
    if chunk_count * 64 > cells_in_block:
        # Tiny chunks: going through coordinates is cheaper than one Python step per chunk.
        coords = np.indices(shape).reshape(len(shape), -1).T + low
        keep = present.reshape(-1) if present is not None else slice(None)
        batch = CellBatch(coords[keep], {n: a.reshape(-1)[keep] for n, a in arrays.items()}, {})
        return insert_cells(array, engine, batch, on_conflict, operation="write_dense")

    def attempt() -> WriteResult:
        expected = array.current_version()
        tables = staging.dense_block_tables(
            schema, arrays, tuple(int(o) for o in origin), present, expected + 1
        )
        staged, touched = [], []
        try:
            for table in tables:
                touched.append(staging.chunk_matrix(table, schema))
                staged += staging.stage_tables(array, [table])
        except BaseException:
            delete_files([w.uri for w in staged])
            raise
        return commit_staged(array, engine, staged, np.vstack(touched), expected, on_conflict, "write_dense")

    return replanned(array, "write_dense", attempt)


def delete_cells(array: ArrayTable, engine: Engine | Chooser, coords: np.ndarray) -> WriteResult:
    """Delete the listed cells (absent ones are ignored) as one snapshot; the chunks holding them are
    rewritten on ``engine``, or where a chooser says."""
    schema = array.schema
    coords = np.asarray(coords, dtype=np.int64).reshape(-1, schema.ndim)
    if len(coords) == 0:
        return _no_change(array, "delete", "no cells given: nothing deleted")
    check_inside(coords, schema)
    cells = sort_cells(coords, {}, {}, schema.with_attributes(()))
    wanted = {}
    for index, chunk in enumerate(cells.chunks):
        lo, hi = cells.bounds[index], cells.bounds[index + 1]
        wanted[tuple(int(c) for c in chunk)] = np.unique(cells.offsets[lo:hi])

    def attempt() -> WriteResult:
        expected = array.current_version()
        overlap = staging.find_overlap(array, expected, cells.chunks)
        if not overlap.files:
            return _no_change(array, "delete", "none of the cells exist: nothing deleted")
        return _rewrite_and_commit(
            array, engine, overlap.files, overlap.cells_in(overlap.files), expected, removal=wanted
        )

    return replanned(array, "delete", attempt)


def delete_box(
    array: ArrayTable, engine: Engine | Chooser, low: tuple[int, ...], high: tuple[int, ...]
) -> WriteResult:
    """Delete every cell inside the box ``[low, high]`` as one snapshot; the files holding chunks
    that overlap it are rewritten on ``engine``, or where a chooser says."""
    schema = array.schema
    grid = ChunkGrid.of(schema)
    ranges = grid.chunk_ranges_overlapping(low, high)

    def attempt() -> WriteResult:
        expected = array.current_version()
        files = array.data_files(expected, ranges) if ranges is not None else []
        if not files:
            return _no_change(array, "delete", "the box holds no cells: nothing deleted")
        before = _cells_in_files(files)
        return _rewrite_and_commit(array, engine, files, before, expected, box=(tuple(low), tuple(high)))

    return replanned(array, "delete", attempt)


def _cells_in_files(files: list) -> int:
    total = 0
    for data_file in files:
        fs, path = filesystem(data_file.file_path)
        total += int(np.sum(pq.read_table(path, filesystem=fs, columns=[layout.N_CELLS]).column(0)))
    return total


def _rewrite_and_commit(
    array: ArrayTable,
    engine: Engine | Chooser,
    files: list,
    cells_before: int,
    expected: int,
    removal: staging.Removal | None = None,
    box: tuple[tuple[int, ...], tuple[int, ...]] | None = None,
) -> WriteResult:
    rewritten: list[WrittenFile] = []
    engine, choice = _engine_for(engine, lambda: _files_estimate(files, cells_before))
    try:
        rewritten = staging.rewrite_files(engine, array, files, expected + 1, removal=removal, box=box)
        removed = cells_before - sum(w.cells for w in rewritten)
        if removed == 0:
            delete_files([w.uri for w in rewritten])
            return _no_change(array, "delete", "none of the cells exist: nothing deleted")
        checkpoint("delete.before-commit")
        version = array.commit(
            [w.uri for w in rewritten], files, CommitInfo("delete", cells_removed=removed), expected
        )
    except BaseException as error:
        discard_unless_committed([w.uri for w in rewritten], error)
        raise
    return WriteResult(
        array.name,
        "delete",
        version,
        True,
        0,
        removed,
        f"delete: removed {removed} cell(s) from array {array.name}, now at version {version}"
        + _where(engine, choice),
        executor=engine.name,
        executor_reason="" if choice is None else choice.reason,
    )


# -- compaction ---------------------------------------------------------------------------------
def _merge_chunk(table: pa.Table, schema) -> pa.Table:
    """All fragments of one chunk merged into one (keeping the newest version that wrote any of them)."""
    fragments = list(layout.iter_fragments(table, schema))
    merged = merge_fragments(fragments)
    grid = ChunkGrid.of(schema)
    encoded = codec.encode(
        merged, int(np.prod(grid.chunk_shape(merged.chunk))), layout.attribute_dtypes(schema)
    )
    newest = int(np.max(np.asarray(table.column(layout.VERSION))))
    return layout.encoded_to_table([encoded], schema, newest)


def compact(
    array: ArrayTable,
    engine: Engine | Chooser,
    small_file_bytes: int = 32 * 1024 * 1024,
    carry: tuple[str, ...] = (),
    target_bytes: int = TARGET_FILE_BYTES,
) -> WriteResult:
    """Rewrite small data files into files of about ``target_bytes``, one fragment per chunk and
    clustered by chunk, as one snapshot. Version properties whose names start with one of ``carry``
    are kept from the version compacted (a view's reflected base versions: compaction changes no
    content). ``engine`` is an engine, or a chooser that picks one by the cost of reading the small
    files (their bytes and fragments from the manifest, their cells from the fragments' counts)."""
    return replanned(
        array, "compact", lambda: _compact_once(array, engine, small_file_bytes, carry, target_bytes)
    )


def _compact_estimate(small: list, schema) -> Estimate:
    """What compacting ``small`` reads: bytes and fragments from the manifest, cells from the
    fragments' cell counts (one column of the files, read on the driver)."""
    counts = read_parquet_files(
        [f.file_path for f in small], columns=[layout.N_CELLS], schema=layout.fragment_schema(schema)
    )
    cells = int(pc.sum(counts.column(layout.N_CELLS)).as_py() or 0) if counts.num_rows else 0
    return Estimate(cells, sum(f.file_size_in_bytes for f in small), sum(f.record_count for f in small))


def _compact_once(
    array: ArrayTable,
    engine: Engine | Chooser,
    small_file_bytes: int,
    carry: tuple[str, ...],
    target_bytes: int = TARGET_FILE_BYTES,
) -> WriteResult:
    schema = array.schema
    expected = array.current_version()
    current = array.current()
    kept = {k: v for k, v in (current.properties if current else {}).items() if carry and k.startswith(carry)}
    files = array.data_files(expected)
    small = [f for f in files if f.file_size_in_bytes < small_file_bytes]
    if len(small) < 2:
        return _no_change(array, "compact", f"{len(small)} small file(s): nothing to compact")
    engine, choice = _engine_for(engine, lambda: _compact_estimate(small, schema))
    arrow_schema = layout.fragment_schema(schema)
    data = engine.read_files([f.file_path for f in small], arrow_schema)
    merged = engine.group(
        data, layout.chunk_columns(schema), functools.partial(_merge_chunk, schema=schema), arrow_schema
    )
    total = sum(f.file_size_in_bytes for f in small)
    written: list[WrittenFile] = []
    try:
        written = engine.write_files(
            merged,
            array.data_directory,
            arrow_schema,
            target_bytes=target_bytes,
            cluster_by=layout.chunk_columns(schema),
            tasks=math.ceil(total / target_bytes),
        )
        checkpoint("compact.before-commit")
        version = array.commit(
            [w.uri for w in written], small, CommitInfo("compact", properties=kept), expected
        )
    except BaseException as error:
        discard_unless_committed([w.uri for w in written], error)
        raise
    return WriteResult(
        schema.name,
        "compact",
        version,
        True,
        message=f"compact: rewrote {len(small)} small file(s) into {len(written)} of {array.label}, now at version {version}"
        + _where(engine, choice),
        executor=engine.name,
        executor_reason="" if choice is None else choice.reason,
    )


def read_by(result: WriteResult, executor: str, reason: str) -> WriteResult:
    """A LOAD's result naming the executor that read the files and why, unless a chunk rewrite of
    replaced cells already names its own."""
    if result.executor or not result.committed:
        return result
    where = "in-process" if executor == "local" else "by Spark"
    return dataclasses.replace(
        result,
        executor=executor,
        executor_reason=reason,
        message=f"{result.message} (files read {where}: {reason})",
    )


# -- cells as an engine's data set --------------------------------------------------------------
def insert_frame(
    array: ArrayTable,
    engine: Engine,
    frame,
    on_conflict: str = "error",
    operation: str = "insert",
    rewrite: Engine | Chooser | None = None,
) -> WriteResult:
    """Insert cells given as a data set of ``engine`` (a Spark DataFrame for the Spark engine): the
    engine checks them, and its tasks chunk them and write the files. Chunks whose cells the batch
    replaces are rewritten on ``rewrite`` (an engine or a chooser; ``engine`` when not given)."""
    _check_on_conflict(on_conflict, array.name)
    schema = array.schema
    frame, count = engine.checked_cells(frame, schema)
    if count == 0:
        return _no_change(array, operation, "empty batch: nothing written")

    def attempt() -> WriteResult:
        expected = array.current_version()
        staged, duplicates, example = ingest_parallel.stage_cells(
            engine, frame, schema, expected + 1, array.data_directory
        )
        if duplicates:
            delete_files([w.uri for w in staged])
            raise ValidationError(
                f"array {schema.name}: the batch holds {duplicates} cell(s) more than once, e.g. {example}; "
                "nothing was written",
                array=schema.name,
            )
        try:
            chunks = [
                staging.chunk_matrix(
                    pq.read_table(
                        filesystem(w.uri)[1],
                        filesystem=filesystem(w.uri)[0],
                        columns=layout.chunk_columns(schema),
                    ),
                    schema,
                )
                for w in staged
            ]
        except BaseException:
            delete_files([w.uri for w in staged])
            raise
        touched = np.unique(np.vstack(chunks), axis=0) if chunks else np.zeros((0, schema.ndim), np.int64)
        return commit_staged(
            array, engine if rewrite is None else rewrite, staged, touched, expected, on_conflict, operation
        )

    return replanned(array, operation, attempt)
