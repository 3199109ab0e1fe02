"""Lines and columns of a text as an editor shows them: a line ends at ``\\r\\n``, ``\\r`` or ``\\n``.

Every parser reports positions through this one rule, so that a script saved with Windows (``\\r\\n``)
or old Mac (``\\r``) line endings, or a mix, gets the line and column its editor shows. Columns count
characters (a tab is one column, as editors number them); :func:`pointer` lines a caret up under
a column on screen (tabs kept, wide characters taking two cells).
"""

from __future__ import annotations

import bisect
import re
import unicodedata

#: A line break: Windows, old Mac or Unix (``\r\n`` is one break, not two).
LINE_BREAK = re.compile(r"\r\n|\r|\n")


def line_starts(text: str) -> list[int]:
    """The offset at which each line of ``text`` starts (the first is 0)."""
    return [0] + [m.end() for m in LINE_BREAK.finditer(text)]


def position_in(starts: list[int], offset: int) -> tuple[int, int]:
    """1-based line and column of ``offset``, given the :func:`line_starts` of the text."""
    line = bisect.bisect_right(starts, max(offset, 0))
    return line, offset - starts[line - 1] + 1


def position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of ``offset`` in ``text`` (an offset past the end is on the last line)."""
    return position_in(line_starts(text), min(max(offset, 0), len(text)))


def offset_of(text: str, line: int, column: int) -> int:
    """The offset of a 1-based ``line`` and ``column`` of ``text`` (the inverse of :func:`position`)."""
    starts = line_starts(text)
    return starts[min(max(line, 1), len(starts)) - 1] + column - 1


def lines(text: str) -> list[str]:
    """The lines of ``text``, without their breaks (a text ending in a break ends with an empty line)."""
    return LINE_BREAK.split(text)


def pointer(line: str, column: int) -> str:
    """A caret under ``column`` of ``line`` as a terminal shows the line: the tabs before it kept,
    a wide (East Asian) character two cells, a combining mark none."""
    cells = []
    for char in line[: max(column - 1, 0)]:
        if char == "\t":
            cells.append("\t")
        elif unicodedata.combining(char):
            continue
        elif unicodedata.east_asian_width(char) in ("W", "F"):
            cells.append("  ")
        else:
            cells.append(" ")
    return "".join(cells) + "^"


__all__ = ["LINE_BREAK", "line_starts", "lines", "offset_of", "pointer", "position", "position_in"]
