"""View definitions: a similarity join grouped by the left array's cells with aggregates over either
side, or a window aggregate over one array; stored as JSON with the view."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from arrayviews.model.errors import ValidationError
from arrayviews.model.mappings import Mapping
from arrayviews.model.schema import ArraySchema
from arrayviews.model.shapes import Shape

FUNCTIONS = ("count", "sum", "avg", "min", "max")
SIDES = ("left", "right")


@dataclass(frozen=True)
class ViewAggregate:
    """One output attribute: ``function`` over ``side``'s ``attribute`` (count(*) has neither)."""

    function: str
    side: str | None
    attribute: str | None
    alias: str

    def __post_init__(self) -> None:
        if self.function not in FUNCTIONS:
            raise ValidationError(
                f"view aggregate {self.function!r} is not supported; use one of {', '.join(FUNCTIONS)}"
            )
        if (self.attribute is None) != (self.side is None):
            raise ValidationError(f"{self.alias}: an attribute needs a side (left or right), count(*) none")
        if self.attribute is None and self.function != "count":
            raise ValidationError(f"{self.function}(*) is not an aggregate; name an attribute")
        if self.side is not None and self.side not in SIDES:
            raise ValidationError(f"{self.alias}: side must be left or right, got {self.side!r}")


@dataclass(frozen=True)
class SimilarityViewDefinition:
    """``SELECT aggregates FROM left SIMILARITY JOIN right ON mapping WITH SHAPE shape GROUP BY left's dims``."""

    left: str
    right: str
    shape: Shape
    aggregates: tuple[ViewAggregate, ...]
    mapping: Mapping | None = None
    text: str = ""
    kind: str = field(default="similarity", init=False)

    @property
    def bases(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.left, self.right)))

    def to_json(self) -> str:
        return json.dumps(
            {
                "kind": self.kind,
                "left": self.left,
                "right": self.right,
                "shape": {
                    "stencil": self.shape.stencil.astype(int).tolist(),
                    "centre": list(self.shape.centre),
                    "name": self.shape.name,
                },
                "aggregates": [a.__dict__ for a in self.aggregates],
                "mapping": None if self.mapping is None else self.mapping.to_json(),
                "text": self.text,
            }
        )


@dataclass(frozen=True)
class WindowViewDefinition:
    """``window(base, extents..., aggregates...)`` kept fresh by recomputing the touched view chunks."""

    base: str
    before: tuple[int, ...]
    after: tuple[int, ...]
    aggregates: tuple[str, ...]
    text: str = ""
    kind: str = field(default="window", init=False)

    @property
    def bases(self) -> tuple[str, ...]:
        return (self.base,)

    def to_json(self) -> str:
        return json.dumps(
            {
                "kind": self.kind,
                "base": self.base,
                "before": list(self.before),
                "after": list(self.after),
                "aggregates": list(self.aggregates),
                "text": self.text,
            }
        )


ViewDefinition = SimilarityViewDefinition | WindowViewDefinition


def definition_from_json(text: str) -> ViewDefinition:
    data = json.loads(text)
    if data["kind"] == "window":
        return WindowViewDefinition(
            data["base"],
            tuple(data["before"]),
            tuple(data["after"]),
            tuple(data["aggregates"]),
            data.get("text", ""),
        )
    shape = Shape(
        np.array(data["shape"]["stencil"], dtype=bool),
        tuple(data["shape"]["centre"]),
        data["shape"].get("name", ""),
    )
    return SimilarityViewDefinition(
        data["left"],
        data["right"],
        shape,
        tuple(ViewAggregate(**a) for a in data["aggregates"]),
        None if data["mapping"] is None else Mapping.from_json(data["mapping"]),
        data.get("text", ""),
    )


def check_aggregates(definition: SimilarityViewDefinition, left: ArraySchema, right: ArraySchema) -> None:
    """Every aggregate names an existing attribute of its side, with a type it applies to."""
    names = set()
    for aggregate in definition.aggregates:
        if aggregate.alias in names:
            raise ValidationError(f"view output {aggregate.alias!r} is named twice")
        names.add(aggregate.alias)
        if aggregate.alias in left.dimension_names:
            raise ValidationError(f"view output {aggregate.alias!r} clashes with a dimension of {left.name}")
        if aggregate.attribute is None:
            continue
        schema = left if aggregate.side == "left" else right
        attribute = schema.attribute(aggregate.attribute)
        if attribute.type == "bool" and aggregate.function in ("sum", "avg"):
            raise ValidationError(
                f"{aggregate.function} over bool attribute {aggregate.attribute} is not supported in views"
            )
