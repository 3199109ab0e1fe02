"""Parsing stream statements (ViewDFs, pattern and sliding-window views, EXPLAIN) from text.

``parse_stream_statement(text)`` returns one statement of :mod:`arrayviews.streams.statements`;
``is_stream_statement(text)`` tells whether ``text`` is meant as one (``[EXPLAIN] CREATE VIEW``, as
opposed to the array language's ``CREATE ARRAY VIEW``). Every error raises
:class:`~arrayviews.model.errors.ParseError` with the 1-based line and column in ``text`` and, for
syntax errors, what would have been accepted there.

Query bodies are Spark SQL, kept verbatim: the grammar only delimits them, and the part references
``T[i]``, ``T[j-1]``, ``M[i*60-59 .. i*60]`` are found among the body's tokens where a table may
stand (after FROM, JOIN, or a comma of a FROM list, at a level of the query that has a SELECT).
Anywhere else ``x[0]`` is Spark's array indexing and is left alone. Each part index must be affine
in the header's part variable with integer literals (``scale * i + offset``, scale >= 1).

The select items, WHERE and HAVING of pattern and window views are parsed with sqlglot (Spark
dialect); their errors are reported at their place in ``text``.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

import sqlglot
import sqlglot.errors
from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from sqlglot import exp

from arrayviews.model.errors import ParseError
from arrayviews.model.names import IDENTIFIER
from arrayviews.streams import literals
from arrayviews.streams.definition import PartIndex, PartQuery, PartReference, ViewDFDefinition
from arrayviews.streams.statements import (
    Conjunct,
    CreatePatternView,
    CreateViewDF,
    CreateWindowView,
    Explain,
    Having,
    PatternQuery,
    PatternVariable,
    Position,
    SelectItem,
    StreamStatement,
    WindowQuery,
    aggregate_call,
)

_IDENTIFIER = IDENTIFIER
_INTEGER = re.compile(r"[0-9]+")
_LEADING_COMMENTS = re.compile(r"\s*(?:(?:--[^\n]*|/\*.*?\*/)\s*)*", re.DOTALL)
_STREAM_START = re.compile(r"(?:explain\s+)?create\s+view(?![A-Za-z0-9_])", re.IGNORECASE)

_TIME_UNITS = {"second": 1, "seconds": 1, "minute": 60, "minutes": 60, "hour": 3600, "hours": 3600}
# Aggregates of the select lists: count(*) always, and these of a column.
_PATTERN_FUNCTIONS = ("sum",)
_WINDOW_FUNCTIONS = ("count", "sum", "avg", "min", "max")

# Words after which a table may not follow any more (the FROM list of that query level has ended).
_CLAUSE_WORDS = frozenset(
    {
        "WHERE",
        "GROUP",
        "HAVING",
        "ORDER",
        "LIMIT",
        "UNION",
        "INTERSECT",
        "EXCEPT",
        "MINUS",
        "ON",
        "USING",
        "WINDOW",
        "SORT",
        "CLUSTER",
        "DISTRIBUTE",
        "QUALIFY",
        "OFFSET",
        "SELECT",
    }
)

_TERMINAL_NAMES = {
    "WORD": "name",
    "STRING": "string",
    "RAW_STRING": "string",
    "QUOTED": "quoted name",
    "SYMBOL": "symbol",
    "PARTITION_LENGTH": "PARTITION LENGTH",
    "LSQB": "'['",
    "RSQB": "']'",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "PLUS": "'+'",
    "ADD_OP": "'+' or '-'",
    "MUL_OP": "'*'",
    "DOTDOT": "'..'",
    "_SEMICOLON": "';'",
    "$END": "end of input",
}
_IGNORED = frozenset({"WS", "COMMENT"})


@functools.cache
def _parser() -> Lark:
    return Lark.open(
        "grammar.lark",
        rel_to=__file__,
        parser="lalr",
        start=["start", "part_range"],
        propagate_positions=True,
        maybe_placeholders=True,
    )


# ---------------------------------------------------------------------------------------------
# Entry points


def is_stream_statement(text: str) -> bool:
    """Whether ``text`` is a stream statement: ``[EXPLAIN] CREATE VIEW ...`` (not ``CREATE ARRAY VIEW``)."""
    start = _LEADING_COMMENTS.match(text).end()
    return _STREAM_START.match(text, start) is not None


def parse_stream_statement(text: str) -> StreamStatement:
    """The stream statement of ``text`` (an optional trailing ``;`` is allowed)."""
    source = _Source(text)
    tree = source.parse(0, len(text), "start")
    node = tree.children[0]
    if node.data == "explain":
        return Explain(_Builder(source).statement(node.children[1]))
    return _Builder(source).statement(node)


# ---------------------------------------------------------------------------------------------
# Positions and errors


class _Source:
    """The statement text with position helpers and lark error translation."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self, offset: int) -> Position:
        line = bisect.bisect_right(self._line_starts, offset)
        return Position(line, offset - self._line_starts[line - 1] + 1)

    def offset(self, line: int, column: int) -> int:
        return self._line_starts[line - 1] + column - 1

    def error(self, reason: str, offset: int, expected: tuple[str, ...] = ()) -> ParseError:
        where = self.position(offset)
        return ParseError(reason, text=self.text, line=where.line, column=where.column, expected=expected)

    def end_of_input(self, start: int, end: int) -> int:
        """The offset just after the last non-blank character of ``text[start:end]``."""
        return start + len(self.text[start:end].rstrip())

    def parse(self, start: int, end: int, rule: str) -> Tree:
        """Parse ``text[start:end]`` from ``rule``; positions in the tree are made absolute."""
        try:
            tree = _parser().parse(self.text[start:end], start=rule)
        except UnexpectedInput as error:
            raise self._syntax_error(error, start, end, rule) from None
        if start:
            _shift(tree, start)
        return tree

    def _syntax_error(self, error: UnexpectedInput, start: int, end: int, rule: str) -> ParseError:
        if isinstance(error, UnexpectedCharacters):
            offset = start + error.pos_in_stream
            char = self.text[offset]
            if char in "'\"":
                return self.error("unterminated string literal", offset)
            if char == "`":
                return self.error("unterminated quoted name", offset)
            return self.error(f"unexpected character {char!r}", offset, _readable(error.allowed or ()))
        accepts = set(getattr(error, "accepts", None) or getattr(error, "expected", None) or ())
        expected = _readable(accepts)
        token = getattr(error, "token", None)
        if isinstance(error, UnexpectedToken) and token.type != "$END":
            return self.error(f"unexpected {str(token)!r}", start + token.start_pos, expected)
        if rule == "part_range":  # reported at the closing bracket
            reason = "empty part index" if not self.text[start:end].strip() else "incomplete part index"
            return self.error(reason, end, expected)
        at = self.end_of_input(start, end)
        if "UPDATE" in accepts:
            return self.error("the INITIALIZE body is not terminated: UPDATE is missing", at, ("UPDATE",))
        if "PARTITION_LENGTH" in accepts:
            return self.error("missing PARTITION LENGTH after the UPDATE body", at, ("PARTITION LENGTH",))
        return self.error("unexpected end of input", at, expected)


