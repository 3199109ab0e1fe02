"""The array functions (``subarray``, ``filter``, ...) and similarity shapes (``L1(1)``, ``BOX(-2:0)``,
``PRODUCT(...)``) of the statement language, as tables of builders.

The grammar captures ``name(argument, ...)`` with raw argument spans; :data:`ARRAY_FUNCTIONS` maps
each function name to a builder that reads its arguments as arrays, integers, names, expressions or
aggregate calls (:class:`Arguments`). Adding an operator is one builder registered with
:func:`array_function`, and needs no grammar change. Shapes work the same way through
:data:`SHAPE_FUNCTIONS` and :func:`shape_function`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from lark import Token

from arrayviews.language import syntax as ast
from arrayviews.language.source import Source
from arrayviews.language.uncertain_statements import (
    KEYWORD_ARGUMENT,
    positive,
    probability,
    read_options,
    word,
)
from arrayviews.model.aggregate_calls import AggregateCall, parse_aggregate
from arrayviews.model.errors import ParseError
from arrayviews.model.expressions import Expr, parse_expression
from arrayviews.model.names import IDENTIFIER

if TYPE_CHECKING:
    from arrayviews.language.parser import StatementBuilder

_INTEGER = re.compile(r"[+-]?[0-9]+")
_IDENTIFIER = IDENTIFIER


class Arguments:
    """The arguments of one array-function call, read by kind.

    Every reader raises ParseError at the argument's position when it does not have that kind.
    """

    def __init__(
        self, builder: StatementBuilder, function: str, at: int, spans: list[tuple[int, int]], end: int
    ) -> None:
        self.builder = builder
        self.source: Source = builder.source
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
            node = self.builder.array_expression(start, end)
            if isinstance(node, ast.UncertainOperator):
                raise self.error(
                    f"argument {k + 1}: {node.function}(...) of uncertain arrays gives tuples with "
                    f"probabilities, not an array; it stands alone: SELECT * FROM {node.function}(...)",
                    k,
                    ("identifier",),
                )
            self._arrays[k] = node
        return self._arrays[k]

    def stored_name(self, k: int, what: str) -> ast.ArrayName:
        """Argument ``k`` as the name of a stored relation (``what`` says which kind)."""
        node = self.array(k)
        if not isinstance(node, ast.ArrayName):
            raise self.error(
                f"argument {k + 1} must name a stored {what}, got {self.text(k)!r}", k, ("identifier",)
            )
        return node

    def is_keyword_argument(self, k: int) -> bool:
        """Whether argument ``k`` is written ``NAME value`` (``THRESHOLD 0.9``)."""
        return KEYWORD_ARGUMENT.fullmatch(self.text(k)) is not None

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
    """``subarray(A, lo..., hi...)`` of an array, or with ``THRESHOLD p`` (and ``METHOD RTREE``) the
    probabilistic Subarray of an uncertain array."""
    usage = "subarray(array, low_1, ..., low_d, high_1, ..., high_d)"
    args.count(3, None, usage)
    options_at = next((k for k in range(1, len(args)) if args.is_keyword_argument(k)), len(args))
    coordinates = [args.integer(k, "an integer coordinate") for k in range(1, options_at)]
    if len(coordinates) % 2:
        raise args.error(
            f"needs a low and a high coordinate per dimension (an even number), got {len(coordinates)}; "
            f"use {usage}",
            None,
            ("','",),
        )
    half = len(coordinates) // 2
    low, high = tuple(coordinates[:half]), tuple(coordinates[half:])
    if options_at == len(args):
        return ast.Subarray(args.array(0), low, high)
    usage = "subarray(U, low_1, ..., low_d, high_1, ..., high_d, THRESHOLD p [, METHOD RTREE])"
    if not coordinates:
        raise args.error(f"needs a low and a high coordinate per dimension; use {usage}", 1, ("integer",))
    options = read_options(
        args, options_at, {"THRESHOLD": probability, "METHOD": word(ast.SUBARRAY_METHODS)}, usage
    )
    if "THRESHOLD" not in options:
        raise args.error(
            f"a probabilistic subarray needs THRESHOLD p; use {usage}", options_at, ("THRESHOLD",)
        )
    source = args.stored_name(0, "uncertain array")
    return ast.ProbabilisticSubarray(source, low, high, options["THRESHOLD"], options.get("METHOD", "scheme"))


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


@array_function("structure_join")
def _structure_join(args: Arguments) -> ast.ArrayExpr:
    """``structure_join(A, B, delta, threshold [, METHOD m] [, ENGINE e] [, OUTER o])`` of two uncertain
    arrays (paper 001, Definition 2.2)."""
    usage = (
        "structure_join(A, B, delta, threshold [, METHOD SBJ | BNL | INDEX] [, ENGINE SPARK | LOCAL] "
        "[, OUTER AUTO | LEFT | RIGHT])"
    )
    args.count(4, 7, usage)
    left = args.stored_name(0, "uncertain array")
    right = args.stored_name(1, "uncertain array")
    numbers = []
    for k, (reader, what) in enumerate(((positive, "delta"), (probability, "threshold")), start=2):
        try:
            numbers.append(reader(args.text(k)))
        except ValueError as error:
            raise args.error(f"{what}: {error}; use {usage}", k, ("number",)) from None
    options = read_options(
        args,
        4,
        {"METHOD": word(ast.JOIN_METHODS), "ENGINE": word(ast.JOIN_ENGINES), "OUTER": word(ast.JOIN_OUTER)},
        usage,
    )
    return ast.StructureJoin(
        left,
        right,
        *numbers,
        method=options.get("METHOD", "sbj"),
        engine=options.get("ENGINE", "auto"),
        outer=options.get("OUTER", "auto"),
    )


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

    def __init__(self, builder: StatementBuilder, function: str, at: int, items: list, end: int) -> None:
        self.builder = builder
        self.source: Source = builder.source
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


__all__ = [
    "ARRAY_FUNCTIONS",
    "SHAPE_FUNCTIONS",
    "Arguments",
    "ShapeArguments",
    "array_function",
    "shape_function",
]
