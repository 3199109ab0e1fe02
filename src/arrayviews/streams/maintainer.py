"""Keeping ViewDF views fresh (paper 004, sections 4.1 and 4.3): build every part whose inputs
exist, recompute the parts that late rows changed and everything downstream of them, drop helper
parts no future update can read, and rebuild from the base streams when rows arrive later than that.

One maintenance step of one view is one snapshot of its table: the parts built or recomputed,
the parts dropped, and the view's state (first and next part, parts held, source versions seen).
A crash anywhere before that commit leaves the view as it was, and the next step redoes the work.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
from dataclasses import dataclass, field

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from arrayviews.execution.cost import Choice, Estimate, StreamStepCost, choose
from arrayviews.execution.failures import file_gone
from arrayviews.execution.local_sql import CannotRunLocally, RaisedByQuery
from arrayviews.model.errors import ArrayViewsError, CatalogBusyError, NotFoundError
from arrayviews.model.faults import InjectedFault, checkpoint
from arrayviews.model.names import PART
from arrayviews.model.viewdf import OVERFLOW_MARK, ViewDFDefinition
from arrayviews.storage.snapshots import BaseMovedError, may_have_committed
from arrayviews.streams import fusion as fusion_module
from arrayviews.streams import history, planning
from arrayviews.streams.bounded_history import bound_histories
from arrayviews.streams.evaluation import drop_temporary_views, run_part_query
from arrayviews.streams.fusion import Fusion, fusion_for
from arrayviews.streams.local_step import Input, build_part, build_window_part
from arrayviews.streams.part_files import PartFile, part_files
from arrayviews.streams.plan_settling import settle_window_plans
from arrayviews.streams.presentation import presented_frame
from arrayviews.streams.relations import Relation, ViewState, consumers_of

#: What a step's report says of a part built together with the helper's (streams/fusion.py).
#: How a step's report names a part built by the window kernel (kernels/window_steps.py).
WINDOW_KERNEL = "window kernel"

FUSED_REASONS = {
    "spark": "built in one Spark job with the helper it reads",
    "local": "built in-process while the helper it reads committed",
}

logger = logging.getLogger(__name__)


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
    #: Why the view was not maintained: its own error (it is now marked failed) or a failed source.
    error: str | None = None
    #: Parts written again after a rebuild whose content did not change (consumers need not follow).
    restored: list[int] = field(default_factory=list)
    #: Where the step's parts were built: "local" (in this process), "spark" or "local+spark".
    executor: str | None = None
    #: Why: the cost model's choice (sizes from metadata, predicted seconds) or why a query could
    #: not run in-process.
    executor_reason: str | None = None


class _Round:
    """The parts of one view staged during one maintenance step, readable by later parts of it.

    Each part is built where the cost model says (``world.execution``, ``world.costs``), from the
    sizes of the files it reads (manifest metadata): in this process (streams/local_step.py) or on
    Spark; a query that cannot run in-process with Spark's meaning runs on Spark, and the step's
    result says which executor built its parts and why."""

    def __init__(
        self, spark: SparkSession, view, state: ViewState | None, world, fusion: Fusion | None = None
    ) -> None:
        self.spark = spark
        self.fusion = fusion
        self.view = view
        self.state = state
        self.world = world
        self.staged: dict[int, list] = {}
        self.registered: list[str] = []
        #: executor -> (parts built there, the reason given for the last of them)
        self.executors: dict[str, tuple[int, str]] = {}
        #: per part built: where, the estimate, the predicted and the measured seconds, the rows read
        #: and written (the report)
        self.reports: list[dict] = []
        self._rows_read: int | None = None

    def files(self, relation: str, low: int, high: int) -> list[PartFile]:
        if relation != self.view.name:
            return self.world.files_of(relation, low, high)
        retained = self.state.retained if self.state is not None else None
        committed: dict[int, list[PartFile]] = {}
        if self.state is not None and any(p not in self.staged for p in range(low, high + 1)):
            for found_file in part_files(self.view.table, low, high):  # manifest-pruned to the range
                committed.setdefault(found_file.part, []).append(found_file)
        found = []
        for part in range(low, high + 1):
            if part in self.staged:
                found.extend(PartFile(s.uri, s.part, s.rows, s.nbytes) for s in self.staged[part])
            elif part in committed:
                if retained is not None and part < retained:
                    raise MaintenanceError(f"view {self.view.spelled}: part {part} was dropped by retention")
                found.extend(committed[part])
        return found

    def _record(self, executor: str, reason: str) -> None:
        count, _ = self.executors.get(executor, (0, ""))
        self.executors[executor] = (count + 1, reason)

    def report(self) -> tuple[str | None, str | None]:
        """Which executor built the step's parts ("local", "spark" or "local+spark"), and why."""
        if not self.executors:
            return None, None
        executor = "+".join(sorted(self.executors))
        reasons = "; ".join(
            f"{name} ({count} part(s)): {why}" for name, (count, why) in sorted(self.executors.items())
        )
        return executor, reasons

    def build(self, part: int, initialize: bool) -> None:
        started = time.perf_counter()
        self._rows_read = None
        choice, executor = self._build(part, initialize)
        seconds = time.perf_counter() - started
        report = {
            "part": part,
            "executor": executor,
            "cells": choice.estimate.cells,
            "bytes": choice.estimate.bytes,
            "predicted_seconds": round(choice.predicted[executor], 6),
            "seconds": round(seconds, 6),
            "rows_written": sum(s.rows for s in self.staged.get(part, ())),
        }
        if self._rows_read is not None:  # the rows of the files read, each file once
            report["rows_read"] = self._rows_read
        self.reports.append(report)

    def _build(self, part: int, initialize: bool) -> tuple[Choice, str]:
        """Build one part where the cost model says; returns the choice (estimate and predictions)
        and the executor that built it."""
        definition = self.view.definition
        query = definition.initialize if initialize else definition.update
        fused = self.fusion.take(self.view.name, part) if self.fusion is not None else None
        if fused is not None:  # staged with the new part of the helper this view reads (streams/fusion.py)
            self.staged[part], estimate, executor, local_seconds = fused
            self._record(executor, FUSED_REASONS[executor])
            choice = choose(self.world.costs, estimate, self.world.execution, local_seconds=local_seconds)
            return choice, executor
        inputs = []
        for reference in query.references:
            relation = reference.relation
            files = self.files(relation, reference.low.at(part), reference.high.at(part))
            table = self.view.table if relation == self.view.name else self.world.table(relation)
            table.hold_recent(part - reference.low.at(part))  # read again that many parts later
            inputs.append((relation, table, files))
        self._rows_read = sum({f.uri: f.rows for _, _, files in inputs for f in files}.values())
        estimate = Estimate(
            cells=sum(f.rows * (len(t.arrow_schema) - 1) for _, t, files in inputs for f in files),
            bytes=sum(f.nbytes for _, _, files in inputs for f in files),
            chunks=sum(len(files) for _, _, files in inputs),
            jobs=2,
        )
        step = definition.window_step if not initialize else None
        # priced in process by the build terms of the window kernel or of a query's SQL, fitted to
        # such builds (not by the engines' per-cell cost, fitted to array operators)
        local_seconds = _part_seconds(
            self.world.costs.stream_step, self._rows_read, inputs, self.view.name, step is not None
        )
        choice = choose(self.world.costs, estimate, self.world.execution, local_seconds=local_seconds)
        reason = choice.reason
        if choice.executor == "local":
            sources = [
                Input(table, tuple(f.uri for f in files), keep_part=True)
                if relation == self.view.name
                else Input(table, tuple(f.uri for f in files), presentation=self.world.presentation(relation))
                for relation, table, files in inputs
            ]
            staged = (
                build_window_part(query, step, part, sources, self.view.table, self.view.name)
                if step is not None
                else None
            )
            try:
                if staged is not None:
                    self.staged[part] = staged
                    self._record("local", f"{WINDOW_KERNEL}; {reason}")
                else:
                    self.staged[part] = build_part(query, part, sources, self.view.table, self.view.name)
                    self._record("local", reason)
                if (
                    self.fusion is not None
                    and fusion_module.FUSE_IN_PROCESS
                    and self.fusion.wants(self.view.name, part, self.state, initialize)
                ):
                    self.fusion.start_local(part, self.staged[part])
                return choice, "local"
            except CannotRunLocally as refused:
                reason = f"not in-process ({refused}); {reason}"
            except RaisedByQuery as raised:
                raise MaintenanceError(self._raised(str(raised), part)) from None
        frames = iter([self._frame(found) for found in inputs])  # in reference order, as resolved
        frame = run_part_query(self.spark, query, part, lambda *_: next(frames), self.registered)
        frame = self.view.conform_columns(frame, part)
        if self.fusion is not None and self.fusion.wants(self.view.name, part, self.state, initialize):
            staged = self.fusion.stage(frame, part, choice.estimate)
            if staged is not None:
                self.staged[part] = staged
                self._record("spark", reason)
                return choice, "spark"
        try:
            self.staged[part] = self.view.table.stage(
                frame.withColumn(PART, F.lit(part).cast("long")),
                single_part=True,
                input_bytes=choice.estimate.bytes,
            )
        except PySparkException as error:
            raised = _raised_by_query(error)
            if raised is not None:
                raise MaintenanceError(self._raised(raised, part)) from None
            data = _data_error(error)
            if data is None:
                raise
            start = dt.datetime.fromtimestamp(part * self.view.definition.partition_length, dt.UTC)
            raise MaintenanceError(
                f"view {self.view.spelled}, part {part} (from {start:%Y-%m-%d %H:%M:%S}): {data}"
            ) from None
        self._record("spark", reason)
        return choice, "spark"

    def _frame(self, found: tuple) -> DataFrame:
        relation, table, files = found
        frame = table.read_files(self.spark, [f.uri for f in files])
        if relation == self.view.name:
            return frame
        return presented_frame(frame, self.world.presentation(relation)).drop(PART)

    def _raised(self, raised: str, part: int) -> str:
        """The error of a query's ``raise_error(...)``: its own text for the view's marked messages."""
        own = raised.removeprefix(OVERFLOW_MARK) if raised.startswith(OVERFLOW_MARK) else None
        return own or f"view {self.view.spelled}, part {part}: {raised}"

    def all_staged(self) -> list:
        return [s for files in self.staged.values() for s in files]


