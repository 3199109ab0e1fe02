"""Checks of a cell table's column names against an array schema (any engine's input)."""

from __future__ import annotations

from arrayviews.model.errors import ValidationError
from arrayviews.model.schema import ArraySchema


def spelled_columns(names: list[str], schema: ArraySchema) -> list[str]:
    """``names`` as ``schema`` spells its columns (column names match without regard to case; a
    name the schema does not have stays as given, for :func:`check_columns` to name)."""
    return [schema.spelling(name) for name in names]


def check_columns(names: list[str], schema: ArraySchema) -> None:
    """Columns named twice, unknown columns and missing columns."""
    if len(set(names)) != len(names):
        duplicate = next(n for n in names if names.count(n) > 1)
        raise ValidationError(
            f"array {schema.name}: column {duplicate!r} appears twice", array=schema.name, column=duplicate
        )
    expected = set(schema.dimension_names) | set(schema.attribute_names)
    unknown = [n for n in names if n not in expected]
    if unknown:
        raise ValidationError(
            f"array {schema.name}: unknown column {unknown[0]!r}; expected dimensions "
            f"{', '.join(schema.dimension_names)} and attributes {', '.join(schema.attribute_names) or '(none)'}",
            array=schema.name,
            column=unknown[0],
        )
    for dimension in schema.dimension_names:
        if dimension not in names:
            raise ValidationError(
                f"array {schema.name}: missing dimension column {dimension!r}",
                array=schema.name,
                column=dimension,
            )
    for attribute in schema.attributes:
        if attribute.name not in names and not attribute.nullable:
            raise ValidationError(
                f"array {schema.name}: missing attribute column {attribute.name!r} (type {attribute.type})",
                array=schema.name,
                column=attribute.name,
            )
