"""Names: the one identifier rule for every user-given name, and the names arrayviews keeps for itself.

A user name (array, dimension, attribute, view, view output, stream, stream view) is a full match of
``[A-Za-z_][A-Za-z0-9_]*`` (``re.fullmatch``, so no trailing newline slips through as it would with
``$``), neither starting with an underscore nor holding a double underscore. Names are compared
without regard to case when they share one namespace (the columns of one array), because Spark
resolves column names that way.

Internal names (columns arrayviews adds next to user columns, and names it derives from user names)
are built so that no legal user name can equal them:

* an internal column of the user's namespace starts with :data:`INTERNAL_PREFIX` (``_``): view
  maintenance state (``_n``, ``_lc_<attribute>``, ...: see ``views/state.py``), the signed-delta flag
  :data:`NEGATIVE`, the part number :data:`PART` of streams;
* a name derived from a user name joins it to a tag with :data:`SEPARATOR` (``__``): fragment-table
  columns ``c__<dimension>``, ``v__<attribute>`` (``storage/layout.py``), halo and state columns
  ``t__``, ``s__``, ``k__``, and the helper views ``<view>__helper`` of translated stream views.

Stream views add :data:`PART_TIMESTAMP` to what readers see, so streams may not have such a column.
"""

from __future__ import annotations

import re

from arrayviews.model.errors import SchemaError

#: The identifier pattern (use it with ``fullmatch``).
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Every internal column that sits beside user columns starts with this; user names may not.
INTERNAL_PREFIX = "_"
#: Internal names derived from user names put this between the parts; user names may not hold it.
SEPARATOR = "__"

#: The part number column of stream and stream-view tables.
PART = "_part"
#: The start time of a part, added to the rows of streams and stream views when they are read.
PART_TIMESTAMP = "PART_TIMESTAMP"
#: Marks view-state rows that are subtracted (the minus side of a delta).
NEGATIVE = "_neg"
#: Suffix of the helper views a translated stream view is built from.
HELPER_SUFFIX = SEPARATOR + "helper"
#: Column names a stream may not use, compared without regard to case.
RESERVED_STREAM_COLUMNS = (PART, PART_TIMESTAMP)


def letters_note(text: str) -> str:
    """What to add to a syntax error at ``text`` when it holds a letter outside ASCII (``größe``,
    ``Ü``): names are ASCII identifiers; else nothing."""
    if any(char.isalpha() and not char.isascii() for char in text):
        return ": names are written in ASCII letters, digits and '_' ([A-Za-z_][A-Za-z0-9_]*)"
    return ""


def is_identifier(name: object) -> bool:
    """True if ``name`` is a string matching the identifier pattern in full."""
    return isinstance(name, str) and IDENTIFIER.fullmatch(name) is not None


def is_internal(name: str) -> bool:
    """True for the names arrayviews uses for itself (never a legal user name)."""
    return name.startswith(INTERNAL_PREFIX) or SEPARATOR in name


def internal(name: str) -> str:
    """The internal column name for ``name`` (``"n"`` -> ``"_n"``)."""
    return INTERNAL_PREFIX + name


def name_problem(name: object) -> str | None:
    """Why ``name`` is not a legal user name, or None if it is."""
    if not isinstance(name, str):
        return f"a name must be a string, got {type(name).__name__}"
    if not is_identifier(name):
        return "use letters, digits and _, not starting with a digit"
    if name.startswith(INTERNAL_PREFIX):
        return "names starting with an underscore are reserved for arrayviews' own columns"
    if SEPARATOR in name:
        return "double underscores are reserved for arrayviews' own names"
    return None


def check_identifier(name: object, what: str, error: type[Exception] = SchemaError) -> str:
    """Return ``name`` if it is a legal user name, else raise ``error`` naming ``what`` it names."""
    problem = name_problem(name)
    if problem is not None:
        # a value that is no text is named by its type alone (a Dataset's repr runs to pages)
        shown = f" {name!r}" if isinstance(name, str) else ""
        raise error(f"invalid {what} name{shown}: {problem}")
    return name  # type: ignore[return-value]


def check_internal_name(name: object, what: str) -> str:
    """Return ``name`` if it is an identifier with the internal prefix, else raise SchemaError."""
    if not is_identifier(name) or not name.startswith(INTERNAL_PREFIX) or SEPARATOR in name:
        raise SchemaError(
            f"invalid internal {what} name {name!r}: arrayviews' own names are identifiers that start "
            f"with {INTERNAL_PREFIX!r} and hold no {SEPARATOR!r}"
        )
    return name


def same_name(a: str, b: str) -> bool:
    """True if two names denote the same column (Spark compares column names without case)."""
    return a.lower() == b.lower()


def first_clash(names: list[str] | tuple[str, ...]) -> tuple[str, str] | None:
    """The first two names of ``names`` that denote the same column, or None."""
    seen: dict[str, str] = {}
    for name in names:
        key = name.lower()
        if key in seen:
            return seen[key], name
        seen[key] = name
    return None


def unused_name(base: str, taken: set[str] | frozenset[str]) -> str:
    """``base`` if no name in ``taken`` denotes the same column, else ``base_2``, ``base_3``, ..."""
    lowered = {t.lower() for t in taken}
    if base.lower() not in lowered:
        return base
    number = 2
    while f"{base}_{number}".lower() in lowered:
        number += 1
    return f"{base}_{number}"
