"""The kinds of relation a warehouse holds, and how each is stored: catalog namespace and kind property.

Arrays, array views and uncertain arrays are chunk-fragment tables in the ``arrays`` namespace;
streams and stream (ViewDF) views are part tables in the ``streams`` namespace. Each table says
its kind in the ``arrayviews.kind`` table property; this module is the one place that maps those
stored values to the kinds users see (``SHOW RELATIONS``, ``db.relations()``).
"""

from __future__ import annotations

from dataclasses import dataclass

ARRAY = "array"
ARRAY_VIEW = "array view"
UNCERTAIN_ARRAY = "uncertain array"
STREAM = "stream"
STREAM_VIEW = "stream view"
#: Every kind, in the order listings show them.
KINDS = (ARRAY, ARRAY_VIEW, UNCERTAIN_ARRAY, STREAM, STREAM_VIEW)
VIEW_KINDS = (ARRAY_VIEW, STREAM_VIEW)

#: Catalog namespaces: chunk-fragment tables and part tables.
ARRAYS_NAMESPACE = "arrays"
STREAMS_NAMESPACE = "streams"
NAMESPACES = (ARRAYS_NAMESPACE, STREAMS_NAMESPACE)

#: The ``arrayviews.kind`` property values, per namespace.
STORED_ARRAY = "array"
STORED_ARRAY_VIEW = "view"
STORED_UNCERTAIN = "uncertain"
STORED_STREAM = "stream"
STORED_STREAM_VIEW = "viewdf"

_KIND_OF_STORED = {
    (ARRAYS_NAMESPACE, STORED_ARRAY): ARRAY,
    (ARRAYS_NAMESPACE, STORED_ARRAY_VIEW): ARRAY_VIEW,
    (ARRAYS_NAMESPACE, STORED_UNCERTAIN): UNCERTAIN_ARRAY,
    (STREAMS_NAMESPACE, STORED_STREAM): STREAM,
    (STREAMS_NAMESPACE, STORED_STREAM_VIEW): STREAM_VIEW,
}


def kind_of_stored(namespace: str, stored_kind: str | None) -> str | None:
    """The relation kind of a table in ``namespace`` whose kind property is ``stored_kind`` (None:
    not a relation arrayviews knows, e.g. a table another tool put in the catalog)."""
    return _KIND_OF_STORED.get((namespace, stored_kind))


def with_article(kind: str) -> str:
    """``an array``, ``a stream view``: a kind as errors name it."""
    return ("an " if kind[0] in "aeiou" else "a ") + kind


@dataclass(frozen=True)
class RelationEntry:
    """One relation as the catalog lists it (read from table metadata only, no data)."""

    name: str
    kind: str
    version: int
    #: A stream view generated to serve another one (hidden from the default listings).
    helper: bool = False


__all__ = [
    "ARRAY",
    "ARRAYS_NAMESPACE",
    "ARRAY_VIEW",
    "KINDS",
    "NAMESPACES",
    "STREAM",
    "STREAMS_NAMESPACE",
    "STREAM_VIEW",
    "UNCERTAIN_ARRAY",
    "VIEW_KINDS",
    "RelationEntry",
    "kind_of_stored",
    "with_article",
]
