"""What a similarity view stores per cell: the public aggregates plus the additive state that lets a
refresh add and subtract contributions (pair count, per-attribute valid counts, exact sums, extremes).

Sums are exact (kernels/exact_sum.py). A float sum over the right side is kept as ``K`` float64
components (the first is the correctly rounded sum) and three counts of +inf, -inf and NaN values;
an integer sum as a 128-bit integer in two int64 columns (the low word, which is the sum itself
wherever it fits int64, and the high word), so that intermediate states may leave int64 under add
and subtract; a public sum that does not fit int64 raises :class:`~arrayviews.model.errors.RangeError`.

An aggregate over a LEFT attribute aggregates the same value once per pair, so its state is the
left cell's value itself (replaced, never added) with the pair count: sum = count * value (checked
against int64 overflow, and float64 overflow of a finite value), avg = min = max = value.

State attributes start with an underscore and are hidden from readers of the view. Every name and
type of the state is made here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arrayviews.kernels.exact_divide import int_quotient, wide_quotient
from arrayviews.kernels.exact_sum import NONFINITE, FloatSums, IntSums, K
from arrayviews.model.errors import RangeError, ValidationError
from arrayviews.model.schema import ArraySchema, Attribute
from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate

PAIRS = "_n"
REPLACED_PREFIXES = ("_lv_",)
EXTREME_PREFIXES = ("_rmin", "_rmax")
SUM_PREFIX = "_rs"


def _prefix(side: str) -> str:
    return "_l" if side == "left" else "_r"


def count_column(side: str, attribute: str) -> str:
    return f"{_prefix(side)}c_{attribute}"


def value_column(attribute: str) -> str:
    """The left cell's own value of ``attribute`` (replaced by refreshes, never added)."""
    return f"_lv_{attribute}"


def min_column(side: str, attribute: str) -> str:
    return f"{_prefix(side)}min_{attribute}"


def max_column(side: str, attribute: str) -> str:
    return f"{_prefix(side)}max_{attribute}"


@dataclass(frozen=True)
class FloatSumState:
    """The columns of one exact float sum: ``parts`` (K float64, the rounded sum first) and
    ``nonfinite`` (int64 counts of +inf, -inf and NaN values)."""

    attribute: str
    parts: tuple[str, ...]
    nonfinite: tuple[str, ...]

    @classmethod
    def of(cls, attribute: str) -> FloatSumState:
        parts = tuple(f"{SUM_PREFIX}{'' if k == 0 else k}_{attribute}" for k in range(K))
        nonfinite = tuple(f"{SUM_PREFIX}{kind}_{attribute}" for kind in ("pinf", "ninf", "nan"))
        return cls(attribute, parts, nonfinite)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.parts + self.nonfinite

    def attributes(self) -> list[Attribute]:
        return [Attribute(c, "float64", internal=True) for c in self.parts] + [
            Attribute(c, "int64", internal=True) for c in self.nonfinite
        ]

    def read(self, columns: dict[str, np.ndarray]) -> FloatSums:
        return FloatSums(
            np.stack([np.asarray(columns[c], np.float64) for c in self.parts], axis=1).reshape(-1, K),
            np.stack([np.asarray(columns[c], np.int64) for c in self.nonfinite], axis=1).reshape(
                -1, NONFINITE
            ),
        )

    def write(self, sums: FloatSums, columns: dict[str, np.ndarray]) -> None:
        for k, name in enumerate(self.parts):
            columns[name] = np.ascontiguousarray(sums.parts[:, k])
        for k, name in enumerate(self.nonfinite):
            columns[name] = np.ascontiguousarray(sums.nonfinite[:, k])

    def empty(self, n: int) -> FloatSums:
        return FloatSums.zeros(n)


@dataclass(frozen=True)
class IntSumState:
    """The columns of one exact integer sum: the low word (int64 bits; the sum where it fits int64)
    and the high word of a 128-bit integer."""

    attribute: str
    low: str
    high: str

    @classmethod
    def of(cls, attribute: str) -> IntSumState:
        return cls(attribute, f"{SUM_PREFIX}_{attribute}", f"{SUM_PREFIX}hi_{attribute}")

    @property
    def columns(self) -> tuple[str, ...]:
        return (self.low, self.high)

    def attributes(self) -> list[Attribute]:
        return [Attribute(self.low, "int64", internal=True), Attribute(self.high, "int64", internal=True)]

    def read(self, columns: dict[str, np.ndarray]) -> IntSums:
        return IntSums.from_words(columns[self.high], columns[self.low])

    def write(self, sums: IntSums, columns: dict[str, np.ndarray]) -> None:
        columns[self.low] = sums.low_bits.copy()
        columns[self.high] = sums.high.copy()

    def empty(self, n: int) -> IntSums:
        return IntSums.zeros(n)


SumState = FloatSumState | IntSumState


def sum_state(attribute: str, value_type: str) -> SumState:
    """The state of a right-side sum over an attribute of ``value_type``."""
    return FloatSumState.of(attribute) if value_type.startswith("float") else IntSumState.of(attribute)


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
            attributes += sum_state(name, source.type).attributes()
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


@dataclass(frozen=True)
class Layout:
    """How a stored view's state columns combine: ``counts`` add as int64, ``sums`` add exactly,
    ``extremes`` (right min/max) combine by min/max, ``replaced`` (left values) are replaced."""

    counts: tuple[str, ...]
    sums: tuple[SumState, ...]
    extremes: tuple[str, ...]
    replaced: tuple[str, ...]

    @property
    def sum_columns(self) -> set[str]:
        return {c for s in self.sums for c in s.columns}


