"""Similarity shapes: finite sets of integer offsets around a centre cell (L1 and L-infinity balls,
per-dimension ranges, products of those, and user stencils), with the set operations the view
maintenance planner uses (union, difference, symmetric difference).

A shape is stored as a boolean *stencil* over its bounding box plus the position of the centre in
it: offset ``o`` belongs to the shape exactly when ``stencil[o + centre]`` is true. Shapes are
immutable and hashable; equal offset sets give equal shapes (the stencil is trimmed to its bounding box).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from arrayviews.model.errors import ValidationError

#: The most cells a shape's stencil may hold (a similarity view visits every offset of it per cell).
MAX_STENCIL_CELLS = 10**7


def check_stencil_size(name: str, sizes: Sequence[int]) -> None:
    """Refuse, naming the shape, a stencil of ``sizes`` cells per dimension that would hold more than
    MAX_STENCIL_CELLS cells (checked before anything is allocated: a far BOX once asked for 93 GiB)."""
    cells = 1
    for size in sizes:
        cells *= int(size)
    if cells > MAX_STENCIL_CELLS:
        raise ValidationError(
            f"shape {name} is too large: its stencil would hold {cells} cells (at most {MAX_STENCIL_CELLS})",
            value=name,
        )


@dataclass(frozen=True, eq=False)
class Shape:
    """A finite set of d-dimensional integer offsets (see the module docstring)."""

    stencil: np.ndarray
    centre: tuple[int, ...]
    name: str = field(default="")

    def __post_init__(self) -> None:
        stencil = np.asarray(self.stencil, dtype=bool)
        if stencil.ndim == 0:
            raise ValidationError("a shape needs at least one dimension")
        centre = tuple(int(c) for c in self.centre)
        if len(centre) != stencil.ndim:
            raise ValidationError(
                f"shape centre {centre} has {len(centre)} coordinates, the stencil {stencil.ndim} dimensions"
            )
        stencil, centre = _trim(stencil, centre)
        stencil.setflags(write=False)
        object.__setattr__(self, "stencil", stencil)
        object.__setattr__(self, "centre", centre)

    # -- identity ------------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return self.stencil.ndim

    def __len__(self) -> int:
        return int(self.stencil.sum())

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Shape)
            and self.centre == other.centre
            and self.stencil.shape == other.stencil.shape
            and bool(np.array_equal(self.stencil, other.stencil))
        )

    def __hash__(self) -> int:
        return hash((self.centre, self.stencil.shape, self.stencil.tobytes()))

    def __repr__(self) -> str:
        return self.name or f"Shape({len(self)} offsets, reach {self.before}/{self.after})"

    # -- geometry ------------------------------------------------------------------------------
    @property
    def before(self) -> tuple[int, ...]:
        """How far the shape reaches below the centre, per dimension."""
        return self.centre

    @property
    def after(self) -> tuple[int, ...]:
        """How far the shape reaches above the centre, per dimension."""
        return tuple(s - 1 - c for s, c in zip(self.stencil.shape, self.centre, strict=True))

    def offsets(self) -> np.ndarray:
        """The offsets (n, d) of the shape, in C order of the stencil."""
        return np.argwhere(self.stencil).astype(np.int64) - np.asarray(self.centre, dtype=np.int64)

    def contains(self, offsets: np.ndarray) -> np.ndarray:
        """Boolean mask of the offsets (n, d) that belong to the shape."""
        offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, self.ndim)
        index = offsets + np.asarray(self.centre, dtype=np.int64)
        inside = np.all((index >= 0) & (index < np.asarray(self.stencil.shape)), axis=1)
        result = np.zeros(len(offsets), dtype=bool)
        result[inside] = self.stencil[tuple(index[inside].T)]
        return result

    def reflected(self) -> Shape:
        """The shape of offsets ``-o`` (who sees me, rather than whom I see)."""
        flipped = self.stencil[(slice(None, None, -1),) * self.ndim]
        return Shape(flipped, self.after, f"reflected({self!r})" if self.name else "")

    # -- set operations ------------------------------------------------------------------------
    def _aligned(self, other: Shape) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
        if other.ndim != self.ndim:
            raise ValidationError(f"shapes of {self.ndim} and {other.ndim} dimensions cannot be combined")
        before = tuple(max(a, b) for a, b in zip(self.before, other.before, strict=True))
        after = tuple(max(a, b) for a, b in zip(self.after, other.after, strict=True))
        size = tuple(b + a + 1 for b, a in zip(before, after, strict=True))
        check_stencil_size(f"combining {self!r} and {other!r}", size)

        def place(shape: Shape) -> np.ndarray:
            out = np.zeros(size, dtype=bool)
            start = [b - c for b, c in zip(before, shape.centre, strict=True)]
            out[tuple(slice(s, s + n) for s, n in zip(start, shape.stencil.shape, strict=True))] = (
                shape.stencil
            )
            return out

        return place(self), place(other), before

    def union(self, other: Shape) -> Shape:
        a, b, centre = self._aligned(other)
        return Shape(a | b, centre)

    def difference(self, other: Shape) -> Shape:
        a, b, centre = self._aligned(other)
        return Shape(a & ~b, centre)

    def symmetric_difference(self, other: Shape) -> Shape:
        a, b, centre = self._aligned(other)
        return Shape(a ^ b, centre)

    def intersection(self, other: Shape) -> Shape:
        a, b, centre = self._aligned(other)
        return Shape(a & b, centre)

    __or__ = union
    __sub__ = difference
    __xor__ = symmetric_difference
    __and__ = intersection


def check_shape(shape: object, what: str) -> None:
    """Anything but a Shape given as ``what``'s shape is refused saying what to pass."""
    if not isinstance(shape, Shape):
        shown = repr(shape) if isinstance(shape, str | int | float) else type(shape).__name__
        raise ValidationError(
            f"{what}: the shape is a Shape such as L1(radius, ndim), Linf(radius, ndim), "
            f"box([(low, high), ...]) or stencil(mask), got {shown}"
        )


