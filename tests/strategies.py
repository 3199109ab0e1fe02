"""Hypothesis strategies for small random arrays, and numpy/pandas references computed from the same cells.

An :class:`ArrayCase` is a schema (1-3 dimensions with random low bounds, extents and chunk lengths;
1-3 attributes of random types) plus the cells to write into it (:class:`Cells`), and how to write
them (``write_dense`` of the bounding box, or ``insert`` in one or two batches). Every reference in
this module is computed from the :class:`Cells` alone, never from arrayviews output.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
from hypothesis import strategies as st

DIM_NAMES = ("i", "j", "k")
ATTR_NAMES = ("v", "w", "x")
TYPES = ("int32", "int64", "float32", "float64", "bool")
NUMERIC_TYPES = ("int32", "int64", "float32", "float64")
NUMPY = {
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "bool": np.dtype(np.bool_),
}
ARROW = {
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
}
#: Probability that a cell is present, per density label ("empty" holds no cell at all).
DENSITIES = {"empty": 0.0, "very_sparse": 0.04, "sparse": 0.2, "half": 0.5, "full": 1.0}
#: Largest number of cells (volume of the whole range) of a generated array, by dimension count.
MAX_EXTENT = {1: 30, 2: 11, 3: 6}


# -- schema pieces ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dim:
    name: str
    low: int
    high: int
    chunk: int

    @property
    def extent(self) -> int:
        return self.high - self.low + 1

    def text(self) -> str:
        return f"{self.name}={self.low}:{self.high}:{self.chunk}"


@dataclass(frozen=True)
class Attr:
    name: str
    type: str
    nullable: bool = False

    def text(self) -> str:
        return f"{self.name}:{self.type}" + (" NULL" if self.nullable else "")


def schema_text(name: str, dims: Sequence[Dim], attrs: Sequence[Attr]) -> str:
    return f"{name}<{', '.join(a.text() for a in attrs)}>[{'; '.join(d.text() for d in dims)}]"


# -- reference cells ----------------------------------------------------------------------------


@dataclass
class Cells:
    """Reference cells: coordinates (n, d) in row-major order, values and null masks per attribute.

    ``values[a]`` has the attribute's numpy dtype and holds 0 (False) where ``nulls[a]`` is set;
    ``nulls`` has an entry (possibly all False) for every attribute.
    """

    dims: tuple[Dim, ...]
    attrs: tuple[Attr, ...]
    coords: np.ndarray
    values: dict[str, np.ndarray]
    nulls: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.coords = np.asarray(self.coords, dtype=np.int64).reshape(-1, len(self.dims))
        for attr in self.attrs:
            self.values[attr.name] = np.asarray(self.values[attr.name], dtype=NUMPY[attr.type])
            null = self.nulls.get(attr.name)
            self.nulls[attr.name] = (
                np.zeros(self.n, dtype=bool) if null is None else np.asarray(null, dtype=bool)
            )

    # -- shape ----------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return len(self.coords)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.extent for d in self.dims)

    @property
    def lows(self) -> np.ndarray:
        return np.array([d.low for d in self.dims], dtype=np.int64)

    @property
    def dim_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dims)

    @property
    def attr_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attrs)

    def attr(self, name: str) -> Attr:
        return next(a for a in self.attrs if a.name == name)

    def schema_text(self, name: str) -> str:
        return schema_text(name, self.dims, self.attrs)

    def column(self, name: str) -> np.ndarray:
        """Coordinates of a dimension or values of an attribute."""
        if name in self.dim_names:
            return self.coords[:, self.dim_names.index(name)]
        return self.values[name]

    # -- derived cell sets ----------------------------------------------------------------------
    def take(self, rows: np.ndarray, dims: Sequence[Dim] | None = None) -> Cells:
        """The cells at ``rows`` (a bool mask or indices), optionally under narrowed dimensions."""
        return Cells(
            tuple(dims) if dims is not None else self.dims,
            self.attrs,
            self.coords[rows],
            {a: v[rows] for a, v in self.values.items()},
            {a: m[rows] for a, m in self.nulls.items()},
        )

    def sorted(self) -> Cells:
        order = np.lexsort(self.coords.T[::-1]) if self.n else np.arange(0)
        return self.take(order)

    @classmethod
    def from_arrow(cls, table: pa.Table, dims: Sequence[Dim]) -> Cells:
        """Cells of a reference cell table (dimension columns named as ``dims``, then attributes)."""
        names = [d.name for d in dims]
        coords = np.stack([table.column(d).to_numpy() for d in names], axis=1) if table.num_rows else None
        attrs, values, nulls = [], {}, {}
        by_arrow = {str(t): name for name, t in ARROW.items()}
        for name in table.column_names:
            if name in names:
                continue
            column = table.column(name).combine_chunks()
            attrs.append(Attr(name, by_arrow[str(column.type)], nullable=column.null_count > 0))
            filled = column.fill_null(False if pa.types.is_boolean(column.type) else 0)
            values[name] = np.asarray(filled)
            nulls[name] = np.asarray(column.is_null(), dtype=bool)
        if coords is None:
            coords = np.zeros((0, len(dims)), dtype=np.int64)
        return cls(tuple(dims), tuple(attrs), coords, values, nulls)

    # -- reads ----------------------------------------------------------------------------------
    def arrow(self) -> pa.Table:
        """Cells as an Arrow table sorted row-major: dimensions (int64), then attributes with nulls."""
        cells = self.sorted()
        columns = {d: pa.array(cells.coords[:, k], pa.int64()) for k, d in enumerate(self.dim_names)}
        for attr in self.attrs:
            mask = cells.nulls[attr.name]
            columns[attr.name] = pa.array(
                cells.values[attr.name], ARROW[attr.type], mask=mask if mask.any() else None
            )
        return pa.table(columns, schema=pa.schema([(n, c.type) for n, c in columns.items()]))

    def present(self) -> np.ndarray:
        """Dense bool mask of the non-empty cells over the whole range."""
        mask = np.zeros(self.shape, dtype=bool)
        mask[tuple((self.coords - self.lows).T)] = True
        return mask

    def dense(self, attr: str, fill: object) -> tuple[np.ndarray, np.ndarray]:
        """Dense values of ``attr`` (``fill`` where empty or null) and the mask of empty or null cells."""
        out = np.full(self.shape, fill, dtype=np.result_type(NUMPY[self.attr(attr).type], fill))
        valid = ~self.nulls[attr]
        index = tuple((self.coords[valid] - self.lows).T)
        out[index] = self.values[attr][valid]
        missing = np.ones(self.shape, dtype=bool)
        missing[index] = False
        return out, missing


# -- writing a case -----------------------------------------------------------------------------


@dataclass
class ArrayCase:
    cells: Cells
    write: str  # "dense" (write_dense of the bounding box) or "insert"
    batches: int = 1  # insert: number of batches (each one version)
    seed: int = 0

    def __repr__(self) -> str:  # short, for hypothesis' falsifying-example reports
        c = self.cells
        return (
            f"ArrayCase({c.schema_text('A')}, write={self.write}, batches={self.batches}, n={c.n}, "
            f"seed={self.seed})"
        )


def write_case(db, name: str, case: ArrayCase):
    """Create array ``name`` and write the case's cells into it; returns the Array."""
    cells = case.cells
    array = db.create_array(cells.schema_text(name))
    if case.write == "dense":
        if cells.n == 0:
            return array
        origin = cells.coords.min(axis=0)
        top = cells.coords.max(axis=0)
        shape = tuple(int(s) for s in top - origin + 1)
        mask = np.ones(shape, dtype=bool)
        index = tuple((cells.coords - origin).T)
        mask[index] = False
        data = {}
        for attr in cells.attrs:
            block = np.zeros(shape, dtype=NUMPY[attr.type])
            block[index] = cells.values[attr.name]
            data[attr.name] = np.ma.MaskedArray(block, mask=mask)
        array.write_dense(data, origin=[int(o) for o in origin])
        return array
    for rows in insert_batches(case):
        subset = cells.take(rows)
        columns = {d: subset.coords[:, k] for k, d in enumerate(cells.dim_names)}
        for attr in cells.attrs:
            mask = subset.nulls[attr.name]
            columns[attr.name] = pa.array(
                subset.values[attr.name], ARROW[attr.type], mask=mask if mask.any() else None
            )
        array.insert(pa.table(columns))
    return array


