"""The rows of Parquet or CSV files loaded into a stream, read in-process with the meaning Spark's
reader gives them in ``Stream.load`` (typed CSV fields as Spark's CSV parser reads them; Parquet
columns as Spark types them, times without a zone in UTC), as an Arrow table of the stream's
stored types. Only what is certain is read here: any other field, type or file raises
:class:`~arrayviews.execution.local_cells.NotCertain` and the stream reads the files with Spark."""

from __future__ import annotations

import datetime as dt
import math
import re

import numpy as np
import pyarrow as pa

from arrayviews.execution.local_cells import (
    NotCertain,
    cell_files,
    csv_fields,
    float32_of,
    format_of,
    parquet_table,
)
from arrayviews.storage.files import filesystem

#: Typed CSV fields Spark's CSV parser surely reads alike (its Integer.parseInt, parseDouble with
#: the "NaN", "Inf" and "-Inf" spellings, Scala's toBoolean, and ISO times in UTC).
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SPECIAL = {"NaN": math.nan, "Inf": math.inf, "-Inf": -math.inf, "Infinity": math.inf, "-Infinity": -math.inf}
_TIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_RANGES = {pa.int32(): (-(2**31), 2**31 - 1), pa.int64(): (-(2**63), 2**63 - 1)}


def read_stream_rows(path: str, file_format: str | None, target: pa.Schema, time_column: str) -> pa.Table:
    """The rows of the files at ``path`` (columns by name, as they are in the files) in the stream's
    stored Arrow types ``target`` (its columns, without ``_part``); rows without a time are left to
    Spark's path, which names them."""
    table = _rows(path, file_format, target)
    if table.column(time_column).null_count:
        raise NotCertain("rows without a time")
    return table


def _rows(path: str, file_format: str | None, target: pa.Schema) -> pa.Table:
    kind = format_of(path, file_format)
    fs, _ = filesystem(path)
    files = cell_files(path)
    if not files:
        raise NotCertain("the folder holds no file Spark reads")
    if kind == "parquet":
        tables = [parquet_table(fs, f.path) for f in files]
        if any(t.schema != tables[0].schema for t in tables):
            raise NotCertain("the Parquet files have different columns or types")
        table = pa.concat_tables(tables)
        # times without a zone are UTC (the session's zone): Spark casts them to instants
        columns = [
            c.cast(pa.timestamp("us", "UTC")) if c.type == pa.timestamp("us") else c for c in table.columns
        ]
        table = pa.table(columns, names=table.column_names)
        if sorted(table.column_names) != sorted(target.names):
            raise NotCertain("the columns differ from the stream's (Spark names the difference)")
        for name in target.names:
            if table.column(name).type != target.field(name).type:
                raise NotCertain(f"column {name} has another type than the stream's (Spark checks it)")
        return table.select(target.names)
    if kind != "csv":
        raise NotCertain(f"the format {kind!r} is Spark's to refuse")
    parts = [csv_fields(fs, f.path) for f in files]
    if any(names != parts[0][0] for names, _ in parts):
        raise NotCertain("the CSV files have different header lines")
    names = list(parts[0][0])
    if sorted(names) != sorted(target.names):
        raise NotCertain("the header names other columns than the stream's (Spark names the difference)")
    table = pa.concat_tables([t for _, t in parts])
    return pa.table(
        {name: _typed(table.column(name).combine_chunks(), target.field(name).type) for name in target.names}
    )


def _typed(column: pa.Array, kind: pa.DataType) -> pa.Array:
    """CSV fields (text, nulls for empty fields) as Spark's CSV parser types them."""
    if kind == pa.string():
        return column
    encoded = column.dictionary_encode()
    values = [_value(text, kind) for text in encoded.dictionary.to_pylist()]
    present = np.asarray(encoded.indices.is_valid())
    picked = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    if not values:
        return pa.nulls(len(column), kind)
    return pa.array(values, kind).take(pa.array(picked, mask=~present))


def _value(text: str, kind: pa.DataType) -> object:
    """One non-empty field, or NotCertain where Spark's parser may read it otherwise or refuse it."""
    if kind in _RANGES and _INTEGER.fullmatch(text):
        low, high = _RANGES[kind]
        if low <= int(text) <= high:
            return int(text)
    elif pa.types.is_floating(kind) and (_DECIMAL.fullmatch(text) or text in _SPECIAL):
        value = _SPECIAL[text] if text in _SPECIAL else float(text)
        return float32_of(value, text) if kind == pa.float32() and text not in _SPECIAL else value
    elif kind == pa.bool_() and text.lower() in ("true", "false"):
        return text.lower() == "true"
    elif kind == pa.timestamp("us", "UTC") and _TIME.fullmatch(text):
        year, month, day, hour, minute, second, fraction = _TIME.fullmatch(text).groups()
        if year != "0000":
            try:
                moment = dt.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second))
            except ValueError:
                raise NotCertain(f"{text!r} names no time (Spark refuses it its way)") from None
            return moment.replace(tzinfo=dt.UTC) + dt.timedelta(
                microseconds=int((fraction or "0").ljust(6, "0"))
            )
    elif kind == pa.date32() and _DATE.fullmatch(text):
        try:
            return dt.date(*(int(p) for p in _DATE.fullmatch(text).groups()))
        except ValueError:
            raise NotCertain(f"{text!r} names no day (Spark refuses it its way)") from None
    raise NotCertain(f"Spark's CSV parser may read {text!r} as {kind} otherwise, or refuse it")
