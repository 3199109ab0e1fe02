"""Array views: their schemas, full and baseline refresh, and the plans and costs of a refresh.

The ``View`` handle users hold is ``arrayviews.view.View`` (the facade); these functions read base
arrays through the read protocol of ``views.protocols``.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from arrayviews.execution.cost import Estimate
from arrayviews.execution.engine import Engine
from arrayviews.execution.failures import file_gone
from arrayviews.model.errors import CommitConflictError, NotFoundError, ValidationError
from arrayviews.model.faults import checkpoint
from arrayviews.model.mappings import Mapping
from arrayviews.model.schema import ArraySchema, Dimension
from arrayviews.operators.deltas import source_delta
from arrayviews.operators.simjoin import JoinSpec
from arrayviews.operators.source import StoredSource
from arrayviews.operators.window import window_extents
from arrayviews.storage.array_table import ArrayTable, CommitInfo
from arrayviews.storage.snapshots import BaseMovedError
from arrayviews.views import history, similarity, state, windowed
from arrayviews.views.commit import replace_chunks
from arrayviews.views.definition import (
    SimilarityViewDefinition,
    ViewDefinition,
    WindowViewDefinition,
    check_aggregates,
    definition_from_json,
)
from arrayviews.views.refresh_cost import (
    FULL_FRACTION,
    FULL_JOBS,
    INCREMENTAL_JOBS,
    StrategyCost,
    choose_strategy,
    clearly_cheaper,
    cost_of,
    previous_full_pairs,
)
from arrayviews.views.source import ViewSource, base_source, public_schema

if TYPE_CHECKING:
    from arrayviews.views.protocols import ArrayDatabase as Database

DEFINITION_PROPERTY = "arrayviews.view.definition"
STRATEGIES = ("auto", "full", "baseline")
BASE_KEY = history.BASE_PREFIX
SNAPSHOT_KEY = history.BASE_SNAPSHOT_PREFIX


@dataclass(frozen=True)
class RefreshResult:
    """What a refresh did."""

    view: str
    strategy: str
    committed: bool
    version: int
    base_versions: dict[str, tuple[int, int]] = field(default_factory=dict)
    update_triples: int = 0
    view_chunks_rewritten: int = 0
    cells_recomputed: int = 0  # view cells whose min/max was recomputed because their extreme left
    seconds: float = 0.0
    message: str = ""
    #: The strategy asked for ("auto" chooses full or baseline by predicted cost).
    requested: str = ""
    #: Which executor ran the refresh ("local" or "spark") and why.
    executor: str = ""
    executor_reason: str = ""
    #: Why this strategy ran (the comparison of "auto", or that it was asked for).
    strategy_reason: str = ""
    #: The kind of decision: cheaper, probe (re-measuring a close strategy), touched (the batch
    #: touches most view chunks), asked, expired.
    decision: str = ""
    #: Per strategy considered: cells, bytes, chunks, jobs, pairs, executor and predicted seconds.
    estimates: dict = field(default_factory=dict)
    #: Per step (plan, compute+write, commit): executor, predicted and measured seconds.
    operations: list = field(default_factory=list)

    def __str__(self) -> str:
        return self.message


def reflected_versions(table: ArrayTable) -> dict[str, int]:
    """The base array versions the view's current version reflects."""
    current = table.current()
    if current is None:
        return {}
    return {k[len(BASE_KEY) :]: int(v) for k, v in current.properties.items() if k.startswith(BASE_KEY)}


def reflected_snapshots(table: ArrayTable) -> dict[str, int]:
    """The snapshot ids of the base versions the view's current version reflects (bases at version
    0, and views refreshed before these were recorded, have none)."""
    current = table.current()
    if current is None:
        return {}
    return {
        k[len(SNAPSHOT_KEY) :]: int(v) for k, v in current.properties.items() if k.startswith(SNAPSHOT_KEY)
    }


