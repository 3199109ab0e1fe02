"""Parsing statement text into the syntax tree of :mod:`arrayviews.language.syntax`.

``parse(text)`` returns the statements of ``text`` (separated by ``;``). Every syntax error raises
:class:`~arrayviews.model.errors.ParseError` with the 1-based line and column in ``text`` and the
list of what would have been accepted there; errors found by the model's parsers (schemas, cell
expressions, aggregate calls) are re-raised at their position in ``text``.

Array functions (``subarray``, ``filter``, ...) are not grammar rules: the grammar captures
``name(argument, ...)`` with raw argument spans, and :data:`ARRAY_FUNCTIONS` maps each function
name to a builder that reads its arguments as arrays, integers, names, expressions or aggregate
calls. Adding an operator is one builder registered with :func:`array_function`. Similarity shapes
(``L1(1)``, ``BOX(-2:0, -1:1)``, ``PRODUCT(...)``) work the same way: :data:`SHAPE_FUNCTIONS` maps each
shape name to a builder registered with :func:`shape_function`.

``parse_view_query(text)`` reads the SELECT of a view definition alone (what
``db.create_view(name, text)`` receives).
"""

from __future__ import annotations

import bisect
import contextvars
import functools
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from arrayviews.language import syntax as ast
from arrayviews.model.aggregate_calls import AggregateCall, parse_aggregate
from arrayviews.model.errors import ParseError, SchemaError
from arrayviews.model.expressions import Expr, parse_expression
from arrayviews.model.names import IDENTIFIER, check_identifier
from arrayviews.model.schema_parser import parse_schema

# How the grammar's terminals are shown to users in "expected one of" lists; keywords not listed
# here are shown as themselves (CREATE, ARRAY, ...).
_TERMINAL_NAMES = {
    "IDENTIFIER": "identifier",
    "NUMBER": "number",
    "STRING": "string",
    "SCHEMA_TEXT": "schema",
    "RAW": "expression",
    "LPAR": "'('",
    "RPAR": "')'",
    "STAR": "'*'",
    "_COMMA": "','",
    "_SEMICOLON": "';'",
    "DOT": "'.'",
    "COLON": "':'",
    "EQUAL": "'='",
    "AFFINE_OP": "'*', '/', '+' or '-'",
    "TRUE": "true",
    "FALSE": "false",
    "NULL": "null",
    "NAN": "nan",
    "INF": "inf",
    "$END": "end of input",
}
_IGNORED = frozenset({"WS", "COMMENT"})
_END = "end of input"
_STATEMENT_END = ("';'", _END)

_INTEGER = re.compile(r"[+-]?[0-9]+")
_IDENTIFIER = IDENTIFIER
_FLOAT_SYNTAX = re.compile(r"[.eE]")
_SCHEMA_COMMENT = re.compile(r"--[^\n]*")

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
        start=["script", "array_expr", "view_select"],
        propagate_positions=True,
        maybe_placeholders=True,
        lexer_callbacks={"COMMENT": _collect_comment},
    )


# ---------------------------------------------------------------------------------------------
# Entry points


@dataclass(frozen=True)
class ParsedStatement:
    """A statement with where it was found: 1-based line and column, and its text."""

    statement: ast.Statement
    line: int
    column: int
    text: str


def parse(text: str) -> list[ast.Statement]:
    """The statements of ``text``, in order (empty statements between ``;`` are skipped)."""
    return [parsed.statement for parsed in parse_statements(text)]


def parse_statements(text: str) -> list[ParsedStatement]:
    """Like :func:`parse`, with the position and text of every statement."""
    source = _Source(text)
    tree = source.parse_tree(0, len(text), "script")
    parsed = []
    for child in tree.children:
        if child is None:
            continue
        statement = _StatementBuilder(source).build(child)
        meta = child.meta
        parsed.append(ParsedStatement(statement, meta.line, meta.column, text[meta.start_pos : meta.end_pos]))
    return parsed


def parse_array_expression(text: str) -> ast.ArrayExpr:
    """One array expression, e.g. ``regrid(A, 2, 2, avg(v))``."""
    source = _Source(text)
    return source.array_expression(0, len(text))


def parse_view_query(text: str) -> ast.ViewQuery:
    """The SELECT of a view definition, e.g. ``SELECT * FROM window(A, 1, 1, avg(v))``."""
    source = _Source(text)
    tree = source.parse_tree(0, len(text), "view_select")
    return _StatementBuilder(source).view_query(tree)


# ---------------------------------------------------------------------------------------------
# Source text, positions and errors


