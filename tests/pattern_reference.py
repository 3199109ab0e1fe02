"""Plain-Python references of the pattern views' semantics (see docs/streams.md), for the tests.

Neither uses state machines or SQL. The semantics: per group, rows of consecutive parts (a part
without a row for the group breaks the sequence); SQL row pattern matching (MATCH_RECOGNIZE) with
AFTER MATCH SKIP PAST LAST ROW, every ``+`` reluctant except one on the last variable, which is
greedy; a condition over two consecutive variables ``b.x > a.y`` holds between the first row of
``b`` and the row before it (the last row of ``a``). The view's part t holds the group's match over
the rows up to part t that ends at part t, with its row count and sums.

* :func:`pattern_results` maps each row to a character encoding which variables it may be bound
  to (entering the variable after the row before it, or staying in it) and lets Python's ``re``
  (a backtracking, leftmost-first matcher with reluctant ``*?`` and greedy ``*``, as the SQL
  standard prefers matches) find the matches over each prefix of the group's rows.
* :func:`earliest_matches` states the semantics the other way round, by brute force over every
  segmentation of every candidate span: the next match is the one that ends first, of those the
  one that starts first; a match ending in a ``+`` variable then takes every following row its
  conditions accept. The tests check that both agree.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

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

    def stays(self, position: int, row: Row) -> bool:
        """``row`` may be bound to the variable at ``position``: its one-variable conditions hold."""
        name = self.variables[position][0]
        return all(p.holds(row, None) for p in self.predicates if p.variable == name and p.other is None)

    def enters(self, position: int, row: Row, previous: Row | None) -> bool:
        """``row`` may be the first row of the variable at ``position`` with ``previous`` (None at the
        start of the group's rows) the row before it: its two-variable conditions hold too."""
        name = self.variables[position][0]
        pairs = [p for p in self.predicates if p.variable == name and p.other is not None]
        if pairs and previous is None:
            return False
        return self.stays(position, row) and all(p.holds(row, previous) for p in pairs)


# -- the regular-expression reference -----------------------------------------------------------------
_BASE = 0x4E00  # row characters: one code point per combination of bits, away from regex syntax


def _symbol(pattern: Pattern, row: Row, previous: Row | None) -> str:
    """The row as one character: bit 2k for "may stay in variable k", bit 2k+1 for "may enter it"."""
    mask = 0
    for k in range(len(pattern.variables)):
        if pattern.stays(k, row):
            mask |= 1 << (2 * k)
        if pattern.enters(k, row, previous):
            mask |= 1 << (2 * k + 1)
    return chr(_BASE + mask)


@cache
def _regex(variables: tuple[tuple[str, bool], ...]) -> re.Pattern:
    count = len(variables)
    masks = range(1 << (2 * count))

    def rows_with(bit: int) -> str:
        return "[" + "".join(chr(_BASE + m) for m in masks if m & (1 << bit)) + "]"

    pieces = []
    for k, (_, kleene) in enumerate(variables):
        pieces.append(rows_with(2 * k + 1))
        if kleene:
            pieces.append(rows_with(2 * k) + ("*" if k == count - 1 else "*?"))
    return re.compile("".join(pieces))


def regex_matches(pattern: Pattern, rows: Sequence[Row]) -> list[tuple[int, int]]:
    """The ``(first, last)`` row indexes of the matches over ``rows`` (consecutive rows of a group)."""
    text = "".join(_symbol(pattern, row, rows[i - 1] if i else None) for i, row in enumerate(rows))
    expression = _regex(pattern.variables)
    found, position = [], 0
    while True:
        match = expression.search(text, position)
        if match is None:
            return found
        found.append((match.start(), match.end() - 1))
        position = match.end()  # AFTER MATCH SKIP PAST LAST ROW (a match has at least one row)


# -- the brute-force reference -----------------------------------------------------------------------
def _segmentable(pattern: Pattern, rows: Sequence[Row], first: int, last: int) -> bool:
    """Whether rows ``first..last`` can be cut into runs, one per variable in order (one row for a
    plain variable, one or more for a ``+`` one), each run's rows accepted by its variable."""
    variables = pattern.variables

    def fits(position: int, start: int) -> bool:
        if position == len(variables):
            return start == last + 1
        longest = last + 1 - start if variables[position][1] else 1
        previous = rows[start - 1] if start > 0 else None
        for length in range(1, longest + 1):
            if start + length - 1 > last:
                break
            if not pattern.enters(position, rows[start], previous):
                break
            if not all(pattern.stays(position, rows[i]) for i in range(start + 1, start + length)):
                break
            if fits(position + 1, start + length):
                return True
        return False

    return fits(0, first)


def earliest_matches(pattern: Pattern, rows: Sequence[Row]) -> list[tuple[int, int]]:
    """The matches as the earliest-ending span (then the earliest-starting) after the previous match,
    a final ``+`` variable taking every following row it accepts."""
    found: list[tuple[int, int]] = []
    resume = 0
    while resume < len(rows):
        span = next(
            (
                (first, last)
                for last in range(resume, len(rows))
                for first in range(resume, last + 1)
                if _segmentable(pattern, rows, first, last)
            ),
            None,
        )
        if span is None:
            return found
        first, last = span
        if pattern.variables[-1][1]:
            while last + 1 < len(rows) and pattern.stays(len(pattern.variables) - 1, rows[last + 1]):
                last += 1
        found.append((first, last))
        resume = last + 1
    return found


# -- per part -------------------------------------------------------------------------------------
def _total(values: list) -> object:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def pattern_results(
    pattern: Pattern, parts: Sequence[Mapping[Hashable, Row]], summed: Sequence[str], matcher=regex_matches
) -> list[set[tuple]]:
    """Per part t (in order), the set of ``(group, count, sum of each summed attribute...)`` of the
    groups with a match over their rows up to part t that ends at part t. ``parts[k]`` maps each
    group to its row."""
    results = []
    for t, part in enumerate(parts):
        complete = set()
        for group, row in part.items():
            rows = [row]  # the group's rows in consecutive parts up to t
            for earlier in range(t - 1, -1, -1):
                if group not in parts[earlier]:
                    break
                rows.insert(0, parts[earlier][group])
            matches = matcher(pattern, rows)
            if matches and matches[-1][1] == len(rows) - 1:
                first = matches[-1][0]
                bound = rows[first:]
                complete.add((group, len(bound), *(_total([r[a] for r in bound]) for a in summed)))
        results.append(complete)
    return results
