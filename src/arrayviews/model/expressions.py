"""Cell expressions such as ``sqrt(v) * 2 + j``: parsing, immutable AST, canonical printing and typing."""

from __future__ import annotations

import functools
import math
import numbers
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from lark import Lark, Token, Transformer_NonRecursive, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError

from arrayviews.model.errors import ParseError, ValidationError
from arrayviews.model.types import normalize_type

INT64_MAX = 2**63 - 1
#: Deepest allowed nesting of operators and calls (printing, typing and evaluation recurse).
MAX_DEPTH = 200
KEYWORDS = frozenset({"and", "or", "not", "true", "false", "nan", "inf"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Operator spellings accepted by the grammar and constructors, mapped to the canonical ones.
_OP_ALIASES = {"==": "=", "!=": "<>", "**": "^", "&&": "and", "||": "or", "!": "not"}
UNARY_OPS = frozenset({"-", "+", "not"})
COMPARISONS = frozenset({"=", "<>", "<", "<=", ">", ">="})
ARITHMETIC = frozenset({"+", "-", "*", "/", "%", "^"})
LOGICAL = frozenset({"and", "or"})
BINARY_OPS = COMPARISONS | ARITHMETIC | LOGICAL

# Binding strength used when printing: higher binds tighter; 9 is an atom.
_LEVELS = {"or": 1, "and": 2} | dict.fromkeys(COMPARISONS, 4)
_LEVELS |= {"+": 5, "-": 5, "*": 6, "/": 6, "%": 6, "^": 8}
_ATOM = 9

NUMERIC_TYPES = ("int32", "int64", "float32", "float64")
INTEGER_TYPES = ("int32", "int64")
FLOAT_TYPES = ("float32", "float64")

#: Functions callable in expressions: name -> (fewest, most) arguments; None means no upper limit.
FUNCTIONS: dict[str, tuple[int, int | None]] = {
    **dict.fromkeys(("abs", "sqrt", "exp", "log", "log10", "sin", "cos", "tan"), (1, 1)),
    **dict.fromkeys(("floor", "ceil", "round", "is_nan"), (1, 1)),
    **dict.fromkeys(("int32", "int64", "float32", "float64"), (1, 1)),
    "pow": (2, 2),
    "least": (2, None),
    "greatest": (2, None),
    "iif": (3, 3),
}
_FLOAT_FUNCTIONS = frozenset({"sqrt", "exp", "log", "log10", "sin", "cos", "tan", "pow"})


def _canonical_op(op: str, allowed: frozenset[str]) -> str:
    key = _OP_ALIASES.get(op.lower(), op.lower())
    if key not in allowed:
        raise ValueError(f"unknown operator {op!r}; expected one of {', '.join(sorted(allowed))}")
    return key


class Expr:
    """Base of the expression nodes; nodes are immutable and compare equal when structurally equal."""

    __slots__ = ()

    def children(self) -> tuple[Expr, ...]:
        """The direct sub-expressions, left to right."""
        return ()

    def walk(self) -> Iterator[Expr]:
        """This node and every node below it, parents before children."""
        yield self
        for child in self.children():
            yield from child.walk()

    def to_text(self) -> str:
        """Canonical text that parses back to an equal expression."""
        return _print(self, 0)

    def __str__(self) -> str:
        return self.to_text()


@dataclass(frozen=True, eq=False)
class Literal(Expr):
    """A constant: a bool, a non-negative int (int64) or a non-negative float (float64), nan or inf.

    Negative constants are written as ``Unary("-", Literal(...))``, exactly as the parser builds them.
    """

    value: bool | int | float

    def __post_init__(self) -> None:
        value = self.value
        if isinstance(value, bool):
            return
        if isinstance(value, numbers.Integral):
            value = int(value)
            if not 0 <= value <= INT64_MAX:
                raise ValueError(f"integer literal {value} is outside 0..{INT64_MAX}")
        elif isinstance(value, numbers.Real):
            value = float(value)
            if math.isnan(value):
                value = math.nan
            elif math.copysign(1.0, value) < 0:
                raise ValueError(f"float literal {value!r} is negative; negate it with Unary('-', ...)")
        else:
            raise TypeError(f"a literal must be a bool, int or float, got {type(value).__name__}")
        object.__setattr__(self, "value", value)

    @property
    def type(self) -> str:
        """The literal's attribute type: bool, int64 or float64."""
        if isinstance(self.value, bool):
            return "bool"
        return "int64" if isinstance(self.value, int) else "float64"

    def _key(self) -> tuple:
        value = self.value
        return (self.type, "nan" if isinstance(value, float) and math.isnan(value) else value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Literal):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@dataclass(frozen=True)
class Name(Expr):
    """A reference to an attribute column or dimension coordinate of the chunk."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "`" in self.name or "\n" in self.name:
            raise ValueError(f"invalid name {self.name!r} in an expression")


@dataclass(frozen=True)
class Unary(Expr):
    """``-x``, ``+x`` or ``not x``."""

    op: str
    operand: Expr

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", _canonical_op(self.op, UNARY_OPS))

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)


@dataclass(frozen=True)
class Binary(Expr):
    """``left op right`` for arithmetic, comparison and logical operators (canonical spellings)."""

    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", _canonical_op(self.op, BINARY_OPS))

    def children(self) -> tuple[Expr, ...]:
        return (self.left, self.right)


@dataclass(frozen=True)
class Call(Expr):
    """A function call ``function(args...)``; the function name is stored in lower case."""

    function: str
    args: tuple[Expr, ...] = ()

    def __post_init__(self) -> None:
        function = self.function.lower() if isinstance(self.function, str) else self.function
        if not isinstance(function, str) or not _IDENTIFIER.fullmatch(function) or function in KEYWORDS:
            raise ValueError(f"invalid function name {self.function!r}")
        object.__setattr__(self, "function", function)
        object.__setattr__(self, "args", tuple(self.args))

    def children(self) -> tuple[Expr, ...]:
        return self.args


# ---------------------------------------------------------------------------------------------
# Printing


def _level(expr: Expr) -> int:
    if isinstance(expr, Binary):
        return _LEVELS[expr.op]
    if isinstance(expr, Unary):
        return 3 if expr.op == "not" else 7
    return _ATOM


def _literal_text(value: bool | int | float) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else "inf"
    return repr(value)


def _name_text(name: str) -> str:
    if _IDENTIFIER.fullmatch(name) and name.lower() not in KEYWORDS:
        return name
    return f"`{name}`"


def _print(expr: Expr, min_level: int) -> str:
    if isinstance(expr, Literal):
        text = _literal_text(expr.value)
    elif isinstance(expr, Name):
        text = _name_text(expr.name)
    elif isinstance(expr, Call):
        text = f"{expr.function}({', '.join(_print(arg, 0) for arg in expr.args)})"
    elif isinstance(expr, Unary):
        if expr.op == "not":
            text = f"not {_print(expr.operand, 3)}"
        else:
            operand = _print(expr.operand, 7)
            text = expr.op + (" " if operand[0] in "+-" else "") + operand
    elif isinstance(expr, Binary):
        level = _LEVELS[expr.op]
        if expr.op == "^":  # right-associative; the base is an atom, the exponent may be signed
            bounds = (_ATOM, 7)
        elif expr.op in COMPARISONS:  # comparisons do not chain
            bounds = (level + 1, level + 1)
        else:
            bounds = (level, level + 1)
        text = f"{_print(expr.left, bounds[0])} {expr.op} {_print(expr.right, bounds[1])}"
    else:
        raise TypeError(f"not an expression node: {expr!r}")
    return f"({text})" if _level(expr) < min_level else text


# ---------------------------------------------------------------------------------------------
# Parsing

# How terminals are shown to users in "expected one of" lists.
_TERMINAL_NAMES = {
    "NAME": "name",
    "QUOTED_NAME": "name",
    "INT": "number",
    "FLOAT": "number",
    "TRUE": "true",
    "FALSE": "false",
    "NAN": "nan",
    "INF": "inf",
    "OR": "or",
    "AND": "and",
    "NOT": "not",
    "COMPARE": "comparison operator",
    "POW": "'^'",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "STAR": "'*'",
    "SLASH": "'/'",
    "PERCENT": "'%'",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "$END": "end of input",
}


@functools.cache
def _parser() -> Lark:
    return Lark.open(
        "expressions.lark",
        rel_to=__file__,
        parser="lalr",
        start="start",
        propagate_positions=True,
        maybe_placeholders=False,
    )


class ExpressionBuilder(Transformer_NonRecursive):
    """Turns a parse tree of expressions.lark into Expr nodes.

    Other grammars that import these rules can reuse it through ``lark.visitors.merge_transformers``.
    An out-of-range integer literal raises ParseError (without ``text``) at the literal.
    """

    def binary(self, children: list) -> Binary:
        left, op, right = children
        return Binary(str(op), left, right)

    def unary(self, children: list) -> Unary:
        op, operand = children
        return Unary(str(op), operand)

    def name(self, children: list) -> Name:
        (token,) = children
        text = str(token)
        return Name(text[1:-1] if _kind(token) == "QUOTED_NAME" else text)

    def call(self, children: list) -> Call:
        function, *args = children
        return Call(str(function).lower(), tuple(args))

    def literal(self, children: list) -> Literal:
        (token,) = children
        kind, text = _kind(token), str(token)
        if kind == "INT":
            if int(text) > INT64_MAX:
                raise ParseError(
                    f"integer {text} is too large (the largest is {INT64_MAX})",
                    line=token.line,
                    column=token.column,
                )
            return Literal(int(text))
        if kind == "FLOAT":
            return Literal(float(text))
        return Literal({"TRUE": True, "FALSE": False, "NAN": math.nan, "INF": math.inf}[kind])


def _kind(token: Token) -> str:
    """The token's terminal name without the namespace a grammar importing these rules adds."""
    return token.type.rsplit("__", 1)[-1]


def parse_expression(text: str) -> Expr:
    """Parse expression text into an Expr.

    Raises ParseError with the 1-based line and column of the first problem and the terminals that
    would have been accepted there.
    """
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as error:
        raise _syntax_error(text, error) from None
    _check_depth(text, tree)
    try:
        return ExpressionBuilder().transform(tree)
    except VisitError as error:
        cause = error.orig_exc
        if isinstance(cause, ParseError):
            raise ParseError(cause.reason, text=text, line=cause.line, column=cause.column) from None
        raise


def _check_depth(text: str, tree: Tree) -> None:
    """Raise ParseError at the first node nested more than MAX_DEPTH levels deep."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ParseError(
                f"expression is nested more than {MAX_DEPTH} levels deep",
                text=text,
                line=node.meta.line,
                column=node.meta.column,
            )
        children = [child for child in node.children if isinstance(child, Tree)]
        stack.extend((child, depth + 1) for child in reversed(children))  # visit in reading order


def _end_position(text: str) -> tuple[int, int]:
    """Line and column just after the last non-blank character of ``text``."""
    body = text.rstrip()
    return body.count("\n") + 1, len(body) - (body.rfind("\n") + 1) + 1


def _readable(names: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted({_TERMINAL_NAMES.get(name, name) for name in names}))


def _accepted_before(text: str, position: int) -> tuple[str, ...]:
    """Terminals the parser would accept after ``text[:position]`` (for lexer errors)."""
    try:
        interactive = _parser().parse_interactive(text[:position])
        interactive.exhaust_lexer()
        return _readable(interactive.accepts())
    except UnexpectedInput:
        return ()


def _syntax_error(text: str, error: UnexpectedInput) -> ParseError:
    if isinstance(error, UnexpectedCharacters):
        expected = _accepted_before(text, error.pos_in_stream) or _readable(error.allowed or ())
        reason = f"unexpected character {error.char!r}"
        line, column = error.line, error.column
    elif isinstance(error, UnexpectedToken) and error.token.type != "$END":
        expected = _readable(error.accepts or error.expected)
        token = error.token
        if expected == ("end of input",):
            reason = f"unexpected {str(token)!r} after the end of the expression"
        else:
            reason = f"unexpected {str(token)!r}"
        line, column = token.line, token.column
    else:
        accepts = getattr(error, "accepts", None) or getattr(error, "expected", None) or ()
        expected = _readable(accepts)
        reason = "expression is empty" if not text.strip() else "unexpected end of input"
        line, column = _end_position(text)
    return ParseError(reason, text=text, line=line, column=column, expected=expected)


# ---------------------------------------------------------------------------------------------
# Names and types


def referenced_names(expr: Expr) -> frozenset[str]:
    """The attribute and dimension names the expression reads."""
    return frozenset(node.name for node in expr.walk() if isinstance(node, Name))


def infer_type(expr: Expr, types: Mapping[str, str]) -> str:
    """The attribute type of ``expr``'s value, given the types of the names it may reference.

    Typing rules (results are always one of int32, int64, float32, float64, bool):

    * Literals: integers are int64, decimals/nan/inf are float64, true/false are bool.
    * ``+ - * %``, unary ``-``/``+`` and ``abs``: int64 if every operand is an integer, else float64
      (32-bit inputs are widened; arithmetic never yields a 32-bit type).
    * ``/``, ``^``/``**``, ``pow``, ``sqrt``, ``exp``, ``log``, ``log10``, ``sin``, ``cos``, ``tan``:
      float64.
    * ``floor``, ``ceil``, ``round``: float64 for a float argument, int64 for an integer one.
    * ``least``, ``greatest`` and the two branches of ``iif``: the common type of the arguments —
      int32 only if all are int32, float32 only if all are float32, otherwise int64 when all are
      integers and float64 when any is a float. ``iif`` branches may also both be bool.
    * Casts ``int32(x)``, ``int64(x)``, ``float32(x)``, ``float64(x)`` give that type; they accept
      numbers and bool (true is 1).
    * Comparisons give bool. Numbers compare with numbers; bool compares with bool, and only with
      ``=`` and ``<>``. ``is_nan`` takes a number and gives bool.
    * ``and``, ``or``, ``not`` and the condition of ``iif`` need bool. Bool never takes part in
      arithmetic (convert it with ``int64(b)``).

    Raises ValidationError for an unknown name, an unknown function, a wrong number of arguments
    or an operand of the wrong type.
    """
    known = {name: normalize_type(type_name) for name, type_name in types.items()}

    def visit(node: Expr) -> str:
        if isinstance(node, Name):
            if node.name not in known:
                available = ", ".join(known) or "(none)"
                raise ValidationError(
                    f"unknown name {node.name!r} in expression {expr.to_text()!r}; available: {available}",
                    column=node.name,
                )
            return known[node.name]
        return result_type(node, [visit(child) for child in node.children()])

    return visit(expr)


def common_type(types: Sequence[str]) -> str:
    """The type that all of ``types`` (all numeric, or all bool) are converted to when mixed."""
    distinct = set(types)
    if len(distinct) == 1:
        return distinct.pop()
    if "bool" in distinct:
        raise ValueError(f"cannot mix bool with {', '.join(sorted(distinct - {'bool'}))}")
    return "int64" if distinct <= set(INTEGER_TYPES) else "float64"


def _widened(type_name: str) -> str:
    return "int64" if type_name in INTEGER_TYPES else "float64"


def _describe(node: Expr) -> str:
    if isinstance(node, Call):
        return f"{node.function}()"
    return f"'{node.op}'" if isinstance(node, Unary | Binary) else node.to_text()


def _require(node: Expr, type_name: str, wanted: str) -> None:
    ok = type_name in NUMERIC_TYPES if wanted == "number" else type_name == "bool"
    if not ok:
        hint = "; convert it with int64(...) first" if wanted == "number" else ""
        article = "a condition (bool)" if wanted == "bool" else "a number"
        raise ValidationError(
            f"{_describe(node)} needs {article}, got {type_name} in {node.to_text()!r}{hint}"
        )


def result_type(node: Expr, operand_types: Sequence[str]) -> str:
    """The type of ``node`` given the types of its direct children (see :func:`infer_type`).

    ``node`` must not be a Name (a name's type comes from the caller's mapping).
    """
    if isinstance(node, Literal):
        return node.type
    if isinstance(node, Unary):
        (operand,) = operand_types
        if node.op == "not":
            _require(node, operand, "bool")
            return "bool"
        _require(node, operand, "number")
        return _widened(operand)
    if isinstance(node, Binary):
        return _binary_type(node, *operand_types)
    if isinstance(node, Call):
        return _call_type(node, operand_types)
    raise TypeError(f"no result type rule for {node!r}")


def _binary_type(node: Binary, left: str, right: str) -> str:
    op = node.op
    if op in LOGICAL:
        _require(node, left, "bool")
        _require(node, right, "bool")
        return "bool"
    if op in COMPARISONS:
        if (left == "bool") != (right == "bool"):
            raise ValidationError(f"cannot compare {left} with {right} in {node.to_text()!r}")
        if left == "bool" and op not in ("=", "<>"):
            raise ValidationError(f"bool values can only be compared with = and <>, in {node.to_text()!r}")
        return "bool"
    _require(node, left, "number")
    _require(node, right, "number")
    if op in ("/", "^"):
        return "float64"
    return "int64" if left in INTEGER_TYPES and right in INTEGER_TYPES else "float64"


def _call_type(node: Call, args: Sequence[str]) -> str:
    name = node.function
    if name not in FUNCTIONS:
        raise ValidationError(
            f"unknown function {name!r} in {node.to_text()!r}; available: {', '.join(sorted(FUNCTIONS))}"
        )
    fewest, most = FUNCTIONS[name]
    if len(args) < fewest or (most is not None and len(args) > most):
        if most is None:
            wanted = f"at least {fewest} arguments"
        else:
            wanted = f"{fewest} argument{'s' if fewest != 1 else ''}"
        raise ValidationError(f"function {name}() takes {wanted}, got {len(args)} in {node.to_text()!r}")
    if name == "iif":
        _require(node, args[0], "bool")
        return _common_or_error(node, args[1:])
    if name in ("int32", "int64", "float32", "float64"):
        if args[0] != "bool":
            _require(node, args[0], "number")
        return name
    for arg in args:
        _require(node, arg, "number")
    if name in _FLOAT_FUNCTIONS:
        return "float64"
    if name == "is_nan":
        return "bool"
    if name in ("least", "greatest"):
        return common_type(args)
    if name in ("floor", "ceil", "round"):
        return "float64" if args[0] in FLOAT_TYPES else "int64"
    return _widened(args[0])  # abs


def _common_or_error(node: Expr, types: Sequence[str]) -> str:
    try:
        return common_type(types)
    except ValueError as error:
        raise ValidationError(
            f"{_describe(node)} branches must agree: {error}, in {node.to_text()!r}"
        ) from None