def layout(definition: SimilarityViewDefinition, stored: ArraySchema) -> Layout:
    """The state layout of a stored view (its sums typed by the stored columns)."""
    names = [a.name for a in stored.attributes if a.internal]
    sums = []
    for (side, name), functions in _inputs(definition).items():
        if side == "right" and functions & {"sum", "avg"}:
            sums.append(sum_state(name, stored.attribute(f"{SUM_PREFIX}_{name}").type))
    summed = {c for s in sums for c in s.columns}
    return Layout(
        counts=tuple(n for n in names if n == PAIRS or n.startswith(("_lc_", "_rc_"))),
        sums=tuple(sums),
        extremes=tuple(n for n in names if n.startswith(EXTREME_PREFIXES) and n not in summed),
        replaced=tuple(n for n in names if n.startswith(REPLACED_PREFIXES)),
    )


def check_layout(definition: SimilarityViewDefinition, stored: ArraySchema, expected: ArraySchema) -> None:
    """Raise a clear ValidationError when a stored view keeps its state in another layout than this
    version computes (a view created by an older version: its sums were not exact)."""
    have = [a.name for a in stored.attributes if a.internal]
    want = [a.name for a in expected.attributes if a.internal]
    if have != want:
        raise ValidationError(
            f"view {stored.name} keeps its state in an older layout (state columns {', '.join(have)}; "
            f"this version keeps {', '.join(want)}): drop the view and create it again",
            array=stored.name,
        )


def _cell_text(dimensions: tuple[str, ...], coords: np.ndarray | None, index: int) -> str:
    if coords is None:
        return f"row {index}"
    return "(" + ", ".join(f"{d}={int(c)}" for d, c in zip(dimensions, coords[index], strict=True)) + ")"


def finalize(
    definition: SimilarityViewDefinition,
    state: dict[str, np.ndarray],
    stored: ArraySchema,
    coords: np.ndarray | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Public values (and null masks) from the state columns of the cells at ``coords`` (used to name a
    cell whose sum does not fit its type)."""
    values, nulls = {}, {}
    sums = {s.attribute: s for s in layout(definition, stored).sums}

    # a query from the base arrays computes in a schema named after its left array (a view never is)
    subject = (
        f"similarity join of {definition.left} and {definition.right}"
        if stored.name.lower() == definition.left.lower()
        else f"view {stored.name}"
    )

    def overflow(aggregate: ViewAggregate, index: int, value) -> RangeError:
        return RangeError(
            f"{subject}: {aggregate.function}({aggregate.side}.{aggregate.attribute}) "
            f"({aggregate.alias}) at cell {_cell_text(stored.dimension_names, coords, index)} is {value}, "
            f"which does not fit {'int64' if isinstance(value, int) else 'float64'}",
            array=stored.name,
            column=aggregate.alias,
            value=value,
        )

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
                result = _left_sum(np.maximum(count, 0), value, empty)
                if isinstance(result, tuple):
                    raise overflow(aggregate, *result)
            elif aggregate.function == "avg":
                result = value.astype(np.float64)
            else:
                result = value.copy()
        elif aggregate.function in ("sum", "avg"):
            exact = sums[name].read(state)
            if isinstance(exact, IntSums):
                if aggregate.function == "sum":
                    bad = np.flatnonzero(~exact.fits() & ~empty)
                    if len(bad):
                        raise overflow(aggregate, int(bad[0]), exact.to_python(int(bad[0])))
                    result = exact.values()
                else:
                    result = _int_average(exact, count)
            else:
                result = exact.values()
                if aggregate.function == "avg":
                    with np.errstate(invalid="ignore", divide="ignore"):
                        result = result / np.maximum(count, 1)
        elif aggregate.function == "min":
            result = state[min_column(side, name)].copy()
        else:
            result = state[max_column(side, name)].copy()
        if empty.any():
            result[empty] = 0
            nulls[alias] = empty
        values[alias] = result
    return values, nulls


def _left_sum(count: np.ndarray, value: np.ndarray, empty: np.ndarray):
    """``count * value`` per cell, or (index, exact value) of the first cell where it does not fit."""
    if value.dtype.kind == "f":
        with np.errstate(invalid="ignore", over="ignore"):
            result = count.astype(np.float64) * value.astype(np.float64)
        bad = np.flatnonzero(np.isinf(result) & np.isfinite(value) & ~empty)
        if len(bad):
            index = int(bad[0])
            return index, f"{int(count[index])} * {float(value[index])!r}"
        return result
    top = np.iinfo(np.int64).max
    safe = np.maximum(count, 1)
    if value.dtype == np.uint64:  # compared as unsigned: a value above int64's top never fits
        bad = np.flatnonzero((value > (top // safe).astype(np.uint64)) & ~empty)
        if len(bad):
            index = int(bad[0])
            return index, int(count[index]) * int(value[index])
    value = value.astype(np.int64)
    # count * value fits int64 iff -(top + 1) <= count * value <= top
    high = top // safe
    low = -(top // safe) - (top % safe == safe - 1)
    bad = np.flatnonzero(((value > high) | (value < low)) & ~empty)
    if len(bad):
        index = int(bad[0])
        return index, int(count[index]) * int(value[index])
    with np.errstate(over="ignore"):
        return count.astype(np.int64) * value


def _int_average(exact: IntSums, count: np.ndarray) -> np.ndarray:
    """``sum / count`` as the float64 nearest the exact quotient (kernels/exact_divide.py)."""
    safe = np.maximum(count, 1)
    fits = exact.fits()
    result = np.empty(len(count), np.float64)
    result[fits] = int_quotient(exact.values()[fits], safe[fits])
    wide = ~fits
    if wide.any():
        result[wide] = wide_quotient(exact.high[wide], exact.low[wide], safe[wide])
    return result
