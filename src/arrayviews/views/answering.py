"""Answering a similarity-join aggregate through a materialized similarity view (paper 000, section 5):
the delta shapes, which views can answer, the cost of each way (Eq. 3, in this engine's terms), and
the differential evaluation itself.

A view keeps, per left cell, the exact state of its aggregates over the right cells inside the view's
shape. A query over the same two arrays with the same mapping but another shape differs from the
view by the right cells inside ``query \\ view`` (to add) and ``view \\ query`` (to take away): the
delta shape ``view xor query``. The answer is the view's state plus the signed join over the delta
shape, merged per view chunk by the code that merges a refresh (the change of a view whose shape
moved from ``view`` to ``query``). Counts and sums are exact, so the answer equals the query computed
from scratch to the last bit. A min or max cannot be subtracted: a cell whose stored extreme may lie
in ``view \\ query`` is recomputed from the base arrays with the query's shape, as a refresh recomputes
cells whose extreme left. A view behind the versions the query reads is first brought forward in
memory by its own incremental refresh (:class:`CatchUp`); nothing is stored.

The choice (Eq. 3). Both ways read the two base arrays when the shapes differ (the view's own shape
reads the view alone); the view's way also reads and merges the view, and catches up when behind.
The join work that differs is the number of matches (pairs of cells the kernel aggregates, estimated
from the right array's density times the shape's size, per left cell) and the chunk pairs formed.
Each way is priced with the calibrated engine costs and the refresh terms (execution/cost.py); the
cheaper runs. A delta shape larger than the query shape never pays; here, because the join kernel's
work follows the shape's bounding box, a smaller but non-empty one rarely does (docs/views.md).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from arrayviews.execution.cost import CostModel, Estimate
from arrayviews.execution.engine import Data, Engine
from arrayviews.model.errors import NotFoundError, RangeError, ValidationError
from arrayviews.model.mappings import Mapping
from arrayviews.model.schema import ArraySchema
from arrayviews.model.shapes import Shape
from arrayviews.operators import simjoin
from arrayviews.operators.cells import cell_columns, cells_to_fragment_table
from arrayviews.operators.deltas import Delta, source_delta
from arrayviews.operators.simjoin import JoinSpec
from arrayviews.operators.source import StoredSource
from arrayviews.storage import layout
from arrayviews.views import compute, similarity
from arrayviews.views import state as st
from arrayviews.views.definition import SimilarityViewDefinition, ViewAggregate


@dataclass(frozen=True)
class Candidate:
    """A stored similarity view as the planner sees it: definition, stored schema, the base versions
    it reflects, and its fragments at its current version (state columns included)."""

    name: str
    definition: SimilarityViewDefinition
    stored: ArraySchema
    reflected: dict[str, int]
    source: StoredSource
    #: the snapshot ids of the base versions it reflects (none recorded by older views)
    snapshots: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class WayCost:
    """One way of answering: what it reads and joins, and the predicted seconds."""

    way: str  # "scratch" or "view"
    executor: str
    cells: int
    chunk_pairs: int
    matches: float
    view_chunks: int
    seconds: float

    def text(self) -> str:
        where = f", {self.view_chunks} view chunk(s) merged" if self.way == "view" else ""
        return (
            f"{self.way}: {self.cells:,} cells read, {self.chunk_pairs} chunk pair(s), "
            f"~{self.matches:,.0f} matches{where}; {self.seconds:.3f} s predicted ({self.executor})"
        )


@dataclass
class AnswerPlan:
    """How a similarity aggregate will be answered, and why (``explain`` prints it)."""

    query_shape: Shape
    chosen: str  # "scratch" or "view"
    view: str | None = None
    added: Shape | None = None  # query \\ view
    removed: Shape | None = None  # view \\ query
    scratch: WayCost | None = None
    through_view: WayCost | None = None
    reason: str = ""
    refused: dict[str, str] = field(default_factory=dict)  # view name -> why it cannot answer
    #: the view chosen, at the version whose reflected base versions were checked (not printed)
    candidate: Candidate | None = field(default=None, repr=False)
    #: how that view is brought to the query's versions first, when it is behind them
    catch_up: CatchUp | None = field(default=None, repr=False)

    def text(self) -> str:
        lines = [f"similarity aggregate with shape {self.query_shape!r}: answered {self._how()}"]
        lines.append(f"  why: {self.reason}")
        if self.catch_up is not None:
            work = f"{self.catch_up.pairs} chunk pair(s), {self.catch_up.rewritten} view chunk(s)"
            lines.append(
                f"  the view is behind the query's versions: brought forward in memory first ({work}; "
                "nothing is stored)"
                if self.chosen == "view"
                else f"  view {self.view} is behind the query's versions: through it, it would first be "
                f"brought forward in memory ({work})"
            )
        if self.added is not None or self.removed is not None:
            lines.append(
                f"  delta shape: {_size(self.added)} offset(s) added, {_size(self.removed)} taken away "
                f"(query shape {len(self.query_shape)})"
            )
        for cost in (self.scratch, self.through_view):
            if cost is not None:
                lines.append("  " + cost.text())
        for name, why in self.refused.items():
            lines.append(f"  view {name} not used: {why}")
        return "\n".join(lines)

    def _how(self) -> str:
        return f"through view {self.view}" if self.chosen == "view" else "from the base arrays"


def _size(shape: Shape | None) -> int:
    return 0 if shape is None else len(shape)


def _kept_functions(definition: SimilarityViewDefinition) -> dict[tuple[str, str], tuple[str, set[str]]]:
    """Per (side, lower-case attribute) the view aggregates: its spelling and the functions over it."""
    kept: dict[tuple[str, str], tuple[str, set[str]]] = {}
    for aggregate in definition.aggregates:
        if aggregate.attribute is not None:
            key = (aggregate.side, aggregate.attribute.lower())
            kept.setdefault(key, (aggregate.attribute, set()))[1].add(aggregate.function)
    return kept


def derivable(aggregate: ViewAggregate, definition: SimilarityViewDefinition) -> bool:
    """Whether the view's state (views/state.py) holds what ``aggregate`` is computed from: the pair
    count for count(*); for an attribute the view aggregates at all, its count; a left value for any
    left aggregate but count; the exact sum for a right sum or avg (either kept); the extreme itself
    for a right min or max."""
    if aggregate.attribute is None:
        return True
    kept = _kept_functions(definition).get((aggregate.side, aggregate.attribute.lower()))
    if kept is None:
        return False
    functions = kept[1]
    if aggregate.function == "count":
        return True
    if aggregate.side == "left":
        return bool(functions - {"count"})
    if aggregate.function in ("sum", "avg"):
        return bool(functions & {"sum", "avg"})
    return aggregate.function in functions


def in_view_terms(
    aggregates: tuple[ViewAggregate, ...], definition: SimilarityViewDefinition
) -> SimilarityViewDefinition:
    """The query's aggregates over the view's state: the view's definition with the query's
    aggregates (attributes spelt as the view spells them), for :func:`views.state.finalize`."""
    kept = _kept_functions(definition)
    calls = tuple(
        a
        if a.attribute is None
        else ViewAggregate(a.function, a.side, kept[(a.side, a.attribute.lower())][0], a.alias)
        for a in aggregates
    )
    return SimilarityViewDefinition(
        definition.left, definition.right, definition.shape, calls, definition.mapping
    )


def _same_mapping(a: Mapping, b: Mapping) -> bool:
    return a.to_json() == b.to_json()


def usable(
    candidate: Candidate, spec: JoinSpec, aggregates: tuple[ViewAggregate, ...], versions: dict[str, int]
) -> str | None:
    """Why ``candidate`` cannot answer the query (None: it can): another mapping, an aggregate it
    does not keep, or base versions other than those the query reads (a view behind its bases)."""
    definition = candidate.definition
    view_spec_mapping = Mapping.of(spec.left, spec.right, definition.mapping)
    if not _same_mapping(view_spec_mapping, spec.mapping):
        return "its mapping of the left array onto the right one differs from the query's"
    if definition.shape.ndim != spec.shape.ndim:
        return f"its shape has {definition.shape.ndim} dimension(s), the query's {spec.shape.ndim}"
    for aggregate in aggregates:
        if not derivable(aggregate, definition):
            what = "*" if aggregate.attribute is None else f"{aggregate.side}.{aggregate.attribute}"
            return f"it keeps no state {aggregate.function}({what}) can be computed from"
    reflected = _by_lower_name(candidate.reflected)
    for base, version in versions.items():
        if reflected.get(base.lower(), 0) > version:
            return (
                f"it reflects {base} v{reflected.get(base.lower(), 0)}, newer than the v{version} the "
                "query reads"
            )
    return None


def _by_lower_name(versions: dict[str, int]) -> dict[str, int]:
    """Base versions keyed by lower-case name (names match without regard to case)."""
    return {base.lower(): version for base, version in versions.items()}


def behind(candidate: Candidate, versions: dict[str, int]) -> bool:
    """Whether the view reflects older versions of its bases than the query reads."""
    reflected = _by_lower_name(candidate.reflected)
    return any(reflected.get(base.lower(), 0) < version for base, version in versions.items())


@dataclass
class CatchUp:
    """A view behind the query's versions, brought forward in memory by its own incremental refresh
    (the baseline plan of section 4.1 over the bases' deltas); nothing is stored."""

    plan: similarity.Plan
    left_old: StoredSource
    right_old: StoredSource
    left_delta: Delta
    right_delta: Delta
    affected: np.ndarray
    #: of the ``affected`` view chunks, those that can hold cells (the work the estimate counts)
    rewritten: int = 0

    @classmethod
    def of(cls, candidate: Candidate, spec: JoinSpec, left: StoredSource, right: StoredSource) -> CatchUp:
        """The catch-up plan from chunk metadata and the deltas' cells (NotFoundError when a
        reflected version has expired)."""
        definition = candidate.definition
        view_spec = with_shape(spec, definition.shape)
        left_old = replace(left, version=candidate.reflected.get(definition.left, 0))
        right_old = replace(right, version=candidate.reflected.get(definition.right, 0))
        left_delta = source_delta(left_old, left)
        right_delta = left_delta if _same(left, right) else source_delta(right_old, right)
        plan = similarity.plan_baseline(view_spec, left_old, right_old, left_delta, right_delta)
        affected = similarity.affected_view_chunks(view_spec, candidate.stored, plan)
        rewritten = similarity.holding_cells(
            view_spec,
            definition,
            candidate.stored,
            affected,
            similarity.chunk_list(candidate.source),
            left_delta,
        )
        return cls(plan, left_old, right_old, left_delta, right_delta, affected, rewritten)

    @property
    def pairs(self) -> int:
        return len(self.plan.first) + len(self.plan.second) + len(self.plan.third)

    def caught_up(
        self, engine: Engine, candidate: Candidate, spec: JoinSpec, left: StoredSource, right: StoredSource
    ) -> Data:
        """The view's fragments at the query's versions: its chunks the deltas change, refreshed; the
        others as stored."""
        old = candidate.source.data(engine)
        merged, affected, _ = similarity.baseline_refresh(
            engine,
            with_shape(spec, candidate.definition.shape),
            candidate.definition,
            candidate.stored,
            self.left_old,
            self.right_old,
            self.left_delta,
            self.right_delta,
            candidate.source,
            left_new=left,
            right_new=right,
            plan=self.plan,
        )
        if merged is None or len(affected) == 0:
            return old
        kept = engine.where_keys(old, layout.chunk_columns(candidate.stored), affected, keep=False)
        return engine.union([kept, merged])


def delta_shapes(view_shape: Shape, query_shape: Shape) -> tuple[Shape | None, Shape | None]:
    """(query \\ view, view \\ query), each None when empty."""
    added, removed = query_shape - view_shape, view_shape - query_shape
    return (added if len(added) else None), (removed if len(removed) else None)


def _chunk_cells(source: StoredSource) -> tuple[np.ndarray, np.ndarray]:
    cells = similarity._chunk_cells(source)
    chunks = np.array(list(cells), dtype=np.int64).reshape(-1, source.schema.ndim)
    return chunks, np.array(list(cells.values()), dtype=np.int64)


def _same(left: StoredSource, right: StoredSource) -> bool:
    return left.table.name == right.table.name and left.version == right.version


def _density(chunks: np.ndarray, cells: np.ndarray, schema: ArraySchema) -> float:
    """Cells per position of the right array, over the chunks that hold cells."""
    if len(chunks) == 0:
        return 0.0
    volume = 1
    for dimension in schema.dimensions:
        volume *= dimension.chunk_length
    return float(cells.sum()) / (volume * len(chunks))


@dataclass
class JoinInputs:
    """Chunk metadata of both arrays, read once for every way priced."""

    left_chunks: np.ndarray
    left_cells: np.ndarray
    right_chunks: np.ndarray
    right_cells: np.ndarray
    density: float

    @classmethod
    def of(cls, left: StoredSource, right: StoredSource) -> JoinInputs:
        left_chunks, left_cells = _chunk_cells(left)
        right_chunks, right_cells = (left_chunks, left_cells) if _same(left, right) else _chunk_cells(right)
        return cls(
            left_chunks,
            left_cells,
            right_chunks,
            right_cells,
            _density(right_chunks, right_cells, right.schema),
        )

    def pairs(self, spec: JoinSpec) -> list:
        return simjoin.plan_pairs(spec, self.left_chunks, self.right_chunks)

    def matches(self, shape: Shape | None) -> float:
        """Expected matches of a join with ``shape``: left cells x right density x shape size."""
        return 0.0 if shape is None else float(self.left_cells.sum()) * self.density * len(shape)


def with_shape(spec: JoinSpec, shape: Shape) -> JoinSpec:
    return JoinSpec(spec.left, spec.right, shape, spec.mapping)


def price(
    costs: CostModel,
    choose,
    inputs: JoinInputs,
    spec: JoinSpec,
    read: Estimate,
    candidate: Candidate | None,
    added: Shape | None,
    removed: Shape | None,
    catch_up: CatchUp | None = None,
) -> WayCost:
    """The predicted seconds of answering from scratch (``candidate`` None) or through a view: the
    engine's cost of the cells read and jobs run, plus the refresh terms for chunk pairs, matches
    and view chunks merged (execution/cost.py); a view behind the query's versions also pays its
    catch-up (the incremental refresh's cells, pairs and rewritten chunks)."""
    if candidate is None:  # every result chunk is merged and written, as in a full refresh
        pairs = len(inputs.pairs(spec))
        matches = inputs.matches(spec.shape)
        estimate, view_chunks = read, len(inputs.left_chunks)
    else:
        shapes = [s for s in (added, removed) if s is not None]
        reach = shapes[0] if len(shapes) == 1 else (shapes[0] | shapes[1] if shapes else None)
        pairs = 0 if reach is None else len(inputs.pairs(with_shape(spec, reach)))  # routed once
        matches = inputs.matches(added) + inputs.matches(removed)
        kept = candidate.source.estimate()
        # the view's own shape merges nothing: its chunks are only read and finalized
        view_chunks = 0 if reach is None else kept.chunks
        # one job computes the delta shapes' state and merges it; a min/max view losing offsets
        # finds its stale cells in one more job, whose state the answer's own job computes again,
        # and recomputes their extremes
        stale = removed is not None and _has_right_extremes(candidate.definition)
        jobs = 2 + (2 if stale else 0)
        if stale:  # at worst every cell's extreme is recomputed: a join with the query's shape
            pairs += len(inputs.pairs(spec))
            matches += inputs.matches(spec.shape)
        if reach is None:  # the view's own shape: only the view is read (and what catching up reads)
            estimate = Estimate(kept.cells, kept.bytes, kept.chunks, 1)
        else:
            estimate = Estimate(
                read.cells + kept.cells, read.bytes + kept.bytes, read.chunks + kept.chunks, jobs
            )
        if catch_up is not None:
            cells = catch_up.plan.base_cells + catch_up.plan.delta_cells
            estimate = estimate + Estimate(cells, 0, catch_up.rewritten, 1)
            pairs += catch_up.pairs
            view_chunks += catch_up.rewritten
    _, choice = choose(estimate)
    terms = costs.refresh_terms(choice.executor)
    seconds = (
        choice.predicted[choice.executor] + terms.seconds(pairs, view_chunks) + terms.match_seconds(matches)
    )
    return WayCost(
        "scratch" if candidate is None else "view",
        choice.executor,
        estimate.cells,
        pairs,
        matches,
        view_chunks,
        seconds,
    )


def _rolled_back(candidate: Candidate, left: StoredSource, right: StoredSource) -> str | None:
    """Why ``candidate`` cannot answer when a base was rolled back past the version it reflects
    (``db.check(repair=True)``): that number now names another commit, or none yet."""
    for source in (left, right):
        name = next((b for b in candidate.reflected if b.lower() == source.table.name.lower()), None)
        if name is None or not candidate.reflected[name]:
            continue
        version, recorded = candidate.reflected[name], candidate.snapshots.get(name)
        try:
            found = source.table.snapshot_of(version)
        except KeyError:
            continue  # expired (or newer than the query reads): refused or caught up as before
        if recorded is not None and found != recorded:
            return (
                f"{name} was rolled back past the version it reflects (v{version} is another commit "
                "now): refresh it"
            )
    return None


def _has_right_extremes(definition: SimilarityViewDefinition) -> bool:
    return any(a.function in ("min", "max") and a.side == "right" for a in definition.aggregates)


def plan_answer(
    costs: CostModel,
    choose,
    spec: JoinSpec,
    aggregates: tuple[ViewAggregate, ...],
    left: StoredSource,
    right: StoredSource,
    candidates: list[Candidate],
    through: str | None = "auto",
) -> AnswerPlan:
    """Decide how to answer: from scratch, or through the cheapest usable view (``through``: "auto",
    "none", or a view's name, which must be usable). ``choose(estimate) -> (engine, Choice)``."""
    versions = {left.table.name: left.version, right.table.name: right.version}
    # one array read at two versions (A.at_version(1) joined with A): a view reflects one version of
    # each base, so none holds this join (the versions above keep only one of the two)
    two_versions = (
        f"the query joins {left.table.name} v{left.version} with {right.table.name} v{right.version}, "
        "and a view reflects one version of each base"
        if left.table.name.lower() == right.table.name.lower() and left.version != right.version
        else None
    )
    plan = AnswerPlan(spec.shape, "scratch")
    if through == "none" or through is None:
        plan.reason = "asked to answer from the base arrays"
        return plan
    usable_views = []
    for candidate in candidates:
        if through not in ("auto", candidate.name):
            continue
        why = two_versions or usable(candidate, spec, aggregates, versions) or _rolled_back(candidate, left, right)
        if why is not None:
            plan.refused[candidate.name] = why
            continue
        catch_up = None
        if behind(candidate, versions):
            try:
                catch_up = CatchUp.of(candidate, spec, left, right)
            except NotFoundError:
                plan.refused[candidate.name] = (
                    "it is behind the query's versions and the versions it reflects have expired (refresh it)"
                )
                continue
        usable_views.append((candidate, catch_up))
    best: tuple[WayCost, Candidate, Shape | None, Shape | None, CatchUp | None] | None = None
    if usable_views:  # the chunk metadata is read, and the ways priced, only when a view can answer
        inputs = JoinInputs.of(left, right)
        read = left.estimate() if _same(left, right) else left.estimate() + right.estimate()
        read = Estimate(read.cells, read.bytes, read.chunks, 2)
        plan.scratch = price(costs, choose, inputs, spec, read, None, None, None)
        for candidate, catch_up in usable_views:
            added, removed = delta_shapes(candidate.definition.shape, spec.shape)
            cost = price(costs, choose, inputs, spec, read, candidate, added, removed, catch_up)
            if best is None or cost.seconds < best[0].seconds:
                best = (cost, candidate, added, removed, catch_up)
    if best is None:
        if through not in ("auto", None):
            why = plan.refused.get(through, "it is not a similarity view over these two arrays")
            raise ValidationError(f"view {through} cannot answer this similarity aggregate: {why}")
        plan.reason = (
            "no similarity view over these arrays can answer it"
            if not plan.refused
            else "no view can answer it"
        )
        return plan
    cost, candidate, added, removed, catch_up = best
    plan.view, plan.added, plan.removed, plan.through_view = candidate.name, added, removed, cost
    plan.candidate, plan.catch_up = candidate, catch_up
    if through == candidate.name:
        plan.chosen, plan.reason = "view", f"asked to answer through view {candidate.name}"
    elif cost.seconds < plan.scratch.seconds:
        plan.chosen = "view"
        plan.reason = (
            f"through {candidate.name} is predicted {plan.scratch.seconds / max(cost.seconds, 1e-9):.1f}x "
            "faster (delta shape "
            f"{_size(added) + _size(removed)} offset(s) against {len(spec.shape)})"
        )
    else:
        plan.reason = (
            f"from scratch is predicted {cost.seconds / max(plan.scratch.seconds, 1e-9):.1f}x faster than "
            f"through {candidate.name} (delta shape {_size(added) + _size(removed)} offset(s) against "
            f"{len(spec.shape)})"
        )
    return plan


# -- the differential evaluation ------------------------------------------------------------------
def _delta_chunk(
    left_rows: pa.Table,
    right_rows: pa.Table,
    terms: tuple[tuple[JoinSpec, int], ...],
    definition: SimilarityViewDefinition,
    stored: ArraySchema,
) -> pa.Table | None:
    """The state change of one left chunk from the right cells routed to it (within reach of every
    delta shape): one signed join per delta shape, each testing its own stencil."""
    parts = []
    for spec, role in terms:
        signed = right_rows.set_column(
            right_rows.schema.get_field_index(simjoin.ROLE),
            simjoin.ROLE,
            pa.array(np.full(right_rows.num_rows, role, dtype=np.int8)),
        )
        part = compute.join_chunk(
            left_rows, signed, spec, definition, stored, (((simjoin.LEFT_OLD,), (role,)),)
        )
        if part is not None:
            parts.append(part)
    return pa.concat_tables(parts) if parts else None


def _delta_state(
    engine: Engine,
    spec: JoinSpec,
    plan: AnswerPlan,
    definition: SimilarityViewDefinition,
    stored: ArraySchema,
    left: StoredSource,
    right: StoredSource,
    inputs: JoinInputs,
) -> Data:
    """State change of every left cell over the delta shapes: the right cells within reach of their
    union are routed once, and each shape's signed join runs on them (sign +1 for ``query \\ view``,
    -1 for ``view \\ query``)."""
    terms = tuple(
        (with_shape(spec, shape), role)
        for shape, role in ((plan.added, simjoin.RIGHT_PLUS), (plan.removed, simjoin.RIGHT_MINUS))
        if shape is not None
    )
    reach = terms[0][0].shape if len(terms) == 1 else terms[0][0].shape | terms[1][0].shape
    routing = with_shape(spec, reach)
    left_rows = simjoin.route_left(engine, left.data(engine), routing, simjoin.LEFT_OLD)
    right_rows = simjoin.route_right(
        engine, right.data(engine), routing, inputs.pairs(routing), simjoin.RIGHT_OLD
    )
    function = functools.partial(_delta_chunk, terms=terms, definition=definition, stored=stored)
    keys = simjoin.halo.target_columns(spec.left.dimension_names)
    delta = compute.delta_schema(stored)
    return engine.cogroup(left_rows, right_rows, keys, function, layout.cell_schema(delta))


# -- errors of the answer told as the query's ------------------------------------------------------
class QueryEngine:
    """``engine`` as an answer through a view uses it: a value that does not fit its type in any
    task (raised by the view's merge and finalize code, which names the view) is reported as the
    query's, naming its arrays, the view it read and that the view is unchanged (nothing is stored)."""

    def __init__(self, engine: Engine, left: str, right: str, view: str) -> None:
        self._engine, self._told = engine, functools.partial(_told, left=left, right=right, view=view)

    def __getattr__(self, name: str):
        return getattr(self._engine, name)

    def map_batches(self, data: Data, function, out_schema: pa.Schema) -> Data:
        return self._engine.map_batches(data, functools.partial(_as_query, function, self._told), out_schema)

    def group(self, data: Data, keys, function, out_schema: pa.Schema) -> Data:
        return self._engine.group(data, keys, functools.partial(_as_query, function, self._told), out_schema)

    def cogroup(self, left: Data, right: Data, keys, function, out_schema: pa.Schema) -> Data:
        wrapped = functools.partial(_as_query, function, self._told)
        return self._engine.cogroup(left, right, keys, wrapped, out_schema)

    def map_partitions_by(self, data: Data, keys, function, out_schema: pa.Schema) -> Data:
        wrapped = functools.partial(_partitions_as_query, function, self._told)
        return self._engine.map_partitions_by(data, keys, wrapped, out_schema)


def _told(error: RangeError, left: str, right: str, view: str) -> RangeError:
    """``error`` (raised naming the view or the schema it computes in) as the query's error."""
    text = str(error)
    head, sep, rest = text.partition(": ")
    if sep and (head.startswith("view ") or head.startswith("similarity join of ")):
        text = rest
    return RangeError(
        f"similarity join of {left} and {right} answered through view {view}: {text} "
        f"(an overflow of this query's answer only: view {view} is unchanged)",
        array=left,
        column=error.column,
        value=error.value,
    )


def _as_query(function, told, *tables):
    try:
        return function(*tables)
    except RangeError as error:
        raise told(error) from None


def _partitions_as_query(function, told, tables):
    try:
        yield from function(tables)
    except RangeError as error:
        raise told(error) from None


def answer_through_view(
    engine: Engine,
    plan: AnswerPlan,
    candidate: Candidate,
    spec: JoinSpec,
    left: StoredSource,
    right: StoredSource,
    aggregates: tuple[ViewAggregate, ...],
) -> Data:
    """Fragments (the view's stored schema) of the query's answer: the view's state plus the signed
    joins over the delta shapes, merged per view chunk; cells whose min/max may have been in
    ``view \\ query`` recomputed from the base arrays with the query's shape. Of the view's own
    aggregates only those the query's ``aggregates`` read are evaluated."""
    definition, stored = candidate.definition, candidate.stored
    if plan.catch_up is not None:
        old = plan.catch_up.caught_up(engine, candidate, spec, left, right)
    else:
        old = candidate.source.data(engine)
    if plan.added is None and plan.removed is None:  # the same shape: the view is the answer
        return old
    inputs = JoinInputs.of(left, right)
    state = _delta_state(engine, spec, plan, definition, stored, left, right, inputs)
    if plan.removed is not None and _has_right_extremes(definition):
        cells = int(inputs.left_cells.sum() + inputs.right_cells.sum())
        stale = similarity.find_stale_cells(engine, state, old, definition, stored, cells)
        if stale.num_rows:
            fresh = similarity.fresh_extremes(engine, spec, definition, stored, stale, left, right)
            state = engine.union([state, fresh])
    # of the view's own aggregates only those the query reads as they are kept are evaluated
    kept = {_key(a): a.alias for a in definition.aggregates}
    public = frozenset(kept[_key(a)] for a in aggregates if _key(a) in kept)
    return similarity.merge_into_view(engine, state, old, definition, stored, full=False, public=public)


def _answer_fragments(
    table: pa.Table, stored: ArraySchema, definition: SimilarityViewDefinition, public: ArraySchema
) -> pa.Table | None:
    """Fragments of the query's public array from fragments of the view's state: each cell's public
    values computed from its state by the query's aggregates (the view's own public values unused)."""
    if table.num_rows == 0:
        return None
    cells = layout.fragments_to_cells(table.select(layout.fragment_schema(stored).names), stored)
    if cells.num_rows == 0:
        return None
    coords, values, _ = cell_columns(cells, stored)
    state = {a.name: values[a.name] for a in stored.attributes if a.internal}
    answers, nulls = st.finalize(definition, state, stored, coords)
    columns = {d: pa.array(coords[:, k], pa.int64()) for k, d in enumerate(public.dimension_names)}
    for attribute in public.attributes:
        mask = nulls.get(attribute.name)
        columns[attribute.name] = pa.array(
            answers[attribute.name],
            type=layout.arrow_type_of(attribute),
            mask=mask if mask is not None and mask.any() else None,
        )
    return cells_to_fragment_table(pa.table(columns, schema=layout.cell_schema(public)), public)


def public_answer(
    engine: Engine,
    fragments: Data,
    stored: ArraySchema,
    definition: SimilarityViewDefinition,
    aggregates: tuple[ViewAggregate, ...],
    public: ArraySchema,
) -> Data:
    """The view-shaped answer as the query's public array: the query's aggregates, under its names
    and in its order, computed from the answer's state (so an avg comes from a view keeping the sum,
    a count from one keeping a min; :func:`derivable`)."""
    kept = {_key(a): a.alias for a in definition.aggregates}
    keys = [_key(a) for a in aggregates]
    if all(k in kept for k in keys) and len(set(keys)) == len(keys):
        # every one kept as is, each once: select and rename columns (an aggregate asked twice
        # under two names is computed from the state, below, as one column cannot take two names)
        names = {}
        chosen = stored.with_attributes([stored.attribute(kept[_key(a)]) for a in aggregates])
        for aggregate, attribute in zip(aggregates, public.attributes, strict=True):
            for column in (layout.value_column, layout.null_column, layout.min_column, layout.max_column):
                names[column(kept[_key(aggregate)])] = column(attribute.name)
        selected = engine.select(fragments, layout.fragment_schema(chosen).names)
        return engine.map_batches(
            selected, functools.partial(_renamed, names=names), layout.fragment_schema(public)
        )
    function = functools.partial(
        _answer_fragments, stored=stored, definition=in_view_terms(aggregates, definition), public=public
    )
    return engine.map_batches(fragments, function, layout.fragment_schema(public))


def _key(aggregate: ViewAggregate) -> tuple:
    attribute = None if aggregate.attribute is None else aggregate.attribute.lower()
    return (aggregate.function, aggregate.side, attribute)


def _renamed(table: pa.Table, names: dict[str, str]) -> pa.Table:
    return table.rename_columns([names.get(c, c) for c in table.column_names])


__all__ = [
    "AnswerPlan",
    "Candidate",
    "QueryEngine",
    "WayCost",
    "answer_through_view",
    "delta_shapes",
    "plan_answer",
    "public_answer",
    "usable",
]
