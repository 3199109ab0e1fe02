"""Cell files (Parquet or CSV, a file or a folder, ``.csv.gz`` too) read in-process with the meaning
Spark gives them in :func:`~arrayviews.execution.spark_cells.read_cell_files`: the same files of a
folder, the same rows in the same order, the same CSV fields and conversions, the same errors.

Where this reader cannot be sure of Spark's meaning (a text Spark's casts may read otherwise, an odd
line ending or quoting, a type Spark maps its own way, a folder Spark would list otherwise) it
raises :class:`NotCertain` and the caller reads the files with Spark instead of guessing.
"""

from __future__ import annotations

import datetime as dt
import errno
import fractions
import gzip
import io
import math
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from arrayviews.execution.cell_file_checks import check_cell_files, hidden_name, vanished
from arrayviews.execution.cost import Estimate
from arrayviews.model.cell_checks import check_columns, spelled_columns
from arrayviews.model.errors import NotFoundError, ValidationError
from arrayviews.model.schema import ArraySchema
from arrayviews.model.time_scale import TimeScale
from arrayviews.storage.files import filesystem

#: The Spark jobs a LOAD runs (reading, the conversion checks, the cell checks, staging): what the
#: Spark side of the cost model is charged for it.
SPARK_LOAD_JOBS = 4
#: Cells guessed per byte of a CSV file when choosing the executor (a row of small numbers takes
#: about eight bytes of text); a gzip file is counted at four times its size.
CSV_BYTES_PER_CELL = 8
GZIP_RATIO = 4
#: Spark never cuts a file this small into pieces (spark.sql.files.openCostInBytes, the least split).
SPLIT_BYTES = 4 * 1024 * 1024


class NotCertain(Exception):
    """The in-process reader cannot be sure to give Spark's meaning of the files (the message says
    why); read them with Spark."""


@dataclass(frozen=True)
class CellFile:
    """One file Spark reads, with its size (Spark reads a folder's files largest first)."""

    path: str
    size: int


@dataclass
class CellRows:
    """The rows of cell files in Spark's order, with the row count and size of each file (rows of
    two files of the same size may come in either order on Spark)."""

    table: pa.Table
    files: list[CellFile]
    rows: list[int]

    def first(self, mask: np.ndarray) -> int:
        """The index of the row Spark's ``first()`` over the rows where ``mask`` holds returns;
        NotCertain when two files of one size hold such rows (Spark lists them in either order)."""
        hits = np.flatnonzero(mask)
        row = int(hits[0])
        ends = np.cumsum(self.rows)
        starts = ends - np.asarray(self.rows, dtype=np.int64)
        index = int(np.searchsorted(ends, row, side="right"))
        holding = [k for k in range(len(self.files)) if mask[starts[k] : ends[k]].any()]
        if len(holding) > 1 and any(f.size > SPLIT_BYTES for f in self.files):
            # Spark cuts a file past its split size into pieces it orders by their own sizes
            raise NotCertain("several files hold bad values, and Spark reads pieces of the larger ones")
        for other, file in enumerate(self.files):
            if (
                other != index
                and file.size == self.files[index].size
                and mask[starts[other] : ends[other]].any()
            ):
                raise NotCertain(f"files of equal size ({file.size} bytes) both hold the first bad value")
        return row

    def place(self, row: int) -> tuple[str, int]:
        """The name of the file holding row ``row`` (an index into all rows) and the row's data row
        there, from 1."""
        ends = np.cumsum(self.rows)
        index = int(np.searchsorted(ends, row, side="right"))
        start = int(ends[index]) - self.rows[index]
        return self.files[index].path.rsplit("/", 1)[-1], row - start + 1


def field_place(path: str, file_name: str, row: int) -> str:
    """Where a field of a loaded file is: the file (``path`` itself, or its file ``file_name`` when
    ``path`` is a folder) and the data row (from 1; a CSV's header is not counted)."""
    fs, inner = filesystem(path)
    folder = fs.get_file_info(inner).type.name == "Directory"
    file = f"{path.rstrip('/')}/{file_name}" if folder else path
    return f"{file} (data row {row})"


def format_of(path: str, file_format: str | None) -> str:
    """The format Spark is asked to read: as given, else from the extension (csv, else parquet)."""
    if file_format:
        return file_format.lower()
    lowered = path.lower().rstrip("/")
    return "csv" if lowered.endswith(".csv") or lowered.endswith(".csv.gz") else "parquet"


