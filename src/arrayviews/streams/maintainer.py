"""Keeping ViewDF views fresh (paper 004, sections 4.1 and 4.3): build every part whose inputs
exist, recompute the parts that late rows changed and everything downstream of them, drop helper
parts no future update can read, and rebuild from the base streams when rows arrive later than that.

One maintenance step of one view is one snapshot of its table: the parts built or recomputed,
the parts dropped, and the view's state (first and next part, parts held, source versions seen).
A crash anywhere before that commit leaves the view as it was, and the next step redoes the work.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from arrayviews.model.errors import ArrayViewsError
from arrayviews.model.faults import checkpoint
from arrayviews.model.viewdf import ViewDFDefinition
from arrayviews.streams import planning
from arrayviews.streams.evaluation import drop_temporary_views, run_part_query
from arrayviews.streams.relations import Relation, ViewState, consumers_of

PART = "_part"


class MaintenanceError(ArrayViewsError):
    """A view could not be maintained (its query failed, or a part it needs is gone)."""


@dataclass(frozen=True)
class MaintenanceResult:
    """What one maintenance step of one view did."""

    view: str
    version: int
    built: list[int] = field(default_factory=list)
    recomputed: list[int] = field(default_factory=list)
    dropped_below: int | None = None
    rebuilt: bool = False
    seconds: float = 0.0


class _Round:
    """The parts of one view staged during one maintenance step, readable by later parts of it."""

    def __init__(self, spark: SparkSession, view, state: ViewState | None, world) -> None:
        self.spark = spark
        self.view = view
        self.state = state
        self.world = world
        self.staged: dict[int, list] = {}
        self.registered: list[str] = []
        self.committed = view.table.files_by_part() if state is not None else {}

    def resolve(self, relation: str, low: int, high: int) -> DataFrame:
        if relation == self.view.name:
            return self._own(low, high)
        return self.world.read_parts(relation, low, high)

    def _own(self, low: int, high: int) -> DataFrame:
        retained = self.state.retained if self.state is not None else None
        uris = []
        for part in range(low, high + 1):
            if part in self.staged:
                uris.extend(s.uri for s in self.staged[part])
            elif part in self.committed:
                if retained is not None and part < retained:
                    raise MaintenanceError(f"view {self.view.name}: part {part} was dropped by retention")
                uris.extend(self.committed[part])
        return self.view.table.read_files(self.spark, uris)

    def build(self, part: int, initialize: bool) -> None:
        definition = self.view.definition
        query = definition.initialize if initialize else definition.update
        frame = run_part_query(self.spark, query, part, self.resolve, self.registered)
        frame = self.view.conform_columns(frame, part)
        self.staged[part] = self.view.table.stage(
            frame.withColumn(PART, F.lit(part).cast("long")), single_part=True
        )

    def all_staged(self) -> list:
        return [s for files in self.staged.values() for s in files]


def maintain_view(spark: SparkSession, world, name: str) -> MaintenanceResult | None:
    """One maintenance step of view ``name``; None when there was nothing to do."""
    started = time.perf_counter()
    view = world.view(name)
    definition: ViewDFDefinition = view.definition
    table = view.table
    expected = table.current_version()
    state = view.state()
    sources: dict[str, Relation] = {r: world.relation(r) for r in definition.sources()}
    newest = {r: s.newest for r, s in sources.items()}
    oldest = {r: s.oldest for r, s in sources.items()}
    own = definition.name
    recompute: set[int] = set()
    rebuilt = False
    hold_from = None  # after a rebuild: the lowest part held again
    if state is None:
        if definition.backfill:
            first = planning.oldest_buildable(definition.initialize, oldest, own)
        else:
            first = planning.newest_buildable(definition.initialize, newest, own)
        ready = planning.newest_buildable(definition.initialize, newest, own)
        if first is None or ready is None or first > ready:
            return None
        next_part = first
        start = first
    else:
        first, next_part = state.first, state.next
        for relation, source in sources.items():
            seen = state.seen.get(relation, 0)
            if source.version > seen:
                changed = world.table(relation).changes_since(seen)
                recompute |= planning.affected_parts(definition, relation, changed, first, next_part)
        if definition.backfill:  # rows older than the first part: start again from the new oldest part
            earliest = planning.oldest_buildable(definition.initialize, oldest, own)
            if earliest is not None and earliest < first:
                first, recompute, rebuilt, hold_from = (
                    earliest,
                    set(range(earliest, next_part)),
                    True,
                    earliest,
                )
        if recompute and not rebuilt:
            recompute, rebuilt, hold_from = _widen(definition, world, state, recompute, next_part)
        start = next_part
    last = planning.newest_buildable(definition.update, newest, own)
    new_parts = list(range(start + (1 if state is None else 0), (last if last is not None else -1) + 1))
    if state is None:
        new_parts = [first, *new_parts]
    if not recompute and not new_parts:
        return None
    round_ = _Round(spark, view, state, world)
    try:
        for part in sorted(recompute) + new_parts:
            round_.build(part, initialize=(part == first))
        checkpoint("viewdf.staged")
        new_next = max([next_part, *[p + 1 for p in new_parts]])
        retained = first if state is None else state.retained
        dropped_below = None
        keep_from = _keep_from(world, definition, view, new_next, recompute)
        if keep_from is not None and keep_from > retained:
            dropped_below = keep_from
            retained = keep_from
        if rebuilt:  # parts recomputed below those held are held again; drop nothing this time
            dropped_below, retained = None, hold_from
        unkept = [s for p, files in round_.staged.items() if p < retained for s in files]
        kept = [s for p, files in round_.staged.items() if p >= retained for s in files]
        new_state = ViewState(first, new_next, retained, {r: s.version for r, s in sources.items()})
        checkpoint("viewdf.before-commit")
        version = table.commit(
            kept,
            replace_parts=[p for p in sorted(recompute) + new_parts if p >= retained],
            drop_below=dropped_below,
            operation="maintain",
            properties=new_state.properties(),
            expected_version=expected,
        )
        table.discard(unkept)
    except BaseException:
        table.discard(round_.all_staged())
        raise
    finally:
        drop_temporary_views(spark, round_.registered)
    return MaintenanceResult(
        name,
        version,
        built=new_parts,
        recomputed=sorted(recompute),
        dropped_below=dropped_below,
        rebuilt=rebuilt,
        seconds=time.perf_counter() - started,
    )


def _consumer_span(world, definition: ViewDFDefinition) -> int:
    """How many parts below a part p of the view a consumer may read while building a part that
    reads p (references of one query taken together: ``H[j]`` with ``H[j-3]`` spans 3)."""
    span = 0
    for consumer in consumers_of(definition.name, world.definitions()):
        for query in (consumer.initialize, consumer.update):
            references = [r for r in query.references if r.relation == definition.name]
            if references:  # a consumer part reading p through one reference reads the lowest of all
                highest = max(r.high.offset for r in references)
                lowest = min(r.low.offset for r in references)
                span = max(span, highest - lowest)
    return span


def _widen(
    definition: ViewDFDefinition, world, state: ViewState, recompute: set[int], next_part: int
) -> tuple[set[int], bool, int | None]:
    """The parts to recompute after late rows, whether that is a rebuild, and (for a rebuild) the
    lowest part to hold again. With a self-reference every later part follows. Parts below those
    held (dropped by retention) that the view itself or its consumers will read are recomputed
    too: from the first part when the view reads itself, else just those parts."""
    low = min(recompute)
    reach = planning.self_reach(definition)
    needed = max(state.first, low - max(reach, _consumer_span(world, definition)))
    if reach:
        recompute = set(range(low, next_part))
        if needed < state.retained:
            return set(range(state.first, next_part)), True, needed
        return recompute, False, None
    if needed < state.retained:  # every dropped part from ``needed`` up is read again
        return recompute | set(range(needed, state.retained)), True, needed
    return recompute, False, None


def _keep_from(world, definition: ViewDFDefinition, view, new_next: int, recompute: set[int]) -> int | None:
    """The lowest part of a helper view that must stay: the lowest part its own next UPDATE or any
    consumer's next UPDATE reads, and every part a late row up to ``lateness_parts`` parts behind
    the newest part would make anyone read. None for views whose parts are all kept."""
    if not definition.helper:
        return None
    span = max(planning.self_reach(definition), _consumer_span(world, definition))
    keep = new_next - 1 - view.lateness_parts - span
    for consumer in consumers_of(definition.name, world.definitions()):
        consumer_state = world.view(consumer.name).state()
        if consumer_state is None:  # not built yet: it may start from our first part
            return None
        low = planning.lowest_part_read(consumer, definition.name, consumer_state.next)
        if low is not None:
            keep = min(keep, low)
    if recompute:  # consumers will recompute their parts that read the recomputed ones
        keep = min(keep, min(recompute) - span)
    return keep


def maintain_all(spark: SparkSession, world) -> list[MaintenanceResult]:
    """Maintain every view, sources before the views that read them."""
    results = []
    for name in world.view_order():
        result = maintain_view(spark, world, name)
        if result is not None:
            results.append(result)
            world.forget(name)
    return results