def _trim(stencil: np.ndarray, centre: tuple[int, ...]) -> tuple[np.ndarray, tuple[int, ...]]:
    """Cut the stencil to the bounding box of its true cells; an empty shape keeps a 1-cell box."""
    if not stencil.any():
        return np.zeros((1,) * stencil.ndim, dtype=bool), (0,) * stencil.ndim
    where = np.argwhere(stencil)
    low, high = where.min(axis=0), where.max(axis=0)
    trimmed = np.array(stencil[tuple(slice(a, b + 1) for a, b in zip(low, high, strict=True))], dtype=bool)
    return trimmed, tuple(int(c - a) for c, a in zip(centre, low, strict=True))


# -- constructors ---------------------------------------------------------------------------------
def _ball(radius: int, ndim: int, norm: str) -> Shape:
    if isinstance(radius, bool) or not isinstance(radius, (int, np.integer)) or radius < 0:
        raise ValidationError(f"{norm}({radius!r}): the radius must be an integer >= 0")
    if ndim < 1:
        raise ValidationError(f"{norm}({radius}): needs at least one dimension")
    check_stencil_size(f"{norm}({radius}, {ndim})", (2 * int(radius) + 1,) * ndim)
    grid = np.indices((2 * radius + 1,) * ndim) - radius
    distance = np.abs(grid).sum(axis=0) if norm == "L1" else np.abs(grid).max(axis=0)
    return Shape(distance <= radius, (int(radius),) * ndim, f"{norm}({radius}, {ndim})")


def L1(radius: int, ndim: int = 2) -> Shape:  # noqa: N802 - the paper's notation
    """Offsets with ``sum |o_k| <= radius`` (the cross ``L1(1)`` of the paper in 2-D)."""
    return _ball(radius, ndim, "L1")


def Linf(radius: int, ndim: int = 2) -> Shape:  # noqa: N802 - the paper's notation
    """Offsets with ``max |o_k| <= radius`` (a (2r+1)^d box)."""
    return _ball(radius, ndim, "Linf")


def box(ranges: Sequence[tuple[int, int]]) -> Shape:
    """Offsets with ``low_k <= o_k <= high_k`` in every dimension (e.g. ``[(-200, 0)]``: the previous 200 steps)."""
    lows, highs = [], []
    for low, high in ranges:
        if low > high:
            raise ValidationError(f"shape range {low}:{high} is empty")
        lows.append(int(low))
        highs.append(int(high))
    size = tuple(max(h, 0) - min(lo, 0) + 1 for lo, h in zip(lows, highs, strict=True))
    check_stencil_size(f"BOX({', '.join(f'{lo}:{h}' for lo, h in zip(lows, highs, strict=True))})", size)
    centre = tuple(-min(lo, 0) for lo in lows)
    stencil = np.zeros(size, dtype=bool)
    stencil[tuple(slice(c + lo, c + h + 1) for c, lo, h in zip(centre, lows, highs, strict=True))] = True
    return Shape(stencil, centre, f"box({list(zip(lows, highs, strict=True))})")


def product(*parts: Shape) -> Shape:
    """The shape over the concatenated dimensions of ``parts`` (every combination of their offsets),
    e.g. ``product(box([(-200, 0)]), L1(1, 2))``: the previous 200 time steps times a cross on ra/dec."""
    if not parts:
        raise ValidationError("product needs at least one shape")
    check_stencil_size(" x ".join(repr(p) for p in parts), [n for p in parts for n in p.stencil.shape])
    stencil = parts[0].stencil
    for part in parts[1:]:
        stencil = np.multiply.outer(stencil, part.stencil)
    centre = tuple(itertools.chain.from_iterable(p.centre for p in parts))
    return Shape(stencil.astype(bool), centre, " x ".join(repr(p) for p in parts))


def stencil(mask: np.ndarray, centre: Sequence[int] | None = None) -> Shape:
    """A user shape: a boolean array and the index of its centre (default: the middle cell)."""
    mask = np.asarray(mask)
    if mask.dtype != bool:
        raise ValidationError(f"a stencil must be a boolean array, got {mask.dtype}")
    if centre is None:
        if any(s % 2 == 0 for s in mask.shape):
            raise ValidationError(f"stencil of shape {mask.shape} has no middle cell: give its centre")
        centre = tuple(s // 2 for s in mask.shape)
    return Shape(mask, tuple(centre), "stencil")
