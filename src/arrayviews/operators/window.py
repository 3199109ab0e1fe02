"""The window aggregate: every non-empty cell gets aggregates of the non-empty cells in a box around it.

Distributed as a halo exchange (operators/halo.py): each output chunk receives its own cells and
the cells of its neighbours within the window's reach, then a per-chunk kernel computes the
aggregates. Dense neighbourhoods go to the block kernel (kernels/window.py: naive, basic or
recursive incremental), sparse ones to the point kernel (kernels/window_points.py).

In-process (the local engine sees the whole input as one table) a dense input needs no halo
exchange: its fragments are placed into one block over the chunks it covers, and each output
chunk's kernel call reads its neighbourhood as a slice of that block. A per-chunk exchange there
only adds the cost of cutting, encoding, grouping and decoding pieces (about half the time of a
10^5-cell window).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from arrayviews.execution.engine import Data, Engine
from arrayviews.execution.local_engine import LocalEngine
from arrayviews.kernels.exact_sum import ExactSumError, SumOverflow
from arrayviews.kernels.window import window_block
from arrayviews.kernels.window_points import window_points
from arrayviews.model.aggregate_calls import AggregateCall
from arrayviews.model.errors import RangeError, ValidationError
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.schema import ArraySchema
from arrayviews.operators import halo, tiles
from arrayviews.operators.reduce import output_attributes, parse_calls
from arrayviews.operators.source import ComputedSource, Source, StoredSource
from arrayviews.storage import codec, layout

METHODS = ("naive", "basic", "incremental")
#: Neighbourhoods denser than this (present cells / block cells) use the dense block kernel.
DENSE_FRACTION = 0.05
#: Largest block (cells) the dense kernel is given; larger neighbourhoods use the point kernel.
MAX_BLOCK_CELLS = 1 << 26
#: Most cells (of the array's range) one task of a tiled window reads and places in its block.
TILE_READ_CELLS = MAX_BLOCK_CELLS


def window_extents(
    schema: ArraySchema, extents: Mapping[str, tuple[int, int]] | Sequence[int]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per dimension (before, after) from a mapping or SciDB's flat list ``b1, a1, b2, a2, ...``,
    each cut to its dimension's length: a window reaching past either end of the dimension covers the
    same cells, and the extent stays far from the int64 edge, where the window's arithmetic would
    overflow (wrong averages before). Every front end (``A.window``, window views, statements) comes
    through here."""
    if isinstance(extents, Mapping):
        for name in extents:
            schema.dimension(name)
        pairs = [tuple(extents.get(d, (0, 0))) for d in schema.dimension_names]
    else:
        flat = list(extents)
        if len(flat) != 2 * schema.ndim:
            raise ValidationError(
                f"array {schema.name}: window needs a (before, after) pair per dimension "
                f"({2 * schema.ndim} numbers), got {len(flat)}"
            )
        pairs = [(flat[2 * k], flat[2 * k + 1]) for k in range(schema.ndim)]
    for name, pair in zip(schema.dimension_names, pairs, strict=True):
        if len(pair) != 2 or any(
            isinstance(v, bool | np.bool_ | np.timedelta64) or not isinstance(v, int | np.integer) or v < 0
            for v in pair
        ):
            raise ValidationError(
                f"array {schema.name}: window extent for {name} must be two integers >= 0, got {pair!r}",
                array=schema.name,
                column=name,
                value=repr(pair),
            )
    lengths = [d.high - d.low for d in schema.dimensions]
    before = tuple(min(int(p[0]), n) for p, n in zip(pairs, lengths, strict=True))
    after = tuple(min(int(p[1]), n) for p, n in zip(pairs, lengths, strict=True))
    for dimension, b, a in zip(schema.dimensions, before, after, strict=True):
        _check_reach(schema.name, dimension, b, a)
    return before, after


INT64_MAX = 2**63 - 1


