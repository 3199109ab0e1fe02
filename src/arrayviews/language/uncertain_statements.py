"""Building the statements of uncertain arrays from their parse trees: CREATE UNCERTAIN ARRAY (the
schema read by the model's uncertain-schema parser, the layout clauses checked here), and the trailing
keyword arguments of the probabilistic operators (``THRESHOLD 0.9``, ``METHOD bnl``). Every error is
a ParseError at its place in the whole statement text."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from lark import Token, Tree

from arrayviews.language import syntax as ast
from arrayviews.language.source import Source, blank_schema_comments
from arrayviews.model.copy_layout import STORE_MULTIPLE
from arrayviews.model.errors import SchemaError
from arrayviews.model.names import check_identifier
from arrayviews.model.uncertain_schema_parser import parse_uncertain_schema

_INTEGER = re.compile(r"[+-]?[0-9]+")
#: A decimal number as statements write it (no nan or inf).
DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
#: A trailing keyword argument of an array function: ``THRESHOLD 0.9``, ``METHOD rtree``.
KEYWORD_ARGUMENT = re.compile(r"([A-Za-z_]+)\s+(\S+)", re.DOTALL)


def decimal(text: str) -> float | None:
    """The finite float of ``text`` written as a decimal number, or None."""
    if not DECIMAL.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


class UncertainStatements:
    """The uncertain-array methods of the StatementBuilder (``self.source`` is the script's Source)."""

    source: Source

    def create_uncertain_array(self, tree: Tree) -> ast.Statement:
        _, _, _, name, schema_text, store, sigmas, workload = tree.children
        try:
            check_identifier(str(name), "array")
        except SchemaError as error:
            raise self.source.error(str(error), name.start_pos, ("identifier",)) from None
        text = blank_schema_comments(str(schema_text))
        with self.source.spanning(schema_text.start_pos):
            schema = parse_uncertain_schema(text, str(name))
        fields: dict[str, object] = {}
        if store is not None:
            word, step = store.children[1], store.children[3]
            scheme = ast.SCHEME_WORDS.get(str(word).lower())
            if scheme is None:
                known = tuple(w.upper() for w in ast.SCHEME_WORDS)
                raise self.source.error(
                    f"unknown storage scheme {str(word)!r}; use STORE {' | '.join(known)}",
                    word.start_pos,
                    known,
                )
            fields["scheme"] = scheme
            if step is not None:
                fields["step"] = self._uncertain_step(step, scheme, store.children[2], schema.ndim)
        if sigmas is not None:
            number = sigmas.children[1]
            value = self._decimal(number, "SIGMAS takes a positive number")
            if not value > 0:
                raise self.source.error(
                    f"SIGMAS (k of mean +- k sigma) must be positive, got {str(number)!r}",
                    number.start_pos,
                    ("number",),
                )
            fields["sigmas"] = value
        if workload is not None:
            queries = []
            for query in (c for c in workload.children if isinstance(c, Tree)):
                numbers = _numbers(query)
                sizes = tuple(self._decimal(t, "a query size is a number of cells") for t in numbers)
                bad = next((t for t, x in zip(numbers, sizes, strict=True) if not x > 0), None)
                if bad is not None or len(sizes) != schema.ndim:
                    raise self.source.error(
                        f"a workload query size gives {schema.ndim} positive numbers of cells (one per "
                        f"dimension of {schema.name}: {', '.join(schema.dimension_names)})",
                        query.meta.start_pos if bad is None else bad.start_pos,
                        ("number",),
                    )
                queries.append(sizes)
            fields["workload"] = tuple(queries)
            threshold = workload.children[-1]
            if threshold is not None:
                value = self._decimal(threshold, "THRESHOLD takes a probability in (0, 1]")
                if not 0 < value <= 1:
                    raise self.source.error(
                        f"THRESHOLD takes a probability in (0, 1], got {str(threshold)!r}",
                        threshold.start_pos,
                        ("number",),
                    )
                fields["workload_threshold"] = value
        try:
            return ast.CreateUncertainArray(schema, **fields)
        except ValueError as error:  # pragma: no cover - every field was checked above
            raise self.source.error(str(error), schema_text.start_pos) from None

    def check_uncertain_select(
        self,
        source: ast.UncertainOperator,
        items: Tree,
        attributes: tuple[str, ...],
        where: Token | None,
        into,
    ) -> None:
        """A probabilistic operator stands alone: ``SELECT * FROM`` it, without WHERE or INTO."""
        usage = (
            f"the {source.function} of uncertain arrays gives tuples with probabilities, not an array: "
            f"write SELECT * FROM {source.function}(...)"
        )
        if attributes:
            raise self.source.error(f"{usage} (the result has every column)", items.meta.start_pos, ("'*'",))
        if where is not None:
            raise self.source.error(f"{usage} without WHERE", where.start_pos, ("';'",))
        if into is not None:
            raise self.source.error(f"{usage} without INTO", into.start_pos, ("FROM",))

    def _uncertain_step(self, tree: Tree, scheme: str, keyword: Token, ndim: int) -> tuple[int, ...] | str:
        if scheme != STORE_MULTIPLE:
            raise self.source.error(
                f"STEP applies to STORE MULTIPLE only ({scheme} keeps no step)", keyword.start_pos, ("';'",)
            )
        tokens = [t for t in tree.children if isinstance(t, Token) and t.type in ("NUMBER", "IDENTIFIER")]
        if len(tokens) == 1 and tokens[0].type == "IDENTIFIER":
            if str(tokens[0]).lower() != ast.AUTO_STEP:
                raise self.source.error(
                    f"STEP takes AUTO, an integer or one integer per dimension, got {str(tokens[0])!r}",
                    tokens[0].start_pos,
                    ("AUTO", "integer", "'('"),
                )
            return ast.AUTO_STEP
        steps = []
        for token in tokens:
            if not _INTEGER.fullmatch(str(token)) or int(str(token)) < 0:
                raise self.source.error(
                    f"a step is an integer >= 0, got {str(token)!r}", token.start_pos, ("integer",)
                )
            steps.append(int(str(token)))
        if len(steps) == 1 and len(tree.children) == 1:
            return (steps[0],) * ndim
        if len(steps) != ndim:
            raise self.source.error(
                f"STEP needs one integer, or {ndim} of them (one per dimension), got {len(steps)}",
                tree.meta.start_pos,
                ("integer",),
            )
        return tuple(steps)

    def _decimal(self, token: Token, what: str) -> float:
        value = decimal(str(token))
        if value is None:
            raise self.source.error(f"{what}, got {str(token)!r}", token.start_pos, ("number",))
        return value


def _numbers(tree: Tree) -> list[Token]:
    return [t for t in tree.children if isinstance(t, Token) and t.type == "NUMBER"]


def read_options(
    arguments, first: int, readers: dict[str, Callable[[str], object]], usage: str
) -> dict[str, object]:
    """The keyword arguments ``NAME value`` of an array-function call from argument ``first`` on, each
    read by ``readers[name]`` (which raises ValueError with the reason); a ParseError at the argument
    that is not one, names an unknown keyword, repeats one or has a bad value."""
    found: dict[str, object] = {}
    for k in range(first, len(arguments)):
        match = KEYWORD_ARGUMENT.fullmatch(arguments.text(k))
        keyword = match.group(1).upper() if match else None
        if keyword not in readers:
            known = tuple(readers)
            raise arguments.error(
                f"argument {k + 1} must be one of {', '.join(f'{n} value' for n in known)}, got "
                f"{arguments.text(k)!r}; use {usage}",
                k,
                known,
            )
        if keyword in found:
            raise arguments.error(f"{keyword} is given twice", k, ("')'",))
        try:
            found[keyword] = readers[keyword](match.group(2))
        except ValueError as error:
            expected = getattr(readers[keyword], "expected", ("number",))
            raise arguments.error(f"{keyword}: {error}", k, expected) from None
    return found


def probability(text: str) -> float:
    value = decimal(text)
    if value is None or not 0.0 < value <= 1.0:
        raise ValueError(f"a probability in (0, 1] is needed, got {text!r}")
    return value


def positive(text: str) -> float:
    value = decimal(text)
    if value is None or not value > 0:
        raise ValueError(f"a positive number is needed, got {text!r}")
    return value


def word(choices: tuple[str, ...]) -> Callable[[str], str]:
    def read(text: str) -> str:
        if text.lower() not in choices:
            raise ValueError(f"use one of {', '.join(c.upper() for c in choices)}, got {text!r}")
        return text.lower()

    read.expected = tuple(c.upper() for c in choices)
    return read


__all__ = ["DECIMAL", "UncertainStatements", "decimal", "positive", "probability", "read_options", "word"]
