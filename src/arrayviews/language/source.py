"""The text of a script being parsed: the lark parser of the grammar, positions, comment blanking,
and the translation of lark's syntax errors into ParseErrors with line, column and what was expected.

Every part of the language parser reports errors through :class:`Source`, so that a problem found in
any piece of a statement (a schema, a cell expression, a ViewDF body, a Spark SQL condition) is shown
at its place in the whole text.
"""

from __future__ import annotations

import contextvars
import functools
import re
from collections.abc import Iterator
from contextlib import contextmanager

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from arrayviews.model.errors import ParseError
from arrayviews.model.names import letters_note
from arrayviews.model.schema_parser import parse_schema
from arrayviews.model.text_lines import line_starts, offset_of, position_in

#: The start rules of the grammar: a whole script, and the pieces parsed again on their own.
START_RULES = ("script", "array_expr", "array_source", "view_select", "similarity_query")

# How the grammar's terminals are shown to users in "expected one of" lists; keywords not listed
# here are shown as themselves (CREATE, ARRAY, ...).
_TERMINAL_NAMES = {
    "IDENTIFIER": "identifier",
    "NUMBER": "number",
    "STRING": "string",
    "RAW_STRING": "string",
    "QUOTED": "quoted name",
    "SCHEMA_TEXT": "schema",
    "RAW": "expression",
    "LPAR": "'('",
    "RPAR": "')'",
    "LSQB": "'['",
    "RSQB": "']'",
    "STAR": "'*'",
    "PLUS": "'+'",
    "_COMMA": "','",
    "_SEMICOLON": "';'",
    "DOT": "'.'",
    "COLON": "':'",
    "EQUAL": "'='",
    "AFFINE_OP": "'*', '/', '+' or '-'",
    "PARTITION_LENGTH": "PARTITION LENGTH",
    "TRUE": "true",
    "FALSE": "false",
    "NULL": "null",
    "NAN": "nan",
    "INF": "inf",
    "$END": "end of input",
}
_IGNORED = frozenset({"WS", "COMMENT"})
END = "end of input"
_STATEMENT_END = ("';'", END)

# Comment tokens seen by the lexer during the current parse (they are ignored by the grammar, but
# raw spans must not contain them).
_comments: contextvars.ContextVar[list[Token] | None] = contextvars.ContextVar("comments", default=None)


def _collect_comment(token: Token) -> Token:
    seen = _comments.get()
    if seen is not None:
        seen.append(token)
    return token


@functools.cache
def _parser() -> Lark:
    return Lark.open(
        "grammar.lark",
        rel_to=__file__,
        parser="lalr",
        start=list(START_RULES),
        propagate_positions=True,
        maybe_placeholders=True,
        lexer_callbacks={"COMMENT": _collect_comment},
    )


# Where a raw span (an expression, a condition, a query body) may go on, these are its pieces too:
# they are shown as "expression".
_RAW_PIECES = frozenset({"IDENTIFIER", "STRING", "RAW_STRING", "QUOTED", "LSQB", "RSQB"})


def readable(names) -> tuple[str, ...]:
    """Terminal names as users read them (``'('``, ``identifier``, ``FROM``), sorted, without blanks."""
    names = set(names)
    if "RAW" in names:
        names -= _RAW_PIECES
    return tuple(sorted({_TERMINAL_NAMES.get(n, n) for n in names if n not in _IGNORED}))


def tokens_of(tree: Tree) -> list[Token]:
    """The tokens of ``tree``, in order."""
    return list(tree.scan_values(lambda v: isinstance(v, Token)))