def _part_seconds(cost: StreamStepCost, rows: int, inputs: list, view: str, kernel: bool) -> float:
    """The predicted seconds of building a part of ``view`` in this process from ``inputs``
    ((relation, table, files) per part reference), by the build terms that ``db.calibrate()`` fits
    to such builds, the window kernel's (``kernel``) or a query's SQL: the ``rows`` of the files it
    reads (each file once) and the rows it writes (as many as the earlier parts of the view it reads
    hold, on average; none counted when it reads none). The engines' per-cell cost, fitted to
    array operators, priced these parts at 8-14 times their measured time and sent parts of 2.5M
    rows to Spark, which built them 3.6-5 times slower (docs/streams.md)."""
    own = [sum(f.rows for f in files) for relation, _, files in inputs if relation == view and files]
    return cost.part_build_seconds(rows, own, kernel)


def _raised_by_query(error: PySparkException) -> str | None:
    """The message of a ``raise_error(...)`` in a view's query (a pattern view's sum overflow, say),
    or None for any other Spark error."""
    if error.getCondition() != "USER_RAISED_EXCEPTION":
        return None
    return (error.getMessageParameters() or {}).get("errorMessage") or str(error)


def _data_error(error: PySparkException) -> str | None:
    """Spark's message of an error in the data a view's query computed (SQLSTATE class 22: a
    division by zero, an overflow, a value no CAST reads), without the query context Spark appends
    (it quotes the query over internal temporary view names); None for any other error."""
    state = error.getSqlState() or ""
    if not state.startswith("22"):
        return None
    return str(error).split("\n== SQL", 1)[0].strip() or None


