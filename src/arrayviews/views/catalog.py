"""The one catalog of relations: every relation with its kind, what each view reads, and who
depends on whom, so that one drop path can refuse to drop what a view still reads."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arrayviews.model.errors import NotFoundError, ValidationError
from arrayviews.storage import kinds
from arrayviews.storage.kinds import RelationEntry
from arrayviews.storage.warehouse import Warehouse
from arrayviews.streams.world import StreamWorld
from arrayviews.views.view import read_definition

if TYPE_CHECKING:  # the session is handed on to the streams' world (Spark SQL over streams)
    from pyspark.sql import SparkSession

#: Kinds whose dependents are views defined over them (the others are read by stream views).
_BASE_KINDS = (kinds.ARRAY, kinds.UNCERTAIN_ARRAY, kinds.ARRAY_VIEW)


class RelationCatalog:
    """Every relation of one warehouse, listed once per call from table metadata."""

    def __init__(self, warehouse: Warehouse, spark: SparkSession) -> None:
        self.warehouse = warehouse
        self.spark = spark

    def entries(self, helpers: bool = True) -> list[RelationEntry]:
        """Every relation (helper stream views only with ``helpers``), sorted by name."""
        return [e for e in self.warehouse.relations() if helpers or not e.helper]

    def names(self, kind: str, helpers: bool = False) -> list[str]:
        """Names (as created) of the relations of one kind, sorted."""
        return sorted(e.name for e in self.entries(helpers) if e.kind == kind)

    def entry(self, name: str, kind: str | None = None) -> RelationEntry | None:
        """The relation called ``name`` (case-insensitive), or None; with ``kind``, the one of that kind
        first (a warehouse two racing creations left with one name twice, before the catalog kept
        names unique, must let each be dropped by its own kind's method)."""
        key = name.lower()
        named = [e for e in self.entries() if e.name.lower() == key]
        return next((e for e in named if e.kind == kind), named[0] if named else None)

    def require(self, name: str) -> RelationEntry:
        """The relation called ``name``; NotFoundError listing the relations when there is none."""
        entry = self.entry(name)
        if entry is None:
            known = ", ".join(e.name for e in self.entries(helpers=False)) or "none"
            raise NotFoundError(f"no relation named {name} (relations: {known})")
        return entry

    # -- dependencies ------------------------------------------------------------------------------
    def reads(self) -> dict[str, tuple[RelationEntry, frozenset[str]]]:
        """For every view (array views and stream views, helpers included): the view and the
        lower-case names of the relations it reads. A view whose definition cannot be read is left
        out (``Database.check`` reports it)."""
        found: dict[str, tuple[RelationEntry, frozenset[str]]] = {}
        entries = self.entries()
        for entry in entries:
            if entry.kind != kinds.ARRAY_VIEW:
                continue
            try:
                definition, _ = read_definition(self.warehouse.open(entry.name))
            except Exception:  # noqa: BLE001 - a broken view is check()'s to report
                continue
            found[entry.name.lower()] = (entry, frozenset(b.lower() for b in definition.bases))
        stream_views = {e.name.lower(): e for e in entries if e.kind == kinds.STREAM_VIEW}
        if stream_views:
            for name, definition in StreamWorld(self.spark, self.warehouse.catalog).definitions().items():
                if name in stream_views:
                    found[name] = (stream_views[name], frozenset(definition.sources()))
        return found

    def dependents(self, name: str) -> list[RelationEntry]:
        """The views that read ``name``, sorted by name."""
        key = name.lower()
        return sorted(
            (view for view, sources in self.reads().values() if key in sources and view.name.lower() != key),
            key=lambda e: e.name.lower(),
        )

    def refuse_if_read(self, entry: RelationEntry) -> None:
        """ValidationError naming the views that read ``entry`` (nothing is dropped) if there are any."""
        dependents = self.dependents(entry.name)
        if dependents:
            raise ValidationError(dependents_message(entry, dependents), array=entry.name)


def dependents_message(entry: RelationEntry, dependents: list[RelationEntry]) -> str:
    """``array A is a base of view(s) V (array view); drop them first`` and the like."""
    verb = "a base of" if entry.kind in _BASE_KINDS else "read by"
    views = ", ".join(f"{d.name} ({d.kind})" for d in dependents)
    return f"{entry.kind} {entry.name} is {verb} view(s) {views}; drop them first"


__all__ = ["RelationCatalog", "dependents_message"]