def insert_batches(case: ArrayCase) -> list[np.ndarray]:
    """Row masks of the non-empty insert batches of a case, in writing order."""
    n = case.cells.n
    rng = np.random.default_rng(case.seed)
    part = rng.integers(0, case.batches, size=n) if case.batches > 1 else np.zeros(n, int)
    return [part == b for b in range(case.batches) if (part == b).any()]


def written_versions(case: ArrayCase) -> np.ndarray:
    """The version that wrote each cell (write_dense: 1; insert: the number of its batch)."""
    versions = np.ones(case.cells.n, dtype=np.int64)
    if case.write == "insert":
        for number, rows in enumerate(insert_batches(case), start=1):
            versions[rows] = number
    return versions


# -- strategies ---------------------------------------------------------------------------------


@st.composite
def dims_strategy(draw, min_ndim: int = 1, max_ndim: int = 3) -> tuple[Dim, ...]:
    ndim = draw(st.integers(min_ndim, max_ndim))
    dims = []
    for name in DIM_NAMES[:ndim]:
        low = draw(st.integers(-20, 20))
        extent = draw(st.integers(1, MAX_EXTENT[ndim]))
        chunk = draw(st.integers(1, extent + 2))
        dims.append(Dim(name, low, low + extent - 1, chunk))
    return tuple(dims)


