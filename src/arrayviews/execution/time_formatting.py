"""Spark's ``date_format(ts, pattern)`` spelled as DuckDB's ``strftime``, so an in-process query
that labels rows by their hour or day runs in this process instead of costing a Spark job each step.

Spark reads the pattern as a datetime pattern (letters are fields, text in single quotes is copied,
other characters are copied) in its session time zone, UTC here; in-process queries see times as
UTC wall times (``local_sql._naive_times``). Only these fields are spelled, each checked against
Spark itself (tests/test_time_formatting.py); a pattern with any other letter is left to Spark:

====================  =========================  ======================================
Spark                 strftime                   meaning
====================  =========================  ======================================
``yyyy`` / ``yy``     ``%Y`` / ``%y``            year, four digits / last two
``MM`` / ``M``        ``%m`` / ``%-m``           month number, padded / not
``MMM``               ``%b``                     month's short English name (Jan)
``dd`` / ``d``        ``%d`` / ``%-d``           day of the month
``HH`` / ``H``        ``%H`` / ``%-H``           hour of the day (0-23)
``hh``                ``%I``                     hour of the half day (01-12)
``a``                 ``%p``                     AM or PM
``mm`` / ``m``        ``%M`` / ``%-M``           minute
``ss`` / ``s``        ``%S`` / ``%-S``           second
``SSS`` / ``SSSSSS``  ``%g`` / ``%f``            milliseconds / microseconds of the second
``EEE``               ``%a``                     day of the week's short English name (Mon)
====================  =========================  ======================================

The pattern is read from the query's text, not from sqlglot's tree: sqlglot's Spark parser turns
a Java pattern into its own strftime form (losing what it does not know) and adjacent string
literals (``'a' 'b'``, which Spark joins) into a concatenation. A query is rewritten only when
every ``date_format`` in its text has a pattern of string literals alone, each call's pattern can be
told from the tree's, and every first argument is typed TIMESTAMP or DATE; otherwise it is left as
it was, and the query runs on Spark."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import sqlglot
import sqlglot.errors
from sqlglot import exp
from sqlglot.tokens import TokenType

from arrayviews.execution.decimal_guard import annotated
from arrayviews.execution.time_truncation import TIME_TYPES, calls_in

#: (letter, repetitions) of a Spark pattern field and its DuckDB strftime code.
SPARK_FIELDS = {
    ("y", 4): "%Y",
    ("y", 2): "%y",
    ("M", 3): "%b",
    ("M", 2): "%m",
    ("M", 1): "%-m",
    ("d", 2): "%d",
    ("d", 1): "%-d",
    ("H", 2): "%H",
    ("H", 1): "%-H",
    ("h", 2): "%I",
    ("a", 1): "%p",
    ("m", 2): "%M",
    ("m", 1): "%-M",
    ("s", 2): "%S",
    ("s", 1): "%-S",
    ("S", 3): "%g",
    ("S", 6): "%f",
    ("E", 3): "%a",
}


def strftime_of(pattern: str) -> str | None:
    """DuckDB's strftime format meaning Spark's datetime ``pattern``, or None when the pattern
    holds a field not in :data:`SPARK_FIELDS` (or an unclosed quote)."""
    spelled = []
    at = 0
    while at < len(pattern):
        char = pattern[at]
        if char == "'":
            if pattern.startswith("''", at):  # '' outside quotes is one quote
                spelled.append("'")
                at += 2
                continue
            at += 1
            while True:  # a quoted text, in which '' is one quote
                end = pattern.find("'", at)
                if end < 0:
                    return None
                spelled.append(pattern[at:end].replace("%", "%%"))
                if pattern.startswith("''", end):
                    spelled.append("'")
                    at = end + 2
                    continue
                at = end + 1
                break
            continue
        if char.isascii() and char.isalpha():
            run = at
            while run < len(pattern) and pattern[run] == char:
                run += 1
            code = SPARK_FIELDS.get((char, run - at))
            if code is None:
                return None
            spelled.append(code)
            at = run
            continue
        if char in "[]{}#":  # optional sections and reserved characters: Spark's own reading
            return None
        spelled.append("%%" if char == "%" else char)
        at += 1
    return "".join(spelled)


def _literal_patterns(text: str) -> list[tuple[str, str]] | None:
    """For each ``date_format(...)`` call in ``text``, in order: (the source text of its pattern
    argument, the pattern Spark reads from it). None when a call's pattern is not string literals
    alone, or holds a backslash escape, or the text cannot be tokenized."""
    calls = calls_in(text, "DATE_FORMAT")
    if calls is None:
        return None
    tokens, starts = calls
    found = []
    for start in starts:
        depth, at = 0, start
        while at < len(tokens) and not (depth == 0 and tokens[at].token_type == TokenType.COMMA):
            if tokens[at].token_type == TokenType.L_PAREN:
                depth += 1
            elif tokens[at].token_type == TokenType.R_PAREN:
                depth -= 1
                if depth < 0:
                    return None
            at += 1
        strings = []
        at += 1
        while at < len(tokens) and tokens[at].token_type == TokenType.STRING:
            strings.append(tokens[at])
            at += 1
        if not strings or at >= len(tokens) or tokens[at].token_type != TokenType.R_PAREN:
            return None
        source = text[strings[0].start : strings[-1].end + 1]
        if "\\" in source:
            return None
        found.append((source, "".join(s.text for s in strings)))
    return found


def _tree_form(source: str) -> str | None:
    """How sqlglot's tree holds the pattern argument written as ``source``."""
    try:
        call = sqlglot.parse_one(f"date_format(x, {source})", read="spark")
    except sqlglot.errors.SqlglotError:
        return None
    return call.args["format"].sql(dialect="spark") if isinstance(call, exp.TimeToStr) else None


def _moment(call: exp.TimeToStr) -> exp.Expression:
    """The first argument of a ``date_format`` as written (sqlglot wraps it in a conversion from
    text, which Spark applies only to a string argument)."""
    moment = call.this
    return moment.this if isinstance(moment, exp.TimeStrToTime) else moment


def spell_time_formats(text: str, tree: exp.Expression, schemas: Mapping[str, pa.Schema]) -> exp.Expression:
    """``tree`` (Spark query ``text`` over inputs of ``schemas``) with each ``date_format`` written
    as DuckDB's ``strftime`` of the same meaning, or ``tree`` unchanged when that cannot be told."""
    calls = list(tree.find_all(exp.TimeToStr))
    if not calls:
        return tree
    patterns = _literal_patterns(text)
    if patterns is None or len(patterns) != len(calls):
        return tree
    # the tree's form of each distinct pattern must belong to that pattern alone
    by_form: dict[str, str] = {}
    for source, pattern in patterns:
        form = _tree_form(source)
        if form is None or by_form.get(form, pattern) != pattern:
            return tree
        by_form[form] = pattern
    formats = {form: strftime_of(pattern) for form, pattern in by_form.items()}
    if any(f is None for f in formats.values()):
        return tree
    typed = annotated(tree, schemas)
    if typed is None:
        return tree
    for call in typed.find_all(exp.TimeToStr):
        kind = _moment(call).type
        if kind is None or kind.this not in TIME_TYPES:
            return tree
        if call.args["format"].sql(dialect="spark") not in formats:
            return tree

    def spelled(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.TimeToStr):
            return node
        code = formats[node.args["format"].sql(dialect="spark")]
        moment = exp.cast(_moment(node), exp.DataType.build("TIMESTAMP"))
        return exp.Anonymous(this="strftime", expressions=[moment, exp.Literal.string(code)])

    return tree.transform(spelled)
