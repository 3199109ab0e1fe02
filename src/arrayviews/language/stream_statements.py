"""Building the stream statements of the language from their parse trees: CREATE STREAM, the three
forms of CREATE VIEW (hand-written ViewDF, pattern query, sliding-window query) and ALTER VIEW.

ViewDF bodies are Spark SQL kept verbatim; the model's part-query reader finds their part
references (:func:`~arrayviews.model.viewdf.read_part_query`). The select items, WHERE and HAVING of
pattern and window queries, and the column types of CREATE STREAM, are read with sqlglot (Spark
dialect). Every error is reported at its place in the statement.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import sqlglot
import sqlglot.errors
from lark import Token, Tree
from sqlglot import exp

from arrayviews.language import syntax as ast
from arrayviews.language.source import Source, tokens_of
from arrayviews.model import bounds
from arrayviews.model.errors import ValidationError
from arrayviews.model.names import PART_TIMESTAMP
from arrayviews.model.sql_dialect import parse_spark_query
from arrayviews.model.viewdf import PartQuery, ViewDFDefinition, read_part_query
from arrayviews.streams import literals
from arrayviews.streams.queries import (
    Conjunct,
    Having,
    PatternQuery,
    PatternVariable,
    Position,
    SelectItem,
    WindowQuery,
    aggregate_call,
)

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INTEGER = re.compile(r"[0-9]+")
# Aggregates of the select lists: count(*) always, and these of a column.
_PATTERN_FUNCTIONS = ("sum",)
_WINDOW_FUNCTIONS = ("count", "sum", "avg", "min", "max")
# MATCH_RECOGNIZE's row navigation and match functions (a pattern view has none of them).
_NAVIGATION = frozenset({"PREV", "NEXT", "FIRST", "LAST", "CLASSIFIER", "MATCH_NUMBER"})
# Functions whose every call may answer differently (a part built again would differ).
_RANDOM = (exp.Rand, exp.Randn, exp.Uuid, exp.Shuffle)
_PARTS = ("part", "parts")
_SECONDS = ("second", "seconds")
_VERSIONS = ("version", "versions")


def sql_expression(source: Source, start: int, end: int, condition: bool = False) -> exp.Expression:
    """Parse ``text[start:end]`` as one Spark SQL expression or query (a ``condition`` has no alias);
    sqlglot's errors are reported at their place in the statement."""
    piece = source.clean[start:end]  # comments blanked: sqlglot reads no comment inside GROUP BY
    try:
        # string literals are kept as written (streams.literals); offsets do not move
        protected, originals = literals.protect(piece)
        parsed = literals.restore(parse_spark_query(protected), originals)
    except literals.LiteralError as error:
        raise source.error(str(error), start + error.offset) from None
    except sqlglot.errors.ParseError as error:
        details = error.errors[0] if error.errors else {}
        offset = start
        if details.get("line"):
            local = Source(piece)
            offset = (
                start + local.offset(details["line"], details["col"]) - len(details.get("highlight", "")) + 1
            )
        description = details.get("description") or ""
        highlight = details.get("highlight") or ""
        if highlight and start <= offset <= end - len(highlight):  # as written, not as protected
            highlight = source.text[offset : offset + len(highlight)]
        if description.startswith("Required keyword"):
            reason = f"incomplete expression after {highlight!r}" if highlight else "incomplete expression"
        elif highlight:
            reason = f"malformed expression near {highlight!r}"
        else:
            reason = f"malformed expression: {description or error}"
        raise source.error(reason, max(start, min(offset, end))) from None
    except sqlglot.errors.TokenError as error:
        raise source.error(f"malformed expression: {error}", start) from None
    if parsed is None:
        raise source.error("empty expression", start, ("expression",))
    if isinstance(parsed, exp.Alias) and condition:
        raise source.error(
            f"unexpected {parsed.alias!r}", node_offset(parsed.args["alias"], start, fallback=end)
        )
    return parsed