def _shift(tree: Tree, offset: int) -> None:
    for node in tree.iter_subtrees():
        if not node.meta.empty:
            node.meta.start_pos += offset
            node.meta.end_pos += offset
        for child in node.children:
            if isinstance(child, Token):
                child.start_pos += offset
                child.end_pos += offset


def _readable(names) -> tuple[str, ...]:
    return tuple(sorted({_TERMINAL_NAMES.get(n, n) for n in names if n not in _IGNORED}))


def _tokens(tree: Tree) -> list[Token]:
    return [token for token in tree.scan_values(lambda v: isinstance(v, Token))]


# ---------------------------------------------------------------------------------------------
# Statements


@dataclass
class _Level:
    """One parenthesis level of a query body, for finding where tables may stand."""

    query: bool = False  # a SELECT was seen at this level
    in_from: bool = False  # inside this level's FROM list
    opened_at: int = -1  # offset of the '(' that opened it


class _Builder:
    def __init__(self, source: _Source) -> None:
        self.source = source

    def error(self, reason: str, offset: int, expected: tuple[str, ...] = ()) -> ParseError:
        return self.source.error(reason, offset, expected)

    def span(self, tree: Tree) -> str:
        return self.source.text[tree.meta.start_pos : tree.meta.end_pos]

    def statement(self, node: Tree) -> CreateViewDF | CreatePatternView | CreateWindowView:
        if node.data == "create_viewdf":
            return self.create_viewdf(node)
        return self.create_query(node)

    def name(self, token: Token, what: str) -> str:
        if not _IDENTIFIER.fullmatch(token):
            raise self.error(f"{what} must be a name, got {str(token)!r}", token.start_pos, ("name",))
        return str(token)

    # -- hand-written ViewDFs ----------------------------------------------------------------
    def create_viewdf(self, node: Tree) -> CreateViewDF:
        _, _, name_token, _, _, init_header, _, init_body, _, update_header, _, update_body, _, length = (
            node.children
        )
        name = self.name(name_token, "the view's name")
        init_variable = self.header(init_header, name, "INITIALIZE")
        update_variable = self.header(update_header, name, "UPDATE")
        others = {"INITIALIZE": update_variable, "UPDATE": init_variable}
        initialize = self.body(init_body, name, init_variable, others["INITIALIZE"], "INITIALIZE")
        update = self.body(update_body, name, update_variable, others["UPDATE"], "UPDATE")
        self.check_self_references(name, initialize, update)
        for clause, body, query in (("INITIALIZE", init_body, initialize), ("UPDATE", update_body, update)):
            if not {relation.lower() for relation in query.relations()} - {name.lower()}:
                raise self.error(
                    f"the {clause} query reads no part of a stream or view, e.g. T[{query.variable}]",
                    body.meta.start_pos,
                    ("T[...]",),
                )
        definition = ViewDFDefinition(
            name=name,
            initialize=initialize,
            update=update,
            partition_length=self.partition_length(length),
            text=self.span(node),
        )
        return CreateViewDF(definition)

    def header(self, header: Tree, view: str, clause: str) -> str:
        relation, _, variable, _ = header.children
        if str(relation).lower() != view.lower():
            raise self.error(
                f"{clause} must define a part of {view}, not of {str(relation)!r}",
                relation.start_pos,
                (view,),
            )
        return self.name(variable, f"the part variable of {clause}")

    def partition_length(self, length: Tree) -> int:
        text = self.span(length)
        if not _INTEGER.fullmatch(text) or int(text) <= 0:
            raise self.error(
                f"the partition length must be a positive integer (seconds), got {text!r}",
                length.meta.start_pos,
                ("positive integer",),
            )
        return int(text)

    def check_self_references(self, view: str, initialize: PartQuery, update: PartQuery) -> None:
        for reference in initialize.references:
            if reference.relation.lower() == view.lower():
                raise self.error(
                    f"the INITIALIZE query of {view} must not read {view} itself",
                    self.source.offset(reference.line, reference.column),
                )
        for reference in update.references:
            if reference.relation.lower() != view.lower():
                continue
            at = self.source.offset(reference.line, reference.column)
            if reference.low.scale != 1 or reference.high.scale != 1:
                raise self.error(
                    f"the UPDATE query may read {view} only at parts {update.variable}-k "
                    f"(scale 1), got {reference.text(update.variable)}",
                    at,
                )
            if reference.high.offset >= 0:
                raise self.error(
                    f"reference to the future: {reference.text(update.variable)} is not before part "
                    f"{update.variable} of {view} (use {view}[{update.variable}-1])",
                    at,
                )

    def body(self, body: Tree, view: str, variable: str, other_variable: str, clause: str) -> PartQuery:
        """The PartQuery of a body: its text verbatim and the part references found in it (a
        reference to the view itself is spelt as the view's name, whatever its letter case)."""
        start, end = body.meta.start_pos, body.meta.end_pos
        tokens = _tokens(body)
        references = tuple(
            replace(reference, relation=view) if reference.relation.lower() == view.lower() else reference
            for reference in self.part_references(tokens, start, variable, other_variable, clause)
        )
        text = self.source.text[start:end]
        return PartQuery(text=text, variable=variable, references=references)

    def part_references(
        self, tokens: list[Token], body_start: int, variable: str, other_variable: str, clause: str
    ) -> Iterator[PartReference]:
        levels = [_Level()]
        expect_table = False
        previous_word = ""
        k = 0
        while k < len(tokens):
            token = tokens[k]
            kind = token.type
            level = levels[-1]
            if kind == "LPAR":
                levels.append(_Level(opened_at=token.start_pos))
                expect_table = False
            elif kind == "RPAR":
                if len(levels) == 1:
                    raise self.error("unmatched ')'", token.start_pos)
                levels.pop()
                expect_table = False
            elif kind == "WORD":
                word = token.upper()
                following = tokens[k + 1] if k + 1 < len(tokens) else None
                if expect_table and _IDENTIFIER.fullmatch(token) and following and following.type == "LSQB":
                    closing = self.closing_bracket(tokens, k + 1)
                    yield self.part_reference(
                        token, tokens[k + 1], tokens[closing], body_start, variable, other_variable, clause
                    )
                    k = closing + 1
                    expect_table = False
                    previous_word = ""
                    continue
                expect_table = False
                if word == "SELECT":
                    level.query, level.in_from = True, False
                elif level.query and (word == "JOIN" or (word == "FROM" and previous_word != "DISTINCT")):
                    level.in_from = expect_table = True
                elif word in _CLAUSE_WORDS:
                    level.in_from = False
                previous_word = word
                k += 1
                continue
            elif kind == "COMMA":
                expect_table = level.in_from
            else:
                expect_table = False
            previous_word = ""
            k += 1
        if len(levels) > 1:
            raise self.error("unclosed '('", levels[-1].opened_at, ("')'",))

    def closing_bracket(self, tokens: list[Token], opening: int) -> int:
        for k in range(opening + 1, len(tokens)):
            if tokens[k].type == "RSQB":
                return k
            if tokens[k].type == "LSQB":
                break
        raise self.error("unclosed '[' of a part reference", tokens[opening].start_pos, ("']'",))

    def part_reference(
        self,
        relation: Token,
        opening: Token,
        closing: Token,
        body_start: int,
        variable: str,
        other_variable: str,
        clause: str,
    ) -> PartReference:
        tree = self.source.parse(opening.end_pos, closing.start_pos, "part_range")
        low_tree, high_tree = tree.children[0], tree.children[2]
        low = _IndexReader(self, variable, other_variable, clause).index(low_tree)
        high = (
            low
            if high_tree is None
            else _IndexReader(self, variable, other_variable, clause).index(high_tree)
        )
        where = self.source.position(relation.start_pos)
        reference = PartReference(
            relation=str(relation),
            low=low,
            high=high,
            start=relation.start_pos - body_start,
            end=closing.end_pos - body_start,
            line=where.line,
            column=where.column,
        )
        if low.scale >= high.scale and low.offset > high.offset:
            raise self.error(
                f"empty part range {reference.text(variable)}: its first part is after its last",
                relation.start_pos,
            )
        return reference

    # -- pattern and window queries ----------------------------------------------------------
    def create_query(self, node: Tree) -> CreatePatternView | CreateWindowView:
        (
            _,
            _,
            name_token,
            _,
            _,
            items_tree,
            _,
            stream_token,
            source,
            _,
            where,
            _,
            _,
            groups_tree,
            _,
            having,
        ) = node.children
        name = self.name(name_token, "the view's name")
        stream = self.name(stream_token, "the stream's name")
        group_by = self.groups(groups_tree)
        text = self.span(node)
        if source.data == "pattern":
            if having is not None:
                raise self.error(
                    "a pattern query has no HAVING; put conditions in WHERE", node.children[14].start_pos
                )
            items = self.items(items_tree, group_by, _PATTERN_FUNCTIONS)
            variables = self.pattern_variables(source)
            conjuncts = self.conjuncts(where, variables) if where is not None else ()
            query = PatternQuery(stream, group_by, items, variables, conjuncts)
            return CreatePatternView(name, query, text)
        if where is not None:
            raise self.error(
                "a sliding-window query has no WHERE (filter the stream in a view first)",
                node.children[9].start_pos,
            )
        items = self.items(items_tree, group_by, _WINDOW_FUNCTIONS)
        seconds, position = self.window(source)
        having_clause = self.having(having, group_by, items) if having is not None else None
        query = WindowQuery(stream, group_by, items, seconds, having_clause, position)
        return CreateWindowView(name, query, text)

    def groups(self, tree: Tree) -> tuple[str, ...]:
        names: list[str] = []
        for token in tree.children:
            if not isinstance(token, Token) or token.type != "WORD":
                continue
            name = self.name(token, "a GROUP BY column")
            if name.lower() in (n.lower() for n in names):
                raise self.error(f"column {name!r} is grouped twice", token.start_pos)
            names.append(name)
        return tuple(names)

    def item_spans(self, tree: Tree) -> list[tuple[int, int]]:
        """The (start, end) offsets of the select items: the tokens split at top-level commas."""
        spans: list[tuple[int, int]] = []
        depth, first, last = 0, None, None
        for token in _tokens(tree):
            if token.type == "COMMA" and depth == 0:
                if first is None:
                    raise self.error("empty select item", token.start_pos)
                spans.append((first, last))
                first = None
                continue
            if token.type == "LPAR":
                depth += 1
            elif token.type == "RPAR":
                depth = max(depth - 1, 0)
            if first is None:
                first = token.start_pos
            last = token.end_pos
        if first is None:
            raise self.error("empty select item", tree.meta.end_pos, ("expression",))
        spans.append((first, last))
        return spans

    def items(
        self, tree: Tree, group_by: tuple[str, ...], functions: tuple[str, ...]
    ) -> tuple[SelectItem, ...]:
        items: list[SelectItem] = []
        grouped = {g.lower(): g for g in group_by}
        seen: set[str] = set()
        for start, end in self.item_spans(tree):
            parsed = self.sql(start, end)
            alias = None
            if isinstance(parsed, exp.Alias):
                alias_node = parsed.args["alias"]
                at = self.node_offset(alias_node, start)
                alias = self.name(Token("WORD", alias_node.name, start_pos=at), "an alias")
                parsed = parsed.this
            if isinstance(parsed, exp.Column) and not parsed.table:
                column = parsed.name
                if column.lower() not in grouped:
                    raise self.error(f"column {column!r} must be in GROUP BY or aggregated", start)
                item = SelectItem(None, grouped[column.lower()], alias or grouped[column.lower()])
            else:
                call = aggregate_call(parsed)
                if call not in _allowed(functions, call):
                    allowed = ", ".join(("count(*)", *(f"{f}(column)" for f in functions)))
                    text = self.source.text[start:end]
                    raise self.error(f"unsupported select item {text!r}; use {allowed}", start)
                function, attribute = call
                default = "ct" if attribute is None else f"{function}_{attribute}"
                item = SelectItem(function, attribute, alias or default)
            if item.alias.lower() in seen:
                raise self.error(f"output column {item.alias!r} appears twice", start)
            seen.add(item.alias.lower())
            items.append(item)
        return tuple(items)

    def pattern_variables(self, source: Tree) -> tuple[PatternVariable, ...]:
        variables: list[PatternVariable] = []
        for child in source.children:
            if not isinstance(child, Tree):
                continue
            word, plus = child.children
            name = self.name(word, "a pattern variable")
            if name.lower() in (v.name.lower() for v in variables):
                raise self.error(f"pattern variable {name!r} appears twice", word.start_pos)
            variables.append(PatternVariable(name, plus is not None))
        return tuple(variables)

    def conjuncts(self, where: Tree, variables: tuple[PatternVariable, ...]) -> tuple[Conjunct, ...]:
        start = where.meta.start_pos
        parsed = self.sql(start, where.meta.end_pos, condition=True)
        order = {v.name.lower(): k for k, v in enumerate(variables)}
        names = {v.name.lower(): v.name for v in variables}
        conjuncts = []
        for conjunct in _flatten_and(parsed):
            at = self.node_offset(conjunct, start)
            used: set[int] = set()
            for column in conjunct.find_all(exp.Column):
                column_at = self.node_offset(column, start)
                qualifier = column.table
                if not qualifier:
                    raise self.error(
                        f"column {column.name!r} must be qualified by a pattern variable "
                        f"({', '.join(v.name for v in variables)})",
                        column_at,
                    )
                if qualifier.lower() not in order:
                    raise self.error(f"unknown pattern variable {qualifier!r}", column_at)
                column.set("table", exp.to_identifier(names[qualifier.lower()]))
                used.add(order[qualifier.lower()])
            if not used:
                raise self.error("a WHERE condition must read a pattern variable", at)
            indexes = sorted(used)
            if len(indexes) > 2 or (len(indexes) == 2 and indexes[1] != indexes[0] + 1):
                chosen = ", ".join(variables[k].name for k in indexes)
                raise self.error(
                    f"a WHERE condition may read one pattern variable or two consecutive ones, "
                    f"this one reads {chosen}",
                    at,
                )
            for node in conjunct.walk():
                if isinstance(node, exp.AggFunc | exp.Subquery | exp.Select):
                    raise self.error("aggregates and subqueries are not allowed in a pattern's WHERE", at)
            conjuncts.append(
                Conjunct(
                    text=conjunct.sql(dialect="spark"),
                    variables=tuple(variables[k].name for k in indexes),
                    expression=conjunct,
                    position=self.source.position(at),
                )
            )
        return tuple(conjuncts)

    def window(self, source: Tree) -> tuple[int, Position]:
        _, window_token, amount, unit, _ = source.children
        if not _INTEGER.fullmatch(amount) or int(amount) <= 0:
            raise self.error(
                f"the window length must be a positive integer, got {str(amount)!r}",
                amount.start_pos,
                ("positive integer",),
            )
        factor = _TIME_UNITS.get(unit.lower())
        if factor is None:
            raise self.error(
                f"unknown time unit {str(unit)!r}", unit.start_pos, ("SECONDS", "MINUTES", "HOURS")
            )
        return int(amount) * factor, self.source.position(window_token.start_pos)

    def having(self, tree: Tree, group_by: tuple[str, ...], items: tuple[SelectItem, ...]) -> Having:
        start = tree.meta.start_pos
        parsed = self.sql(start, tree.meta.end_pos, condition=True)
        known = {g.lower() for g in group_by} | {item.alias.lower() for item in items}

        def check(node: exp.Expression) -> None:
            if isinstance(node, exp.AggFunc):
                call = aggregate_call(node)
                if call is None:
                    raise self.error(
                        "HAVING may use count(*) and count, sum, avg, min or max of a column",
                        self.node_offset(node, start),
                    )
                return
            if isinstance(node, exp.Subquery | exp.Select):
                raise self.error("subqueries are not allowed in HAVING", self.node_offset(node, start))
            if isinstance(node, exp.Column):
                if node.table or node.name.lower() not in known:
                    raise self.error(
                        f"HAVING may use the group columns, the output columns and aggregate calls, "
                        f"not {node.sql(dialect='spark')!r}",
                        self.node_offset(node, start),
                    )
                return
            for child in node.iter_expressions():
                check(child)

        check(parsed)
        return Having(parsed.sql(dialect="spark"), parsed)

    # -- sqlglot -----------------------------------------------------------------------------
    def sql(self, start: int, end: int, condition: bool = False) -> exp.Expression:
        """Parse ``text[start:end]`` as one Spark SQL expression (a ``condition`` has no alias)."""
        piece = self.source.text[start:end]
        try:
            # string literals are kept as written (streams.literals); offsets do not move
            protected, originals = literals.protect(piece)
            parsed = literals.restore(sqlglot.parse_one(protected, dialect="spark"), originals)
        except literals.LiteralError as error:
            raise self.error(str(error), start + error.offset) from None
        except sqlglot.errors.ParseError as error:
            details = error.errors[0] if error.errors else {}
            offset = start
            if details.get("line"):
                local = _Source(piece)
                offset = (
                    start
                    + local.offset(details["line"], details["col"])
                    - len(details.get("highlight", ""))
                    + 1
                )
            description = details.get("description") or ""
            highlight = details.get("highlight") or ""
            if highlight and start <= offset <= end - len(highlight):  # as written, not as protected
                highlight = self.source.text[offset : offset + len(highlight)]
            if description.startswith("Required keyword"):
                reason = (
                    f"incomplete expression after {highlight!r}" if highlight else "incomplete expression"
                )
            elif highlight:
                reason = f"malformed expression near {highlight!r}"
            else:
                reason = f"malformed expression: {description or error}"
            raise self.error(reason, max(start, min(offset, end))) from None
        except sqlglot.errors.TokenError as error:
            raise self.error(f"malformed expression: {error}", start) from None
        if isinstance(parsed, exp.Alias) and condition:
            raise self.error(
                f"unexpected {parsed.alias!r}", self.node_offset(parsed.args["alias"], start, fallback=end)
            )
        return parsed

    def node_offset(self, node: exp.Expression, start: int, fallback: int | None = None) -> int:
        """The offset in the statement of the first identifier or literal of ``node`` (parsed from
        the text at ``start``)."""
        best = None
        for child in node.walk():
            meta = child._meta  # sqlglot keeps the positions of identifiers and literals here
            if meta and "start" in meta:
                best = meta["start"] if best is None else min(best, meta["start"])
        if best is None:
            return start if fallback is None else fallback
        return start + best