def snapshot_properties(bases: dict[str, StoredSource]) -> dict[str, str]:
    """The view version's record of the snapshot of each pinned base version."""
    out = {}
    for base, source in bases.items():
        snapshot = source.table.snapshot_of(source.version) if source.version else None
        if snapshot is not None:
            out[SNAPSHOT_KEY + base] = str(snapshot)
    return out


def frames_agree(actual: pd.DataFrame, expected: pd.DataFrame) -> bool:
    """Same cells and the same values, floats to the last bit (nulls and NaN alike)."""
    if list(actual.columns) != list(expected.columns) or len(actual) != len(expected):
        return False
    for column in actual.columns:
        left, right = actual[column].to_numpy(), expected[column].to_numpy()
        if left.dtype.kind == "f" or right.dtype.kind == "f":
            left, right = left.astype(float), right.astype(float)
            same = (left == right) | (np.isnan(left) & np.isnan(right))
            if not same.all():
                return False
        elif not np.array_equal(pd.isna(left), pd.isna(right)) or not np.array_equal(
            left[~pd.isna(left)], right[~pd.isna(right)]
        ):
            return False
    return True


# -- creation -------------------------------------------------------------------------------------
def view_schemas(
    db: Database, name: str, definition: ViewDefinition, chunks=None, bases: dict | None = None
) -> tuple[ArraySchema, ArraySchema]:
    """(public schema, stored schema) of a view (base schemas from ``bases`` when given, as pinned)."""
    if isinstance(definition, WindowViewDefinition):
        base = db.array(definition.base)
        flat = [x for pair in zip(definition.before, definition.after, strict=True) for x in pair]
        public = base.window(flat, *definition.aggregates).schema.renamed(name)
        if chunks is not None and list(_dimensions(public, chunks)) != list(public.dimensions):
            raise ValidationError(f"window view {name}: the view keeps the chunking of {definition.base}")
        return public, public
    left, right = _base_schemas(db, definition, bases)
    check_aggregates(definition, left, right)
    dims = _dimensions(left, chunks)
    stored = state.stored_schema(name, definition, left, right, dims)
    public = ArraySchema(name, tuple(state.public_attributes(definition, left, right)), tuple(dims))
    return public, stored


def _dimensions(schema: ArraySchema, chunks) -> list[Dimension]:
    if chunks is None:
        return list(schema.dimensions)
    if not isinstance(chunks, dict) and len(chunks) != schema.ndim:
        raise ValidationError(
            f"chunks gives {len(chunks)} length(s); {schema.name} has {schema.ndim} dimension(s)"
        )
    lengths = chunks if isinstance(chunks, dict) else dict(zip(schema.dimension_names, chunks, strict=True))
    for dimension in lengths:
        schema.dimension(dimension)
    return [
        Dimension(d.name, d.low, d.high, int(lengths.get(d.name, d.chunk_length)), scale=d.scale)
        for d in schema.dimensions
    ]


def _base_schemas(db: Database, definition: SimilarityViewDefinition, bases: dict | None):
    """The left and right base schemas: from the pinned ``bases`` (no catalog read) or the catalog."""
    if bases is not None:
        return bases[definition.left].schema, bases[definition.right].schema
    return db.array(definition.left).schema, db.array(definition.right).schema


def join_spec(db: Database, definition: SimilarityViewDefinition, bases: dict | None = None) -> JoinSpec:
    left, right = _base_schemas(db, definition, bases)
    return JoinSpec(left, right, definition.shape, Mapping.of(left, right, definition.mapping))


# -- refresh ---------------------------------------------------------------------------------------
#: How many times a refresh is planned again after another refresh of the view committed first.
MAX_REFRESH_ATTEMPTS = 5
#: The commit property naming the bases a refresh brought forward (absent before partial refreshes
#: existed: all of them).
ADVANCED_KEY = history.ADVANCED