@st.composite
def attrs_strategy(
    draw, types: Sequence[str] = TYPES, min_attrs: int = 1, max_attrs: int = 3, nullable: bool = True
) -> tuple[Attr, ...]:
    count = draw(st.integers(min_attrs, max_attrs))
    return tuple(
        Attr(name, draw(st.sampled_from(list(types))), draw(st.booleans()) if nullable else False)
        for name in ATTR_NAMES[:count]
    )


def random_values(rng: np.random.Generator, type_name: str, n: int, nan: bool) -> np.ndarray:
    """Small values: exact sums for integers; float32 values are multiples of 1/4; some NaN in floats."""
    if type_name == "int32":
        return rng.integers(-50, 51, size=n).astype(np.int32)
    if type_name == "int64":
        return rng.integers(-(10**6), 10**6 + 1, size=n).astype(np.int64)
    if type_name == "float32":
        values = (rng.integers(-80, 81, size=n) / 4).astype(np.float32)
        if nan:
            values[rng.random(n) < 0.05] = np.nan
        return values
    if type_name == "float64":
        values = np.round(rng.normal(0.0, 10.0, size=n), 3)
        if nan:
            values[rng.random(n) < 0.08] = np.nan
        return values
    return rng.random(n) < 0.5


def chunk_numbers(coords: np.ndarray, dims: Sequence[Dim]) -> np.ndarray:
    """Chunk number of every cell per dimension: floor((x - low) / chunk_length)."""
    lows = np.array([d.low for d in dims], dtype=np.int64)
    lengths = np.array([d.chunk for d in dims], dtype=np.int64)
    return np.floor_divide(coords.reshape(-1, len(dims)) - lows, lengths)


def all_coords(dims: Sequence[Dim]) -> np.ndarray:
    """Every cell of the range, row-major."""
    grids = np.indices(tuple(d.extent for d in dims)).reshape(len(dims), -1).T
    return grids + np.array([d.low for d in dims], dtype=np.int64)


