"""Which column of a ViewDF's UPDATE result goes into which column of the view: matched by name,
of a type the view's column holds without loss (checked when the view is created)."""

from __future__ import annotations

import sqlglot
import sqlglot.errors
from pyspark.sql import types as T

from arrayviews.model import text_lines
from arrayviews.model.errors import ValidationError
from arrayviews.model.names import PART_TIMESTAMP
from arrayviews.model.viewdf import PartQuery, ViewDFDefinition

# Decimal digits of the largest value of each integral type, in widening order.
_INTEGRAL_DIGITS: dict[type[T.DataType], int] = {
    T.ByteType: 3,
    T.ShortType: 5,
    T.IntegerType: 10,
    T.LongType: 19,
}
# Integers a double (53-bit mantissa) or a float (24 bits) holds exactly, by digit count.
_DOUBLE_DIGITS = 15
_FLOAT_DIGITS = 6


def _same(source: T.DataType, target: T.DataType) -> bool:
    return source.simpleString() == target.simpleString()


def widens(source: T.DataType, target: T.DataType) -> bool:
    """Whether every value of type ``source`` is a value of type ``target`` (a cast loses nothing)."""
    if isinstance(source, T.NullType) or _same(source, target):
        return True
    digits = _INTEGRAL_DIGITS.get(type(source))
    if digits is not None:
        if type(target) in _INTEGRAL_DIGITS:
            return digits <= _INTEGRAL_DIGITS[type(target)]
        if isinstance(target, T.DecimalType):
            return target.precision - target.scale >= digits
        if isinstance(target, T.DoubleType):
            return digits <= _DOUBLE_DIGITS
        if isinstance(target, T.FloatType):
            return digits <= _FLOAT_DIGITS
        return False
    if isinstance(source, T.FloatType):
        return isinstance(target, T.DoubleType)
    if isinstance(source, T.DecimalType) and isinstance(target, T.DecimalType):
        return target.scale >= source.scale and (
            target.precision - target.scale >= source.precision - source.scale
        )
    return False


def check_update_columns(
    definition: ViewDFDefinition, initialize: T.StructType, update: T.StructType
) -> None:
    """The UPDATE query returns exactly the INITIALIZE query's columns (the view's), by name (in any
    order, letter case ignored as in Spark SQL), each of a type the view's column holds without loss,
    and none is named PART_TIMESTAMP (readers see each part's start under that name); otherwise ValidationError names the column, both types and, where it can be found, the UPDATE
    select item's line and column in the statement."""
    view = definition.name
    columns = {field.name.lower(): field for field in initialize.fields}
    if len(columns) != len(initialize.fields):
        twice = _repeated(initialize.fieldNames())
        raise ValidationError(
            f"view {view}: the INITIALIZE query returns column {twice} twice; the view's columns "
            f"need distinct names (use AS)",
            array=view,
            column=twice,
        )
    for number, field in enumerate(initialize.fields):
        if field.name.lower() == PART_TIMESTAMP.lower():
            where = _item_position(definition, definition.initialize, number)
            raise ValidationError(
                f"view {view}: column name {field.name} is reserved: readers see the start of each "
                f"part under that name (choose another alias){where}",
                array=view,
                column=field.name,
            )
    listed = ", ".join(initialize.fieldNames())
    seen: set[str] = set()
    for number, field in enumerate(update.fields):
        name = field.name.lower()
        where = _item_position(definition, definition.update, number)
        if name in seen:
            raise ValidationError(
                f"view {view}: the UPDATE query returns column {field.name} twice{where}",
                array=view,
                column=field.name,
            )
        seen.add(name)
        target = columns.get(name)
        if target is None:
            hint = ""
            if number < len(initialize.fields):
                hint = f"; name it AS {initialize.fields[number].name} if that is the column it computes"
            raise ValidationError(
                f"view {view}: UPDATE column {number + 1} ({field.name}) is not a column of the view "
                f"(the INITIALIZE query's columns: {listed}){hint}{where}",
                array=view,
                column=field.name,
            )
        if not widens(field.dataType, target.dataType):
            raise ValidationError(
                f"view {view}: UPDATE column {field.name} is {field.dataType.simpleString()} but the "
                f"view's column {target.name} (from INITIALIZE) is {target.dataType.simpleString()}, "
                f"which does not hold every such value; cast one of them so the types agree{where}",
                array=view,
                column=target.name,
            )
    missing = [field.name for field in initialize.fields if field.name.lower() not in seen]
    if missing:
        raise ValidationError(
            f"view {view}: the UPDATE query returns {len(update.fields)} columns "
            f"({', '.join(update.fieldNames())}) and the INITIALIZE query {len(initialize.fields)} "
            f"({listed}); the UPDATE query lacks {', '.join(missing)}",
            array=view,
            column=missing[0],
        )


