"""Printing results on the terminal with rich: tables for DataFrames and arrays, messages."""

from __future__ import annotations

import pandas as pd
from rich.console import Console
from rich.table import Table

console = Console()

#: How many cells of an array result the CLI prints.
PREVIEW_ROWS = 20


def table_of(frame: pd.DataFrame, title: str | None = None, limit: int = PREVIEW_ROWS) -> Table:
    table = Table(title=title, show_lines=False)
    for column in frame.columns:
        table.add_column(
            str(column), justify="right" if pd.api.types.is_numeric_dtype(frame[column]) else "left"
        )
    for row in frame.head(limit).itertuples(index=False):
        table.add_row(*[_cell(v) for v in row])
    return table


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def show(result: object, title: str | None = None) -> None:
    """Print whatever a statement or API call returned."""
    from arrayviews.array import Array

    if result is None:
        return
    if isinstance(result, pd.DataFrame):
        console.print(table_of(result, title))
        if len(result) > PREVIEW_ROWS:
            console.print(f"... {len(result)} rows in all")
    elif isinstance(result, Array):
        cells = result.to_pandas()
        console.print(f"[bold]{result.schema.to_text()}[/bold]: {len(cells)} non-empty cell(s)")
        if len(cells):
            console.print(table_of(cells))
    else:
        console.print(str(result))
