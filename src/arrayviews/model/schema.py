"""Array schemas: named integer dimensions with regular chunking (and optional linear coordinate
scales), and typed attributes."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace

import numpy as np

from arrayviews.model.errors import SchemaError
from arrayviews.model.names import INTERNAL_PREFIX, check_identifier, check_internal_name, first_clash
from arrayviews.model.time_scale import TimeScale
from arrayviews.model.types import normalize_type

#: Upper bound used for a dimension declared open-ended (``i=0:*``).
UNBOUNDED_HIGH = 2**62 - 1
#: Largest allowed number of cells in one chunk; chunk-local offsets are int64.
MAX_CHUNK_VOLUME = 2**62
#: On an open-ended dimension with a scale, coordinates are guaranteed distinct this far from low.
UNBOUNDED_RESOLVED = 2**40
#: Cells per chunk aimed at when a schema leaves the chunk length out.
DEFAULT_CHUNK_VOLUME = 1_000_000


#: Characters a coordinate unit may not hold: the schema text quotes it with ' and ends at ']'.
_UNIT_FORBIDDEN = re.compile(r"['\[\]\x00-\x1f\x7f]|--|/\*")
#: Longest unit text accepted.
MAX_UNIT_LENGTH = 40


@dataclass(frozen=True)
class CoordinateScale:
    """A linear coordinate of a dimension: ``coordinate = offset + cell * step`` in float64.

    ``step`` is finite and not zero (negative for descending coordinates), ``offset`` finite;
    ``unit`` is free text such as ``deg`` ("" for none). Every coordinate arrayviews shows or reads is
    computed by :meth:`coordinates`, so the same cell always gets the same float.
    """

    step: float
    offset: float = 0.0
    unit: str = ""

    def __post_init__(self) -> None:
        for label in ("step", "offset"):
            value = getattr(self, label)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise SchemaError(f"coordinate {label} must be a number, got {value!r}")
            value = float(value)
            if not math.isfinite(value):
                raise SchemaError(f"coordinate {label} must be finite, got {value!r}")
            object.__setattr__(self, label, value + 0.0)  # -0.0 is 0.0
        if self.step == 0.0:
            raise SchemaError("coordinate step must not be zero")
        if not isinstance(self.unit, str):
            raise SchemaError(f"coordinate unit must be text, got {self.unit!r}")
        bad = _UNIT_FORBIDDEN.search(self.unit)
        if bad is not None:
            raise SchemaError(
                f"coordinate unit {self.unit!r} holds {bad.group()!r}; a unit may not hold quotes, "
                "brackets, control characters, '--' or '/*'"
            )
        if len(self.unit) > MAX_UNIT_LENGTH:
            raise SchemaError(f"coordinate unit {self.unit!r} is longer than {MAX_UNIT_LENGTH} characters")

    def coordinates(self, cells: np.ndarray | int) -> np.ndarray:
        """The float64 coordinates of integer ``cells``: ``offset + cells * step``."""
        return self.offset + np.asarray(cells, dtype=np.int64).astype(np.float64) * self.step

    def coordinate(self, cell: int) -> float:
        """The coordinate of one cell (the same float as :meth:`coordinates` gives)."""
        return float(self.coordinates(np.array([cell]))[0])

    def to_text(self) -> str:
        """``SCALE step [OFFSET offset] [UNIT 'unit']``, numbers in Python's shortest exact form."""
        text = f"SCALE {self.step!r}"
        if self.offset != 0.0:
            text += f" OFFSET {self.offset!r}"
        if self.unit:
            text += f" UNIT '{self.unit}'"
        return text

    def regridded(self, low: int, block: int) -> CoordinateScale:
        """The scale of a regrid by ``block`` cells from ``low``: output cell ``low + m`` is labelled
        with the coordinate of its block's first input cell ``low + m * block``, so the step is
        multiplied by ``block`` and the offset moves to keep ``low`` where it was."""
        if block == 1:
            return self
        step = self.step * block
        return CoordinateScale(step, self.coordinate(low) - low * step, self.unit)

    def to_json(self) -> dict:
        return {"step": self.step, "offset": self.offset, "unit": self.unit}

    @classmethod
    def from_json(cls, data: dict | None) -> CoordinateScale | TimeScale | None:
        if data is None:
            return None
        if data.get("kind") == "time":
            return TimeScale.from_json(data)
        return cls(float(data["step"]), float(data.get("offset", 0.0)), data.get("unit", ""))