class _Source:
    """The whole text being parsed, a copy with comments blanked out, and position helpers."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.clean = text  # set by the first parse_tree call over the whole text
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    # -- positions ---------------------------------------------------------------------------
    def position(self, offset: int) -> tuple[int, int]:
        """1-based line and column of ``offset``."""
        line = bisect.bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1

    def end_of(self, start: int, end: int) -> int:
        """The offset just after the last non-blank character of ``clean[start:end]`` (or ``start``)."""
        body = self.clean[start:end].rstrip()
        return start + len(body)

    def error(self, reason: str, offset: int, expected: tuple[str, ...] = ()) -> ParseError:
        line, column = self.position(offset)
        return ParseError(reason, text=self.text, line=line, column=column, expected=expected)

    def moved(self, error: ParseError, start: int) -> ParseError:
        """``error``, raised by a model parser over ``clean[start:...]``, at its place in the whole text."""
        if error.line is None or error.column is None:
            offset = start
        else:
            span = self.clean[start:]
            line_start = 0
            for _ in range(error.line - 1):
                line_start = span.index("\n", line_start) + 1
            offset = start + line_start + error.column - 1
        return self.error(error.reason, offset, error.expected)

    @contextmanager
    def spanning(self, start: int) -> Iterator[None]:
        """Re-raise ParseErrors of a model parser run over the text from ``start``."""
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

    def array_expression(self, start: int, end: int) -> ast.ArrayExpr:
        tree = self.parse_tree(start, end, "array_expr")
        return _StatementBuilder(self).array_expr(tree)

    def _syntax_error(self, error: UnexpectedInput, start: int, end: int, rule: str) -> ParseError:
        if isinstance(error, UnexpectedCharacters):
            offset = start + error.pos_in_stream
            allowed = set(error.allowed or ()) - _IGNORED
            if "SCHEMA_TEXT" in allowed and error.char == "<":
                return self._schema_error(offset, end)
            reason = f"unexpected character {error.char!r}"
            return self.error(reason, offset, _readable(allowed))
        token = getattr(error, "token", None)
        accepts = set(getattr(error, "accepts", None) or getattr(error, "expected", None) or ())
        expected = _readable(accepts)
        if isinstance(error, UnexpectedToken) and token.type != "$END":
            if "SCHEMA_TEXT" in accepts and str(token).startswith("<"):
                return self._schema_error(start + token.start_pos, end)
            if not expected:  # lark lists nothing after a complete start rule: only the end may follow
                expected = (_END,)
            if expected == _STATEMENT_END or expected == (_END,):
                what = {"script": "statement", "view_select": "view definition"}.get(rule, "array expression")
                reason = f"unexpected {str(token)!r} after the end of the {what}"
            else:
                reason = f"unexpected {str(token)!r}"
            return self.error(reason, start + token.start_pos, expected)
        if not self.clean[start:end].strip():
            return self.error("empty array expression", start, expected)
        return self.error("unexpected end of input", self.end_of(start, end), expected)

    def _schema_error(self, offset: int, end: int) -> ParseError:
        """The error of a schema the grammar could not even delimit (no '[' or ']' after '<')."""
        with self.spanning(offset):
            parse_schema(self.clean[offset:end], "A")
        return self.error("malformed schema", offset, ("schema",))  # pragma: no cover - parse_schema fails


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    pieces, last = [], 0
    for begin, end in sorted(spans):
        pieces += [text[last:begin], " " * (end - begin)]
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


def _readable(names) -> tuple[str, ...]:
    return tuple(sorted({_TERMINAL_NAMES.get(n, n) for n in names if n not in _IGNORED}))


# ---------------------------------------------------------------------------------------------
# Array functions


class Arguments:
    """The arguments of one array-function call, read by kind.

    Every reader raises ParseError at the argument's position when it does not have that kind.
    """

    def __init__(
        self, source: _Source, function: str, at: int, spans: list[tuple[int, int]], end: int
    ) -> None:
        self.source = source
        self.function = function
        self.at = at  # offset of the function name
        self.spans = spans  # (start, end) offsets of each argument's text
        self.end = end  # offset of the closing parenthesis
        self._arrays: dict[int, ast.ArrayExpr] = {}

    def __len__(self) -> int:
        return len(self.spans)

    def text(self, k: int) -> str:
        start, end = self.spans[k]
        return self.source.clean[start:end].strip()

    def start(self, k: int) -> int:
        return self.spans[k][0]

    def error(self, reason: str, k: int | None = None, expected: tuple[str, ...] = ()) -> ParseError:
        """A ParseError at argument ``k`` (None: at the closing parenthesis)."""
        offset = self.end if k is None else self.start(k)
        return self.source.error(f"{self.function}: {reason}", offset, expected)

    def count(self, fewest: int, most: int | None, usage: str, first_is_array: bool = True) -> None:
        """Check the number of arguments; ``usage`` shows the expected form, e.g. ``filter(array, predicate)``.

        With ``first_is_array``, a first argument that is not a valid array expression is reported
        before a wrong count (its error is the more specific one).
        """
        n = len(self)
        if first_is_array and n and (n < fewest or (most is not None and n > most)):
            self.array(0)
        if n < fewest:
            raise self.error(f"too few arguments ({n}); use {usage}", None, ("','",))
        if most is not None and n > most:
            raise self.error(f"too many arguments ({n}); use {usage}", most, ("')'",))

    def is_integer(self, k: int) -> bool:
        return _INTEGER.fullmatch(self.text(k)) is not None

    def is_name(self, k: int) -> bool:
        return _IDENTIFIER.fullmatch(self.text(k)) is not None

    def array(self, k: int) -> ast.ArrayExpr:
        if k not in self._arrays:
            start, end = self.spans[k]
            self._arrays[k] = self.source.array_expression(start, end)
        return self._arrays[k]

    def integer(self, k: int, what: str = "an integer") -> int:
        if not self.is_integer(k):
            raise self.error(f"argument {k + 1} must be {what}, got {self.text(k)!r}", k, ("integer",))
        value = int(self.text(k))
        if not ast.INT64_MIN <= value <= ast.INT64_MAX:
            raise self.error(f"integer {value} is outside the int64 range", k, ("integer",))
        return value

    def name(self, k: int, what: str) -> str:
        if not self.is_name(k):
            raise self.error(f"argument {k + 1} must be {what}, got {self.text(k)!r}", k, ("identifier",))
        return self.text(k)

    def expression(self, k: int) -> Expr:
        with self.source.spanning(self.start(k)):
            return parse_expression(self.source.clean[self.start(k) : self.spans[k][1]])

    def aggregate(self, k: int) -> AggregateCall:
        with self.source.spanning(self.start(k)):
            return parse_aggregate(self.source.clean[self.start(k) : self.spans[k][1]])


ArrayFunction = Callable[[Arguments], ast.ArrayExpr]
#: Array functions by (lower-case) name: each builds its node from the call's arguments.
ARRAY_FUNCTIONS: dict[str, ArrayFunction] = {}


def array_function(name: str) -> Callable[[ArrayFunction], ArrayFunction]:
    """Register the builder of array function ``name`` (a decorator)."""

    def register(builder: ArrayFunction) -> ArrayFunction:
        ARRAY_FUNCTIONS[name.lower()] = builder
        return builder

    return register


@array_function("subarray")
def _subarray(args: Arguments) -> ast.ArrayExpr:
    usage = "subarray(array, low_1, ..., low_d, high_1, ..., high_d)"
    args.count(3, None, usage)
    coordinates = [args.integer(k, "an integer coordinate") for k in range(1, len(args))]
    if len(coordinates) % 2:
        raise args.error(
            f"needs a low and a high coordinate per dimension (an even number), got {len(coordinates)}; "
            f"use {usage}",
            None,
            ("','",),
        )
    half = len(coordinates) // 2
    return ast.Subarray(args.array(0), tuple(coordinates[:half]), tuple(coordinates[half:]))


@array_function("filter")
def _filter(args: Arguments) -> ast.ArrayExpr:
    args.count(2, 2, "filter(array, predicate)")
    return ast.Filter(args.array(0), args.expression(1))


@array_function("project")
def _project(args: Arguments) -> ast.ArrayExpr:
    args.count(2, None, "project(array, attribute, ...)")
    names = tuple(args.name(k, "an attribute name") for k in range(1, len(args)))
    return ast.Project(args.array(0), names)


@array_function("apply")
def _apply(args: Arguments) -> ast.ArrayExpr:
    usage = "apply(array, name, expression [, name, expression]...)"
    args.count(3, None, usage)
    if len(args) % 2 == 0:
        raise args.error(f"the last name has no expression; use {usage}", None, ("','",))
    source = args.array(0)
    pairs = tuple(
        (args.name(k, "a new attribute name"), args.expression(k + 1)) for k in range(1, len(args), 2)
    )
    return ast.Apply(source, pairs)


def _integers_then_calls(args: Arguments, what: str, usage: str) -> tuple[list[int], list]:
    """The leading integer arguments (after the array) and the aggregate calls that follow them."""
    k, numbers = 1, []
    while k < len(args) and args.is_integer(k):
        numbers.append(args.integer(k))
        k += 1
    if k == len(args):
        raise args.error(f"needs at least one aggregate call after the {what}; use {usage}", None, ("','",))
    calls = []
    for j in range(k, len(args)):
        if args.is_integer(j):
            raise args.error(f"{what} come before the aggregate calls", j, ("aggregate call",))
        calls.append(args.aggregate(j))
    return numbers, calls


@array_function("regrid")
def _regrid(args: Arguments) -> ast.ArrayExpr:
    usage = "regrid(array, block_1, ..., block_d, aggregate(...), ...)"
    args.count(3, None, usage)
    source = args.array(0)
    if not args.is_integer(1):
        raise args.error(f"argument 2 must be a block size (integer); use {usage}", 1, ("integer",))
    blocks, calls = _integers_then_calls(args, "block sizes", usage)
    return ast.Regrid(source, tuple(blocks), tuple(calls))


@array_function("window")
def _window(args: Arguments) -> ast.ArrayExpr:
    usage = "window(array, before_1, after_1, ..., before_d, after_d, aggregate(...), ...)"
    args.count(4, None, usage)
    source = args.array(0)
    extents, calls = _integers_then_calls(args, "window extents", usage)
    if not extents or len(extents) % 2:
        raise args.error(
            f"needs a (before, after) pair of integers per dimension; use {usage}",
            1 + len(extents),
            ("integer",),
        )
    return ast.Window(source, tuple(extents), tuple(calls))


@array_function("aggregate")
def _aggregate(args: Arguments) -> ast.ArrayExpr:
    usage = "aggregate(array, aggregate(...), ... [, dimension, ...])"
    args.count(2, None, usage)
    source = args.array(0)
    calls, by = [], []
    for k in range(1, len(args)):
        if args.is_name(k):
            by.append(args.name(k, "a dimension name"))
        elif by:
            raise args.error("aggregate calls come before the group-by dimensions", k, ("identifier",))
        else:
            calls.append(args.aggregate(k))
    if not calls:
        raise args.error(
            f"needs at least one aggregate call, e.g. count(*); use {usage}", 1, ("aggregate call",)
        )
    return ast.Aggregate(source, tuple(calls), tuple(by))


@array_function("join")
def _join(args: Arguments) -> ast.ArrayExpr:
    args.count(2, 2, "join(array, array)")
    return ast.Join(args.array(0), args.array(1))


# ---------------------------------------------------------------------------------------------
# Shapes of similarity views


class ShapeArguments:
    """The arguments of one shape call (``BOX(-2:0, -1:1)``), read by kind: shape, integer or range.

    Every reader raises ParseError at the argument's position when it does not have that kind.
    """

    def __init__(self, builder: _StatementBuilder, function: str, at: int, items: list, end: int) -> None:
        self.builder = builder
        self.source = builder.source
        self.function = function  # upper case
        self.at = at  # offset of the shape name
        self.items = items  # Trees (shape, shape_range) and NUMBER tokens
        self.end = end  # offset of the closing parenthesis

    def __len__(self) -> int:
        return len(self.items)

    def start(self, k: int) -> int:
        item = self.items[k]
        return item.start_pos if isinstance(item, Token) else item.meta.start_pos

    def kind(self, k: int) -> str:
        item = self.items[k]
        return "number" if isinstance(item, Token) else item.data

    def error(self, reason: str, k: int | None = None, expected: tuple[str, ...] = ()) -> ParseError:
        """A ParseError at argument ``k`` (None: at the closing parenthesis; -1: at the name)."""
        offset = self.end if k is None else self.at if k < 0 else self.start(k)
        return self.source.error(f"{self.function}: {reason}", offset, expected)

    def count(self, fewest: int, most: int | None, usage: str) -> None:
        n = len(self)
        if n < fewest:
            raise self.error(f"too few arguments ({n}); use {usage}", None, ("','",))
        if most is not None and n > most:
            raise self.error(f"too many arguments ({n}); use {usage}", most, ("')'",))

    def integer(self, k: int, what: str = "an integer") -> int:
        if self.kind(k) != "number":
            raise self.error(f"argument {k + 1} must be {what}", k, ("integer",))
        return self.builder.integer(self.items[k], what, self.function + ": ")

    def range(self, k: int) -> tuple[int, int]:
        if self.kind(k) != "shape_range":
            raise self.error(f"argument {k + 1} must be a range low:high, e.g. -1:1", k, ("range",))
        low, _, high = self.items[k].children
        bounds = (self.builder.integer(low, "an integer"), self.builder.integer(high, "an integer"))
        if bounds[0] > bounds[1]:
            raise self.error(f"range {bounds[0]}:{bounds[1]} is empty (low > high)", k, ("range",))
        return bounds

    def shape(self, k: int) -> ast.ShapeExpr:
        if self.kind(k) != "shape":
            raise self.error(
                f"argument {k + 1} must be a shape, e.g. L1(1)", k, tuple(sorted(SHAPE_FUNCTIONS))
            )
        return self.builder.shape(self.items[k])

    def node(self, build: Callable[[], ast.ShapeExpr], k: int = -1) -> ast.ShapeExpr:
        """``build()``, with a ValueError of the node's checks raised as ParseError at argument ``k``."""
        try:
            return build()
        except ValueError as error:
            raise self.source.error(str(error), self.at if k < 0 else self.start(k)) from None