def _allowed(functions: tuple[str, ...], call: tuple[str, str | None] | None) -> set:
    """The calls allowed among ``functions`` that look like ``call`` (count(*) always is)."""
    allowed: set = {("count", None)}
    if call is not None and call[0] in functions and call[1] is not None:
        allowed.add(call)
    return allowed


def _flatten_and(expression: exp.Expression) -> list[exp.Expression]:
    """The AND-ed conjuncts of ``expression`` (parentheses around a conjunction are looked through)."""
    if isinstance(expression, exp.Paren) and isinstance(expression.this, exp.And):
        return _flatten_and(expression.this)
    if isinstance(expression, exp.And):
        return _flatten_and(expression.this) + _flatten_and(expression.expression)
    return [expression.unnest() if isinstance(expression, exp.Paren) else expression]


class _IndexReader:
    """Reads a part index tree as ``scale * variable + offset``."""

    def __init__(self, builder: _Builder, variable: str, other_variable: str, clause: str) -> None:
        self.builder = builder
        self.variable = variable
        self.other_variable = other_variable
        self.clause = clause

    def error(self, reason: str, offset: int) -> ParseError:
        return self.builder.error(reason, offset)

    def index(self, tree: Tree | Token) -> PartIndex:
        scale, offset = self.value(tree)
        at = _start_of(tree)
        if scale == 0:
            raise self.error(f"a part index must depend on the part variable {self.variable}", at)
        if scale < 0:
            raise self.error(f"a part index must grow with {self.variable} (its scale is {scale})", at)
        return PartIndex(scale, offset)

    def value(self, tree: Tree | Token) -> tuple[int, int]:
        if isinstance(tree, Token):  # pragma: no cover - atoms are wrapped in index_atom
            return self.atom(tree)
        kind = tree.data
        if kind == "index_atom":
            return self.atom(tree.children[0])
        if kind == "index_sign":
            sign, operand = tree.children
            scale, offset = self.value(operand)
            return (-scale, -offset) if sign == "-" else (scale, offset)
        if kind == "index_sum":
            left, operator, right = tree.children
            a, b = self.value(left), self.value(right)
            return (a[0] + b[0], a[1] + b[1]) if operator == "+" else (a[0] - b[0], a[1] - b[1])
        if kind == "index_product":
            left, operator, right = tree.children
            if operator == "/":
                raise self.error("division is not allowed in a part index", operator.start_pos)
            a, b = self.value(left), self.value(right)
            if a[0] and b[0]:
                raise self.error(
                    f"a part index must be affine in {self.variable} (a product of two terms with "
                    f"{self.variable} is not)",
                    operator.start_pos,
                )
            return (a[0] * b[1] + b[0] * a[1], a[1] * b[1])
        # parenthesised index: LPAR index RPAR
        inner = [child for child in tree.children if not isinstance(child, Token)]
        return self.value(inner[0])

    def atom(self, token: Token) -> tuple[int, int]:
        if _INTEGER.fullmatch(token):
            return (0, int(token))
        if str(token) == self.variable:
            return (1, 0)
        if str(token) == self.other_variable:
            raise self.error(
                f"the {self.clause} query's part variable is {self.variable}, not {token}", token.start_pos
            )
        raise self.error(
            f"unknown name {str(token)!r} in a part index; use the part variable {self.variable} and "
            f"integer literals",
            token.start_pos,
        )


def _start_of(tree: Tree | Token) -> int:
    if isinstance(tree, Token):
        return tree.start_pos
    return tree.meta.start_pos


__all__ = ["is_stream_statement", "parse_stream_statement"]
