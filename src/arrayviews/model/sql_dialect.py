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


#: Function classes a query's tree keeps (the rest of the calls are kept as written): aggregates,
#: which the statement checks tell apart (HAVING, a pattern's WHERE), random functions, which they
#: refuse, and structs, whose field names the literal keeping restores (streams/literals.py).
_KEPT_CLASSES = (exp.AggFunc, exp.Rand, exp.Randn, exp.Uuid, exp.Shuffle, exp.Struct)
#: Calls parsed by their own grammar (CAST(x AS t), EXTRACT(f FROM x), TRIM(BOTH c FROM s),
#: POSITION(a IN s), OVERLAY(... PLACING ...), SUBSTRING(s FROM i FOR n)) and aggregates with one.
_SYNTAX_CALLS = frozenset(
    {"CAST", "TRY_CAST", "EXTRACT", "TRIM", "POSITION", "OVERLAY", "SUBSTRING", "SUBSTR"}
    | {"APPROX_PERCENTILE", "PERCENTILE", "PERCENTILE_APPROX", "ARGMAX", "ARGMIN", "ARG_MAX"}
    | {"ARG_MIN", "MAX_BY", "MIN_BY", "LISTAGG", "STRING_AGG"}
)


def _kept_call(name: str, builder) -> bool:
    """Whether a query's tree keeps sqlglot's node for a call of ``name`` (built by ``builder``)."""
    if name in ("COLLECT_LIST", "NAMED_STRUCT"):
        return True
    owner = getattr(builder, "__self__", None)
    kind = owner if isinstance(owner, type) else exp.FUNCTION_BY_NAME.get(name)
    return kind is not None and issubclass(kind, _KEPT_CLASSES)


class _QueryParser(Spark.Parser):
    """sqlglot's Spark parser keeping every call but aggregates, random functions and structs as
    written. Spark's parser maps many names onto its own nodes and prints them back rewritten:
    ``date_trunc('DAY', t)`` loses its unit literal, ``to_char(n, '999')`` becomes
    ``CAST(n AS STRING)``, ``json_parse(s)`` becomes ``s``; a query handed on to Spark must say what
    its author wrote."""

    FUNCTIONS = {name: build for name, build in Spark.Parser.FUNCTIONS.items() if _kept_call(name, build)}
    FUNCTION_PARSERS = {
        name: parse for name, parse in Spark.Parser.FUNCTION_PARSERS.items() if name in _SYNTAX_CALLS
    }


class _QueryDialect(Spark):
    Parser = _QueryParser


_QUERY_DIALECT = _QueryDialect()


def parse_spark(text: str) -> list[exp.Expression | None]:
    """``sqlglot.parse(text, read="spark")``, but with a statement word inside a query or
    expression (``SELECT drop * 2 FROM t``, ``show > 1``) read as the column name Spark reads
    there (a statement, DROP TABLE ..., is no query either way), and with calls kept as written
    but for aggregates, random functions and structs (:class:`_QueryParser`)."""
    words = _STATEMENT_STARTS - _QUERY_WORDS
    named = [_as_name(token, words) for token in DIALECT.tokenize(text)]  # no command words
    return _QUERY_DIALECT.parser().parse(named, text)


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
