"""Dimension mappings of the similarity join: which cell of beta a cell of alpha is centred on.

Each beta dimension is an integer affine function of one alpha dimension,
``b_k = floor(a_src * multiplier / divisor) + offset``: the identity, renamings (dimensions matched by
name or listed explicitly), and changes of resolution (``divisor = 2`` when beta is twice as coarse).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from arrayviews.model.errors import ValidationError
from arrayviews.model.schema import ArraySchema

INT64_MAX = 2**63 - 1
#: Mapped coordinates saturate here: 2**61 beyond every dimension bound (+-(2**62 - 1)), so an image
#: plus a shape's offsets (each side under 10**7) or minus a chunk origin neither wraps nor lands
#: on a cell.
IMAGE_LIMIT = 2**62 + 2**61


@dataclass(frozen=True)
class AxisMap:
    """``beta[target] = floor(alpha[source] * multiplier / divisor) + offset``."""

    target: str
    source: str
    multiplier: int = 1
    divisor: int = 1
    offset: int = 0

    def __post_init__(self) -> None:
        for label in ("multiplier", "divisor", "offset"):  # as statements refuse them (int64 literals)
            value = getattr(self, label)
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise ValidationError(f"mapping of {self.target}: {label} must be an integer, got {value!r}")
            if not -INT64_MAX - 1 <= value <= INT64_MAX:
                raise ValidationError(f"mapping of {self.target}: {label} {value} is outside the int64 range")
            object.__setattr__(self, label, int(value))
        if self.divisor < 1:
            raise ValidationError(f"mapping of {self.target}: divisor must be >= 1, got {self.divisor}")
        if self.multiplier == 0:
            raise ValidationError(f"mapping of {self.target}: multiplier must not be 0")

    def image(self, values: np.ndarray) -> np.ndarray:
        """``floor(values * multiplier / divisor) + offset`` computed exactly and saturated to
        +-:data:`IMAGE_LIMIT`: an image beyond every dimension's bounds stays beyond them (it never
        wraps around int64 onto real cells), and the map stays monotone."""
        values = np.asarray(values, dtype=np.int64)
        if len(values) == 0:
            return values.copy()
        largest = max(abs(int(values.min())), abs(int(values.max())))
        product_bound = largest * abs(self.multiplier)
        if (
            abs(self.multiplier) <= INT64_MAX
            and product_bound <= INT64_MAX
            and product_bound // self.divisor + abs(self.offset) <= INT64_MAX
        ):
            out = np.floor_divide(values * self.multiplier, self.divisor) + self.offset
            return np.clip(out, -IMAGE_LIMIT, IMAGE_LIMIT)
        exact = [(int(v) * self.multiplier) // self.divisor + self.offset for v in values.tolist()]
        return np.array([min(max(e, -IMAGE_LIMIT), IMAGE_LIMIT) for e in exact], dtype=np.int64)


@dataclass(frozen=True)
class Mapping:
    """One :class:`AxisMap` per beta dimension, in beta's dimension order."""

    axes: tuple[AxisMap, ...]

    @classmethod
    def identity(cls, alpha: ArraySchema, beta: ArraySchema) -> Mapping:
        """Dimensions matched by name (or by position when the names differ but the counts agree)."""
        if set(alpha.dimension_names) >= set(beta.dimension_names):
            return cls(tuple(AxisMap(d, d) for d in beta.dimension_names))
        if alpha.ndim == beta.ndim:
            return cls(
                tuple(AxisMap(b, a) for a, b in zip(alpha.dimension_names, beta.dimension_names, strict=True))
            )
        raise ValidationError(
            f"no mapping from {alpha.name}[{', '.join(alpha.dimension_names)}] to "
            f"{beta.name}[{', '.join(beta.dimension_names)}]: give one explicitly"
        )

    @classmethod
    def of(
        cls, alpha: ArraySchema, beta: ArraySchema, spec: Mapping | Sequence[AxisMap] | dict | None
    ) -> Mapping:
        """A mapping from a spec: None (identity), a Mapping, AxisMaps, or ``{beta_dim: alpha_dim or AxisMap}``."""
        if spec is None:
            mapping = cls.identity(alpha, beta)
        elif isinstance(spec, Mapping):
            mapping = spec
        elif isinstance(spec, dict):
            axes = []
            for target in beta.dimension_names:
                if target not in spec:
                    raise ValidationError(f"mapping gives no source for dimension {target} of {beta.name}")
                value = spec[target]
                axes.append(value if isinstance(value, AxisMap) else AxisMap(target, str(value)))
            mapping = cls(tuple(axes))
        elif isinstance(spec, list | tuple) and all(isinstance(axis, AxisMap) for axis in spec):
            mapping = cls(tuple(spec))
        else:
            shown = repr(spec) if isinstance(spec, str | int | float) else type(spec).__name__
            raise ValidationError(
                f"a mapping is None (dimensions matched in order), a Mapping, a list of AxisMap or "
                f"{{{beta.name}'s dimension: {alpha.name}'s dimension}}; got {shown}"
            )
        mapping.check(alpha, beta)
        return mapping

    def check(self, alpha: ArraySchema, beta: ArraySchema) -> None:
        if [a.target for a in self.axes] != list(beta.dimension_names):
            raise ValidationError(
                f"mapping must give {beta.name}'s dimensions {', '.join(beta.dimension_names)} in order"
            )
        for axis in self.axes:
            alpha.dimension(axis.source)

    def apply(self, coords: np.ndarray, alpha: ArraySchema) -> np.ndarray:
        """beta coordinates (n, d_beta) of alpha cells (n, d_alpha)."""
        coords = np.asarray(coords, dtype=np.int64).reshape(-1, alpha.ndim)
        out = np.empty((len(coords), len(self.axes)), dtype=np.int64)
        for k, axis in enumerate(self.axes):
            out[:, k] = axis.image(coords[:, alpha.dimension_names.index(axis.source)])
        return out

    def map_box(
        self, low: Sequence[int], high: Sequence[int], alpha: ArraySchema
    ) -> tuple[np.ndarray, np.ndarray]:
        """The beta box covering the images of every alpha cell in ``[low, high]`` (maps are monotone per axis)."""
        corners = self.apply(np.array([low, high], dtype=np.int64), alpha)
        return corners.min(axis=0), corners.max(axis=0)

    @property
    def is_identity(self) -> bool:
        return all(
            a.target == a.source and a.multiplier == 1 and a.divisor == 1 and a.offset == 0 for a in self.axes
        )

    def to_json(self) -> list[dict]:
        return [a.__dict__.copy() for a in self.axes]

    @classmethod
    def from_json(cls, data: list[dict]) -> Mapping:
        return cls(tuple(AxisMap(**a) for a in data))
