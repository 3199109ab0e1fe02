"""Operators that reduce groups of cells: regrid (blocks) and aggregate (all cells or by dimensions).

Two stages: every task reduces its fragments to partial states per output cell, keyed by output
chunk; states of one output chunk are then merged (Chan et al.'s formula for the moments) and
finalized into an output fragment.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import pyarrow as pa

from arrayviews.execution.engine import Engine, conform
from arrayviews.kernels.aggregates import (
    finalize,
    merge_states,
    needs_for,
    pack_states,
    partial_states,
    unpack_states,
)
from arrayviews.kernels.exact_sum import ExactSumError, SumOverflow
from arrayviews.model.aggregate_calls import (
    AggregateCall,
    check_calls,
    output_nullable,
    output_type,
    parse_aggregate,
)
from arrayviews.model.errors import RangeError, ValidationError
from arrayviews.model.geometry import ChunkGrid
from arrayviews.model.names import unused_name
from arrayviews.model.schema import UNBOUNDED_HIGH, ArraySchema, Attribute, Dimension
from arrayviews.model.types import numpy_dtype
from arrayviews.operators import regrid_dense
from arrayviews.operators.source import ComputedSource, Source, stored_box
from arrayviews.storage import codec, layout
from arrayviews.storage.assemble import sort_cells

COUNT_STATE = "s__"  # states of count(*), which need no attribute

CellMap = Callable[[np.ndarray], np.ndarray]


def _state_column(attribute: str | None) -> str:
    return COUNT_STATE if attribute is None else f"s__{attribute}"


def _partial_schema(out_schema: ArraySchema, inputs: list[str | None]) -> pa.Schema:
    fields = [pa.field(layout.chunk_column(d), pa.int64()) for d in out_schema.dimension_names]
    fields += [pa.field(_state_column(a), pa.binary()) for a in inputs]
    return pa.schema(fields)


def _sum_error(
    error: ExactSumError | SumOverflow,
    out_schema: ArraySchema,
    attribute: str,
    chunk: tuple[int, ...],
    offset: int,
) -> RangeError:
    """A float sum that cannot be kept exact, or an integer sum beyond int64, named by its output cell."""
    grid = ChunkGrid.of(out_schema)
    low, _ = grid.chunk_bounds(chunk)
    local = np.unravel_index(int(offset), grid.chunk_shape(chunk))
    where = ", ".join(
        f"{d}={int(a) + int(b)}" for d, a, b in zip(out_schema.dimension_names, low, local, strict=True)
    )
    return RangeError(
        f"{out_schema.name}: the sum of {attribute} at cell ({where}): {error}",
        array=out_schema.name,
        column=attribute,
        value=getattr(error, "value", None),
    )


def _partials(
    table: pa.Table,
    in_schema: ArraySchema,
    out_schema: ArraySchema,
    cell_map: CellMap,
    needs: dict[str | None, set[str]],
) -> pa.Table:
    """Stage 1: partial states per output chunk for the cells of one fragment batch."""
    cells = layout.fragments_to_cells(table, in_schema)
    if cells.num_rows == 0:
        return None
    coords = np.stack([np.asarray(cells.column(d)) for d in in_schema.dimension_names], axis=1)
    out_coords = cell_map(coords)
    grouped = sort_cells(out_coords, {}, {}, out_schema)  # grouped.order: input row of each sorted cell
    columns: dict[str, list] = {layout.chunk_column(d): [] for d in out_schema.dimension_names}
    for attribute in needs:
        columns[_state_column(attribute)] = []
    inputs = {}
    for attribute in needs:
        if attribute is None:
            continue
        column = cells.column(attribute).combine_chunks()
        valid = ~np.asarray(column.is_null()) if column.null_count else None
        filled = column.fill_null(layout.null_filler(column.type)) if column.null_count else column
        inputs[attribute] = (np.asarray(filled), valid)
    for index, chunk in enumerate(grouped.chunks):
        lo, hi = grouped.bounds[index], grouped.bounds[index + 1]
        keys = grouped.offsets[lo:hi]
        rows = grouped.order[lo:hi]
        for k, dimension in enumerate(out_schema.dimension_names):
            columns[layout.chunk_column(dimension)].append(int(chunk[k]))
        for attribute, parts in needs.items():
            if attribute is None:
                states = partial_states(keys, None, parts)
            else:
                values, valid = inputs[attribute]
                try:
                    states = partial_states(
                        keys, values[rows], parts, valid=None if valid is None else valid[rows]
                    )
                except ExactSumError as error:
                    offset = np.unique(keys)[error.index]
                    raise _sum_error(error, out_schema, attribute, tuple(chunk), offset) from None
            columns[_state_column(attribute)].append(pack_states(states))
    return pa.table(columns)


def _finish(
    table: pa.Table,
    out_schema: ArraySchema,
    calls: list[AggregateCall],
    input_types: dict[str | None, str | None],
) -> pa.Table:
    """Stage 2: merge the partial states of one output chunk and encode the output fragment."""
    chunk = tuple(int(table.column(layout.chunk_column(d))[0].as_py()) for d in out_schema.dimension_names)
    merged = {}
    for attribute in input_types:
        partials = [unpack_states(b) for b in table.column(_state_column(attribute)).to_pylist()]
        try:
            merged[attribute] = merge_states(partials)
        except ExactSumError as error:
            offset = np.unique(np.concatenate([p.keys for p in partials]))[error.index]
            raise _sum_error(error, out_schema, attribute, chunk, offset) from None
    keys = next(iter(merged.values())).keys
    values, nulls = {}, {}
    for call in calls:
        states = merged[call.attribute]
        try:
            result, null = finalize(states, call.function)
        except SumOverflow as error:
            raise _sum_error(error, out_schema, call.attribute, chunk, int(keys[error.index])) from None
        values[call.output_name] = result
        if null is not None:
            nulls[call.output_name] = null
    fragment = codec.Fragment(chunk, keys, values, nulls)
    volume = int(np.prod(ChunkGrid.of(out_schema).chunk_shape(chunk)))
    encoded = codec.encode(fragment, volume, layout.attribute_dtypes(out_schema))
    return layout.encoded_to_table([encoded], out_schema, 0)


def parse_calls(
    schema: ArraySchema, aggregates: Sequence[str | AggregateCall], window: bool = False
) -> list[AggregateCall]:
    if not aggregates:
        raise ValidationError(
            f"array {schema.name}: give at least one aggregate, e.g. 'count(*)' or 'avg(v)'"
        )
    calls = [a if isinstance(a, AggregateCall) else parse_aggregate(a) for a in aggregates]
    # attributes as the schema spells them: sum(V) over attribute v is sum(v), named v_sum
    calls = [
        call if call.attribute is None else replace(call, attribute=schema.spelling(call.attribute))
        for call in calls
    ]
    check_calls(calls, {a.name: a.type for a in schema.attributes}, schema.name, window)
    return calls


def output_attributes(
    schema: ArraySchema, calls: list[AggregateCall], dimension_names, over_everything: bool = False
) -> list[Attribute]:
    """Output attributes; an aggregate over everything may see no cell, so its values may be null."""
    attributes = []
    dimensions = {name.lower(): name for name in dimension_names}
    for call in calls:
        source = schema.attribute(call.attribute) if call.attribute else None
        if call.output_name.lower() in dimensions:
            raise ValidationError(
                f"array {schema.name}: aggregate output {call.output_name!r} clashes with the dimension "
                f"{dimensions[call.output_name.lower()]!r}; rename it with 'as'"
            )
        attributes.append(
            Attribute(
                call.output_name,
                output_type(call, source.type if source else None),
                output_nullable(call, source.nullable if source else False)
                or (over_everything and call.function != "count"),
            )
        )
    return attributes


def _seed(out_schema: ArraySchema, needs: dict[str | None, set[str]], input_types: dict) -> pa.Table:
    """Partial states of output cell 0 that hold no value, so an aggregate of nothing still has a cell."""
    columns = {layout.chunk_column(d): [0] for d in out_schema.dimension_names}
    for attribute, parts in needs.items():
        values = None if attribute is None else codec.blank(numpy_dtype(input_types[attribute]), 1)
        states = partial_states(np.zeros(1, np.int64), values, parts, valid=np.zeros(1, dtype=bool))
        columns[_state_column(attribute)] = [pack_states(states)]
    return pa.table(columns)


def reduce_cells(
    source: Source,
    engine: Engine,
    out_schema: ArraySchema,
    cell_map: CellMap,
    calls: list[AggregateCall],
    seed_empty: bool = False,
) -> ComputedSource:
    """Group every cell into the output cell ``cell_map`` sends it to and aggregate with ``calls``.

    With ``seed_empty`` output cell 0 exists even when no cell reaches it (count 0, other values
    null), as an aggregate over a whole (possibly empty) array should.
    """
    schema = source.schema
    needs: dict[str | None, set[str]] = {}
    for call in calls:
        needs.setdefault(call.attribute, set()).update(needs_for(call.function))
    input_types = {a: (schema.attribute(a).type if a else None) for a in needs}
    partial_schema = _partial_schema(out_schema, list(needs))
    stage_one = engine.map_batches(
        source.data(engine),
        functools.partial(_partials, in_schema=schema, out_schema=out_schema, cell_map=cell_map, needs=needs),
        partial_schema,
    )
    if seed_empty:
        seed = conform(_seed(out_schema, needs, input_types), partial_schema)
        stage_one = engine.union([stage_one, engine.from_arrow(seed, partial_schema)])
    stage_two = engine.group(
        stage_one,
        layout.chunk_columns(out_schema),
        functools.partial(_finish, out_schema=out_schema, calls=calls, input_types=input_types),
        layout.fragment_schema(out_schema),
    )
    return ComputedSource(out_schema, stage_two, engine=engine)


# -- regrid -------------------------------------------------------------------------------------
def _block_map(coords: np.ndarray, lows: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    return (coords - lows) // blocks + lows


def regrid(
    source: Source, engine: Engine, blocks: Sequence[int], aggregates: Sequence[str]
) -> ComputedSource:
    """Aggregate non-overlapping blocks of ``blocks[k]`` cells along each dimension."""
    schema = source.schema
    if len(blocks) != schema.ndim:
        raise ValidationError(
            f"array {schema.name}: regrid needs one block size per dimension ({schema.ndim}), got {len(blocks)}"
        )
    for dimension, block in zip(schema.dimensions, blocks, strict=True):
        if isinstance(block, bool | np.bool_) or not isinstance(block, int | np.integer) or block < 1:
            raise ValidationError(
                f"array {schema.name}: regrid block size for {dimension.name} must be a positive integer, got {block!r}",
                array=schema.name,
                column=dimension.name,
                value=repr(block),
            )
    calls = parse_calls(schema, aggregates)
    dimensions = []
    for dimension, block in zip(schema.dimensions, blocks, strict=True):
        extent = math.ceil(dimension.extent / block)
        dimensions.append(
            Dimension(
                dimension.name,
                dimension.low,
                # open-ended stays open-ended: a bounded output that far out would need a time label
                # at its last cell, past datetime64's range
                UNBOUNDED_HIGH if dimension.unbounded else dimension.low + extent - 1,
                min(dimension.chunk_length, extent),
                scale=None if dimension.scale is None else dimension.scale.regridded(dimension.low, block),
            )
        )
    out_schema = ArraySchema(
        schema.name, tuple(output_attributes(schema, calls, schema.dimension_names)), tuple(dimensions)
    )
    lows = np.array([d.low for d in schema.dimensions], dtype=np.int64)
    cell_map = functools.partial(_block_map, lows=lows, blocks=np.asarray(blocks, dtype=np.int64))
    if engine.name != "local" or not regrid_dense.applies(schema, calls):
        return reduce_cells(source, engine, out_schema, cell_map, calls)

    def two_stage(table: pa.Table) -> pa.Table | None:
        whole = ComputedSource(
            schema, engine.from_arrow(table, layout.fragment_schema(schema)), engine=engine
        )
        reduced = reduce_cells(whole, engine, out_schema, cell_map, calls)
        return engine.collect(reduced.plan, layout.fragment_schema(out_schema))

    def sum_error(
        error: ExactSumError | SumOverflow, attribute: str, chunk: tuple[int, ...], offset: int
    ) -> RangeError:
        return _sum_error(error, out_schema, attribute, chunk, offset)

    # the local engine hands a map function the whole input as one table
    dense = functools.partial(
        regrid_dense.regrid_in_process,
        schema=schema,
        out_schema=out_schema,
        blocks=tuple(int(b) for b in blocks),
        calls=calls,
        two_stage=two_stage,
        sum_error=sum_error,
    )
    fragments = layout.fragment_schema(out_schema)
    box = stored_box(source)
    if box is None:
        return ComputedSource(
            out_schema, engine.map_batches(source.data(engine), dense, fragments), engine=engine
        )

    def from_chunks(_: pa.Table) -> pa.Table:
        """The regrid from the box's chunks (the chunk cache), else from the fragments read."""
        done = regrid_dense.regrid_box(box, out_schema, tuple(int(b) for b in blocks), calls, sum_error)
        if done is not None:
            return done
        return engine.collect(engine.map_batches(source.data(engine), dense, fragments), fragments)

    frame = engine.map_batches(engine.one_task_each(pa.table({"regrid": [0]})), from_chunks, fragments)
    return ComputedSource(out_schema, frame, engine=engine)