def node_offset(node: exp.Expression, start: int, fallback: int | None = None) -> int:
    """The offset in the statement of the first identifier or literal of ``node`` (parsed from the
    text at ``start``)."""
    best = None
    for child in node.walk():
        meta = child._meta  # sqlglot keeps the positions of identifiers and literals here
        if meta and "start" in meta:
            best = meta["start"] if best is None else min(best, meta["start"])
    if best is None:
        return start if fallback is None else fallback
    return start + best


def _whole_type(text: str) -> bool:
    """Whether ``text`` is one Spark SQL type and nothing more."""
    try:
        sqlglot.parse_one(f"CAST(NULL AS {text})", dialect="spark")
    except sqlglot.errors.SqlglotError:
        return False
    return True


def _flatten_and(expression: exp.Expression) -> list[exp.Expression]:
    """The AND-ed conjuncts of ``expression`` (parentheses around a conjunction are looked through)."""
    if isinstance(expression, exp.Paren) and isinstance(expression.this, exp.And):
        return _flatten_and(expression.this)
    if isinstance(expression, exp.And):
        return _flatten_and(expression.this) + _flatten_and(expression.expression)
    return [expression.unnest() if isinstance(expression, exp.Paren) else expression]


def _allowed(functions: tuple[str, ...], call: tuple[str, str | None] | None) -> set:
    """The calls allowed among ``functions`` that look like ``call`` (count(*) always is)."""
    allowed: set = {("count", None)}
    if call is not None and call[0] in functions and call[1] is not None:
        allowed.add(call)
    return allowed


