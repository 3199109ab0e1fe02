"""The ``UncertainArray`` handle (paper 001): tuples with Gaussian positions, probabilistic Subarray and
Structure-Join, aggregates with existence probabilities, versions and time travel.

Obtained from ``db.create_uncertain_array(...)`` or ``db.uncertain_array(name)``. Operators return
result objects that run when read (``to_pandas``, ``to_arrow``, ``count``) and explain themselves
(``explain()``: the expanded regions, the step, the chunks to read) without reading tuples.
"""

from __future__ import annotations

import datetime as dt
import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa

from arrayviews.execution.failures import translating
from arrayviews.model.copy_layout import (
    STORE_ALL,
    STORE_MEAN,
    STORE_MULTIPLE,
    StorageLayout,
    normalize_scheme,
    normalize_steps,
)
from arrayviews.model.errors import ArrayViewsError, ValidationError
from arrayviews.model.uncertain import UncertainSchema
from arrayviews.model.uncertain_cost import StepChoice, UnitCosts
from arrayviews.operators import uncertain_writes
from arrayviews.operators.uncertain_aggregate import UncertainAggregate
from arrayviews.operators.uncertain_files import naming_missing_files
from arrayviews.operators.uncertain_index import index_subarray
from arrayviews.operators.uncertain_ingest import possible_ranges
from arrayviews.operators.uncertain_join import StructureJoin
from arrayviews.operators.uncertain_regions import check_threshold, query_box
from arrayviews.operators.uncertain_subarray import (
    SubarrayPlan,
    SubarrayStatistics,
    plan_subarray,
    result_schema,
    rows_to_result,
    run_subarray,
)
from arrayviews.operators.writes import WriteResult
from arrayviews.storage import uncertain_layout as ul
from arrayviews.storage.array_table import expire
from arrayviews.storage.uncertain_table import UncertainTable, Workload

if TYPE_CHECKING:
    from arrayviews.database import Database


def layout_of(schema: UncertainSchema, scheme: str, step, sigmas: float) -> StorageLayout:
    """The storage layout asked for at creation (``step="auto"``: chosen by the cost model)."""
    scheme = normalize_scheme(scheme, schema.name)
    given = sigmas
    try:
        sigmas = float(sigmas)
    except (TypeError, ValueError, OverflowError):  # an int beyond the float range: OverflowError
        sigmas = float("nan")
    if not (sigmas > 0) or sigmas == float("inf"):
        raise ValidationError(
            f"uncertain array {schema.name}: sigmas (k of mean +- k sigma) must be a positive number, got {given!r}",
            array=schema.name,
            value=given,
        )
    automatic = step is None or (isinstance(step, str) and step.strip().lower() == "auto")
    steps = None if automatic else normalize_steps(step, schema.ndim, schema.name)
    for dimension, k in zip(schema.dimensions, steps or [0] * schema.ndim, strict=True):
        if k > dimension.extent:
            # a larger step widens every query to the whole dimension all the same, and one beyond
            # int64 made every insert fail (the array was created, but nothing could be stored)
            raise ValidationError(
                f"uncertain array {schema.name}, dimension {dimension.name}: step {k} exceeds the "
                f"dimension's {dimension.extent} cells",
                array=schema.name,
                column=dimension.name,
                value=k,
            )
    if scheme == STORE_ALL:  # a step given with the other schemes is checked, then not used
        return StorageLayout(scheme, (0,) * schema.ndim, sigmas)
    if scheme == STORE_MEAN:
        return StorageLayout(scheme, (), sigmas)
    return StorageLayout(scheme, steps, sigmas)