def cell_files(path: str) -> list[CellFile]:
    """The files Spark reads at ``path``, in the order its tasks read them: largest first (a stable
    sort of the names); NotFoundError when there is nothing there."""
    fs, inner = filesystem(path)
    info = fs.get_file_info(inner)
    if info.type.name == "NotFound":
        raise NotFoundError(f"no file or folder at {path}")
    if info.type.name == "File":
        if hidden_name(info.base_name):
            raise NotCertain(f"the file name {info.base_name!r} is one Spark hides in folders")
        return [CellFile(inner, info.size)]
    from pyarrow.fs import FileSelector

    files = []
    for entry in sorted(fs.get_file_info(FileSelector(inner)), key=lambda e: e.base_name):
        name = entry.base_name
        if name.startswith(("_metadata", "_common_metadata")) or name.endswith("._COPYING_"):
            raise NotCertain(f"the folder holds {name!r}, which Spark lists its own way")
        if hidden_name(name):
            continue
        if entry.type.name != "File":
            raise NotCertain(f"the folder holds the folder {name!r} (Spark reads it as a partition)")
        files.append(CellFile(entry.path, entry.size))
    return sorted(files, key=lambda f: -f.size)


def load_estimate(path: str, file_format: str | None) -> Estimate:
    """What loading ``path`` reads, from the file listing and Parquet footers only: bytes, files, and
    cells (Parquet: the rows of the footers; CSV: guessed from the bytes)."""
    try:
        files = cell_files(path)
    except (NotFoundError, NotCertain, OSError):
        return Estimate(0, 0, 0, SPARK_LOAD_JOBS)
    size = sum(f.size for f in files)
    if format_of(path, file_format) == "csv":
        text = sum(f.size * (GZIP_RATIO if f.path.lower().endswith(".gz") else 1) for f in files)
        cells = text // CSV_BYTES_PER_CELL
    else:
        fs, _ = filesystem(path)
        cells = 0
        for file in files:
            try:
                with fs.open_input_file(file.path) as handle:
                    cells += pq.ParquetFile(handle).metadata.num_rows
            except (OSError, pa.ArrowInvalid):
                cells += file.size // CSV_BYTES_PER_CELL
    return Estimate(cells, size, len(files), SPARK_LOAD_JOBS)


# -- reading ----------------------------------------------------------------------------------------
def read_cell_files(path: str, schema: ArraySchema, file_format: str | None = None) -> CellRows:
    """The cells of Parquet or CSV files as Spark's read_cell_files gives them (CSV values checked
    and converted by name), in Spark's row order."""
    fs, inner = filesystem(path)
    if fs.get_file_info(inner).type.name == "NotFound":
        raise NotFoundError(f"array {schema.name}: no file or folder at {path}")
    kind = format_of(path, file_format)
    if kind not in ("parquet", "csv"):
        raise ValidationError(f"array {schema.name}: unknown file format {kind!r} (use parquet or csv)")
    check_cell_files(path, kind, f"array {schema.name}")
    files = cell_files(path)
    if not files:
        raise NotCertain("the folder holds no file Spark reads")
    try:
        return _read(fs, path, files, kind, schema)
    except FileNotFoundError as error:  # removed since the listing: Spark's job fails alike
        raise vanished(f"array {schema.name}", path, error.filename or path) from None


def _read(fs, path: str, files: list[CellFile], kind: str, schema: ArraySchema) -> CellRows:
    """The rows of the listed ``files`` (FileNotFoundError naming one removed since the listing)."""
    if kind == "parquet":
        tables = [parquet_table(fs, f.path) for f in files]
        names = [t.column_names for t in tables]
        if any(n != names[0] for n in names):
            raise NotCertain("the Parquet files have different columns (Spark takes one file's)")
        if len({n.lower() for n in names[0]}) != len(names[0]):
            raise NotCertain("two Parquet columns differ only in case")
        types = [t.schema for t in tables]
        if any(not t.equals(types[0]) for t in types):
            raise NotCertain("the Parquet files have different column types")
        table = pa.concat_tables(tables)
        table = table.rename_columns(spelled_columns(table.column_names, schema))
        rows = CellRows(table, files, [t.num_rows for t in tables])
        texts = text_times(table.column_names, [pa.types.is_string(t) for t in table.schema.types], schema)
        return CellRows(_converted(rows, path, schema, texts), files, rows.rows) if texts else rows
    headers, tables = zip(*[csv_fields(fs, f.path) for f in files], strict=True)
    if any(h != headers[0] for h in headers):
        raise NotCertain("the CSV files have different header lines (Spark takes one file's)")
    raw = pa.concat_tables(tables).rename_columns(spelled_columns(list(headers[0]), schema))
    rows = CellRows(raw, files, [t.num_rows for t in tables])
    check_columns(raw.column_names, schema)
    return CellRows(_converted(rows, path, schema), files, rows.rows)


