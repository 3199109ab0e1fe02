"""Creating, reading and dropping ViewDF views: checks of a definition against the relations it
reads, the view's table, and reads with the PART_TIMESTAMP column (paper 004, section 4.2)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.utils import AnalysisException

from arrayviews.execution.failures import translating
from arrayviews.execution.part_jobs import SparkPartTable
from arrayviews.execution.session import ensure_started
from arrayviews.model import bounds
from arrayviews.model.display import as_html, as_text, described
from arrayviews.model.errors import AlreadyExistsError, ParseError, ValidationError
from arrayviews.model.names import HELPER_SUFFIX, check_identifier
from arrayviews.model.viewdf import PartIndex, PartQuery, ViewDFDefinition
from arrayviews.storage.creation import drop_table_as_checked
from arrayviews.storage.expiry import cutoffs
from arrayviews.streams import relations as rel
from arrayviews.streams.bounded_history import KEEP_VERSIONS
from arrayviews.streams.columns import check_update_columns
from arrayviews.streams.evaluation import drop_temporary_views, run_part_query
from arrayviews.streams.history import maintenance_history
from arrayviews.streams.maintainer import MaintenanceResult, maintain_all
from arrayviews.streams.query_reads import check_reads
from arrayviews.streams.relations import DEFAULT_MAX_GAP_PARTS, MAX_GAP_PROPERTY
from arrayviews.streams.world import StreamWorld, normalized


def _reference_error(definition: ViewDFDefinition, reference, message: str) -> ParseError:
    return ParseError(
        f"view {definition.name}: {message}",
        text=definition.text,
        line=reference.line or None,
        column=reference.column or None,
    )


def check_references(definition: ViewDFDefinition, lengths: dict[str, int]) -> None:
    """Every reference names a known relation whose partition length divides the view's, no
    reference reads a part that begins after the view's part ends (a reference to the future), and
    both ends of every reference grow with the view's part at the ratio of the two partition
    lengths (so that part ``i`` of an hourly view reads minutes of hour ``i``)."""
    length = definition.partition_length
    for query in (definition.initialize, definition.update):
        for reference in query.references:
            if reference.relation == definition.name:
                continue
            if reference.relation not in lengths:
                known = ", ".join(sorted(lengths)) or "none"
                raise _reference_error(
                    definition, reference, f"no stream or view named {reference.relation} (known: {known})"
                )
            source_length = lengths[reference.relation]
            if length % source_length:
                raise _reference_error(
                    definition,
                    reference,
                    f"partition length {length} s is not a multiple of the partition length "
                    f"{source_length} s of {reference.relation}",
                )
            ratio = length // source_length
            high = reference.high
            # part p of the view ends where part (p + 1) * ratio of the source begins
            if high.scale > ratio or (high.scale == ratio and high.offset > ratio - 1):
                raise _reference_error(
                    definition,
                    reference,
                    f"{reference.text(query.variable)} refers to the future: for part {query.variable} "
                    f"it reads parts of {reference.relation} that begin after part {query.variable} "
                    f"of {definition.name} ends ({ratio} part(s) of {reference.relation} per part)",
                )
            # part p of the view spans parts p*ratio .. p*ratio+ratio-1 of the source: a reference
            # whose ends grow at another rate drifts away from the view's part (``M[i]`` in an
            # hourly view over a minute stream reads minute i, not a minute of hour i)
            for end, index in (("first", reference.low), ("last", reference.high)):
                if index.scale != ratio:
                    variable = query.variable
                    raise _reference_error(
                        definition,
                        reference,
                        f"{reference.text(variable)} reads parts of {reference.relation} at scale "
                        f"{index.scale} ({end} part {index.text(variable)}), but each part of "
                        f"{definition.name} spans {ratio} part(s) of {reference.relation}: write each "
                        f"end as {variable}*{ratio}+k, e.g. {reference.relation}"
                        f"[{PartIndex(ratio, 0).text(variable)} .. {PartIndex(ratio, ratio - 1).text(variable)}]",
                    )


def check_lead(definition: ViewDFDefinition, lengths: dict[str, int], limits: dict[str, int]) -> None:
    """Refuse a view that would run more parts ahead of its sources than their gap limit allows.

    A part is built once every part its references name exists, so ``M[j-k]`` alone lets the view
    build ``k`` parts past M's newest, all in its first maintenance pass: ``M[j-100000000]`` would
    build a hundred million parts (a hang, as a batch far ahead would be without the gap limit).
    ``limits`` maps each stream to its ``max_gap_parts`` (views: the default). Part offsets past
    any part number are refused too (they overflowed Python ranges)."""
    leads = []
    for query in (definition.initialize, definition.update):
        for reference in query.references:
            for index in (reference.low, reference.high):
                if abs(index.offset) > bounds.MAX_SECONDS:
                    raise _reference_error(
                        definition,
                        reference,
                        f"{reference.text(query.variable)}: the part offset {index.offset} is past "
                        f"every part number (at most {bounds.MAX_SECONDS} either way)",
                    )
            if reference.relation == definition.name or query is definition.initialize:
                continue
            ratio = definition.partition_length // lengths[reference.relation]
            # part p is built once part p*ratio + offset of the source exists: it runs this many
            # of its own parts past the source's newest part
            lead = (ratio - 1 - reference.high.offset) // ratio
            leads.append((lead, reference, ratio, query.variable))
    if not leads:
        return
    lead, reference, ratio, variable = min(leads, key=lambda item: item[0])
    limit = limits.get(reference.relation, DEFAULT_MAX_GAP_PARTS) // ratio
    if lead > limit:
        raise _reference_error(
            definition,
            reference,
            f"{reference.text(variable)} lets {definition.name} build {lead} parts past the newest part "
            f"of {reference.relation}, all in its first maintenance, more than the limit of {limit} "
            f"(the gap limit of {reference.relation}, max_gap_parts); read a part closer to "
            f"{variable}, or raise the stream's limit",
        )


def _gap_limits(world: StreamWorld, definition: ViewDFDefinition) -> dict[str, int]:
    """The gap limit (``max_gap_parts``) of each stream the definition reads."""
    limits = {}
    for name in definition.sources():
        if world.kinds.get(name) == rel.STREAM_KIND:
            properties = world.table(name).table_properties
            limits[name] = int(properties.get(MAX_GAP_PROPERTY, DEFAULT_MAX_GAP_PARTS))
    return limits


def _output_schema(
    spark: SparkSession, world: StreamWorld, definition: ViewDFDefinition, query: PartQuery, own
):
    """The result schema of ``query`` over empty inputs (Spark analyses it; no job runs)."""

    def empty(relation: str, low: int, high: int) -> DataFrame:
        schema = own if relation == definition.name else world.read_schema(relation)
        return spark.createDataFrame([], schema)

    registered: list[str] = []
    try:
        return run_part_query(spark, query, 0, empty, registered).schema
    except AnalysisException as error:
        which = "INITIALIZE" if query is definition.initialize else "UPDATE"
        raise ValidationError(
            f"view {definition.name}: the {which} query is not valid Spark SQL: {error}"
        ) from None
    finally:
        drop_temporary_views(spark, registered)


def _check_view_name(definition: ViewDFDefinition) -> None:
    """A view's name is a legal user name; a helper's is one followed by the helper suffix."""
    name = definition.name
    if definition.helper and isinstance(name, str) and name.endswith(HELPER_SUFFIX):
        name = name[: -len(HELPER_SUFFIX)]
    check_identifier(name, "helper view" if definition.helper else "view", ValidationError)


def check_lateness(view: str, parts: object) -> int:
    """A lateness allowance: a number of parts from 0 to INT64_MAX, else a ValidationError naming the view."""
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 0:
        raise ValidationError(
            f"view {view}: the lateness allowance is a number of parts >= 0, got {parts!r}",
            array=view,
            value=parts,
        )
    return bounds.at_most(parts, bounds.INT64_MAX, "the lateness allowance", f"view {view}")


def create_views(
    spark: SparkSession,
    catalog,
    definitions: list[ViewDFDefinition],
    lateness_parts: int | None = None,
    execution: str = "auto",
    costs=None,
    window_plan: str | None = None,
    allow_unsafe: bool = False,
) -> list[MaintenanceResult]:
    """Create the views (helpers first), build their parts, and return what maintenance did. On any
    error every view created by this call is dropped again. ``execution``/``costs``: where parts are
    built (see streams/maintainer.py); ``window_plan``: kept with the last (final) view;
    ``allow_unsafe``: the queries may read paths and call Java methods (``allow_unsafe_sql``)."""
    for definition in definitions:  # before anything is created
        bounds.at_most(
            definition.partition_length,
            bounds.MAX_SECONDS,
            "the partition length in seconds",
            f"view {definition.name}",
        )
    if lateness_parts is not None:
        check_lateness(definitions[-1].name, lateness_parts)
    created: list[str] = []
    try:
        for index, definition in enumerate(definitions):
            world = StreamWorld(spark, catalog)
            _check_view_name(definition)
            spelled = definition.name  # listed as the user wrote it; looked up in lower case
            definition = normalized(definition)
            if definition.name in world.kinds:
                if _left_by_a_crash(world, definition):
                    continue  # a helper of this same statement, created by a run that died: reuse it
                raise AlreadyExistsError(f"a stream or view named {definition.name} already exists")
            lengths = {name: world.table(name).partition_length for name in world.kinds}
            check_references(definition, lengths)
            check_lead(definition, lengths, _gap_limits(world, definition))
            check_reads(definition, set(world.kinds), allow_unsafe)
            schema = _output_schema(spark, world, definition, definition.initialize, None)
            update_schema = _output_schema(spark, world, definition, definition.update, schema)
            check_update_columns(definition, schema, update_schema)
            properties = {
                rel.DEFINITION: definition.to_json(),
                rel.BACKFILL: "true" if definition.backfill else "false",
                rel.HELPER: "true" if definition.helper else "false",
            }
            if lateness_parts is not None:
                properties[rel.LATENESS] = str(int(lateness_parts))
            if window_plan is not None and index == len(definitions) - 1:
                properties[rel.WINDOW_PLAN] = window_plan
            SparkPartTable.create(
                catalog,
                rel.NAMESPACE,
                spelled,
                schema,
                definition.partition_length,
                rel.VIEW_KIND,
                properties,
            )
            created.append(definition.name)
        return maintain_all(
            spark,
            StreamWorld(spark, catalog, execution, costs),
            raise_for=frozenset(n.lower() for n in created),
        )
    except BaseException:
        for name in reversed(created):
            with contextlib.suppress(Exception):
                SparkPartTable.open(catalog, rel.NAMESPACE, name).drop()
        raise


def _left_by_a_crash(world: StreamWorld, definition: ViewDFDefinition) -> bool:
    """Whether an existing view named like ``definition`` is a helper with the very same definition
    that no view reads: the statement creating it and its final view died before the final view
    was created, and running the statement again adopts it."""
    if not definition.helper or world.kinds.get(definition.name) != rel.VIEW_KIND:
        return False
    existing = world.view(definition.name)
    readers = [d for d in world.definitions().values() if definition.name in d.sources()]
    return existing.definition.helper and existing.definition.text == definition.text and not readers


def drop_view(
    spark: SparkSession, catalog, name: str, identity: str | None = None, refuse=None
) -> list[str]:
    """Drop a view and the helper views only it reads; refused while another view reads it. With
    ``identity``, only the view the caller checked (one dropped and created again by another process
    meanwhile is not dropped); ``refuse``: the check that no view reads it, run again as the drop
    commits (``drop_table_as_checked``)."""
    world = StreamWorld(spark, catalog)
    view = world.view(name)
    definitions = world.definitions()
    readers = sorted(world.view(d.name).table.name for d in definitions.values() if view.name in d.sources())
    if readers:
        raise ValidationError(f"view {name} is read by view(s) {', '.join(readers)}; drop those first")
    dropped = [view.table.name]  # as the view was named when created
    table = view.table
    drop_table_as_checked(
        catalog, table.table.name(), identity or table.identity, f"stream view {name}", refuse
    )
    for source in sorted(view.definition.sources()):
        if source in definitions and definitions[source].helper:
            others = [d for d in definitions.values() if d.name != view.name and source in d.sources()]
            if not others:
                dropped += drop_view(spark, catalog, source)
    return dropped


@translating
class StreamView:
    """A ViewDF view as users see it: its parts, read with Spark, and its maintenance status."""

    def __init__(self, spark: SparkSession, catalog, name: str) -> None:
        self.spark = ensure_started(spark)
        self.catalog = catalog
        world = StreamWorld(spark, catalog)
        self._handle = world.view(name)
        self.name = self._handle.table.name  # as created (looked up in any case)

    def __repr__(self) -> str:
        return as_text(f"stream view {self.name}", described(self._summary_rows))

    def _repr_html_(self) -> str:
        return as_html(f"stream view {self.name}", described(self._summary_rows))

    def _summary_rows(self) -> list[tuple[str, str]]:
        status = self.status()
        held = self.parts()
        span = (
            f"every {self.partition_length} s; held {held.start}..{held.stop - 1}"
            if len(held)
            else "none built yet"
        )
        fresh = "sources changed: maintain_streams() brings it up to date" if self.pending() else "up to date"
        rows = [
            ("version", str(status["version"])),
            ("parts", span),
            ("lateness", f"{self.lateness_parts} part(s)"),
            ("freshness", fresh),
        ]
        if status.get("plan"):  # a sliding-window view: its plan and why
            rows.append(("plan", f"{status['plan']['plan']} ({status['plan']['reason']})"))
        if status.get("failed"):
            rows.append(("failed", str(status["failed"]).splitlines()[0]))
        return rows

    @property
    def definition(self) -> str:
        return self._handle.definition.text

    @property
    def partition_length(self) -> int:
        return self._handle.definition.partition_length

    def state(self) -> rel.ViewState | None:
        self._handle.table.refresh()
        return self._handle.state()

    def parts(self) -> range:
        """Parts held: from the oldest retained to the newest built."""
        return self._handle.held_parts()

    def read(self, part: int | None = None) -> DataFrame:
        """The view's rows (every held part, or one part) with PART_TIMESTAMP, the start of the part."""
        return self._handle.read_held(self.spark, part)

    def compact(self) -> int | None:
        """Merge each part's small files into one (rows and state unchanged); the new version, or
        None if there was nothing to merge."""
        return self._handle.table.compact(self.spark)

    def expire_versions(
        self,
        older_than: dt.datetime | dt.timedelta | None = None,
        *,
        orphans_older_than: dt.timedelta = dt.timedelta(hours=1),
    ):
        """Forget old versions of the view (default: all but the current one, and never those a
        view reading this one has not seen yet) and delete the files only they needed."""
        keep_after = StreamWorld(self.spark, self.catalog).oldest_seen(self.name)
        return self._handle.table.expire(*cutoffs(older_than, orphans_older_than), keep_after=keep_after)

    def to_pandas(self, part: int | None = None) -> pd.DataFrame:
        return self.read(part).toPandas()

    def last_updated(self) -> pd.DataFrame:
        """Per held part, when it was last written (late rows rewrite old parts)."""
        held = self.parts()
        updated = self._handle.table.part_updated()
        rows = [(p, updated.get(p)) for p in held if p in updated]
        return pd.DataFrame(rows, columns=["part", "updated"])

    def maintenance_history(self) -> pd.DataFrame:
        """One row per version still held: the parts it wrote, where they were built and why, the
        cost model's estimate and predicted seconds, and the measured seconds (per part and for the
        step up to its commit); ``parts`` holds the per-part detail."""
        return maintenance_history(self._handle.table.refresh())

    def pending(self) -> bool:
        """Whether a source changed since the view was last maintained (its built parts do not reflect
        the sources' current versions)."""
        state = self.state()
        world = StreamWorld(self.spark, self.catalog)
        for source in self._handle.definition.sources():
            current = world.table(source).current_version()
            if state is None or state.seen.get(source) != current:
                return True
        return False

    @property
    def lateness_parts(self) -> int:
        """How many parts rows may arrive late before the view's helpers are rebuilt."""
        return self._handle.lateness_parts

    def set_lateness(self, parts: int) -> None:
        """Change the lateness allowance (in parts; see :attr:`lateness_parts`)."""
        check_lateness(self.name, parts)
        self._handle.table.set_properties(**{rel.LATENESS: str(parts)})

    def set_keep_versions(self, versions: int) -> None:
        """Change how many of its newest versions the view keeps (100 by default): older ones are
        expired after a maintenance pass once it holds half as many again (``streams.bounded_history``)."""
        if isinstance(versions, bool) or not isinstance(versions, int) or versions < 1:
            raise ValidationError(
                f"view {self.name}: the versions kept are a number >= 1, got {versions!r}",
                array=self.name,
                value=versions,
            )
        bounds.at_most(versions, bounds.INT64_MAX, "the number of versions kept", f"view {self.name}")
        self._handle.table.set_properties(**{KEEP_VERSIONS: str(versions)})

    def bases(self) -> list[tuple[str, int, int]]:
        """(source, version the view reflects, its current version) for each relation the view reads
        (``SHOW STATUS OF V``); the reflected version is 0 before the view built anything."""
        state = self.state()
        world = StreamWorld(self.spark, self.catalog)
        return [
            (
                world.spelled(source),
                0 if state is None else state.seen.get(source, 0),
                world.table(source).current_version(),
            )
            for source in sorted(self._handle.definition.sources())
        ]

    def _spelled_keys(self, seen: dict[str, int]) -> dict[str, int]:
        """``seen`` (relation keys, lower case) keyed by the relations' names as created."""
        world = StreamWorld(self.spark, self.catalog)
        return {world.spelled(relation): version for relation, version in seen.items()}

    def status(self) -> dict[str, object]:
        state = self.state()
        return {
            "view": self.name,
            "version": self._handle.table.current_version(),
            "first": None if state is None else state.first,
            "next": None if state is None else state.next,
            "retained": None if state is None else state.retained,
            "seen": {} if state is None else self._spelled_keys(state.seen),
            "failed": self._handle.failure(),
            # a sliding-window view's plan and why (streams/windows.py); None for other views
            "plan": json.loads(self._handle.table.properties.get(rel.WINDOW_PLAN, "null")),
        }