def make_cells(
    dims: Sequence[Dim],
    attrs: Sequence[Attr],
    seed: int,
    density: float,
    empty_chunks: bool = False,
    nan: bool = True,
    nulls: bool = True,
) -> Cells:
    """Random cells: each cell present with probability ``density`` (at least one unless 0), some
    whole chunks left empty if ``empty_chunks``, nulls (~15%) in nullable attributes if ``nulls``."""
    rng = np.random.default_rng(seed)
    coords = all_coords(dims)
    keep = rng.random(len(coords)) < density
    if density > 0 and not keep.any():
        keep[rng.integers(len(coords))] = True
    if empty_chunks:
        chunks = chunk_numbers(coords, dims)
        distinct = np.unique(chunks, axis=0)
        if len(distinct) > 1:
            blank = distinct[rng.random(len(distinct)) < 0.5]
            if len(blank) == 0:
                blank = distinct[:1]
            if len(blank) == len(distinct):
                blank = blank[1:]
            hit = (chunks[:, None, :] == blank[None, :, :]).all(axis=2).any(axis=1)
            keep &= ~hit
    coords = coords[keep]
    n = len(coords)
    values, null_masks = {}, {}
    for attr in attrs:
        values[attr.name] = random_values(rng, attr.type, n, nan)
        if attr.nullable and nulls:
            mask = rng.random(n) < 0.15
            values[attr.name][mask] = 0
            null_masks[attr.name] = mask
    return Cells(tuple(dims), tuple(attrs), coords, values, null_masks)


@st.composite
def array_cases(
    draw,
    min_ndim: int = 1,
    max_ndim: int = 3,
    types: Sequence[str] = TYPES,
    min_attrs: int = 1,
    max_attrs: int = 3,
    nullable: bool = True,
    nan: bool = True,
    writes: Sequence[str] = ("dense", "insert"),
    densities: Sequence[str] = tuple(DENSITIES),
) -> ArrayCase:
    """A random schema and random cells to write into it (see the module docstring)."""
    dims = draw(dims_strategy(min_ndim, max_ndim))
    attrs = draw(attrs_strategy(types, min_attrs, max_attrs, nullable))
    write = draw(st.sampled_from(list(writes)))
    density = DENSITIES[draw(st.sampled_from(list(densities)))]
    empty_chunks = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    cells = make_cells(dims, attrs, seed, density, empty_chunks, nan=nan, nulls=write == "insert")
    batches = draw(st.integers(1, 2)) if write == "insert" else 1
    return ArrayCase(cells, write, batches, seed)


@st.composite
def boxes(draw, dims: Sequence[Dim], margin: int = 3) -> dict[str, tuple[int, int]]:
    """A box over a random subset of the dimensions, overlapping each one's range (it may stick out)."""
    box = {}
    for dim in dims:
        if not draw(st.booleans()):
            continue
        low = draw(st.integers(dim.low - margin, dim.high))
        high = draw(st.integers(max(low, dim.low), dim.high + margin))
        box[dim.name] = (low, high)
    return box


# -- predicates: Spark SQL text for arrayviews, a numpy function for the reference --------------

#: A predicate: its text, a function giving (value, known) per cell (SQL three-valued logic: a cell
#: where ``known`` is False is NULL), and the names it reads.
Predicate = tuple[str, Callable[[Cells], tuple[np.ndarray, np.ndarray]], frozenset[str]]


def spark_compare(a: np.ndarray, b: np.ndarray, op: str) -> np.ndarray:
    """Spark's comparison of two numeric arrays: NaN equals NaN and is larger than everything else."""
    a_nan = np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, dtype=bool)
    b_nan = np.isnan(b) if np.asarray(b).dtype.kind == "f" else np.zeros(np.shape(b), dtype=bool)
    equal = (a == b) | (a_nan & b_nan)
    less = ((a < b) & ~a_nan & ~b_nan) | (~a_nan & b_nan)
    greater = ((a > b) & ~a_nan & ~b_nan) | (a_nan & ~b_nan)
    return {
        "=": equal,
        "<>": ~equal,
        "<": less,
        "<=": less | equal,
        ">": greater,
        ">=": greater | equal,
    }[op]