# -- Parquet ------------------------------------------------------------------------------------------
#: Parquet integer annotations Spark reads as its own types: (bit width, signed) -> Arrow type.
_INTEGERS = {
    (8, True): pa.int8(),
    (16, True): pa.int16(),
    (32, True): pa.int32(),
    (64, True): pa.int64(),
    (8, False): pa.int16(),
    (16, False): pa.int32(),
    (32, False): pa.int64(),
}


def _spark_arrow_type(column) -> pa.DataType:
    """The Arrow form of the Spark type Spark gives a Parquet leaf column, or NotCertain."""
    physical, logical = column.physical_type, column.logical_type
    annotation = logical.type if logical is not None else "NONE"
    text = str(logical)
    if column.max_repetition_level > 0 or column.max_definition_level > 1:
        raise NotCertain(f"column {column.name} is nested or repeated")
    if physical == "BOOLEAN" and annotation == "NONE":
        return pa.bool_()
    if physical == "FLOAT" and annotation == "NONE":
        return pa.float32()
    if physical == "DOUBLE" and annotation == "NONE":
        return pa.float64()
    if physical == "BYTE_ARRAY" and annotation == "STRING":
        return pa.string()
    if physical in ("INT32", "INT64") and annotation == "NONE":
        return pa.int32() if physical == "INT32" else pa.int64()
    if physical in ("INT32", "INT64") and annotation == "INT":
        match = re.search(r"bitWidth=(\d+), isSigned=(\w+)", text)
        if match:
            kind = _INTEGERS.get((int(match.group(1)), match.group(2) == "true"))
            if kind is not None:
                return kind
    if physical == "INT32" and annotation == "DATE":
        return pa.date32()
    if physical == "INT64" and annotation == "TIMESTAMP" and "timeUnit=nanoseconds" not in text:
        utc = "isAdjustedToUTC=true" in text
        return pa.timestamp("us", "UTC") if utc else pa.timestamp("us")
    raise NotCertain(f"column {column.name} has Parquet type {physical} {text}")


def parquet_table(fs, path: str) -> pa.Table:
    """A Parquet file's rows as Spark types them (unsigned integers widened, timestamps in
    microseconds, dictionaries decoded); NotCertain for a type Spark maps its own way."""
    try:
        with fs.open_input_file(path) as handle:
            parquet = pq.ParquetFile(handle)
            schema = parquet.schema
            if len(schema) != len(parquet.schema_arrow):
                raise NotCertain("the Parquet file has nested columns")
            types = [_spark_arrow_type(schema.column(k)) for k in range(len(schema))]
            table = parquet.read(use_pandas_metadata=False)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "no such file", path) from None
    except (OSError, pa.ArrowException) as error:
        raise NotCertain(f"pyarrow cannot read {path}: {error}") from None
    columns = []
    for column, kind in zip(table.columns, types, strict=True):
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        columns.append(column.cast(kind))
    return pa.table(columns, names=[schema.column(k).name for k in range(len(schema))])


# -- CSV ----------------------------------------------------------------------------------------------
_FIELD = r'(?:"(?:[^"]|"")*"|[^",\r\n]*)'
_RECORD = rf"{_FIELD}(?:,{_FIELD})*"
_WELL_FORMED = {
    "\n": re.compile(rf"(?:{_RECORD}\n)*{_RECORD}"),
    "\r\n": re.compile(rf"(?:{_RECORD}\r\n)*{_RECORD}"),
}
_FIRST_RECORD = re.compile(rf"{_RECORD}")
_ONE_FIELD = re.compile(_FIELD)
_QUOTED = re.compile(r'"(?:[^"]|"")*"')


