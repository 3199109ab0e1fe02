"""View definitions: a similarity join grouped by the left array's cells with aggregates over either
side, or a window aggregate over one array; stored as JSON with the view."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from arrayviews.model.errors import ValidationError
from arrayviews.model.mappings import Mapping
from arrayviews.model.names import check_identifier
from arrayviews.model.schema import ArraySchema
from arrayviews.model.shapes import Shape, check_shape

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


def attributes_spelled(
    definition: SimilarityViewDefinition, left: ArraySchema, right: ArraySchema
) -> SimilarityViewDefinition:
    """``definition`` with each aggregate's attribute as its side's schema spells it (column names are
    case-insensitive: ``sum(right.V)`` over attribute ``v`` is ``sum(right.v)``)."""
    aggregates = tuple(
        aggregate
        if aggregate.attribute is None
        else replace(
            aggregate, attribute=(left if aggregate.side == "left" else right).spelling(aggregate.attribute)
        )
        for aggregate in definition.aggregates
    )
    return replace(definition, aggregates=aggregates)


def check_aggregates(definition: SimilarityViewDefinition, left: ArraySchema, right: ArraySchema) -> None:
    """Every aggregate names an existing attribute of its side, with a type it applies to."""
    names = set()
    dimensions = {d.lower() for d in left.dimension_names}
    for aggregate in definition.aggregates:
        check_identifier(aggregate.alias, "view output", ValidationError)
        if aggregate.alias.lower() in names:
            raise ValidationError(f"view output {aggregate.alias!r} is named twice")
        names.add(aggregate.alias.lower())
        if aggregate.alias.lower() in dimensions:
            raise ValidationError(f"view output {aggregate.alias!r} clashes with a dimension of {left.name}")
        if aggregate.attribute is None:
            continue
        schema = left if aggregate.side == "left" else right
        attribute = schema.attribute(aggregate.attribute)
        if attribute.type == "string" and aggregate.function != "count":
            raise ValidationError(
                f"array {schema.name}, attribute {aggregate.attribute} (string): {aggregate.function}"
                f"({aggregate.side}.{aggregate.attribute}) does not apply to string values in similarity "
                "joins and views (their sums and extremes are kept as numbers); count counts them",
                array=schema.name,
                column=aggregate.attribute,
                value="string",
            )
        if attribute.type == "bool" and aggregate.function in ("sum", "avg"):
            raise ValidationError(
                f"{aggregate.function} over bool attribute {aggregate.attribute} is not supported in views"
            )
        if attribute.type == "datetime64" and aggregate.function in ("sum", "avg"):
            raise ValidationError(
                f"array {schema.name}, attribute {aggregate.attribute} (datetime64): {aggregate.function}"
                f"({aggregate.side}.{aggregate.attribute}) does not apply to times (count, min and max do)",
                array=schema.name,
                column=aggregate.attribute,
                value="datetime64",
            )


def parse_view_aggregate(text: str, left_alias: str = "left", right_alias: str = "right") -> ViewAggregate:
    """``"count(*) as cnt"``, ``"avg(right.v) as mean_v"``, ``"max(A2.s)"`` (aliases name the sides)."""
    match = re.fullmatch(
        r"\s*(\w+)\s*\(\s*(\*|(\w+)\s*\.\s*(\w+))\s*\)\s*(?:as\s+(\w+))?\s*", text, flags=re.IGNORECASE
    )
    if match is None:
        raise ValidationError(
            f"cannot read view aggregate {text!r}: write e.g. 'count(*) as cnt' or 'avg(right.v) as m'"
        )
    function = match.group(1).lower()
    function = {"mean": "avg"}.get(function, function)
    if match.group(2) == "*":
        return ViewAggregate(function, None, None, match.group(5) or "count")
    alias, attribute = match.group(3), match.group(4)
    sides = {left_alias.lower(): "left", right_alias.lower(): "right"}
    if alias.lower() not in sides:
        raise ValidationError(
            f"view aggregate {text!r}: {alias!r} is neither {left_alias!r} nor {right_alias!r}"
        )
    return ViewAggregate(
        function, sides[alias.lower()], attribute, match.group(5) or f"{attribute}_{function}"
    )


def spelled(definition: ViewDefinition, spelling: Callable[[str], str]) -> ViewDefinition:
    """``definition`` with each base named by ``spelling(name)`` (the catalog's spelling: names
    match without regard to case, and the versions a view reflects are keyed by its bases' names)."""
    if isinstance(definition, SimilarityViewDefinition):
        return replace(definition, left=spelling(definition.left), right=spelling(definition.right))
    if isinstance(definition, WindowViewDefinition):
        return replace(definition, base=spelling(definition.base))
    return definition


def similarity(
    left: str, right: str, shape: Shape, aggregates, mapping: Mapping | None = None
) -> SimilarityViewDefinition:
    """A similarity-view definition from aggregate strings, e.g.
    ``similarity("A", "A", L1(1, 2), ["count(*) as cnt", "avg(right.v) as mean_v"])``."""
    check_shape(shape, f"similarity view of {left} and {right}")
    if isinstance(aggregates, str):
        aggregates = [aggregates]  # one call, not its characters
    calls = tuple(a if isinstance(a, ViewAggregate) else parse_view_aggregate(a) for a in aggregates)
    return SimilarityViewDefinition(left, right, shape, calls, mapping)


def window(
    base: str,
    extents: dict[str, tuple[int, int]] | list[int],
    aggregates,
    dimensions: list[str] | None = None,
) -> WindowViewDefinition:
    """A window-view definition: ``window("A", [1, 1, 2, 2], ["avg(v)"])`` (flat before/after per dimension)."""
    if isinstance(aggregates, str):
        aggregates = [aggregates]  # one call, not its characters
    if isinstance(extents, dict):
        if dimensions is None:
            raise ValidationError("window view extents given by name need the base's dimension order")
        unknown = [name for name in extents if name not in dimensions]
        if unknown:
            raise ValidationError(
                f"window view over {base}: no dimension named {unknown[0]!r} (dimensions: "
                f"{', '.join(dimensions)})",
                array=base,
                column=str(unknown[0]),
            )
        pairs = [tuple(extents.get(d, (0, 0))) for d in dimensions]
        if any(len(p) != 2 for p in pairs):
            raise ValidationError(
                f"window view over {base}: each extent is a (before, after) pair, got {extents!r}", array=base
            )
    else:
        flat = list(extents)
        if len(flat) % 2:
            raise ValidationError(
                f"window view over {base}: extents are before, after per dimension (an even count of "
                f"numbers), got {len(flat)}",
                array=base,
                value=repr(flat),
            )
        pairs = [(flat[k], flat[k + 1]) for k in range(0, len(flat), 2)]
    # numpy integers become Python integers (the definition is stored as JSON); anything else is
    # kept for the window's own check, which names the dimension and the value
    pairs = [tuple(_plain_integer(v) for v in pair) for pair in pairs]
    return WindowViewDefinition(
        base, tuple(p[0] for p in pairs), tuple(p[1] for p in pairs), tuple(aggregates)
    )


def _plain_integer(value):
    """``value`` as a Python int when it is a numpy integer, else as it is. A ``numpy.timedelta64``
    is a numpy integer too: it stays a duration (before, ``np.timedelta64(18, "ns")`` became 18
    cells whatever the axis' step)."""
    return int(value) if isinstance(value, np.integer) and not isinstance(value, np.timedelta64) else value