# -- aggregate ----------------------------------------------------------------------------------
def _select_map(coords: np.ndarray, positions: list[int]) -> np.ndarray:
    if not positions:
        return np.zeros((len(coords), 1), dtype=np.int64)
    return coords[:, positions]


def aggregate(
    source: Source, engine: Engine, aggregates: Sequence[str], by: Sequence[str] = ()
) -> ComputedSource:
    """Aggregate all cells, or the cells sharing each value of the ``by`` dimensions."""
    schema = source.schema
    calls = parse_calls(schema, aggregates)
    by = list(by)
    for name in by:
        schema.dimension(name)
    if len(set(by)) != len(by):
        raise ValidationError(f"array {schema.name}: a group-by dimension is named twice")
    if by:
        dimensions = tuple(schema.dimension(n) for n in by)
    else:
        dimensions = (Dimension(unused_name("i", {c.output_name for c in calls}), 0, 0, 1),)
    names = [d.name for d in dimensions]
    # an output named as any dimension of the array is refused, as regrid and views refuse it
    # (before, a grand aggregate named its own dimension i_2 to make room for an output 'i')
    attributes = output_attributes(schema, calls, [*schema.dimension_names, *names], over_everything=not by)
    out_schema = ArraySchema(schema.name, tuple(attributes), dimensions)
    positions = [schema.dimension_names.index(n) for n in by]
    cell_map = functools.partial(_select_map, positions=positions)
    return reduce_cells(source, engine, out_schema, cell_map, calls, seed_empty=not by)