def _repeated(names: list[str]) -> str:
    seen: set[str] = set()
    for name in names:
        if name.lower() in seen:
            return name
        seen.add(name.lower())
    return names[0]  # pragma: no cover - called only when some name repeats


def _item_position(definition: ViewDFDefinition, query: PartQuery, number: int) -> str:
    """`` at line L, column C`` of select item ``number`` of ``query``'s outermost SELECT in the
    statement, or "" when it cannot be told (``SELECT *``, a set operation, text sqlglot cannot read)."""
    if not query.references or not definition.text:
        return ""
    # each part reference becomes a name of the same length, so offsets stay those of the text
    pieces, position = [], 0
    for k, reference in enumerate(query.references):
        pieces.append(query.text[position : reference.start])
        width = reference.end - reference.start
        pieces.append(f"r{k}".ljust(width, "_"))
        position = reference.end
    pieces.append(query.text[position:])
    try:
        tree = sqlglot.parse_one("".join(pieces), dialect="spark")
    except (sqlglot.errors.ParseError, sqlglot.errors.TokenError):
        return ""
    if not isinstance(tree, sqlglot.exp.Select) or number >= len(tree.expressions):
        return ""
    if any(isinstance(item, sqlglot.exp.Star) or item.find(sqlglot.exp.Star) for item in tree.expressions):
        return ""
    starts = [n._meta["start"] for n in tree.expressions[number].walk() if n._meta and "start" in n._meta]
    if not starts:
        return ""
    # where the query text begins in the statement, from its first reference's recorded position
    first = query.references[0]
    starts_of_lines = text_lines.line_starts(definition.text)
    if not first.line or first.line > len(starts_of_lines):
        return ""
    body = starts_of_lines[first.line - 1] + first.column - 1 - first.start
    line, column = text_lines.position_in(starts_of_lines, body + min(starts))
    return f" (at line {line}, column {column})"


def conform(frame, schema: T.StructType, view: str, part: int):
    """``frame`` (a part query's result) as the view's columns: each taken by name and cast to the
    view's type (a widening, checked at creation)."""
    from pyspark.sql import functions as F

    found = {name.lower(): name for name in frame.columns}
    if len(found) != len(frame.columns) or set(found) != {f.name.lower() for f in schema.fields}:
        raise ValidationError(
            f"view {view}: the query for part {part} returns columns ({', '.join(frame.columns)}), "
            f"the view has ({', '.join(schema.fieldNames())}); a view created before UPDATE columns "
            f"were matched by name must be created again",
            array=view,
        )
    by_name = {f.name.lower(): f.dataType for f in frame.schema.fields}
    columns = []
    for field in schema.fields:
        source = found[field.name.lower()]
        column = F.col(f"`{source}`")
        if not _same(by_name[field.name.lower()], field.dataType):
            column = column.cast(field.dataType)
        columns.append(column.alias(field.name))
    return frame.select(*columns)


__all__ = ["check_update_columns", "conform", "widens"]
