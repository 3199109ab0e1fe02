"""Aggregates with existence probabilities (paper 001, Appendix A): regrid and group-by over an
uncertain array, each tuple counted in every block with its probability of lying there.

``count(*)`` gives the expected number of tuples in a block, sum_t P(t in block); ``sum(v)`` the
expected sum, sum_t P(t in block) * E[v] (positions and values independent; E[v] is the value, the
Gaussian mean or the uniform midpoint; null values add nothing). With ``threshold`` lambda > 0 only
tuples lying in a block with probability at least lambda count there (a Subarray per block); the
default 0 gives the full expectation. Mass outside the domain belongs to no block. One Spark job:
tasks turn the home copies of their fragments into per-block partial sums, which are then added.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pyarrow as pa

from arrayviews.execution import jobs
from arrayviews.kernels.block_probabilities import block_contributions
from arrayviews.model.aggregate_calls import AggregateCall, parse_aggregate
from arrayviews.model.errors import ValidationError
from arrayviews.model.uncertain import EXACT, GAUSSIAN, UncertainSchema
from arrayviews.operators.uncertain_subarray import dimension_groups, position_arrays
from arrayviews.storage import layout
from arrayviews.storage import uncertain_layout as ul

SUPPORTED = ("count", "sum")


def parse_calls(schema: UncertainSchema, aggregates) -> list[AggregateCall]:
    if not aggregates:
        aggregates = ("count(*)",)
    calls = []
    for text in aggregates:
        call = parse_aggregate(text) if isinstance(text, str) else text
        if call.function not in SUPPORTED:
            raise ValidationError(
                f"uncertain array {schema.name}: {call.to_text()} is not supported over uncertain tuples; "
                "use count(*) (expected count) or sum(v) (expected sum)",
                array=schema.name,
                value=call.to_text(),
            )
        if call.attribute is not None:
            attribute = schema.attribute(call.attribute)
            if attribute.kind == EXACT and attribute.type == "bool":
                raise ValidationError(
                    f"uncertain array {schema.name}: sum over the bool attribute {attribute.name} is not supported",
                    array=schema.name,
                    column=attribute.name,
                )
        calls.append(call)
    names = [c.output_name for c in calls]
    if len(set(names)) != len(names):
        raise ValidationError(f"uncertain array {schema.name}: two aggregates are both named {names}")
    return calls


def expected_values(rows: ul.Rows, schema: UncertainSchema, attribute: str) -> np.ndarray:
    """E[v] per row (0 where the value is null)."""
    a = schema.attribute(attribute)
    if a.kind == EXACT:
        values = rows.columns[a.name].astype(np.float64)
        mask = rows.nulls.get(a.name)
        return values if mask is None else np.where(mask, 0.0, values)
    if a.kind == GAUSSIAN:
        return rows.columns[a.name].astype(np.float64)
    return (rows.columns[f"{a.name}_low"] + rows.columns[f"{a.name}_high"]) / 2.0


def _partial_schema(names: list[str], outputs: list[str]) -> pa.Schema:
    return pa.schema([pa.field(n, pa.int64()) for n in names] + [pa.field(o, pa.float64()) for o in outputs])


def partial_sums(
    fragments: pa.Table,
    schema: UncertainSchema,
    storage,
    blocks: np.ndarray,
    kept: list[int],
    calls: list[AggregateCall],
    threshold: float,
    out: pa.Schema,
) -> pa.Table | None:
    """Spark task: the home copies of some fragments, their block probabilities, summed per block."""
    roles = np.asarray(fragments.column(layout.max_column(ul.ROLE)))
    fragments = fragments.filter(pa.array(roles <= ul.ROLE_HOME))
    if fragments.num_rows == 0:
        return None
    rows = ul.decode_rows(fragments, storage)
    rows = rows.take(np.flatnonzero(rows.columns[ul.ROLE] == ul.ROLE_HOME))
    if len(rows) == 0:
        return None
    means, sigmas, corrs = position_arrays(rows, schema)
    singles, pairs = dimension_groups(schema)
    lows = np.array([d.low for d in schema.dimensions], np.float64)
    highs = np.array([d.high + 1 for d in schema.dimensions], np.float64)
    owner, index, weight = block_contributions(
        means, sigmas, corrs, singles, pairs, lows, highs, blocks, threshold
    )
    if len(owner) == 0:
        return None
    keys = index[:, kept] if kept else np.zeros((len(owner), 1), np.int64)
    unique, group = np.unique(keys, axis=0, return_inverse=True)
    group = group.reshape(-1)
    columns = {}
    for position, k in enumerate(kept):
        columns[out.field(position).name] = unique[:, position] + schema.dimensions[k].low
    if not kept:
        columns[out.field(0).name] = np.zeros(len(unique), np.int64)
    for call in calls:
        contribution = (
            weight
            if call.attribute is None
            else weight * expected_values(rows, schema, call.attribute)[owner]
        )
        columns[call.output_name] = np.bincount(group, weights=contribution, minlength=len(unique))
    return pa.table({f.name: pa.array(columns[f.name], f.type) for f in out}, schema=out)


class UncertainAggregate:
    """Expected aggregates per block (regrid) or per group (group-by), computed when read."""

    def __init__(
        self, array, blocks: list[int], kept: list[int], names: list[str], calls, threshold: float
    ) -> None:
        self.array = array
        self.blocks = np.asarray(blocks, np.int64)
        self.kept = kept
        self.names = names
        self.calls = calls
        self.threshold = threshold
        self._result: pa.Table | None = None

    @staticmethod
    def _threshold(schema: UncertainSchema, threshold) -> float:
        try:
            value = float(threshold)
        except (TypeError, ValueError):
            value = float("nan")
        if not (0.0 <= value <= 1.0):
            raise ValidationError(
                f"uncertain array {schema.name}: aggregate threshold must lie in [0, 1], got {threshold!r}",
                array=schema.name,
                value=threshold,
            )
        return value

    @classmethod
    def regrid(cls, array, blocks: list[int], aggregates, threshold: float) -> UncertainAggregate:
        schema = array.schema
        if len(blocks) != schema.ndim:
            raise ValidationError(
                f"uncertain array {schema.name}: regrid needs one block size per dimension ({schema.ndim}), got {len(blocks)}",
                array=schema.name,
            )
        for dimension, block in zip(schema.dimensions, blocks, strict=True):
            if isinstance(block, bool) or not isinstance(block, int | np.integer) or block < 1:
                raise ValidationError(
                    f"uncertain array {schema.name}: regrid block size for {dimension.name} must be a positive "
                    f"integer, got {block!r}",
                    array=schema.name,
                    column=dimension.name,
                    value=block,
                )
        calls = parse_calls(schema, aggregates)
        return cls(
            array,
            list(blocks),
            list(range(schema.ndim)),
            list(schema.dimension_names),
            calls,
            cls._threshold(schema, threshold),
        )

    @classmethod
    def group_by(cls, array, by: list[str], aggregates, threshold: float) -> UncertainAggregate:
        schema = array.schema
        for name in by:
            schema.dimension(name)
        if len(set(by)) != len(by):
            raise ValidationError(f"uncertain array {schema.name}: a group-by dimension is named twice")
        calls = parse_calls(schema, aggregates)
        kept = [schema.dimension_names.index(n) for n in by]
        blocks = [1 if k in kept else 0 for k in range(schema.ndim)]
        names = list(by) if by else ["i"]
        return cls(array, blocks, kept, names, calls, cls._threshold(schema, threshold))

    def to_arrow(self) -> pa.Table:
        if self._result is not None:
            return self._result
        table = self.array.table
        version = self.array.version
        outputs = [c.output_name for c in self.calls]
        out = _partial_schema(self.names, outputs)
        spark = self.array._db.spark
        frame = jobs.read_files(spark, table.files(version), layout.fragment_schema(table.storage))
        task = functools.partial(
            partial_sums,
            schema=table.schema,
            storage=table.storage,
            blocks=self.blocks,
            kept=self.kept,
            calls=self.calls,
            threshold=self.threshold,
            out=out,
        )
        from pyspark.sql import functions as F

        partials = jobs.map_batches(frame, task, out)
        summed = partials.groupBy(*self.names).agg(*[F.sum(o).alias(o) for o in outputs])
        result = jobs.collect(summed, out)
        self._result = result.sort_by([(n, "ascending") for n in self.names])
        return self._result

    def to_pandas(self) -> pd.DataFrame:
        return self.to_arrow().to_pandas()

    def store(self, name: str):
        """Store the expected aggregates as an ordinary array ``name`` (one attribute per aggregate)."""
        schema = self.array.schema
        result = self.to_arrow()
        dims = []
        for position, column in enumerate(self.names):
            if self.kept:
                d = schema.dimensions[self.kept[position]]
                extent = -(-d.extent // int(self.blocks[self.kept[position]]))
                dims.append(f"{column}={d.low}:{d.low + extent - 1}:{min(d.chunk_length, extent)}")
            else:
                dims.append(f"{column}=0:0:1")
        attrs = ", ".join(f"{c.output_name}:float64" for c in self.calls)
        array = self.array._db.create_array(f"{name}<{attrs}>[{'; '.join(dims)}]")
        if result.num_rows:
            array.insert(result)
        return array
