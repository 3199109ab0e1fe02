"""The types rows are stored with: the Arrow type a table's files are written with and the Iceberg
type of each Spark column type a table may hold, the check that a schema holds only those, and a
part table's Arrow and Iceberg schemas (its columns, then ``_part``)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pyarrow as pa
from pyiceberg import types as iceberg
from pyiceberg.schema import Schema
from pyspark.sql import types as T

from arrayviews.model.errors import ValidationError
from arrayviews.model.names import PART

_SIMPLE_TYPES: dict[type, tuple[pa.DataType, iceberg.IcebergType]] = {
    T.BooleanType: (pa.bool_(), iceberg.BooleanType()),
    T.IntegerType: (pa.int32(), iceberg.IntegerType()),
    T.LongType: (pa.int64(), iceberg.LongType()),
    T.FloatType: (pa.float32(), iceberg.FloatType()),
    T.DoubleType: (pa.float64(), iceberg.DoubleType()),
    T.StringType: (pa.string(), iceberg.StringType()),
    # Spark timestamps are instants: microseconds, UTC-adjusted (Iceberg timestamptz).
    T.TimestampType: (pa.timestamp("us", tz="UTC"), iceberg.TimestamptzType()),
    T.TimestampNTZType: (pa.timestamp("us"), iceberg.TimestampType()),
    T.DateType: (pa.date32(), iceberg.DateType()),
}
SUPPORTED_TYPES = "boolean, int, bigint, float, double, string, timestamp, timestamp_ntz, date, decimal"


def storage_types(
    data_type: T.DataType, nested: bool = False, ids: Iterator[int] | None = None
) -> tuple[pa.DataType, iceberg.IcebergType] | None:
    """The Arrow type files are written with and the Iceberg type of a Spark column type (None if
    the type cannot be stored). With ``nested``, also an array of such values or of structs of
    them (a window view's queues keep their entries so: streams/windows.py); ``ids`` numbers
    the nested Iceberg fields (a placeholder numbering without)."""
    if isinstance(data_type, T.DecimalType):
        return pa.decimal128(data_type.precision, data_type.scale), iceberg.DecimalType(
            data_type.precision, data_type.scale
        )
    if nested and isinstance(data_type, T.ArrayType):
        numbers = ids if ids is not None else itertools.count(1)
        element_id = next(numbers)
        element = _element_types(data_type.elementType, numbers)
        if element is None:
            return None
        return pa.list_(element[0]), iceberg.ListType(element_id, element[1], element_required=False)
    return _SIMPLE_TYPES.get(type(data_type))


def _element_types(
    data_type: T.DataType, ids: Iterator[int]
) -> tuple[pa.DataType, iceberg.IcebergType] | None:
    """An array's element: a stored value, or a struct of stored values (nothing nested deeper)."""
    if not isinstance(data_type, T.StructType):
        return storage_types(data_type)
    arrow_fields, iceberg_fields = [], []
    for member in data_type.fields:
        types = storage_types(member.dataType)
        if types is None:
            return None
        arrow_fields.append(pa.field(member.name, types[0]))
        iceberg_fields.append(iceberg.NestedField(next(ids), member.name, types[1], required=False))
    return pa.struct(arrow_fields), iceberg.StructType(*iceberg_fields)


def check_storable(schema: T.StructType, label: str, nested: bool = False) -> None:
    """Raise ValidationError naming the first column whose type cannot be stored, or ``_part``
    (``nested``: arrays of values or of structs of values are stored too, see ``storage_types``)."""
    for column in schema.fields:
        if column.name == PART:
            raise ValidationError(
                f"{label}: column name {PART} is reserved for the part number", array=label, column=PART
            )
        if storage_types(column.dataType, nested) is None:
            raise ValidationError(
                f"{label}, column {column.name}: type {column.dataType.simpleString()} cannot be stored "
                f"(supported: {SUPPORTED_TYPES})",
                array=label,
                column=column.name,
                value=column.dataType.simpleString(),
            )


def with_part(schema: T.StructType) -> T.StructType:
    """The user columns followed by the long ``_part`` column."""
    return T.StructType([*schema.fields, T.StructField(PART, T.LongType(), True)])


def arrow_schema_of(schema: T.StructType) -> pa.Schema:
    """The Arrow schema of stored rows: user columns (storage types) plus ``_part``."""
    fields = [pa.field(c.name, storage_types(c.dataType, nested=True)[0]) for c in schema.fields]
    return pa.schema([*fields, pa.field(PART, pa.int64())])


def iceberg_schema_of(schema: T.StructType) -> Schema:
    """The Iceberg schema of stored rows (all columns optional, ``_part`` last; the fields inside
    an array column numbered after them)."""
    inner = itertools.count(len(schema.fields) + 2)
    fields = [
        iceberg.NestedField(number, c.name, storage_types(c.dataType, True, inner)[1], required=False)
        for number, c in enumerate(schema.fields, start=1)
    ]
    fields.append(iceberg.NestedField(len(fields) + 1, PART, iceberg.LongType(), required=False))
    return Schema(*fields)
