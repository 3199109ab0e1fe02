"""The cost model that picks an executor per operation from chunk metadata alone, and its stored
calibration (``execution.json`` in the warehouse folder).

An operation's predicted time on an engine is ``fixed + per_cell * cells + per_job * jobs`` (the
engine's start-up cost of a job dominates small work on Spark; the per-cell cost dominates large
work in-process, which has one core), plus for the uncertain operators (paper 001) a cost per tuple
copy and per candidate pair, per aggregate run and per block contribution, and the in-process
structure join's plan terms (per outer block; per copy routed, inner chunk co-grouped and pair).
The in-process engine is also refused above a hard limit of cells or bytes, so the driver never
reads more than that, whatever the prediction says.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace

from arrayviews.model.errors import ValidationError
from arrayviews.storage.files import filesystem

MODES = ("auto", "spark", "local")
CALIBRATION_FILE = "execution.json"


@dataclass(frozen=True)
class Estimate:
    """What an operation will read, from metadata: cells, bytes, stored fragments (``chunks``: a chunk
    written in several versions has several; each is a task's unit) and Spark jobs."""

    cells: int = 0
    bytes: int = 0
    chunks: int = 0
    jobs: int = 1
    #: Uncertain operators (paper 001): stored tuple copies read, decoded and de-duplicated, and the
    #: candidate (outer copy, inner copy) pairs a join searches and validates. Array cells stay 0.
    copies: int = 0
    pairs: float = 0.0
    #: Uncertain aggregates (Appendix A): operator runs (each pays a set-up cost) and the (tuple,
    #: block) contributions the block-probability kernel computes and sums exactly.
    aggregates: int = 0
    contributions: float = 0.0
    #: The in-process structure join's plan: outer blocks of the block plan (Alg. 1), or the outer
    #: copies routed to inner chunks, the inner chunks co-grouped and the candidate pairs searched
    #: chunk by chunk by the routed plan (its pairs are counted here, not in ``pairs``).
    blocks: int = 0
    routed: float = 0.0
    groups: int = 0
    routed_pairs: float = 0.0

    def __add__(self, other: Estimate) -> Estimate:
        return Estimate(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Estimate)))

    def text(self) -> str:
        if self.copies or self.pairs or self.routed_pairs:
            work = f"{self.copies:,} tuple copies"
            if self.pairs or self.routed_pairs:
                work += f", {self.pairs + self.routed_pairs:,.0f} candidate pairs"
            if self.contributions:
                work += f", {self.contributions:,.0f} block contributions"
            return f"{work}, {_size(self.bytes)}, {self.chunks} fragment(s)"
        return f"{self.cells:,} cells, {_size(self.bytes)}, {self.chunks} fragment(s)"


def _size(nbytes: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes} B"


@dataclass(frozen=True)
class EngineCost:
    """Predicted seconds of an operation on one engine: fixed + per job + per cell, and for the
    uncertain operators per tuple copy and per candidate pair (operators/uncertain_calibration.py
    ``calibrate_engines`` measures the last two; the defaults were measured on a 2-core machine)."""

    fixed: float
    per_job: float
    per_cell: float
    per_copy: float = 4.0e-6
    per_pair: float = 1.5e-8
    #: The uncertain aggregate's set-up (seconds per run) and its cost per block contribution.
    per_aggregate: float = 0.04
    per_contribution: float = 1.0e-6
    #: The in-process structure join's plan terms: per outer block of the block plan; per outer copy
    #: routed, per inner chunk co-grouped and per candidate pair of the routed plan (0 on Spark,
    #: which prices its routed plan per copy and per pair).
    per_block: float = 0.0
    per_route: float = 0.0
    per_group: float = 0.0
    per_routed_pair: float = 0.0

    def seconds(self, estimate: Estimate) -> float:
        return (
            self.fixed
            + self.per_job * estimate.jobs
            + self.per_cell * estimate.cells
            + self.per_copy * estimate.copies
            + self.per_pair * estimate.pairs
            + self.per_aggregate * estimate.aggregates
            + self.per_contribution * estimate.contributions
            + self.per_block * estimate.blocks
            + self.per_route * estimate.routed
            + self.per_group * estimate.groups
            + self.per_routed_pair * estimate.routed_pairs
        )