def refresh_view(db: Database, view, strategy: str, advance: Iterable[str] | None = None) -> RefreshResult:
    """Refresh the view; if another process refreshed it first, report that it is already as
    fresh (nothing committed) or, when the other refresh reflects older base versions, plan again.

    ``advance`` names the base arrays whose pending batches are processed (None: every base); the
    other bases stay at the versions the view reflects, so the new view version is the view of the
    advanced bases' current versions and the others' reflected ones (an asymmetric refresh, the
    action of paper 003's maintenance plans)."""
    chosen = advanced_bases(view, advance)
    lost: BaseMovedError | None = None
    for attempt in range(MAX_REFRESH_ATTEMPTS):
        try:
            return _run_refresh(db, view, strategy, chosen)
        except BaseMovedError as moved:
            lost = moved
            time.sleep(random.uniform(0.0, 0.1))
        except Exception as error:
            # a file the plan named went meanwhile (read in-process or by Spark): another process
            # compacted and expired a base (or the view) after this refresh pinned its versions;
            # planned again on what is there now (a reflected version that was expired makes it a
            # full refresh)
            if attempt == MAX_REFRESH_ATTEMPTS - 1 or not file_gone(error):
                raise
            time.sleep(random.uniform(0.0, 0.05))
    raise CommitConflictError(
        f"view {view.name}: refresh lost the commit to other refreshes {MAX_REFRESH_ATTEMPTS} times "
        f"({lost}); nothing was committed"
    )


def advanced_bases(view, advance: Iterable[str] | None) -> tuple[str, ...]:
    """The bases a refresh brings forward: all of the view's with None, else the named ones
    (ValidationError, naming the view, for a name that is not one of its bases or for none)."""
    bases = tuple(view.definition.bases)
    if advance is None:
        return bases
    if isinstance(advance, str):
        names = [advance]
    elif isinstance(advance, Iterable) and not isinstance(advance, bytes | dict):
        names = list(advance)
    else:
        raise ValidationError(
            f"view {view.name}: the bases to refresh are a base array's name or a list of them, "
            f"got {advance!r} (its bases: {', '.join(bases)})",
            array=view.name,
            value=repr(advance),
        )
    spelled = {b.lower(): b for b in bases}  # names are compared without regard to case
    unknown = [n for n in names if not isinstance(n, str) or n.lower() not in spelled]
    if unknown:
        raise ValidationError(
            f"view {view.name}: {', '.join(map(str, unknown))} is not a base array of the view "
            f"(its bases: {', '.join(bases)})"
        )
    if not names:
        raise ValidationError(f"view {view.name}: a refresh must advance at least one base array")
    chosen = {spelled[n.lower()] for n in names}
    return tuple(b for b in bases if b in chosen)


def _pinned_bases(
    db: Database,
    definition: ViewDefinition,
    reflected: dict[str, int] | None = None,
    advance: tuple[str, ...] | None = None,
    view_name: str | None = None,
    recorded: dict[str, int] | None = None,
) -> dict[str, StoredSource]:
    """Every base array pinned once: the ones in ``advance`` (all with None) at their current
    version, the others at the version the view reflects. The refresh reads exactly these snapshots
    and records exactly these versions; ``view_name`` names the view in errors."""
    pinned = {}
    for base in definition.bases:
        table = open_base(db, base, view_name)
        stays = advance is not None and base not in advance and reflected and base in reflected
        if stays and not _held(table, reflected[base], (recorded or {}).get(base)):
            raise NotFoundError(
                ("" if view_name is None else f"view {view_name}: ")
                + f"{base} v{reflected[base]}, the version the view reflects, has expired: a refresh that "
                f"leaves {base} behind (on {', '.join(advance) or 'no base'} only) would join with it; "
                "refresh every base instead"
            )
        pinned[base] = base_source(table, reflected[base] if stays else table.current_version())
    return pinned


def _held(table: ArrayTable, version: int, snapshot: int | None = None) -> bool:
    """Whether ``table`` still holds ``version`` (0, before the first, always is), as the commit
    ``snapshot`` when given: after a roll-back another commit may carry the same number."""
    if not version:
        return True
    try:
        found = table.snapshot_of(version)
    except KeyError:
        return False
    return snapshot is None or found == snapshot