def _csv_text(fs, path: str) -> str:
    """The text of a CSV file (gunzipped by its ``.gz`` name, as Hadoop's codecs go), or NotCertain
    where Spark's reading of the bytes is not plain UTF-8."""
    try:
        with fs.open_input_stream(path, compression=None) as stream:  # gunzipped below, by name
            data = stream.read()
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "no such file", path) from None
    if path.lower().endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise NotCertain(f"{path} is not a gzip file Python reads ({error})") from None
    elif re.search(r"\.(bz2|deflate|lz4|snappy|zst|zstd|br|xz)$", path.lower()):
        raise NotCertain(f"{path} has a compression suffix Spark decodes its own way")
    if data.startswith(b"\xef\xbb\xbf"):
        raise NotCertain(f"{path} starts with a byte order mark")
    if b"\x00" in data:
        raise NotCertain(f"{path} holds NUL characters (Spark's CSV null marker here)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotCertain(f"{path} is not UTF-8 text (Spark replaces what it cannot decode)") from None


def _fields(record: str) -> tuple[str, ...]:
    """The fields of one well-formed record, unquoted."""
    fields, position = [], 0
    while True:
        field = _ONE_FIELD.match(record, position).group(0)
        fields.append(field[1:-1].replace('""', '"') if field.startswith('"') else field)
        position += len(field) + 1
        if position > len(record):
            return tuple(fields)


def csv_fields(fs, path: str) -> tuple[tuple[str, ...], pa.Table]:
    """(the header's names, the fields as text) of one CSV file as RFC 4180 reads it: an empty
    field is a null, a quoted empty field the empty text. Only well-formed files with one kind of
    line end are read here; a file with a field Spark's parser may cut otherwise is NotCertain."""
    text = _csv_text(fs, path)
    outside = _QUOTED.sub("", text)  # the line ends between records (quoted fields keep theirs)
    if "\r" in outside:
        if outside.replace("\r\n", "").count("\r") or outside.replace("\r\n", "").count("\n"):
            raise NotCertain(f"{path} mixes line ends")
        ending = "\r\n"
    else:
        ending = "\n"
        if re.search("\r(?!\n)", text):
            raise NotCertain(f"{path} holds a carriage return alone in a quoted field")
    if not outside or outside.startswith(ending) or f"{ending}{ending}" in outside:
        raise NotCertain(f"{path} is empty or holds an empty line")
    if _WELL_FORMED[ending].fullmatch(text) is None:
        raise NotCertain(f"{path} has a quote RFC 4180 does not place (Spark's parser may read it its way)")
    names = _fields(_FIRST_RECORD.match(text).group(0))
    if any(not n for n in names) or len({n.lower() for n in names}) != len(names):
        raise NotCertain(f"{path} has an empty or repeated column name (Spark renames those)")
    try:
        table = pa_csv.read_csv(
            io.BytesIO(text.encode("utf-8")),
            read_options=pa_csv.ReadOptions(use_threads=False),
            parse_options=pa_csv.ParseOptions(newlines_in_values=True, ignore_empty_lines=False),
            convert_options=pa_csv.ConvertOptions(
                column_types={n: pa.string() for n in names},
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )
    except pa.ArrowInvalid as error:  # a row with more or fewer fields than the header
        raise NotCertain(f"{path}: {error}") from None
    if tuple(table.column_names) != names:
        raise NotCertain(f"{path}: the header was read otherwise")
    if ending == "\r\n" and any(pc.any(pc.match_substring_regex(c, "[\r\n]")).as_py() for c in table.columns):
        raise NotCertain(
            f"{path}: a quoted line break in a file of CRLF lines (Spark's parser may change it)"
        )
    return names, table


# -- conversions of CSV text, as Spark's try_cast --------------------------------------------------
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INFINITY = re.compile(r"([+-]?)inf(?:inity)?", re.IGNORECASE)
_NAN = re.compile(r"nan", re.IGNORECASE)
_TRUE = {"t", "true", "y", "yes", "1"}
_FALSE = {"f", "false", "n", "no", "0"}
#: ISO times Spark surely reads alike (a zone only after the minutes, which read_cell_files makes
#: seconds for Spark); any other digits-and-signs text is left to Spark.
_TIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]{1,6}))?)?"
    r"(Z|([+-])([0-9]{2}):([0-9]{2}))?)?"
)
#: Characters Spark's casts may trim or read in ways not certain here.
_ODD = re.compile(r"[\s\x00-\x1f\x7f-\x9f\u00a0\u1680\u180e\u2000-\u200f\u2028-\u202f\u205f\u3000\ufeff]")
_FLOAT_CHARACTERS = set("0123456789+-.eEdDfFxXpPaAbBcCiInNtTyY")
_INTEGER_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (-(2**15), 2**15 - 1),  # Spark holds uint8 in SMALLINT, uint16 in INT, uint32 in BIGINT
    "uint16": (-(2**31), 2**31 - 1),
    "uint32": (-(2**63), 2**63 - 1),
}
_ARROW_OF = {
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "uint8": pa.int16(),
    "uint16": pa.int32(),
    "uint32": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
    "string": pa.string(),
    "datetime64": pa.int64(),  # microseconds, made a TIMESTAMP after conversion
}
_BAD = object()


