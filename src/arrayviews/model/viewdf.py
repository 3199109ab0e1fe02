"""What a ViewDF view is (paper 004, section 4.1) and how its queries are read: an INITIALIZE and an
UPDATE query over part references, and a partition length. Shared by the statement language, the
translator of pattern and window queries, and the maintainer.

A part reference ``T[lo .. hi]`` names the parts ``lo`` to ``hi`` (inclusive) of a stream or view
``T``; each end is affine in the query's part variable (``j``, ``j-1``, ``i*60-59``), in units of
``T``'s own partition length. ``T[j-1]`` is the range ``j-1 .. j-1``.

Query bodies are Spark SQL kept verbatim. :func:`read_part_query` finds the part references among
the body's tokens (Spark SQL tokens, from sqlglot's tokenizer) where a table may stand: after FROM,
JOIN, or a comma of a FROM list, at a level of the query that has a SELECT. Anywhere else ``x[0]`` is
Spark's array indexing and is left alone.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import sqlglot.errors
from lark import Lark, Tree
from lark import Token as LarkToken
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from sqlglot.dialects.spark import Spark
from sqlglot.tokens import Token, TokenType

from arrayviews.model.errors import ParseError
from arrayviews.model.names import IDENTIFIER as _IDENTIFIER
from arrayviews.model.text_lines import line_starts, position_in
from arrayviews.model.window_step import WindowStep

#: How the message of an error a generated query raises on purpose begins (a pattern view's sum
#: overflow, ``raise_error`` in Spark SQL): the maintainer shows the rest as it is.
OVERFLOW_MARK = "arrayviews: "

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


@dataclass(frozen=True)
class PartIndex:
    """``scale * variable + offset`` (scale >= 1)."""

    scale: int
    offset: int

    def at(self, part: int) -> int:
        return self.scale * part + self.offset

    def text(self, variable: str) -> str:
        head = variable if self.scale == 1 else f"{variable}*{self.scale}"
        if self.offset == 0:
            return head
        return f"{head}{'+' if self.offset > 0 else '-'}{abs(self.offset)}"


@dataclass(frozen=True)
class PartReference:
    """One ``T[lo .. hi]`` in a query: the relation, the part range, and where it was written
    (``start``/``end``: character offsets of the whole reference in the query text; ``line`` and
    ``column``: 1-based position of its first character in the statement, or in the query text when
    it was read alone; positions are not part of equality)."""

    relation: str
    low: PartIndex
    high: PartIndex
    start: int
    end: int
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)

    def parts(self, part: int) -> range:
        """The parts of ``relation`` this reference reads when the query builds part ``part``."""
        return range(self.low.at(part), self.high.at(part) + 1)

    def text(self, variable: str) -> str:
        if self.low == self.high:
            return f"{self.relation}[{self.low.text(variable)}]"
        return f"{self.relation}[{self.low.text(variable)} .. {self.high.text(variable)}]"


@dataclass(frozen=True)
class PartQuery:
    """A Spark SQL query whose FROM items may be part references, for part ``variable`` of a view."""

    text: str
    variable: str
    references: tuple[PartReference, ...]

    def render(self, names: dict[int, str]) -> str:
        """The query with reference number k replaced by the relation name ``names[k]``."""
        pieces, position = [], 0
        for number, reference in enumerate(self.references):
            pieces.append(self.text[position : reference.start])
            pieces.append(names[number])
            position = reference.end
        pieces.append(self.text[position:])
        return "".join(pieces)

    def relations(self) -> set[str]:
        return {reference.relation for reference in self.references}


@dataclass(frozen=True)
class Presentation:
    """What readers see of a view that keeps maintenance state in its own rows and columns: the
    rows whose column ``when_set`` is not NULL, with the ``columns`` (stored name, shown name).

    A translated pattern view keeps every partial match of a part in that part (its Helper, paper
    004 section 5.2) and shows only the complete ones, so one table and one commit carry a step."""

    columns: tuple[tuple[str, str], ...]
    when_set: str

    def to_dict(self) -> dict:
        return {"columns": [list(pair) for pair in self.columns], "when_set": self.when_set}

    @classmethod
    def from_dict(cls, data: dict) -> Presentation:
        return cls(tuple((str(a), str(b)) for a, b in data["columns"]), str(data["when_set"]))


@dataclass(frozen=True)
class ViewDFDefinition:
    """A view maintained part by part: part ``i`` of the first build from ``initialize``, every later
    part ``j`` from ``update`` (which may read earlier parts of the view itself).

    ``backfill``: the first build is at the oldest part of the sources (translated views, which must
    mean what their query means over the whole stream) instead of the newest common part (the
    paper's rule for hand-written ViewDFs). ``helper``: a view generated to serve another one; its
    old parts are dropped by retention. ``text`` is the statement that defined it (shown by SHOW
    and EXPLAIN; not part of equality).
    """

    name: str
    initialize: PartQuery
    update: PartQuery
    partition_length: int
    backfill: bool = False
    helper: bool = False
    text: str = field(default="", compare=False)
    extra: dict[str, str] = field(default_factory=dict, compare=False)
    #: What readers see of the view's stored rows (None: the rows as stored).
    presentation: Presentation | None = None
    #: A window view's update step column by column, for kernels/window_steps.py (None: SQL only).
    window_step: WindowStep | None = field(default=None, compare=False)

    def relations(self) -> set[str]:
        return self.initialize.relations() | self.update.relations()

    def sources(self) -> set[str]:
        """Relations read other than the view itself."""
        return self.relations() - {self.name}

    def to_json(self) -> str:
        """The definition as JSON (what a view's table keeps); :meth:`from_json` reads it back."""
        return json.dumps(
            {
                "name": self.name,
                "initialize": {"variable": self.initialize.variable, "text": self.initialize.text},
                "update": {"variable": self.update.variable, "text": self.update.text},
                "partition_length": self.partition_length,
                "backfill": self.backfill,
                "helper": self.helper,
                "text": self.text,
                **({"presentation": self.presentation.to_dict()} if self.presentation else {}),
                **({"window_step": self.window_step.to_dict()} if self.window_step else {}),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> ViewDFDefinition:
        data = json.loads(text)
        return viewdf_definition(
            data["name"],
            (data["initialize"]["variable"], data["initialize"]["text"]),
            (data["update"]["variable"], data["update"]["text"]),
            int(data["partition_length"]),
            backfill=bool(data["backfill"]),
            helper=bool(data["helper"]),
            text=data.get("text", ""),
            presentation=Presentation.from_dict(data["presentation"]) if data.get("presentation") else None,
            window_step=WindowStep.from_dict(data["window_step"]) if data.get("window_step") else None,
        )


def viewdf_definition(
    name: str,
    initialize: tuple[str, str],
    update: tuple[str, str],
    partition_length: int,
    *,
    backfill: bool = False,
    helper: bool = False,
    text: str = "",
    presentation: Presentation | None = None,
    window_step: WindowStep | None = None,
) -> ViewDFDefinition:
    """The definition of view ``name`` from its two queries, each ``(part variable, Spark SQL text)``.

    The references to the view itself are spelt as ``name``; ParseError (positions in the query
    text) for a malformed part reference.
    """
    (init_variable, init_text), (update_variable, update_text) = initialize, update
    init_query = read_part_query(
        init_text, init_variable, view=name, other_variable=update_variable, clause="INITIALIZE"
    )
    update_query = read_part_query(
        update_text, update_variable, view=name, other_variable=init_variable, clause="UPDATE"
    )
    return ViewDFDefinition(
        name,
        init_query,
        update_query,
        partition_length,
        backfill=backfill,
        helper=helper,
        text=text,
        presentation=presentation,
        window_step=window_step,
    )


# ---------------------------------------------------------------------------------------------
# Reading part references


@dataclass
class _Level:
    """One parenthesis level of a query body, for finding where tables may stand."""

    query: bool = False  # a SELECT was seen at this level
    in_from: bool = False  # inside this level's FROM list
    opened_at: int = -1  # offset of the '(' that opened it


class _Text:
    """Offsets and 1-based positions in a query text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._line_starts = line_starts(text)

    def position(self, offset: int) -> tuple[int, int]:
        return position_in(self._line_starts, offset)

    def error(self, reason: str, offset: int, expected: tuple[str, ...] = ()) -> ParseError:
        line, column = self.position(offset)
        return ParseError(reason, text=self.text, line=line, column=column, expected=expected)


def read_part_query(
    text: str, variable: str, *, view: str, other_variable: str | None = None, clause: str = "this"
) -> PartQuery:
    """The PartQuery of a query body: its text verbatim and the part references found in it.

    A reference to ``view`` itself is spelt as ``view`` (whatever its letter case). ``variable`` is
    the query's part variable; ``other_variable`` the other query's (named in a clearer error when it
    is used by mistake); ``clause`` names the query in errors (INITIALIZE or UPDATE). Raises
    ParseError at the offending place (positions in ``text``).
    """
    source = _Text(text)
    try:
        tokens = Spark().tokenizer().tokenize(text)
    except sqlglot.errors.TokenError as error:
        raise source.error(f"malformed query: {error}", 0) from None
    references = tuple(
        replace(reference, relation=view) if reference.relation.lower() == view.lower() else reference
        for reference in _references(source, tokens, _IndexReader(source, variable, other_variable, clause))
    )
    return PartQuery(text=text, variable=variable, references=references)


def _word(token: Token) -> str:
    """The first word of a token's text, upper case (sqlglot joins ``GROUP BY`` into one token)."""
    return token.text.split(None, 1)[0].upper() if token.text.strip() else ""


def _references(source: _Text, tokens: list[Token], reading: _IndexReader) -> Iterator[PartReference]:
    levels = [_Level()]
    expect_table = False
    previous_word = ""
    k = 0
    while k < len(tokens):
        token = tokens[k]
        kind = token.token_type
        level = levels[-1]
        if kind == TokenType.L_PAREN:
            levels.append(_Level(opened_at=token.start))
            expect_table = False
        elif kind == TokenType.R_PAREN:
            if len(levels) == 1:
                raise source.error("unmatched ')'", token.start)
            levels.pop()
            expect_table = False
        elif kind not in (TokenType.STRING, TokenType.COMMA) and _IDENTIFIER.fullmatch(token.text):
            word = _word(token)
            following = tokens[k + 1] if k + 1 < len(tokens) else None
            if expect_table and following is not None and following.token_type == TokenType.L_BRACKET:
                closing = _closing_bracket(source, tokens, k + 1)
                yield _reference(source, token, tokens[k + 1], tokens[closing], reading)
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
        elif kind == TokenType.COMMA:
            expect_table = level.in_from
        else:
            word = _word(token)
            if token.token_type != TokenType.STRING and word in {"JOIN", "FROM", "SELECT"} | _CLAUSE_WORDS:
                # keyword tokens whose text is more than one word (LEFT OUTER JOIN, GROUP BY, ...)
                last = token.text.split()[-1].upper()
                if word == "SELECT" or last == "SELECT":
                    level.query, level.in_from = True, False
                    expect_table = False
                elif level.query and last in ("JOIN", "FROM"):
                    level.in_from = expect_table = True
                else:
                    level.in_from = expect_table = False
                previous_word = last
                k += 1
                continue
            expect_table = False
        previous_word = ""
        k += 1
    if len(levels) > 1:
        raise source.error("unclosed '('", levels[-1].opened_at, ("')'",))


def _closing_bracket(source: _Text, tokens: list[Token], opening: int) -> int:
    for k in range(opening + 1, len(tokens)):
        if tokens[k].token_type == TokenType.R_BRACKET:
            return k
        if tokens[k].token_type == TokenType.L_BRACKET:
            break
    raise source.error("unclosed '[' of a part reference", tokens[opening].start, ("']'",))


def _reference(
    source: _Text, relation: Token, opening: Token, closing: Token, reading: _IndexReader
) -> PartReference:
    """The reference ``relation[...]`` between the tokens ``opening`` ('[') and ``closing`` (']')."""
    low, high = _bounds(source, opening.end + 1, closing.start, reading)
    line, column = source.position(relation.start)
    reference = PartReference(
        relation=relation.text,
        low=low,
        high=high,
        start=relation.start,
        end=closing.end + 1,
        line=line,
        column=column,
    )
    if low.scale >= high.scale and low.offset > high.offset:
        raise source.error(
            f"empty part range {reference.text(reading.variable)}: its first part is after its last",
            relation.start,
        )
    return reference


@functools.cache
def _index_parser() -> Lark:
    return Lark.open(
        "part_index.lark",
        rel_to=__file__,
        parser="lalr",
        start="part_range",
        maybe_placeholders=True,
        propagate_positions=True,
    )


_INDEX_TERMINALS = {
    "WORD": "name",
    "ADD_OP": "'+' or '-'",
    "MUL_OP": "'*'",
    "DOTDOT": "'..'",
    "LPAR": "'('",
    "RPAR": "')'",
    "$END": "']'",
}


def _bounds(source: _Text, start: int, end: int, reading: _IndexReader) -> tuple[PartIndex, PartIndex]:
    """The (low, high) indexes written in ``source.text[start:end]`` (between the brackets)."""
    piece = source.text[start:end]
    try:
        tree = _index_parser().parse(piece)
    except UnexpectedInput as error:
        expected = tuple(sorted({_INDEX_TERMINALS.get(t, t) for t in getattr(error, "expected", ()) or ()}))
        if isinstance(error, UnexpectedCharacters):
            raise source.error(
                f"unexpected {piece[error.pos_in_stream]!r}", start + error.pos_in_stream
            ) from None
        token = getattr(error, "token", None)
        if isinstance(error, UnexpectedToken) and token.type != "$END":
            raise source.error(f"unexpected {str(token)!r}", start + token.start_pos, expected) from None
        reason = "empty part index" if not piece.strip() else "incomplete part index"
        raise source.error(reason, end, expected) from None
    low_tree, _, high_tree = tree.children
    low = reading.index(low_tree, start)
    return low, (low if high_tree is None else reading.index(high_tree, start))


@dataclass(frozen=True)
class _IndexReader:
    """Reads a part index tree as ``scale * variable + offset``."""

    source: _Text
    variable: str
    other_variable: str | None
    clause: str

    def error(self, reason: str, offset: int) -> ParseError:
        return self.source.error(reason, offset)

    def index(self, tree: Tree, start: int) -> PartIndex:
        scale, offset = self.value(tree, start)
        at = start + _start_of(tree)
        if scale == 0:
            raise self.error(f"a part index must depend on the part variable {self.variable}", at)
        if scale < 0:
            raise self.error(f"a part index must grow with {self.variable} (its scale is {scale})", at)
        return PartIndex(scale, offset)

    def value(self, tree: Tree, start: int) -> tuple[int, int]:
        kind = tree.data
        if kind == "index_atom":
            return self.atom(tree.children[0], start)
        if kind == "index_sign":
            sign, operand = tree.children
            scale, offset = self.value(operand, start)
            return (-scale, -offset) if sign == "-" else (scale, offset)
        if kind == "index_sum":
            left, operator, right = tree.children
            a, b = self.value(left, start), self.value(right, start)
            return (a[0] + b[0], a[1] + b[1]) if operator == "+" else (a[0] - b[0], a[1] - b[1])
        if kind == "index_product":
            left, operator, right = tree.children
            if operator == "/":
                raise self.error("division is not allowed in a part index", start + operator.start_pos)
            a, b = self.value(left, start), self.value(right, start)
            if a[0] and b[0]:
                raise self.error(
                    f"a part index must be affine in {self.variable} (a product of two terms with "
                    f"{self.variable} is not)",
                    start + operator.start_pos,
                )
            return (a[0] * b[1] + b[0] * a[1], a[1] * b[1])
        inner = [child for child in tree.children if isinstance(child, Tree)]  # ( index )
        return self.value(inner[0], start)

    def atom(self, token: LarkToken, start: int) -> tuple[int, int]:
        if re.fullmatch(r"[0-9]+", token):
            return (0, int(token))
        if str(token) == self.variable:
            return (1, 0)
        if self.other_variable is not None and str(token) == self.other_variable:
            raise self.error(
                f"the {self.clause} query's part variable is {self.variable}, not {token}",
                start + token.start_pos,
            )
        raise self.error(
            f"unknown name {str(token)!r} in a part index; use the part variable {self.variable} and "
            f"integer literals",
            start + token.start_pos,
        )


def _start_of(tree: Tree | LarkToken) -> int:
    if isinstance(tree, LarkToken):
        return tree.start_pos
    return tree.meta.start_pos if not tree.meta.empty else _start_of(tree.children[0])


__all__ = [
    "PartIndex",
    "PartQuery",
    "PartReference",
    "Presentation",
    "ViewDFDefinition",
    "read_part_query",
    "viewdf_definition",
]