ShapeFunction = Callable[[ShapeArguments], ast.ShapeExpr]
#: Shape functions by (upper-case) name: each builds its node from the call's arguments.
SHAPE_FUNCTIONS: dict[str, ShapeFunction] = {}


def shape_function(name: str) -> Callable[[ShapeFunction], ShapeFunction]:
    """Register the builder of shape function ``name`` (a decorator)."""

    def register(builder: ShapeFunction) -> ShapeFunction:
        SHAPE_FUNCTIONS[name.upper()] = builder
        return builder

    return register


def _ball(args: ShapeArguments) -> ast.ShapeExpr:
    args.count(1, 2, f"{args.function}(radius) or {args.function}(radius, dimensions)")
    radius = args.integer(0, "a radius (an integer >= 0)")
    if radius < 0:
        raise args.error(f"the radius must be an integer >= 0, got {radius}", 0, ("integer",))
    ndim = None
    if len(args) == 2:
        ndim = args.integer(1, "a dimension count (an integer >= 1)")
        if ndim < 1:
            raise args.error(f"the dimension count must be an integer >= 1, got {ndim}", 1, ("integer",))
    return ast.BallShape(args.function, radius, ndim)


shape_function("L1")(_ball)
shape_function("LINF")(_ball)


@shape_function("BOX")
def _box_shape(args: ShapeArguments) -> ast.ShapeExpr:
    args.count(1, None, "BOX(low_1:high_1, ..., low_d:high_d)")
    return ast.BoxShape(tuple(args.range(k) for k in range(len(args))))


