"""Table metadata with a commit's updates applied, sharing the unchanged parts with the base metadata.

pyiceberg 0.12 applies a commit's updates (add snapshot, set ref, set properties...) to a table's
metadata and then deep-copies the whole result, snapshots and their summaries included. A commit
does that at least twice (the transaction's view of the metadata, then the catalog's staged
metadata), so its cost grew with the snapshots a table holds: at 45 snapshots the copies were a
fifth of a stream view's maintenance step. Every update builds new containers for what it changes
and the metadata models are frozen, so the copy protects nothing; here it is left out. The updates
themselves are pyiceberg's (its ``_apply_table_update`` handlers), in the same order, with the same
checks afterwards.

A commit applies its updates twice to the same base: for the transaction's view of the metadata,
then in the catalog, which adds the metadata log. The handlers' result depends only on the base
and the update objects (all frozen), so the last results are kept by their identities and the
catalog's application reuses the transaction's (the log and time stamp are still added per call).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict
from collections.abc import Sequence

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import (
    TableUpdate,
    _apply_table_update,
    _TableMetadataUpdateContext,
    _update_table_metadata_log,
)

#: Applications kept (the last few commits' in this process).
APPLIED_KEPT = 16
_lock = threading.Lock()
_applied: OrderedDict[tuple, tuple] = OrderedDict()


def _applied_updates(base: TableMetadata, updates: Sequence[TableUpdate]) -> tuple[TableMetadata, bool]:
    """``base`` with pyiceberg's handlers of ``updates`` applied and checked, and whether anything
    changed; kept by the identities of base and updates (the kept value holds them, so the
    identities are not reused while it is kept)."""
    updates = tuple(updates)
    key = (id(base), tuple(id(update) for update in updates))
    with _lock:
        found = _applied.get(key)
    if found is not None and found[0] is base and all(a is b for a, b in zip(found[1], updates, strict=True)):
        return found[2], found[3]
    context = _TableMetadataUpdateContext()
    metadata = base
    for update in updates:
        metadata = _apply_table_update(update, metadata, context)
    metadata.spec().check_compatible(metadata.schema())
    metadata.sort_order().check_compatible(metadata.schema())
    changed = context.has_changes()
    with _lock:
        _applied[key] = (base, updates, metadata, changed)
        while len(_applied) > APPLIED_KEPT:
            _applied.popitem(last=False)
    return metadata, changed


def apply_updates(
    base: TableMetadata, updates: Sequence[TableUpdate], metadata_location: str | None = None
) -> TableMetadata:
    """``base`` with ``updates`` applied; ``metadata_location`` (the file ``base`` was read from)
    goes into the metadata log when something changed, as a catalog commit records it."""
    metadata, changed = _applied_updates(base, updates)
    if changed:
        if metadata_location:
            metadata = _update_table_metadata_log(metadata, metadata_location, base.last_updated_ms)
        if metadata.last_updated_ms == base.last_updated_ms:
            now = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
            metadata = metadata.model_copy(update={"last_updated_ms": now})
    return metadata
