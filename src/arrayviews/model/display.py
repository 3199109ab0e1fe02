"""How handles show themselves: a readable multi-line ``repr`` and a notebook HTML table built from
the same rows (label, value). Each handle (array, view, stream, stream view) gathers its own rows
from metadata; :func:`described` turns a failure to read them into a row, so a repr never raises."""

from __future__ import annotations

import html
from collections.abc import Callable

Rows = list[tuple[str, str]]


def described(build: Callable[[], Rows]) -> Rows:
    """The rows ``build`` gives, or one row saying why the relation cannot be read now."""
    try:
        return build()
    except Exception as error:  # noqa: BLE001 - a repr shows why it cannot read, it never raises
        first = str(error).splitlines()[0] if str(error) else ""
        return [("unreadable", f"{type(error).__name__}: {first}")]


def as_text(heading: str, rows: Rows) -> str:
    """``<heading>`` then one aligned ``label  value`` line per row."""
    width = max((len(label) for label, _ in rows), default=0)
    return "\n".join([f"<{heading}>", *(f"  {label.ljust(width)}  {value}" for label, value in rows)])


def as_html(heading: str, rows: Rows) -> str:
    """The rows as an HTML table for Jupyter, every label and value escaped."""
    cells = "".join(
        f"<tr><th style='text-align:left'>{html.escape(label)}</th>"
        f"<td style='text-align:left'><code>{html.escape(value)}</code></td></tr>"
        for label, value in rows
    )
    return f"<div><strong>{html.escape(heading)}</strong><table>{cells}</table></div>"
