"""Uncertain array schemas (paper 001, section 2.1): Gaussian positions per dimension, uncertain values.

An *uncertain array* holds tuples whose position along every dimension is a Gaussian N(mean, sigma)
in cell units (a position p lies in cell floor(p)); pairs of dimensions may be correlated (a
bivariate Gaussian). Value attributes are exact (any attribute type), Gaussian (mean and sigma) or
uniform (low and high). A tuple's *possible range* along a dimension is mean +- k * sigma rounded
out to whole cells (the smallest run of cells holding the interval), clipped to the dimension
range where copies are placed (not where two arrays' tuples are compared); ``k`` (``sigmas``) defaults to 3, which leaves a two-sided tail mass of erfc(k / sqrt 2)
(0.0027) outside the range.

Column conventions (what ``insert`` takes and ``to_pandas`` gives): per dimension ``x`` (the mean)
and ``x_sigma``; per correlated pair ``x_y_corr``; per value attribute ``v`` (exact), ``v`` and
``v_sigma`` (Gaussian) or ``v_low`` and ``v_high`` (uniform); the tuple id ``id`` (int64).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from arrayviews.model.errors import SchemaError
from arrayviews.model.schema import Dimension, check_identifier
from arrayviews.model.types import normalize_type

#: Kinds of value attributes.
EXACT, GAUSSIAN, UNIFORM = "exact", "gaussian", "uniform"
VALUE_KINDS = (EXACT, GAUSSIAN, UNIFORM)
#: Default k of the possible range mean +- k * sigma.
DEFAULT_SIGMAS = 3.0
#: Cells per chunk aimed at when an uncertain schema leaves the chunk length out (small chunks keep
#: reads of a query's expanded region close to the region itself).
DEFAULT_UNCERTAIN_CHUNK_VOLUME = 4096
ID = "id"
PROBABILITY = "probability"


def tail_mass(sigmas: float) -> float:
    """Probability mass of a Gaussian outside mean +- ``sigmas`` standard deviations (both tails)."""
    return math.erfc(sigmas / math.sqrt(2.0))


def default_uncertain_chunk_length(extent: int, ndim: int) -> int:
    per_dimension = max(1, round(DEFAULT_UNCERTAIN_CHUNK_VOLUME ** (1.0 / ndim)))
    return max(1, min(extent, per_dimension))


@dataclass(frozen=True)
class UncertainAttribute:
    """A value attribute: exact (``type``), Gaussian (mean, sigma) or uniform (low, high)."""

    name: str
    kind: str = EXACT
    type: str = "float64"
    nullable: bool = False

    def __post_init__(self) -> None:
        check_identifier(self.name, "attribute")
        if self.kind not in VALUE_KINDS:
            raise SchemaError(f"attribute {self.name}: kind must be one of {', '.join(VALUE_KINDS)}")
        if self.kind == EXACT:
            object.__setattr__(self, "type", normalize_type(self.type))
        else:
            if self.nullable:
                raise SchemaError(f"attribute {self.name}: {self.kind} attributes cannot be NULL")
            object.__setattr__(self, "type", "float64")

    @property
    def input_columns(self) -> tuple[str, ...]:
        """The columns ``insert`` takes for this attribute (and ``to_pandas`` gives back)."""
        if self.kind == GAUSSIAN:
            return (self.name, f"{self.name}_sigma")
        if self.kind == UNIFORM:
            return (f"{self.name}_low", f"{self.name}_high")
        return (self.name,)

    def to_text(self) -> str:
        if self.kind == EXACT:
            return f"{self.name}:{self.type}" + (" NULL" if self.nullable else "")
        return f"{self.name}:{self.kind}"


@dataclass(frozen=True)
class UncertainSchema:
    """Name, value attributes, dimensions (cell ranges and chunking) and correlated dimension pairs."""

    name: str
    attributes: tuple[UncertainAttribute, ...]
    dimensions: tuple[Dimension, ...]
    correlations: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        check_identifier(self.name, "array")
        object.__setattr__(self, "attributes", tuple(self.attributes))
        object.__setattr__(self, "dimensions", tuple(self.dimensions))
        object.__setattr__(self, "correlations", tuple(tuple(p) for p in self.correlations))
        if not self.dimensions:
            raise SchemaError(f"uncertain array {self.name}: needs at least one dimension")
        names = [d.name for d in self.dimensions]
        paired: set[str] = set()
        for first, second in self.correlations:
            if first == second:
                raise SchemaError(
                    f"uncertain array {self.name}: corr({first}, {second}) pairs a dimension with itself"
                )
            for name in (first, second):
                if name not in names:
                    raise SchemaError(
                        f"uncertain array {self.name}: corr({first}, {second}) names {name!r}, which is not "
                        f"a dimension; dimensions: {', '.join(names)}"
                    )
                if name in paired:
                    raise SchemaError(
                        f"uncertain array {self.name}: dimension {name} is in more than one correlated pair"
                    )
                paired.add(name)
        # Canonical order: pairs follow the dimension order.
        ordered = tuple(
            sorted(
                (tuple(sorted(p, key=names.index)) for p in self.correlations),
                key=lambda p: names.index(p[0]),
            )
        )
        object.__setattr__(self, "correlations", ordered)
        seen: dict[str, tuple[str, str]] = {}  # column names are case-insensitive, as an array's
        for column, owner in self._all_names():
            if column.lower() in seen:
                earlier, other = seen[column.lower()]
                spelled = "" if earlier == column else f" (as {earlier!r}; column names are case-insensitive)"
                raise SchemaError(
                    f"uncertain array {self.name}: column name {column!r} of {owner} clashes with "
                    f"{other}{spelled}; rename one of them"
                )
            seen[column.lower()] = (column, owner)

    def _all_names(self) -> list[tuple[str, str]]:
        """Every input and storage column name with what it belongs to (they must all differ)."""
        names = [(ID, "the tuple id"), ("role", "the storage role"), (PROBABILITY, "the result probability")]
        for d in self.dimensions:
            owner = f"dimension {d.name}"
            names += [(d.name, owner), (f"{d.name}_sigma", owner), (f"{d.name}_mean", owner)]
            names += [(f"{d.name}_first", owner), (f"{d.name}_last", owner)]
        for pair in self.correlations:
            names.append((self.correlation_column(pair), f"corr({pair[0]}, {pair[1]})"))
        for a in self.attributes:
            names += [(c, f"attribute {a.name}") for c in a.input_columns]
        return names

    # -- lookups ---------------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.dimensions)

    @property
    def dimension_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dimensions)

    @property
    def attribute_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    def dimension(self, name: str) -> Dimension:
        for d in self.dimensions:
            if d.name == name:
                return d
        raise SchemaError(
            f"uncertain array {self.name} has no dimension {name!r}; dimensions: {', '.join(self.dimension_names)}"
        )

    def attribute(self, name: str) -> UncertainAttribute:
        for a in self.attributes:
            if a.name == name:
                return a
        raise SchemaError(
            f"uncertain array {self.name} has no attribute {name!r}; attributes: "
            f"{', '.join(self.attribute_names) or '(none)'}"
        )

    @staticmethod
    def correlation_column(pair: tuple[str, str]) -> str:
        return f"{pair[0]}_{pair[1]}_corr"

    @property
    def pair_indices(self) -> np.ndarray:
        """(p, 2) dimension indices of the correlated pairs."""
        names = self.dimension_names
        return np.array(
            [[names.index(a), names.index(b)] for a, b in self.correlations], dtype=np.int64
        ).reshape(-1, 2)

    def input_columns(self) -> list[str]:
        """Every column ``insert`` takes, in output order (``id`` first)."""
        columns = [ID]
        for d in self.dimensions:
            columns += [d.name, f"{d.name}_sigma"]
        columns += [self.correlation_column(p) for p in self.correlations]
        for a in self.attributes:
            columns += list(a.input_columns)
        return columns

    def renamed(self, name: str) -> UncertainSchema:
        return UncertainSchema(name, self.attributes, self.dimensions, self.correlations)

    # -- text and JSON ---------------------------------------------------------------------------
    def to_text(self) -> str:
        """e.g. ``sky<mag:float64, flux:gaussian>[x=0:999:32; y=0:999:32; corr(x, y)]``."""
        attrs = ", ".join(a.to_text() for a in self.attributes)
        items = [d.to_text() for d in self.dimensions] + [f"corr({a}, {b})" for a, b in self.correlations]
        return f"{self.name}<{attrs}>[{'; '.join(items)}]"

    def __str__(self) -> str:
        return self.to_text()

    def to_json(self) -> str:
        return json.dumps(
            {
                "name": self.name,
                "attributes": [
                    {"name": a.name, "kind": a.kind, "type": a.type, "nullable": a.nullable}
                    for a in self.attributes
                ],
                "dimensions": [
                    {"name": d.name, "low": d.low, "high": d.high, "chunk_length": d.chunk_length}
                    for d in self.dimensions
                ],
                "correlations": [list(p) for p in self.correlations],
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> UncertainSchema:
        data = json.loads(text)
        return cls(
            data["name"],
            tuple(
                UncertainAttribute(a["name"], a["kind"], a["type"], a["nullable"]) for a in data["attributes"]
            ),
            tuple(Dimension(d["name"], d["low"], d["high"], d["chunk_length"]) for d in data["dimensions"]),
            tuple(tuple(p) for p in data["correlations"]),
        )


def possible_range(
    means: np.ndarray, sigmas: np.ndarray, k: float, low: int, high: int
) -> tuple[np.ndarray, np.ndarray]:
    """First and last cell (int64) of mean +- k * sigma rounded out to cells, clipped to [low, high]
    (the cells a tuple's copies may occupy). Means must lie in [low, high + 1)."""
    first, last = unclipped_possible_range(means, sigmas, k)
    return np.clip(first, low, high).astype(np.int64), np.clip(last, low, high).astype(np.int64)


def unclipped_possible_range(
    means: np.ndarray, sigmas: np.ndarray, k: float
) -> tuple[np.ndarray, np.ndarray]:
    """First and last cell (float64, possibly infinite) of mean +- k * sigma rounded out to cells,
    not clipped to the array's domain: a tuple's probability mass beyond its own array's domain can
    still meet another array's tuples (the structure join's Prop. 4.1 test reads these).

    The interval [m - k s, m + k s] is closed, so a bound falling exactly on a cell boundary c still
    includes cell c; a low bound that rounding alone put on c (the exact m - k s is below it) also
    includes c - 1.
    """
    means = np.asarray(means, dtype=np.float64)
    sigmas = np.asarray(sigmas, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        reach = k * sigmas
        bound = means - reach
        first = np.floor(bound)
        last = np.floor(means + reach)
        # m - k s rounded up onto a cell boundary c while the exact bound is below c (a tiny sigma at
        # a mean on the boundary: 2 - 1e-17 == 2.0): the cell below c belongs to the range too.
        below = (
            (bound == first)
            & (reach > 0)
            & (_rounding_error(means, -reach, bound) < _product_error(k, sigmas, reach))
        )
    return first - below, last


def _rounding_error(a: np.ndarray, b: np.ndarray, total: np.ndarray) -> np.ndarray:
    """a + b - fl(a + b), exactly (Knuth's TwoSum)."""
    virtual = total - a
    return (a - (total - virtual)) + (b - virtual)


def _product_error(k: float, sigmas: np.ndarray, product: np.ndarray) -> np.ndarray:
    """k * sigma - fl(k * sigma), exactly for products in the normal range (Dekker's TwoProduct)."""

    def split(x):
        scaled = 134217729.0 * x  # 2**27 + 1
        high = scaled - (scaled - x)
        return high, x - high

    kh, kl = split(np.float64(k))
    sh, sl = split(sigmas)
    return ((kh * sh - product) + kh * sl + kl * sh) + kl * sl
