"""Printing results on the terminal: relations as tables that fit the width (or CSV, JSON), text as is.

Every value reaches rich as a ``Text`` object or with markup and emoji off, so nothing a value holds
(``[i=1:10:5; j=0:9:5]``, ``[bold]``, ``:smile:``) is ever read as markup. A table whose columns do
not fit the terminal unfolded is printed vertically, one block of ``column  value`` lines per row (like
``psql``'s expanded mode); values wider than their column fold onto further lines, never cut.
"""

from __future__ import annotations

import decimal
import io
import json
import math
import sys
from typing import TextIO

import numpy as np
import pandas as pd
import pyarrow as pa
from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

#: How many rows (cells of an array result) a table shows; CSV and JSON print them all.
PREVIEW_ROWS = 20
#: Output formats of commands that print relations.
FORMATS = ("table", "csv", "json")


def console(file: TextIO | None = None, width: int | None = None) -> Console:
    """A console on ``file`` (standard output by default), ``width`` columns wide or as wide as the
    terminal (``$COLUMNS`` when set)."""
    return Console(
        file=file or sys.stdout, width=width, markup=False, emoji=False, highlight=False, soft_wrap=False
    )


# -- values ------------------------------------------------------------------------------------------
def cell_text(value: object, text_column: bool = False) -> str:
    """How one value is written in a table: floats in the shortest text that reads back as the same
    number (``1.0000001``, ``-0.0``, ``1e+16``), integers in full, nulls as ``NULL`` (so a null
    differs from an empty string; NaN in a column of text is pandas' null there)."""
    if value is None or value is pd.NA:
        return "NULL"
    if value is pd.NaT:
        return "NaT"
    if isinstance(value, float | np.floating):
        if math.isnan(value):
            return "NULL" if text_column else "NaN"
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    return visible(str(value))


#: Control characters (C0 but the line break, DEL, C1, Unicode's line separators) as a terminal must not receive them: a C0
#: one or DEL as its Unicode control picture (ESC as '␛'), a C1 one as its escape ('\x85').
_CONTROLS = {code: chr(0x2400 + code) for code in range(0x20) if code not in (0x09, 0x0A)}
_CONTROLS |= {0x7F: "\u2421"} | {code: f"\\x{code:02x}" for code in range(0x80, 0xA0)}
_CONTROLS |= {0x2028: "\\u2028", 0x2029: "\\u2029"}  # Unicode's line and paragraph separators


def visible(text: str) -> str:
    """``text`` as a table cell shows it: tabs expanded to spaces (a tab folded the cell as a line
    break did), other control characters as visible signs, never sent to the terminal (an ESC
    sequence in a value would move the cursor or clear the screen; a CR or BEL vanished)."""
    if text.isprintable():
        return text
    return "\n".join(line.expandtabs(8) for line in text.split("\n")).translate(_CONTROLS)


#: The ``DataFrame.attrs`` key marking frames whose nulls are explicit (None, NA, NaT; NaN only in
#: text columns), so that a float NaN in them is a value: rows of arrays and Spark results.
EXPLICIT_NULLS = "arrayviews_explicit_nulls"
#: The ``DataFrame.attrs`` key marking a preview read one row past what a table shows (a Spark
#: result is not counted): the table says more rows follow, not how many.
MORE_ROWS = "arrayviews_more_rows"


def _text_column(column: pd.Series, explicit: bool = False) -> bool:
    """Whether a float NaN in ``column`` can only be a null: in a column of text (or, unless the
    frame's nulls are explicit, of other objects)."""
    if explicit:
        return pd.api.types.is_string_dtype(column) and not pd.api.types.is_object_dtype(column)
    return pd.api.types.is_string_dtype(column) or pd.api.types.is_object_dtype(column)


def _text_columns(frame: pd.DataFrame) -> list[bool]:
    explicit = bool(frame.attrs.get(EXPLICIT_NULLS))
    return [_text_column(frame.iloc[:, k], explicit) for k in range(frame.shape[1])]