class Source:
    """The whole text being parsed, a copy with comments blanked out, and position helpers."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.clean = text  # comments are blanked out as the parses find them
        self._line_starts = line_starts(text)

    # -- positions (lines end at \r\n, \r or \n: arrayviews.model.text_lines) -----------------
    def position(self, offset: int) -> tuple[int, int]:
        """1-based line and column of ``offset``."""
        return position_in(self._line_starts, offset)

    def offset(self, line: int, column: int) -> int:
        """The offset of a 1-based line and column."""
        return self._line_starts[line - 1] + column - 1

    def end_of(self, start: int, end: int) -> int:
        """The offset just after the last non-blank character of ``clean[start:end]`` (or ``start``)."""
        body = self.clean[start:end].rstrip()
        return start + len(body)

    def span(self, tree: Tree) -> str:
        """The original text of ``tree`` (comments kept)."""
        return self.text[tree.meta.start_pos : tree.meta.end_pos]

    def error(self, reason: str, offset: int, expected: tuple[str, ...] = ()) -> ParseError:
        line, column = self.position(offset)
        return ParseError(reason, text=self.text, line=line, column=column, expected=expected)

    def moved(self, error: ParseError, start: int) -> ParseError:
        """``error``, raised by a parser of ``text[start:...]``, at its place in the whole text."""
        if error.line is None or error.column is None:
            offset = start
        else:
            offset = start + offset_of(self.text[start:], error.line, error.column)
        return self.error(error.reason, offset, error.expected)

    @contextmanager
    def spanning(self, start: int) -> Iterator[None]:
        """Re-raise the ParseErrors of a parser run over the text from ``start`` at their place."""
        try:
            yield
        except ParseError as error:
            raise self.moved(error, start) from None

    # -- lark --------------------------------------------------------------------------------
    def parse_tree(self, start: int, end: int, rule: str) -> Tree:
        """Parse ``clean[start:end]`` from ``rule``; token positions are made absolute."""
        piece = self.clean[start:end]
        comments: list[Token] = []
        reset = _comments.set(comments)
        try:
            tree = _parser().parse(piece, start=rule)
        except UnexpectedInput as error:
            self._blank_comments(comments, start)
            raise self._syntax_error(error, start, end, rule) from None
        finally:
            _comments.reset(reset)
        self._blank_comments(comments, start)
        if start:
            _shift(tree, start)
        return tree

    def _blank_comments(self, comments: list[Token], start: int) -> None:
        if comments:
            self.clean = _blank(self.clean, [(start + c.start_pos, start + c.end_pos) for c in comments])

    def _syntax_error(self, error: UnexpectedInput, start: int, end: int, rule: str) -> ParseError:
        if isinstance(error, UnexpectedCharacters):
            offset = start + error.pos_in_stream
            char = self.clean[offset]
            allowed = set(error.allowed or ()) - _IGNORED
            if char in "'\"":
                return self.error("unterminated string literal", offset, readable(allowed))
            if char == "`":
                return self.error("unterminated quoted name", offset, readable(allowed))
            if "SCHEMA_TEXT" in allowed and char == "<":
                return self._schema_error(offset, end)
            return self.error(f"unexpected character {char!r}{letters_note(char)}", offset, readable(allowed))
        token = getattr(error, "token", None)
        accepts = set(getattr(error, "accepts", None) or getattr(error, "expected", None) or ())
        expected = readable(accepts)
        if rule == "array_source" and END in expected:
            expected = tuple(sorted({*expected, "';'"}))  # the source of a SELECT ends its statement
        if isinstance(error, UnexpectedToken) and token.type != "$END":
            if "SCHEMA_TEXT" in accepts and str(token).startswith("<"):
                return self._schema_error(start + token.start_pos, end)
            if not expected:  # lark lists nothing after a complete start rule: only the end may follow
                expected = (END,)
            if expected == _STATEMENT_END or expected == (END,):
                what = {
                    "script": "statement",
                    "view_select": "view definition",
                    "array_source": "array query",
                }.get(rule, "array expression")
                reason = f"unexpected {str(token)!r} after the end of the {what}"
            else:
                reason = f"unexpected {str(token)!r}"
            named = "identifier" in expected or "quoted name" in expected
            reason += letters_note(str(token) if named else str(token)[:1])  # 'straße': ASCII names
            return self.error(reason, start + token.start_pos, expected)
        if not self.clean[start:end].strip():
            return self.error("empty array expression", start, expected)
        at = self.end_of(start, end)
        if "UPDATE" in accepts:
            return self.error("the INITIALIZE body is not terminated: UPDATE is missing", at, ("UPDATE",))
        if "PARTITION_LENGTH" in accepts:
            return self.error("missing PARTITION LENGTH after the UPDATE body", at, ("PARTITION LENGTH",))
        return self.error("unexpected end of input", at, expected)

    def _schema_error(self, offset: int, end: int) -> ParseError:
        """The error of a schema the grammar could not even delimit (no '[' or ']' after '<')."""
        with self.spanning(offset):
            parse_schema(self.clean[offset:end], "A")
        return self.error("malformed schema", offset, ("schema",))  # pragma: no cover - parse_schema fails


#: A comment in a schema (group 1), or quoted text, in which '--' and '/*' start nothing.
_SCHEMA_COMMENT = re.compile(r"'[^'\]]*'|(--[^\r\n]*|/\*[\s\S]*?\*/)")


def blank_schema_comments(schema_text: str) -> str:
    """A schema token (``<...>[...]``, lexed whole, so its comments were not) with its ``--`` and
    ``/* */`` comments blanked, line breaks kept (positions do not move)."""
    return _SCHEMA_COMMENT.sub(
        lambda m: m.group() if m.group(1) is None else re.sub(r"[^\r\n]", " ", m.group()), schema_text
    )


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the characters of ``spans`` replaced by blanks (line breaks kept, so that lines and
    columns stay where they were)."""
    pieces, last = [], 0
    for begin, end in sorted(spans):
        pieces += [text[last:begin], re.sub(r"[^\r\n]", " ", text[begin:end])]
        last = end
    return "".join(pieces) + text[last:]


def _shift(tree: Tree, offset: int) -> None:
    """Make the positions of ``tree`` (parsed from a slice starting at ``offset``) absolute."""
    for node in tree.iter_subtrees():
        meta = node.meta
        if not meta.empty:
            meta.start_pos += offset
            meta.end_pos += offset
        for child in node.children:
            if isinstance(child, Token):
                child.start_pos += offset
                child.end_pos += offset


__all__ = ["END", "START_RULES", "Source", "blank_schema_comments", "readable", "tokens_of"]
