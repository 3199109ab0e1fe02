"""What a similarity view stores per cell: the public aggregates plus the additive state that lets a
refresh add and subtract contributions (pair count, per-attribute valid counts and sums).

An aggregate over a LEFT attribute aggregates the same value once per pair, so its state is the
left cell's value itself (replaced, never added) with the pair count: sum = count * value,
avg = min = max = value. Adding and subtracting ``count * value`` instead would turn an infinite
value into NaN as soon as the count changes.

State attributes start with an underscore and are hidden from readers of the view.
"""

from __future__ import annotations

import numpy as np

from arrayviews.model.schema import ArraySchema, Attribute
from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate

PAIRS = "_n"


def _prefix(side: str) -> str:
    return "_l" if side == "left" else "_r"


def count_column(side: str, attribute: str) -> str:
    return f"{_prefix(side)}c_{attribute}"


def sum_column(side: str, attribute: str) -> str:
    return f"{_prefix(side)}s_{attribute}"


def value_column(attribute: str) -> str:
    """The left cell's own value of ``attribute`` (replaced by refreshes, never added)."""
    return f"_lv_{attribute}"


REPLACED_PREFIXES = ("_lv_",)
EXTREME_PREFIXES = ("_rmin", "_rmax")


def min_column(side: str, attribute: str) -> str:
    return f"{_prefix(side)}min_{attribute}"


def max_column(side: str, attribute: str) -> str:
    return f"{_prefix(side)}max_{attribute}"


def _inputs(definition: SimilarityViewDefinition) -> dict[tuple[str, str], set[str]]:
    inputs: dict[tuple[str, str], set[str]] = {}
    for aggregate in definition.aggregates:
        if aggregate.attribute is not None:
            inputs.setdefault((aggregate.side, aggregate.attribute), set()).add(aggregate.function)
    return inputs


def _type_of(aggregate: ViewAggregate, left: ArraySchema, right: ArraySchema) -> tuple[str, bool]:
    """Output type and nullability of one public aggregate."""
    if aggregate.attribute is None or aggregate.function == "count":
        return "int64", False
    source = (left if aggregate.side == "left" else right).attribute(aggregate.attribute)
    if aggregate.function == "avg":
        return "float64", True
    if aggregate.function == "sum":
        return ("float64" if source.type.startswith("float") else "int64"), True
    return source.type, True


def public_attributes(
    definition: SimilarityViewDefinition, left: ArraySchema, right: ArraySchema
) -> list[Attribute]:
    return [Attribute(a.alias, *_type_of(a, left, right)) for a in definition.aggregates]


def state_attributes(
    definition: SimilarityViewDefinition, left: ArraySchema, right: ArraySchema
) -> list[Attribute]:
    attributes = [Attribute(PAIRS, "int64", internal=True)]
    for (side, name), functions in _inputs(definition).items():
        source = (left if side == "left" else right).attribute(name)
        attributes.append(Attribute(count_column(side, name), "int64", internal=True))
        if side == "left":
            if functions - {"count"}:
                attributes.append(Attribute(value_column(name), source.type, nullable=True, internal=True))
            continue
        if functions & {"sum", "avg"}:
            attributes.append(
                Attribute(
                    sum_column(side, name),
                    "float64" if source.type.startswith("float") else "int64",
                    internal=True,
                )
            )
        if "min" in functions:
            attributes.append(Attribute(min_column(side, name), source.type, nullable=True, internal=True))
        if "max" in functions:
            attributes.append(Attribute(max_column(side, name), source.type, nullable=True, internal=True))
    return attributes


def stored_schema(
    name: str, definition: SimilarityViewDefinition, left: ArraySchema, right: ArraySchema, dimensions
) -> ArraySchema:
    """The schema of the view's table: public aggregates, then the hidden state."""
    return ArraySchema(
        name,
        tuple(public_attributes(definition, left, right) + state_attributes(definition, left, right)),
        tuple(dimensions),
    )


def finalize(
    definition: SimilarityViewDefinition, state: dict[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Public values (and null masks) from the state columns."""
    values, nulls = {}, {}
    for aggregate in definition.aggregates:
        alias = aggregate.alias
        if aggregate.attribute is None:
            values[alias] = state[PAIRS].astype(np.int64)
            continue
        side, name = aggregate.side, aggregate.attribute
        count = state[count_column(side, name)]
        empty = count <= 0
        if aggregate.function == "count":
            values[alias] = count.astype(np.int64)
            continue
        if side == "left":
            value = state[value_column(name)]
            if aggregate.function == "sum":
                kind = np.float64 if value.dtype.kind == "f" else np.int64
                with np.errstate(invalid="ignore", over="ignore"):
                    result = np.maximum(count, 0).astype(kind) * value.astype(kind)
            elif aggregate.function == "avg":
                result = value.astype(np.float64)
            else:
                result = value.copy()
        elif aggregate.function == "sum":
            result = state[sum_column(side, name)].copy()
        elif aggregate.function == "avg":
            with np.errstate(invalid="ignore", divide="ignore"):
                result = state[sum_column(side, name)] / np.maximum(count, 1)
        elif aggregate.function == "min":
            result = state[min_column(side, name)].copy()
        else:
            result = state[max_column(side, name)].copy()
        if empty.any():
            result[empty] = 0
            nulls[alias] = empty
        values[alias] = result
    return values, nulls
