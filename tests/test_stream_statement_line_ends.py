"""Stream statements saved with old Mac (``\\r``) or Windows (``\\r\\n``) line endings: a ``--``
comment ends at the line's end, as Spark's lexer ends it, and errors found in a window view's
select list are placed at the line and column an editor shows. References: ``str.splitlines``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.model.errors import ParseError
from arrayviews.streams.literals import string_literals

BREAKS = ["\n", "\r", "\r\n"]


@settings(max_examples=60, deadline=None)
@given(
    comment=st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=8),
    value=st.text(st.characters(blacklist_characters="'\\\r\n", blacklist_categories=("Cs",)), max_size=6),
    brk=st.sampled_from(BREAKS),
)
def test_a_comment_ends_at_any_line_break(comment, value, brk):
    """Before: after '-- ...\\r' the comment ran on to the next '\\n', hiding the literal (and every
    literal of the statement after it) from the literal keeping."""
    text = f"x -- {comment}{brk}= '{value}'"
    start = text.index("'", len(text) - len(value) - 2)
    assert string_literals(text) == [(start, len(text))]


def _editor_position(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset].splitlines(keepends=True)
    if not before or before[-1].endswith(("\r", "\n")):
        return len(before) + 1, 1
    return len(before), len(before[-1]) + 1


@pytest.mark.parametrize("brk", BREAKS)
def test_an_unknown_column_of_a_window_view_is_placed_as_an_editor_shows_it(db, brk):
    """Before: with '\\r' endings the line was 1 and the column counted from the statement's start."""
    db.sql(f"CREATE STREAM M{len(brk)} (ts timestamp, s string, x bigint) PARTITION LENGTH 60 TIME COLUMN ts")
    text = brk.join(
        [
            f"CREATE VIEW W{len(brk)} AS",
            "  SELECT s,",
            "         sum(nope) AS m",
            f"  FROM M{len(brk)} [WINDOW 1 MINUTES] GROUP BY s",
        ]
    )
    with pytest.raises(ParseError) as raised:
        db.sql(text)
    assert (raised.value.line, raised.value.column) == _editor_position(text, text.index("sum(nope)"))
