"""Parsing SciDB-style schema text such as ``A<r:int64, s:float64>[i=1:6:2; j=1:8:2 SCALE 0.5]`` into ArraySchema."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from arrayviews.model.errors import ParseError, SchemaError
from arrayviews.model.names import check_identifier, letters_note
from arrayviews.model.schema import (
    UNBOUNDED_HIGH,
    ArraySchema,
    Attribute,
    CoordinateScale,
    Dimension,
    default_chunk_length,
)
from arrayviews.model.text_lines import position
from arrayviews.model.time_scale import UNIT_WORDS, TimeScale
from arrayviews.model.types import normalize_type

# How the grammar's terminals are shown to users in "expected one of" lists.
_TERMINAL_NAMES = {
    "IDENTIFIER": "identifier",
    "INT": "integer",
    "STAR": "'*'",
    "NUMBER": "number",
    "UNIT_TEXT": "quoted text",
    "TIME_UNIT": "time unit (DAY, HOURS, ...)",
    "SCALE": "SCALE",
    "OFFSET": "OFFSET",
    "UNIT": "UNIT",
    "NULL": "NULL",
    "NOT": "NOT",
    "LANGLE": "'<'",
    "LSQB": "'['",
    "_RANGLE": "'>'",
    "_RSQB": "']'",
    "_COLON": "':'",
    "_EQUAL": "'='",
    "_SEMICOLON": "';'",
    "_DIM_COMMA": "','",
    "_COMMA": "','",
    "$END": "end of input",
    "<END-OF-FILE>": "end of input",
}
_END = "end of input"


@functools.cache
def _parser() -> Lark:
    return Lark.open("schema.lark", rel_to=__file__, parser="lalr", start="schema", maybe_placeholders=True)


def parse_schema(text: str, name: str | None = None) -> ArraySchema:
    """Parse schema text; ``name``, when given, names the array (overriding any name in the text).

    Raises ParseError, with the 1-based line and column of the offending text, for any malformed or
    inconsistent schema.
    """
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as error:
        raise _syntax_error(text, error) from None
    return _Builder(text).schema(tree, name)


def _expected(error: UnexpectedInput) -> tuple[str, ...]:
    if isinstance(error, UnexpectedCharacters):
        names = error.allowed or ()
    else:
        names = getattr(error, "accepts", None) or getattr(error, "expected", None) or ()
    return tuple(sorted({_TERMINAL_NAMES.get(n, n) for n in names}))


def _end_position(text: str) -> tuple[int, int]:
    """Line and column just after the last non-blank character of ``text``."""
    body = text.rstrip()
    return position(body, len(body))


def _syntax_error(text: str, error: UnexpectedInput) -> ParseError:
    expected = _expected(error)
    token = getattr(error, "token", None)
    if isinstance(error, UnexpectedCharacters) or (
        isinstance(error, UnexpectedToken) and token.type != "$END"
    ):
        line, column = position(text, error.pos_in_stream)
        if expected == (_END,):
            reason = "unexpected text after the end of the schema"
        elif isinstance(error, UnexpectedCharacters):
            reason = f"unexpected character {error.char!r}{letters_note(error.char)}"
        else:
            reason = f"unexpected {token.value!r}"
    else:
        line, column = _end_position(text)
        reason = "schema text is empty" if not text.strip() else "unexpected end of input"
    return ParseError(reason, text=text, line=line, column=column, expected=expected)


class _Builder:
    """Turns a parse tree into an ArraySchema, checking it in reading order."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.seen: dict[str, str] = {}  # lower-case name -> name as written
        self.array = ""

    @contextmanager
    def at(self, token: Token) -> Iterator[None]:
        """Report any SchemaError raised inside the block as a ParseError at ``token``."""
        try:
            yield
        except SchemaError as error:
            raise ParseError.at(str(error), self.text, token.start_pos) from None

    def schema(self, tree: Tree, name: str | None) -> ArraySchema:
        name_token, langle, attributes, lsqb, dimensions = tree.children
        if name_token is not None:
            with self.at(name_token):
                check_identifier(str(name_token), "array")
        if name is not None:
            try:
                check_identifier(name, "array")
            except SchemaError as error:
                raise ParseError(f"{error} (given as the name argument)", text=self.text) from None
        elif name_token is None:
            raise ParseError.at("schema needs an array name", self.text, langle.start_pos)
        self.array = name if name is not None else str(name_token)
        attrs = [self.attribute(t) for t in attributes.children] if attributes is not None else []
        ndim = len(dimensions.children)
        dims = [self.dimension(t, ndim) for t in dimensions.children]
        with self.at(lsqb):
            return ArraySchema(self.array, tuple(attrs), tuple(dims))

    def claim(self, token: Token, what: str) -> str:
        """Check that ``token`` is a valid, not yet used name and return it."""
        with self.at(token):
            check_identifier(str(token), what)
            earlier = self.seen.get(str(token).lower())
            if earlier == str(token):
                raise SchemaError(f"array {self.array}: name {str(token)!r} is used twice")
            if earlier is not None:
                raise SchemaError(
                    f"array {self.array}: names {earlier!r} and {str(token)!r} differ only in case "
                    "(column names are case-insensitive)"
                )
        self.seen[str(token).lower()] = str(token)
        return str(token)

    def attribute(self, tree: Tree) -> Attribute:
        name_token, type_token, nullability = tree.children
        name = self.claim(name_token, "attribute")
        with self.at(type_token):
            type_name = normalize_type(str(type_token))
        nullable = nullability is not None and nullability.children[0] is None
        return Attribute(name, type_name, nullable)

    def dimension(self, tree: Tree, ndim: int) -> Dimension:
        # The scale (or its placeholder) comes last; nested optional parts before it leave a single
        # placeholder when absent: pad to five children.
        *parts, scale_tree = tree.children
        name_token, low_token, high_token, chunk_token, overlap_token = [*parts, None, None][:5]
        name = self.claim(name_token, "dimension")
        low = int(low_token)
        high = UNBOUNDED_HIGH if high_token.type == "STAR" else int(high_token)
        if chunk_token is None or chunk_token.type == "STAR":
            chunk_length = default_chunk_length(high - low + 1, ndim)
        else:
            chunk_length = int(chunk_token)
        # Point at the part that Dimension's own checks (in their order) will complain about.
        if low > high:
            culprit = high_token
        elif chunk_length < 1:
            culprit = chunk_token
        elif abs(low) > UNBOUNDED_HIGH:
            culprit = low_token
        else:
            culprit = high_token
        with self.at(culprit):
            try:
                dimension = Dimension(name, low, high, chunk_length)
            except SchemaError as error:
                if culprit is not chunk_token:
                    raise
                form = "low:high:chunk" + (":overlap" if overlap_token is not None else "")
                given = f"{low_token}:{high_token}:{chunk_token}" + (
                    f":{overlap_token}" if overlap_token is not None else ""
                )
                example = f"{name}={low_token}:{high_token}:{max(1, min(high - low + 1, 1000))}"
                raise SchemaError(
                    f"{error} ({name}={given} reads as {form}, so the chunk length is {chunk_token}; "
                    f"a dimension is written name=low:high:chunk, e.g. {example})"
                ) from None
        if overlap_token is not None and int(overlap_token) != 0:
            with self.at(overlap_token):
                raise SchemaError(
                    f"dimension {name}: chunk overlap is not supported (got {overlap_token}); use 0 or leave it out"
                )
        if scale_tree is not None:
            scale_tree = scale_tree.children[0]  # scaled: scale | time_scale
        if scale_tree is not None and scale_tree.data == "time_scale":
            dimension = self.timed(dimension, scale_tree)
        elif scale_tree is not None:
            dimension = self.scaled(dimension, scale_tree)
        return dimension

    def timed(self, dimension: Dimension, tree: Tree) -> Dimension:
        """``dimension`` with the time labels of ``SCALE count UNIT [OFFSET 'time']``."""
        keyword, count_token, unit_token, _, origin_token = tree.children
        where = f"dimension {dimension.name}"
        count = float(count_token)
        if not count.is_integer() or count == 0 or "." in str(count_token) or "e" in str(count_token).lower():
            with self.at(count_token):
                raise SchemaError(
                    f"{where}: a time step is a whole nonzero number of {unit_token}, got {count_token}"
                )
        word = str(unit_token).lower()
        if word.startswith(("month", "year")):
            with self.at(unit_token):
                raise SchemaError(
                    f"{where}: {unit_token} is not a fixed length of time; give the step in days or finer "
                    "(a monthly grid is a dimension of cells with the dates in an attribute)"
                )
        resolution, per = UNIT_WORDS[word[:-1] if word.endswith("s") and word[:-1] in UNIT_WORDS else word]
        origin = str(origin_token)[1:-1] if origin_token is not None else "1970-01-01"
        with self.at(origin_token if origin_token is not None else keyword):
            try:
                scale = TimeScale.of(np.timedelta64(int(count_token) * per, resolution), origin)
            except (SchemaError, OverflowError) as error:
                raise SchemaError(f"{where}: {error}") from None
        with self.at(keyword):
            return dimension.with_scale(scale)

    def scaled(self, dimension: Dimension, tree: Tree) -> Dimension:
        """``dimension`` with the scale of ``SCALE step [OFFSET offset] [UNIT 'text']``."""
        keyword, step_token, _, offset_token, _, unit_token = tree.children
        numbers = {}
        for label, token in (("step", step_token), ("offset", offset_token)):
            if token is None:
                continue
            numbers[label] = float(token)
            if not math.isfinite(numbers[label]):
                with self.at(token):
                    raise SchemaError(
                        f"dimension {dimension.name}: coordinate {label} {token} is not a finite float64"
                    )
        if numbers["step"] == 0.0:
            with self.at(step_token):
                raise SchemaError(f"dimension {dimension.name}: coordinate step must not be zero")
        unit = str(unit_token)[1:-1] if unit_token is not None else ""
        with self.at(unit_token if unit_token is not None else keyword):
            try:
                scale = CoordinateScale(numbers["step"], numbers.get("offset", 0.0), unit)
            except SchemaError as error:
                raise SchemaError(f"dimension {dimension.name}: {error}") from None
        with self.at(keyword):
            return dimension.with_scale(scale)