def maintain_view(
    spark: SparkSession, world, name: str, fusion: Fusion | None = None
) -> MaintenanceResult | None:
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
    changed_from = None  # parts below this one are recomputed only to be held again (unchanged)
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
            changed_from = min(recompute)
            recompute, rebuilt, hold_from = _widen(definition, world, state, recompute, next_part)
        start = next_part
    last = planning.newest_buildable(definition.update, newest, own)
    new_parts = list(range(start + (1 if state is None else 0), (last if last is not None else -1) + 1))
    if state is None:
        new_parts = [first, *new_parts]
    if not recompute and not new_parts:
        return None
    plain = state is not None and not recompute and not rebuilt and len(new_parts) == 1
    round_ = _Round(spark, view, state, world, fusion if plain else None)
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
        files_below = _files_dropped_below(table, dropped_below)
        unkept = [s for p, files in round_.staged.items() if p < retained for s in files]
        kept = [s for p, files in round_.staged.items() if p >= retained for s in files]
        # A rebuild holds again parts that retention dropped; their content is what it was, so
        # they are recorded as restored, not changed: consumers recompute only the parts that read
        # changed ones, and the parts those read are all held (the rebuild kept them for that).
        restored = (
            sorted(p for p in recompute if retained <= p < changed_from)
            if rebuilt and changed_from is not None
            else []
        )
        new_state = ViewState(first, new_next, retained, {r: s.version for r, s in sources.items()})
        executor, executor_reason = round_.report()
        report = history.report_properties(
            executor, executor_reason, round_.reports, time.perf_counter() - started
        )
        checkpoint("viewdf.before-commit")
        version = table.commit(
            kept,
            replace_parts=[p for p in sorted(recompute) + new_parts if p >= retained],
            drop_below=files_below,
            operation="maintain",
            properties={**new_state.properties(), **report},
            expected_version=expected,
            restored_parts=restored,
        )
        table.discard(unkept)
        if fusion is not None and fusion.helper == name:
            fusion.helper_version = version
    except BaseException as error:
        if not may_have_committed(error):
            table.discard(round_.all_staged())
        raise
    finally:
        drop_temporary_views(spark, round_.registered)
    return MaintenanceResult(
        view.spelled,
        version,
        built=new_parts,
        recomputed=sorted(recompute),
        dropped_below=dropped_below,
        rebuilt=rebuilt,
        seconds=time.perf_counter() - started,
        restored=restored,
        executor=executor,
        executor_reason=executor_reason,
    )