def _check_reach(array: str, dimension, before: int, after: int) -> None:
    """Refuse a reach whose window arithmetic leaves int64 (``high + after``, ``low - before`` and the
    window's length ``before + after + 1``): over a dimension wider than 2**62 cells, such as
    ``i=-4611686018427387903:*``, a whole-dimension window wrapped and silently lost cells."""
    if (
        dimension.high + after <= INT64_MAX
        and dimension.low - before >= -INT64_MAX - 1
        and before + after + 1 <= INT64_MAX
    ):
        return
    raise ValidationError(
        f"array {array}: a window reaching {before} cells before and {after} after along "
        f"{dimension.name} (range {dimension.low}:{dimension.high}) leaves the int64 coordinates; "
        f"reach at most {dimension.low + INT64_MAX + 1} before, {INT64_MAX - dimension.high} after "
        f"and {INT64_MAX - 1} in all",
        array=array,
        column=dimension.name,
        value=(before, after),
    )


@dataclass(frozen=True)
class WindowJob:
    """One window operation, as every stage of it (and every Spark task) receives it: the input and
    output schemas, the reach before and after each cell per dimension, the aggregate calls and
    the kernel method."""

    schema: ArraySchema
    out_schema: ArraySchema
    before: tuple[int, ...]
    after: tuple[int, ...]
    calls: list[AggregateCall]
    method: str = "incremental"

    @classmethod
    def of(
        cls,
        schema: ArraySchema,
        extents: Mapping[str, tuple[int, int]] | Sequence[int],
        aggregates: Sequence[str],
        method: str = "incremental",
    ) -> WindowJob:
        """The job of ``window(extents, aggregates)`` over an array of ``schema`` (checked)."""
        if method not in METHODS:
            raise ValidationError(f"window method must be one of {', '.join(METHODS)}, got {method!r}")
        before, after = window_extents(schema, extents)
        calls = parse_calls(schema, aggregates, window=True)
        attributes = output_attributes(schema, calls, schema.dimension_names)
        return cls(schema, schema.with_attributes(attributes), before, after, calls, method)

    def functions_by_input(self) -> dict[str | None, list[str]]:
        """The kernel functions to run per input attribute (None: the cell count)."""
        by_input: dict[str | None, list[str]] = {}
        for call in self.calls:
            functions = by_input.setdefault(call.attribute, [])
            if call.function not in functions:
                functions.append(call.function)
        return by_input


def _overflow(out_schema: ArraySchema, attribute: str, cell: np.ndarray, value: int) -> RangeError:
    where = ", ".join(f"{d}={int(c)}" for d, c in zip(out_schema.dimension_names, cell, strict=True))
    return RangeError(
        f"{out_schema.name}: the window sum of {attribute} at cell ({where}) is {value}, which does not "
        "fit int64",
        array=out_schema.name,
        column=attribute,
        value=value,
    )


def _inexact(
    out_schema: ArraySchema, attribute: str, low: np.ndarray, shape: tuple[int, ...], error: ExactSumError
) -> RangeError:
    """A window sum whose terms cancel and cannot be summed exactly, named by its cell."""
    cell = np.asarray(low) + np.asarray(np.unravel_index(error.index, shape))
    where = ", ".join(f"{d}={int(c)}" for d, c in zip(out_schema.dimension_names, cell, strict=True))
    return RangeError(
        f"{out_schema.name}: the window sum of {attribute} at cell ({where}): {error}",
        array=out_schema.name,
        column=attribute,
    )


Results = dict[tuple, tuple[np.ndarray, np.ndarray | None]]


def _dense_results(
    block: halo.Block, reach: tuple[slice, ...], own: np.ndarray, job: WindowJob, low
) -> Results:
    """The block kernel's results over the neighbourhood ``reach`` of ``block`` for the cells ``own``
    (of the chunk whose first cell is ``low``), per (attribute, function); a sum that overflows or
    cannot be had exactly raises RangeError naming its cell."""
    present_here = block.present[reach]
    results: Results = {}
    for attribute, functions in job.functions_by_input().items():
        if attribute is None:
            values, present = None, present_here
        else:
            values = block.values[attribute][reach]
            nulls = block.nulls.get(attribute)
            present = present_here if nulls is None else present_here & ~nulls[reach]
        try:
            computed = window_block(
                values, present, job.before, job.after, functions, job.method, targets=own
            )
        except SumOverflow as error:
            raise _overflow(job.out_schema, attribute, low + np.asarray(error.index), error.value) from None
        except ExactSumError as error:
            raise _inexact(job.out_schema, attribute, low, own.shape, error) from None
        results.update({(attribute, f): pair for f, pair in computed.items()})
    return results