@dataclass(frozen=True)
class RefreshCost:
    """The terms of a view refresh the per-cell engine cost lacks: planning and the Iceberg commit
    (fixed), each chunk pair the join kernel runs over, and each view chunk read, merged and
    rewritten. Defaults fitted to refreshes measured on a 2-core machine (docs/performance.md)."""

    fixed: float = 0.08
    per_pair: float = 1.0e-3
    #: A chunk pair of a full computation: each left chunk meets all its right cells in one kernel
    #: call, so a pair costs the routing of one right chunk's cells, not a call of its own (fitted to
    #: the views benchmark's full refreshes, docs/performance.md round 26: 0.07-0.17 ms a pair
    #: against about 1 ms for the pairs of an incremental refresh's delta terms).
    per_full_pair: float = 1.0e-4
    per_view_chunk: float = 2.0e-3
    #: Each match (a pair of cells inside the shape) the join kernel aggregates: prices joins over
    #: shapes of different sizes, as in answering a query through a view (views/answering.py).
    per_match: float = 2.0e-8

    def seconds(self, pairs: int, view_chunks: int, full: bool = False) -> float:
        """Seconds of a refresh forming ``pairs`` chunk pairs (those of a full computation when
        ``full``) and rewriting ``view_chunks`` view chunks."""
        per_pair = self.per_full_pair if full else self.per_pair
        return self.fixed + per_pair * pairs + self.per_view_chunk * view_chunks

    def match_seconds(self, matches: float) -> float:
        return self.per_match * matches


@dataclass(frozen=True)
class StreamStepCost:
    """An in-process stream view step: each view built pays a fixed cost (planning, its query's
    set-up, one Parquet file and one Iceberg commit), each part it reads a cost (finding and
    reading its file; less when this process wrote it lately), each input row a query cost and
    each row it writes (a group's row; with a queue, its entries too) ``per_group``; a
    window's incremental plan, which joins the view's earlier parts, pays ``per_helper`` more per
    step, and ``per_queue`` with a min/max queue (streams/windows.py), when its steps run as the
    numpy kernel (kernels/window_steps.py); ``per_helper_sql`` and ``per_queue_sql`` instead when
    they run the step's SQL (HAVING, DECIMAL or float sums, float keys or extremes). Defaults from
    ``db.calibrate()`` on a quiet 2-core machine with 10^4-row parts, rounds 27-28: 3.1-3.5 ms a
    view, 0.17-0.38 ms more for a sum window's incremental step and 0.26-0.41 ms for a max window's
    queue by the kernel, 0.9-1.6 and 1.8-4.8 ms by the SQL, 7-15 ns a row; the cost of a part read
    from its file is kept from round 10 (the calibration's parts were all in this process's memory).
    ``per_group`` (a row written) and ``per_queue`` from round 33's calibrations, the first whose
    scratch streams vary the rows written apart from the rows read (``streams.calibration``): 0.28-0.58
    us a row written, and nothing left for the queue beyond its entries written. Until then
    ``per_group`` was 0 and ``per_queue`` 0.4 ms, which priced a max window's queue the same however
    many entries it writes (1 + H(W) a group): over 10^4-row parts its step measured 3.4 ms more
    with 6,300 groups a part than with 1,000."""

    per_view: float = 0.0035
    per_part: float = 2.0e-4
    per_row: float = 1.5e-8
    per_helper: float = 0.0003
    per_queue: float = 0.0
    per_helper_sql: float = 0.0013
    per_queue_sql: float = 0.0030
    per_group: float = 3.0e-7
    #: One part built by the window kernel in this process (what the executor choice and the
    #: part's report predict; the commit is not in it): a fixed cost (reading set-up, the kernel's
    #: own, one Parquet file), each row it reads (its stream part, the view's earlier parts) and each
    #: row it writes. Fitted by ``db.calibrate()`` to the builds of its kernel views, one of them over
    #: parts of 10^6 rows (``streams.calibration``); defaults from builds measured on a 2-core
    #: machine in round 34, 10^4 to 2.5 * 10^6 rows a part: 1.4 ms at 1.2 * 10^4 rows read,
    #: 68 ms at 1.02 * 10^6, 187 ms at 2.55 * 10^6 (parts that large are read from their files).
    kernel_fixed: float = 5.0e-4
    kernel_per_row: float = 7.0e-8
    kernel_per_written: float = 2.0e-7

    #: The same three terms for a part whose query runs as SQL in this process (Acero or DuckDB:
    #: pattern views, hand-written ViewDFs, the recompute plan, windows the kernel does not take),
    #: fitted by ``db.calibrate()`` to its recompute and SQL views' builds and to a recompute window
    #: over the stream of 10^6 rows a part. Defaults from round 34's builds: a pattern part 1.3-2.2 ms
    #: at 10^4 rows read and 0.14-0.22 s at 2.5 * 10^6 (from its file), a recompute window's 0.22-0.25 s
    #: at 5 * 10^6.
    sql_fixed: float = 1.0e-3
    sql_per_row: float = 6.0e-8
    sql_per_written: float = 2.0e-7

    def kernel_build_seconds(self, rows: float, written: float) -> float:
        """Predicted seconds of the window kernel building one part in this process from ``rows``
        rows read and writing ``written`` rows."""
        return self.kernel_fixed + self.kernel_per_row * rows + self.kernel_per_written * written

    def sql_build_seconds(self, rows: float, written: float) -> float:
        """Predicted seconds of a part's query run as SQL in this process over ``rows`` rows read,
        writing ``written`` rows."""
        return self.sql_fixed + self.sql_per_row * rows + self.sql_per_written * written

    def part_build_seconds(self, rows: float, own_parts: Sequence[float], kernel: bool) -> float:
        """Predicted seconds of building a stream view's part in this process, by the window
        kernel (``kernel``) or as SQL, reading ``rows`` rows (each file once) and writing as many
        rows as the view's own earlier parts it reads hold on average (``own_parts``: their rows;
        none read, none counted)."""
        written = sum(own_parts) / len(own_parts) if own_parts else 0.0
        return self.kernel_build_seconds(rows, written) if kernel else self.sql_build_seconds(rows, written)