def _known(cells: Cells, name: str) -> np.ndarray:
    return ~cells.nulls[name] if name in cells.nulls else np.ones(cells.n, dtype=bool)


def isnan_atom(name: str) -> Predicate:
    """``isnan(name)``. Spark's isnan is never NULL: isnan(NULL) is false, so the predicate is known."""
    return (
        f"isnan({name})",
        lambda c: (np.isnan(c.column(name)) & _known(c, name), np.ones(c.n, dtype=bool)),
        frozenset({name}),
    )


def negation(predicate: Predicate) -> Predicate:
    """``NOT (p)`` under three-valued logic: NOT of NULL is NULL."""
    text, function, used = predicate

    def negated(c: Cells) -> tuple[np.ndarray, np.ndarray]:
        value, known = function(c)
        return ~value, known

    return f"NOT ({text})", negated, used


@st.composite
def atoms(draw, cells: Cells) -> Predicate:
    """One comparison over an attribute or a dimension (Spark semantics; NULL where the attribute is)."""
    names = list(cells.dim_names) + list(cells.attr_names)
    name = draw(st.sampled_from(names))
    kind = "int64" if name in cells.dim_names else cells.attr(name).type
    used = frozenset({name})

    def atom(text: str, function: Callable[[Cells], np.ndarray]) -> Predicate:
        return text, lambda c: (np.asarray(function(c), dtype=bool), _known(c, name)), used

    if kind == "bool":
        form = draw(st.sampled_from(["plain", "not", "eq", "ne"]))
        if form == "plain":
            return atom(name, lambda c: c.column(name).copy())
        if form == "not":
            return atom(f"NOT {name}", lambda c: ~c.column(name))
        if form == "eq":
            return atom(f"{name} = TRUE", lambda c: c.column(name) == True)  # noqa: E712
        return atom(f"{name} <> FALSE", lambda c: c.column(name) != False)  # noqa: E712
    if kind in ("float32", "float64") and draw(st.integers(0, 4)) == 0:
        return isnan_atom(name)
    op = draw(st.sampled_from(["<", "<=", ">", ">=", "=", "<>"]))
    if name in cells.dim_names:
        dim = cells.dims[cells.dim_names.index(name)]
        if draw(st.booleans()):
            constant = draw(st.integers(dim.low - 1, dim.high + 1))
            return atom(f"{name} {op} {constant}", lambda c: spark_compare(c.column(name), constant, op))
        modulus = draw(st.integers(2, 3))
        rest = draw(st.integers(-modulus + 1, modulus - 1))
        # Spark's % is Java's remainder: the sign of the dividend (np.fmod, not np.remainder).
        return atom(
            f"{name} % {modulus} {op} {rest}",
            lambda c: spark_compare(np.fmod(c.column(name), modulus), rest, op),
        )
    if kind in ("int32", "int64"):
        scale = 50 if kind == "int32" else 10**6
        constant = draw(st.integers(-scale, scale))
        return atom(
            f"{name} {op} {constant}",
            lambda c: spark_compare(c.column(name).astype(np.int64), np.int64(constant), op),
        )
    if kind == "float32":
        constant = draw(st.integers(-80, 80)) / 4
    else:
        constant = draw(st.sampled_from([-10.5, -2.0, 0.0, 0.25, 3.0, 12.125]))
    # A decimal literal such as 0.25 is read as a DOUBLE, and a FLOAT column is widened to DOUBLE.
    return atom(
        f"{name} {op} {constant!r}",
        lambda c: spark_compare(c.column(name).astype(np.float64), np.float64(constant), op),
    )