def _point_results(points: halo.Neighbourhood, queries: np.ndarray, job: WindowJob) -> Results:
    """The point kernel's results at the cells ``queries`` (rows of coordinates), per (attribute,
    function), with the same errors as :func:`_dense_results`."""
    results: Results = {}
    for attribute, functions in job.functions_by_input().items():
        values = None if attribute is None else points.values[attribute]
        valid = ~points.nulls[attribute] if attribute is not None and attribute in points.nulls else None
        try:
            computed = window_points(
                points.coords, values, queries, job.before, job.after, functions, valid=valid
            )
        except SumOverflow as error:
            raise _overflow(job.out_schema, attribute, queries[error.index[0]], error.value) from None
        except ExactSumError as error:
            at_cell = ExactSumError(error.code, 0)
            raise _inexact(
                job.out_schema, attribute, queries[error.index], (1,) * job.schema.ndim, at_cell
            ) from None
        results.update({(attribute, f): pair for f, pair in computed.items()})
    return results


def _encoded_chunk(chunk, offsets: np.ndarray, results: Results, index, cells: int, job: WindowJob):
    """One output chunk's fragment, encoded: the results at ``index`` (of the kernel's output) are
    the cells at ``offsets`` of a chunk of ``cells`` cells."""
    values_out, nulls_out = {}, {}
    for call in job.calls:
        result, null = results[(call.attribute, call.function)]
        values_out[call.output_name] = result[index].reshape(-1)
        if null is not None and null[index].any():
            nulls_out[call.output_name] = null[index].reshape(-1)
    fragment = codec.Fragment(chunk, offsets, values_out, nulls_out)
    return codec.encode(fragment, cells, layout.attribute_dtypes(job.out_schema))


def _own_cells(own: np.ndarray) -> tuple[tuple | tuple[np.ndarray, ...], np.ndarray]:
    """Where a chunk's present cells are in its kernel output, and their offsets in the chunk."""
    if own.all():  # a complete chunk: results in C order are the output as they are
        return (slice(None),) * own.ndim, np.arange(own.size, dtype=np.int64)
    index = np.nonzero(own)
    return index, np.ravel_multi_index(index, own.shape).astype(np.int64)


def _window_chunk(pieces: pa.Table, job: WindowJob) -> pa.Table | None:
    """Stage 2: the window aggregates of one output chunk's present cells."""
    grid = ChunkGrid.of(job.schema)
    target = halo.target_of(pieces, job.schema)
    low, high = (np.asarray(c, dtype=np.int64) for c in grid.chunk_bounds(target))
    shape = tuple(int(x) for x in high - low + 1)
    block_shape = tuple(int(s + b + a) for s, b, a in zip(shape, job.before, job.after, strict=True))
    block_cells = math.prod(block_shape)
    if block_cells <= MAX_BLOCK_CELLS and halo.piece_cells(pieces) >= DENSE_FRACTION * block_cells:
        block = halo.place(pieces, job.schema, low - np.asarray(job.before), block_shape)
        core = tuple(slice(b, b + s) for b, s in zip(job.before, shape, strict=True))
        own = block.present[core]
        if not own.any():
            return None
        index, offsets = _own_cells(own)
        results = _dense_results(block, (slice(None),) * len(shape), own, job, low)
    else:
        points = halo.gather(pieces, job.schema)
        inside = np.all((points.coords >= low) & (points.coords <= high), axis=1)
        if not inside.any():
            return None
        queries = points.coords[inside]
        offsets = np.ravel_multi_index(tuple((queries - low).T), shape).astype(np.int64)
        order = np.argsort(offsets)
        offsets, queries = offsets[order], queries[order]
        index = (slice(None),)
        results = _point_results(points, queries, job)
    encoded = _encoded_chunk(target, offsets, results, index, math.prod(shape), job)
    return layout.encoded_to_table([encoded], job.out_schema, 0)