#: Parts a helper view stops holding before their files are removed, all in one commit.
DROP_BATCH_PARTS = 16


def _files_dropped_below(table, retained_from: int | None) -> int | None:
    """Below which part a step's commit removes the files of a helper view, once retention moved
    its oldest held part up to ``retained_from``; None to remove none yet.

    A part below the oldest held one is no longer held the moment the view's state says so: reads,
    consumers and SQL over streams all go by the held range (``ViewState.retained``), never by the
    files there are. Its files are removed later, with those of the parts dropped after it, when
    ``DROP_BATCH_PARTS`` parts' files wait: removing a file rewrites the manifest listing it with
    the others it lists, and a sliding window's helper drops one part a step from its largest, oldest
    manifest (about 6 ms a step for a 100-part window, measured), which the batch shares out."""
    if retained_from is None:
        return None
    lowest = table.lowest_part()
    if lowest is None or lowest >= retained_from or retained_from - lowest < DROP_BATCH_PARTS:
        return None
    return retained_from


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


#: How many times one view's maintenance step is planned again after another process committed first.
MAX_ATTEMPTS = 8


def _maintain_replanned(
    spark: SparkSession, world, name: str, fusion: Fusion | None = None
) -> MaintenanceResult | None:
    """One maintenance step of ``name``; when another process committed to the view first (it
    maintains the same views after its own appends), planned again from the view's new state,
    which usually leaves nothing to do."""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            return maintain_view(spark, world, name, fusion)
        except BaseMovedError:
            if attempt == MAX_ATTEMPTS:
                raise
            world.refresh()
        except Exception as error:
            # a file the step planned to read is gone: another process compacted a relation and
            # expired the version the plan was made on (planned again on the new versions), unless
            # nothing changed meanwhile (a file lost for good: the view fails, `check` finds it)
            if attempt == MAX_ATTEMPTS or not file_gone(error):
                raise
            before = world.versions()
            world.refresh()
            if world.versions() == before:
                raise
        time.sleep(random.uniform(0.0, 0.02 * 2 ** min(attempt, 5)))
    return None


def maintain_all(
    spark: SparkSession, world, retry_failed: bool = False, raise_for: frozenset[str] = frozenset()
) -> list[MaintenanceResult]:
    """Maintain every view, sources before the views that read them.

    A view whose step fails (its query fails on new data, a part it needs is gone...) is marked
    failed with its error (a table property, so every process sees it) and reported; the views
    reading it are skipped and reported; every other view is still maintained. Failed views are
    skipped on later passes too, until ``retry_failed`` asks to try them again. A simulated crash
    (InjectedFault) or an interrupt is not a view failure and propagates, and so does the error of
    a view named in ``raise_for`` (views being created: their first build must work).
    """
    if settle_window_plans(world):  # a pending window view got its plan: read the warehouse again
        world = type(world)(world.spark, world.catalog, world.execution, world.costs)
    order = list(world.view_order())
    fusions: list[Fusion] = []
    try:
        return _maintain_in_order(spark, world, order, retry_failed, raise_for, fusions)
    finally:
        for fusion in fusions:
            fusion.discard()


