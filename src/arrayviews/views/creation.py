"""Creating an array view (computed and stored in one commit) and recomputing one from its bases
for verification; the refresh machinery they share is in ``views.view``."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import pandas as pd

from arrayviews.model.errors import AlreadyExistsError, NotFoundError, ValidationError
from arrayviews.model.faults import checkpoint
from arrayviews.operators import reads
from arrayviews.operators.source import ComputedSource, StoredSource
from arrayviews.storage import kinds
from arrayviews.storage.array_table import ArrayTable, CommitInfo
from arrayviews.views import history, similarity, windowed
from arrayviews.views.commit import write_view_files
from arrayviews.views.definition import (
    SimilarityViewDefinition,
    ViewDefinition,
    WindowViewDefinition,
    attributes_spelled,
    spelled,
)
from arrayviews.views.refresh_cost import cost_of
from arrayviews.views.view import (
    BASE_KEY,
    DEFINITION_PROPERTY,
    _base_schemas,
    _execute,
    _pinned_bases,
    _prepare,
    join_spec,
    reflected_versions,
    snapshot_properties,
    view_schemas,
)

if TYPE_CHECKING:
    from arrayviews.model.schema import ArraySchema
    from arrayviews.views.protocols import ArrayDatabase as Database


def compute_from_scratch(db: Database, view) -> pd.DataFrame:
    """The view's public content recomputed from its base arrays at the versions its current
    version reflects (nothing is stored): a view left behind by its bases, or brought forward on
    some bases only, is compared with what it claims to hold. A base whose reflected version is no
    longer held (expired) is read at its current version."""
    definition = view.definition
    reflected = reflected_versions(view._current().table)

    def base(name: str):
        array = db.array(name)
        version = reflected.get(name)
        if version is None or version == array.version:
            return array
        try:
            return array.at_version(version)
        except NotFoundError:
            return array

    if isinstance(definition, WindowViewDefinition):
        flat = [x for pair in zip(definition.before, definition.after, strict=True) for x in pair]
        return base(definition.base).window(flat, *definition.aggregates).to_pandas()
    stored = view._current().stored_schema
    spec = join_spec(db, definition)
    left, right = base(definition.left).source, base(definition.right).source
    engine, _ = db.executors.choose(left.estimate() + right.estimate())
    fragments, _ = similarity.full_computation(engine, spec, definition, stored, left, right)
    computed = ComputedSource(stored, fragments, db.scratch_location, engine=engine)
    table = reads.to_arrow(computed)
    return table.select(list(view._public.dimension_names) + list(view._public.attribute_names)).to_pandas()


def create_view(
    db: Database, name: str, definition: ViewDefinition, chunks=None
) -> tuple[ArrayTable, ArraySchema, ViewDefinition]:
    """Create a view, compute it and store it as its first version: the table is created and
    filled in one commit, so a crash leaves either the whole view or no view. Returns the view's
    table, public schema and definition as stored (a similarity mapping resolved)."""
    # bases named as the catalog spells them: a self-join written `sky` and `SKY` reads one base
    definition = spelled(definition, lambda base: getattr(db.catalog.entry(base), "name", base))
    _refuse_views_as_bases(db, name, definition)
    if isinstance(definition, SimilarityViewDefinition) and definition.mapping is not None:
        # a mapping given as {right dim: left dim or AxisMap} is stored resolved against the bases
        definition = replace(definition, mapping=join_spec(db, definition).mapping)
    if isinstance(definition, WindowViewDefinition):  # durations on time dimensions, as cells
        definition = windowed.in_cells(definition, db.array(definition.base).schema)
    else:  # attributes as the bases spell them
        definition = attributes_spelled(definition, *_base_schemas(db, definition, None))
    public, stored = view_schemas(db, name, definition, chunks)
    if db.warehouse.exists(name):
        holder = kinds.with_article(db.kind_of(name) or kinds.ARRAY)
        raise AlreadyExistsError(f"{holder} named {name} already exists")

    read: dict[str, StoredSource] = {}

    def fill(data_directory: str) -> tuple[list[str], CommitInfo]:
        started = time.perf_counter()
        bases = _pinned_bases(db, definition)
        read.update(bases)
        checkpoint("refresh.start")
        prepared = _prepare(db, definition, stored, bases, "full", {}, None, name)
        pairs = prepared.context.get("pairs")
        # the view's chunks-to-be: the left chunks the join fills (window views: the base's chunks)
        written = len({p for p, _ in pairs}) if pairs is not None else prepared.pairs
        cost = cost_of(
            db.executors,
            "full",
            prepared.estimate,
            prepared.pairs,
            None,
            written,
            full_join=isinstance(definition, SimilarityViewDefinition),
        )
        engine = db.executors.engine(cost.choice.executor)
        fragments, _, triples, _ = _execute(db, engine, prepared)
        checkpoint("refresh.computed")
        written = (
            write_view_files(engine, fragments, data_directory, stored, 1) if fragments is not None else []
        )
        checkpoint("refresh.written")
        checkpoint("refresh.before-commit")
        properties = {BASE_KEY + b: str(source.version) for b, source in bases.items()}
        properties.update(snapshot_properties(bases))
        properties.update({"strategy": "full", "update-triples": str(triples), history.EXECUTOR: engine.name})
        # the creation's cost calibrates later predictions of a full refresh (refresh_cost.py)
        properties.update(
            {
                history.ESTIMATES: json.dumps({"full": cost.as_dict()}, sort_keys=True),
                history.SECONDS: f"{time.perf_counter() - started:.6f}",
                history.DECISION: "create",
            }
        )
        return [w.uri for w in written], CommitInfo(
            "create", cells_added=sum(w.cells for w in written), properties=properties
        )

    table = db.warehouse.create(
        stored,
        kind=kinds.STORED_ARRAY_VIEW,
        properties={DEFINITION_PROPERTY: definition.to_json()},
        fill=fill,
    )
    _undo_if_a_base_went(db, name, table, read)
    return table, public, definition


def _undo_if_a_base_went(db: Database, name: str, view: ArrayTable, read: dict[str, StoredSource]) -> None:
    """A base dropped by another process while the view was computed (its drop found no view
    reading it yet) would leave a view over nothing: the new view is dropped again and the
    creation fails, naming the base."""
    for base, source in read.items():
        try:
            same = db.warehouse.open(base).identity == source.table.identity
        except NotFoundError:
            same = False
        if not same:
            db.warehouse.drop(name, view.identity)
            raise NotFoundError(
                f"view {name} was not created: its base {base} was dropped by another process while "
                "the view was computed"
            )


def _refuse_views_as_bases(db: Database, name: str, definition: ViewDefinition) -> None:
    """A view may read other views (their public aggregates, at the versions it records), never
    itself; a view only reads relations that exist when it is created, so no cycle can form."""
    for base in definition.bases:
        if base.lower() == name.lower():
            raise ValidationError(f"view {name} cannot read itself")


__all__ = ["compute_from_scratch", "create_view"]