@dataclass(frozen=True)
class CostModel:
    """Both engines' costs and the hard limits of the in-process engine."""

    local: EngineCost = EngineCost(
        0.002, 0.0, 2.0e-7, 4.0e-6, 1.5e-8, 0.015, 2.0e-6, 0.01, 3.0e-7, 1.5e-3, 1.2e-8
    )
    spark: EngineCost = EngineCost(0.05, 0.45, 1.0e-7, 2.0e-6, 7.5e-9, 0.0, 1.0e-6)
    max_local_cells: int = 20_000_000
    max_local_bytes: int = 1 << 30
    calibrated: str | None = None  # when, or None for the defaults
    notes: dict = field(default_factory=dict)
    refresh_local: RefreshCost = RefreshCost()
    refresh_spark: RefreshCost = RefreshCost()
    stream_step: StreamStepCost = StreamStepCost()

    def seconds(self, engine: str, estimate: Estimate) -> float:
        return (self.local if engine == "local" else self.spark).seconds(estimate)

    def refresh_terms(self, engine: str) -> RefreshCost:
        """The view refresh terms on ``engine`` (added to :meth:`seconds` of what it reads)."""
        return self.refresh_local if engine == "local" else self.refresh_spark

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> CostModel:
        """The model stored as ``text``; ValueError when a cost is not a finite number >= 0 (a
        string, null, NaN or a negative cost would break or mislead every later choice)."""
        data = json.loads(text)
        default = CostModel()  # files written before the uncertain terms existed get their defaults
        notes = dict(data.get("notes", {}))
        return CostModel(
            _costs(EngineCost, {**asdict(default.local), **data["local"]}, "local"),
            _costs(EngineCost, {**asdict(default.spark), **data["spark"]}, "spark"),
            int(_cost("max_local_cells", data["max_local_cells"])),
            int(_cost("max_local_bytes", data["max_local_bytes"])),
            data.get("calibrated"),
            notes,
            _costs(RefreshCost, data.get("refresh_local", {}), "refresh_local"),
            _costs(RefreshCost, data.get("refresh_spark", {}), "refresh_spark"),
            _stream_step(data.get("stream_step", {}), notes.get("stream_step")),
        )

    def stamped(self, notes: dict) -> CostModel:
        return replace(self, calibrated=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), notes=notes)