def workload_of(schema: UncertainSchema, workload: object, threshold: object = 0.9) -> Workload | None:
    """The cost model's workload, checked: query sizes (cells, positive and finite), one per dimension
    in every query, and a threshold in (0, 1]; a ``Workload`` is checked as given."""
    if workload is None:
        return None
    if isinstance(workload, Workload):
        workload, threshold = workload.queries, workload.threshold

    def refuse(message: str, value: object) -> ValidationError:
        return ValidationError(
            f"uncertain array {schema.name}: workload {message}", array=schema.name, value=value
        )

    if isinstance(workload, np.ndarray):
        workload = workload.tolist()
    if isinstance(workload, str) or not isinstance(workload, Sequence):
        raise refuse(
            f"is a list of query sizes (one size in cells per dimension), got {workload!r}", workload
        )
    queries = []
    for query in workload:
        query = query.tolist() if isinstance(query, np.ndarray) else query
        if isinstance(query, str) or not isinstance(query, Sequence) or len(query) != schema.ndim:
            raise refuse(
                f"query sizes need one size in cells per dimension ({schema.ndim}: "
                f"{', '.join(schema.dimension_names)}), got {query!r}",
                query,
            )
        for size in query:
            if isinstance(size, bool) or not isinstance(size, int | float | np.integer | np.floating):
                raise refuse(f"query size {size!r} is not a number", size)
            if not (0 < _as_float(size) < float("inf")):
                raise refuse(f"query size {size!r} must be a positive number of cells", size)
        queries.append(tuple(float(x) for x in query))
    if isinstance(threshold, bool) or not isinstance(threshold, int | float | np.integer | np.floating):
        raise refuse(f"threshold must be a number, got {threshold!r}", threshold)
    if not (0.0 < _as_float(threshold) <= 1.0):
        raise refuse(f"threshold {threshold!r} must lie in (0, 1]", threshold)
    if not queries:
        raise refuse("has no query sizes", workload)
    return Workload(tuple(queries), float(threshold))


def _as_float(number: object) -> float:
    """``float(number)``; NaN (refused by every range check) for an int beyond the float range."""
    try:
        return float(number)
    except OverflowError:
        return float("nan")


