"""Parsing statement text into the syntax tree of :mod:`arrayviews.language.syntax`.

``parse(text)`` returns the statements of ``text`` (separated by ``;``), of any relation kind: one
grammar (grammar.lark), one syntax tree, one error type. Every syntax error raises
:class:`~arrayviews.model.errors.ParseError` with the 1-based line and column in ``text`` and the list of
what would have been accepted there; errors found by the readers of the pieces (schemas, cell
expressions, aggregate calls, Spark SQL, ViewDF bodies) are re-raised at their place in ``text``.

A top-level SELECT has two forms, told apart by their shape, never by which relations exist:

* the array form ``SELECT * | a, b [INTO B] FROM <array expression> [WHERE condition]``, where the
  array expression is a name or a call of an array function (``filter(A, v > 0)``);
* any other Spark SQL query (joins, GROUP BY, expressions in the select list, no FROM), kept
  verbatim as a :class:`~arrayviews.language.syntax.Query`.

A condition of the array form over a plain name that cell expressions do not cover (a string or
timestamp comparison, say) is kept as Spark SQL text (:class:`~arrayviews.language.syntax.SqlCondition`):
the name may turn out to be a stream.

``parse_view_query(text)`` reads the SELECT of an array view definition alone (what
``db.create_view(name, text)`` receives).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import sqlglot
import sqlglot.errors
from lark import Token, Tree
from sqlglot import exp

from arrayviews.language import syntax as ast
from arrayviews.language.functions import ARRAY_FUNCTIONS, SHAPE_FUNCTIONS, Arguments, ShapeArguments
from arrayviews.language.source import Source, blank_schema_comments, tokens_of
from arrayviews.language.stream_statements import StreamStatements, sql_expression
from arrayviews.language.uncertain_statements import UncertainStatements
from arrayviews.model.errors import ParseError, SchemaError
from arrayviews.model.expression_tree import spark_string_value
from arrayviews.model.expressions import Expr, parse_expression
from arrayviews.model.names import check_identifier
from arrayviews.model.schema_parser import parse_schema
from arrayviews.model.sql_dialect import parse_spark_query

_INTEGER = re.compile(r"[+-]?[0-9]+")
_FLOAT_SYNTAX = re.compile(r"[.eE]")
#: The clauses sqlglot may find in an array query read as Spark SQL (``SELECT * | a, b FROM A WHERE c``).
_ARRAY_QUERY_PARTS = frozenset({"expressions", "from", "from_", "where"})
#: What :meth:`StatementBuilder.where` returns for a statement that is a Spark SQL query after all.
_SPARK_QUERY = object()


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
    source = Source(text)
    tree = source.parse_tree(0, len(text), "script")
    parsed = []
    for child in tree.children:
        if child is None:
            continue
        statement = StatementBuilder(source).build(child)
        meta = child.meta  # lark counts lines at '\n' only: the position is the Source's
        line, column = source.position(meta.start_pos)
        parsed.append(ParsedStatement(statement, line, column, text[meta.start_pos : meta.end_pos]))
    return parsed


def parse_statement(text: str) -> ast.Statement:
    """The one statement of ``text`` (an optional ``;`` may end it)."""
    parsed = parse_statements(text)
    if len(parsed) != 1:
        where = parsed[1] if len(parsed) > 1 else None
        source = Source(text)
        if where is None:
            raise source.error("expected one statement, found none", 0)
        raise source.error("expected one statement, found more", source.offset(where.line, where.column))
    return parsed[0].statement


def parse_array_expression(text: str) -> ast.ArrayExpr:
    """One array expression, e.g. ``regrid(A, 2, 2, avg(v))``."""
    source = Source(text)
    return StatementBuilder(source).array_expression(0, len(text))


def parse_view_query(text: str) -> ast.ViewQuery:
    """The SELECT of a view definition, e.g. ``SELECT * FROM window(A, 1, 1, avg(v))``."""
    source = Source(text)
    tree = source.parse_tree(0, len(text), "view_select")
    return StatementBuilder(source).view_query(tree)


# ---------------------------------------------------------------------------------------------
# Tree -> syntax tree


def relations_read(query: exp.Expression) -> tuple[str, ...]:
    """The relations a parsed Spark SQL query reads (its tables, without common table expressions),
    sorted, each once (names are case-insensitive)."""
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    relations: dict[str, str] = {}
    for table in query.find_all(exp.Table):
        name = table.name
        if name and name.lower() not in ctes:
            relations.setdefault(name.lower(), name)
    return tuple(relations[key] for key in sorted(relations))


def _tokens(tree: Tree) -> list[Token]:
    """The tokens directly below ``tree``."""
    return [c for c in tree.children if isinstance(c, Token)]


def _unquote(token: Token) -> str:
    """The value of a Spark SQL string literal token, unescaped as Spark reads it (the model's one
    reader: doubled quotes, ``\\uXXXX``, octal ``\\ooo``, ``\\%`` and ``\\_`` kept with their backslash)."""
    return spark_string_value(str(token))


class StatementBuilder(StreamStatements, UncertainStatements):
    """Turns a parse tree of grammar.lark into syntax nodes; one method per statement rule (the
    stream statements are in :class:`~arrayviews.language.stream_statements.StreamStatements`, those
    of uncertain arrays in :class:`~arrayviews.language.uncertain_statements.UncertainStatements`)."""

    def __init__(self, source: Source) -> None:
        self.source = source

    def build(self, tree: Tree) -> ast.Statement:
        return getattr(self, tree.data)(tree)

    def explain(self, tree: Tree) -> ast.Statement:
        inner = tree.children[1]
        if inner.data == "explain":
            raise self.source.error("EXPLAIN EXPLAIN is not a statement", inner.meta.start_pos)
        return ast.Explain(self.build(inner))

    # -- relations of every kind -------------------------------------------------------------
    def drop(self, tree: Tree) -> ast.Statement:
        _, kind, name = tree.children
        nodes = {"ARRAY": ast.DropArray, "VIEW": ast.DropView, "STREAM": ast.DropStream}
        return nodes[kind.type](str(name))

    def show_list(self, tree: Tree) -> ast.Statement:
        return ast.ShowRelations(tree.children[1].type.lower())

    def show_of(self, tree: Tree) -> ast.Statement:
        _, what, _, name = tree.children
        kinds = {
            "VERSIONS": ast.ShowVersions,
            "CHUNKS": ast.ShowChunks,
            "SCHEMA": ast.ShowSchema,
            "STATUS": ast.ShowStatus,
        }
        return kinds[what.type](str(name))

    def insert(self, tree: Tree) -> ast.Statement:
        name, columns_tree = tree.children[2], tree.children[3]
        row_trees = [c for c in tree.children[4:] if isinstance(c, Tree) and c.data == "row"]
        allow_gap = self.allow_gap(tree.children[-1])
        on_conflict = self.on_conflict(tree.children[-2])
        rows = tuple(tuple(self.value(v) for v in row.children if isinstance(v, Tree)) for row in row_trees)
        positions = tuple(
            tuple(self.source.position(v.children[0].start_pos) for v in row.children if isinstance(v, Tree))
            for row in row_trees
        )
        if columns_tree is None:
            return ast.Insert(
                str(name), rows, positions=positions, allow_gap=allow_gap, on_conflict=on_conflict
            )
        names = [t for t in _tokens(columns_tree) if t.type == "IDENTIFIER"]
        seen: set[str] = set()
        for token in names:  # column names are case-insensitive
            if str(token).lower() in seen:
                raise self.source.error(
                    f"INSERT names column {token} twice", token.start_pos, ("identifier",)
                )
            seen.add(str(token).lower())
        for row_tree, row in zip(row_trees, rows, strict=True):
            if len(row) != len(names):
                raise self.source.error(
                    f"this row has {len(row)} value(s) for the {len(names)} column(s) "
                    f"({', '.join(map(str, names))})",
                    row_tree.meta.start_pos,
                )
        return ast.Insert(str(name), rows, tuple(str(t) for t in names), positions, allow_gap, on_conflict)

    def load(self, tree: Tree) -> ast.Statement:
        tokens = [t for t in tree.children if isinstance(t, Token)]
        name, path = tokens[1], tokens[3]
        formats = [t for t in tokens if t.type in ("CSV", "PARQUET")]
        path_text = _unquote(path)
        if "\n" in path_text:
            raise self.source.error(f"invalid file path {path_text!r}", path.start_pos, ("string",))
        fmt = formats[0].type.lower() if formats else None
        on_conflict = self.on_conflict(tree.children[-2])
        return ast.Load(str(name), path_text, fmt, self.allow_gap(tree.children[-1]), on_conflict)

    def on_conflict(self, node: Tree | Token | None) -> str:
        """What ``ON CONFLICT REPLACE`` or ``ON CONFLICT ERROR`` after INSERT or LOAD asks for."""
        if not isinstance(node, Tree) or node.data != "on_conflict":
            return "error"
        _, word, rule = node.children
        if str(word).upper() != "CONFLICT":
            raise self.source.error(
                f"expected ON CONFLICT, got ON {str(word)!r}", word.start_pos, ("CONFLICT",)
            )
        if str(rule).lower() not in ast.CONFLICT_RULES:
            raise self.source.error(
                f"ON CONFLICT takes REPLACE or ERROR, got {str(rule)!r}", rule.start_pos, ("REPLACE", "ERROR")
            )
        return str(rule).lower()

    def allow_gap(self, node: Tree | Token | None) -> bool:
        """Whether INSERT or LOAD ends in ``ALLOW GAP`` (append past a stream's gap limit)."""
        if not isinstance(node, Tree) or node.data != "allow_gap":
            return False
        for token, word in zip(node.children, ("ALLOW", "GAP"), strict=True):
            if str(token).upper() != word:
                raise self.source.error(
                    f"expected ALLOW GAP at the end of the statement, got {str(token)!r}",
                    token.start_pos,
                    (word,),
                )
        return True

    # -- arrays ------------------------------------------------------------------------------
    def create_array(self, tree: Tree) -> ast.Statement:
        _, _, name, schema_text = tree.children  # name: an IDENTIFIER or the keyword VIEW
        try:
            check_identifier(str(name), "array")
        except SchemaError as error:
            raise self.source.error(str(error), name.start_pos, ("identifier",)) from None
        text = blank_schema_comments(str(schema_text))
        with self.source.spanning(schema_text.start_pos):
            schema = parse_schema(text, str(name))
        return ast.CreateArray(schema)

    def delete(self, tree: Tree) -> ast.Statement:
        target_tree = tree.children[2]
        target = self.array_expr(target_tree)
        try:
            return ast.Delete(target)
        except ValueError as error:
            raise self.source.error(
                str(error), target_tree.meta.start_pos, ("identifier", "subarray")
            ) from None

    def select(self, tree: Tree) -> ast.Statement:
        _, items_tree, into_keyword, into, _, source_tree = tree.children
        words = [] if source_tree is None else [str(t).lower() for t in tokens_of(source_tree)]
        if any(a == "similarity" and b == "join" for a, b in zip(words, words[1:], strict=False)):
            if into is not None:
                raise self.source.error(
                    "SELECT ... INTO stores array queries; a similarity aggregate is stored as a view: "
                    "CREATE ARRAY VIEW V AS SELECT ... SIMILARITY JOIN ...",
                    into_keyword.start_pos,
                )
            reparsed = self.source.parse_tree(tree.meta.start_pos, tree.meta.end_pos, "similarity_query")
            return self.similarity_query(reparsed)
        attributes = self.select_attributes(items_tree)
        array_form, array_error = None, None
        if source_tree is not None:
            start, end = source_tree.meta.start_pos, source_tree.meta.end_pos
            try:
                array_form = self.source.parse_tree(start, end, "array_source")
            except ParseError as error:
                if self.names_array_function(source_tree):
                    raise
                array_error = error
        if array_form is not None:
            source_node, _, condition = array_form.children
            plain = source_node.data == "array_expr"
            if attributes is not False:
                where = None if condition is None else self.where(condition, plain, tree)
                if where is not _SPARK_QUERY:
                    into_name = None if into is None else str(into)
                    source = self.array_expr(source_node)
                    if isinstance(source, ast.UncertainOperator):
                        self.check_uncertain_select(
                            source, items_tree, attributes, array_form.children[1], into
                        )
                    return ast.Select(source, attributes or None, where, into_name)
                # else: a Spark SQL query going on past its WHERE (ORDER BY, GROUP BY, UNION, ...)
            elif not plain:
                raise self.source.error(
                    "an array query selects * or attribute names: SELECT * | a, b [INTO B] FROM "
                    "<array expression> [WHERE condition]",
                    items_tree.meta.start_pos,
                )
        if into is not None:
            if array_error is not None and attributes is not False:
                raise array_error
            raise self.source.error(
                "SELECT ... INTO stores the result of an array query: SELECT * | a, b INTO B FROM "
                "<array expression> [WHERE condition]",
                into_keyword.start_pos,
            )
        try:
            return self.query(tree)
        except ParseError:
            # A malformed query shaped like an array query (SELECT * | names FROM name ...) gets the
            # array form's error, which says what the array form expects.
            if array_error is not None and attributes is not False:
                raise array_error from None
            raise

    def select_attributes(self, tree: Tree) -> tuple[str, ...] | None | bool:
        """The attributes of an array query's select list: () for ``*``, the names for ``a, b``, or
        False when the list is not of that form."""
        items = [tokens_of(item) for item in tree.children]
        if len(items) == 1 and len(items[0]) == 1 and str(items[0][0]) == "*":
            return ()
        if all(len(item) == 1 and item[0].type == "IDENTIFIER" for item in items):
            return tuple(str(item[0]) for item in items)
        return False

    def names_array_function(self, tree: Tree) -> bool:
        """Whether a raw FROM span starts with ``f(`` for an array function ``f``."""
        tokens = tokens_of(tree)
        return (
            len(tokens) > 1
            and tokens[0].type == "IDENTIFIER"
            and tokens[1].type == "LPAR"
            and str(tokens[0]).lower() in ARRAY_FUNCTIONS
        )

    def where(self, tree: Tree, plain_name: bool, select: Tree) -> Expr | ast.SqlCondition | object:
        """The WHERE condition of an array query; over a plain name, a Spark SQL condition that cell
        expressions do not cover is kept as text (the name may be a stream). _SPARK_QUERY when it
        is no array query: a Spark SQL query whose WHERE is followed by more (``ORDER BY``,
        ``GROUP BY``, ``LIMIT``, ``UNION ...``), which the raw span of the condition swallowed."""
        start, end = tree.meta.start_pos, tree.meta.end_pos
        try:
            return self.condition(tree)
        except ParseError as error:
            if not plain_name:
                raise
            try:
                whole = parse_spark_query(self.source.clean[select.meta.start_pos : select.meta.end_pos])
            except sqlglot.errors.SqlglotError:
                raise error from None
            if not isinstance(whole, exp.Select) or any(
                value for key, value in whole.args.items() if key not in _ARRAY_QUERY_PARTS
            ):
                return _SPARK_QUERY
            text = self.source.clean[start:end].strip()
            try:
                parsed = parse_spark_query(text)
            except sqlglot.errors.SqlglotError:
                raise error from None  # the cell-expression error says more about the condition
            # sqlglot reads some malformed conditions leniently (``v $ 1`` as an alias): those stay
            # errors of the statement.
            if isinstance(parsed, exp.Alias) or any(
                isinstance(n, exp.Parameter | exp.Placeholder) for n in parsed.walk()
            ):
                raise error from None
            return ast.SqlCondition(text, error)

    def with_query(self, tree: Tree) -> ast.Query:
        return self.query(tree)

    def query(self, tree: Tree) -> ast.Query:
        """Any Spark SQL query, kept verbatim, with the relations it reads."""
        start = tree.meta.start_pos
        text = self.source.span(tree)
        parsed = sql_expression(self.source, start, tree.meta.end_pos)
        if isinstance(parsed, exp.Select) and not parsed.expressions:
            raise self.source.error(
                "SELECT needs a select list: *, names or expressions", start + len("SELECT"), ("expression",)
            )
        return ast.Query(text, relations_read(parsed))

    # -- array views -------------------------------------------------------------------------
    def create_array_view(self, tree: Tree) -> ast.Statement:
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

    def refresh_view(self, tree: Tree) -> ast.Statement:
        _, _, name, _, strategy, on = tree.children
        bases = None if on is None else tuple(str(t) for t in on.children if t.type == "IDENTIFIER")
        if strategy is None:
            return ast.RefreshView(str(name), None, bases)
        if str(strategy).lower() not in ast.REFRESH_STRATEGIES:
            known = tuple(sorted(s.upper() for s in ast.REFRESH_STRATEGIES))
            raise self.source.error(
                f"unexpected {str(strategy)!r}: the refresh strategies are {', '.join(known)}",
                strategy.start_pos,
                known,
            )
        return ast.RefreshView(str(name), str(strategy).lower(), bases)

    def verify_view(self, tree: Tree) -> ast.Statement:
        return ast.VerifyView(str(tree.children[2]))

    def maintain(self, tree: Tree) -> ast.Statement:
        return ast.Maintain(refresh_all=tree.children[1] is not None)

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

    def similarity_query(self, tree: Tree) -> ast.Statement:
        select_tree, using = tree.children
        query = self.similarity_select(select_tree)
        if using is None:
            return ast.SimilarityQuery(query)
        if using.children[1].type == "VIEW":
            return ast.SimilarityQuery(query, str(using.children[2]))
        word = using.children[1]
        if str(word).lower() != "base":
            raise self.source.error(
                f"unexpected {str(word)!r}: write USING VIEW name or USING BASE ARRAYS",
                word.start_pos,
                ("VIEW", "BASE"),
            )
        return ast.SimilarityQuery(query, "none")

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
            if not ast.INT64_MIN <= value <= ast.UINT64_MAX:
                raise self.source.error(
                    f"integer {text} is outside the int64 and uint64 ranges", token.start_pos, ("number",)
                )
            return value
        if kind == "STRING":
            return _unquote(token)
        if kind == "INF":
            return float("-inf") if text.startswith("-") else float("inf")
        return {"TRUE": True, "FALSE": False, "NULL": None, "NAN": float("nan")}[kind]

    def array_expression(self, start: int, end: int) -> ast.ArrayExpr:
        """The array expression written in ``text[start:end]``."""
        return self.array_expr(self.source.parse_tree(start, end, "array_expr"))

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
        return builder(Arguments(self, str(name).lower(), name.start_pos, spans, rpar.start_pos))


__all__ = [
    "ParsedStatement",
    "StatementBuilder",
    "parse",
    "parse_array_expression",
    "parse_statement",
    "parse_statements",
    "parse_view_query",
    "relations_read",
]
