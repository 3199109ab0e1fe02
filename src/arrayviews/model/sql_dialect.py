"""The Spark SQL dialect cell expressions are read with: sqlglot's Spark dialect, calls kept as written.

sqlglot's Spark parser maps known function names onto its own node classes and rewrites some on the
way (``log10(x)`` becomes ``LOG(10, x)``, ``nvl`` becomes ``COALESCE``); Spark computes ``log10(x)``
and ``log(10, x)`` differently, so cell expressions need the call as the user wrote it. This dialect
is sqlglot's Spark dialect (same tokens, literals, operators and grammar) with two changes: every
``name(args)`` call but CAST and TRY_CAST is kept as an anonymous call (name and arguments in written
order, with its position), and a unary ``+`` is kept (sqlglot drops it; Spark types it: ``+true`` is
an error).
"""

from __future__ import annotations

import functools
import re

import sqlglot.errors
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.tokens import Token, TokenType

#: The function name under which a unary plus is kept (no callable function can be spelled so).
UNARY_PLUS = "+"
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _unary_plus(parser) -> exp.Expression:
    operand = parser._parse_unary()
    if operand is None:
        parser.raise_error("Required keyword: 'this' missing for <class 'unary.Plus'>")
    return parser.expression(exp.Anonymous(this=UNARY_PLUS, expressions=[operand]))


class _ExpressionParser(Spark.Parser):
    FUNCTIONS: dict = {}
    FUNCTION_PARSERS = {key: Spark.Parser.FUNCTION_PARSERS[key] for key in ("CAST", "TRY_CAST")}
    UNARY_PARSERS = {**Spark.Parser.UNARY_PARSERS, TokenType.PLUS: _unary_plus}


class _ExpressionTokenizer(Spark.Tokenizer):
    # sqlglot reads the text after SHOW, EXECUTE, EXPLAIN (...) as one command string; in a cell
    # expression those words are column names (``show > 1``)
    COMMANDS: set = set()


class CellExpressionDialect(Spark):
    """sqlglot's Spark dialect with calls kept as written, unary plus kept, and no command words."""

    Tokenizer = _ExpressionTokenizer
    Parser = _ExpressionParser


DIALECT = CellExpressionDialect()


def tokenize(text: str) -> list[Token]:
    """The Spark SQL tokens of ``text`` (raises sqlglot's TokenError)."""
    return DIALECT.tokenize(text)


#: Tokens with which sqlglot starts a statement (``UPDATE t SET ...``, ``SHOW ...``) where Spark, reading
#: an expression, sees a column: ``update > 0`` is a condition on the column ``update``.
_STATEMENT_STARTS = frozenset(
    {*_ExpressionParser.STATEMENT_PARSERS, *Spark.Tokenizer.COMMANDS} - {TokenType.SEMICOLON}
)


def parse(tokens: list[Token], text: str) -> list[exp.Expression | None]:
    """The expressions sqlglot parses from ``tokens`` (raises sqlglot's ParseError); a word sqlglot
    would take for the start of a statement is read as a name."""
    return DIALECT.parser().parse([_as_name(token) for token in tokens], text)


def _as_name(token: Token, words: frozenset = _STATEMENT_STARTS) -> Token:
    """A word sqlglot would start a statement with (``drop``, ``show``, ``insert``) read as the
    column name Spark reads there, wherever it stands in the expression."""
    if token.token_type not in words or not _PLAIN_NAME.fullmatch(token.text):
        return token
    return Token(TokenType.VAR, token.text, token.line, token.col, token.start, token.end, token.comments)


#: Statement words that have a meaning inside a Spark query (ORDER BY x DESC, PIVOT, FETCH).
_QUERY_WORDS = frozenset({TokenType.DESC, TokenType.PIVOT, TokenType.UNPIVOT, TokenType.FETCH})


def parse_spark(text: str) -> list[exp.Expression | None]:
    """``sqlglot.parse(text, read="spark")``, but with a statement word inside a query or
    expression (``SELECT drop * 2 FROM t``, ``show > 1``) read as the column name Spark reads
    there; a statement (DROP TABLE ...) is no query either way."""
    words = _STATEMENT_STARTS - _QUERY_WORDS
    named = [_as_name(token, words) for token in DIALECT.tokenize(text)]  # no command words
    return Spark().parser().parse(named, text)


def parse_spark_query(text: str) -> exp.Expression:
    """``sqlglot.parse_one(text, dialect="spark")`` read as :func:`parse_spark` reads it."""
    result = parse_spark(text)
    if not result or result[0] is None:
        raise sqlglot.errors.ParseError(f"No expression was parsed from '{text}'")
    return exp.Block(expressions=result) if len(result) > 1 else result[0]


@functools.lru_cache(maxsize=4096)
def is_plain_name(name: str) -> bool:
    """True if ``name`` may be written without backquotes: an identifier that is no SQL keyword (in
    sqlglot's Spark tokenizer) and that Spark SQL reads as that column."""
    if not _PLAIN_NAME.fullmatch(name) or name.upper() in DIALECT.tokenizer_class.KEYWORDS:
        return False
    try:
        (parsed,) = parse(tokenize(name), name)
    except Exception:  # noqa: BLE001 - any failure means the name needs quotes
        return False
    return (
        isinstance(parsed, exp.Column)
        and not parsed.table
        and isinstance(parsed.this, exp.Identifier)
        and not parsed.this.quoted
        and parsed.this.this == name
    )
