"""Table metadata with a commit's updates applied, sharing the unchanged parts with the base metadata.

pyiceberg 0.12 applies a commit's updates (add snapshot, set ref, set properties...) to a table's
metadata and then deep-copies the whole result, snapshots and their summaries included. A commit
does that at least twice (the transaction's view of the metadata, then the catalog's staged
metadata), so its cost grew with the snapshots a table holds: at 45 snapshots the copies were a
fifth of a stream view's maintenance step. Every update builds new containers for what it changes
and the metadata models are frozen, so the copy protects nothing; here it is left out. The updates
themselves are pyiceberg's (its ``_apply_table_update`` handlers), in the same order, with the same
checks afterwards.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import (
    TableUpdate,
    _apply_table_update,
    _TableMetadataUpdateContext,
    _update_table_metadata_log,
)


def apply_updates(
    base: TableMetadata, updates: Sequence[TableUpdate], metadata_location: str | None = None
) -> TableMetadata:
    """``base`` with ``updates`` applied; ``metadata_location`` (the file ``base`` was read from)
    goes into the metadata log when something changed, as a catalog commit records it."""
    context = _TableMetadataUpdateContext()
    metadata = base
    for update in updates:
        metadata = _apply_table_update(update, metadata, context)
    if context.has_changes():
        if metadata_location:
            metadata = _update_table_metadata_log(metadata, metadata_location, base.last_updated_ms)
        if metadata.last_updated_ms == base.last_updated_ms:
            now = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
            metadata = metadata.model_copy(update={"last_updated_ms": now})
    metadata.spec().check_compatible(metadata.schema())
    metadata.sort_order().check_compatible(metadata.schema())
    return metadata
