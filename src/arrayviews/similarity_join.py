"""``db.similarity_join(alpha, beta, shape, mapping, value)``: the join as an array, either grouped by
alpha's cells with aggregates (the usual use; pairs never materialized) or as the full 2d-dimensional
array of pairs."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import pyarrow as pa

from arrayviews.array import Array
from arrayviews.execution.failures import translating
from arrayviews.kernels.simjoin import join_pairs
from arrayviews.model.errors import ArrayViewsError, NotFoundError, ValidationError
from arrayviews.model.mappings import Mapping
from arrayviews.model.names import unused_name
from arrayviews.model.schema import ArraySchema, Attribute, Dimension
from arrayviews.model.shapes import Shape, check_shape
from arrayviews.operators import halo, simjoin
from arrayviews.operators.cells import cells_to_fragment_table
from arrayviews.operators.simjoin import JoinSpec
from arrayviews.operators.source import ComputedSource, StoredSource
from arrayviews.storage import kinds, layout
from arrayviews.view import View
from arrayviews.views import answering, state
from arrayviews.views import similarity as views_similarity
from arrayviews.views.definition import (
    SimilarityViewDefinition,
    ViewAggregate,
    attributes_spelled,
    check_aggregates,
    parse_view_aggregate,
    similarity,
)
from arrayviews.views.source import public_schema
from arrayviews.views.view import reflected_snapshots, reflected_versions

if TYPE_CHECKING:
    from arrayviews.database import Database


@translating
class SimilarityJoin:
    """A similarity join not computed yet; ``aggregate`` or ``materialize`` runs it."""

    def __init__(
        self, db: Database, left: Array, right: Array, shape: Shape, mapping=None, value=None
    ) -> None:
        self._db, self.left, self.right = db, left, right
        self.spec = JoinSpec(left.schema, right.schema, shape, Mapping.of(left.schema, right.schema, mapping))
        self.value = value

    def _pairs(self) -> list:
        left_chunks = views_similarity._chunks_of(self.left.source)
        right_chunks = views_similarity._chunks_of(self.right.source)
        return simjoin.plan_pairs(self.spec, left_chunks, right_chunks)

    def _definition(self, aggregates: tuple[str, ...]):
        if not aggregates:
            raise ValidationError(
                "similarity join aggregate needs at least one aggregate, e.g. 'count(*) as cnt'"
            )
        definition = similarity(
            self.left.name,
            self.right.name,
            self.spec.shape,
            [a if isinstance(a, ViewAggregate) else parse_view_aggregate(a) for a in aggregates],
            self.spec.mapping,
        )
        definition = attributes_spelled(definition, self.spec.left, self.spec.right)
        check_aggregates(definition, self.spec.left, self.spec.right)
        return definition

    def _candidates(self) -> list[answering.Candidate]:
        """The similarity views over the same two arrays (left and right as in the query), each at
        its current version. Only array views are opened; one that cannot be read is left out
        (``Database.check`` reports it)."""
        found = []
        for entry in self._db.catalog.entries(helpers=False):
            if entry.kind != kinds.ARRAY_VIEW:
                continue
            try:
                view = self._db.view(entry.name)
            except ArrayViewsError:
                continue
            definition = view.definition
            if not isinstance(definition, SimilarityViewDefinition) or (
                definition.left.lower(),
                definition.right.lower(),
            ) != (self.left.name.lower(), self.right.name.lower()):
                continue
            table = view._current().table
            found.append(
                answering.Candidate(
                    view.name,
                    definition,
                    table.schema,
                    reflected_versions(table),
                    StoredSource(table, table.current_version()),
                    reflected_snapshots(table),
                )
            )
        return sorted(found, key=lambda c: c.name.lower())

    def plan(self, *aggregates: str, through: str | None = "auto") -> answering.AnswerPlan:
        """How ``aggregate(*aggregates, through=through)`` would be answered, and why (nothing runs)."""
        definition = self._definition(aggregates)
        return self._plan(definition, through)

    def explain(self, *aggregates: str, through: str | None = "auto") -> str:
        """The text of :meth:`plan`: the way chosen, the cost of each way, the views not usable."""
        return self.plan(*aggregates, through=through).text()

    def _sources(self):
        """Both sides' sources read once: every later step of one query reads these versions (a
        self-join reads one version on both sides), whatever commits meanwhile."""
        left = self.left.source
        if self.right is self.left:
            return left, left
        right = self.right.source
        one_array = (  # a filter or subarray of the array is another input, though it has its name
            isinstance(left, StoredSource)
            and isinstance(right, StoredSource)
            and not self.left._pinned
            and not self.right._pinned
            and self.right.name == self.left.name
        )
        return left, (left if one_array else right)

    def _plan(self, definition, through, sources=None) -> answering.AnswerPlan:
        through = self._through(through)
        left, right = sources or self._sources()
        if not all(isinstance(s, StoredSource) for s in (left, right)):
            plan = answering.AnswerPlan(self.spec.shape, "scratch")
            if through not in ("auto", "none", None):
                raise ValidationError(
                    f"view {through} cannot answer this similarity aggregate: it joins a computed array, "
                    "not a stored one"
                )
            plan.reason = "a computed (not stored) array is joined: no view holds it"
            return plan
        return answering.plan_answer(
            self._db.executors.costs,
            self._db.executors.choose,
            self.spec,
            definition.aggregates,
            left,
            right,
            [] if through in ("none", None) else self._candidates(),
            through,
        )

    def _through(self, through: str | None) -> str | None:
        """``through`` checked: "auto", "none", None, or the catalog's spelling of an array view's name
        (names are compared without regard to case); a missing or non-view name is refused by name."""
        if isinstance(through, View):  # a view's handle stands for its name
            through = through.name
        elif isinstance(through, Array):
            raise ValidationError(
                f"through={through.name}: a query is answered through a view (or a view's name), 'auto' "
                f"or 'none', not through an array such as {through.name}",
                array=through.name,
            )
        if through is not None and not isinstance(through, str):
            raise ValidationError(
                f"through must be 'auto', 'none' or a view (or its name), got {type(through).__name__} "
                f"{through!r:.60}"
            )
        if through in ("auto", "none", None):
            return through
        kind = self._db.kind_of(through)
        if kind is None:
            views = ", ".join(self._db.views()) or "none"
            raise NotFoundError(
                f"no view named {through} to answer through (views: {views}; or through='auto' or 'none')"
            )
        if kind != kinds.ARRAY_VIEW:
            article = "an" if kind[0] in "aeiou" else "a"
            raise ValidationError(
                f"{through} is {article} {kind}, not an array view: it cannot answer a query"
            )
        return self._db.catalog.entry(through).name

    def aggregate(self, *aggregates: str, through: str | None = "auto") -> Array:
        """One cell per left cell that has a pair, e.g. ``aggregate("count(*) as cnt", "avg(right.v) as m")``.

        ``through``: ``"auto"`` answers through a similarity view over the same arrays when the cost
        model predicts it cheaper (paper 000, section 5: the view plus the join over the delta shape),
        ``"none"`` always from the base arrays, a view's name through that view (refused, with the
        reason, when it cannot answer). The answer is the same either way, to the last bit. The
        arrays and the view are each read at one version, fixed when the call starts."""
        definition = self._definition(aggregates)
        left, right = self._sources()
        plan = self._plan(definition, through, (left, right))
        public = public_schema(
            state.stored_schema(
                self.left.name, definition, self.spec.left, self.spec.right, self.spec.left.dimensions
            )
        )
        if plan.chosen == "view":
            candidate = plan.candidate  # the view at the version whose reflected versions were checked
            estimate = left.estimate() + right.estimate() + candidate.source.estimate()
            engine, choice = self._db.executors.choose(estimate)
            told = answering.QueryEngine(engine, self.left.name, self.right.name, candidate.name)
            fragments = answering.answer_through_view(
                told, plan, candidate, self.spec, left, right, definition.aggregates
            )
            out = public.with_dimensions(candidate.stored.dimensions)
            frame = answering.public_answer(
                told, fragments, candidate.stored, candidate.definition, definition.aggregates, out
            )
            return Array(self._db, ComputedSource(out, frame, engine=engine, choice=choice))
        stored = state.stored_schema(
            self.left.name, definition, self.spec.left, self.spec.right, self.spec.left.dimensions
        )
        engine, choice = self._db.executors.choose(left.estimate() + right.estimate())
        fragments, _ = views_similarity.full_computation(engine, self.spec, definition, stored, left, right)
        frame = engine.select(fragments, layout.fragment_schema(public).names)
        return Array(self._db, ComputedSource(public, frame, engine=engine, choice=choice))

    def _engine(self):
        """The engine for the join, chosen from what both sides read (metadata only)."""
        estimate = self.left.source.estimate() + self.right.source.estimate()
        return self._db.executors.choose(estimate)

    def pair_schema(self) -> ArraySchema:
        """Dimensions of both arrays (the right's renamed with a ``_2`` suffix when names clash), and the
        attributes of both (or those in ``value``)."""
        left, right = self.spec.left, self.spec.right
        rename = right_names(left, right)
        dims = list(left.dimensions) + [
            Dimension(rename[d.name], d.low, d.high, d.chunk_length, d.chunk_origin, d.scale)
            for d in right.dimensions
        ]
        attrs = list(left.attributes) + [
            Attribute(rename[a.name], a.type, a.nullable) for a in right.attributes
        ]
        if self.value is not None:
            wanted = list(self.value)
            attrs = [a for a in attrs if a.name in wanted]
        return ArraySchema(f"{left.name}_join_{right.name}", tuple(attrs), tuple(dims))

    def materialize(self) -> Array:
        """The full 2d-dimensional join result: one cell per pair (left cell, right cell)."""
        out = self.pair_schema()
        pairs = self._pairs()
        engine, choice = self._engine()
        left_rows = simjoin.route_left(engine, self.left.source.data(engine), self.spec, simjoin.LEFT_OLD)
        right_rows = simjoin.route_right(
            engine, self.right.source.data(engine), self.spec, pairs, simjoin.RIGHT_OLD
        )
        function = functools.partial(_pairs_of_chunk, spec=self.spec, out=out)
        keys = halo.target_columns(self.spec.left.dimension_names)
        frame = engine.cogroup(left_rows, right_rows, keys, function, layout.fragment_schema(out))
        return Array(self._db, ComputedSource(out, frame, engine=engine, choice=choice))


def _pairs_of_chunk(
    left_rows: pa.Table, right_rows: pa.Table, spec: JoinSpec, out: ArraySchema
) -> pa.Table | None:
    if left_rows.num_rows == 0 or right_rows.num_rows == 0:
        return None
    left = halo.gather(left_rows, spec.left)
    right = halo.gather(right_rows, spec.right)
    i, j = join_pairs(spec.mapping.apply(left.coords, spec.left), right.coords, spec.shape)
    if len(i) == 0:
        return None
    columns = {}
    names = out.dimension_names
    for k in range(spec.left.ndim):
        columns[names[k]] = left.coords[i, k]
    for k in range(spec.right.ndim):
        columns[names[spec.left.ndim + k]] = right.coords[j, k]
    attributes = {a.name for a in out.attributes}
    rename = right_names(spec.left, spec.right)
    for side, points, index, schema in (("left", left, i, spec.left), ("right", right, j, spec.right)):
        for attribute in schema.attributes:
            name = attribute.name if side == "left" else rename[attribute.name]
            if name not in attributes:
                continue
            mask = points.nulls.get(attribute.name)
            columns[name] = pa.array(
                points.values[attribute.name][index],
                layout.arrow_type_of(attribute),
                mask=None if mask is None else mask[index],
            )
    table = pa.table(
        {n: columns[n] for n in [*names, *[a.name for a in out.attributes]]}, schema=layout.cell_schema(out)
    )
    return cells_to_fragment_table(table, out)


def right_names(left: ArraySchema, right: ArraySchema) -> dict[str, str]:
    """The pair array's name for each dimension and attribute of the right array: its own, or with a
    ``_2`` (``_3``, ...) suffix when the left array or an earlier right name already uses it."""
    taken = set(left.dimension_names) | set(left.attribute_names)
    names = {}
    for name in (*right.dimension_names, *right.attribute_names):
        names[name] = unused_name(name, taken)
        taken.add(names[name])
    return names


def similarity_join(db: Database, alpha, beta, shape: Shape, mapping=None, value=None) -> SimilarityJoin:
    for side, array in (("left", alpha), ("right", beta)):
        if not isinstance(array, Array | str):
            raise ValidationError(
                f"similarity join: the {side} array is an Array or an array name, got {type(array).__name__}"
            )
    check_shape(shape, "similarity join")
    left = alpha if isinstance(alpha, Array) else db.array(alpha)
    right = beta if isinstance(beta, Array) else db.array(beta)
    return SimilarityJoin(db, left, right, shape, mapping, value)



__all__ = ["SimilarityJoin", "similarity_join"]