def rows_frame(table: pa.Table) -> pd.DataFrame:
    """A relation's Arrow rows as pandas for printing: integers exact, and a float column holding
    nulls as objects (None for a null, the float otherwise), so a NaN value is not taken for a null."""
    from arrayviews.operators.reads import exact_pandas

    frame = exact_pandas(table)
    for index, field in enumerate(table.schema):
        column = table.column(index)
        if pa.types.is_floating(field.type) and column.null_count:
            frame.isetitem(index, pd.Series(column.to_pylist(), dtype=object, index=frame.index))
    frame.attrs[EXPLICIT_NULLS] = True
    return frame


def _csv_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """With explicit nulls, a float NaN value is written ``NaN`` (LOAD reads it back as NaN; an empty
    field is a null)."""
    if not frame.attrs.get(EXPLICIT_NULLS):
        return frame
    out = frame.copy()
    for k, text in enumerate(_text_columns(frame)):
        column = frame.iloc[:, k]
        if text or not (pd.api.types.is_float_dtype(column) or pd.api.types.is_object_dtype(column)):
            continue
        nan = column.map(lambda v: isinstance(v, float | np.floating) and math.isnan(v)).astype(bool)
        if nan.any():
            out.isetitem(k, column.astype(object).where(~nan, "NaN"))
    return out


def _csv_text(frame: pd.DataFrame) -> str:
    """The frame as CSV (RFC 4180), a null an empty field and an empty text a quoted one (``""``),
    as LOAD reads them back; pandas writes both as an empty field."""
    frame = _csv_frame(frame)
    texts = [k for k in range(frame.shape[1]) if _text_column(frame.iloc[:, k])]
    empties = {
        k: pd.Series(
            [isinstance(v, str) and v == "" for v in frame.iloc[:, k]], index=frame.index, dtype=bool
        )
        for k in texts
    }
    empties = {k: empty for k, empty in empties.items() if empty.any()}
    if not empties:
        return frame.to_csv(index=False)
    # a field pandas leaves unquoted and no value holds stands for each empty text, then is quoted
    stand_in = "\ue000"
    held = {v for k in texts for v in frame.iloc[:, k] if isinstance(v, str)} | set(map(str, frame.columns))
    while any(stand_in in value for value in held):
        stand_in += "\ue000"
    frame = frame.copy()
    for k, empty in empties.items():
        frame.isetitem(k, frame.iloc[:, k].astype(object).where(~empty, stand_in))
    lines = frame.to_csv(index=False)
    return lines.replace(stand_in, '""')


def _json_value(value: object, nan_is_null: bool = True) -> object:
    if value is None or value is pd.NaT or value is pd.NA:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None if nan_is_null else "NaN"
        return value if math.isfinite(value) else str(value)
    if isinstance(value, int | bool | str):
        return value
    if isinstance(value, decimal.Decimal):  # Spark's DECIMAL (uint64 values reach Spark as DECIMAL(20, 0))
        return _json_decimal(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, np.ndarray):
        return [_json_value(v) for v in value.tolist()]
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def _json_decimal(value: decimal.Decimal) -> object:
    """A JSON number of the same value: an integer in full, else the float that reads back as it;
    the text when no float does (``0.1000000000000000000000000001``), so nothing is rounded."""
    if not value.is_finite():
        return str(value)
    if value == value.to_integral_value():
        return int(value)
    as_float = float(value)
    return as_float if decimal.Decimal(repr(as_float)) == value else str(value)


# -- relations ---------------------------------------------------------------------------------------
def fits(frame: pd.DataFrame, width: int) -> bool:
    """Whether ``frame`` fits ``width`` columns as a horizontal table with no value folded (each
    column as wide as its header or its longest value on screen, where a CJK character or an
    emoji takes two columns, plus borders and padding)."""
    needed = 1
    texts = _text_columns(frame)
    for position, column in enumerate(frame.columns):
        values = frame.iloc[:, position]
        text = texts[position]
        longest = max(
            (cell_len(line) for v in values for line in cell_text(v, text).splitlines() or [""]),
            default=0,
        )
        needed += max(cell_len(visible(str(column))), longest) + 3
    return needed <= width


