"""A plain-Python reference of the pattern semantics (see arrayviews.streams.fsm), for the tests.

Written from the pattern list directly, without state machines or SQL: per group, the current match
is the list of (pattern position, row) pairs bound so far; each part's row extends it (a Kleene
variable taking one more row, or the next variable), or a new match starts with that row, or there
is no match. A group with no row in a part has no match.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

Row = Mapping[str, object]

COMPARISONS = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "=": operator.eq,
    "<>": operator.ne,
}


@dataclass(frozen=True)
class Predicate:
    """``variable.attribute OP constant``, or ``variable.attribute OP other.other_attribute`` where
    ``other`` is the pattern variable just before ``variable``."""

    variable: str
    attribute: str
    comparison: str
    constant: int | None = None
    other: str | None = None
    other_attribute: str | None = None

    def sql(self) -> str:
        right = str(self.constant) if self.other is None else f"{self.other}.{self.other_attribute}"
        return f"{self.variable}.{self.attribute} {self.comparison} {right}"

    def holds(self, row: Row, previous: Row | None) -> bool:
        """Whether it holds for ``row`` bound to ``variable`` (and ``previous`` bound to ``other``);
        a comparison with a null is not true, as in SQL."""
        left = row[self.attribute]
        right = self.constant if self.other is None else (previous or {}).get(self.other_attribute)
        if left is None or right is None:
            return False
        return COMPARISONS[self.comparison](left, right)


@dataclass(frozen=True)
class Pattern:
    """The PATTERN list (name, Kleene flag) and the WHERE predicates."""

    variables: tuple[tuple[str, bool], ...]
    predicates: tuple[Predicate, ...]

    def accepts_alone(self, position: int, row: Row) -> bool:
        """The single-variable predicates of the variable at ``position`` hold for ``row``."""
        name = self.variables[position][0]
        return all(p.holds(row, None) for p in self.predicates if p.variable == name and p.other is None)

    def accepts_after(self, position: int, row: Row, previous: Row) -> bool:
        """``row`` may be bound to the variable at ``position`` right after ``previous`` was bound to
        the variable before it."""
        name = self.variables[position][0]
        pairs = [p for p in self.predicates if p.variable == name and p.other is not None]
        return self.accepts_alone(position, row) and all(p.holds(row, previous) for p in pairs)

    def extend(self, match: list[tuple[int, Row]], row: Row) -> list[tuple[int, Row]]:
        """The match after ``row``: extended, restarted with ``row``, or empty."""
        if match:
            position, previous = match[-1]
            if self.variables[position][1] and self.accepts_alone(position, row):
                return [*match, (position, row)]
            following = position + 1
            if following < len(self.variables) and self.accepts_after(following, row, previous):
                return [*match, (following, row)]
        if self.accepts_alone(0, row):
            return [(0, row)]
        return []


def _total(values: list) -> object:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def pattern_results(
    pattern: Pattern, parts: Sequence[Mapping[Hashable, Row]], summed: Sequence[str]
) -> list[set[tuple]]:
    """Per part (in order), the set of ``(group, count, sum of each summed attribute...)`` of the
    groups whose match is complete after that part. ``parts[k]`` maps each group to its row."""
    matches: dict[Hashable, list[tuple[int, Row]]] = {}
    results = []
    for part in parts:
        matches = {group: pattern.extend(matches.get(group, []), row) for group, row in part.items()}
        complete = set()
        for group, match in matches.items():
            if match and match[-1][0] == len(pattern.variables) - 1:
                rows = [row for _, row in match]
                complete.add((group, len(rows), *(_total([r[a] for r in rows]) for a in summed)))
        results.append(complete)
    return results
