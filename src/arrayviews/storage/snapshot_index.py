"""A table's snapshots looked up by id and by arrayviews version through an index built once per
metadata object, not by scanning the snapshot list on every lookup.

pyiceberg finds a snapshot by walking the metadata's list of snapshots, and the current snapshot
is found that way each time a table is asked for it (a maintenance step asks a few dozen times).
A stream and its views gain a snapshot per batch, so those walks grew with the stream's history.
Table metadata objects are immutable (a commit makes a new one), so an index of one never goes
stale; each kept index holds its metadata object, so an object's identity is never reused while
its index is kept.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict

from pyiceberg.table.metadata import TableMetadataCommonFields

#: Metadata objects whose indexes are kept (a few per table in use).
KEPT = 256

_lock = threading.Lock()
_kept: OrderedDict[int, _Index] = OrderedDict()
_scan_by_id = TableMetadataCommonFields.snapshot_by_id


class _Index:
    """The snapshots of one metadata object by id, and (built when first asked) by version."""

    def __init__(self, metadata) -> None:
        self.metadata = metadata
        self.by_id = {snapshot.snapshot_id: snapshot for snapshot in metadata.snapshots}
        self.versions: dict[str, tuple[list[int], list]] = {}

    def by_version(self, key: str) -> tuple[list[int], list]:
        """(versions ascending, snapshots in that order) of the snapshots whose summary names a
        version under ``key``; snapshots of one version stay in the metadata's order."""
        found = self.versions.get(key)
        if found is None:
            numbered = []
            for position, snapshot in enumerate(self.metadata.snapshots):
                summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
                number = summary.get(key)
                if number is not None:
                    numbered.append((int(number), position, snapshot))
            numbered.sort(key=lambda item: (item[0], item[1]))
            found = ([n for n, _, _ in numbered], [s for _, _, s in numbered])
            self.versions[key] = found
        return found


def index_of(metadata) -> _Index:
    key = id(metadata)
    with _lock:
        found = _kept.get(key)
        if found is not None and found.metadata is metadata:
            _kept.move_to_end(key)
            return found
    found = _Index(metadata)
    with _lock:
        _kept[key] = found
        while len(_kept) > KEPT:
            _kept.popitem(last=False)
    return found


def snapshot_by_id(self, snapshot_id: int):
    """pyiceberg's ``snapshot_by_id`` through the kept index (None for an unknown id)."""
    return index_of(self).by_id.get(snapshot_id)


def snapshots_after(metadata, key: str, after: int) -> list:
    """The snapshots whose summary names a version above ``after`` under ``key``, oldest version
    first (a bisection of the kept index: asking what changed lately does not walk the history)."""
    versions, snapshots = index_of(metadata).by_version(key)
    return snapshots[bisect.bisect_right(versions, after) :]


def install() -> None:
    """Make pyiceberg's snapshot lookups in this process use the kept indexes."""
    TableMetadataCommonFields.snapshot_by_id = snapshot_by_id


__all__ = ["KEPT", "index_of", "install", "snapshot_by_id", "snapshots_after"]