def horizontal_table(frame: pd.DataFrame, title: str | None = None) -> Table:
    """A rich table of ``frame``'s rows; values fold onto more lines when the width is short."""
    table = Table(title=Text(title) if title else None, box=box.SIMPLE_HEAD, show_lines=False)
    for position, column in enumerate(frame.columns):
        values = frame.iloc[:, position]
        numeric = (pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)) or (
            values.notna().any() and all(isinstance(v, decimal.Decimal) for v in values.dropna())
        )
        table.add_column(
            Text(visible(str(column))),
            justify="right" if numeric else "left",
            overflow="fold",
            min_width=cell_len(visible(str(column))),
        )
    texts = _text_columns(frame)
    for row in frame.itertuples(index=False):
        table.add_row(*[Text(cell_text(v, text)) for v, text in zip(row, texts, strict=True)])
    return table


def vertical_tables(frame: pd.DataFrame, title: str | None = None) -> list[Table]:
    """One two-column grid per row (column name, value), for rows too wide for the terminal."""
    grids = []
    names = [visible(str(c)) for c in frame.columns]
    texts = _text_columns(frame)
    width = max((cell_len(n) for n in names), default=0)
    for number, row in enumerate(frame.itertuples(index=False), start=1):
        label = f"{title} row {number}" if title else f"row {number}"
        grid = Table(title=Text(label), title_justify="left", box=box.MINIMAL, show_header=False)
        grid.add_column(style="bold", no_wrap=True, min_width=width)
        grid.add_column(overflow="fold")
        for name, value, text in zip(names, row, texts, strict=True):
            grid.add_row(Text(name), Text(cell_text(value, text)))
        grids.append(grid)
    return grids


def json_names(columns) -> list[str]:
    """The keys of JSON rows: the column names, a repeated one (Spark SQL allows ``SELECT 1 AS a, 2 AS
    a``) numbered from its second use (``a``, ``a_2``, skipping names taken), so no value is lost."""
    names = [str(c) for c in columns]
    taken, keys = set(names), []
    for name in names:
        key, number = name, 1
        while key in keys or (key != name and key in taken):
            number += 1
            key = f"{name}_{number}"
        keys.append(key)
    return keys


def print_frame(
    frame: pd.DataFrame,
    title: str | None = None,
    output: str = "table",
    file: TextIO | None = None,
    limit: int | None = PREVIEW_ROWS,
    width: int | None = None,
) -> None:
    """Print a relation as a table (the first ``limit`` rows), CSV or JSON (every row)."""
    out = file or sys.stdout
    if output == "csv":
        out.write(_csv_text(frame))
        return
    if output == "json":
        names = json_names(frame.columns)
        # NaN is a null in a frame whose nulls are not explicit, else only in text columns
        nulls = _text_columns(frame) if frame.attrs.get(EXPLICIT_NULLS) else [True] * len(names)
        rows = [
            {k: _json_value(v, null) for k, v, null in zip(names, row, nulls, strict=True)}
            for row in frame.itertuples(index=False)
        ]
        out.write(json.dumps(rows, ensure_ascii=False) + "\n")
        return
    if output != "table":
        raise ValueError(f"unknown output format {output!r}; use one of {', '.join(FORMATS)}")
    screen = console(out, width)
    shown = frame if limit is None else frame.head(limit)
    if fits(shown, screen.width):
        screen.print(horizontal_table(shown, title))
    else:
        for grid in vertical_tables(shown, title):
            screen.print(grid)
    if frame.attrs.get(MORE_ROWS) and len(frame) > len(shown):
        screen.print(Text(f"... more rows ({len(shown)} shown)"))
    elif len(frame) > len(shown):
        screen.print(Text(f"... {len(frame)} rows in all ({len(shown)} shown)"))
    elif not len(frame):
        screen.print(Text("(no rows)"))


def print_text(text: str, file: TextIO | None = None, width: int | None = None) -> None:
    """Print ``text`` exactly (no markup, no emoji codes, folded at the terminal width)."""
    console(file, width).print(Text(text), overflow="fold")