@naming_missing_files(lambda handle: [(handle.table, handle.version)])
@translating
class UncertainArray:
    """A stored uncertain array, following its newest version unless pinned by ``at_version``."""

    def __init__(self, database: Database, table: UncertainTable, version: int | None = None) -> None:
        self._db = database
        self._table = table
        self._pinned = version

    # -- identity ----------------------------------------------------------------------------------
    @property
    def schema(self) -> UncertainSchema:
        return self._table.schema

    @property
    def name(self) -> str:
        return self.schema.name

    @property
    def version(self) -> int:
        if self._pinned is not None:
            return self._pinned
        return self._table.refresh().current_version()

    @property
    def layout(self) -> StorageLayout:
        """Scheme, step and k of the version this handle reads."""
        return self._table.layout_at(self.version)

    def __repr__(self) -> str:
        try:
            state = f"{self.layout.describe()}, version {self.version}"
        except (
            ArrayViewsError
        ) as error:  # dropped, or a pinned version expired: say so, as an array's repr does
            state = f"unreadable: {type(error).__name__}: {error}"
        return f"<UncertainArray {self.schema.to_text()} ({state})>"

    def count(self) -> int:
        """Number of tuples (from the version summary; nothing is read)."""
        return self._table.tuples_at(self._held_version())

    def copies(self) -> int:
        """Number of stored tuple copies (replication included) in this version."""
        return self._table.copies_at(self._held_version())

    def _held_version(self) -> int:
        """The version this handle reads; NotFoundError when it is no longer held (a pinned version
        expired since: its summary is gone, and counting it 0 would be wrong)."""
        version = self.version
        self._table.layout_at(version)
        return version

    # -- writing -----------------------------------------------------------------------------------
    def _writable(self) -> UncertainTable:
        if self._pinned is not None:
            raise ValidationError(
                f"uncertain array {self.name} is pinned to version {self._pinned}; versions are read-only"
            )
        return self._table

    def insert(self, tuples: object) -> WriteResult:
        """Insert a batch of tuples (pandas, Arrow, dict of arrays, Spark DataFrame) as one version.

        Columns: per dimension ``x`` (mean, cells) and ``x_sigma``; ``x_y_corr`` per correlated pair
        (default 0); the value attributes; ``id`` (int64, unique) or none to number tuples on.
        """
        return uncertain_writes.insert_tuples(self._writable(), tuples)

    def relayout(self, scheme: str | None = None, step="auto") -> WriteResult:
        """Store every tuple again under another scheme or step (``"auto"``: the cost model's choice
        for the stored data and the array's workload), as one new version."""
        current = self.layout
        layout_ = layout_of(self.schema, scheme or current.scheme, step, current.sigmas)
        return uncertain_writes.relayout(self._writable(), layout_)

    def expire_versions(self, older_than=None):
        """Forget old versions and delete their files (see ``Array.expire_versions``)."""

        now = dt.datetime.now(dt.UTC)
        cutoff = now + dt.timedelta(seconds=1) if older_than is None else older_than
        if isinstance(cutoff, dt.timedelta):
            cutoff = now - cutoff
        return expire(self._writable().array, cutoff, now - dt.timedelta(hours=1))

    # -- versions ----------------------------------------------------------------------------------
    def versions(self) -> pd.DataFrame:
        """Every version held: number, time, operation, tuples added/removed/total, layout, copies."""
        rows = []
        for v in self._table.refresh().array.versions():
            layout_ = self._table.layout_at(v.version)
            rows.append(
                {
                    "version": v.version,
                    "time": v.time,
                    "operation": v.operation,
                    "tuples_added": v.cells_added,
                    "tuples_removed": v.cells_removed,
                    "tuples_total": v.cells_total,
                    "scheme": layout_.scheme,
                    "step": None if layout_.steps is None else list(layout_.steps),
                    "copies_total": self._table.copies_at(v.version),
                    "snapshot_id": v.snapshot_id,
                }
            )
        columns = [
            "version",
            "time",
            "operation",
            "tuples_added",
            "tuples_removed",
            "tuples_total",
            "scheme",
            "step",
            "copies_total",
            "snapshot_id",
        ]
        return pd.DataFrame(rows, columns=columns)

    def at_version(self, version: int) -> UncertainArray:
        """A read-only handle on the array as it was at ``version`` (time travel)."""
        if isinstance(version, bool) or not isinstance(version, numbers.Integral):
            raise ValidationError(
                f"uncertain array {self.name}: a version is an integer (see .versions()), got {version!r}",
                array=self.name,
                value=repr(version),
            )
        self._table.refresh().layout_at(int(version))  # raises NotFoundError for unknown versions
        return UncertainArray(self._db, self._table, int(version))

    # -- reading -----------------------------------------------------------------------------------
    def to_arrow(self) -> pa.Table:
        """Every tuple once (its input columns), sorted by id."""

        batch = uncertain_writes.read_all_tuples(self._table, self.version)
        table = _batch_table(batch, self.schema)
        return table.select([f.name for f in result_schema(self.schema) if f.name != "probability"])

    def to_pandas(self) -> pd.DataFrame:
        return self.to_arrow().to_pandas()

    # -- operators ---------------------------------------------------------------------------------
    def subarray(
        self,
        box: Mapping[str, tuple[int, int]] | None = None,
        *,
        threshold: float = 0.9,
        method: str = "scheme",
        **ranges: tuple[int, int],
    ) -> UncertainSubarray:
        """Tuples lying in the box with probability at least ``threshold`` (Definition 2.1), e.g.
        ``U.subarray(x=(10, 19), y=(0, 4), threshold=0.9)``; ranges are inclusive cells, dimensions
        left out are unconstrained. ``method="rtree"`` runs the R-tree index baseline instead."""
        both = sorted(set(box or {}) & set(ranges))
        if both:
            raise ValidationError(
                f"uncertain array {self.name}: dimension {both[0]} has a range in the box and as a keyword; "
                "give it once",
                array=self.name,
                column=both[0],
            )
        merged = {**(box or {}), **ranges}
        layout_ = self.layout
        lam = check_threshold(self.schema, layout_, threshold, "subarray")
        qbox = query_box(self.schema, merged)
        if method not in ("scheme", "rtree"):
            raise ValidationError(f"uncertain array {self.name}: subarray method must be 'scheme' or 'rtree'")
        return UncertainSubarray(self, qbox, lam, method)

    def structure_join(
        self,
        other: UncertainArray,
        delta: float,
        threshold: float = 0.5,
        *,
        method: str = "sbj",
        engine: str = "auto",
        outer: str = "auto",
    ):
        """Pairs (t from this array, u from ``other``) with |t.d - u.d| < delta in every dimension with
        probability at least ``threshold`` (Definition 2.2, the l1 band). ``method``: ``"sbj"`` (the
        subarray-based join, Alg. 1), ``"bnl"`` (block nested loops) or ``"index"`` (R-tree index join);
        ``engine``: ``"auto"`` (the database's choice, by default by cost from both arrays' metadata),
        ``"spark"`` or ``"local"`` (in-process); the baselines always run in-process."""

        return StructureJoin.create(self, other, delta, threshold, method, engine, outer)

    def regrid(
        self,
        blocks: Sequence[int] | Mapping[str, int],
        *aggregates: str,
        threshold: float = 0.0,
        engine: str = "auto",
    ):
        """Expected aggregates over blocks of cells, each tuple weighted by its probability of lying in
        the block: ``count(*)`` (expected count) and ``sum(v)`` (expected sum). ``engine``: ``"auto"``
        (the database's choice, by default by cost), ``"spark"`` or ``"local"`` (in-process)."""

        if isinstance(blocks, Mapping):
            for name in blocks:
                self.schema.dimension(name)
            blocks = [blocks.get(d, 1) for d in self.schema.dimension_names]
        return UncertainAggregate.regrid(self, list(blocks), aggregates, threshold, engine)

    def aggregate(
        self,
        *aggregates: str,
        by: Sequence[str] | str | None = (),
        threshold: float = 0.0,
        engine: str = "auto",
    ):
        """Expected aggregates of all tuples, or per cell of the ``by`` dimensions."""

        return UncertainAggregate.group_by(self, by, aggregates, threshold, engine)

    # -- the cost model ----------------------------------------------------------------------------
    def choose_step(
        self,
        queries: Sequence[Sequence[float]] | None = None,
        threshold: float = 0.9,
        units: UnitCosts | None = None,
    ) -> StepChoice:
        """The cost model's step for the stored tuples and a workload of query sizes (cells per
        dimension), with the estimate for every candidate; apply it with ``relayout(step=...)``."""

        batch = uncertain_writes.read_all_tuples(self._table, self.version)
        first, last = possible_ranges(batch, self.schema, self.layout.sigmas)
        workload = workload_of(self.schema, queries, threshold)
        batches = self._table.batches_at(self.version)
        return uncertain_writes.choose_step(self._table, first, last, workload, units, batches)

    def copy_statistics(self) -> pd.DataFrame:
        """How many tuples have 1, 2, ... stored copies in this version (counted from the stored ids)."""

        storage = self._table.storage
        fragments = self._table.read(self.version, [ul.ID], roles="tuples")
        ids = ul.decode_rows(fragments, storage, [ul.ID]).columns[ul.ID]
        _, per_tuple = np.unique(ids, return_counts=True)
        values, tuples = np.unique(per_tuple, return_counts=True)
        return pd.DataFrame({"copies": values, "tuples": tuples})

    @property
    def table(self) -> UncertainTable:
        """The storage of this array (for the execution of operators)."""
        return self._table