def _quietly(action, *arguments) -> None:
    """Run ``action`` (recording a view's failure, reading the warehouse again) where a busy catalog
    or a view dropped by another process must not raise: the batch before this maintenance is
    committed, so an append reports what went wrong instead of raising; a failure not recorded now
    is met again on the next pass."""
    try:
        action(*arguments)
    except CatalogBusyError as error:
        logger.warning("%s; left for the next maintenance pass", error)
    except NotFoundError:
        logger.debug("a view was dropped by another process during maintenance: nothing to record")


def _dropped(handle) -> bool:
    """Whether the view of ``handle`` is gone from the catalog (dropped by another process)."""
    try:
        handle.table.refresh()
    except NotFoundError:
        return True
    return False


def _sources_unmoved(world, handle) -> bool:
    """Whether every relation the view reads is still at the version its last step saw: that step
    built every part those versions allow, so there is no new part and no late row, and
    :func:`maintain_view` would plan nothing. Such a view is passed over before any planning (a
    warehouse of many idle streams costs one version comparison per idle view and pass)."""
    state = handle.state()
    if state is None:
        return False
    for source in handle.definition.sources():
        if source not in world.kinds or world.table(source).current_version() != state.seen.get(source, 0):
            return False
    return True


def _maintain_in_order(
    spark: SparkSession,
    world,
    order: list[str],
    retry_failed: bool,
    raise_for: frozenset[str],
    fusions: list[Fusion],
) -> list[MaintenanceResult]:
    results = []
    blocked: dict[str, str] = {}
    for name in order:
        handle = world.view(name)
        failure = handle.failure()
        version = handle.table.current_version()
        if failure is not None and not retry_failed:
            blocked[name] = failure
            results.append(MaintenanceResult(handle.spelled, version, error=f"failed earlier: {failure}"))
            continue
        upstream = sorted(s for s in handle.definition.sources() if s in blocked)
        if upstream:
            blocked[name] = f"reads {world.spelled(upstream[0])}, whose maintenance failed"
            results.append(MaintenanceResult(handle.spelled, version, error=f"skipped: {blocked[name]}"))
            continue
        if failure is None and _sources_unmoved(world, handle):
            continue
        fusion = next((f for f in fusions if f.consumer == name), None)
        if fusion is None:
            fusion = fusion_for(spark, world, name, order)
            if fusion is not None:
                fusions.append(fusion)
        try:
            result = _maintain_replanned(spark, world, name, fusion)
        except InjectedFault:
            raise
        except (BaseMovedError, CatalogBusyError) as error:
            # contention (other processes' commits, or one holding the catalog's lock), not a
            # failure of the view: reported, and the next pass retries
            if isinstance(error, BaseMovedError):
                blocked[name] = f"lost the commit to other processes {MAX_ATTEMPTS} times"
            else:
                blocked[name] = "the catalog was busy"
            results.append(
                MaintenanceResult(handle.spelled, version, error=f"not maintained this time: {error}")
            )
            _quietly(world.refresh)
            continue
        except Exception as error:
            if name in raise_for:
                raise  # noqa: BLE001 - isolated: recorded on the view, reported, not raised
            if isinstance(error, NotFoundError) and _dropped(handle):
                # another process dropped the view during its step: nothing to maintain or mark
                blocked[name] = f"view {handle.spelled} was dropped by another process"
                continue
            message = f"{type(error).__name__}: {error}".strip()
            _quietly(handle.mark_failed, message)
            blocked[name] = message
            results.append(MaintenanceResult(handle.spelled, version, error=message))
            _quietly(world.forget, name)
            continue
        if failure is not None:
            _quietly(handle.clear_failure)
        if result is not None:  # its commit left the world's handle of the view at the new version
            results.append(result)
    bound_histories(world, [r.view for r in results if r.error is None])
    return results
