"""The plan of a sliding-window view (streams/windows.py): its incremental and recompute steps
priced from the stream's rows and groups per part and the calibrated step costs
(``execution.cost.StreamStepCost``), and the cheaper one taken unless a plan is asked for."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from arrayviews.execution.cost import StreamStepCost
from arrayviews.model.errors import ValidationError
from arrayviews.storage.files import read_parquet_files
from arrayviews.storage.part_table import PartTable
from arrayviews.streams.windows import AUTO, INCREMENTAL, PENDING, PLANS, RECOMPUTE, WindowTranslation


@dataclass(frozen=True)
class PartSizes:
    """What the stream's newest parts hold, from its metadata and one part's group columns."""

    rows: float  # rows per part (median over the parts looked at)
    groups: float  # distinct groups in the newest part


@dataclass(frozen=True)
class WindowShape:
    """What the plan choice needs of a window view (a WindowTranslation has the same attributes)."""

    view: str
    parts: int
    subtractable: bool
    float_sums: bool = False
    cumulates: bool = True  # counts or sums beside min/max (the part one window back is read)
    kernel: bool = False  # incremental steps run as the window kernel (views stored before it: no)


@dataclass(frozen=True)
class PlanChoice:
    """The plan a window view is maintained by, and why (EXPLAIN prints it). ``pending``: how
    earlier versions stored AUTO over a stream without rows (a helper and a view until the first
    rows arrived, then chosen by streams/plan_settling.py); ``choose_plan`` no longer makes it."""

    plan: str
    reason: str
    predicted: dict[str, float]
    pending: bool = False

    def property_text(self, **pending_details) -> str:
        """The view's plan as stored with it (``relations.WINDOW_PLAN``)."""
        stored = {
            "plan": PENDING if self.pending else self.plan,
            "reason": self.reason,
            "predicted": self.predicted,
        }
        return json.dumps({**stored, **(pending_details if self.pending else {})}, sort_keys=True)


#: Parts of the stream whose row counts (from its manifests) give the rows per part.
PARTS_LOOKED_AT = 8


def part_sizes(table: PartTable, group_by: tuple[str, ...]) -> PartSizes | None:
    """Rows per part of ``table`` (median over its newest parts with rows, from its manifests) and
    the distinct groups of ``group_by`` in one data file of its newest part (the only data read);
    None while it has no rows."""
    bounds = table.part_range()
    if bounds is None:
        return None
    files = table.sized_files_of_parts(max(bounds[0], bounds[1] - PARTS_LOOKED_AT + 1), bounds[1])
    rows_by_part: dict[int, int] = {}
    for _, part, rows, _ in files:
        rows_by_part[part] = rows_by_part.get(part, 0) + rows
    if not rows_by_part:
        return None
    newest = max(rows_by_part)
    by_lower = {name.lower(): name for name in table.arrow_schema.names}
    keys = [by_lower[g.lower()] for g in group_by]
    sample = next(uri for uri, part, _, _ in files if part == newest)
    groups = read_parquet_files([sample], columns=keys).group_by(keys).aggregate([]).num_rows if keys else 1
    return PartSizes(float(np.median(list(rows_by_part.values()))), float(groups))


def queue_step(
    cost: StreamStepCost, rows: float, groups: float, window: int, cumulates: bool, kernel: bool = True
) -> float:
    """The predicted incremental step of a window with min or max (its monotonic queues; with
    ``cumulates``, counts or sums beside them, subtracted from the part one window back), run as
    the window kernel or, without ``kernel``, as the step's SQL. The terms are those of the layout
    they were fitted to, each queue entry a row of its own and the previous part read three times:
    since round 36 the entries are a list in the group's one row, read once, but an in-process
    step costs about what it did (``benchmarks.run viewdf_queue_layout``: 1.06x at 100 parts, and
    with 5 parts the incremental plan priced the new way was taken where it stepped 6-14% slower
    than recomputing), so the list's values are priced as those rows were."""
    stored = groups + groups * float(np.sum(1.0 / np.arange(1, window + 1)))
    read = rows + 3 * stored + (groups if cumulates else 0.0)
    queue = cost.per_queue if kernel else cost.per_queue_sql
    return (
        cost.per_view
        + queue
        + cost.per_part * (4 + cumulates)
        + cost.per_row * read
        + cost.per_group * stored
    )


def choose_plan(
    shape: WindowTranslation | WindowShape,
    sizes: PartSizes | None,
    cost: StreamStepCost,
    requested: str = AUTO,
) -> PlanChoice:
    """The plan of ``shape``'s view: ``requested`` unless it is ``auto``; otherwise the one with
    the lower predicted step time for parts of ``sizes``. The incremental plan when it keeps float
    sums exactly, and while the stream has no rows: its step does not grow with the window."""
    if requested not in PLANS:
        raise ValidationError(
            f"view {shape.view}: the plan is one of {', '.join(PLANS)}, got {requested!r}",
            array=shape.view,
            value=requested,
        )
    window = shape.parts
    predicted: dict[str, float] = {}
    if sizes is not None:
        rows, groups = sizes.rows, min(sizes.groups, sizes.rows)
        if shape.subtractable:
            # one view reading the stream's part and two of its own (the previous one and the
            # one Wp back), of about ``groups`` rows each
            helper = cost.per_helper if shape.kernel else cost.per_helper_sql
            incremental = (
                cost.per_view
                + helper
                + cost.per_part * 3
                + cost.per_row * (rows + 2 * groups)
                + cost.per_group * groups
            )
        else:
            # one view with a queue of min/max entries per group: it reads the stream's part, its
            # previous part (priced as the three reads of the entry-row layout: queue_step) and,
            # with counts or sums, the part Wp back; a queue over values in random order holds
            # about H(Wp) = 1 + 1/2 + ... + 1/Wp entries (all Wp if every part's value is smaller)
            incremental = queue_step(cost, rows, groups, window, shape.cumulates, shape.kernel)
        predicted = {
            RECOMPUTE: cost.per_view
            + cost.per_part * window
            + cost.per_row * window * rows
            + cost.per_group * groups,
            INCREMENTAL: incremental,
        }
    if requested != AUTO:
        return PlanChoice(requested, f"{requested} requested", predicted)
    if shape.float_sums:
        return PlanChoice(INCREMENTAL, "its float sums are kept exactly by the incremental plan", predicted)
    if sizes is None:
        return PlanChoice(
            INCREMENTAL,
            "the stream has no rows yet: an incremental step reads a few parts whatever the window "
            "(its one table cannot become the recompute plan later)",
            {},
        )
    plan = RECOMPUTE if predicted[RECOMPUTE] < predicted[INCREMENTAL] else INCREMENTAL
    reason = (
        f"{sizes.rows:,.0f} rows and {sizes.groups:,.0f} groups per part, window of {window} parts: "
        f"predicted step {predicted[RECOMPUTE] * 1000:.1f} ms recomputed, "
        f"{predicted[INCREMENTAL] * 1000:.1f} ms incremental"
        f"{'' if shape.kernel else ' (its steps run their SQL, not the window kernel)'}"
    )
    return PlanChoice(plan, reason, predicted)


__all__ = [
    "PARTS_LOOKED_AT",
    "PartSizes",
    "PlanChoice",
    "WindowShape",
    "choose_plan",
    "part_sizes",
    "queue_step",
]