# -- whatever a statement or API call returned -------------------------------------------------------
def relation_of(result: object, output: str) -> tuple[pd.DataFrame, str | None] | None:
    """The rows a result holds (as pandas) and a heading, or None for results that are not relations.

    A Spark DataFrame is read in full for CSV and JSON and up to one row past the preview for tables.
    """
    from arrayviews.array import Array
    from arrayviews.scheduling.maintenance_pass import MaintenancePass

    if isinstance(result, MaintenancePass):  # MAINTAIN: one row per view the pass dealt with
        rows = result.to_pandas()
        if "error" in rows.columns:  # a view without an error shows nothing there, not NULL
            rows["error"] = rows["error"].astype(object).where(rows["error"].notna(), "")
        return rows, result.heading if len(rows) else f"{result.heading}: nothing to do"
    if isinstance(result, pd.DataFrame):
        return result, None
    if isinstance(result, Array):
        cells = with_time_labels(rows_frame(result.to_arrow()), result.schema)
        return cells, f"{result.schema.to_text()}: {len(cells)} non-empty cell(s)"
    if _is_spark_frame(result):
        if output != "table":
            return _spark_rows(result), None
        rows = _spark_rows(result.limit(PREVIEW_ROWS + 1))
        rows.attrs[MORE_ROWS] = len(rows) > PREVIEW_ROWS
        return rows, None
    return None


def show(
    result: object,
    title: str | None = None,
    output: str = "table",
    file: TextIO | None = None,
    width: int | None = None,
) -> None:
    """Print whatever a statement or API call returned: relations in ``output`` format, other
    results (schema text, EXPLAIN, write and refresh results, handles) as plain text."""
    if result is None:
        return
    found = relation_of(result, output)
    if found is None:
        text = result if isinstance(result, str) else str(result)
        if output == "json":
            (file or sys.stdout).write(json.dumps(text, ensure_ascii=False) + "\n")
        else:
            print_text(text, file, width)
        return
    frame, heading = found
    if heading and output == "table":
        print_text(heading, file, width)
        if frame.empty:  # an empty array (as CREATE ARRAY returns it), a pass with nothing to do
            return
    print_frame(frame, title, output, file, width=width)


def render(result: object, output: str = "table", width: int = 80, title: str | None = None) -> str:
    """What :func:`show` prints, as a string, at a given width."""
    buffer = io.StringIO()
    show(result, title, output, buffer, width)
    return buffer.getvalue()


def with_time_labels(frame: pd.DataFrame, schema) -> pd.DataFrame:
    """``frame`` (cells of an array of ``schema``) with each time dimension's cell numbers replaced
    by the times they label, as INSERT, WHERE and LOAD take them and ``to_xarray`` shows them; a
    dimension holding a cell past ``datetime64``'s range keeps its cell numbers."""
    from arrayviews.model.errors import SchemaError
    from arrayviews.model.time_scale import TimeScale

    for dimension in schema.dimensions:
        if isinstance(dimension.scale, TimeScale) and dimension.name in frame.columns:
            try:
                times = dimension.scale.coordinates(frame[dimension.name].to_numpy(dtype=np.int64))
            except SchemaError:
                continue
            frame[dimension.name] = pd.Series(times, index=frame.index)
    return frame


def _spark_rows(frame) -> pd.DataFrame:
    """The rows of a Spark DataFrame as pandas, integers exact: through Arrow, because ``toPandas``
    turns an integer column holding nulls into float64 (9007199254740993 shown as ...992). Times
    are shown in the session's time zone without it, as ``toPandas`` shows them."""
    import pyarrow.compute as pc

    zone = frame.sparkSession.conf.get("spark.sql.session.timeZone")
    table = frame.toArrow()
    for index, field in enumerate(table.schema):
        if pa.types.is_timestamp(field.type) and field.type.tz is not None:
            zoned = table.column(index).cast(pa.timestamp(field.type.unit, zone))
            table = table.set_column(index, field.name, pc.local_timestamp(zoned))
    return rows_frame(table)


def _is_spark_frame(value: object) -> bool:
    module = type(value).__module__
    return module.startswith("pyspark.sql") and type(value).__name__ == "DataFrame"
