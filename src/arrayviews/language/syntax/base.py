"""The base of the syntax tree of the statement language: the Statement class, the statements every
relation kind shares (EXPLAIN, SHOW RELATIONS, Spark SQL queries) and the checks of node fields.

Nodes compare equal when structurally equal (``parse(to_text(s)) == s``). Constructors check shape
only (names are identifiers, lists line up and are not empty); whether names exist in the database
is the executor's business.
"""

from __future__ import annotations

from dataclasses import dataclass

from arrayviews.model.names import is_identifier

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: The largest literal integer (uint64 attributes hold values above INT64_MAX).
UINT64_MAX = 2**64 - 1


def _identifier(value: object, what: str) -> str:
    if not is_identifier(value):
        raise ValueError(f"invalid {what} name {value!r}")
    return value


def _identifiers(values: object, what: str, allow_empty: bool = False) -> tuple[str, ...]:
    names = tuple(values)
    if not names and not allow_empty:
        raise ValueError(f"at least one {what} name is needed")
    for name in names:
        _identifier(name, what)
    return names


def _integers(values: object, what: str) -> tuple[int, ...]:
    numbers = tuple(values)
    for number in numbers:
        if isinstance(number, bool) or not isinstance(number, int):
            raise ValueError(f"{what} must be integers, got {number!r}")
    return numbers


def _set(node: object, name: str, value: object) -> None:
    object.__setattr__(node, name, value)


class Statement:
    """Base of the statements."""

    __slots__ = ()


@dataclass(frozen=True)
class Explain(Statement):
    """``EXPLAIN statement``: what the statement would do, without doing it."""

    statement: Statement

    def __post_init__(self) -> None:
        if not isinstance(self.statement, Statement) or isinstance(self.statement, Explain):
            raise ValueError(f"EXPLAIN needs a statement other than EXPLAIN, got {self.statement!r}")


#: The relation kinds that SHOW lists: ``SHOW RELATIONS`` lists them all.
RELATION_KINDS = ("arrays", "views", "streams", "relations")


@dataclass(frozen=True)
class ShowRelations(Statement):
    """``SHOW ARRAYS | VIEWS | STREAMS | RELATIONS``: one row per relation of that kind (all kinds for
    RELATIONS), with its kind, status and freshness."""

    kind: str = "relations"

    def __post_init__(self) -> None:
        if self.kind not in RELATION_KINDS:
            raise ValueError(f"unknown relation kind {self.kind!r}; use {', '.join(RELATION_KINDS)}")


@dataclass(frozen=True)
class Query(Statement):
    """A Spark SQL query (``SELECT ...`` or ``WITH ...``) over registered relations, kept verbatim.

    ``relations`` names the relations the query reads (its FROM and JOIN tables, without common
    table expressions), sorted; the executor checks they are registered relations before running it.
    """

    text: str
    relations: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError("a query needs text")
        _set(self, "relations", tuple(self.relations))


__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "UINT64_MAX",
    "RELATION_KINDS",
    "Explain",
    "Query",
    "ShowRelations",
    "Statement",
]
