"""Writes to an uncertain array: insert a batch of tuples, or store every tuple again under a new
layout; each is one atomic snapshot (one version), and a rejected batch writes nothing.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from arrayviews.model.copy_layout import STORE_MULTIPLE, StorageLayout
from arrayviews.model.errors import ValidationError
from arrayviews.model.faults import checkpoint
from arrayviews.model.uncertain import ID
from arrayviews.model.uncertain_cost import RangeStatistics, StepChoice, UnitCosts, choose_subarray_steps
from arrayviews.operators.uncertain_ingest import TupleBatch, normalize_tuples, place, possible_ranges
from arrayviews.operators.writes import WriteResult, replanned
from arrayviews.storage import layout
from arrayviews.storage import uncertain_layout as ul
from arrayviews.storage.files import delete_files, filesystem
from arrayviews.storage.uncertain_table import UncertainTable, Workload

#: The workload assumed when a step is chosen without one: queries of 1% of each dimension, lambda 0.9.
DEFAULT_QUERY_FRACTION = 0.01


def default_workload(table: UncertainTable) -> Workload:
    sizes = tuple(max(1.0, d.extent * DEFAULT_QUERY_FRACTION) for d in table.schema.dimensions)
    return Workload((sizes,), 0.9)


def _tuple_metadata(table: UncertainTable, version: int) -> pa.Table:
    return ul.home_fragments(table.metadata(version))


def assign_ids(table: UncertainTable, batch: TupleBatch, version: int) -> np.ndarray:
    """The batch's ids: as given (each checked against the stored ids) or the next free ones."""
    schema = table.schema
    metadata = _tuple_metadata(table, version)
    stored_max = None
    if metadata.num_rows:
        highs = metadata.column(layout.max_column(ID))
        stored_max = int(pc.max(highs).as_py())
    if batch.ids is None:
        start = 0 if stored_max is None else stored_max + 1
        if start + batch.size - 1 > np.iinfo(np.int64).max:
            raise ValidationError(
                f"uncertain array {schema.name}: no more generated ids fit in int64 after {stored_max}; "
                "give ids in an id column",
                array=schema.name,
                column=ID,
            )
        return np.arange(start, start + batch.size, dtype=np.int64)
    ids = batch.ids
    if metadata.num_rows and len(ids):
        low, high = int(ids.min()), int(ids.max())
        lows = np.asarray(metadata.column(layout.min_column(ID)))
        highs = np.asarray(metadata.column(layout.max_column(ID)))
        if ((lows <= high) & (highs >= low)).any():
            stored = _stored_ids(table, version, low, high)
            repeated = np.intersect1d(ids, stored)
            if len(repeated):
                row = int(np.flatnonzero(ids == repeated[0])[0])
                raise ValidationError(
                    f"uncertain array {schema.name}, column {ID}: id {int(repeated[0])} is already stored "
                    f"(the batch gives it in row {row}; {len(repeated)} id(s) of the batch are); nothing was written",
                    array=schema.name,
                    column=ID,
                    value=int(repeated[0]),
                )
    return ids


def _stored_ids(table: UncertainTable, version: int, low: int, high: int) -> np.ndarray:
    """Ids of home copies stored in fragments whose id range meets [low, high]."""
    files = table.files(version)
    if not files:
        return np.zeros(0, np.int64)
    storage = table.storage
    target = layout.fragment_schema(storage)
    fs, _ = filesystem(files[0])
    dataset = ds.dataset([filesystem(u)[1] for u in files], filesystem=fs, format="parquet", schema=target)
    condition = (
        (ds.field(layout.min_column(ID)) <= high)
        & (ds.field(layout.max_column(ID)) >= low)
        & (ds.field(layout.max_column(ul.ROLE)) <= ul.ROLE_HOME)
    )
    columns = layout.chunk_columns(storage) + [layout.N_CELLS, layout.DENSE, layout.CELLS]
    columns += [layout.value_column(ID), layout.value_column(ul.ROLE)]
    fragments = dataset.to_table(columns=columns, filter=condition)
    rows = ul.decode_rows(fragments, storage, [ID, ul.ROLE])
    return np.unique(rows.columns[ID][rows.columns[ul.ROLE] == ul.ROLE_HOME])


def statistics_of(
    table: UncertainTable, first: np.ndarray, last: np.ndarray, batches: int = 1
) -> RangeStatistics:
    schema = table.schema
    return RangeStatistics.from_ranges(
        first,
        last,
        [d.extent for d in schema.dimensions],
        [d.chunk_length for d in schema.dimensions],
        batches,
        bool(schema.correlations),
        (ul.tile_side(schema.ndim),) * schema.ndim,
    )


def choose_step(
    table: UncertainTable,
    first: np.ndarray,
    last: np.ndarray,
    workload: Workload | None,
    units: UnitCosts | None = None,
    batches: int = 1,
) -> StepChoice:
    """The cost model's step for tuples with these possible ranges (section 3.3)."""
    workload = workload or table.workload or default_workload(table)
    stats = statistics_of(table, first, last, batches)
    return choose_subarray_steps(stats, workload.queries, workload.threshold, units or UnitCosts())


