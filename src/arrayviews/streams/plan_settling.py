"""Choosing the plan of a window view created over a stream without rows, once rows arrive.

Since round 14 every incremental window is one table and is incremental at once over an empty
stream; this serves the min/max window views earlier versions left pending. Then,
``CREATE VIEW ... [WINDOW ...]`` (AUTO) over an empty stream could not price its plans, so it created
the incremental plan (helper and view) and stores the view's plan as *pending*, with what the
choice needs and the recompute plan's definition (streams/windows.py). At the start of each
maintenance pass, a pending view whose stream now has rows and which has built nothing yet gets
its plan: the view's definition becomes the recompute one and its helper is dropped, or the plan
is marked incremental. The definition and the plan change in one metadata commit, made only if
the view is still pending and still has no version (another process that chose first, or built a
part first, wins; the catalog's swap fails on a table that moved since it was read). A crash
between that commit and dropping the helper leaves a helper nothing reads, which the next pass
drops. A process that read the warehouse before the choice and is maintaining the helper at that
moment meets a dropped table, as it would after a concurrent DROP VIEW: its step of the helper
fails, the view is skipped for that pass, and its next pass reads the new definition.
"""

from __future__ import annotations

import json

from arrayviews.model.faults import checkpoint
from arrayviews.model.names import HELPER_SUFFIX
from arrayviews.model.viewdf import ViewDFDefinition
from arrayviews.streams import relations as rel
from arrayviews.streams.window_plans import WindowShape, choose_plan, part_sizes
from arrayviews.streams.windows import PENDING, RECOMPUTE


def settle_window_plans(world) -> bool:
    """Choose the plan of every pending window view whose stream has rows now, and drop the helpers
    left by a crash; True if any view or helper changed (the caller reads the warehouse again)."""
    changed = False
    for name in list(world.definitions()):
        text = world.view(name).table.properties.get(rel.WINDOW_PLAN)
        if not text:
            continue
        stored = json.loads(text)
        if stored["plan"] == PENDING:
            changed |= _settle(world, name, stored)
        elif stored["plan"] == RECOMPUTE:
            changed |= _drop_unread_helper(world, name)
    return changed


def _definition(text: str) -> ViewDFDefinition:
    from arrayviews.streams.world import normalized  # world.py imports the maintainer, which imports this

    return normalized(ViewDFDefinition.from_json(text))


def _settle(world, name: str, stored: dict) -> bool:
    view = world.view(name)
    sizes = part_sizes(world.table(stored["stream"]), tuple(stored["group_by"]))
    if sizes is None:
        return False
    shape = WindowShape(name, stored["parts"], stored["subtractable"])
    choice = choose_plan(shape, sizes, world.costs.stream_step)
    reason = f"chosen when the stream's first rows arrived: {choice.reason}"
    decided = json.dumps(
        {"plan": choice.plan, "reason": reason, "predicted": choice.predicted}, sort_keys=True
    )

    def pending(table) -> bool:
        properties = table.metadata.properties
        return json.loads(properties.get(rel.WINDOW_PLAN, "{}")).get("plan") == PENDING

    def pending_and_unbuilt(table) -> bool:
        return pending(table) and table.current_snapshot() is None

    if choice.plan == RECOMPUTE:
        definition = _definition(stored["recompute"])
        updates = {rel.DEFINITION: definition.to_json(), rel.WINDOW_PLAN: decided}
        if view.table.update_properties(updates, only_if=pending_and_unbuilt):
            checkpoint("viewdf.plan-chosen")
            _drop_unread_helper(world, name)
            return True
        # built meanwhile (or chosen by another process): the incremental plan stays
        reason = "incremental: its first part was built before the plan was chosen"
        decided = json.dumps({"plan": "incremental", "reason": reason, "predicted": choice.predicted})
    view.table.update_properties({rel.WINDOW_PLAN: decided}, only_if=pending)
    return True


def _drop_unread_helper(world, name: str) -> bool:
    """Drop ``name``'s incremental helper if no view reads it (the view recomputes its window)."""
    helper = (name + HELPER_SUFFIX).lower()
    if helper not in world.kinds:
        return False
    readers = [
        d for d in world.definitions().values() if d.name.lower() != name.lower() and helper in d.sources()
    ]
    current = _definition(world.view(name).table.refresh().properties[rel.DEFINITION])
    if readers or helper in current.sources():
        return False
    world.table(helper).drop(missing_ok=True)  # another process may have dropped it first
    return True


__all__ = ["settle_window_plans"]