@dataclass(frozen=True)
class Dimension:
    """One integer dimension: inclusive range ``[low, high]`` cut into chunks of ``chunk_length``.

    Chunk ``k`` covers ``[chunk_origin + k * chunk_length, chunk_origin + (k + 1) * chunk_length - 1]``
    intersected with the range. ``chunk_origin`` defaults to ``low``; a subarray keeps its input's
    origin so that its chunks line up with the input's and nothing needs rechunking.

    ``scale``, when given, labels cell ``c`` with the real coordinate ``offset + c * step``
    (a :class:`CoordinateScale`) or with the time ``origin + c * step`` (a :class:`TimeScale`) in
    to_xarray and sel; cells stay the integers every operator works in.
    """

    name: str
    low: int
    high: int
    chunk_length: int
    chunk_origin: int | None = None
    scale: CoordinateScale | TimeScale | None = None

    def __post_init__(self) -> None:
        check_identifier(self.name, "dimension")
        for label in ("low", "high", "chunk_length"):
            value = getattr(self, label)
            if isinstance(value, bool) or not isinstance(value, int):
                raise SchemaError(f"dimension {self.name}: {label} must be an integer, got {value!r}")
        if self.low > self.high:
            raise SchemaError(f"dimension {self.name}: low {self.low} is greater than high {self.high}")
        if self.chunk_length < 1:
            raise SchemaError(
                f"dimension {self.name}: chunk length must be at least 1, got {self.chunk_length}"
            )
        if abs(self.low) > UNBOUNDED_HIGH or abs(self.high) > UNBOUNDED_HIGH:
            raise SchemaError(f"dimension {self.name}: bounds must lie within +-{UNBOUNDED_HIGH}")
        if self.chunk_origin is None:
            object.__setattr__(self, "chunk_origin", self.low)
        elif self.chunk_origin > self.low:
            raise SchemaError(
                f"dimension {self.name}: chunk origin {self.chunk_origin} is after low {self.low}"
            )
        if isinstance(self.scale, TimeScale):
            self._check_time_scale()
        elif self.scale is not None:
            if not isinstance(self.scale, CoordinateScale):
                raise SchemaError(
                    f"dimension {self.name}: scale must be a CoordinateScale or TimeScale, got {self.scale!r}"
                )
            with np.errstate(over="ignore", invalid="ignore"):
                ends = self.scale.coordinates(np.array([self.low, self.high]))
            if not np.all(np.isfinite(ends)):
                raise SchemaError(
                    f"dimension {self.name}: coordinates {self.scale.offset!r} + cell * {self.scale.step!r} "
                    f"overflow float64 within {self.low}:{self.high}"
                )
            # Neighbouring coordinates must stay distinct and ordered once rounded: each is within one
            # unit in the last place of the largest magnitude met while computing it.
            high = min(self.high, self.low + UNBOUNDED_RESOLVED) if self.unbounded else self.high
            biggest = abs(self.scale.offset) + max(abs(self.low), abs(high)) * abs(self.scale.step)
            if abs(self.scale.step) < 4 * float(np.spacing(biggest)):
                raise SchemaError(
                    f"dimension {self.name}: the step {self.scale.step!r} is too fine for float64 at "
                    f"coordinates near {biggest:.6g} (neighbouring cells would get the same coordinate)"
                )

    def _check_time_scale(self) -> None:
        """Every cell of a bounded dimension, and the first of an open-ended one, has a time label."""
        ends = [self.low] if self.unbounded else [self.low, self.high]
        try:
            self.scale.coordinates(np.array(ends))
        except SchemaError as error:
            raise SchemaError(f"dimension {self.name}: {error}") from None

    @property
    def extent(self) -> int:
        """Number of index values in the range."""
        return self.high - self.low + 1

    @property
    def unbounded(self) -> bool:
        """True if the dimension was declared with ``*`` as its upper bound."""
        return self.high == UNBOUNDED_HIGH

    def to_text(self) -> str:
        high = "*" if self.unbounded else str(self.high)
        text = f"{self.name}={self.low}:{high}:{self.chunk_length}"
        return text if self.scale is None else f"{text} {self.scale.to_text()}"

    def with_scale(self, scale: CoordinateScale | TimeScale | None) -> Dimension:
        return replace(self, scale=scale)


