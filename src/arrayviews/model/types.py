"""Attribute value types: the five supported types and their numpy and Arrow equivalents."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from arrayviews.model.errors import SchemaError

#: Supported attribute type names, in the spelling used by schemas.
ATTRIBUTE_TYPES: tuple[str, ...] = ("int32", "int64", "float32", "float64", "bool")

_NUMPY = {
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "bool": np.dtype(np.bool_),
}
_ARROW = {
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
}
# SciDB spellings accepted in schemas, mapped to ours.
_ALIASES = {"int": "int64", "integer": "int64", "double": "float64", "float": "float32", "boolean": "bool"}


def normalize_type(name: str) -> str:
    """Return the canonical type name for ``name`` (accepting SciDB aliases), or raise SchemaError."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _NUMPY:
        raise SchemaError(f"unknown attribute type {name!r}; supported: {', '.join(ATTRIBUTE_TYPES)}")
    return key


def numpy_dtype(type_name: str) -> np.dtype:
    """The numpy dtype that stores values of ``type_name``."""
    return _NUMPY[normalize_type(type_name)]


def arrow_type(type_name: str) -> pa.DataType:
    """The Arrow type that stores values of ``type_name``."""
    return _ARROW[normalize_type(type_name)]


def type_of_dtype(dtype: np.dtype) -> str:
    """The attribute type name for a numpy dtype, or raise SchemaError if it is not supported."""
    dtype = np.dtype(dtype)
    for name, candidate in _NUMPY.items():
        if candidate == dtype:
            return name
    raise SchemaError(
        f"numpy dtype {dtype} has no arrayviews attribute type; supported: {', '.join(ATTRIBUTE_TYPES)}"
    )


def can_store(source: np.dtype, target: str) -> bool:
    """True if values of numpy dtype ``source`` convert to attribute type ``target`` without loss of kind.

    Integers widen to larger integers and to floats, float32 widens to float64, bool stays bool.
    Floats never go into integer attributes and nothing but bool goes into bool attributes.
    """
    source = np.dtype(source)
    target_dtype = numpy_dtype(target)
    if target_dtype.kind == "b":
        return source.kind == "b"
    if source.kind == "b":
        return False
    if target_dtype.kind in "iu":
        return source.kind in "iu" and np.can_cast(source, target_dtype, casting="safe")
    if target_dtype.kind == "f":
        return source.kind in "iuf" and (source.kind != "f" or source.itemsize <= target_dtype.itemsize)
    return False


#: The Spark SQL name of each attribute type: how cell expressions spell it (``CAST(x AS BIGINT)``) and
#: how Spark reports it. One row per type; a new attribute type adds its Spark name here.
SQL_TYPE_NAMES: dict[str, str] = {
    "int32": "INT",
    "int64": "BIGINT",
    "float32": "FLOAT",
    "float64": "DOUBLE",
    "bool": "BOOLEAN",
}
# Spark's other spellings of the same types (as sqlglot normalises them, plus Spark's own).
_SQL_SYNONYMS = {"INTEGER": "INT", "LONG": "BIGINT", "REAL": "FLOAT", "BOOL": "BOOLEAN"}


def sql_type_name(type_name: str) -> str:
    """The Spark SQL name (INT, BIGINT, FLOAT, DOUBLE, BOOLEAN) of an attribute type."""
    return SQL_TYPE_NAMES[normalize_type(type_name)]


def type_of_sql_name(name: str) -> str | None:
    """The attribute type a Spark SQL type name stands for, or None if arrays have no such type."""
    key = name.strip().upper()
    key = _SQL_SYNONYMS.get(key, key)
    for type_name, sql_name in SQL_TYPE_NAMES.items():
        if sql_name == key:
            return type_name
    return None
