"""The per-chunk computation of similarity views: signed join terms evaluated by the kernel, combined
per left cell into view state, and merged with the view's previous state.

Full computation is one term (left join right, all signs +1). Maintenance under deltas evaluates
``d_left join right_old + left_old join d_right + d_left join d_right`` with signed cells (the
expansion of (left + d_left) join (right + d_right) minus left join right), so the join of the two
deltas is counted once.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from arrayviews.kernels.simjoin import join_aggregate
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


def delta_schema(stored: ArraySchema) -> ArraySchema:
    """Cells of a state change: every state attribute (extremes null where unchanged) and a flag for
    cells touched by a negative pair."""
    state = [a for a in stored.attributes if a.internal]
    relaxed = [
        Attribute(
            a.name,
            a.type,
            nullable=a.name.startswith(st.REPLACED_PREFIXES + st.EXTREME_PREFIXES),
            internal=True,
        )
        for a in state
    ]
    return stored.with_attributes([*relaxed, Attribute(NEGATIVE, "bool", internal=True)])


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
    rows_coords, rows_kind, columns = [], [], {}
    additive: dict[str, list[np.ndarray]] = {st.PAIRS: []}
    extremes: dict[str, list[np.ndarray]] = {}
    extreme_has: dict[str, list[np.ndarray]] = {}
    replaced: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    negative = []
    for left_roles, right_roles in terms:
        left, left_sign, left_kind = _points(left_rows, spec.left, left_roles)
        right, right_sign, _ = _points(right_rows, spec.right, right_roles)
        if len(left.coords) == 0 or len(right.coords) == 0:
            continue
        mapped = spec.mapping.apply(left.coords, spec.left)
        result = join_aggregate(
            mapped,
            right.coords,
            spec.shape,
            {name: right.values[name] for name in right_inputs},
            {name: ~right.nulls[name] for name in right_inputs if name in right.nulls},
            left_sign,
            right_sign,
        )
        touched = (result.count != 0) | result.negative | np.isin(left_kind, (LEFT_MINUS, LEFT_PLUS))
        for name in result.valid_count:
            touched |= result.valid_count[name] != 0
        keep = np.flatnonzero(touched)
        rows_coords.append(left.coords[keep])
        rows_kind.append(left_kind[keep])
        additive[st.PAIRS].append(result.count[keep])
        negative.append(result.negative[keep])
        for name, functions in right_inputs.items():
            additive.setdefault(st.count_column("right", name), []).append(result.valid_count[name][keep])
            if functions & {"sum", "avg"}:
                additive.setdefault(st.sum_column("right", name), []).append(result.sums[name][keep])
            for function, column in (
                ("min", st.min_column("right", name)),
                ("max", st.max_column("right", name)),
            ):
                if function in functions:
                    source = result.minimum if function == "min" else result.maximum
                    extremes.setdefault(column, []).append(source[name][keep])
                    extreme_has.setdefault(column, []).append(result.has_extreme[name][keep])
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
    cells, inverse = np.unique(coords, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    count = len(cells)
    for name, parts in additive.items():
        values = np.concatenate(parts)
        total = np.zeros(count, dtype=values.dtype)
        np.add.at(total, inverse, values)
        columns[name] = total
    nulls = {}
    for name, parts in extremes.items():
        values = np.concatenate(parts)
        has = np.concatenate(extreme_has[name])
        reducer = np.minimum if name.startswith(st.min_column("right", "")) else np.maximum
        out = np.zeros(count, dtype=values.dtype)
        seen = np.zeros(count, dtype=bool)
        if has.any():
            rows = np.flatnonzero(has)
            order = np.argsort(inverse[rows], kind="stable")
            rows = rows[order]
            groups = inverse[rows]
            starts = np.flatnonzero(np.concatenate(([True], groups[1:] != groups[:-1])))
            reduced = reducer.reduceat(values[rows], starts)
            if values.dtype.kind == "f":  # NaN propagates like np.min
                nan = np.logical_or.reduceat(np.isnan(values[rows]), starts)
                reduced = np.where(nan, np.nan, reduced)
            out[groups[starts]] = reduced
            seen[groups[starts]] = True
        columns[name] = out
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
    schema = delta_schema(stored)
    table = {d: cells[:, k] for k, d in enumerate(schema.dimension_names)}
    for attribute in schema.attributes:
        table[attribute.name] = pa.array(
            columns[attribute.name], type=layout.arrow_type_of(attribute), mask=nulls.get(attribute.name)
        )
    return pa.table(table, schema=layout.cell_schema(schema))


def merge_chunk(
    old_rows: pa.Table,
    delta_rows: pa.Table,
    definition: SimilarityViewDefinition,
    stored: ArraySchema,
    full: bool,
) -> pa.Table | None:
    """Stage 3: new view fragments of one view chunk from its old fragments and its state change."""
    schema = delta_schema(stored)
    delta = delta_rows
    if delta.num_rows == 0:  # nothing changed in this chunk: keep its fragments as they are
        return (
            None if full or old_rows.num_rows == 0 else old_rows.select(layout.fragment_schema(stored).names)
        )
    coords, delta_values, delta_nulls = cell_columns(delta, schema)
    state_names = [a.name for a in stored.attributes if a.internal]
    state = {name: delta_values[name] for name in state_names}
    if not full and old_rows.num_rows:
        old_cells = layout.fragments_to_cells(old_rows.select(layout.fragment_schema(stored).names), stored)
        old_coords, old_values, old_nulls = cell_columns(old_cells, stored)
        everything = np.vstack([old_coords, coords])
        cells, inverse = np.unique(everything, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        old_index, new_index = inverse[: len(old_coords)], inverse[len(old_coords) :]
        merged = {}
        for name in state_names:
            dtype = stored.attribute(name)
            target = np.zeros(len(cells), dtype=numpy_dtype(dtype.type))
            extreme = name.startswith(st.REPLACED_PREFIXES + st.EXTREME_PREFIXES)
            if not extreme:
                np.add.at(target, old_index, old_values[name])
                np.add.at(target, new_index, delta_values[name])
                merged[name] = target
                continue
            present = np.zeros(len(cells), dtype=bool)
            old_has = ~old_nulls.get(name, np.zeros(len(old_index), bool))
            target[old_index[old_has]] = old_values[name][old_has]
            present[old_index[old_has]] = True
            new_has = ~delta_nulls.get(name, np.zeros(len(new_index), bool))
            incoming = delta_values[name][new_has]
            slots = new_index[new_has]
            if name.startswith(st.REPLACED_PREFIXES):  # a new left value replaces the old one
                target[slots] = incoming
            else:
                reducer = np.fmin if name.startswith(st.min_column("right", "")) else np.fmax
                both = present[slots]
                combined = np.where(both, reducer(target[slots], incoming), incoming)
                if target.dtype.kind == "f":
                    combined = np.where(
                        both & (np.isnan(target[slots]) | np.isnan(incoming)), np.nan, combined
                    )
                target[slots] = combined
            present[slots] = True
            merged[name] = target
            delta_nulls[name] = ~present
        state = merged
        coords = cells
    else:
        for name in state_names:
            if name.startswith(st.REPLACED_PREFIXES + st.EXTREME_PREFIXES):
                delta_nulls.setdefault(name, np.zeros(len(coords), bool))
    alive = state[st.PAIRS] > 0
    if not alive.any():
        return None
    public, public_nulls = st.finalize(definition, state)
    columns = {d: coords[alive, k] for k, d in enumerate(stored.dimension_names)}
    out_nulls = {}
    for attribute in stored.attributes:
        source = public if attribute.name in public else state
        columns[attribute.name] = source[attribute.name][alive]
        mask = (
            public_nulls.get(attribute.name) if attribute.name in public else delta_nulls.get(attribute.name)
        )
        if mask is not None and mask[alive].any():
            out_nulls[attribute.name] = mask[alive]
    table = pa.table(
        {
            **{d: columns[d] for d in stored.dimension_names},
            **{
                a.name: pa.array(columns[a.name], type=layout.arrow_type_of(a), mask=out_nulls.get(a.name))
                for a in stored.attributes
            },
        },
        schema=layout.cell_schema(stored),
    )
    return cells_to_fragment_table(table, stored)