def _cost(name: str, value: object) -> float:
    """``value`` when it is a finite number >= 0 (not a bool), else ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} is {value!r}, not a finite number of seconds (or count) >= 0")
    return value


def _stream_step(values: dict, samples: object) -> StreamStepCost:
    """The stored stream step terms, or the defaults when they were fitted from steps whose rows
    written never varied apart from their rows read (``samples``: the steps the calibration
    measured, kept in the model's notes): calibrations before round 33 drew every scratch stream's
    groups from a tenth of its rows, and their cost of a row written is the noise of a step
    (streams/calibration.py ``stream_shapes``). ``db.calibrate()`` measures the terms again."""
    terms = _costs(StreamStepCost, values, "stream_step")
    if not isinstance(samples, list) or not samples:
        return terms  # set by hand, or never calibrated: kept as stored
    try:
        ratios = {round(float(s["groups"]) / float(s["rows"]), 1) for s in samples}
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return terms
    return terms if len(ratios) > 1 else StreamStepCost()


def _costs(cls: type, values: dict, where: str):
    """``cls`` from stored ``values`` (missing terms keep their defaults), each term checked."""
    return cls(**{name: _cost(f"{where}.{name}", value) for name, value in values.items()})


@dataclass(frozen=True)
class Choice:
    """Which executor runs an operation, and why (reports and EXPLAIN print ``reason``)."""

    executor: str
    reason: str
    estimate: Estimate
    predicted: dict[str, float]

    def as_dict(self) -> dict:
        return {
            "executor": self.executor,
            "reason": self.reason,
            "cells": self.estimate.cells,
            "bytes": self.estimate.bytes,
            "chunks": self.estimate.chunks,
            "jobs": self.estimate.jobs,
            "copies": self.estimate.copies,
            "pairs": self.estimate.pairs,
            "aggregates": self.estimate.aggregates,
            "contributions": self.estimate.contributions,
            "blocks": self.estimate.blocks,
            "routed": self.estimate.routed,
            "groups": self.estimate.groups,
            "routed_pairs": self.estimate.routed_pairs,
            "predicted": self.predicted,
        }


def choose(
    model: CostModel,
    estimate: Estimate,
    mode: str = "auto",
    local_estimate: Estimate | None = None,
    local_seconds: float | None = None,
) -> Choice:
    """The executor for an operation reading ``estimate`` under ``mode`` (auto, spark or local);
    ``local_estimate`` prices the in-process engine when its plan differs from Spark's, and
    ``local_seconds`` is its prediction when a model of its own prices the operation (a stream
    view's part: ``StreamStepCost.kernel_build_seconds`` or ``sql_build_seconds``)."""
    local = estimate if local_estimate is None else local_estimate
    predicted = {
        "local": model.seconds("local", local) if local_seconds is None else local_seconds,
        "spark": model.seconds("spark", estimate),
    }
    if mode not in MODES:
        raise ValidationError(f"execution must be one of {', '.join(MODES)}, got {mode!r}")
    if mode != "auto":
        return Choice(mode, f"forced by execution={mode!r}", estimate, predicted)
    if max(estimate.cells, estimate.copies) > model.max_local_cells or estimate.bytes > model.max_local_bytes:
        return Choice(
            "spark",
            f"{estimate.text()} exceed the in-process limit ({model.max_local_cells:,} cells, "
            f"{_size(model.max_local_bytes)})",
            estimate,
            predicted,
        )
    executor = "local" if predicted["local"] <= predicted["spark"] else "spark"
    source = "calibrated" if model.calibrated else "default"
    by_steps = "" if local_seconds is None else " by the stream step costs"
    return Choice(
        executor,
        f"{estimate.text()}: predicted in-process {predicted['local']:.4f} s{by_steps}, "
        f"Spark {predicted['spark']:.3f} s ({source} costs)",
        estimate,
        predicted,
    )


def calibration_uri(warehouse: str) -> str:
    return warehouse.rstrip("/") + "/" + CALIBRATION_FILE


def load_costs(warehouse: str) -> CostModel:
    """The calibrated costs stored in the warehouse, or the defaults when there are none (or they
    cannot be read, or hold a cost that is not a finite number >= 0: a damaged file never stops
    work, the defaults are sane)."""
    fs, path = filesystem(calibration_uri(warehouse))
    try:
        with fs.open_input_stream(path) as stream:
            return CostModel.from_json(stream.read().decode())
    except (OSError, ValueError, KeyError, TypeError):
        return CostModel()


def save_costs(warehouse: str, model: CostModel) -> str:
    """Store calibrated costs in the warehouse (written whole, then renamed into place)."""
    uri = calibration_uri(warehouse)
    fs, path = filesystem(uri)
    temporary = path + ".tmp"
    with fs.open_output_stream(temporary) as stream:
        stream.write(model.to_json().encode())
    fs.move(temporary, path)
    return uri
