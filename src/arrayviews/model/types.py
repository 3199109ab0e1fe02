"""Attribute value types: the supported types, their numpy and Arrow equivalents, and the one rule of
which values each accepts.

The *computing* types (int32, int64, float32, float64, bool) go everywhere: cell expressions,
aggregates, windows, views. The *storage* types (int8, int16, uint8, uint16, uint32, uint64 and
datetime64, nanoseconds since the epoch, UTC) keep the data's own numpy dtype through storage, reads,
subarrays, joins and xarray; operations that compute with values refuse them with an error naming the
type (:func:`computing_problem`); ``count`` works on every type."""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrayviews.model.errors import SchemaError

#: Supported attribute type names, in the spelling used by schemas.
ATTRIBUTE_TYPES: tuple[str, ...] = (
    "int32",
    "int64",
    "float32",
    "float64",
    "bool",
    "int8",
    "int16",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "datetime64",
    "string",
)
#: Types that cell expressions, aggregates (other than count), windows and views compute with.
COMPUTING_TYPES: tuple[str, ...] = ATTRIBUTE_TYPES[:5]

_NUMPY = {
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "bool": np.dtype(np.bool_),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
    "datetime64": np.dtype("datetime64[ns]"),
    # Variable-width UTF-8 text: numpy object arrays of Python str in memory (Arrow string layout,
    # offsets plus UTF-8 bytes, in storage: storage/codec.py).
    "string": np.dtype(object),
}
_ARROW = {
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
    "int8": pa.int8(),
    "int16": pa.int16(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "datetime64": pa.timestamp("ns"),
    "string": pa.string(),
}
# SciDB and numpy spellings accepted in schemas, mapped to ours.
_ALIASES = {
    "int": "int64",
    "integer": "int64",
    "double": "float64",
    "float": "float32",
    "boolean": "bool",
    "datetime": "datetime64",
    "datetime64[ns]": "datetime64",
    "timestamp": "datetime64",
    "str": "string",
    "text": "string",
    "utf8": "string",
    "varchar": "string",
}


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


def computing_problem(type_name: str, operation: str) -> str | None:
    """Why ``operation`` (``"sum"``, ``"a window"``, ``"a cell expression"``...) cannot compute with
    values of ``type_name``, or None when it can."""
    kind = normalize_type(type_name)
    if kind in COMPUTING_TYPES:
        return None
    if kind == "datetime64":
        return (
            f"{operation} does not apply to datetime64 values (instants have no sum, mean or arithmetic here)"
        )
    if kind == "string":
        return (
            f"{operation} does not apply to string values (text has no sum, mean or arithmetic; "
            "count, min and max work on strings)"
        )
    return (
        f"{operation} does not compute with {kind} values (a storage type); store the attribute as "
        "int32, int64 or float64 to compute with it"
    )


#: Arrow types of the chunk statistics (min/max) where they differ from the values': Spark, which
#: reads the statistics, has no unsigned integers, so they go into a signed type holding every value;
#: Iceberg has no nanosecond timestamps, so datetime64 statistics are int64 nanoseconds.
_STATISTICS = {
    "uint8": pa.int16(),
    "uint16": pa.int32(),
    "uint32": pa.int64(),
    "uint64": pa.decimal128(20, 0),
    "datetime64": pa.int64(),
}


def statistics_type(type_name: str) -> pa.DataType:
    """The Arrow type of the chunk statistics (min/max) of an attribute of ``type_name``."""
    kind = normalize_type(type_name)
    return _STATISTICS.get(kind, _ARROW[kind])


def statistics_array(values, type_name: str, mask: np.ndarray | None = None) -> pa.Array:
    """Chunk statistics (a numpy array, or a list of scalars with None for none; ``mask`` marks
    missing ones) as an Arrow array of :func:`statistics_type`, every value exact."""
    kind = normalize_type(type_name)
    target = statistics_type(kind)
    if isinstance(values, list):
        if kind == "uint64":
            return pa.array([None if v is None else decimal.Decimal(int(v)) for v in values], target)
        if kind == "datetime64":
            return pa.array(
                [None if v is None else int(np.datetime64(v, "ns").astype(np.int64)) for v in values], target
            )
        return pa.array(values, target)
    values = np.asarray(values)
    if kind == "uint64":
        listed = [
            None if mask is not None and m else decimal.Decimal(int(v))
            for v, m in zip(values.tolist(), _flags(mask, len(values)), strict=True)
        ]
        return pa.array(listed, target)
    if kind == "datetime64":
        values = values.astype("datetime64[ns]").view(np.int64)
    elif target != _ARROW[kind]:
        values = values.astype(target.to_pandas_dtype())
    return pa.array(values, target, mask=mask)


def _flags(mask: np.ndarray | None, count: int) -> list[bool]:
    return [False] * count if mask is None else np.asarray(mask, dtype=bool).tolist()


def type_of_dtype(dtype: np.dtype) -> str:
    """The attribute type name for a numpy dtype, or raise SchemaError if it is not supported."""
    dtype = np.dtype(dtype)
    if dtype.kind == "M":
        dtype = np.dtype("datetime64[ns]")
    if dtype.kind in "UOT":  # numpy text (fixed width, object or StringDType): variable-width strings
        return "string"
    for name, candidate in _NUMPY.items():
        if candidate == dtype:
            return name
    raise SchemaError(
        f"numpy dtype {dtype} has no arrayviews attribute type; supported: {', '.join(ATTRIBUTE_TYPES)}"
    )


# -- which values a column type accepts (the one rule for arrays, statements and streams) ----------
#: Integers up to this magnitude convert exactly to a float of each width (2**(mantissa bits + 1)).
EXACT_INTEGER_LIMIT = {16: 2**11, 32: 2**24, 64: 2**53}
FLOAT32_MAX = float(np.finfo(np.float32).max)


def _numeric_kind(data_type: pa.DataType) -> str | None:
    """``"b"``, ``"i"`` or ``"f"`` for bool, integer (signed or not) and floating Arrow types."""
    if pa.types.is_boolean(data_type):
        return "b"
    if pa.types.is_integer(data_type):
        return "i"
    if pa.types.is_floating(data_type):
        return "f"
    return None


def as_arrow(data_type: pa.DataType | np.dtype | str) -> pa.DataType:
    """An Arrow type from an Arrow type, a numpy dtype, or an attribute type name."""
    if isinstance(data_type, pa.DataType):
        return data_type
    if isinstance(data_type, str) and data_type.strip().lower() in (*_NUMPY, *_ALIASES):
        return arrow_type(data_type)
    return pa.from_numpy_dtype(np.dtype(data_type))


def accepts(target: pa.DataType | str, given: pa.DataType | np.dtype | str) -> bool:
    """Whether values of type ``given`` may be stored in a column of type ``target``, subject to each
    value passing :func:`value_limits` (a column of nulls only is accepted by every type).

    bool takes bool only; integer types take integers of any width and sign, and decimals of scale 0
    (how Spark carries uint64 and integers past 64 bits); floating types take integers and floats; decimals take integers and decimals; strings take strings; timestamps and
    dates their own kind. Floats never go into integer columns (not even 1.0) and nothing else into
    bool columns.
    """
    target = as_arrow(target)
    try:
        given = as_arrow(given)
    except (TypeError, ValueError, pa.ArrowNotImplementedError):  # e.g. numpy object arrays
        return False
    if pa.types.is_null(given):
        return True
    target_kind, given_kind = _numeric_kind(target), _numeric_kind(given)
    if target_kind == "b":
        return given_kind == "b"
    if target_kind == "i":
        return given_kind == "i" or is_integral_decimal(given)
    if target_kind == "f":
        return given_kind in ("i", "f")
    if pa.types.is_decimal(target):
        return pa.types.is_decimal(given) or given_kind == "i"
    if pa.types.is_string(target):
        return pa.types.is_string(given) or pa.types.is_large_string(given)
    if pa.types.is_timestamp(target):
        return pa.types.is_timestamp(given)
    if pa.types.is_date(target):
        return pa.types.is_date(given)
    return given == target


def value_limits(
    target: pa.DataType | str, given: pa.DataType | np.dtype | str
) -> tuple[int | float, int | float] | None:
    """The inclusive range the (finite) values of an accepted numeric type must lie in to be stored in
    ``target`` without changing, or None when every value of ``given`` fits.

    Integers must fit the target integer range; integers stored as floats must be exactly
    representable (magnitude up to 2**24 for float32, 2**53 for float64); floats stored as float32
    round to the nearest float32 but must not overflow (NaN and infinities stay what they are).
    """
    if not accepts(target, given):
        return None
    target, given = as_arrow(target), as_arrow(given)
    target_kind, given_kind = _numeric_kind(target), _numeric_kind(given)
    if target_kind == "i" and is_integral_decimal(given):
        low, high = _integer_range(target)
        widest = 10**given.precision - 1
        return None if low <= -widest and widest <= high else (low, high)
    if given_kind is None or target_kind in (None, "b"):
        return None
    if target_kind == "i":
        low, high = _integer_range(target)
        given_low, given_high = _integer_range(given)
        return None if low <= given_low and given_high <= high else (low, high)
    if given_kind == "i":
        limit = EXACT_INTEGER_LIMIT[target.bit_width]
        given_low, given_high = _integer_range(given)
        return None if -limit <= given_low and given_high <= limit else (-limit, limit)
    if target.bit_width < given.bit_width:
        top = float(np.finfo(target.to_pandas_dtype()).max)
        return (-top, top)
    return None


def is_integral_decimal(data_type: pa.DataType) -> bool:
    """Whether ``data_type`` is a decimal of scale 0: whole numbers, as Spark gives uint64 values."""
    return pa.types.is_decimal(data_type) and data_type.scale == 0


def integral_decimals_as_integers(target: pa.DataType | str, column: pa.Array) -> tuple[pa.Array, int | None]:
    """A scale-0 decimal column bound for the integer type ``target``: the column cast to ``target``
    and None when every (non-null) value is in its range, else the column unchanged and the index
    of the first value that is not (compared as decimals, so values past 64 bits are named exactly)."""
    target = as_arrow(target)
    low, high = _integer_range(target)
    wide = pa.decimal128(38, 0) if column.type.precision <= 38 else pa.decimal256(76, 0)
    outside = pc.or_(
        pc.less(column, pa.scalar(decimal.Decimal(low), wide)),
        pc.greater(column, pa.scalar(decimal.Decimal(high), wide)),
    ).fill_null(False)
    if pc.any(outside).as_py():
        return column, int(np.flatnonzero(np.asarray(outside))[0])
    return column.cast(target), None


def _integer_range(data_type: pa.DataType) -> tuple[int, int]:
    info = np.iinfo(data_type.to_pandas_dtype())
    return int(info.min), int(info.max)


def always_fits(target: pa.DataType | str, given: pa.DataType | np.dtype | str) -> bool:
    """Whether every value of type ``given`` is stored in ``target`` unchanged (no value check needed)."""
    if not accepts(target, given):
        return False
    target, given = as_arrow(target), as_arrow(given)
    if pa.types.is_null(given) or given == target:
        return True
    if is_integral_decimal(given) and _numeric_kind(target) == "i":
        return value_limits(target, given) is None
    if _numeric_kind(given) is not None and _numeric_kind(target) is not None:
        return value_limits(target, given) is None
    if pa.types.is_decimal(target):
        whole = target.precision - target.scale
        if _numeric_kind(given) == "i":
            return len(str(_integer_range(given)[0])) - 1 <= whole
        return given.scale <= target.scale and given.precision - given.scale <= whole
    return pa.types.is_string(target) or pa.types.is_date(target)


def first_misfit(
    target: pa.DataType | str, values: np.ndarray, valid: np.ndarray | None = None
) -> int | None:
    """The index of the first value (among ``valid`` ones) that :func:`value_limits` rejects, or None."""
    values = np.asarray(values)
    limits = value_limits(target, values.dtype)
    if limits is None or values.size == 0:
        return None
    low, high = limits
    with np.errstate(invalid="ignore"):
        if values.dtype.kind == "f":
            outside = np.isfinite(values) & ((values < low) | (values > high))
        elif values.dtype.kind == "u":
            outside = values > np.uint64(high) if high >= 0 else np.ones(values.shape, bool)
            if low > 0:
                outside |= values < np.uint64(low)
        else:
            outside = (values < low) | (values > high)
    if valid is not None:
        outside &= np.asarray(valid, dtype=bool)
    if not outside.any():
        return None
    return int(np.flatnonzero(outside.reshape(-1))[0])


#: The instants a datetime64 attribute (nanoseconds) holds, in whole microseconds since 1970:
#: 1677-09-21 00:12:43.145225 to 2262-04-11 23:47:16.854775.
DATETIME64_MICROS = (-(2**63) // 1000 + 1, (2**63 - 1) // 1000)


def misfit_reason(target: pa.DataType | str, value: object) -> str:
    """Why ``value`` (rejected by :func:`value_limits`) cannot be stored in ``target``."""
    target = as_arrow(target)
    name = type_of_arrow(target)
    if pa.types.is_integer(target):
        low, high = _integer_range(target)
        return f"{value} is outside the {name} range {low}..{high}"
    if isinstance(value, (int, np.integer)):
        limit = EXACT_INTEGER_LIMIT[target.bit_width]
        return (
            f"{value} is not exactly representable as {name} (integers up to 2**{limit.bit_length() - 1} are)"
        )
    return f"{value} is outside the {name} range (it would become infinite)"


def type_of_arrow(data_type: pa.DataType) -> str:
    """The attribute type name of an Arrow type when there is one, else Arrow's own name."""
    for name, candidate in _ARROW.items():
        if candidate == data_type:
            return name
    return str(data_type)


def python_value_problem(value: object, target: str) -> str | None:
    """Why a Python scalar (bool, int or float; None is the caller's business) cannot be stored in an
    attribute of type ``target`` under the rule of :func:`accepts` and :func:`value_limits`, or None."""
    target = normalize_type(target)
    if isinstance(value, bool | np.bool_):
        kind: np.dtype = np.dtype(np.bool_)
    elif isinstance(value, int | np.integer):
        if not -(2**63) <= int(value) < 2**64:
            return f"{value} is outside the {target} range"
        kind = np.dtype(np.uint64) if int(value) >= 2**63 else np.dtype(np.int64)
    elif isinstance(value, float | np.floating):
        kind = np.dtype(np.float64)
    else:
        return f"{value!r} is not a{'n' if target.startswith('int') else ''} {target} value"
    if not accepts(target, kind):
        if target == "bool":
            return f"{_literal(value)} is not a bool (use true or false)"
        return f"{_literal(value)} is not a{'n' if target.startswith('int') else ''} {target} value"
    if first_misfit(target, np.array([value], dtype=kind)) is not None:
        return misfit_reason(target, value)
    return None


def _literal(value: object) -> str:
    return str(value).lower() if isinstance(value, bool | np.bool_) else repr(value)


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