def _uncertain(text: str, kind: str) -> NotCertain:
    return NotCertain(f"Spark may read {text!r} as a {kind} otherwise")


def _integer(text: str, kind: str) -> object:
    """A text as Spark's try_cast to an integer type reads it (``_BAD`` for a null)."""
    if _INTEGER.fullmatch(text):
        low, high = _INTEGER_RANGES[kind]
        value = int(text)
        return value if low <= value <= high else _BAD
    if _ODD.search(text) or set(text) <= set("0123456789+-."):
        raise _uncertain(text, kind)
    return _BAD


def float32_of(value: float, text: str) -> float:
    """``text`` (read as the double ``value``) rounded once to float32, as Java's parseFloat does
    (rounding the double again could land on the other side of a midpoint)."""
    with np.errstate(over="ignore"):
        single = float(np.float32(value))
        if single == value or not math.isfinite(single):
            return single
        toward = np.float32(math.inf if value > single else -math.inf)
        other = float(np.nextafter(np.float32(single), toward))
    below, above = sorted((single, other))
    if not math.isfinite(other) or value - below != above - value:
        return single  # not at a midpoint of two float32s: rounding once or twice agrees
    exact, middle = fractions.Fraction(text), fractions.Fraction(value)
    if exact == middle:
        return single  # a true tie: numpy rounds it to even, as Java does
    return above if exact > middle else below


def _floating(text: str, kind: str) -> object:
    if _DECIMAL.fullmatch(text):
        value = float(text)
        return float32_of(value, text) if kind == "float32" else value
    infinity = _INFINITY.fullmatch(text)
    if infinity:
        return -math.inf if infinity.group(1) == "-" else math.inf
    if _NAN.fullmatch(text):
        return math.nan
    if _ODD.search(text) or set(text) <= _FLOAT_CHARACTERS:
        raise _uncertain(text, kind)
    return _BAD


def _boolean(text: str) -> object:
    folded = text.lower()
    if folded in _TRUE:
        return True
    if folded in _FALSE:
        return False
    if _ODD.search(text):
        raise _uncertain(text, "boolean")
    return _BAD


