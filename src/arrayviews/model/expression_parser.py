"""Parsing cell expressions from Spark SQL text (sqlglot's Spark dialect) into the expression tree.

sqlglot reads the text; this module binds its syntax tree to :mod:`expression_tree` nodes, keeping
only the supported subset and reading the text exactly as Spark does where the two differ:

* Spark reads ``-5`` (a minus sign right before a number) as one literal: ``-2147483648`` is an INT.
* All comparison operators share one level, left-associative (sqlglot puts ``=``/``<>`` below
  ``<``/``>``): ``a = b < c`` is ``(a = b) < c``.
* Bitwise ``&`` binds tighter than ``^``, which binds tighter than ``|`` (sqlglot: one level).
* Spark rejects NOT, AND, OR, IN and BETWEEN unparenthesised as operands of arithmetic or comparisons
  (``a = NOT b``, ``a = b IN (1)``); so does this parser, where sqlglot would pick a grouping.
* Number literals are typed as Spark types them: an integer is INT if it fits, else BIGINT; ``1L``
  BIGINT, ``1.5F`` FLOAT, ``1.5D`` and ``1e3`` DOUBLE. A literal with a decimal point and no suffix
  (``1.5``) is a DECIMAL in Spark; arrays have no decimal type, so it is read as DOUBLE (the one
  divergence from Spark; it prints back as ``1.5D``).
* Strings appear only as the operand of a cast: ``CAST('NaN' AS DOUBLE)``, ``double('-inf')``.

Errors are ParseError with the 1-based line and column of the problem.
"""

from __future__ import annotations

import bisect
import math
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction

import numpy as np
import sqlglot.errors
from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from arrayviews.model import sql_dialect, text_lines
from arrayviews.model.errors import ParseError
from arrayviews.model.expression_tree import (
    CAST_FUNCTIONS,
    FUNCTION_ALIASES,
    FUNCTIONS,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_DEPTH,
    Between,
    Binary,
    Call,
    Case,
    Cast,
    Expr,
    In,
    IsNull,
    Literal,
    Name,
    Unary,
    arity_problem,
    spark_string_value,
    string_literal_text,
)
from arrayviews.model.types import SQL_TYPE_NAMES, type_of_sql_name

SUPPORTED = (
    "numbers, TRUE, FALSE, NULL, names, + - * / % DIV, unary - + ~, & | ^, = == <> != < <= > >= <=>, "
    "AND OR NOT, IS [NOT] NULL, [NOT] IN (...), [NOT] BETWEEN, CASE WHEN, "
    f"CAST(x AS {'|'.join(SQL_TYPE_NAMES.values())}) and the functions "
    + ", ".join(sorted({*FUNCTIONS, *FUNCTION_ALIASES, *CAST_FUNCTIONS}))
)
_ARITHMETIC = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%", exp.IntDiv: "div"}
_BITWISE = {exp.BitwiseAnd: "&", exp.BitwiseXor: "^", exp.BitwiseOr: "|"}
_BITWISE_LEVEL = {"&": 3, "^": 2, "|": 1}
_COMPARISONS = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_COMPARISONS |= {exp.NullSafeEQ: "<=>", exp.NullSafeNEQ: "<=>"}  # IS DISTINCT FROM: NOT (a <=> b)
_LOGICAL = {exp.And: "and", exp.Or: "or"}
# Operands Spark's grammar does not accept unparenthesised inside arithmetic and comparisons.
_LOOSE = (exp.Not, exp.And, exp.Or, exp.In, exp.Between, exp.Is)
_UNSUPPORTED_NAMES = {
    exp.DPipe: "'||' (string concatenation; write OR for a condition)",
    exp.ILike: "ILIKE",
    exp.Star: "'*'",
    exp.Dot: "'.'",
    exp.Bracket: "subscripts",
    exp.Tuple: "row values",
    exp.Interval: "INTERVAL",
    exp.HexString: "hexadecimal literals",
    exp.Xor: "XOR",
    exp.Select: "subqueries",
    exp.Subquery: "subqueries",
    exp.Exists: "EXISTS",
    exp.Parameter: "parameters",
}
_INTEGER_TEXT = re.compile(r"[0-9]+")
_SUFFIX = re.compile(r"([0-9.eE+-]+?)([A-Za-z]*)")
_FLOAT_STRING = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[dDfF]?")
_INT_STRING = re.compile(r"[+-]?[0-9]+")
_BOOL_STRINGS = {**dict.fromkeys(("t", "true", "y", "yes", "1"), True)}
_BOOL_STRINGS |= dict.fromkeys(("f", "false", "n", "no", "0"), False)
_STACK_FRAMES = 40 * MAX_DEPTH + 4000  # sqlglot recurses ~20 frames per nesting level
_recursion_lock = threading.Lock()


