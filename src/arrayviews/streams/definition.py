"""What a ViewDF view is: an INITIALIZE and an UPDATE query over part references, and a partition
length (paper 004, section 4.1). Shared by the parser, the translator and the maintainer.

A part reference ``T[lo .. hi]`` names the parts ``lo`` to ``hi`` (inclusive) of a stream or view
``T``; each end is affine in the query's part variable (``j``, ``j-1``, ``i*60-59``), in units of
``T``'s own partition length. ``T[j-1]`` is the range ``j-1 .. j-1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: How the message of an error a generated query raises on purpose begins (a pattern view's sum
#: overflow, ``raise_error`` in Spark SQL): the maintainer shows the rest as it is.
OVERFLOW_MARK = "arrayviews: "


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
    ``column``: 1-based position of its first character in the statement)."""

    relation: str
    low: PartIndex
    high: PartIndex
    start: int
    end: int
    line: int = 0
    column: int = 0

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
class ViewDFDefinition:
    """A view maintained part by part: part ``i`` of the first build from ``initialize``, every later
    part ``j`` from ``update`` (which may read earlier parts of the view itself).

    ``backfill``: the first build is at the oldest part of the sources (translated views, which must
    mean what their query means over the whole stream) instead of the newest common part (the
    paper's rule for hand-written ViewDFs). ``helper``: a view generated to serve another one; its
    old parts are dropped by retention. ``text`` is the statement that defined it (shown by SHOW
    and EXPLAIN).
    """

    name: str
    initialize: PartQuery
    update: PartQuery
    partition_length: int
    backfill: bool = False
    helper: bool = False
    text: str = ""
    extra: dict[str, str] = field(default_factory=dict, compare=False)

    def relations(self) -> set[str]:
        return self.initialize.relations() | self.update.relations()

    def sources(self) -> set[str]:
        """Relations read other than the view itself."""
        return self.relations() - {self.name}
