"""Aggregates with existence probabilities (paper 001, Appendix A): regrid and group-by over an
uncertain array, each tuple counted in every block with its probability of lying there.

``count(*)`` gives the expected number of tuples in a block, sum_t P(t in block); ``sum(v)`` the
expected sum, sum_t P(t in block) * E[v] (positions and values independent; E[v] is the value, the
Gaussian mean or the uniform midpoint; null values add nothing). With ``threshold`` lambda > 0 only
tuples lying in a block with probability at least lambda count there (a Subarray per block); the
default 0 gives the full expectation. Mass outside the domain belongs to no block.

Through the execution interface, on either engine (the cost model picks, ``engine=`` forces): tasks
turn the home copies of their fragments into exact partial sums per block (the partial states of
kernels/aggregates.py, one packed row per output chunk); the states of each output chunk are merged
exactly and rounded once, as operators/reduce.py does for arrays. So every expected count and sum is
the correctly rounded sum of its contributions (``math.fsum``), however the tuples were split into
files and tasks: both engines give the same bits.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow as pa

from arrayviews.execution.cost import Choice
from arrayviews.execution.failures import translating
from arrayviews.kernels.aggregates import merge_states, pack_states, partial_states, unpack_states
from arrayviews.kernels.block_probabilities import REACH, block_contributions
from arrayviews.kernels.exact_sum import ExactSumError
from arrayviews.model.aggregate_calls import AggregateCall, parse_aggregate
from arrayviews.model.errors import RangeError, ValidationError
from arrayviews.model.names import check_identifier
from arrayviews.model.uncertain import EXACT, GAUSSIAN, UncertainSchema
from arrayviews.operators.uncertain_engine import AGGREGATE_JOBS, check_engine, choose_engine, read_estimate
from arrayviews.operators.uncertain_files import naming_missing_files
from arrayviews.operators.uncertain_regions import as_number
from arrayviews.operators.uncertain_subarray import dimension_groups, position_arrays
from arrayviews.storage import layout
from arrayviews.storage import uncertain_layout as ul

SUPPORTED = ("count", "sum")
#: Exact attribute types whose values have no expected sum (count(v) still counts them).
NOT_SUMMED = ("bool", "string", "datetime64")


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
            if call.function == "sum" and attribute.kind == EXACT and attribute.type in NOT_SUMMED:
                raise ValidationError(
                    f"uncertain array {schema.name}: sum over the {attribute.type} attribute {attribute.name} "
                    f"is not supported (count({attribute.name}) counts its values)",
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
    low = rows.columns[f"{a.name}_low"].astype(np.float64)
    high = rows.columns[f"{a.name}_high"].astype(np.float64)
    with np.errstate(over="ignore"):
        total = low + high  # exact halving after one rounding, unless the sum leaves the float range
    return np.where(np.isfinite(total), total / 2.0, low / 2.0 + high / 2.0)


def present(rows: ul.Rows, schema: UncertainSchema, attribute: str) -> np.ndarray:
    """1.0 per row whose value is not null, else 0.0 (what ``count(v)`` counts)."""
    mask = rows.nulls.get(schema.attribute(attribute).name)
    return np.ones(len(rows)) if mask is None else np.where(mask, 0.0, 1.0)


def _contribution(rows: ul.Rows, schema: UncertainSchema, call: AggregateCall) -> np.ndarray | None:
    """Per row, what a block weight multiplies: None for ``count(*)``, the non-null indicator for
    ``count(v)``, E[v] for ``sum(v)``."""
    if call.attribute is None:
        return None
    if call.function == "count":
        return present(rows, schema, call.attribute)
    return expected_values(rows, schema, call.attribute)


#: Probabilities are rounded to multiples of this before they are summed: far below the 5e-17 the
#: kernel's REACH cut-off leaves per tuple, and it bounds the binary orders the exact sums span (a
#: product of d Gaussian tails can be as small as 1e-300, which would need more components).
WEIGHT_GRID = 2.0**-120


def expected_contributions(table, version: int, blocks: np.ndarray) -> float:
    """(tuple, block) contributions ``block_contributions`` computes, from metadata only: each tuple
    reaches the blocks within mean +- REACH sigma along every dimension with a block size (1 along a
    dimension aggregated away), an interval of L cells meeting L / b + 1 blocks of b cells on
    average. A fragment's tuples are taken to have the geometric mean of its smallest and largest
    sigma (the fragment statistics); each fragment counts with its share of the stored copies. A
    threshold above 0 keeps fewer contributions: the count is then a bound (the kernel visits all)."""
    if version == 0:
        return 0.0
    tuples = table.tuples_at(version)
    metadata = ul.home_fragments(table.metadata(version))
    if tuples == 0 or metadata.num_rows == 0:
        return 0.0
    rows = np.asarray(metadata.column(layout.N_CELLS), np.float64)
    per_tuple = np.ones(metadata.num_rows)
    for k, dimension in enumerate(table.schema.dimensions):
        block = int(blocks[k])
        if block == 0:
            continue
        low = np.asarray(metadata.column(layout.min_column(ul.sigma_column(dimension.name))), np.float64)
        high = np.asarray(metadata.column(layout.max_column(ul.sigma_column(dimension.name))), np.float64)
        # the geometric mean as a product of roots: low * high overflows for sigmas near 1e300
        sigma = np.where(low > 0, np.sqrt(np.maximum(low, 0)) * np.sqrt(high), high / 2)
        count = -(-dimension.extent // block)
        with np.errstate(over="ignore"):  # a reach beyond the float range is the whole dimension
            per_tuple *= np.minimum(count, 2 * REACH * np.nan_to_num(sigma) / block + 1)
    return float(tuples * (rows * per_tuple).sum() / max(1.0, rows.sum()))


def _state_column(position: int) -> str:
    return f"s__{position}"


def block_grid(schema: UncertainSchema, blocks: np.ndarray, kept: list[int]) -> np.ndarray:
    """Blocks per output chunk along each output dimension (as ``store`` chunks the result)."""
    if not kept:
        return np.ones(1, np.int64)
    lengths = []
    for k in kept:
        d = schema.dimensions[k]
        extent = -(-d.extent // int(blocks[k]))
        lengths.append(min(d.chunk_length, extent))
    return np.asarray(lengths, np.int64)


def _partial_schema(names: list[str], calls: list[AggregateCall]) -> pa.Schema:
    fields = [pa.field(layout.chunk_column(n), pa.int64()) for n in names]
    fields += [pa.field(_state_column(p), pa.binary()) for p in range(len(calls))]
    return pa.schema(fields)


def _result_schema(names: list[str], outputs: list[str]) -> pa.Schema:
    return pa.schema([pa.field(n, pa.int64()) for n in names] + [pa.field(o, pa.float64()) for o in outputs])


def _sum_error(error: ExactSumError, schema: UncertainSchema, call: AggregateCall, where: str) -> RangeError:
    return RangeError(
        f"uncertain array {schema.name}: {call.to_text()} of the block at ({where}): {error}",
        array=schema.name,
        column=call.attribute,
    )


def _where(names: list[str], coordinates: np.ndarray) -> str:
    return ", ".join(f"{n}={int(c)}" for n, c in zip(names, coordinates, strict=True))


#: (tuple, block) contributions one task may compute: each is three arrays' entries (owner, block
#: index, weight), so this bounds a task's memory near a gigabyte.
CONTRIBUTION_LIMIT = 20_000_000


def check_contributions(
    schema: UncertainSchema,
    ids: np.ndarray,
    means: np.ndarray,
    sigmas: np.ndarray,
    lows: np.ndarray,
    highs: np.ndarray,
    blocks: np.ndarray,
) -> None:
    """Refuse, before the kernel allocates them, more than ``CONTRIBUTION_LIMIT`` (tuple, block)
    contributions: the blocks within mean +- REACH sigma of every tuple (as the kernel counts them),
    naming the tuple reaching the most blocks and its sigma."""
    reached = np.ones((len(means), len(blocks)))
    for k, block in enumerate(int(b) for b in blocks):
        if block == 0:
            continue
        with np.errstate(over="ignore", invalid="ignore"):
            a = np.maximum(lows[k], means[:, k] - REACH * sigmas[:, k])
            b = np.minimum(highs[k], means[:, k] + REACH * sigmas[:, k])
        first = np.floor((a - lows[k]) / block)
        last = np.minimum(np.floor((b - lows[k]) / block), np.ceil((highs[k] - lows[k]) / block) - 1)
        reached[:, k] = np.maximum(0.0, last - np.maximum(first, 0.0) + 1)
    per_tuple = np.prod(reached, axis=1)
    total = float(per_tuple.sum())
    if total <= CONTRIBUTION_LIMIT:
        return
    row = int(np.argmax(per_tuple))
    k = int(np.argmax(reached[row]))
    dimension = schema.dimension_names[k]
    raise ValidationError(
        f"uncertain array {schema.name}, column {ul.sigma_column(dimension)}: the aggregate would weigh "
        f"{total:.3g} (tuple, block) pairs, more than {CONTRIBUTION_LIMIT:,}; tuple {int(ids[row])} "
        f"(sigma {float(sigmas[row, k]):g}) alone reaches {reached[row, k]:.3g} blocks along {dimension} "
        f"(within {REACH} sigma): use larger blocks",
        array=schema.name,
        column=ul.sigma_column(dimension),
        value=float(sigmas[row, k]),
    )


def block_partials(
    fragments: pa.Table,
    schema: UncertainSchema,
    storage,
    blocks: np.ndarray,
    kept: list[int],
    names: list[str],
    calls: list[AggregateCall],
    threshold: float,
    grid: np.ndarray,
    out: pa.Schema,
) -> pa.Table | None:
    """Stage 1 (a task): the home copies of some fragments, their block probabilities, reduced to
    exact partial sums per block (kernels/aggregates.py), one row of packed states per output chunk."""
    fragments = ul.home_fragments(fragments)
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
    check_contributions(schema, rows.columns[ul.ID], means, sigmas, lows, highs, blocks)
    owner, index, weight = block_contributions(
        means, sigmas, corrs, singles, pairs, lows, highs, blocks, threshold
    )
    weight = np.round(weight / WEIGHT_GRID) * WEIGHT_GRID
    used = weight > 0.0
    owner, index, weight = owner[used], index[used], weight[used]
    if len(owner) == 0:
        return None
    keys = index[:, kept] if kept else np.zeros((len(owner), 1), np.int64)
    chunk = keys // grid
    offset = np.ravel_multi_index(tuple((keys % grid).T), tuple(int(g) for g in grid)).astype(np.int64)
    factors = [_contribution(rows, schema, c) for c in calls]
    contributions = [weight if f is None else weight * f[owner] for f in factors]
    chunks, inverse = np.unique(chunk, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(chunks) + 1))
    columns: dict[str, list] = {f.name: [] for f in out}
    for g in range(len(chunks)):  # per output chunk (as operators/reduce.py), not per block
        part = order[bounds[g] : bounds[g + 1]]
        for position, name in enumerate(names):
            columns[layout.chunk_column(name)].append(int(chunks[g, position]))
        for position, call in enumerate(calls):
            try:
                states = partial_states(offset[part], contributions[position][part], {"sum"})
            except ExactSumError as error:
                block = np.unique(keys[part], axis=0)[error.index] + _output_lows(schema, kept)
                raise _sum_error(error, schema, call, _where(names, block)) from None
            columns[_state_column(position)].append(pack_states(states))
    return pa.table(columns, schema=out)


def _output_lows(schema: UncertainSchema, kept: list[int]) -> np.ndarray:
    if not kept:
        return np.zeros(1, np.int64)
    return np.array([schema.dimensions[k].low for k in kept], np.int64)


def block_totals(
    table: pa.Table,
    schema: UncertainSchema,
    kept: list[int],
    names: list[str],
    calls: list[AggregateCall],
    grid: np.ndarray,
    out: pa.Schema,
) -> pa.Table | None:
    """Stage 2 (one output chunk): the partial states of every task merged exactly and rounded once,
    so the result is the correctly rounded sum of every contribution, however the tuples were split."""
    chunk = np.array([table.column(layout.chunk_column(n))[0].as_py() for n in names], np.int64)
    lows = _output_lows(schema, kept)
    values = {}
    keys = None
    for position, call in enumerate(calls):
        partials = [unpack_states(b) for b in table.column(_state_column(position)).to_pylist()]
        try:
            merged = merge_states(partials)
        except ExactSumError as error:
            offset = np.unique(np.concatenate([p.keys for p in partials]))[error.index]
            local = np.array(np.unravel_index(int(offset), tuple(int(g) for g in grid)), np.int64)
            raise _sum_error(error, schema, call, _where(names, chunk * grid + local + lows)) from None
        keys = merged.keys
        values[call.output_name] = merged.exact.values()
    local = np.stack(np.unravel_index(keys, tuple(int(g) for g in grid)), axis=1).astype(np.int64)
    coordinates = chunk * grid + local + lows
    columns = {n: coordinates[:, position] for position, n in enumerate(names)}
    columns.update(values)
    return pa.table({f.name: pa.array(columns[f.name], f.type) for f in out}, schema=out)


@naming_missing_files(lambda result: [(result.array.table, result.array.version)])
@translating
class UncertainAggregate:
    """Expected aggregates per block (regrid) or per group (group-by), computed when read."""

    def __init__(
        self,
        array,
        blocks: list[int],
        kept: list[int],
        names: list[str],
        calls,
        threshold: float,
        engine: str = "auto",
    ) -> None:
        self.array = array
        self.engine = check_engine(engine, f"aggregate of uncertain array {array.schema.name}")
        #: Which engine runs the aggregate, and why (set when first asked or run).
        self.choice: Choice | None = None
        self.blocks = np.asarray(blocks, np.int64)
        self.kept = kept
        self.names = names
        self.calls = calls
        self.threshold = threshold
        self._result: pa.Table | None = None
        #: The version the result was computed from (set when it is read).
        self._version: int | None = None

    @staticmethod
    def _threshold(schema: UncertainSchema, threshold) -> float:
        value = as_number(threshold)
        if not (0.0 <= value <= 1.0):
            raise ValidationError(
                f"uncertain array {schema.name}: aggregate threshold must lie in [0, 1], got {threshold!r}",
                array=schema.name,
                value=threshold,
            )
        return value

    @classmethod
    def regrid(
        cls, array, blocks: list[int], aggregates, threshold: float, engine: str = "auto"
    ) -> UncertainAggregate:
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
        # A block longer than its dimension is the whole dimension (one block from the low end); one
        # beyond int64 failed with numpy's OverflowError.
        blocks = [min(int(b), d.extent) for b, d in zip(blocks, schema.dimensions, strict=True)]
        return cls(
            array,
            list(blocks),
            list(range(schema.ndim)),
            list(schema.dimension_names),
            calls,
            cls._threshold(schema, threshold),
            engine,
        )

    @classmethod
    def group_by(
        cls, array, by: Sequence[str] | str | None, aggregates, threshold: float, engine: str = "auto"
    ) -> UncertainAggregate:
        schema = array.schema
        if by is None:
            by = []
        elif isinstance(by, str):  # one dimension's name, not its letters
            by = [by]
        by = list(by)
        for name in by:
            schema.dimension(name)
        if len(set(by)) != len(by):
            raise ValidationError(f"uncertain array {schema.name}: a group-by dimension is named twice")
        calls = parse_calls(schema, aggregates)
        kept = [schema.dimension_names.index(n) for n in by]
        blocks = [1 if k in kept else 0 for k in range(schema.ndim)]
        names = list(by) if by else ["i"]
        return cls(array, blocks, kept, names, calls, cls._threshold(schema, threshold), engine)

    def _estimate(self):
        table, version = self.array.table, self.array.version
        estimate = read_estimate(table, version, jobs=AGGREGATE_JOBS)
        if version == 0:
            return estimate
        return replace(
            estimate, aggregates=1, contributions=expected_contributions(table, version, self.blocks)
        )

    def choose(self) -> Choice:
        """Which engine runs the aggregate, and why (from metadata; nothing is read)."""
        if self.choice is None:
            _, self.choice = choose_engine(self.array._db, self._estimate(), self.engine)
        return self.choice

    def explain(self) -> dict:
        """The plan without running it: array, version, blocks, aggregates, executor and reason."""
        choice = self.choose()
        schema = self.array.schema
        return {
            "operator": "aggregate",
            "array": schema.name,
            "version": self.version,
            "groups": {n: int(self.blocks[k]) for n, k in zip(self.names, self.kept, strict=False)}
            if self.kept
            else "all tuples",
            "aggregates": [c.to_text() for c in self.calls],
            "threshold": self.threshold,
            "executor": choice.executor,
            "reason": choice.reason,
        }

    @property
    def version(self) -> int:
        """The version the result answers for: the newest until it is read, then the one read (as a
        subarray's plan and a join's sides do)."""
        return self.array.version if self._version is None else self._version

    def to_arrow(self) -> pa.Table:
        if self._result is not None:
            return self._result
        table = self.array.table
        version = self.array.version
        outputs = [c.output_name for c in self.calls]
        result_schema = _result_schema(self.names, outputs)
        if version == 0:
            self._result, self._version = result_schema.empty_table(), version
            return self._result
        engine = self.array._db.executors.engine(self.choose().executor)
        partial_schema = _partial_schema(self.names, self.calls)
        grid = block_grid(table.schema, self.blocks, self.kept)
        frame = engine.read_files(table.files(version), layout.fragment_schema(table.storage))
        stage_one = engine.map_batches(
            frame,
            functools.partial(
                block_partials,
                schema=table.schema,
                storage=table.storage,
                blocks=self.blocks,
                kept=self.kept,
                names=self.names,
                calls=self.calls,
                threshold=self.threshold,
                grid=grid,
                out=partial_schema,
            ),
            partial_schema,
        )
        stage_two = engine.group(
            stage_one,
            [layout.chunk_column(n) for n in self.names],
            functools.partial(
                block_totals,
                schema=table.schema,
                kept=self.kept,
                names=self.names,
                calls=self.calls,
                grid=grid,
                out=result_schema,
            ),
            result_schema,
        )
        result = engine.collect(stage_two, result_schema)
        self._result, self._version = result.sort_by([(n, "ascending") for n in self.names]), version
        return self._result

    def to_pandas(self) -> pd.DataFrame:
        return self.to_arrow().to_pandas()

    def count(self) -> int:
        """Rows of the result: the blocks (or groups) some tuple may lie in, as a subarray or a join
        counts its rows (the expected number of tuples is the ``count(*)`` aggregate)."""
        return self.to_arrow().num_rows

    def store(self, name: str):
        """Store the expected aggregates as an ordinary array ``name`` (one attribute per aggregate)."""
        schema = self.array.schema
        check_identifier(name, "array", ValidationError)  # before the result's schema text is built
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
