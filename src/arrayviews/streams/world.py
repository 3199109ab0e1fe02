"""The streams and ViewDF views of one warehouse, loaded from the catalog for one maintenance pass:
names (case-insensitive, as Spark SQL), definitions, part tables, and part reads."""

from __future__ import annotations

import dataclasses
from functools import cached_property

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from arrayviews.model.errors import NotFoundError
from arrayviews.model.names import PART
from arrayviews.model.viewdf import PartQuery, ViewDFDefinition
from arrayviews.storage.part_table import PartTable
from arrayviews.storage.snapshots import update_properties
from arrayviews.streams import relations as rel
from arrayviews.streams.columns import conform


def normalized(definition: ViewDFDefinition) -> ViewDFDefinition:
    """The definition with every relation name in lower case (Spark SQL names are case-insensitive)."""

    def lower(query: PartQuery) -> PartQuery:
        references = tuple(dataclasses.replace(r, relation=r.relation.lower()) for r in query.references)
        return dataclasses.replace(query, references=references)

    return dataclasses.replace(
        definition,
        name=definition.name.lower(),
        initialize=lower(definition.initialize),
        update=lower(definition.update),
    )


class ViewHandle:
    """One ViewDF view: its definition, its part table and its settings."""

    def __init__(self, name: str, definition: ViewDFDefinition, table: PartTable) -> None:
        self.name = name
        self.definition = definition
        self.table = table

    @property
    def lateness_parts(self) -> int:
        properties = self.table.table.metadata.properties
        return int(properties.get(rel.LATENESS, rel.DEFAULT_LATENESS_PARTS))

    def state(self) -> rel.ViewState | None:
        return rel.ViewState.from_properties(self.table.latest_properties())

    def failure(self) -> str | None:
        """The error that made the view's maintenance fail (None if it did not)."""
        return self.table.table.metadata.properties.get(rel.FAILED)

    def mark_failed(self, error: str) -> None:
        self.table.table = update_properties(self.table.table, {rel.FAILED: error[:4000]})

    def clear_failure(self) -> None:
        self.table.table = update_properties(self.table.table, {}, [rel.FAILED])

    def conform_columns(self, frame: DataFrame, part: int) -> DataFrame:
        """The query result with the view's column names and types, matched by name."""
        schema: StructType = self.table.spark_schema
        found = frame.schema
        if [(f.name, f.dataType) for f in found.fields] == [(f.name, f.dataType) for f in schema.fields]:
            return frame
        return conform(frame, schema, self.name, part)


class StreamWorld:
    """Every stream and ViewDF view of a warehouse, read lazily and cached for one pass."""

    def __init__(self, spark: SparkSession, catalog) -> None:
        self.spark = spark
        self.catalog = catalog
        self._tables: dict[str, PartTable] = {}
        self._views: dict[str, ViewHandle] = {}

    @cached_property
    def kinds(self) -> dict[str, str]:
        """Lower-case name -> kind, for every stream and view."""
        found = {}
        for kind in (rel.STREAM_KIND, rel.VIEW_KIND):
            for name in PartTable.names(self.catalog, rel.NAMESPACE, kind):
                found[name.lower()] = kind
        return found

    def key(self, name: str) -> str:
        key = name.lower()
        if key not in self.kinds:
            known = ", ".join(sorted(self.kinds)) or "none"
            raise NotFoundError(f"no stream or stream view named {name} (known: {known})")
        return key

    def table(self, name: str) -> PartTable:
        key = self.key(name)
        if key not in self._tables:
            self._tables[key] = PartTable.open(self.catalog, rel.NAMESPACE, key)
        return self._tables[key]

    def view(self, name: str) -> ViewHandle:
        key = self.key(name)
        if key not in self._views:
            if self.kinds[key] != rel.VIEW_KIND:
                raise NotFoundError(f"{name} is a stream, not a view")
            table = self.table(key)
            self._views[key] = ViewHandle(key, load_definition(table), table)
        return self._views[key]

    def definitions(self) -> dict[str, ViewDFDefinition]:
        return {n: self.view(n).definition for n, k in self.kinds.items() if k == rel.VIEW_KIND}

    def oldest_seen(self, name: str) -> int | None:
        """The oldest version of ``name`` that a view reading it reflects (its history after that
        version is still needed); None when no view reading it has been built."""
        key = self.key(name)
        seen = []
        for definition in self.definitions().values():
            if key in definition.sources():
                state = self.view(definition.name).state()
                if state is not None:
                    seen.append(state.seen.get(key, 0))
        return min(seen) if seen else None

    def view_order(self) -> list[str]:
        return rel.topological_order(self.definitions())

    def forget(self, name: str) -> None:
        """Drop cached state of ``name`` after it committed."""
        key = name.lower()
        if key in self._tables:
            self._tables[key].refresh()

    def refresh(self) -> None:
        """Read every relation again (after another process committed to one of them)."""
        for table in self._tables.values():
            table.refresh()

    def relation(self, name: str) -> rel.Relation:
        key = self.key(name)
        table = self.table(key)
        if self.kinds[key] == rel.STREAM_KIND:
            bounds = table.part_range()
            oldest, newest = (None, None) if bounds is None else bounds
            return rel.Relation(
                key, rel.STREAM_KIND, table.partition_length, table.current_version(), oldest, newest, oldest
            )
        state = self.view(key).state()
        if state is None:
            return rel.Relation(
                key, rel.VIEW_KIND, table.partition_length, table.current_version(), None, None, None
            )
        return rel.Relation(
            key,
            rel.VIEW_KIND,
            table.partition_length,
            table.current_version(),
            state.first,
            state.next - 1,
            state.retained,
        )

    def read_parts(self, name: str, low: int, high: int) -> DataFrame:
        """Rows of parts ``low`` .. ``high`` of a stream or view (user columns only). Parts that do not
        exist read as empty; parts of a view dropped by retention raise."""
        relation = self.relation(name)
        if (
            relation.kind == rel.VIEW_KIND
            and relation.retained is not None
            and high >= relation.oldest
            and max(low, relation.oldest) < relation.retained
        ):
            from arrayviews.streams.maintainer import MaintenanceError

            raise MaintenanceError(
                f"view {name}: parts {low}..{high} are needed but parts below {relation.retained} "
                "were dropped by retention"
            )
        frame = self.table(name).read_parts(self.spark, low, high)
        return frame.drop(PART)


def load_definition(table: PartTable) -> ViewDFDefinition:
    """A view's definition from its table properties (kept as JSON, its queries read again)."""
    properties = table.table.metadata.properties
    definition = ViewDFDefinition.from_json(properties[rel.DEFINITION])
    definition = dataclasses.replace(
        definition,
        backfill=properties.get(rel.BACKFILL) == "true",
        helper=properties.get(rel.HELPER) == "true",
    )
    return normalized(definition)
