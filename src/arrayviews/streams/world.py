"""The streams and ViewDF views of one warehouse, loaded from the catalog for one maintenance pass:
names (case-insensitive, as Spark SQL), definitions, part tables, and part reads."""

from __future__ import annotations

import dataclasses
import functools
from functools import cached_property

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from arrayviews.execution.cost import MODES, CostModel
from arrayviews.execution.part_jobs import SparkPartTable
from arrayviews.execution.session import ensure_started
from arrayviews.model.errors import NotFoundError, ValidationError
from arrayviews.model.names import PART, PART_TIMESTAMP
from arrayviews.model.viewdf import PartQuery, Presentation, ViewDFDefinition
from arrayviews.storage.part_table import NAME_PROPERTY
from arrayviews.storage.versioned import KIND_PROPERTY
from arrayviews.streams import relations as rel
from arrayviews.streams.columns import conform
from arrayviews.streams.maintainer import MaintenanceError
from arrayviews.streams.part_files import PartFile, part_files
from arrayviews.streams.presentation import presented_frame, presented_schema


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

    def __init__(self, name: str, definition: ViewDFDefinition, table: SparkPartTable) -> None:
        self.name = name
        self.definition = definition
        self.table = table

    @property
    def spelled(self) -> str:
        """The view's name as it was created (``name`` is its lower-case key)."""
        return self.table.properties.get(NAME_PROPERTY) or self.name

    @property
    def lateness_parts(self) -> int:
        properties = self.table.properties
        return int(properties.get(rel.LATENESS, rel.DEFAULT_LATENESS_PARTS))

    def state(self) -> rel.ViewState | None:
        return rel.ViewState.from_properties(self.table.latest_properties())

    def failure(self) -> str | None:
        """The error that made the view's maintenance fail (None if it did not)."""
        return self.table.properties.get(rel.FAILED)

    def mark_failed(self, error: str) -> None:
        self.table.update_properties({rel.FAILED: error[:4000]})

    def clear_failure(self) -> None:
        self.table.update_properties({}, [rel.FAILED])

    def held_parts(self) -> range:
        """Parts held, as of the newest metadata: from the oldest retained to the newest built."""
        self.table.refresh()
        state = self.state()
        return range(0) if state is None else range(state.retained, state.next)

    def read_held(self, spark: SparkSession, part: int | None = None) -> DataFrame:
        """The view's rows (every held part, or one part) with PART_TIMESTAMP, the start of the part."""
        held = self.held_parts()
        if part is not None and part not in held:
            span = f"{held.start}..{held.stop - 1}" if len(held) else "none yet"
            raise NotFoundError(f"view {self.name} has no part {part} (parts held: {span})")
        low, high = (held.start, held.stop - 1) if part is None else (part, part)
        presentation = self.definition.presentation
        if not len(held):
            schema = presented_schema(self.table.spark_schema, presentation)
            frame = spark.createDataFrame([], schema).withColumn(PART, F.lit(0).cast("long"))
        else:
            frame = presented_frame(self.table.read_parts(spark, low, high), presentation)
        return with_part_timestamp(frame, self.definition.partition_length)

    def conform_columns(self, frame: DataFrame, part: int) -> DataFrame:
        """The query result with the view's column names and types, matched by name."""
        schema: StructType = self.table.spark_schema
        found = frame.schema
        if [(f.name, f.dataType) for f in found.fields] == [(f.name, f.dataType) for f in schema.fields]:
            return frame
        return conform(frame, schema, self.name, part)


def with_part_timestamp(frame: DataFrame, partition_length: int) -> DataFrame:
    """Rows with PART_TIMESTAMP (the start of each row's part) instead of the part number."""
    stamp = F.timestamp_seconds(F.col(PART) * F.lit(partition_length))
    return frame.withColumn(PART_TIMESTAMP, stamp).drop(PART)


