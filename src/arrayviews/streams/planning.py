"""Which parts a ViewDF view can build or must rebuild, from its part references alone (paper 004,
sections 4.1 and 4.3): the newest part whose inputs all exist, the parts a changed source part
affects, and how far back the view's consumers still read."""

from __future__ import annotations

from collections.abc import Iterable

from arrayviews.model.viewdf import PartQuery, PartReference, ViewDFDefinition


def _floor_div(a: int, b: int) -> int:
    return a // b


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def newest_buildable(query: PartQuery, newest: dict[str, int], own: str) -> int | None:
    """The largest part whose references (other than to the view itself) all name parts that exist
    (``newest[R]``: the newest existing part of relation R); None if some source has no part."""
    bound = None
    for reference in query.references:
        if reference.relation == own:
            continue
        if newest.get(reference.relation) is None:
            return None
        high = reference.high
        part = _floor_div(newest[reference.relation] - high.offset, high.scale)
        bound = part if bound is None else min(bound, part)
    return bound


def oldest_buildable(query: PartQuery, oldest: dict[str, int], own: str) -> int | None:
    """The smallest part whose references reach at least one existing part of some source: where a
    backfilled view starts."""
    start = None
    for reference in query.references:
        if reference.relation == own or oldest.get(reference.relation) is None:
            continue
        high = reference.high
        part = _ceil_div(oldest[reference.relation] - high.offset, high.scale)
        start = part if start is None else min(start, part)
    return start


def parts_reading(reference: PartReference, changed: int) -> range:
    """The view parts whose reference ``reference`` reads part ``changed`` of its relation."""
    first = _ceil_div(changed - reference.high.offset, reference.high.scale)
    last = _floor_div(changed - reference.low.offset, reference.low.scale)
    return range(first, last + 1)


def affected_parts(
    definition: ViewDFDefinition, relation: str, changed: Iterable[int], first: int, next_part: int
) -> set[int]:
    """Built parts (``first`` .. ``next_part - 1``) that read one of the ``changed`` parts of
    ``relation``: the first part through INITIALIZE, later ones through UPDATE."""
    found: set[int] = set()
    for part in changed:
        for reference in definition.update.references:
            if reference.relation == relation:
                found.update(p for p in parts_reading(reference, part) if first < p < next_part)
        for reference in definition.initialize.references:
            if (
                reference.relation == relation
                and first in parts_reading(reference, part)
                and first < next_part
            ):
                found.add(first)
    return found


def self_reach(definition: ViewDFDefinition) -> int:
    """How many parts back the UPDATE reads the view itself (0 if it does not)."""
    reach = 0
    for reference in definition.update.references:
        if reference.relation == definition.name:
            reach = max(reach, -reference.low.offset)
    return reach


def lowest_part_read(definition: ViewDFDefinition, relation: str, part: int) -> int | None:
    """The lowest part of ``relation`` that building part ``part`` of the view reads."""
    lows = [r.low.at(part) for r in definition.update.references if r.relation == relation]
    return min(lows) if lows else None