@st.composite
def predicates(draw, cells: Cells, depth: int = 2) -> Predicate:
    """An atom, or a combination of predicates with AND / OR / NOT (three-valued logic)."""
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(atoms(cells))
    form = draw(st.sampled_from(["AND", "OR", "NOT"]))
    left_text, left, left_used = draw(predicates(cells, depth - 1))
    if form == "NOT":
        return negation((left_text, left, left_used))
    right_text, right, right_used = draw(predicates(cells, depth - 1))

    def combined(c: Cells) -> tuple[np.ndarray, np.ndarray]:
        (a, a_known), (b, b_known) = left(c), right(c)
        if form == "AND":
            true = a_known & a & b_known & b
            false = (a_known & ~a) | (b_known & ~b)
        else:
            true = (a_known & a) | (b_known & b)
            false = a_known & ~a & b_known & ~b
        return true, true | false

    return f"({left_text}) {form} ({right_text})", combined, left_used | right_used


def reference_filter(cells: Cells, predicate: Predicate) -> Cells:
    """Cells where the predicate is TRUE (SQL: a NULL or false predicate drops the cell)."""
    _, function, _ = predicate
    value, known = function(cells)
    keep = np.asarray(value & known, dtype=bool).reshape(cells.n)
    return cells.take(keep)


# -- reference aggregates -----------------------------------------------------------------------

FUNCTIONS = ("count", "sum", "avg", "min", "max", "var", "stdev")


@dataclass(frozen=True)
class Call:
    function: str
    attribute: str | None  # None: count(*)

    @property
    def text(self) -> str:
        return f"{self.function}({self.attribute or '*'})"

    @property
    def output(self) -> str:
        return "count" if self.attribute is None else f"{self.attribute}_{self.function}"


def calls_for(cells: Cells, functions: Sequence[str] = FUNCTIONS) -> list[Call]:
    """Every function over every attribute where it is defined (var/stdev not over bool), and count(*)."""
    calls = [Call("count", None)]
    for attr in cells.attrs:
        for function in functions:
            if attr.type == "bool" and function in ("var", "stdev"):
                continue
            calls.append(Call(function, attr.name))
    return calls


def _aggregate_one(function: str, values: np.ndarray, type_name: str) -> object:
    """One group's value (None for null); NaN propagates as in numpy."""
    n = len(values)
    if function == "count":
        return n
    if n == 0:
        return None
    if function == "sum":
        if NUMPY[type_name].kind in "ib":
            return int(np.sum(values.astype(np.int64)))
        return float(np.sum(values.astype(np.float64)))
    if function == "avg":
        if NUMPY[type_name].kind in "ib":
            return int(np.sum(values.astype(np.int64))) / n
        return float(np.mean(values.astype(np.float64)))
    if function in ("min", "max"):
        value = np.min(values) if function == "min" else np.max(values)
        return value.item()
    if n < 2:
        return None
    var = float(np.var(values.astype(np.float64), ddof=1))
    return var if function == "var" else math.sqrt(var)


def output_arrow_type(call: Call, cells: Cells) -> pa.DataType:
    if call.function == "count":
        return pa.int64()
    kind = cells.attr(call.attribute).type
    if call.function == "sum":
        return pa.int64() if kind in ("int32", "int64", "bool") else pa.float64()
    if call.function in ("min", "max"):
        return ARROW[kind]
    return pa.float64()


def reference_groups(
    cells: Cells, keys: np.ndarray, key_names: Sequence[str], calls: Sequence[Call]
) -> pa.Table:
    """Aggregate the cells grouped by ``keys`` (n, m) with pandas groupby: one row per group, sorted."""
    frame = pd.DataFrame(
        np.asarray(keys, dtype=np.int64).reshape(cells.n, len(key_names)), columns=list(key_names)
    )
    frame["row"] = np.arange(cells.n)
    columns: dict[str, list] = {name: [] for name in key_names}
    for call in calls:
        columns[call.output] = []
    if cells.n:
        groups = frame.groupby(list(key_names), sort=True)["row"]
        for key, rows in groups:
            key = key if isinstance(key, tuple) else (key,)
            for name, value in zip(key_names, key, strict=True):
                columns[name].append(int(value))
            index = rows.to_numpy()
            for call in calls:
                if call.attribute is None:
                    columns[call.output].append(len(index))
                    continue
                valid = index[~cells.nulls[call.attribute][index]]
                values = cells.values[call.attribute][valid]
                columns[call.output].append(
                    _aggregate_one(call.function, values, cells.attr(call.attribute).type)
                )
    arrays = {name: pa.array(columns[name], pa.int64()) for name in key_names}
    for call in calls:
        arrays[call.output] = pa.array(columns[call.output], output_arrow_type(call, cells))
    return pa.table(arrays)


