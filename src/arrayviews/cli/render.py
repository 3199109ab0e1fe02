"""Printing results on the terminal: relations as tables that fit the width (or CSV, JSON), text as is.

Every value reaches rich as a ``Text`` object or with markup and emoji off, so nothing a value holds
(``[i=1:10:5; j=0:9:5]``, ``[bold]``, ``:smile:``) is ever read as markup. A table whose columns do
not fit the terminal unfolded is printed vertically, one block of ``column  value`` lines per row (like
``psql``'s expanded mode); values wider than their column fold onto further lines, never cut.
"""

from __future__ import annotations

import io
import json
import math
import sys
from typing import TextIO

import numpy as np
import pandas as pd
from rich import box
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
def cell_text(value: object) -> str:
    """How one value is written in a table: floats to 6 significant digits, missing values empty."""
    if value is None or value is pd.NaT:
        return ""
    if isinstance(value, float | np.floating):
        if math.isnan(value):
            return "NaN"
        return f"{value:.6g}"
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _json_value(value: object) -> object:
    if value is None or value is pd.NaT:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return None if math.isnan(value) else value if math.isfinite(value) else str(value)
    if isinstance(value, int | bool | str):
        return value
    if isinstance(value, np.ndarray):
        return [_json_value(v) for v in value.tolist()]
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


# -- relations ---------------------------------------------------------------------------------------
def fits(frame: pd.DataFrame, width: int) -> bool:
    """Whether ``frame`` fits ``width`` columns as a horizontal table with no value folded (each
    column as wide as its header or its longest value, plus borders and padding)."""
    needed = 1
    for column in frame.columns:
        longest = max(
            (len(line) for v in frame[column] for line in cell_text(v).splitlines() or [""]), default=0
        )
        needed += max(len(str(column)), longest) + 3
    return needed <= width


def horizontal_table(frame: pd.DataFrame, title: str | None = None) -> Table:
    """A rich table of ``frame``'s rows; values fold onto more lines when the width is short."""
    table = Table(title=Text(title) if title else None, box=box.SIMPLE_HEAD, show_lines=False)
    for column in frame.columns:
        numeric = pd.api.types.is_numeric_dtype(frame[column]) and not pd.api.types.is_bool_dtype(
            frame[column]
        )
        table.add_column(
            Text(str(column)),
            justify="right" if numeric else "left",
            overflow="fold",
            min_width=len(str(column)),
        )
    for row in frame.itertuples(index=False):
        table.add_row(*[Text(cell_text(v)) for v in row])
    return table


def vertical_tables(frame: pd.DataFrame, title: str | None = None) -> list[Table]:
    """One two-column grid per row (column name, value), for rows too wide for the terminal."""
    grids = []
    names = [str(c) for c in frame.columns]
    width = max((len(n) for n in names), default=0)
    for number, row in enumerate(frame.itertuples(index=False), start=1):
        label = f"{title} row {number}" if title else f"row {number}"
        grid = Table(title=Text(label), title_justify="left", box=box.MINIMAL, show_header=False)
        grid.add_column(style="bold", no_wrap=True, min_width=width)
        grid.add_column(overflow="fold")
        for name, value in zip(names, row, strict=True):
            grid.add_row(Text(name), Text(cell_text(value)))
        grids.append(grid)
    return grids


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
        out.write(frame.to_csv(index=False))
        return
    if output == "json":
        rows = [
            {str(k): _json_value(v) for k, v in zip(frame.columns, row, strict=True)}
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
    if len(frame) > len(shown):
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
        return rows, result.heading if len(rows) else f"{result.heading}: nothing to do"
    if isinstance(result, pd.DataFrame):
        return result, None
    if isinstance(result, Array):
        cells = result.to_pandas()
        return cells, f"{result.schema.to_text()}: {len(cells)} non-empty cell(s)"
    if _is_spark_frame(result):
        frame = result if output != "table" else result.limit(PREVIEW_ROWS + 1)
        return frame.toPandas(), None
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


def _is_spark_frame(value: object) -> bool:
    module = type(value).__module__
    return module.startswith("pyspark.sql") and type(value).__name__ == "DataFrame"
