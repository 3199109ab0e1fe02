"""Parsing uncertain array schema text such as ``sky<flux:gaussian>[x=0:999:32; y=0:999:32; corr(x, y)]``.

Attribute types are the array types (exact values) or the kinds ``gaussian`` and ``uniform``; every
dimension is a Gaussian position; ``corr(a, b)`` items declare correlated pairs. Errors are
ParseErrors with the line and column of the offending text.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from arrayviews.model.errors import ParseError, SchemaError
from arrayviews.model.schema import Dimension, check_identifier
from arrayviews.model.text_lines import position
from arrayviews.model.uncertain import (
    EXACT,
    GAUSSIAN,
    UNIFORM,
    UncertainAttribute,
    UncertainSchema,
    default_uncertain_chunk_length,
)

_TERMINAL_NAMES = {
    "IDENTIFIER": "identifier",
    "INT": "integer",
    "STAR": "'*'",
    "NULL": "NULL",
    "NOT": "NOT",
    "CORR": "corr(",
    "LANGLE": "'<'",
    "LSQB": "'['",
    "_RANGLE": "'>'",
    "_RSQB": "']'",
    "_LPAR": "'('",
    "_RPAR": "')'",
    "_COLON": "':'",
    "_EQUAL": "'='",
    "_SEMICOLON": "';'",
    "_DIM_COMMA": "','",
    "_COMMA": "','",
    "$END": "end of input",
}


@functools.cache
def _parser() -> Lark:
    return Lark.open(
        "uncertain_schema.lark", rel_to=__file__, parser="lalr", start="schema", maybe_placeholders=True
    )


def parse_uncertain_schema(text: str, name: str | None = None) -> UncertainSchema:
    """Parse uncertain schema text; ``name``, when given, names the array (overriding the text)."""
    if not isinstance(text, str):
        raise ParseError(f"an uncertain schema must be text, got {type(text).__name__}")
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as error:
        raise _syntax_error(text, error) from None
    return _Builder(text).schema(tree, name)


def _syntax_error(text: str, error: UnexpectedInput) -> ParseError:
    if isinstance(error, UnexpectedCharacters):
        names = error.allowed or ()
    else:
        names = getattr(error, "accepts", None) or getattr(error, "expected", None) or ()
    expected = tuple(sorted({_TERMINAL_NAMES.get(n, n) for n in names}))
    token = getattr(error, "token", None)
    if isinstance(error, UnexpectedCharacters):
        return ParseError.at(
            f"unexpected character {error.char!r}", text, error.pos_in_stream, expected=expected
        )
    if isinstance(error, UnexpectedToken) and token.type != "$END":
        reason = (
            "unexpected text after the end of the schema"
            if expected == ("end of input",)
            else f"unexpected {token.value!r}"
        )
        return ParseError.at(reason, text, error.pos_in_stream, expected=expected)
    body = text.rstrip()
    line, column = position(body, len(body))
    reason = "schema text is empty" if not body else "unexpected end of input"
    return ParseError(reason, text=text, line=line, column=column, expected=expected)


class _Builder:
    def __init__(self, text: str) -> None:
        self.text = text
        self.array = ""

    @contextmanager
    def at(self, token: Token) -> Iterator[None]:
        try:
            yield
        except SchemaError as error:
            raise ParseError.at(str(error), self.text, token.start_pos) from None

    def schema(self, tree: Tree, name: str | None) -> UncertainSchema:
        name_token, langle, attributes, lsqb, items = tree.children
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
        attribute_trees = attributes.children if attributes is not None else []
        attrs = [self.attribute(t) for t in attribute_trees]
        dimension_trees = [t for t in items.children if t.data == "dimension"]
        correlation_trees = [t for t in items.children if t.data == "correlation"]
        if not dimension_trees:
            raise ParseError.at(
                f"uncertain array {self.array}: needs at least one dimension", self.text, lsqb.start_pos
            )
        dims = [self.dimension(t, len(dimension_trees)) for t in dimension_trees]
        pairs = []
        for tree_ in correlation_trees:
            _, first, second = tree_.children
            pairs.append((str(first), str(second)))
        anchor = correlation_trees[0].children[0] if correlation_trees else lsqb
        with self.at(anchor):
            schema = UncertainSchema(self.array, (), tuple(dims), tuple(pairs))
        # Attributes one at a time, so a clash of names points at the attribute that causes it.
        for attribute, tree_ in zip(attrs, attribute_trees, strict=True):
            with self.at(tree_.children[0]):
                schema = UncertainSchema(
                    self.array, (*schema.attributes, attribute), tuple(dims), tuple(pairs)
                )
        return schema

    def attribute(self, tree: Tree) -> UncertainAttribute:
        name_token, type_token, nullability = tree.children
        nullable = nullability is not None and nullability.children[0] is None
        kind_text = str(type_token).lower()
        with self.at(name_token):
            check_identifier(str(name_token), "attribute")
        with self.at(type_token):
            if kind_text in (GAUSSIAN, UNIFORM):
                return UncertainAttribute(str(name_token), kind_text, "float64", nullable)
            try:
                return UncertainAttribute(str(name_token), EXACT, str(type_token), nullable)
            except SchemaError as error:
                if "unknown attribute type" in str(error):
                    raise SchemaError(f"{error}, or the uncertain kinds gaussian, uniform") from None
                raise

    def dimension(self, tree: Tree, ndim: int) -> Dimension:
        name_token, low_token, high_token, chunk_token = [*tree.children, None][:4]
        low, high = int(low_token), int(high_token)
        if chunk_token is None or chunk_token.type == "STAR":
            chunk = default_uncertain_chunk_length(max(1, high - low + 1), ndim)
        else:
            chunk = int(chunk_token)
        culprit = high_token if low > high else (chunk_token if chunk < 1 else name_token)
        with self.at(culprit):
            return Dimension(str(name_token), low, high, chunk)
