"""The per-chunk computation of similarity views: signed join terms evaluated by the kernel, combined
per left cell into view state, and merged with the view's previous state.

Full computation is one term (left join right, all signs +1). Maintenance under deltas evaluates
``d_left join right_old + left_old join d_right + d_left join d_right`` with signed cells (the
expansion of (left + d_left) join (right + d_right) minus left join right), so the join of the two
deltas is counted once. Counts add as int64 and sums exactly (kernels/exact_sum.py), so a
maintained view equals its recomputation bit for bit.

min and max cannot be subtracted: a state change carries, per cell, the extremes of the values that
arrived and of those that left (``_gone...``). A cell whose old extreme may have left is *stale*
(:func:`stale_cells`); only those cells are recomputed from the new base arrays
(:func:`fresh_extremes_chunk`), and their fresh extremes replace the stored ones in the merge.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from arrayviews.kernels.exact_sum import ExactSumError, FloatSums, IntSums
from arrayviews.kernels.rows import unique_rows
from arrayviews.kernels.simjoin import join_aggregate
from arrayviews.model.errors import RangeError
from arrayviews.model.names import NEGATIVE
from arrayviews.model.schema import ArraySchema, Attribute
from arrayviews.model.types import numpy_dtype
from arrayviews.operators import halo
from arrayviews.operators.cells import cell_columns, cells_to_fragment_table
from arrayviews.operators.simjoin import (
    LEFT_MINUS,
    LEFT_OLD,
    LEFT_PLUS,
    RIGHT_MINUS,
    RIGHT_OLD,
    RIGHT_PLUS,
    ROLE,
    JoinSpec,
)
from arrayviews.storage import layout
from arrayviews.views import state as st
from arrayviews.views.definition import SimilarityViewDefinition

SIGN = {LEFT_OLD: 1, LEFT_MINUS: -1, LEFT_PLUS: 1, RIGHT_OLD: 1, RIGHT_MINUS: -1, RIGHT_PLUS: 1}
FULL_TERMS = (((LEFT_OLD,), (RIGHT_OLD,)),)
DELTA_TERMS = (
    ((LEFT_MINUS, LEFT_PLUS), (RIGHT_OLD,)),
    ((LEFT_OLD,), (RIGHT_MINUS, RIGHT_PLUS)),
    ((LEFT_MINUS, LEFT_PLUS), (RIGHT_MINUS, RIGHT_PLUS)),
)
FRESH = "_fresh"
GONE_PREFIX = "_gone"


def gone_column(extreme: str) -> str:
    """The delta column holding the extreme of the values that left, for extreme column ``extreme``."""
    return GONE_PREFIX + extreme


def _is_min(column: str) -> bool:
    """Whether an extreme column (or its gone column) holds a minimum (by prefix, never by the
    attribute's name, which may itself contain "min")."""
    return column.removeprefix(GONE_PREFIX).startswith(st.EXTREME_PREFIXES[0])


#: State types a state change carries as their int64 bits: Spark's Arrow exchange has no unsigned
#: 64-bit type and turns nanosecond times into microseconds; :func:`read_delta` views them back.
CARRIED_AS_INT64 = ("uint64", "datetime64")


def _carried(type_name: str) -> str:
    """The type a state column has in a state change."""
    return "int64" if type_name in CARRIED_AS_INT64 else type_name


def delta_schema(stored: ArraySchema) -> ArraySchema:
    """Cells of a state change: every state attribute (extremes null where unchanged), the extremes
    of the values that left, a flag for cells touched by a negative pair, and a flag for rows holding
    recomputed (fresh) extremes that replace the stored ones."""
    state = [a for a in stored.attributes if a.internal]
    nullable = st.REPLACED_PREFIXES + st.EXTREME_PREFIXES
    relaxed = [
        Attribute(a.name, _carried(a.type), nullable=a.name.startswith(nullable), internal=True)
        for a in state
    ]
    gone = [
        Attribute(gone_column(a.name), _carried(a.type), nullable=True, internal=True)
        for a in state
        if a.name.startswith(st.EXTREME_PREFIXES)
    ]
    return stored.with_attributes(
        [*relaxed, *gone, Attribute(NEGATIVE, "bool", internal=True), Attribute(FRESH, "bool", internal=True)]
    )


def _points(
    rows: pa.Table, schema: ArraySchema, roles: tuple[int, ...]
) -> tuple[halo.Neighbourhood, np.ndarray, np.ndarray]:
    """Cells of the rows with the given roles, their signs and their roles."""
    role = np.asarray(rows.column(ROLE)) if rows.num_rows else np.zeros(0, np.int8)
    parts, signs, kinds = [], [], []
    for wanted in roles:
        subset = rows.filter(pa.array(role == wanted))
        if subset.num_rows == 0:
            continue
        points = halo.gather(subset, schema)
        parts.append(points)
        signs.append(np.full(len(points.coords), SIGN[wanted], np.int64))
        kinds.append(np.full(len(points.coords), wanted, np.int8))
    if not parts:
        empty = halo.Neighbourhood(
            np.zeros((0, schema.ndim), np.int64),
            {a.name: np.zeros(0, numpy_dtype(a.type)) for a in schema.attributes},
            {},
        )
        return empty, np.zeros(0, np.int64), np.zeros(0, np.int8)
    coords = np.vstack([p.coords for p in parts])
    values = {a.name: np.concatenate([p.values[a.name] for p in parts]) for a in schema.attributes}
    nulls = {}
    for a in schema.attributes:
        masks = [p.nulls.get(a.name, np.zeros(len(p.coords), bool)) for p in parts]
        mask = np.concatenate(masks)
        if mask.any():
            nulls[a.name] = mask
    return halo.Neighbourhood(coords, values, nulls), np.concatenate(signs), np.concatenate(kinds)


def _inputs(definition: SimilarityViewDefinition, side: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for aggregate in definition.aggregates:
        if aggregate.side == side:
            found.setdefault(aggregate.attribute, set()).add(aggregate.function)
    return found


def _cell(stored: ArraySchema, coords: np.ndarray) -> str:
    return "(" + ", ".join(f"{d}={int(c)}" for d, c in zip(stored.dimension_names, coords, strict=True)) + ")"


def _sum_error(error: ExactSumError, stored: ArraySchema, attribute: str, coords: np.ndarray) -> RangeError:
    return RangeError(
        f"view {stored.name}: the sum of right.{attribute} at cell {_cell(stored, coords)}: {error}",
        array=stored.name,
        column=attribute,
    )


def _combine_sums(
    parts: list[FloatSums | IntSums], inverse: np.ndarray, count: int, stored, attribute, cells
) -> FloatSums | IntSums:
    kind = type(parts[0])
    try:
        return kind.concat(parts).combine(inverse, count)
    except ExactSumError as error:
        raise _sum_error(error, stored, attribute, cells[error.index]) from None


def _reduce_extremes(
    values: np.ndarray, has: np.ndarray, inverse: np.ndarray, count: int, is_min: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Per cell, the min (or max) of the values with ``has`` (NaN propagating), and where there is one."""
    reducer = np.minimum if is_min else np.maximum
    out = np.zeros(count, dtype=values.dtype)
    seen = np.zeros(count, dtype=bool)
    if has.any():
        rows = np.flatnonzero(has)
        rows = rows[np.argsort(inverse[rows], kind="stable")]
        groups = inverse[rows]
        starts = np.flatnonzero(np.concatenate(([True], groups[1:] != groups[:-1])))
        reduced = reducer.reduceat(values[rows], starts)
        if values.dtype.kind == "f":  # NaN propagates like np.min
            nan = np.logical_or.reduceat(np.isnan(values[rows]), starts)
            reduced = np.where(nan, np.nan, reduced)
        out[groups[starts]] = reduced
        seen[groups[starts]] = True
    return out, seen


def _delta_table(
    stored: ArraySchema, cells: np.ndarray, columns: dict[str, np.ndarray], nulls: dict[str, np.ndarray]
) -> pa.Table:
    schema = delta_schema(stored)
    table = {d: cells[:, k] for k, d in enumerate(schema.dimension_names)}
    for attribute in schema.attributes:
        values = np.asarray(columns[attribute.name])
        if values.dtype == np.uint64 or values.dtype.kind == "M":  # carried as int64 bits (_carried)
            values = values.view(np.int64)
        table[attribute.name] = pa.array(
            values, type=layout.arrow_type_of(attribute), mask=nulls.get(attribute.name)
        )
    return pa.table(table, schema=layout.cell_schema(schema))


def read_delta(delta_rows: pa.Table, stored: ArraySchema) -> tuple[np.ndarray, dict, dict]:
    """Coordinates, values and null masks of a state change, each column in the stored view's type."""
    coords, values, nulls = cell_columns(delta_rows, delta_schema(stored))
    for attribute in stored.attributes:
        if attribute.internal and attribute.type in CARRIED_AS_INT64:
            for name in (attribute.name, gone_column(attribute.name)):
                if name in values:
                    values[name] = values[name].view(numpy_dtype(attribute.type))
    return coords, values, nulls


def join_chunk(
    left_rows: pa.Table,
    right_rows: pa.Table,
    spec: JoinSpec,
    definition: SimilarityViewDefinition,
    stored: ArraySchema,
    terms: tuple,
) -> pa.Table | None:
    """Stage 2: the state change (or the full state) of the view cells of one left chunk."""
    if left_rows.num_rows == 0:
        return None
    right_inputs = _inputs(definition, "right")
    left_inputs = _inputs(definition, "left")
    plan = st.layout(definition, stored)
    summed = {s.attribute: s for s in plan.sums}
    rows_coords, columns = [], {}
    additive: dict[str, list[np.ndarray]] = {st.PAIRS: []}
    sums: dict[str, list] = {name: [] for name in summed}
    extremes: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    replaced: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    negative = []
    for left_roles, right_roles in terms:
        left, left_sign, left_kind = _points(left_rows, spec.left, left_roles)
        right, right_sign, _ = _points(right_rows, spec.right, right_roles)
        if len(left.coords) == 0 or len(right.coords) == 0:
            continue
        mapped = spec.mapping.apply(left.coords, spec.left)
        try:
            result = join_aggregate(
                mapped,
                right.coords,
                spec.shape,
                {
                    # an attribute only counted needs no values (text has none the kernel reads)
                    name: np.zeros(len(right.coords), np.int8)
                    if functions == {"count"}
                    else right.values[name]
                    for name, functions in right_inputs.items()
                },
                {name: ~right.nulls[name] for name in right_inputs if name in right.nulls},
                left_sign,
                right_sign,
            )
        except ExactSumError as error:
            floats = [n for n in right_inputs if right.values[n].dtype.kind == "f"]
            raise _sum_error(error, stored, floats[error.column], left.coords[error.index]) from None
        touched = (result.count != 0) | result.negative | np.isin(left_kind, (LEFT_MINUS, LEFT_PLUS))
        for name in result.valid_count:
            touched |= result.valid_count[name] != 0
        keep = np.flatnonzero(touched)
        rows_coords.append(left.coords[keep])
        additive[st.PAIRS].append(result.count[keep])
        negative.append(result.negative[keep])
        for name, functions in right_inputs.items():
            additive.setdefault(st.count_column("right", name), []).append(result.valid_count[name][keep])
            if name in summed:
                sums[name].append(result.sums[name].take(keep))
            for function, column in (
                ("min", st.min_column("right", name)),
                ("max", st.max_column("right", name)),
            ):
                if function in functions:
                    arrived = result.minimum if function == "min" else result.maximum
                    gone = result.gone_minimum if function == "min" else result.gone_maximum
                    extremes.setdefault(column, []).append(
                        (arrived[name][keep], result.has_extreme[name][keep])
                    )
                    extremes.setdefault(gone_column(column), []).append(
                        (gone[name][keep], result.has_gone[name][keep])
                    )
        for name, functions in left_inputs.items():
            valid = ~left.nulls[name][keep] if name in left.nulls else np.ones(len(keep), bool)
            additive.setdefault(st.count_column("left", name), []).append(result.count[keep] * valid)
            if functions - {"count"}:  # the left value itself; a new value (PLUS) wins over the old
                kind = left_kind[keep]
                replaced.setdefault(st.value_column(name), []).append(
                    (left.values[name][keep], valid & (kind != LEFT_MINUS), kind == LEFT_PLUS)
                )
    if not rows_coords:
        return None
    coords = np.vstack(rows_coords)
    if len(coords) == 0:
        return None
    cells, inverse = unique_rows(coords, return_inverse=True)
    inverse = inverse.reshape(-1)
    count = len(cells)
    for name, parts in additive.items():
        values = np.concatenate(parts)
        total = np.zeros(count, dtype=values.dtype)
        np.add.at(total, inverse, values)
        columns[name] = total
    for name, parts in sums.items():
        summed[name].write(_combine_sums(parts, inverse, count, stored, name, cells), columns)
    nulls = {}
    for name, parts in extremes.items():
        values = np.concatenate([p[0] for p in parts])
        has = np.concatenate([p[1] for p in parts])
        columns[name], seen = _reduce_extremes(values, has, inverse, count, _is_min(name))
        nulls[name] = ~seen
    for name, parts in replaced.items():
        values = np.concatenate([p[0] for p in parts])
        has = np.concatenate([p[1] for p in parts])
        newer = np.concatenate([p[2] for p in parts])
        out = np.zeros(count, dtype=values.dtype)
        seen = np.zeros(count, dtype=bool)
        rows = np.flatnonzero(has)
        rows = rows[np.lexsort((newer[rows], inverse[rows]))]  # per cell, the newest value last
        groups = inverse[rows]
        last = rows[np.flatnonzero(np.append(groups[1:] != groups[:-1], True))] if len(rows) else rows
        out[inverse[last]] = values[last]
        seen[inverse[last]] = True
        columns[name] = out
        nulls[name] = ~seen
    flags = np.zeros(count, dtype=bool)
    np.logical_or.at(flags, inverse, np.concatenate(negative))
    columns[NEGATIVE] = flags
    columns[FRESH] = np.zeros(count, dtype=bool)
    return _delta_table(stored, cells, columns, nulls)


def fresh_extremes_chunk(
    left_rows: pa.Table, right_rows: pa.Table, spec: JoinSpec, definition: SimilarityViewDefinition, stored
) -> pa.Table | None:
    """Recomputed right-side min/max of the (stale) left cells in ``left_rows`` from the current right
    cells: rows flagged fresh, all other state zero (they replace extremes and add nothing)."""
    left, _, _ = _points(left_rows, spec.left, (LEFT_OLD,))
    if len(left.coords) == 0:
        return None
    right, _, _ = _points(right_rows, spec.right, (RIGHT_OLD,))
    wanted = {
        name: functions & {"min", "max"}
        for name, functions in _inputs(definition, "right").items()
        if functions & {"min", "max"}
    }
    cells = unique_rows(left.coords)
    if len(right.coords):
        result = join_aggregate(
            spec.mapping.apply(cells, spec.left),
            right.coords,
            spec.shape,
            {name: right.values[name] for name in wanted},
            {name: ~right.nulls[name] for name in wanted if name in right.nulls},
        )
    schema = delta_schema(stored)
    count = len(cells)
    columns, nulls = {}, {}
    for attribute in schema.attributes:
        columns[attribute.name] = np.zeros(count, dtype=numpy_dtype(attribute.type))
        if attribute.nullable:
            nulls[attribute.name] = np.ones(count, dtype=bool)
    for name, functions in wanted.items():
        for function in functions:
            column = st.min_column("right", name) if function == "min" else st.max_column("right", name)
            if len(right.coords):
                source = result.minimum if function == "min" else result.maximum
                columns[column] = source[name].astype(columns[column].dtype)
                nulls[column] = ~result.has_extreme[name]
    columns[FRESH] = np.ones(count, dtype=bool)
    return _delta_table(stored, cells, columns, nulls)


def _extreme_key(values: np.ndarray, is_min: bool) -> np.ndarray:
    """Values ordered as min/max treat them, NaN (which wins both) as -inf for min and +inf for max."""
    if values.dtype.kind != "f":
        return values
    return np.where(np.isnan(values), -np.inf if is_min else np.inf, values)


def stale_cells(
    old_rows: pa.Table, delta_rows: pa.Table, definition: SimilarityViewDefinition, stored: ArraySchema
) -> pa.Table | None:
    """The cells of one view chunk whose min or max may have left with the change (dimension columns
    only).

    Per cell the change is a signed multiset: new = old + arrived - gone (positive and negative pairs;
    a positive pair may cancel a negative one, so arrived values need not be new, and a cell new to
    the view may have values that left). The most extreme value of old + arrived survives unless some
    value that left is at least as extreme, so a cell is stale exactly when the most extreme gone
    value reaches both the stored extreme (if any) and the arrived one (if any); every other cell's
    new extreme is the stored one combined with the arrived one."""
    plan = st.layout(definition, stored)
    if not plan.extremes or delta_rows.num_rows == 0:
        return None
    coords, values, nulls = read_delta(delta_rows, stored)
    old_cells = layout.fragments_to_cells(old_rows.select(layout.fragment_schema(stored).names), stored)
    old_coords, old_values, old_nulls = cell_columns(old_cells, stored)
    everything = np.vstack([old_coords, coords])
    _, inverse = unique_rows(everything, return_inverse=True)
    inverse = inverse.reshape(-1)
    old_index, new_index = inverse[: len(old_coords)], inverse[len(old_coords) :]
    stale = np.zeros(len(coords), dtype=bool)
    pairs = np.zeros(inverse.max() + 1, dtype=np.int64)
    np.add.at(pairs, old_index, old_values[st.PAIRS])
    np.add.at(pairs, new_index, values[st.PAIRS])
    survives = pairs[new_index] > 0  # a cell that loses all its pairs leaves the view: nothing to redo
    for name in plan.extremes:
        is_min = _is_min(name)
        slot = np.full(inverse.max() + 1, -1, dtype=np.int64)
        old_has = ~old_nulls.get(name, np.zeros(len(old_coords), bool))
        slot[old_index[old_has]] = np.flatnonzero(old_has)
        where = slot[new_index]
        gone_has = ~nulls.get(gone_column(name), np.zeros(len(coords), bool))
        if not gone_has.any():
            continue
        # a cell without a stored extreme (new, or all null before) counts as "no bound"
        stored_has = where >= 0
        old = _extreme_key(
            old_values[name][np.maximum(where, 0)] if len(old_coords) else values[name], is_min
        )
        gone = _extreme_key(values[gone_column(name)], is_min)
        arrived = _extreme_key(values[name], is_min)
        arrived_has = ~nulls.get(name, np.zeros(len(coords), bool))
        # the most extreme value of old + arrived survives unless a value that left is as extreme
        if is_min:
            reached = (~stored_has | (gone <= old)) & (~arrived_has | (gone <= arrived))
        else:
            reached = (~stored_has | (gone >= old)) & (~arrived_has | (gone >= arrived))
        stale |= gone_has & reached & survives
    if not stale.any():
        return None
    rows = coords[stale]
    return pa.table({d: pa.array(rows[:, k], pa.int64()) for k, d in enumerate(stored.dimension_names)})


def merge_chunk(
    old_rows: pa.Table,
    delta_rows: pa.Table,
    definition: SimilarityViewDefinition,
    stored: ArraySchema,
    full: bool,
    public: frozenset[str] | None = None,
) -> pa.Table | None:
    """Stage 3: new view fragments of one view chunk from its old fragments and its state change.
    ``public`` (a query answered through the view) names the view's aggregates to evaluate; the
    others are left zero, so one the query does not read cannot stop it (None: all of them)."""
    if delta_rows.num_rows == 0:  # nothing changed in this chunk: keep its fragments as they are
        return (
            None if full or old_rows.num_rows == 0 else old_rows.select(layout.fragment_schema(stored).names)
        )
    plan = st.layout(definition, stored)
    summed = plan.sum_columns
    coords, delta_values, delta_nulls = read_delta(delta_rows, stored)
    fresh = delta_values[FRESH]
    state_names = [a.name for a in stored.attributes if a.internal]
    if full or old_rows.num_rows == 0:
        old_coords = np.zeros((0, stored.ndim), np.int64)
        old_values = {a.name: np.zeros(0, numpy_dtype(a.type)) for a in stored.attributes}
        old_nulls: dict[str, np.ndarray] = {}
    else:
        old_cells = layout.fragments_to_cells(old_rows.select(layout.fragment_schema(stored).names), stored)
        old_coords, old_values, old_nulls = cell_columns(old_cells, stored)
    cells, inverse = unique_rows(np.vstack([old_coords, coords]), return_inverse=True)
    inverse = inverse.reshape(-1)
    old_index, new_index = inverse[: len(old_coords)], inverse[len(old_coords) :]
    change = ~fresh
    count = len(cells)
    state: dict[str, np.ndarray] = {}
    nulls: dict[str, np.ndarray] = {}
    for name in plan.counts:
        target = np.zeros(count, dtype=np.int64)
        np.add.at(target, old_index, old_values[name])
        np.add.at(target, new_index[change], delta_values[name][change])
        state[name] = target
    for sums in plan.sums:
        rows = type(sums.read(old_values)).concat(
            [sums.read(old_values), sums.read(delta_values).take(change)]
        )
        groups = np.concatenate([old_index, new_index[change]])
        try:
            sums.write(rows.combine(groups, count), state)
        except ExactSumError as error:
            raise _sum_error(error, stored, sums.attribute, cells[error.index]) from None
    for name in plan.replaced + plan.extremes:
        target = np.zeros(count, dtype=numpy_dtype(stored.attribute(name).type))
        present = np.zeros(count, dtype=bool)
        old_has = ~old_nulls.get(name, np.zeros(len(old_index), bool))
        target[old_index[old_has]] = old_values[name][old_has]
        present[old_index[old_has]] = True
        new_has = ~delta_nulls.get(name, np.zeros(len(new_index), bool)) & change
        incoming = delta_values[name][new_has]
        slots = new_index[new_has]
        if name in plan.replaced:  # a new left value replaces the old one
            target[slots] = incoming
            present[slots] = True
        else:
            reducer = np.fmin if _is_min(name) else np.fmax
            both = present[slots]
            combined = np.where(both, reducer(target[slots], incoming), incoming)
            if target.dtype.kind == "f":
                combined = np.where(both & (np.isnan(target[slots]) | np.isnan(incoming)), np.nan, combined)
            target[slots] = combined
            present[slots] = True
            # the recomputed extremes of stale cells replace whatever was there
            renewed = new_index[fresh]
            target[renewed] = delta_values[name][fresh]
            present[renewed] = ~delta_nulls.get(name, np.zeros(len(new_index), bool))[fresh]
        state[name] = target
        nulls[name] = ~present
    missing = set(state_names) - set(state) - summed
    assert not missing, f"state columns without a merge rule: {sorted(missing)}"
    alive = state[st.PAIRS] > 0
    if not alive.any():
        return None
    cells = cells[alive]
    state = {name: values[alive] for name, values in state.items()}
    nulls = {name: mask[alive] for name, mask in nulls.items()}
    values = {a.name: np.zeros(len(cells), numpy_dtype(a.type)) for a in stored.attributes if not a.internal}
    public_nulls: dict[str, np.ndarray] = {}
    evaluated = tuple(a for a in definition.aggregates if public is None or a.alias in public)
    if evaluated:
        finalized, public_nulls = st.finalize(
            dataclasses.replace(definition, aggregates=evaluated), state, stored, cells
        )
        values.update(finalized)
    out_nulls = {**nulls, **public_nulls}
    table = pa.table(
        {
            **{d: cells[:, k] for k, d in enumerate(stored.dimension_names)},
            **{
                a.name: pa.array(
                    values[a.name] if a.name in values else state[a.name],
                    type=layout.arrow_type_of(a),
                    mask=out_nulls[a.name] if a.name in out_nulls and out_nulls[a.name].any() else None,
                )
                for a in stored.attributes
            },
        },
        schema=layout.cell_schema(stored),
    )
    return cells_to_fragment_table(table, stored)
