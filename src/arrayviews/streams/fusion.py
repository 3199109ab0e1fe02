"""A helper view's new part and its one consumer's new part built together, so that a stream step
pays one Spark job for both, or, in-process, builds the consumer's part while the helper commits.

While the helper builds its one new part, the consumer's next part is built from the helper's new
rows before the helper commits:

- **on Spark**, from the helper's DataFrame (not its staged files), both parts staged by one Spark
  action (execution/part_jobs.py ``stage_together``), the helper's rows computed once for both
  branches of that action (shared);
- **in-process** (when ``FUSE_IN_PROCESS`` is set; off by default, see there), in a worker thread
  that starts once the helper's part is staged (its rows are then in memory,
  storage/recent_parts.py) and runs the consumer's query while this thread commits the helper.
  DuckDB and the Parquet writer release the interpreter lock, so the consumer's query and the
  helper's commit (Python, mostly) can overlap.

Each view still commits on its own, the helper first. The consumer's step takes its pre-staged part
only when its own plan is that one part and nothing it read changed since (the helper's commit is
the one that holds the part it read, file for file; its other sources and itself are at the versions
read); otherwise the files are discarded and the part built as usual. A fused build that fails stages nothing, and each view is
built on its own (so a failing consumer fails its own step only); staged files not taken are
discarded by ``maintain_all``; a kill between the commits leaves the consumer one part behind, which
its next step builds from the helper's committed files.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Sequence

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from arrayviews.execution.cost import Estimate, choose
from arrayviews.execution.part_jobs import stage_together
from arrayviews.model.errors import ArrayViewsError
from arrayviews.model.names import PART
from arrayviews.storage.part_table import TARGET_FILE_BYTES
from arrayviews.streams import planning
from arrayviews.streams.evaluation import drop_temporary_views, run_part_query
from arrayviews.streams.local_step import Input, build_part
from arrayviews.streams.part_files import part_files
from arrayviews.streams.relations import ViewState, consumers_of

#: Whether a view and its one reader build their new parts together. On Spark, with the helper's
#: rows computed once for both branches (part_jobs ``stage_together(shared=...)``), the fused step
#: (1 job) measured 0.69-0.82x the time of the two jobs built apart (r8-fuse report). Off builds each
#: part on its own, one after the other.
FUSE_READER_PARTS = True

#: Whether the in-process path is taken. Off: on the 2-core machine it measured no faster than
#: building the two parts one after the other (step medians 27-32 ms either way over three
#: alternating runs of 160 steps at 10^4 pairs a part) and used 2-3 ms more CPU a step; the reader's
#: query there is ~1 ms, too little to hide the helper's commit behind, and the two threads contend
#: for the interpreter. It is kept, tested, for readers whose queries are heavier than their helper's
#: commit and for machines with cores to spare.
FUSE_IN_PROCESS = False

_worker: concurrent.futures.ThreadPoolExecutor | None = None
_worker_lock = threading.Lock()


def _background() -> concurrent.futures.ThreadPoolExecutor:
    """The one worker thread that builds consumers' parts in-process (it keeps its own prepared
    queries, execution/local_sql.py)."""
    global _worker
    with _worker_lock:
        if _worker is None:
            _worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="arrayviews-fused-part")
        return _worker


def fusion_for(spark: SparkSession, world, name: str, order: list[str]) -> Fusion | None:
    """A fusion of view ``name`` (a pattern's helper, say) with the one later view reading it."""
    if not FUSE_READER_PARTS:
        return None
    definitions = world.definitions()
    readers = [c.name for c in consumers_of(name, definitions)]
    if len(readers) != 1 or readers[0] not in order[order.index(name) + 1 :]:
        return None
    if any(
        definitions.get(r) is not None and definitions[r].presentation
        for r in definitions[readers[0]].sources()
    ):
        return None  # the reader sees a view's presented rows, not its staged ones (streams/presentation.py)
    return Fusion(spark, world, name, readers[0])


class Fusion:
    """The consumer's next part, built with the helper's (see the module's docstring)."""

    def __init__(self, spark: SparkSession, world, helper: str, consumer: str) -> None:
        self.spark, self.world, self.helper, self.consumer = spark, world, helper, consumer
        #: (part, staged files or the future of the in-process build, estimate, executor, versions read,
        #: the helper's staged files it read, predicted seconds in this process)
        self.pending: tuple | None = None
        self.helper_version: int | None = None  # the helper's commit holding the fused part
        self.registered: list[str] = []

    def wants(self, view: str, part: int, state: ViewState | None, initialize: bool) -> bool:
        """Whether the consumer's part ``part`` is built with the helper's new part ``part``."""
        if view != self.helper or initialize or state is None or self.pending is not None:
            return False
        consumer = self.world.view(self.consumer)
        consumer_state = consumer.state()
        if consumer_state is None or consumer_state.next != part or consumer.failure() is not None:
            return False
        definition = consumer.definition
        for relation in definition.sources():
            if self.world.relation(relation).version != consumer_state.seen.get(relation, 0):
                return False  # the consumer has changes to catch up on: it is planned on its own
        newest = {r: self.world.relation(r).newest for r in definition.sources()}
        newest[self.helper] = part
        return planning.newest_buildable(definition.update, newest, definition.name) == part

    def _inputs(self, part: int, helper_new: Sequence = ()) -> tuple[list[tuple], Estimate, float]:
        """What the consumer's part reads: (relation, table, committed files, reads the helper's new
        part) per reference of its query, the estimate of that input, the helper's new part
        (``helper_new``: its staged files, with their rows and bytes) counted where it is read, and
        the predicted seconds of building it in this process (its query as SQL, by the stream step
        build terms, as the consumer's own step prices it: streams/maintainer.py)."""
        consumer = self.world.view(self.consumer)
        inputs = []
        for reference in consumer.definition.update.references:
            low, high = reference.low.at(part), reference.high.at(part)
            relation = reference.relation
            table = consumer.table if relation == self.consumer else self.world.table(relation)
            files = (
                part_files(table, low, high)
                if relation == self.consumer
                else self.world.files_of(relation, low, high)
            )
            inputs.append((relation, table, files, low <= part <= high and relation == self.helper))
        read = [(t, [*files, *(helper_new if new else ())]) for _, t, files, new in inputs]
        estimate = Estimate(
            cells=sum(f.rows * (len(t.arrow_schema) - 1) for t, files in read for f in files),
            bytes=sum(f.nbytes for _, files in read for f in files),
            chunks=sum(len(files) for _, files in read),
            jobs=2,
        )
        rows = sum({f.uri: f.rows for _, files in read for f in files}.values())  # each file once
        own = [
            sum(f.rows for f in files)
            for relation, _, files, _ in inputs
            if relation == self.consumer and files
        ]
        return inputs, estimate, self.world.costs.stream_step.part_build_seconds(rows, own, kernel=False)

    def stage(self, helper_frame: DataFrame, part: int, helper_estimate: Estimate) -> list | None:
        """Stage the helper's part and the consumer's part in one Spark job; the helper's staged
        files, or None when the two are better built apart (large inputs, or the job failed)."""
        consumer = self.world.view(self.consumer)
        inputs, estimate, _ = self._inputs(part)
        if max(estimate.bytes, helper_estimate.bytes) >= TARGET_FILE_BYTES:
            return None  # one task writes a fused job: only for small parts

        def frame_of(found: tuple) -> DataFrame:
            relation, table, files, reads_new = found
            if reads_new and not files:  # only the new part: the helper's rows, no empty scan
                return helper_frame.select(*[n for n in table.read_schema.names if n != PART])
            frame = table.read_files(self.spark, [f.uri for f in files])
            if relation == self.consumer:
                return frame
            frame = frame.drop(PART)
            return frame.unionByName(helper_frame.select(*frame.columns)) if reads_new else frame

        frames = iter([frame_of(found) for found in inputs])
        versions = self._versions()
        try:
            frame = run_part_query(
                self.spark, consumer.definition.update, part, lambda *_: next(frames), self.registered
            )
            frame = consumer.conform_columns(frame, part)
            helper_table = self.world.table(self.helper)
            staged_helper, staged_consumer = stage_together(
                [
                    (helper_table, helper_frame.withColumn(PART, F.lit(part).cast("long"))),
                    (consumer.table, frame.withColumn(PART, F.lit(part).cast("long"))),
                ],
                shared=[helper_frame],
            )
        except (PySparkException, ArrayViewsError):
            return None  # each view is built on its own: a failing consumer fails only its step
        _, estimate, local_seconds = self._inputs(part, staged_helper)  # the helper's part, now sized
        self.pending = (
            part,
            staged_consumer,
            estimate,
            "spark",
            versions,
            _uris(staged_helper),
            local_seconds,
        )
        return staged_helper

    def start_local(self, part: int, helper_staged: Sequence) -> None:
        """Start building the consumer's part ``part`` in-process, in the worker thread, from the
        helper's staged (not yet committed) part ``part``; only when the cost model would build
        the consumer's part in-process too."""
        consumer = self.world.view(self.consumer)
        inputs, estimate, local_seconds = self._inputs(part, helper_staged)
        choice = choose(self.world.costs, estimate, self.world.execution, local_seconds=local_seconds)
        if choice.executor != "local":
            return
        sources = []
        for relation, table, files, reads_new in inputs:
            uris = [f.uri for f in files]
            if reads_new:
                uris.extend(s.uri for s in helper_staged)
            sources.append(Input(table, tuple(uris), keep_part=(relation == self.consumer)))
        versions = self._versions()
        query, table, name = consumer.definition.update, consumer.table, consumer.name
        future = _background().submit(build_part, query, part, sources, table, name)
        self.pending = (part, future, estimate, "local", versions, _uris(helper_staged), local_seconds)

    def _versions(self) -> dict[str, int]:
        """The versions of what the consumer reads besides the helper, and of the consumer itself."""
        definition = self.world.view(self.consumer).definition
        names = [r for r in definition.sources() if r != self.helper]
        found = {r: self.world.relation(r).version for r in names}
        found[self.consumer] = self.world.view(self.consumer).table.current_version()
        return found

    def take(self, view: str, part: int) -> tuple[list, Estimate, str, float] | None:
        """The consumer's pre-staged part (staged files, estimate, executor, predicted seconds in
        this process), when it is still what its step would build."""
        if view != self.consumer or self.pending is None or self.pending[0] != part:
            return None
        fresh = (
            self.helper_version is not None
            and self.world.relation(self.helper).version == self.helper_version
        )
        if not fresh or self._versions() != self.pending[4]:
            return None
        # the helper's part as committed must be the one read (a helper step planned again after
        # losing its commit to another process stages another part, perhaps from other rows)
        if _uris(self.world.table(self.helper).files_of_parts(part, part)) != self.pending[5]:
            return None
        _, staged, estimate, executor, _, _, local_seconds = self.pending
        self.pending = None
        if isinstance(staged, concurrent.futures.Future):
            try:
                staged = staged.result()
            except Exception:  # noqa: BLE001 - built again by the consumer's own step, which reports it
                return None
        return staged, estimate, executor, local_seconds

    def discard(self) -> None:
        """Delete pre-staged files no step took."""
        if self.pending is not None:
            staged = self.pending[1]
            self.pending = None
            if isinstance(staged, concurrent.futures.Future):
                try:
                    staged = staged.result()
                except BaseException:  # noqa: BLE001 - it staged nothing (its own files deleted)
                    staged = []
            self.world.view(self.consumer).table.discard(staged)
        drop_temporary_views(self.spark, self.registered)


def _uris(files: Sequence) -> frozenset[str]:
    """The URIs of staged files (or of URIs themselves)."""
    return frozenset(f if isinstance(f, str) else f.uri for f in files)