def halo_exchange(data: Data, engine: Engine, job: WindowJob) -> Data:
    """The window by halo exchange: every fragment cut into pieces for the chunks within reach, the
    pieces grouped by target chunk, each group computed by :func:`_window_chunk`."""
    schema = job.schema
    present = present_chunks(data, engine, schema, job.before, job.after)
    cut = functools.partial(
        halo.cut_pieces, schema=schema, before=job.before, after=job.after, present=present
    )
    pieces = engine.map_batches(data, cut, halo.piece_schema(schema))
    function = functools.partial(_window_chunk, job=job)
    return engine.group(pieces, halo.target_columns(schema), function, layout.fragment_schema(job.out_schema))


#: Past this many chunks within reach of one chunk (a long reach over an unbounded dimension), the
#: halo is cut to the chunks present, found by reading the chunk columns first.
MANY_NEIGHBOURS = 1 << 16


def present_chunks(data: Data, engine: Engine, schema: ArraySchema, before, after) -> np.ndarray | None:
    """The chunks holding cells in ``data`` (distinct rows) when the reach names more than
    :data:`MANY_NEIGHBOURS` chunks per chunk (None otherwise: the grid bounds the halo well enough).
    The list, not its box: two clusters far apart along ``i=0:*`` have a box of 10**12 chunks."""
    if halo.most_neighbours(ChunkGrid.of(schema), before, after) <= MANY_NEIGHBOURS:
        return None
    columns = layout.chunk_columns(schema)
    fields = [layout.fragment_schema(schema).field(c) for c in columns]
    table = engine.collect(engine.select(data, columns), pa.schema(fields))
    if table.num_rows == 0:
        return None
    chunks = np.stack([np.asarray(table.column(c), dtype=np.int64) for c in columns], axis=1)
    return np.unique(chunks, axis=0)


def window_in_process(
    table: pa.Table,
    engine: Engine,
    job: WindowJob,
    targets: set[tuple[int, ...]] | None = None,
    core: tuple[np.ndarray, np.ndarray] | None = None,
) -> pa.Table | None:
    """The window of every fragment in ``table`` (the whole input, in the driver, or one tile of
    chunks and their reach in a task): the chunks' neighbourhoods sliced from one block over the box
    of the chunks present when the cells fill enough of it and of every neighbourhood, the per-chunk
    halo exchange (run by ``engine``, a local engine) otherwise. With ``targets``, only the
    windows of those chunks are computed (the others only lend their cells); the exchange's result
    then still holds every chunk, for the caller to keep its own. With ``core`` (the cell box of the
    targets), the block covers only the core and its reach: the cells of ``table`` outside it are
    cut away instead of placed."""
    schema, before, after = job.schema, job.before, job.after

    def exchanged() -> pa.Table | None:
        result = halo_exchange(engine.from_arrow(table, layout.fragment_schema(schema)), engine, job)
        return engine.collect(result, layout.fragment_schema(job.out_schema))

    grid = ChunkGrid.of(schema)
    chunks = np.stack([np.asarray(table.column(c), dtype=np.int64) for c in layout.chunk_columns(schema)], 1)
    starts = np.stack([g.chunk_starts(chunks[:, k]) for k, g in enumerate(grid.dimensions)], axis=1)
    ends = starts + np.stack([g.chunk_sizes(chunks[:, k]) for k, g in enumerate(grid.dimensions)], axis=1)
    if core is None:
        low, high = starts.min(axis=0), ends.max(axis=0) - 1  # the core: every chunk present
    else:
        low, high = (np.asarray(c, dtype=np.int64) for c in core)
    shape = tuple(int(x) for x in high - low + 1)
    block_shape = tuple(int(s + b + a) for s, b, a in zip(shape, before, after, strict=True))
    block_cells = math.prod(block_shape)
    cells = int(np.sum(table.column(layout.N_CELLS)))
    if block_cells > MAX_BLOCK_CELLS or cells < DENSE_FRACTION * block_cells:
        return exchanged()
    if core is None:
        pieces = halo.fragments_as_pieces(table, schema)
    else:
        region = (low - np.asarray(before), high + np.asarray(after))
        pieces = halo.cut_to_regions(table, schema, lambda chunk: [((0,), *region)], ["core"])
    block = halo.place(pieces, schema, low - np.asarray(before), block_shape)
    # Each chunk's window is computed over the same block the exchange would give it (the chunk and
    # its reach), sliced from the one placed block: float sums add in an order that depends on the
    # block's extent, so this keeps results bit for bit equal to the exchange, to the Spark engine
    # and to window views maintained chunk by chunk.
    boxes = []
    for chunk in np.unique(chunks, axis=0):
        if targets is not None and tuple(int(c) for c in chunk) not in targets:
            continue
        chunk_low, chunk_high = (np.asarray(c, dtype=np.int64) for c in grid.chunk_bounds(chunk))
        reach = tuple(
            slice(int(a), int(b) + 1 + f + t)
            for a, b, f, t in zip(chunk_low - low, chunk_high - low, before, after, strict=True)
        )
        if block.present[reach].sum() < DENSE_FRACTION * block.present[reach].size:
            return exchanged()  # a sparse neighbourhood goes to the point kernel: so does the whole input
        boxes.append((tuple(int(c) for c in chunk), chunk_low, reach))
    encoded = []
    for chunk, chunk_low, reach in boxes:
        present_here = block.present[reach]
        own = present_here[
            tuple(slice(b, n - a) for b, a, n in zip(before, after, present_here.shape, strict=True))
        ]
        if not own.any():
            continue
        index, offsets = _own_cells(own)
        results = _dense_results(block, reach, own, job, chunk_low)
        encoded.append(_encoded_chunk(chunk, offsets, results, index, own.size, job))
    return layout.encoded_to_table(encoded, job.out_schema, 0)