@dataclass(frozen=True)
class Attribute:
    """One typed value attribute; ``nullable`` attributes may hold nulls in non-empty cells.

    ``internal`` attributes are arrayviews' own (view maintenance state): their names start with the
    internal prefix (see model/names.py), which user names may not, so the two never collide.
    """

    name: str
    type: str
    nullable: bool = False
    internal: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if self.internal:
            check_internal_name(self.name, "attribute")
        else:
            check_identifier(self.name, "attribute")
        object.__setattr__(self, "type", normalize_type(self.type))

    def to_text(self) -> str:
        return f"{self.name}:{self.type}" + (" NULL" if self.nullable else "")

    @property
    def null_hint(self) -> str:
        """What to do about a null given for this (not nullable) attribute."""
        return f"attribute {self.name} is not nullable; declare it as {self.name}:{self.type} NULL to allow nulls"


@dataclass(frozen=True)
class ArraySchema:
    """The schema of an array: its name, attributes and dimensions (in storage order)."""

    name: str
    attributes: tuple[Attribute, ...]
    dimensions: tuple[Dimension, ...]
    _index: dict = field(default=None, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        check_identifier(self.name, "array")
        object.__setattr__(self, "attributes", tuple(self.attributes))
        object.__setattr__(self, "dimensions", tuple(self.dimensions))
        if not self.dimensions:
            raise SchemaError(f"array {self.name}: needs at least one dimension")
        clash = first_clash([item.name for item in (*self.dimensions, *self.attributes)])
        if clash is not None:
            raise SchemaError(f"array {self.name}: {_clash_text(*clash)}")
        volume = math.prod(d.chunk_length for d in self.dimensions)
        if volume > MAX_CHUNK_VOLUME:
            raise SchemaError(
                f"array {self.name}: a chunk would hold {volume} cells, more than {MAX_CHUNK_VOLUME}"
            )
        index = {d.name: ("dimension", i) for i, d in enumerate(self.dimensions)}
        index.update({a.name: ("attribute", i) for i, a in enumerate(self.attributes)})
        object.__setattr__(self, "_index", index)

    # -- lookups -------------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.dimensions)

    @property
    def dimension_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dimensions)

    @property
    def attribute_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def shape(self) -> tuple[int, ...]:
        """The extent of every dimension."""
        return tuple(d.extent for d in self.dimensions)

    @property
    def chunk_shape(self) -> tuple[int, ...]:
        return tuple(d.chunk_length for d in self.dimensions)

    def dimension(self, name: str) -> Dimension:
        kind = self._index.get(name)
        if kind is None or kind[0] != "dimension":
            raise SchemaError(
                f"array {self.name} has no dimension {name!r}; dimensions: {', '.join(self.dimension_names)}"
            )
        return self.dimensions[kind[1]]

    def attribute(self, name: str) -> Attribute:
        kind = self._index.get(name)
        if kind is None or kind[0] != "attribute":
            raise SchemaError(
                f"array {self.name} has no attribute {name!r}; attributes: {', '.join(self.attribute_names) or '(none)'}"
            )
        return self.attributes[kind[1]]

    def has_dimension(self, name: str) -> bool:
        return self._index.get(name, ("", 0))[0] == "dimension"

    def has_attribute(self, name: str) -> bool:
        return self._index.get(name, ("", 0))[0] == "attribute"

    def spelling(self, name: str) -> str:
        """The schema's own spelling of column ``name`` given in any letter case (column names are
        case-insensitive), or ``name`` itself when the schema has no such column."""
        if name in self._index:
            return name
        folded = name.lower()
        return next((column for column in self._index if column.lower() == folded), name)

    # -- derived schemas -----------------------------------------------------------------------
    def renamed(self, name: str) -> ArraySchema:
        return replace(self, name=name)

    def with_attributes(self, attributes: tuple[Attribute, ...] | list[Attribute]) -> ArraySchema:
        return ArraySchema(self.name, tuple(attributes), self.dimensions)

    def with_dimensions(self, dimensions: tuple[Dimension, ...] | list[Dimension]) -> ArraySchema:
        return ArraySchema(self.name, self.attributes, tuple(dimensions))

    def same_grid(self, other: ArraySchema) -> bool:
        """True if both schemas have the same dimension names, chunk lengths and chunk origins."""
        return [(d.name, d.chunk_length, d.chunk_origin) for d in self.dimensions] == [
            (d.name, d.chunk_length, d.chunk_origin) for d in other.dimensions
        ]

    # -- text and JSON forms -------------------------------------------------------------------
    def to_text(self) -> str:
        """SciDB-style text, e.g. ``A<r:int64, s:float64>[i=1:6:2; j=1:8:2]``."""
        attrs = ", ".join(a.to_text() for a in self.attributes)
        dims = "; ".join(d.to_text() for d in self.dimensions)
        return f"{self.name}<{attrs}>[{dims}]"

    def __str__(self) -> str:
        return self.to_text()

    def to_json(self) -> str:
        return json.dumps(
            {
                "name": self.name,
                "attributes": [
                    {"name": a.name, "type": a.type, "nullable": a.nullable}
                    | ({"internal": True} if a.internal else {})
                    for a in self.attributes
                ],
                "dimensions": [
                    {
                        "name": d.name,
                        "low": d.low,
                        "high": d.high,
                        "chunk_length": d.chunk_length,
                        "chunk_origin": d.chunk_origin,
                    }
                    | ({"scale": d.scale.to_json()} if d.scale is not None else {})
                    for d in self.dimensions
                ],
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> ArraySchema:
        data = json.loads(text)
        return cls(
            data["name"],
            tuple(
                Attribute(
                    a["name"],
                    a["type"],
                    a.get("nullable", False),
                    # schemas stored before the flag existed: their internal names have the prefix
                    a.get("internal", a["name"].startswith(INTERNAL_PREFIX)),
                )
                for a in data["attributes"]
            ),
            tuple(
                Dimension(
                    d["name"],
                    d["low"],
                    d["high"],
                    d["chunk_length"],
                    d.get("chunk_origin"),
                    CoordinateScale.from_json(d.get("scale")),  # schemas stored before scales: none
                )
                for d in data["dimensions"]
            ),
        )


def _clash_text(first: str, second: str) -> str:
    if first == second:
        return f"name {first!r} is used twice"
    return f"names {first!r} and {second!r} differ only in case (column names are case-insensitive)"


def default_chunk_length(extent: int, ndim: int) -> int:
    """Chunk length used when a schema leaves it out: about ``DEFAULT_CHUNK_VOLUME`` cells per chunk."""
    per_dimension = max(1, round(DEFAULT_CHUNK_VOLUME ** (1.0 / ndim)))
    return max(1, min(extent, per_dimension))