def reference_regrid(cells: Cells, blocks: Sequence[int], calls: Sequence[Call]) -> pa.Table:
    keys = (cells.coords - cells.lows) // np.asarray(blocks, dtype=np.int64) + cells.lows
    return reference_groups(cells, keys, cells.dim_names, calls)


def reference_aggregate(cells: Cells, by: Sequence[str], calls: Sequence[Call]) -> pa.Table:
    if by:
        keys = np.stack([cells.column(d) for d in by], axis=1) if cells.n else np.zeros((0, len(by)))
        return reference_groups(cells, keys, list(by), calls)
    # No grouping dimension: one output cell i=0, even for an empty input (count 0, others null).
    table = reference_groups(cells, np.zeros((cells.n, 1), dtype=np.int64), ["i"], calls)
    if cells.n:
        return table
    columns = {"i": pa.array([0], pa.int64())}
    for call in calls:
        columns[call.output] = pa.array(
            [0 if call.function == "count" else None], output_arrow_type(call, cells)
        )
    return pa.table(columns)


# -- comparisons ----------------------------------------------------------------------------------


def _numpy_of(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Values (nulls filled with 0/False) and null mask of an Arrow column."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    null = np.asarray(column.is_null(), dtype=bool)
    filled = (
        column.fill_null(False if pa.types.is_boolean(column.type) else 0) if column.null_count else column
    )
    return np.asarray(filled), null


def assert_tables_equal(
    actual: pa.Table,
    expected: pa.Table,
    approx: Sequence[str] = (),
    check_types: bool = True,
    rtol: float = 1e-9,
) -> None:
    """Same column names (in order), types, row count, null masks and values (NaN equals NaN).

    Columns named in ``approx`` compare with relative tolerance ``rtol`` (and 1e-9 absolute, for
    results that cancel to about zero); the others exactly.
    """
    assert actual.column_names == expected.column_names, (actual.column_names, expected.column_names)
    assert actual.num_rows == expected.num_rows, (actual.num_rows, expected.num_rows)
    for name in expected.column_names:
        a, e = actual.column(name), expected.column(name)
        if check_types:
            assert a.type == e.type, f"column {name}: type {a.type}, expected {e.type}"
        a_values, a_null = _numpy_of(a)
        e_values, e_null = _numpy_of(e)
        np.testing.assert_array_equal(a_null, e_null, err_msg=f"null mask of column {name}")
        valid = ~e_null
        if name in approx:
            np.testing.assert_allclose(
                a_values[valid].astype(np.float64),
                e_values[valid].astype(np.float64),
                rtol=rtol,
                atol=1e-9,
                equal_nan=True,
                err_msg=f"column {name}",
            )
        else:
            np.testing.assert_array_equal(a_values[valid], e_values[valid], err_msg=f"column {name}")


def approx_columns(calls: Sequence[Call], cells: Cells) -> list[str]:
    """Outputs compared with tolerance: float sums, averages, variances and standard deviations."""
    out = []
    for call in calls:
        if (
            call.function in ("avg", "var", "stdev")
            or call.function == "sum"
            and cells.attr(call.attribute).type in ("float32", "float64")
        ):
            out.append(call.output)
    return out


def subsets(items: Sequence[str]) -> list[tuple[str, ...]]:
    """Every subset of ``items`` (keeping their order), the empty one first."""
    return [c for r in range(len(items) + 1) for c in itertools.combinations(items, r)]