def open_base(db: Database, base: str, view_name: str | None = None) -> ArrayTable:
    """The table of base array ``base``; NotFoundError naming the view and what to do when it is gone
    (only a drop killed between its catalog delete and its put-back leaves a view over no array)."""
    try:
        return db.warehouse.open(base)
    except NotFoundError:
        who = "a view" if view_name is None else f"view {view_name}"
        raise NotFoundError(
            f"{who} reads array {base}, which has no catalog entry: a drop of {base} was killed before it "
            f"could put it back for the view; `arrayviews check --repair` registers {base} again (or "
            "drop the view)"
        ) from None


def expired_bases(db: Database, view) -> tuple[str, ...]:
    """The bases of ``view`` whose version the view reflects has expired: no refresh that leaves
    one of them behind can run (a refresh of every base, in full, still can)."""
    table = view._current().table
    reflected, recorded = reflected_versions(table), reflected_snapshots(table)
    return tuple(
        base
        for base in view.definition.bases
        if not _held(open_base(db, base, view.name), reflected.get(base, 0), recorded.get(base))
    )


def replaced_bases(db: Database, view) -> tuple[str, ...]:
    """The bases of ``view`` rolled back past the version it reflects (``db.check(repair=True)``):
    that version is gone, or is another commit given the same number since. The view then holds
    cells its base no longer has: only a full refresh brings it in line."""
    table = view._current().table
    reflected, recorded = reflected_versions(table), reflected_snapshots(table)
    out = []
    for base in view.definition.bases:
        source = open_base(db, base, view.name)
        version = reflected.get(base, 0)
        if (
            version > source.current_version()
            or base in recorded
            and version
            and _held(source, version)
            and not _held(source, version, recorded[base])
        ):
            out.append(base)
    return tuple(out)


@dataclass
class Prepared:
    """A refresh planned from metadata and the deltas, before anything is computed."""

    definition: ViewDefinition
    stored: ArraySchema
    bases: dict[str, StoredSource]
    strategy: str
    estimate: Estimate
    pairs: int = 0
    affected: np.ndarray | None = None  # view chunks to rewrite (None: all)
    context: dict = field(default_factory=dict)
    rewritten: int | None = None  # of ``affected``, the chunks that can hold cells (the estimate's)