def parse_expression(text: str) -> Expr:
    """Parse Spark SQL expression text (e.g. ``sqrt(v) * 2 + j``) into an Expr.

    Raises ParseError with the 1-based line and column of the first problem (and, where known, what
    would have been accepted there): syntax errors, constructs outside the supported subset, unknown
    functions, wrong argument counts, out-of-range literals and nesting deeper than MAX_DEPTH.
    """
    source = _Source(text)
    tokens = source.tokens
    if not tokens:
        raise source.error("expression is empty", len(text), ("expression",), at_start=True)
    source.check_tokens()
    with _deep_recursion():
        try:
            parsed = sql_dialect.parse(tokens, text)
        except sqlglot.errors.ParseError as error:
            raise source.syntax_error(tokens, error) from None
        except RecursionError:
            raise source.error(f"expression is nested more than {MAX_DEPTH} levels deep", 0) from None
        statements = [node for node in parsed if node is not None]
        if len(statements) != 1:
            semicolon = next(t for t in tokens if t.token_type == TokenType.SEMICOLON)
            raise source.error("unexpected ';'", semicolon.start, ("operator", "end of input"))
        (root,) = statements
        source.check_depth(root)
        return _Binder(source).bind(root)


@contextmanager
def _deep_recursion() -> Iterator[None]:
    """Let sqlglot's recursive-descent parser go MAX_DEPTH levels deep (pure Python frames)."""
    with _recursion_lock:
        previous = sys.getrecursionlimit()
        sys.setrecursionlimit(max(previous, _STACK_FRAMES))
        try:
            yield
        finally:
            sys.setrecursionlimit(previous)


