"""Spark SQL string literals spelling a given string in each of the ways Spark reads (for the tests).

Spark SQL (4.x) reads ``'...'`` and ``"..."`` with backslash escapes and a doubled quote standing for
one, ``r'...'`` without any escapes, and adjacent literals as one concatenated string.
"""

from __future__ import annotations

from hypothesis import strategies as st

STYLES = ("backslash", "doubled", "double-quoted", "raw", "adjacent")

# Quotes, backslashes, escape letters Spark decodes after a backslash, LIKE wildcards, white space,
# and characters beyond ASCII (accented, CJK, astral).
_ALPHABET = list("ab'\"\\`%_ \n\tnrtu0Z") + ["é", "☃", "中", "😀", "\u00a0"]
VALUES = st.text(alphabet=st.sampled_from(_ALPHABET), max_size=10)


def _escaped(value: str, quote: str, doubled: bool) -> str:
    body = value.replace("\\", "\\\\")
    return body.replace(quote, quote + quote if doubled else "\\" + quote)


def spark_literal(value: str, style: str) -> str | None:
    """A literal Spark reads as ``value`` (None when ``style`` cannot spell it)."""
    if style == "backslash":
        return "'" + _escaped(value, "'", doubled=False) + "'"
    if style == "doubled":
        return "'" + _escaped(value, "'", doubled=True) + "'"
    if style == "double-quoted":
        return '"' + _escaped(value, '"', doubled=True) + '"'
    if style == "raw":
        return None if "'" in value else "r'" + value + "'"
    if style == "adjacent":
        half = len(value) // 2
        return spark_literal(value[:half], "doubled") + " " + spark_literal(value[half:], "backslash")
    raise ValueError(style)


@st.composite
def literals(draw) -> tuple[str, str]:
    """``(value, literal)`` with ``literal`` one spelling of ``value``."""
    value = draw(VALUES)
    style = draw(st.sampled_from([s for s in STYLES if spark_literal(value, s) is not None]))
    return value, spark_literal(value, style)