def _prepare(
    db: Database,
    definition: ViewDefinition,
    stored: ArraySchema,
    bases: dict[str, StoredSource],
    strategy: str,
    reflected: dict[str, int],
    view_source: ViewSource | None,
    view_name: str,
    known_pairs: int | None = None,
    touched_cutoff: int | None = None,
    view_chunks: np.ndarray | None = None,
) -> Prepared:
    """Plan bringing a view reflecting ``reflected`` to the pinned ``bases`` with ``strategy``:
    the deltas (incremental only), the chunks to rewrite, and what the computation reads.

    For the estimate of ``auto`` only: a full plan with ``known_pairs`` takes that count of chunk
    pairs instead of counting them; an incremental plan of a similarity view stops after the deltas
    when the view chunks they certainly touch reach ``touched_cutoff`` (the plan is then marked
    ``partial`` and cannot run)."""
    if isinstance(definition, WindowViewDefinition):
        base = bases[definition.base]
        before, after = window_extents(
            base.schema, [x for p in zip(definition.before, definition.after, strict=True) for x in p]
        )
        context = {"before": before, "after": after}
        if strategy == "full":
            estimate = Estimate(**{**base.estimate().__dict__, "jobs": FULL_JOBS})
            computed = similarity.chunk_count(base)  # every chunk of the base is computed
            return Prepared(definition, stored, bases, strategy, estimate, computed, context=context)
        delta = source_delta(replace(base, version=reflected.get(definition.base, 0)), base)
        checkpoint("refresh.delta")
        estimate, affected = windowed.incremental_estimate(base, delta, stored, before, after, view_source)
        context["reached"] = estimate.reached
        estimate = Estimate(estimate.cells, estimate.bytes, len(affected), INCREMENTAL_JOBS)
        return Prepared(definition, stored, bases, strategy, estimate, len(affected), affected, context)
    spec = join_spec(db, definition, bases)
    left, right = bases[definition.left], bases[definition.right]
    context = {"spec": spec}
    if strategy == "full":
        both = left.estimate() if definition.right == definition.left else left.estimate() + right.estimate()
        estimate = Estimate(both.cells, both.bytes, both.chunks, FULL_JOBS)
        if known_pairs is not None:
            return Prepared(definition, stored, bases, strategy, estimate, known_pairs, context=context)
        # every chunk pair of the join, from chunk metadata (the full computation reuses them)
        pairs = similarity.full_pairs(spec, left, right)
        context["pairs"] = pairs
        return Prepared(definition, stored, bases, strategy, estimate, len(pairs), context=context)
    old_left = replace(left, version=reflected.get(definition.left, 0))
    old_right = replace(right, version=reflected.get(definition.right, 0))
    left_delta = source_delta(old_left, left)
    right_delta = left_delta if definition.right == definition.left else source_delta(old_right, right)
    checkpoint("refresh.delta")
    if touched_cutoff is not None and view_chunks is not None:
        certain = similarity.certainly_touched(
            spec, definition, stored, left_delta, view_chunks, touched_cutoff
        )
        if certain is not None:
            cells = left_delta.minus.num_rows + left_delta.plus.num_rows
            estimate = Estimate(cells, 0, len(certain), INCREMENTAL_JOBS)
            context["partial"] = True
            return Prepared(definition, stored, bases, strategy, estimate, len(certain), certain, context)
    state.check_layout(definition, stored, view_schemas(db, view_name, definition, bases=bases)[1])
    plan = similarity.plan_baseline(spec, old_left, old_right, left_delta, right_delta)
    affected = similarity.affected_view_chunks(spec, stored, plan)
    kept = (
        view_source.estimate(similarity.bounding_ranges(affected))
        if view_source is not None and len(affected)
        else Estimate()
    )
    if view_chunks is None:
        view_chunks = similarity.chunk_list(view_source) if view_source is not None else np.zeros((0, 0))
    # the estimate counts the affected view chunks that can hold cells, not every chunk overlapping
    # a left chunk with work (a view chunked finer than its base has many empty ones)
    rewritten = similarity.holding_cells(spec, definition, stored, affected, view_chunks, left_delta)
    jobs = INCREMENTAL_JOBS + (1 if _loses_extremes(definition, left_delta, right_delta) else 0)
    estimate = Estimate(plan.base_cells + plan.delta_cells + kept.cells, kept.bytes, rewritten, jobs)
    context.update(
        old_left=old_left, old_right=old_right, left_delta=left_delta, right_delta=right_delta, plan=plan
    )
    pairs = len(plan.first) + len(plan.second) + len(plan.third)  # the chunk pairs of the three terms
    return Prepared(definition, stored, bases, strategy, estimate, pairs, affected, context, rewritten)


def _loses_extremes(definition: SimilarityViewDefinition, left_delta, right_delta) -> bool:
    loses = left_delta.minus.num_rows or right_delta.minus.num_rows
    return bool(loses) and any(
        a.function in ("min", "max") and a.side == "right" for a in definition.aggregates
    )


def _execute(db: Database, engine: Engine, prepared: Prepared, view_source: ViewSource | None = None):
    """(new fragments or None, affected view chunks or None for all, update triples, cells whose
    min/max were recomputed): the prepared refresh as a plan of ``engine`` (it runs when written)."""
    definition, stored, bases = prepared.definition, prepared.stored, prepared.bases
    context = prepared.context
    if isinstance(definition, WindowViewDefinition):
        base = bases[definition.base]
        before, after = context["before"], context["after"]
        if prepared.strategy == "full":
            fragments = windowed.window_fragments(
                engine, base, before, after, definition.aggregates, None, stored
            )
            return fragments, None, 0, 0
        affected = prepared.affected
        fragments = (
            windowed.window_fragments(
                engine, base, before, after, definition.aggregates, affected, stored, context["reached"]
            )
            if len(affected)
            else None
        )
        return fragments, affected, len(affected), 0
    spec = context["spec"]
    left, right = bases[definition.left], bases[definition.right]
    if prepared.strategy == "full":
        fragments, plan = similarity.full_computation(
            engine, spec, definition, stored, left, right, context.get("pairs")
        )
        return fragments, None, len(plan.triples), 0
    fragments, affected, plan = similarity.baseline_refresh(
        engine,
        spec,
        definition,
        stored,
        context["old_left"],
        context["old_right"],
        context["left_delta"],
        context["right_delta"],
        view_source,
        left_new=left,
        right_new=right,
        plan=context["plan"],
    )
    return fragments, affected, len(plan.triples), plan.cells_recomputed