def _batch_table(batch, schema: UncertainSchema) -> pa.Table:

    columns = {ul.ID: batch.ids}
    for k, d in enumerate(schema.dimension_names):
        columns[ul.mean_column(d)] = batch.means[:, k]
        columns[ul.sigma_column(d)] = batch.sigmas[:, k]
    for q, p in enumerate(schema.correlations):
        columns[schema.correlation_column(p)] = batch.corrs[:, q]
    columns.update(batch.values)
    rows = ul.Rows(np.zeros((batch.size, schema.ndim), np.int64), columns, dict(batch.nulls))
    return rows_to_result(rows, np.ones(batch.size), schema)


@naming_missing_files(lambda result: [(result.array.table, result.array.version)])
@translating
class UncertainSubarray:
    """A probabilistic Subarray, evaluated when read."""

    def __init__(self, array: UncertainArray, box, threshold: float, method: str) -> None:
        self.array = array
        self.box = box
        self.threshold = threshold
        self.method = method
        self.statistics: SubarrayStatistics | None = None
        self._plan: SubarrayPlan | None = None
        self._result: pa.Table | None = None

    def plan(self) -> SubarrayPlan:
        """The plan for the version the query reads: the newest until the result is read (a plan
        made by ``explain`` before an insert is made again), then the one that was run."""
        stale = self._plan is not None and self._result is None and self._plan.version != self.array.version
        if self._plan is None or stale:
            self._plan = plan_subarray(self.array.table, self.array.version, self.box, self.threshold)
        return self._plan

    def explain(self) -> dict:
        """The plan without running it: layout, query, expanded region and chunks to read."""
        description = self.plan().describe()
        description["method"] = self.method
        return description

    def to_arrow(self) -> pa.Table:
        if self._result is None:
            if self.method == "rtree":
                self._result, self.statistics = index_subarray(
                    self.array.table, self.array.version, self.box, self.threshold
                )
            else:
                self._result, self.statistics = run_subarray(self.plan())
        return self._result

    def to_pandas(self) -> pd.DataFrame:
        return self.to_arrow().to_pandas()

    def count(self) -> int:
        return self.to_arrow().num_rows


__all__ = [
    "STORE_ALL",
    "STORE_MEAN",
    "STORE_MULTIPLE",
    "UncertainArray",
    "UncertainSubarray",
    "layout_of",
    "workload_of",
]