class StreamStatements:
    """The builder methods of the stream statements (mixed into the language's StatementBuilder)."""

    source: Source

    def name(self, token: Token, what: str) -> str:
        if not _IDENTIFIER.fullmatch(token):
            raise self.source.error(f"{what} must be a name, got {str(token)!r}", token.start_pos, ("name",))
        return str(token)

    def positive(self, token: Token, what: str) -> int:
        if not _INTEGER.fullmatch(token) or int(token) <= 0:
            raise self.source.error(
                f"{what} must be a positive integer, got {str(token)!r}",
                token.start_pos,
                ("positive integer",),
            )
        return int(token)

    def at_most(self, value: int, limit: int, token: Token, what: str) -> int:
        """``value`` (read from ``token``) when it is at most ``limit`` (the API's own check,
        ``model.bounds``), else a ParseError at ``token``."""
        try:
            return bounds.at_most(value, limit, what)
        except ValidationError as error:
            raise self.source.error(str(error), token.start_pos, ("integer",)) from None

    # -- streams -----------------------------------------------------------------------------
    def create_stream(self, tree: Tree) -> ast.Statement:
        name, columns_tree = tree.children[2], tree.children[4]
        length, unit, time_column = tree.children[7], tree.children[8], tree.children[11]
        seconds = self.positive(length, "the partition length")
        if unit is not None:
            factor = ast.TIME_UNITS.get(str(unit).lower())
            if factor is None:
                raise self.source.error(
                    f"unknown time unit {str(unit)!r}", unit.start_pos, ("SECONDS", "MINUTES", "HOURS")
                )
            seconds *= factor
        self.at_most(seconds, bounds.MAX_SECONDS, length, "the partition length in seconds")
        pieces = [tokens_of(column) for column in columns_tree.children]
        columns = tuple(self.stream_column(piece) for piece in pieces)
        seen: dict[str, Token] = {}
        for column, piece in zip(columns, pieces, strict=True):
            if column.name.lower() in seen:
                raise self.source.error(f"column {column.name!r} appears twice", piece[0].start_pos)
            seen[column.name.lower()] = piece[0]
        if str(time_column).lower() not in seen:
            raise self.source.error(
                f"time column {str(time_column)!r} is not a column of {name} "
                f"(columns: {', '.join(c.name for c in columns)})",
                time_column.start_pos,
                tuple(c.name for c in columns),
            )
        time_name = next(c.name for c in columns if c.name.lower() == str(time_column).lower())
        gap_tree = tree.children[12]
        max_gap = None if gap_tree is None else self.max_gap(gap_tree.children[1:])
        return ast.CreateStream(str(name), columns, seconds, time_name, max_gap)

    def max_gap(self, tokens: list[Token]) -> int:
        """``MAX GAP n PARTS``: how many parts past the newest part a batch may reach."""
        first, second, amount, unit = tokens
        for token, word in ((first, "MAX"), (second, "GAP")):
            if str(token).upper() != word:
                raise self.source.error(
                    f"CREATE STREAM ... WITH sets MAX GAP n PARTS, got {str(token)!r}",
                    token.start_pos,
                    (word,),
                )
        gap = self.at_most(
            self.positive(amount, "the largest gap (MAX GAP)"), bounds.INT64_MAX, amount, "MAX GAP"
        )
        if str(unit).lower() not in _PARTS:
            raise self.source.error(
                f"the largest gap is counted in PARTS, got {str(unit)!r}", unit.start_pos, ("PARTS",)
            )
        return gap

    def stream_column(self, piece: list[Token]) -> ast.StreamColumn:
        first = piece[0]
        name = self.name(first, "a column")
        if len(piece) == 1:
            raise self.source.error(
                f"column {name} needs a type, e.g. {name} string", first.end_pos, ("type",)
            )
        start, end = piece[1].start_pos, piece[-1].end_pos
        text = self.source.text[start:end]
        try:
            data_type = exp.DataType.build(text, dialect="spark")
        except (sqlglot.errors.SqlglotError, ValueError):
            raise self.source.error(f"unknown column type {text!r}", start, ("type",)) from None
        if not _whole_type(text):
            # DataType.build reads a type and ignores what follows it (NOT NULL, DEFAULT, COMMENT
            # were silently dropped, and NULLs appended to a NOT NULL column)
            typed = [t for t in piece[2:] if _whole_type(self.source.text[start : t.start_pos])]
            after = typed[-1] if typed else piece[-1]  # the first token after the longest type
            raise self.source.error(
                f"column {name}: only a type may follow the column's name, got "
                f"{self.source.text[after.start_pos : end]!r} (stream columns take no constraints, "
                "defaults or comments, and every column may hold NULL)",
                after.start_pos,
                ("type",),
            )
        return ast.StreamColumn(name, data_type.sql(dialect="spark").lower())

    # -- stream views ------------------------------------------------------------------------
    def create_stream_view(self, tree: Tree) -> ast.Statement:
        name_token, lateness_tree, plan_tree, body = (tree.children[i] for i in (2, 3, 4, 6))
        name = self.name(name_token, "the view's name")
        lateness = None if lateness_tree is None else self.lateness(lateness_tree.children[2:])
        text = self.source.span(tree)
        plan = ast.WINDOW_PLANS[0]
        if plan_tree is not None:
            word = plan_tree.children[1]
            plan = str(word).lower()
            known = tuple(p.upper() for p in ast.WINDOW_PLANS)
            if plan not in ast.WINDOW_PLANS:
                raise self.source.error(
                    f"unexpected {str(word)!r}: a window view's plans are {', '.join(known)}",
                    word.start_pos,
                    known,
                )
            if body.data == "viewdf" or body.children[4].data != "window_source":
                raise self.source.error(
                    "USING names the plan of a sliding-window view ([WINDOW ...]); this view has one plan",
                    plan_tree.children[0].start_pos,
                )
        if body.data == "viewdf":
            return ast.CreateViewDF(self.viewdf(body, name, text), lateness)
        return self.stream_query(body, name, text, lateness, plan)

    def lateness(self, tokens: list[Token]) -> int:
        amount, unit = tokens
        if not _INTEGER.fullmatch(amount):
            raise self.source.error(
                f"the lateness allowance is a number of parts, got {str(amount)!r}", amount.start_pos
            )
        if str(unit).lower() not in _PARTS:
            raise self.source.error(
                f"the lateness allowance is counted in PARTS, got {str(unit)!r}", unit.start_pos, ("PARTS",)
            )
        return self.at_most(int(amount), bounds.INT64_MAX, amount, "the lateness allowance")

    def alter_view(self, tree: Tree) -> ast.Statement:
        name = self.name(tree.children[2], "the view's name")
        if tree.children[4].type == "REFRESH":
            return self.refresh_limit(name, tree.children[5:])
        setting, amount, unit = tree.children[4:7]
        if setting.type == "LATENESS":
            return ast.AlterViewLateness(name, self.lateness([amount, unit]))
        if str(setting).lower() != "keep":
            raise self.source.error(
                f"ALTER VIEW ... SET sets LATENESS or KEEP, got {str(setting)!r}",
                setting.start_pos,
                ("LATENESS", "KEEP"),
            )
        if not _INTEGER.fullmatch(amount) or int(amount) < 1:
            raise self.source.error(
                f"the versions a view keeps are a number of at least 1, got {str(amount)!r}", amount.start_pos
            )
        if str(unit).lower() not in _VERSIONS:
            raise self.source.error(
                f"the versions a view keeps are counted in VERSIONS, got {str(unit)!r}",
                unit.start_pos,
                ("VERSIONS",),
            )
        return ast.AlterViewKeepVersions(
            name, self.at_most(int(amount), bounds.INT64_MAX, amount, "the number of versions kept")
        )

    def refresh_limit(self, name: str, tokens: list) -> ast.Statement:
        """``SET REFRESH LIMIT n SECONDS`` or ``SET REFRESH LIMIT NONE``."""
        word, rest = tokens[0], [t for t in tokens[1:] if t is not None]
        if str(word).lower() != "limit":
            raise self.source.error(
                f"ALTER VIEW ... SET REFRESH sets the LIMIT, got {str(word)!r}", word.start_pos, ("LIMIT",)
            )
        if rest[0].type != "NUMBER":  # NONE, or a word that is no number (nan, inf, five)
            if str(rest[0]).lower() != "none" or len(rest) > 1:
                raise self.source.error(
                    f"the refresh limit is a number of SECONDS or NONE, got {str(rest[0])!r}",
                    rest[0].start_pos,
                    ("number", "NONE"),
                )
            return ast.AlterViewRefreshLimit(name, None)
        if len(rest) == 1:
            raise self.source.error(
                "the refresh limit is counted in SECONDS: write LIMIT n SECONDS",
                rest[0].end_pos,
                ("SECONDS",),
            )
        amount, unit = rest
        seconds = float(amount)
        if not 0 < seconds < math.inf:
            raise self.source.error(
                f"the refresh limit must be a finite number of seconds above 0, got {str(amount)!r}",
                amount.start_pos,
            )
        if str(unit).lower() not in _SECONDS:
            raise self.source.error(
                f"the refresh limit is counted in SECONDS, got {str(unit)!r}", unit.start_pos, ("SECONDS",)
            )
        return ast.AlterViewRefreshLimit(name, seconds)

    # -- hand-written ViewDFs ----------------------------------------------------------------
    def viewdf(self, node: Tree, name: str, text: str) -> ViewDFDefinition:
        _, init_header, _, init_body, _, update_header, _, update_body, _, length = node.children
        init_variable = self.header(init_header, name, "INITIALIZE")
        update_variable = self.header(update_header, name, "UPDATE")
        initialize = self.body(init_body, name, init_variable, update_variable, "INITIALIZE")
        update = self.body(update_body, name, update_variable, init_variable, "UPDATE")
        self.check_self_references(name, initialize, update)
        for clause, body, query in (("INITIALIZE", init_body, initialize), ("UPDATE", update_body, update)):
            if not {relation.lower() for relation in query.relations()} - {name.lower()}:
                raise self.source.error(
                    f"the {clause} query reads no part of a stream or view, e.g. T[{query.variable}]",
                    body.meta.start_pos,
                    ("T[...]",),
                )
        return ViewDFDefinition(
            name=name,
            initialize=initialize,
            update=update,
            partition_length=self.partition_length(length),
            text=text,
        )

    def header(self, header: Tree, view: str, clause: str) -> str:
        relation, _, variable, _ = header.children
        if str(relation).lower() != view.lower():
            raise self.source.error(
                f"{clause} must define a part of {view}, not of {str(relation)!r}",
                relation.start_pos,
                (view,),
            )
        return self.name(variable, f"the part variable of {clause}")

    def partition_length(self, length: Tree) -> int:
        text = self.source.span(length)
        if not _INTEGER.fullmatch(text) or int(text) <= 0:
            raise self.source.error(
                f"the partition length must be a positive integer (seconds), got {text!r}",
                length.meta.start_pos,
                ("positive integer",),
            )
        return self.at_most(int(text), bounds.MAX_SECONDS, length.meta, "the partition length in seconds")

    def body(self, body: Tree, view: str, variable: str, other_variable: str, clause: str) -> PartQuery:
        """The PartQuery of a body: its text verbatim and its part references, with their positions in
        the whole statement."""
        start = body.meta.start_pos
        with self.source.spanning(start):
            query = read_part_query(
                self.source.span(body), variable, view=view, other_variable=other_variable, clause=clause
            )
        references = tuple(
            replace(r, line=line, column=column)
            for r in query.references
            for line, column in [self.source.position(start + r.start)]
        )
        return replace(query, references=references)

    def check_self_references(self, view: str, initialize: PartQuery, update: PartQuery) -> None:
        for reference in initialize.references:
            if reference.relation.lower() == view.lower():
                raise self.source.error(
                    f"the INITIALIZE query of {view} must not read {view} itself",
                    self.source.offset(reference.line, reference.column),
                )
        for reference in update.references:
            if reference.relation.lower() != view.lower():
                continue
            at = self.source.offset(reference.line, reference.column)
            if reference.low.scale != 1 or reference.high.scale != 1:
                raise self.source.error(
                    f"the UPDATE query may read {view} only at parts {update.variable}-k "
                    f"(scale 1), got {reference.text(update.variable)}",
                    at,
                )
            if reference.high.offset >= 0:
                raise self.source.error(
                    f"reference to the future: {reference.text(update.variable)} is not before part "
                    f"{update.variable} of {view} (use {view}[{update.variable}-1])",
                    at,
                )

    # -- pattern and window queries ----------------------------------------------------------
    def stream_query(
        self, node: Tree, name: str, text: str, lateness: int | None, plan: str = "auto"
    ) -> ast.Statement:
        (
            _,
            items_tree,
            _,
            stream_token,
            source,
            where_keyword,
            where,
            _,
            _,
            groups_tree,
            having_keyword,
            having,
        ) = node.children
        stream = self.name(stream_token, "the stream's name")
        group_by = self.groups(groups_tree)
        if source.data == "pattern_source":
            if having is not None:
                raise self.source.error(
                    "a pattern query has no HAVING; put conditions in WHERE", having_keyword.start_pos
                )
            items = self.items(items_tree, group_by, _PATTERN_FUNCTIONS)
            variables = self.pattern_variables(source)
            conjuncts = self.conjuncts(where, variables) if where is not None else ()
            query = PatternQuery(stream, group_by, items, variables, conjuncts)
            return ast.CreatePatternView(name, query, text, lateness)
        if where is not None:
            raise self.source.error(
                "a sliding-window query has no WHERE (filter the stream in a view first)",
                where_keyword.start_pos,
            )
        items = self.items(items_tree, group_by, _WINDOW_FUNCTIONS)
        seconds, position = self.window(source)
        having_clause = self.having(having, group_by, items) if having is not None else None
        query = WindowQuery(stream, group_by, items, seconds, having_clause, position)
        return ast.CreateWindowView(name, query, text, lateness, plan)

    def groups(self, tree: Tree) -> tuple[str, ...]:
        names: list[str] = []
        for token in tree.children:
            if not isinstance(token, Token) or token.type != "IDENTIFIER":
                continue
            name = self.name(token, "a GROUP BY column")
            if name.lower() in (n.lower() for n in names):
                raise self.source.error(f"column {name!r} is grouped twice", token.start_pos)
            names.append(name)
        return tuple(names)

    def item_spans(self, tree: Tree) -> list[tuple[int, int]]:
        """The (start, end) offsets of the select items."""
        return [(item.meta.start_pos, item.meta.end_pos) for item in tree.children]

    def items(
        self, tree: Tree, group_by: tuple[str, ...], functions: tuple[str, ...]
    ) -> tuple[SelectItem, ...]:
        items: list[SelectItem] = []
        grouped = {g.lower(): g for g in group_by}
        seen: set[str] = set()
        for start, end in self.item_spans(tree):
            parsed = sql_expression(self.source, start, end)
            alias = None
            if isinstance(parsed, exp.Alias):
                alias_node = parsed.args["alias"]
                at = node_offset(alias_node, start)
                alias = self.name(Token("WORD", alias_node.name, start_pos=at), "an alias")
                parsed = parsed.this
            if isinstance(parsed, exp.Column) and not parsed.table:
                column = parsed.name
                if column.lower() not in grouped:
                    raise self.source.error(f"column {column!r} must be in GROUP BY or aggregated", start)
                item = SelectItem(None, grouped[column.lower()], alias or grouped[column.lower()])
            else:
                call = aggregate_call(parsed)
                if call not in _allowed(functions, call):
                    allowed = ", ".join(("count(*)", *(f"{f}(column)" for f in functions)))
                    text = self.source.text[start:end]
                    raise self.source.error(f"unsupported select item {text!r}; use {allowed}", start)
                function, attribute = call
                default = "ct" if attribute is None else f"{function}_{attribute}"
                item = SelectItem(function, attribute, alias or default)
            if item.alias.lower() == PART_TIMESTAMP.lower():
                raise self.source.error(
                    f"output column {item.alias!r} is reserved: readers see the start of each part "
                    "under that name (choose another alias)",
                    start,
                )
            if item.alias.lower() in seen:
                raise self.source.error(f"output column {item.alias!r} appears twice", start)
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
                raise self.source.error(f"pattern variable {name!r} appears twice", word.start_pos)
            variables.append(PatternVariable(name, plus is not None))
        return tuple(variables)

    def conjuncts(self, where: Tree, variables: tuple[PatternVariable, ...]) -> tuple[Conjunct, ...]:
        start = where.meta.start_pos
        parsed = sql_expression(self.source, start, where.meta.end_pos, condition=True)
        order = {v.name.lower(): k for k, v in enumerate(variables)}
        names = {v.name.lower(): v.name for v in variables}
        conjuncts = []
        for conjunct in _flatten_and(parsed):
            at = node_offset(conjunct, start)
            self.refuse_row_functions(conjunct, start)
            used: set[int] = set()
            for column in conjunct.find_all(exp.Column):
                column_at = node_offset(column, start)
                qualifier = column.table
                if not qualifier:
                    raise self.source.error(
                        f"column {column.name!r} must be qualified by a pattern variable "
                        f"({', '.join(v.name for v in variables)})",
                        column_at,
                    )
                if qualifier.lower() not in order:
                    raise self.source.error(f"unknown pattern variable {qualifier!r}", column_at)
                column.set("table", exp.to_identifier(names[qualifier.lower()]))
                used.add(order[qualifier.lower()])
            if not used:
                raise self.source.error("a WHERE condition must read a pattern variable", at)
            indexes = sorted(used)
            if len(indexes) > 2 or (len(indexes) == 2 and indexes[1] != indexes[0] + 1):
                chosen = ", ".join(variables[k].name for k in indexes)
                raise self.source.error(
                    f"a WHERE condition may read one pattern variable or two consecutive ones, "
                    f"this one reads {chosen}",
                    at,
                )
            for node in conjunct.walk():
                if isinstance(node, exp.AggFunc | exp.Subquery | exp.Select):
                    raise self.source.error(
                        "aggregates and subqueries are not allowed in a pattern's WHERE", at
                    )
            line, column = self.source.position(at)
            conjuncts.append(
                Conjunct(
                    text=conjunct.sql(dialect="spark"),
                    variables=tuple(variables[k].name for k in indexes),
                    expression=conjunct,
                    position=Position(line, column),
                )
            )
        return tuple(conjuncts)

    def refuse_row_functions(self, conjunct: exp.Expression, start: int) -> None:
        """MATCH_RECOGNIZE's navigation and match functions, window functions and random numbers are
        refused by name: a pattern's conditions read the rows bound to its variables, each row's
        answer the same whenever a part is built again."""
        for node in conjunct.walk():
            if isinstance(node, exp.Anonymous):
                function = str(node.this).upper()
            elif isinstance(node, exp.First | exp.Last):
                function = type(node).__name__.upper()
            else:
                function = None
            if function in _NAVIGATION:
                raise self.source.error(
                    f"{function}() is MATCH_RECOGNIZE's, not a pattern view's: a condition reads the "
                    "rows bound to its variables, and one over two consecutive variables (b.v > a.v) "
                    "compares b's first row with the row before it (a's last)",
                    node_offset(node, start),
                )
            if isinstance(node, exp.Window):
                raise self.source.error(
                    "window functions are not allowed in a pattern's WHERE", node_offset(node, start)
                )
            if isinstance(node, _RANDOM):
                raise self.source.error(
                    f"{node.sql(dialect='spark')} is not allowed in a pattern's WHERE: a part built "
                    "again must match as before",
                    node_offset(node, start),
                )

    def window(self, source: Tree) -> tuple[int, Position]:
        _, window_token, amount, unit, _ = source.children
        if not _INTEGER.fullmatch(amount) or int(amount) <= 0:
            raise self.source.error(
                f"the window length must be a positive integer, got {str(amount)!r}",
                amount.start_pos,
                ("positive integer",),
            )
        factor = ast.TIME_UNITS.get(unit.lower())
        if factor is None:
            raise self.source.error(
                f"unknown time unit {str(unit)!r}", unit.start_pos, ("SECONDS", "MINUTES", "HOURS")
            )
        line, column = self.source.position(window_token.start_pos)
        seconds = self.at_most(
            int(amount) * factor, bounds.MAX_SECONDS, amount, "the window length in seconds"
        )
        return seconds, Position(line, column)

    def having(self, tree: Tree, group_by: tuple[str, ...], items: tuple[SelectItem, ...]) -> Having:
        start = tree.meta.start_pos
        parsed = sql_expression(self.source, start, tree.meta.end_pos, condition=True)
        known = {g.lower() for g in group_by} | {item.alias.lower() for item in items}

        def check(node: exp.Expression) -> None:
            if isinstance(node, exp.AggFunc):
                if aggregate_call(node) is None:
                    raise self.source.error(
                        "HAVING may use count(*) and count, sum, avg, min or max of a column",
                        node_offset(node, start),
                    )
                return
            if isinstance(node, exp.Subquery | exp.Select):
                raise self.source.error("subqueries are not allowed in HAVING", node_offset(node, start))
            if isinstance(node, _RANDOM):
                raise self.source.error(
                    f"{node.sql(dialect='spark')} is not allowed in HAVING: a part built again must "
                    "show the same groups",
                    node_offset(node, start),
                )
            if isinstance(node, exp.Column):
                if node.table or node.name.lower() not in known:
                    raise self.source.error(
                        f"HAVING may use the group columns, the output columns and aggregate calls, "
                        f"not {node.sql(dialect='spark')!r}",
                        node_offset(node, start),
                    )
                return
            for child in node.iter_expressions():
                check(child)

        check(parsed)
        return Having(parsed.sql(dialect="spark"), parsed)


__all__ = ["StreamStatements", "node_offset", "sql_expression"]