def _expired(
    bases: dict[str, StoredSource], reflected: dict[str, int], recorded: dict[str, int] | None = None
) -> str | None:
    """The first base whose reflected version was expired, or replaced by another commit after a
    roll-back (no delta can be formed), or None."""
    for base, version in reflected.items():
        if base in bases and not _held(bases[base].table, version, (recorded or {}).get(base)):
            return base
    return None


def _plan_strategy(
    db: Database,
    view,
    requested: str,
    bases: dict[str, StoredSource],
    reflected: dict[str, int],
    view_source: ViewSource,
) -> tuple[Prepared, StrategyCost, dict[str, StrategyCost], str, str]:
    """The prepared refresh to run, its cost, the cost of every strategy considered, why, and the
    kind of decision (cheaper, probe, touched, asked, expired)."""
    definition, stored = view.definition, view_source.table.schema
    expired = _expired(bases, reflected, reflected_snapshots(view_source.table))
    candidates = (
        ["full"]
        if expired or requested == "full"
        else (["baseline"] if requested == "baseline" else ["baseline", "full"])
    )
    prepared: dict[str, Prepared] = {}
    costs: dict[str, StrategyCost] = {}
    view_chunk_list = similarity.chunk_list(view_source)
    view_chunks = len(view_chunk_list)
    rows = history.refresh_history(view_source.table).to_dict("records")

    def plan(strategy: str, basis: str = "metadata", **options) -> None:
        prepared[strategy] = p = _prepare(
            db, definition, stored, bases, strategy, reflected, view_source, view.name, **options
        )
        if p.context.get("partial"):
            basis = "view chunks from the delta's chunks and the view's chunk list (no base planned)"
        costs[strategy] = cost_of(
            db.executors,
            strategy,
            p.estimate,
            p.pairs,
            None if p.affected is None else (len(p.affected) if p.rewritten is None else p.rewritten),
            view_chunks,
            basis,
            full_join=strategy == "full" and isinstance(definition, SimilarityViewDefinition),
        )

    if len(candidates) > 1:  # predictions corrected by what this view's refreshes measured
        # a batch that certainly touches most view chunks is refreshed in full: no incremental plan
        plan(
            "baseline",
            touched_cutoff=math.ceil(FULL_FRACTION * view_chunks) if view_chunks else None,
            view_chunks=view_chunk_list,
        )
        previous = previous_full_pairs(rows)
        if previous is not None and not prepared["baseline"].context.get("partial"):
            # full's chunk pairs as counted at the previous refresh, when incremental wins by far
            # even against that figure; counted again otherwise
            plan("full", f"chunk pairs counted at version {previous[1]}", known_pairs=previous[0])
            if not clearly_cheaper(costs["baseline"], costs["full"], rows):
                plan("full")
        else:
            plan("full")
        chosen, costs, decision = choose_strategy(costs, rows)
        if prepared[chosen.strategy].context.get("partial"):
            raise AssertionError("auto chose a partial incremental plan")  # the touched rule prevents it
        return prepared[chosen.strategy], chosen, costs, decision.reason, decision.kind
    for strategy in candidates:
        plan(strategy)
    if expired:
        reason = f"full: the version of {expired} the view reflects was expired (or rolled back), no delta can be formed"
        kind = "expired"
    else:
        reason = f"{candidates[0]}: asked for"
        kind = "asked"
    # a forced strategy still records its corrected prediction, to compare with what it measures
    chosen, costs, _ = choose_strategy(costs, rows)
    return prepared[chosen.strategy], chosen, costs, reason, kind