def _micros(text: str) -> object:
    """An ISO time (UTC unless it names its zone) as microseconds since 1970, as Spark's cast to
    TIMESTAMP reads it; ``_BAD`` where it gives null."""
    match = _TIME.fullmatch(text)
    if match is None:
        if _ODD.search(text) or re.search(r"[0-9]", text):
            raise _uncertain(text, "time")
        return _BAD
    year, month, day, hour, minute, second, fraction, zone, sign, zone_hours, zone_minutes = match.groups()
    if year == "0000" or (zone_hours is not None and (int(zone_hours) > 17 or int(zone_minutes) > 59)):
        raise _uncertain(text, "time")
    try:
        moment = dt.datetime(
            int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0), tzinfo=dt.UTC
        )
    except ValueError:
        return _BAD  # no such day or time: Spark's cast gives null
    micros = (moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
    micros += int((fraction or "0").ljust(6, "0"))
    if sign is not None:
        micros -= (1 if sign == "+" else -1) * (int(zone_hours) * 3600 + int(zone_minutes) * 60) * 1_000_000
    return micros


def _time_cell(text: str, scale: TimeScale) -> object:
    """A text on a time dimension: a cell number, or an ISO time labelling a cell, exact as
    spark_cells.time_cells; ``_BAD`` when it is neither."""
    if _INTEGER.fullmatch(text):
        value = int(text)
        if not -(2**63) <= value < 2**63:
            raise _uncertain(text, "time")  # no BIGINT: Spark's cast to a time decides
        return value
    micros = _micros(text)
    if micros is _BAD:
        return _BAD
    offset = micros * 1000 - scale.nanoseconds(0)
    step = scale.nanoseconds(1) - scale.nanoseconds(0)
    if offset % step or abs(offset // step) > 2**62:
        return _BAD
    return offset // step


def text_times(names: list[str], texts: list[bool], schema: ArraySchema) -> list[str]:
    """The columns of a Parquet file (``texts``: whether each holds text) that are times written as
    text, read as a CSV's fields are: on a time dimension, or for a datetime64 attribute."""
    return [
        name
        for name, text in zip(names, texts, strict=True)
        if text
        and (
            isinstance(schema.dimension(name).scale, TimeScale)
            if schema.has_dimension(name)
            else schema.has_attribute(name) and schema.attribute(name).type == "datetime64"
        )
    ]


def _converted(rows: CellRows, path: str, schema: ArraySchema, names: list[str] | None = None) -> pa.Table:
    """The text columns (``names``, else all) converted to the columns' types as read_cell_files
    does: spaces around a number cut, around a text kept; the first bad value of the first column
    with any is refused, naming the file and how many such values there are."""
    raw = rows.table
    columns, problems = {}, {}
    for name in raw.column_names:
        if names is not None and name not in names:
            columns[name] = raw.column(name)
            problems[name] = np.zeros(raw.num_rows, bool)
            continue
        dimension = schema.dimension(name) if schema.has_dimension(name) else None
        kind = "int64" if dimension is not None else schema.attribute(name).type
        scale = dimension.scale if dimension is not None and isinstance(dimension.scale, TimeScale) else None
        column = raw.column(name).combine_chunks()
        if kind == "string":
            columns[name] = column
            problems[name] = np.zeros(len(column), bool)
            continue
        if kind not in _ARROW_OF:
            raise NotCertain(f"Spark casts text to {kind} its own way")
        encoded = column.dictionary_encode()
        values, bad = [], []
        for text in encoded.dictionary.to_pylist():
            trimmed = text.strip(" ")
            if trimmed == "":
                value = None
            elif scale is not None:
                value = _time_cell(trimmed, scale)
            elif kind == "bool":
                value = _boolean(trimmed)
            elif kind == "datetime64":
                value = _micros(trimmed)
            elif kind.startswith("float"):
                value = _floating(trimmed, kind)
            else:
                value = _integer(trimmed, kind)
            bad.append(value is _BAD)
            values.append(None if value is _BAD else value)
        present = np.asarray(encoded.indices.is_valid())
        picked = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        target = pa.int64() if dimension is not None else _ARROW_OF[kind]
        dictionary = pa.array(values, target)
        columns[name] = (
            dictionary.take(pa.array(picked, mask=~present)) if len(values) else pa.nulls(len(column), target)
        )
        if kind == "datetime64" and dimension is None:
            columns[name] = columns[name].cast(pa.timestamp("us", "UTC"))
        problems[name] = (
            present & np.asarray(bad, bool)[picked] if len(values) else np.zeros(len(column), bool)
        )
    for name in raw.column_names:
        count = int(problems[name].sum())
        if not count:
            continue
        first = rows.first(problems[name])
        bad = raw.column(name)[first].as_py()
        raise unreadable_field(schema, name, bad, field_place(path, *rows.place(first)), count)
    return pa.table(columns)


def unreadable_field(schema, name: str, bad: object, place: str, count: int) -> ValidationError:
    """The error of a cell file's field that column ``name`` cannot read (both readers raise it);
    ``place`` names its file and row (:func:`field_place`)."""
    scale = schema.dimension(name).scale if schema.has_dimension(name) else None
    kind = (
        f"an integer coordinate or a time labelling a cell ({scale.to_text()})"
        if isinstance(scale, TimeScale)
        else "an integer coordinate"
        if schema.has_dimension(name)
        else f"{'an' if schema.attribute(name).type.startswith('int') else 'a'} {schema.attribute(name).type} value"
    )
    return ValidationError(
        f"array {schema.name}, column {name}: {bad!r} in {place} is not {kind} ({count} such value(s))",
        array=schema.name,
        column=name,
        value=bad,
    )