class _Source:
    """The text being parsed: positions, token checks and error construction."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = self._tokenize()
        self._token_starts = [token.start for token in self.tokens]

    def position(self, offset: int) -> tuple[int, int]:
        return text_lines.position(self.text, offset)

    def end_offset(self) -> int:
        return len(self.text.rstrip())

    def error(
        self, reason: str, offset: int, expected: tuple[str, ...] = (), at_start: bool = False
    ) -> ParseError:
        line, column = (1, 1) if at_start else self.position(offset)
        return ParseError(reason, text=self.text, line=line, column=column, expected=expected)

    def _tokenize(self) -> list[Token]:
        tokenizer = sql_dialect.DIALECT.tokenizer()
        try:
            return tokenizer.tokenize(self.text)
        except sqlglot.errors.TokenError:
            core = getattr(tokenizer, "_core", tokenizer)  # sqlglot keeps the scanning state there
            offset = getattr(core, "_start", 0)
            character = self.text[offset : offset + 1] or "end of input"
            if character in ("`", "'", '"'):
                reason = (
                    f"unterminated {'name' if character == '`' else 'string'} starting with {character!r}"
                )
            else:
                reason = f"unexpected character {character!r}"
            raise self.error(reason, offset, ("expression",)) from None

    def check_tokens(self) -> None:
        """Reject before parsing what sqlglot would accept silently or report late: symbols that are
        not Spark expression syntax, empty arguments, two operators in a row, nesting beyond MAX_DEPTH."""
        depth = 0
        for before, token in zip([None, *self.tokens], self.tokens, strict=False):
            kind = token.token_type
            previous = before.token_type if before is not None else None
            if kind in _JUNK:
                hint = _JUNK[kind]
                raise self.error(f"unexpected {token.text!r}{hint}", token.start, ("expression", "operator"))
            if kind == TokenType.L_PAREN:
                depth += 1
                if depth > MAX_DEPTH:
                    raise self.error(f"expression is nested more than {MAX_DEPTH} levels deep", token.start)
            elif kind == TokenType.R_PAREN:
                depth -= 1
                if depth < 0:
                    raise self.error("unexpected ')'", token.start, ("operator", "end of input"))
            if kind == TokenType.COMMA and previous in (TokenType.L_PAREN, TokenType.COMMA):
                raise self.error("unexpected ','", token.start, ("expression",))
            if kind == TokenType.R_PAREN and previous == TokenType.COMMA:
                raise self.error("unexpected ')'", token.start, ("expression",))
            if kind in _BINARY_ONLY and (
                previous is None
                or previous in _BINARY_ONLY
                or previous in _PREFIX
                or previous == TokenType.COMMA
                or (previous == TokenType.L_PAREN and kind != TokenType.STAR)
            ):
                raise self.error(f"unexpected {token.text!r}", token.start, ("expression",))
        if depth > 0:
            raise self.error("unexpected end of input", self.end_offset(), ("')'",))

    def check_depth(self, root: exp.Expression) -> None:
        """Raise at the first node nested more than MAX_DEPTH levels deep (parentheses not counted)."""
        stack = [(root, 1)]
        while stack:
            node, level = stack.pop()
            counted = not isinstance(node, exp.Paren | exp.Identifier | exp.DataType)
            if counted and level > MAX_DEPTH:
                raise self.error(f"expression is nested more than {MAX_DEPTH} levels deep", self.start(node))
            children = [child for child in node.iter_expressions()]
            stack.extend((child, level + counted) for child in reversed(children))

    def start(self, node: exp.Expression) -> int:
        """The offset where ``node`` starts: its first token sqlglot kept a position for (names,
        literals, calls), moved back over a prefix operator's own tokens (NOT, -, ~, +, '(')."""
        best = None
        for child in node.walk():
            meta = child._meta  # sqlglot keeps positions of names, literals and calls here
            if meta and "start" in meta:
                best = meta["start"] if best is None else min(best, meta["start"])
        if best is None:
            return 0
        prefix = _PREFIX_TOKENS.get(type(node))
        if isinstance(node, exp.Anonymous) and node.this == sql_dialect.UNARY_PLUS:
            prefix = (TokenType.PLUS,)
        if prefix:
            index = bisect.bisect_left(self._token_starts, best) - 1
            while index >= 0 and self.tokens[index].token_type == TokenType.L_PAREN:
                index -= 1
            if index >= 0 and self.tokens[index].token_type in prefix:
                return self.tokens[index].start
        return best

    def syntax_error(self, tokens: list[Token], error: sqlglot.errors.ParseError) -> ParseError:
        details = error.errors[0] if error.errors else {}
        description = details.get("description") or str(error)
        # sqlglot's descriptions may show a token as its Python repr: show its text
        description = _TOKEN_REPR.sub(lambda m: repr(m.group(1)), description)
        token = _token_at(tokens, details.get("line"), details.get("col"))
        if token is None:
            return self.error(f"malformed expression: {description}", self.end_offset())
        last = token is tokens[-1]
        shown = repr(token.text)
        missing = re.match(r"Required keyword: '(\w+)' missing for .*\.(\w+)'>", description)
        if missing and missing.group(1) == "this" and missing.group(2) in _BINARY_CLASS_NAMES:
            return self.error(f"unexpected {shown}", token.start, ("expression",))
        if missing or description.startswith("Expecting )") or description.startswith("Expected END"):
            if missing:
                expected = ("expression",)
            else:
                expected = ("')'",) if description.startswith("Expecting )") else ("END",)
            if last:
                return self.error("unexpected end of input", self.end_offset(), expected)
            return self.error(f"unexpected {shown}", token.start, expected)
        if description.startswith("Expected TYPE"):
            return self.error(
                f"unexpected {shown}; a cast needs a type", token.start, tuple(SQL_TYPE_NAMES.values())
            )
        if description.startswith("Invalid expression"):
            return self.error(f"unexpected {shown}", token.start, ("operator", "end of input"))
        return self.error(f"malformed expression near {shown}: {description}", token.start)


_TOKEN_REPR = re.compile(r"<Token token_type: TokenType\.\w+, text: (.*?), line: \d+, col: .*?>")
_BINARY_CLASS_NAMES = {cls.__name__ for cls in (*_ARITHMETIC, *_BITWISE, *_COMPARISONS, *_LOGICAL)}
# Tokens that are no part of Spark expression syntax (with a hint where one helps).
_JUNK = {
    getattr(TokenType, name): hint
    for name, hint in {
        "HASH": "",
        "PLACEHOLDER": "",
        "ARROW": "",
        "DARROW": "",
        "FARROW": "",
        "PARAMETER": "",
        "L_BRACKET": "",
        "R_BRACKET": "",
        "L_BRACE": "",
        "R_BRACE": "",
        "COLON": "",
        "DAMP": " (write AND)",
        "BACKSLASH": "",
    }.items()
    if hasattr(TokenType, name)
}
# Binary operators, which cannot start an operand (so cannot follow another operator).
_BINARY_ONLY = {
    getattr(TokenType, name)
    for name in (
        "STAR",
        "SLASH",
        "MOD",
        "DIV",
        "AND",
        "OR",
        "EQ",
        "NEQ",
        "LT",
        "LTE",
        "GT",
        "GTE",
        "NULLSAFE_EQ",
        "AMP",
        "PIPE",
        "CARET",
        "DPIPE",
    )
    if hasattr(TokenType, name)
}
_PREFIX = {TokenType.DASH, TokenType.PLUS, TokenType.TILDE, TokenType.NOT}
_PREFIX_TOKENS = {exp.Not: (TokenType.NOT,), exp.Neg: (TokenType.DASH,), exp.BitwiseNot: (TokenType.TILDE,)}


def _token_at(tokens: list[Token], line: int | None, col: int | None) -> Token | None:
    """The token sqlglot reported an error at (its line and end column)."""
    if line is None or col is None:
        return None
    for token in tokens:
        if token.line == line and token.col == col:
            return token
    return tokens[-1] if tokens else None


class _Binder:
    """Turns sqlglot's syntax tree into expression-tree nodes, enforcing the supported subset."""

    def __init__(self, source: _Source) -> None:
        self.source = source

    def fail(self, reason: str, node: exp.Expression, expected: tuple[str, ...] = ()) -> ParseError:
        return self.source.error(reason, self.source.start(node), expected)

    def unsupported(self, node: exp.Expression, what: str | None = None) -> ParseError:
        what = what or _UNSUPPORTED_NAMES.get(type(node)) or node.key.upper()
        return self.fail(f"{what} is not supported in array expressions; supported: {SUPPORTED}", node)

    def adjacent_strings(self, node: exp.Concat) -> str | None:
        """The value of string literals written one after the other, or None if ``node`` is not that.

        sqlglot reads ``'it''s'`` as the two literals ``'it'`` and ``'s'`` (and concatenates them, as
        Spark does with ``'a' 'b'``); Spark reads a doubled quote inside a literal as the quote. So
        literals touching each other with the same quote are one literal, read from the text."""
        parts = node.expressions
        meta = parts[0]._meta if parts else None
        if (
            not all(isinstance(p, exp.Literal) and p.is_string for p in parts)
            or not meta
            or "start" not in meta
        ):
            return None
        tokens = self.source.tokens
        first = next((k for k, t in enumerate(tokens) if t.start == meta["start"]), None)
        if first is None or first + len(parts) > len(tokens):
            return None
        spans: list[tuple[int, int]] = []
        for token in tokens[first : first + len(parts)]:
            if token.token_type != TokenType.STRING:
                return None
            text = self.source.text
            if spans and spans[-1][1] == token.start and text[token.start] == text[spans[-1][0]]:
                spans[-1] = (spans[-1][0], token.end + 1)  # a doubled quote: one literal
            else:
                spans.append((token.start, token.end + 1))
        return "".join(spark_string_value(self.source.text[a:b]) for a, b in spans)

    # -- dispatch ----------------------------------------------------------------------------
    def bind(self, node: exp.Expression) -> Expr:
        kind = type(node)
        if kind is exp.Paren:
            return self.bind(node.this)
        if kind is exp.Column:
            return self.name(node)
        if kind is exp.Literal:
            if node.is_string:  # read from the text as written: sqlglot unescapes unlike Spark
                meta = node._meta or {}
                if "start" in meta and "end" in meta:
                    return Literal(
                        spark_string_value(self.source.text[meta["start"] : meta["end"] + 1]), "string"
                    )
                return Literal(str(node.this), "string")
            return self.number(node, negative=False)
        if kind is exp.Concat and self.adjacent_strings(node) is not None:
            return Literal(self.adjacent_strings(node), "string")
        if kind is exp.Boolean:
            return Literal(bool(node.this))
        if kind is exp.Null:
            return Literal(None)
        if kind is exp.Neg:
            return self.negation(node)
        if kind is exp.BitwiseNot:
            return Unary("~", self.operand(node.this))
        if kind is exp.Not:
            return self.negated(node.this)
        if kind in _ARITHMETIC:
            return Binary(_ARITHMETIC[kind], self.operand(node.this), self.operand(node.expression))
        if kind in _BITWISE:
            return self.bitwise(node)
        if kind in _COMPARISONS:
            return self.comparison(node)
        if kind in _LOGICAL:
            return Binary(_LOGICAL[kind], self.bind(node.this), self.bind(node.expression))
        if kind is exp.Is:
            return self.is_null(node, negated=False)
        if kind is exp.In:
            return self.in_list(node, negated=False)
        if kind is exp.Between:
            return self.between(node, negated=False)
        if kind in (exp.Cast, exp.TryCast):
            return self.cast(node)
        if kind is exp.If:
            return self.call_if(node)
        if kind is exp.Case:
            return self.case(node)
        if kind is exp.Anonymous:
            return self.call(node)
        if kind is exp.Length:
            return Call("length", (self.operand(node.this),))
        if kind is exp.Like and not node.args.get("escape"):
            return Call("like", (self.operand(node.this), self.operand(node.expression)))
        if kind is exp.Alias:
            return self.trailing(node)
        if kind is exp.Tuple and not node.expressions:  # "()"
            closing = next(t for t in self.source.tokens if t.token_type == TokenType.R_PAREN)
            raise self.source.error("unexpected ')'", closing.start, ("expression",))
        raise self.unsupported(node)

    def operand(self, node: exp.Expression) -> Expr:
        """An operand of arithmetic, bitwise or unary operators and of comparisons."""
        if isinstance(node, _LOOSE):
            word = {exp.Not: "NOT", exp.And: "AND", exp.Or: "OR", exp.In: "IN", exp.Between: "BETWEEN"}
            raise self.fail(
                f"{word.get(type(node), 'IS')} needs parentheses here (Spark SQL does not read it "
                "unparenthesised as an operand)",
                node,
            )
        return self.bind(node)

    # -- leaves ------------------------------------------------------------------------------
    def name(self, node: exp.Column) -> Expr:
        if node.args.get("table") or node.args.get("db") or node.args.get("catalog"):
            raise self.unsupported(node, f"the qualified name {node.sql(dialect='spark')!r}")
        if isinstance(node.this, exp.Star):
            raise self.unsupported(node.this)
        name = node.name
        if not name or "\n" in name:
            raise self.fail(f"invalid name {name!r}: a name is not empty and has no line break", node)
        return Name(name)

    def number(self, node: exp.Literal, negative: bool, suffix_node: exp.Expression | None = None) -> Literal:
        """A number literal (``node``), typed as Spark types it; ``suffix_node`` is the cast sqlglot
        made of a suffix (``1L`` is ``CAST(1 AS BIGINT)`` to sqlglot)."""
        meta = node._meta or {}
        raw = self.source.text[meta["start"] : meta["end"] + 1] if "start" in meta else node.this
        match = _SUFFIX.fullmatch(raw)
        digits, suffix = (match.group(1), match.group(2).upper()) if match else (node.this, "")
        sign = "-" if negative else ""
        if suffix in ("", "L") and _INTEGER_TEXT.fullmatch(digits):
            value = int(sign + digits)
            if suffix == "" and INT32_MIN <= value <= INT32_MAX:
                return Literal(value, "int32")
            if INT64_MIN <= value <= INT64_MAX:
                return Literal(value, "int64")
            if suffix == "" and INT64_MAX < value <= 2**64 - 1:  # compared with uint64 attributes
                return Literal(value, "uint64")
            raise self.fail(
                f"integer {sign}{digits} is outside the BIGINT range (Spark would read it as a DECIMAL, "
                f"which arrays do not have); write it as a DOUBLE, e.g. {sign}{digits}D",
                node,
                ("number",),
            )
        if suffix in ("", "D"):
            value = float(sign + digits)
            if math.isinf(value):
                raise self.fail(f"number {sign}{raw} is outside the DOUBLE range", node, ("number",))
            return Literal(value, "float64")
        if suffix == "F":
            value = float32_of_text(sign + digits)
            if math.isinf(value):
                raise self.fail(f"number {sign}{raw} is outside the FLOAT range", node, ("number",))
            return Literal(value, "float32")
        names = {"S": "SMALLINT", "Y": "TINYINT", "BD": "DECIMAL"}
        raise self.unsupported(suffix_node or node, f"the {names.get(suffix, suffix)} literal {raw}")

    def suffixed(self, node: exp.Expression) -> exp.Literal | None:
        """The number literal of ``1L``, ``1.5D``... (a cast sqlglot made of a suffix), else None."""
        if not isinstance(node, exp.Cast | exp.TryCast) or node.args.get("safe"):
            return None
        literal = node.this
        if not isinstance(literal, exp.Literal) or literal.is_string:
            return None
        meta = literal._meta or {}
        if "start" not in meta:
            return None
        raw = self.source.text[meta["start"] : meta["end"] + 1]
        return literal if raw and raw[-1].isalpha() else None

    def negation(self, node: exp.Neg) -> Expr:
        operand = node.this
        if isinstance(operand, exp.Literal) and not operand.is_string:
            return self.number(operand, negative=True)  # Spark: "-5" is one literal
        literal = self.suffixed(operand)
        if literal is not None:
            return self.number(literal, negative=True, suffix_node=operand)
        return Unary("-", self.operand(operand))

    def negated(self, operand: exp.Expression) -> Expr:
        """``NOT operand``; ``x NOT IN``, ``x IS NOT NULL``, ``x NOT BETWEEN`` come here too."""
        if isinstance(operand, exp.Is):
            return self.is_null(operand, negated=True)
        if isinstance(operand, exp.In):
            return self.in_list(operand, negated=True)
        if isinstance(operand, exp.Between):
            return self.between(operand, negated=True)
        return Unary("not", self.bind(operand))

    def trailing(self, node: exp.Alias) -> Expr:
        """sqlglot reads ``a b`` as an alias: the second part is text after the end of the expression."""
        end = max((c._meta.get("end", -1) for c in node.this.walk() if c._meta), default=-1)
        after = next((t for t in self.source.tokens if t.start > end), None)
        if after is None:
            raise self.fail("unexpected text after the end of the expression", node.args["alias"])
        raise self.source.error(
            f"unexpected {after.text!r} after the end of the expression",
            after.start,
            ("operator", "end of input"),
        )

    # -- operators ---------------------------------------------------------------------------
    def bitwise(self, node: exp.Expression) -> Expr:
        """A chain of & ^ | (one level in sqlglot), regrouped with Spark's precedence & > ^ > |."""
        items: list = []

        def flatten(part: exp.Expression) -> None:
            if type(part) in _BITWISE:
                flatten(part.this)
                items.append(_BITWISE[type(part)])
                flatten(part.expression)
            else:
                items.append(self.operand(part))

        flatten(node)
        operands, operators = [items[0]], []
        for op, operand in zip(items[1::2], items[2::2], strict=True):
            while operators and _BITWISE_LEVEL[operators[-1]] >= _BITWISE_LEVEL[op]:
                right = operands.pop()
                operands.append(Binary(operators.pop(), operands.pop(), right))
            operators.append(op)
            operands.append(operand)
        while operators:
            right = operands.pop()
            operands.append(Binary(operators.pop(), operands.pop(), right))
        return operands[0]

    def comparison(self, node: exp.Expression) -> Expr:
        """A chain of comparisons, regrouped left to right on one level as Spark does."""
        parts: list[exp.Expression] = []
        operators: list[type] = []

        def flatten(part: exp.Expression) -> None:
            if type(part) in _COMPARISONS:
                flatten(part.this)
                operators.append(type(part))
                flatten(part.expression)
            else:
                parts.append(part)

        flatten(node)
        result = self.operand(parts[0])
        for kind, part in zip(operators, parts[1:], strict=True):
            result = Binary(_COMPARISONS[kind], result, self.operand(part))
            if kind is exp.NullSafeNEQ:
                result = Unary("not", result)
        return result

    def is_null(self, node: exp.Is, negated: bool) -> Expr:
        if not isinstance(node.expression, exp.Null):
            raise self.unsupported(node, f"IS {node.expression.sql(dialect='spark')}")
        return IsNull(self.predicate_operand(node.this), negated)

    def predicate_operand(self, node: exp.Expression) -> Expr:
        return self.operand(node) if not isinstance(node, exp.Paren) else self.bind(node)

    def in_list(self, node: exp.In, negated: bool) -> Expr:
        for key in ("query", "unnest", "field"):
            if node.args.get(key) is not None:
                raise self.unsupported(node, "IN with a subquery")
        values = node.expressions
        if not values:
            raise self.fail("IN needs at least one value", node, ("expression",))
        return In(self.predicate_operand(node.this), tuple(self.bind(v) for v in values), negated)

    def between(self, node: exp.Between, negated: bool) -> Expr:
        if node.args.get("symmetric"):
            raise self.unsupported(node, "BETWEEN SYMMETRIC")
        operand, low, high = (self.operand(node.args[key]) for key in ("this", "low", "high"))
        return Between(operand, low, high, negated)

    # -- casts and calls ---------------------------------------------------------------------
    def cast(self, node: exp.Expression) -> Expr:
        if node.args.get("safe"):
            raise self.unsupported(node, "TRY_CAST")
        literal = self.suffixed(node)
        if literal is not None:
            return self.number(literal, negative=False, suffix_node=node)
        target = self.cast_type(node)
        return self.converted(node.this, target, node)

    def cast_type(self, node: exp.Expression) -> str:
        data_type = node.args["to"]
        found = None if data_type.expressions else type_of_sql_name(data_type.this.name)
        if found is None:
            shown = data_type.sql(dialect="spark")
            raise self.fail(
                f"arrays have no {shown} type; cast to one of {', '.join(SQL_TYPE_NAMES.values())}",
                node,
                tuple(SQL_TYPE_NAMES.values()),
            )
        return found

    def converted(self, operand: exp.Expression, target: str, node: exp.Expression) -> Expr:
        """``CAST(operand AS target)``; a string operand is read now, as Spark reads it."""
        inner = operand
        while isinstance(inner, exp.Paren):  # CAST((('1')) AS INT) is CAST('1' AS INT)
            inner = inner.this
        text = None
        if isinstance(inner, exp.Literal) and inner.is_string:
            text, shown = inner.this, inner.sql()
        elif isinstance(inner, exp.Concat):  # 'it''s' or 'a' 'b': one string
            text = self.adjacent_strings(inner)
            shown = None if text is None else string_literal_text(text)
        if text is not None:
            value = string_value(text, target)
            if value is None:
                raise self.fail(
                    f"cannot cast {shown} to {SQL_TYPE_NAMES[target]}: not a valid {SQL_TYPE_NAMES[target]} value",
                    inner,
                )
            return Literal(value, target)
        return Cast(self.bind(operand), target)

    def call_if(self, node: exp.If) -> Expr:
        args = [node.args.get(key) for key in ("this", "true", "false")]
        present = [arg for arg in args if arg is not None]
        if len(present) != 3:
            raise self.fail(f"function if() takes 3 arguments, got {len(present)}", node)
        return Call("if", tuple(self.bind(arg) for arg in present))

    def case(self, node: exp.Case) -> Expr:
        subject = node.args.get("this")
        branches = []
        for branch in node.args.get("ifs") or []:
            condition = self.bind(branch.this)
            if subject is not None:  # CASE x WHEN v THEN ...: Spark compares x = v
                condition = Binary("=", self.bind(subject), condition)
            branches.append((condition, self.bind(branch.args["true"])))
        default = node.args.get("default")
        return Case(tuple(branches), None if default is None else self.bind(default))

    def call(self, node: exp.Anonymous) -> Expr:
        name = node.this
        args = node.expressions
        if not isinstance(name, str):  # a backquoted function name
            raise self.unsupported(node, f"the function {node.this.sql(dialect='spark')}")
        if name == sql_dialect.UNARY_PLUS:
            return Unary("+", self.operand(args[0]))
        lower = name.lower()
        for arg in args:
            if isinstance(arg, exp.Alias | exp.PropertyEQ | exp.Kwarg):
                raise self.fail(f"unexpected text in the arguments of {lower}()", arg)
        if lower in CAST_FUNCTIONS:
            if len(args) != 1:
                raise self.fail(f"function {lower}() takes 1 argument, got {len(args)}", node)
            return self.converted(args[0], CAST_FUNCTIONS[lower], node)
        canonical, exact = FUNCTION_ALIASES.get(lower, (lower, None))
        if canonical not in FUNCTIONS:
            raise self.fail(
                f"unknown function {name!r}; supported: {', '.join(sorted({*FUNCTIONS, *FUNCTION_ALIASES, *CAST_FUNCTIONS}))}",
                node,
                ("function",),
            )
        problem = arity_problem(canonical, len(args), exact)
        if problem:
            raise self.fail(problem.replace(f"{canonical}()", f"{lower}()"), node)
        return Call(canonical, tuple(self.bind(arg) for arg in args))


# ---------------------------------------------------------------------------------------------
# Literal values


def float32_of_text(text: str) -> float:
    """The FLOAT nearest to the decimal number ``text`` (one rounding, ties to even), as Spark's
    ``Float.parseFloat``; infinite beyond the FLOAT range."""
    exact = Fraction(text)
    if exact == 0:
        return math.copysign(0.0, float(text))
    with np.errstate(over="ignore"):
        guess = np.float32(float(exact))  # may be off by one step after the double rounding
        if not np.isfinite(guess):
            return float(guess)
        candidates = [
            guess,
            np.nextafter(guess, np.float32(-np.inf)),
            np.nextafter(guess, np.float32(np.inf)),
        ]

    def distance(candidate: np.float32) -> tuple:
        if not np.isfinite(candidate):
            return (Fraction(2) ** 200, 1)
        even = int(np.frombuffer(candidate.tobytes(), dtype=np.uint32)[0]) & 1
        return (abs(Fraction(float(candidate)) - exact), even)

    return float(min(candidates, key=distance))


def string_value(text: str, target: str) -> bool | int | float | None:
    """The value of the string ``text`` cast to ``target`` as Spark (ANSI) reads it, or None if Spark
    would raise CAST_INVALID_INPUT. Whitespace around the value is ignored."""
    body = text.strip()
    if target == "bool":
        return _BOOL_STRINGS.get(body.lower())
    if target in ("int32", "int64"):
        if not _INT_STRING.fullmatch(body):
            return None
        value = int(body)
        low, high = (INT32_MIN, INT32_MAX) if target == "int32" else (INT64_MIN, INT64_MAX)
        return value if low <= value <= high else None
    lowered = body.lower()
    if lowered == "nan":
        return math.nan
    if lowered.lstrip("+-") in ("inf", "infinity"):
        return -math.inf if lowered.startswith("-") else math.inf
    if not _FLOAT_STRING.fullmatch(body):
        return None
    number = body.rstrip("dDfF")
    return float32_of_text(number) if target == "float32" else float(number)