def _tiled_window(source: Source, engine: Engine, job: WindowJob) -> Data | None:
    """The window of a dense stored array as one task per tile of chunks (operators/tiles.py), each
    reading its tile and the chunks within reach from the files and computing the tile's chunks as
    the in-process window does (the same per-chunk blocks, so the same sums bit for bit); None when
    the array is not stored, too sparse, or cannot be tiled (then the halo exchange runs)."""
    if not isinstance(source, StoredSource):
        return None
    planned = tiles.plan(
        job.schema,
        source.metadata(),
        lambda box: source.file_uris(list(box)),
        job.before,
        job.after,
        2 * engine.parallelism(),
        TILE_READ_CELLS,
        DENSE_FRACTION,
    )
    if planned is None:
        return None
    task = functools.partial(_window_tiles, planned=planned, job=job)
    return engine.map_batches(
        engine.one_task_each(tiles.work_table(planned)), task, layout.fragment_schema(job.out_schema)
    )


def _window_tiles(work: pa.Table, planned: list[tiles.Tile], job: WindowJob) -> pa.Table | None:
    """One task of a tiled window: the windows of the chunks of the tiles numbered in ``work``."""
    local = LocalEngine()
    grid = ChunkGrid.of(job.schema)
    results = []
    for number in work.column(tiles.TILE).to_pylist():
        tile = planned[number]
        table = tiles.read_tile(tile, job.schema)
        if table.num_rows == 0:
            continue
        computed = window_in_process(table, local, job, targets=tile.own_chunks(), core=tile.cell_box(grid))
        computed = tiles.keep_own(computed, tile, job.schema)
        if computed is not None and computed.num_rows:
            results.append(computed)
    return pa.concat_tables(results) if results else None


def window(
    source: Source,
    engine: Engine,
    extents: Mapping[str, tuple[int, int]] | Sequence[int],
    aggregates: Sequence[str],
    method: str = "incremental",
) -> ComputedSource:
    """Window aggregates over ``[x - before, x + after]`` per dimension, one output per non-empty cell."""
    job = WindowJob.of(source.schema, extents, aggregates, method)
    if engine.name != "local":
        tiled = _tiled_window(source, engine, job)
        if tiled is not None:
            return ComputedSource(job.out_schema, tiled, engine=engine)
        return ComputedSource(job.out_schema, halo_exchange(source.data(engine), engine, job), engine=engine)
    # the local engine hands a map function the whole input as one table
    whole = functools.partial(window_in_process, engine=engine, job=job)
    frame = engine.map_batches(source.data(engine), whole, layout.fragment_schema(job.out_schema))
    return ComputedSource(job.out_schema, frame, engine=engine)