def explain_refresh(db: Database, view, strategy: str = "auto", advance: Iterable[str] | None = None) -> str:
    """The refresh plan of ``view`` now: estimates, executors and the choice (nothing runs)."""
    check_strategy(strategy, view.name)
    chosen_bases = advanced_bases(view, advance)
    table = view._current().table
    reflected = reflected_versions(table)
    bases = _pinned_bases(db, view.definition, reflected, chosen_bases, view.name)
    if all(reflected.get(b, 0) == s.version for b, s in bases.items()):
        return f"view {view.name} is up to date{_on(view, chosen_bases)} (nothing pending)"
    source = ViewSource(table, table.current_version(), table.schema)
    _, chosen, costs, reason, kind = _plan_strategy(db, view, strategy, bases, reflected, source)
    lines = [f"refresh of view {view.name}{_on(view, chosen_bases)} ({strategy}): {reason} [{kind}]"]
    for cost in costs.values():
        lines.append(
            f"  {cost.strategy}: reads {cost.estimate.text()}, {cost.pairs} chunk pair(s), rewrites "
            f"{cost.written_chunks} of {cost.view_chunks_total} view chunk(s) (counts: {cost.basis}); executor "
            f"{cost.choice.executor} ({cost.choice.reason}); model {cost.model_seconds:.3f} s x correction "
            f"{cost.correction:.2f} ({cost.correction_source}, {cost.correction_samples} refresh(es)) "
            f"= predicted {cost.seconds:.3f} s"
            + (
                ""
                if cost.last_measured is None
                else f"; last measured {cost.last_measured:.3f} s (version {cost.last_measured_version})"
            )
        )
    return "\n".join(lines)


def check_strategy(strategy: str, view: str | None = None) -> None:
    """ValidationError (naming ``view`` when given) unless ``strategy`` is one of :data:`STRATEGIES`."""
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        who = "" if view is None else f"view {view}: "
        raise ValidationError(
            f"{who}refresh strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}",
            array=view,
            value=repr(strategy),
        )


def _on(view, advance: tuple[str, ...]) -> str:
    """Words naming the advanced bases when a refresh leaves some bases behind."""
    return "" if set(advance) == set(view.definition.bases) else f" on {', '.join(advance)}"