class StreamWorld:
    """Every stream and ViewDF view of a warehouse, read lazily and cached for one pass."""

    def __init__(
        self, spark: SparkSession, catalog, execution: str = "auto", costs: CostModel | None = None
    ) -> None:
        """``execution`` and ``costs`` choose where each part of a maintenance step is built
        (``connect(execution=...)`` and the warehouse's calibrated costs)."""
        if execution not in MODES:
            raise ValidationError(f"execution must be one of {', '.join(MODES)}, got {execution!r}")
        self.spark = spark
        self.catalog = catalog
        self.execution = execution
        self.costs = costs or CostModel()
        self._tables: dict[str, SparkPartTable] = {}
        self._views: dict[str, ViewHandle] = {}

    @cached_property
    def kinds(self) -> dict[str, str]:
        """Lower-case name -> kind, for every stream and view (each table's metadata is read once
        and kept for the pass)."""
        found = {}
        for table in SparkPartTable.load_all(self.catalog, rel.NAMESPACE):
            properties = table.table.metadata.properties
            kind = properties.get(KIND_PROPERTY)
            if kind not in (rel.STREAM_KIND, rel.VIEW_KIND):
                continue
            key = properties[NAME_PROPERTY].lower()
            found[key] = kind
            self._tables.setdefault(key, table)
        return dict(sorted(found.items()))

    def spelled(self, name: str) -> str:
        """The name of stream or view ``name`` as it was created (keys are lower case)."""
        key = name.lower()
        if key not in self.kinds:
            return name
        return self.table(key).properties.get(NAME_PROPERTY) or name

    def key(self, name: str) -> str:
        key = name.lower()
        if key not in self.kinds:
            known = ", ".join(sorted(self.kinds)) or "none"
            raise NotFoundError(f"no stream or stream view named {name} (known: {known})")
        return key

    def table(self, name: str) -> SparkPartTable:
        key = self.key(name)
        if key not in self._tables:
            ensure_started(self.spark)  # stream code builds pyspark columns and schemas
            self._tables[key] = SparkPartTable.open(self.catalog, rel.NAMESPACE, key)
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

    def versions(self) -> dict[str, int]:
        """The version of every relation read so far, as read (not looked up again)."""
        return {key: table.current_version() for key, table in self._tables.items()}

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

    def files_of(self, name: str, low: int, high: int) -> list[PartFile]:
        """The data files of parts ``low`` .. ``high`` of a stream or view (parts that do not exist
        have none); parts of a view dropped by retention raise."""
        self._check_held(name, low, high)
        return part_files(self.table(name), low, high)

    def _check_held(self, name: str, low: int, high: int) -> None:
        relation = self.relation(name)
        if (
            relation.kind == rel.VIEW_KIND
            and relation.retained is not None
            and high >= relation.oldest
            and max(low, relation.oldest) < relation.retained
        ):
            raise MaintenanceError(
                f"view {name}: parts {low}..{high} are needed but parts below {relation.retained} "
                "were dropped by retention"
            )

    def read_parts(self, name: str, low: int, high: int) -> DataFrame:
        """Rows of parts ``low`` .. ``high`` of a stream or view (user columns only). Parts that do not
        exist read as empty; parts of a view dropped by retention raise."""
        self._check_held(name, low, high)
        frame = presented_frame(self.table(name).read_parts(self.spark, low, high), self.presentation(name))
        return frame.drop(PART)

    def presentation(self, name: str) -> Presentation | None:
        """What readers see of relation ``name`` (None for streams and views shown as stored)."""
        key = self.key(name)
        return self.view(key).definition.presentation if self.kinds[key] == rel.VIEW_KIND else None

    def read_schema(self, name: str) -> StructType:
        """The columns readers of relation ``name`` see (without ``_part``)."""
        return presented_schema(self.table(name).spark_schema, self.presentation(name))


def load_definition(table: SparkPartTable) -> ViewDFDefinition:
    """A view's definition from its table properties (kept as JSON, its queries read again)."""
    properties = table.properties
    return _definition(
        properties[rel.DEFINITION],
        properties.get(rel.BACKFILL) == "true",
        properties.get(rel.HELPER) == "true",
    )


@functools.lru_cache(maxsize=512)
def _definition(text: str, backfill: bool, helper: bool) -> ViewDFDefinition:
    """A definition read from its JSON (kept: definitions are immutable and read every pass)."""
    definition = ViewDFDefinition.from_json(text)
    return normalized(dataclasses.replace(definition, backfill=backfill, helper=helper))