@shape_function("PRODUCT")
def _product_shape(args: ShapeArguments) -> ast.ShapeExpr:
    args.count(2, None, "PRODUCT(shape, shape, ...)")
    parts = [args.shape(k) for k in range(len(args))]
    free = [k for k, part in enumerate(parts) if part.fixed_ndim() is None]
    return args.node(lambda: ast.ProductShape(tuple(parts)), free[1] if len(free) > 1 else -1)


def _set_shape(args: ShapeArguments) -> ast.ShapeExpr:
    binary = args.function == "DIFFERENCE"
    args.count(2, 2 if binary else None, f"{args.function}(shape, shape{'' if binary else ', ...'})")
    parts = tuple(args.shape(k) for k in range(len(args)))
    return args.node(lambda: ast.SetShape(args.function, parts))


for _operation in ast.SetShape.OPERATIONS:
    shape_function(_operation)(_set_shape)


# ---------------------------------------------------------------------------------------------
# Tree -> syntax tree


def _tokens(tree: Tree) -> list[Token]:
    return [c for c in tree.children if isinstance(c, Token)]


class _StatementBuilder:
    """Turns a parse tree of grammar.lark into syntax nodes; one method per statement rule."""

    def __init__(self, source: _Source) -> None:
        self.source = source

    def build(self, tree: Tree) -> ast.Statement:
        return getattr(self, tree.data)(tree)

    # -- statements --------------------------------------------------------------------------
    def create_array(self, tree: Tree) -> ast.Statement:
        _, _, name, schema_text = tree.children  # name: an IDENTIFIER or the keyword VIEW
        try:
            check_identifier(str(name), "array")
        except SchemaError as error:
            raise self.source.error(str(error), name.start_pos, ("identifier",)) from None
        # The schema is one token, so comments inside it were not lexed: blank them here.
        text = _SCHEMA_COMMENT.sub(lambda m: " " * len(m.group()), str(schema_text))
        with self.source.spanning(schema_text.start_pos):
            schema = parse_schema(text, str(name))
        return ast.CreateArray(schema)

    def drop_array(self, tree: Tree) -> ast.Statement:
        return ast.DropArray(str(tree.children[2]))

    def show_arrays(self, tree: Tree) -> ast.Statement:
        return ast.ShowArrays()

    def show_of(self, tree: Tree) -> ast.Statement:
        _, what, _, name = tree.children
        kinds = {
            "VERSIONS": ast.ShowVersions,
            "CHUNKS": ast.ShowChunks,
            "SCHEMA": ast.ShowSchema,
            "STATUS": ast.ShowStatus,
        }
        return kinds[what.type](str(name))

    def select(self, tree: Tree) -> ast.Statement:
        _, select_list, _, into, _, source, _, condition = tree.children
        names = _tokens(select_list)
        attributes = None if names[0].type == "STAR" else tuple(str(n) for n in names)
        where = self.condition(condition) if condition is not None else None
        into_name = str(into) if into is not None else None
        return ast.Select(self.array_expr(source), attributes, where, into_name)

    def insert(self, tree: Tree) -> ast.Statement:
        name = tree.children[2]
        rows = tuple(
            tuple(self.value(v) for v in row.children if isinstance(v, Tree)) for row in tree.children[4:]
        )
        return ast.Insert(str(name), rows)

    def load(self, tree: Tree) -> ast.Statement:
        tokens = [t for t in tree.children if isinstance(t, Token)]
        name, path = tokens[1], tokens[3]
        formats = [t for t in tokens if t.type in ("CSV", "PARQUET")]
        path_text = str(path)[1:-1].replace("''", "'")
        return ast.Load(str(name), path_text, formats[0].type.lower() if formats else None)

    def delete(self, tree: Tree) -> ast.Statement:
        target_tree = tree.children[2]
        target = self.array_expr(target_tree)
        try:
            return ast.Delete(target)
        except ValueError as error:
            raise self.source.error(
                str(error), target_tree.meta.start_pos, ("identifier", "subarray")
            ) from None

    # -- views -------------------------------------------------------------------------------
    def create_view(self, tree: Tree) -> ast.Statement:
        name, chunks_tree, query_tree = tree.children[3], tree.children[4], tree.children[6]
        chunks = None
        if chunks_tree is not None:
            numbers = [t for t in _tokens(chunks_tree) if t.type == "NUMBER"]
            chunks = tuple(self.integer(t, "a chunk length (a positive integer)") for t in numbers)
            for token, length in zip(numbers, chunks, strict=True):
                if length < 1:
                    raise self.source.error(
                        f"chunk lengths must be positive integers, got {length}",
                        token.start_pos,
                        ("integer",),
                    )
        return ast.CreateView(str(name), self.view_query(query_tree), chunks)

    def drop_view(self, tree: Tree) -> ast.Statement:
        return ast.DropView(str(tree.children[2]))

    def show_views(self, tree: Tree) -> ast.Statement:
        return ast.ShowViews()

    def refresh_view(self, tree: Tree) -> ast.Statement:
        _, _, name, _, strategy = tree.children
        return ast.RefreshView(str(name), None if strategy is None else strategy.type.lower())

    def verify_view(self, tree: Tree) -> ast.Statement:
        return ast.VerifyView(str(tree.children[2]))

    def view_query(self, tree: Tree) -> ast.ViewQuery:
        return getattr(self, tree.data)(tree)

    def window_select(self, tree: Tree) -> ast.ViewQuery:
        source_tree = tree.children[3]
        window = self.array_expr(source_tree)
        if not isinstance(window, ast.Window) or not isinstance(window.source, ast.ArrayName):
            raise self.source.error(
                "a window view is SELECT * FROM window(array, before_1, after_1, ..., aggregate(...), ...) "
                "over a stored array; other views are similarity joins: SELECT aggregates FROM A a "
                "SIMILARITY JOIN B b ... WITH SHAPE ... GROUP BY a.dims",
                source_tree.meta.start_pos,
                ("window",),
            )
        return ast.WindowSelect(window)

    def similarity_select(self, tree: Tree) -> ast.ViewQuery:
        parts = {c.data: c for c in tree.children if isinstance(c, Tree) and c.data != "view_aggregate"}
        items = [c for c in tree.children if isinstance(c, Tree) and c.data == "view_aggregate"]
        on = next((c for c in tree.children if isinstance(c, Token) and c.type == "ON"), None)
        left, left_alias, _, _, right, right_alias = parts["view_from"].children
        aliases = {str(left_alias or left): "left"}
        if str(right_alias or right) in aliases:
            where = right_alias or right
            raise self.source.error(
                f"both sides of the similarity join are called {where}; give them different aliases, "
                f"e.g. FROM {left} {left}1 SIMILARITY JOIN {right} {right}2",
                where.start_pos,
                ("identifier",),
            )
        aliases[str(right_alias or right)] = "right"
        locations = [self._located("left", left.start_pos), self._located("right", right.start_pos)]
        aggregates = []
        for item in items:
            aggregate = self.view_aggregate(item, aliases)
            if any(a.name == aggregate.name for a in aggregates):
                raise self.source.error(
                    f"view output {aggregate.name!r} is named twice; rename one with AS", item.meta.start_pos
                )
            aggregates.append(aggregate)
            locations.append(self._located("aggregate " + aggregate.name, item.meta.start_pos))
        mapping = None
        locations.append(self._located("on", (on or right_alias or right).start_pos))
        if "join_condition" in parts:
            mapping = self.join_condition(parts["join_condition"], aliases)
        shape_tree = parts["view_shape"].children[2]
        locations.append(self._located("shape", shape_tree.meta.start_pos))
        group_items = [c for c in parts["view_group"].children if isinstance(c, Tree)]
        locations.append(self._located("group_by", group_items[0].meta.start_pos))
        group_by = []
        for qualified in group_items:
            alias, dimension = self.qualified(qualified, aliases)
            if aliases[alias] != "left":
                raise self.source.error(
                    f"GROUP BY {alias}.{dimension}: only grouping by the left array's cells is supported "
                    f"(GROUP BY every dimension of {left_alias or left}, the first FROM array, in order)",
                    qualified.meta.start_pos,
                )
            if dimension in group_by:
                raise self.source.error(
                    f"GROUP BY lists {alias}.{dimension} twice", qualified.meta.start_pos, ("identifier",)
                )
            group_by.append(dimension)
        return ast.SimilaritySelect(
            tuple(aggregates),
            str(left),
            str(right),
            self.shape(shape_tree),
            tuple(group_by),
            mapping,
            str(left_alias or left),
            str(right_alias or right),
            tuple(locations),
        )

    def _located(self, part: str, offset: int) -> tuple[str, int, int]:
        return (part, *self.source.position(offset))

    def qualified(self, tree: Tree, aliases: dict[str, str]) -> tuple[str, str]:
        """``alias.name`` with a known alias: (alias, name)."""
        alias, _, name = tree.children
        if str(alias) not in aliases:
            known = " and ".join(f"{a} ({side})" for a, side in aliases.items())
            raise self.source.error(
                f"unknown alias {str(alias)!r}; FROM names {known}", alias.start_pos, tuple(aliases)
            )
        return str(alias), str(name)

    def view_aggregate(self, tree: Tree, aliases: dict[str, str]) -> ast.ViewAggregateItem:
        function, _, argument, _, _, name = tree.children
        canonical = {"mean": "avg"}.get(str(function).lower(), str(function).lower())
        if canonical not in ast.VIEW_FUNCTIONS:
            raise self.source.error(
                f"unknown view aggregate {str(function)!r}; views support {', '.join(ast.VIEW_FUNCTIONS)}",
                function.start_pos,
                ast.VIEW_FUNCTIONS,
            )
        if isinstance(argument, Token):  # '*'
            if canonical != "count":
                raise self.source.error(
                    f"{canonical}(*) is not an aggregate; name an attribute, e.g. {canonical}(a.v)",
                    argument.start_pos,
                    ("identifier",),
                )
            table = attribute = None
        else:
            table, attribute = self.qualified(argument, aliases)
        return ast.ViewAggregateItem(canonical, table, attribute, None if name is None else str(name))

    def join_condition(self, tree: Tree, aliases: dict[str, str]) -> tuple[ast.AxisEquation, ...]:
        equations: list[ast.AxisEquation] = []
        for equation in (c for c in tree.children if isinstance(c, Tree)):
            first, second = (c for c in equation.children if isinstance(c, Tree))
            sides = []
            for affine in (first, second):
                alias, dimension = self.qualified(affine.children[0], aliases)
                sides.append((aliases[alias], alias, dimension, affine))
            if sides[0][0] == sides[1][0]:
                raise self.source.error(
                    "each equality of ON relates a dimension of the right array to one of the left array, "
                    "e.g. (b.i = a.i / 2)",
                    equation.meta.start_pos,
                )
            (_, _, target, right_side), (_, _, source, left_side) = sorted(
                sides, key=lambda s: s[0] != "right"
            )
            if len(right_side.children) > 1:
                raise self.source.error(
                    "the right array's dimension stands alone in an equality of ON; put the arithmetic on "
                    "the left array's side, e.g. (b.i = a.i * 2 + 1)",
                    right_side.children[1].start_pos,
                    ("'='", "')'"),
                )
            if any(e.target == target for e in equations):
                raise self.source.error(
                    f"ON maps dimension {target} of the right array twice", equation.meta.start_pos
                )
            factors = self.affine_factors(left_side)
            try:
                equations.append(ast.AxisEquation(target, source, *factors))
            except ValueError as error:
                raise self.source.error(str(error), left_side.meta.start_pos) from None
        return tuple(equations)

    def affine_factors(self, tree: Tree) -> tuple[int, int, int]:
        """(multiplier, divisor, offset) of ``a.i [* m] [/ d] [+|- c]``."""
        tokens = tree.children[1:]
        factors = {"*": 1, "/": 1, "+": 0}
        stage = 0  # the operators allowed next: *, / and +/- in that order, each at most once
        usage = "write the left side as a.i [* m] [/ d] [+ c | - c]"
        for k in range(0, len(tokens), 2):
            op, number = tokens[k], tokens[k + 1]
            order = {"*": 1, "/": 2, "+": 3, "-": 3}[str(op)]
            if order <= stage:
                raise self.source.error(f"unexpected {str(op)!r}: {usage}", op.start_pos, ("'='", "')'"))
            stage = order
            value = self.integer(number, "an integer")
            if str(op) == "*" and value == 0:
                raise self.source.error("the multiplier must not be 0", number.start_pos, ("integer",))
            if str(op) == "/" and value < 1:
                raise self.source.error(
                    f"the divisor must be a positive integer, got {value}", number.start_pos, ("integer",)
                )
            factors["+" if order == 3 else str(op)] = -value if str(op) == "-" else value
        return factors["*"], factors["/"], factors["+"]

    def shape(self, tree: Tree) -> ast.ShapeExpr:
        name, _, *items, rpar = tree.children
        builder = SHAPE_FUNCTIONS.get(str(name).upper())
        if builder is None:
            known = tuple(sorted(SHAPE_FUNCTIONS))
            raise self.source.error(
                f"unknown shape {str(name)!r}; known: {', '.join(known)}", name.start_pos, known
            )
        return builder(ShapeArguments(self, str(name).upper(), name.start_pos, items, rpar.start_pos))

    def integer(self, token: Token, what: str, prefix: str = "") -> int:
        """The integer of a NUMBER token (ParseError at it if it is not an int64 integer)."""
        if not _INTEGER.fullmatch(str(token)):
            raise self.source.error(
                f"{prefix}expected {what}, got {str(token)!r}", token.start_pos, ("integer",)
            )
        value = int(str(token))
        if not ast.INT64_MIN <= value <= ast.INT64_MAX:
            raise self.source.error(
                f"{prefix}integer {value} is outside the int64 range", token.start_pos, ("integer",)
            )
        return value

    # -- parts -------------------------------------------------------------------------------
    def condition(self, tree: Tree) -> Expr:
        start = tree.meta.start_pos
        with self.source.spanning(start):
            return parse_expression(self.source.clean[start : tree.meta.end_pos])

    def value(self, tree: Tree) -> ast.Value:
        (token,) = tree.children
        kind, text = token.type, str(token)
        if kind == "NUMBER":
            if _FLOAT_SYNTAX.search(text):
                number = float(text)
                if math.isinf(number):
                    raise self.source.error(
                        f"number {text} is outside the float64 range (write inf for infinity)",
                        token.start_pos,
                        ("number",),
                    )
                return number
            value = int(text)
            if not ast.INT64_MIN <= value <= ast.INT64_MAX:
                raise self.source.error(
                    f"integer {text} is outside the int64 range", token.start_pos, ("number",)
                )
            return value
        if kind == "INF":
            return float("-inf") if text.startswith("-") else float("inf")
        return {"TRUE": True, "FALSE": False, "NULL": None, "NAN": float("nan")}[kind]

    def array_expr(self, tree: Tree) -> ast.ArrayExpr:
        if tree.data == "array_expr":
            return ast.ArrayName(str(tree.children[0]))
        name, _, *arguments, rpar = tree.children
        builder = ARRAY_FUNCTIONS.get(str(name).lower())
        if builder is None:
            known = tuple(sorted(ARRAY_FUNCTIONS))
            raise self.source.error(
                f"unknown array function {str(name)!r}; known: {', '.join(known)}", name.start_pos, known
            )
        spans = [(a.meta.start_pos, a.meta.end_pos) for a in arguments]
        return builder(Arguments(self.source, str(name).lower(), name.start_pos, spans, rpar.start_pos))


__all__ = [
    "ARRAY_FUNCTIONS",
    "SHAPE_FUNCTIONS",
    "Arguments",
    "ParsedStatement",
    "ShapeArguments",
    "array_function",
    "parse",
    "parse_array_expression",
    "parse_statements",
    "parse_view_query",
    "shape_function",
]