def _run_refresh(db: Database, view, requested: str, advance: tuple[str, ...]) -> RefreshResult:
    started = time.perf_counter()
    table = view._current().table
    expected = table.current_version()
    reflected = reflected_versions(table)
    definition = view.definition
    recorded = reflected_snapshots(table)
    bases = _pinned_bases(db, definition, reflected, advance, view.name, recorded)
    current = {b: source.version for b, source in bases.items()}
    if all(reflected.get(b, 0) == v for b, v in current.items()) and not replaced_bases(db, view):
        return RefreshResult(
            view.name,
            requested,
            False,
            expected,
            {b: (v, v) for b, v in current.items()},
            message=f"view {view.name} is up to date{_on(view, advance)} (nothing pending)",
            requested=requested,
        )
    stored = table.schema
    view_source = ViewSource(table, expected, stored)
    checkpoint("refresh.start")
    prepared, chosen, costs, strategy_reason, decision = _plan_strategy(
        db, view, requested, bases, reflected, view_source
    )
    strategy = prepared.strategy
    engine = db.executors.engine(chosen.choice.executor)
    planned = time.perf_counter()
    jobs_before = engine.jobs_run()
    fragments, affected, triples, recomputed = _execute(db, engine, prepared, view_source)
    checkpoint("refresh.computed")
    properties = {BASE_KEY + b: str(v) for b, v in current.items()}
    properties.update(snapshot_properties(bases))
    properties.update({"strategy": strategy, "update-triples": str(triples), ADVANCED_KEY: ",".join(advance)})
    chunks_rewritten = "all" if affected is None else str(len(affected))
    timings: dict[str, float] = {}

    def report(measured: dict[str, float]) -> dict[str, str]:
        """The refresh report stored with the version (measured up to the commit itself)."""
        return history.report_properties(
            requested,
            chosen,
            strategy_reason,
            {name: cost.as_dict() for name, cost in costs.items()},
            decision,
            _operations(engine.name, chosen, planned - started, measured, None),
            planned - started + sum(measured.values()),
        )

    try:
        version = replace_chunks(
            engine,
            table,
            fragments,
            affected,
            expected,
            CommitInfo("refresh", properties=properties),
            timings=timings,
            annotate=report,
            cells=chosen.estimate.cells,
        )
    except BaseMovedError:
        table.refresh()
        now = reflected_versions(table)
        if all(now.get(b, 0) >= v for b, v in current.items()):
            return RefreshResult(
                view.name,
                strategy,
                False,
                table.current_version(),
                {b: (reflected.get(b, 0), now.get(b, 0)) for b in current},
                message=f"view {view.name} is already fresher: another refresh committed version "
                f"{table.current_version()} reflecting "
                + ", ".join(f"{b} v{now.get(b, 0)}" for b in current)
                + " first; this refresh committed nothing",
                requested=requested,
            )
        raise
    seconds = time.perf_counter() - started
    jobs = engine.jobs_run() - jobs_before
    where = "in-process" if engine.name == "local" else f"on Spark ({jobs} job(s))"
    return RefreshResult(
        view.name,
        strategy,
        True,
        version,
        {b: (reflected.get(b, 0), v) for b, v in current.items()},
        triples,
        0 if affected is None else len(affected),
        recomputed,
        seconds,
        f"refresh ({strategy}) of view {view.name}{_on(view, advance)}: now at version {version}, reflecting "
        + ", ".join(f"{b} v{v}" for b, v in current.items())
        + f"; {triples} update triple(s), view chunks rewritten: {chunks_rewritten}"
        + (f", min/max recomputed at {recomputed} cell(s)" if recomputed else "")
        + f"; {seconds:.2f} s {where}; {strategy_reason}; executor: {chosen.choice.reason}",
        requested=requested,
        executor=engine.name,
        executor_reason=chosen.choice.reason,
        strategy_reason=strategy_reason,
        decision=decision,
        estimates={name: cost.as_dict() for name, cost in costs.items()},
        operations=_operations(engine.name, chosen, planned - started, timings, jobs),
    )


def _operations(
    executor: str, chosen: StrategyCost, plan_seconds: float, measured: dict[str, float], jobs: int | None
) -> list[dict]:
    """The steps of a refresh with their executor, prediction and measured seconds."""
    steps = [{"operation": "plan", "executor": "driver", "seconds": round(plan_seconds, 6)}]
    if "write" in measured:
        steps.append(
            {
                "operation": "compute+write",
                "executor": executor,
                "cells": chosen.estimate.cells,
                "chunks": chosen.estimate.chunks,
                "predicted_seconds": round(chosen.seconds, 6),
                "seconds": round(measured["write"], 6),
                **({} if jobs is None else {"jobs": jobs}),
            }
        )
    if "commit" in measured:
        steps.append({"operation": "commit", "executor": "driver", "seconds": round(measured["commit"], 6)})
    return steps


def read_definition(table: ArrayTable) -> tuple[ViewDefinition, ArraySchema]:
    """The definition and public schema of the view stored in ``table`` (ValidationError for an array)."""
    properties = table.properties
    if DEFINITION_PROPERTY not in properties:
        raise ValidationError(f"{table.name} is an array, not a view")
    definition = definition_from_json(properties[DEFINITION_PROPERTY])
    return definition, public_schema(table.schema)


__all__ = [
    "ADVANCED_KEY",
    "BASE_KEY",
    "SNAPSHOT_KEY",
    "RefreshResult",
    "frames_agree",
    "check_strategy",
    "explain_refresh",
    "expired_bases",
    "reflected_snapshots",
    "replaced_bases",
    "advanced_bases",
    "read_definition",
    "refresh_view",
]