def _write(
    table: UncertainTable,
    batch: TupleBatch,
    layout_: StorageLayout,
    expected: int,
    operation: str,
    removed: list | None = None,
    tuples_removed: int = 0,
    copies_before: int = 0,
) -> WriteResult:
    rows, fences = place(batch, table.schema, layout_)
    version_tag = expected + 1
    tables = ul.encode_rows(rows, table.storage, version_tag)
    if fences is not None:
        tables += ul.encode_rows(fences, table.storage, version_tag)
    staged = table.stage(tables)
    try:
        checkpoint(f"uncertain.{operation}.before-commit")
        version = table.commit(
            [uri for uri, _ in staged],
            removed,
            operation,
            batch.size,
            tuples_removed,
            layout_,
            copies_before + len(rows),
            expected,
        )
    except BaseException:
        delete_files([uri for uri, _ in staged])
        raise
    return WriteResult(
        table.name,
        operation,
        version,
        True,
        batch.size,
        tuples_removed,
        f"{operation}: wrote {batch.size} tuple(s) as {len(rows)} cop(ies) ({layout_.describe()}) into "
        f"uncertain array {table.name}, now at version {version}",
    )


def insert_tuples(table: UncertainTable, data: object, units: UnitCosts | None = None) -> WriteResult:
    """Validate and insert a batch as one version; the first batch of an array whose step is
    ``auto`` fixes the step by the cost model. When another writer commits first, the insert is
    planned again on the new version (ids, step and copies follow it), as array writes are."""
    return replanned(table, "insert", lambda: _insert_once(table, data, units))


def _insert_once(table: UncertainTable, data: object, units: UnitCosts | None) -> WriteResult:
    table.refresh()
    batch = normalize_tuples(data, table.schema)
    expected = table.current_version()
    if batch.size == 0:
        return WriteResult(
            table.name,
            "insert",
            expected,
            False,
            message=f"empty batch: nothing written; uncertain array {table.name} stays at version {expected}",
        )
    batch.ids = assign_ids(table, batch, expected)
    layout_ = table.layout_at(expected)
    if layout_.steps is None:
        first, last = possible_ranges(batch, table.schema, layout_.sigmas)
        choice = choose_step(table, first, last, None, units)
        layout_ = StorageLayout(STORE_MULTIPLE, choice.steps, layout_.sigmas)
    return _write(table, batch, layout_, expected, "insert", copies_before=table.copies_at(expected))


def read_all_tuples(table: UncertainTable, version: int) -> TupleBatch:
    """Every tuple of a version (its home copies), as a batch."""
    storage = table.storage
    schema = table.schema
    fragments = table.read(version, None)
    fragments = ul.home_fragments(fragments)
    rows = ul.decode_rows(fragments, storage)
    home = rows.take(np.flatnonzero(rows.columns[ul.ROLE] == ul.ROLE_HOME))
    order = np.argsort(home.columns[ID], kind="stable")
    home = home.take(order)
    d = schema.ndim
    means = np.stack([home.columns[ul.mean_column(n)] for n in schema.dimension_names], axis=1).reshape(-1, d)
    sigmas = np.stack([home.columns[ul.sigma_column(n)] for n in schema.dimension_names], axis=1).reshape(
        -1, d
    )
    corrs = np.zeros((len(home), len(schema.correlations)), np.float64)
    for q, pair in enumerate(schema.correlations):
        corrs[:, q] = home.columns[schema.correlation_column(pair)]
    values = {name: home.columns[name] for name, _ in ul.value_columns(schema)}
    return TupleBatch(home.columns[ID], means, sigmas, corrs, values, dict(home.nulls))


def relayout(table: UncertainTable, layout_: StorageLayout) -> WriteResult:
    """Store every tuple again under ``layout_`` (e.g. a step chosen on request) as one version that
    replaces all files; earlier versions keep their own layout for time travel. Planned again (every
    tuple read again) when another writer commits first."""
    return replanned(table, "relayout", lambda: _relayout_once(table, layout_))


def _relayout_once(table: UncertainTable, layout_: StorageLayout) -> WriteResult:
    table.refresh()
    expected = table.current_version()
    batch = read_all_tuples(table, expected)
    removed = table.array.data_files(expected)
    if layout_.steps is None and batch.size == 0:
        current = table.layout_at(expected)
        if current.scheme == STORE_MULTIPLE and current.steps is None:  # already "auto"
            return WriteResult(
                table.name,
                "relayout",
                expected,
                False,
                message=f"uncertain array {table.name} has no tuples: the cost model chooses its step at the "
                f"first insert; nothing written",
            )
        raise ValidationError(
            f"uncertain array {table.name} has no tuples for the cost model to choose a step from "
            "(step='auto'): give a step, or insert tuples first; nothing was written",
            array=table.name,
        )
    if layout_.steps is None:
        first, last = possible_ranges(batch, table.schema, layout_.sigmas)
        layout_ = StorageLayout(STORE_MULTIPLE, choose_step(table, first, last, None).steps, layout_.sigmas)
    return _write(table, batch, layout_, expected, "relayout", removed, batch.size)
