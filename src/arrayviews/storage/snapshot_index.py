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
import operator
import threading
from collections import OrderedDict

from pyiceberg.table.metadata import TableMetadataCommonFields

#: Metadata objects whose indexes are kept (a few per table in use).
KEPT = 256

_lock = threading.Lock()
_kept: OrderedDict[int, _Index] = OrderedDict()
_scan_by_id = TableMetadataCommonFields.snapshot_by_id


class _Index:
    """The snapshots of one metadata object by id and by version, each built when first asked,
    from the index of the metadata this one was committed on when it only adds snapshots to it."""

    def __init__(self, metadata, base: _Index | None) -> None:
        self.metadata = metadata
        # extend the base's own base while it has one: every index points at one without a base,
        # so no chain of metadata objects is kept (this metadata extends that one too)
        while base is not None and base._base is not None:
            base = base._base
        self._base = base if base is not None and self._extends(base.metadata) else None
        self._by_id: dict | None = None
        self.versions: dict[str, tuple[list[int], list]] = {}

    def _release(self) -> None:
        """Forget the base once the lookups a step asks for (by id, by version) are built."""
        if self._by_id is not None and self.versions:
            self._base = None

    def _extends(self, older) -> bool:
        """Whether this metadata holds ``older``'s snapshots (the same objects: a commit shares
        them) in the same places and only adds after them (one identity check per snapshot)."""
        old, new = older.snapshots, self.metadata.snapshots
        return (
            older is not self.metadata
            and 0 < len(old) <= len(new)
            and not any(map(operator.is_not, new, old))
        )

    def _added(self) -> list:
        return self.metadata.snapshots[len(self._base.metadata.snapshots) :]

    @property
    def by_id(self) -> dict:
        if self._by_id is None:
            if self._base is not None:
                ids = dict(self._base.by_id)
                ids.update((snapshot.snapshot_id, snapshot) for snapshot in self._added())
            else:
                ids = {snapshot.snapshot_id: snapshot for snapshot in self.metadata.snapshots}
            self._by_id = ids
            self._release()
        return self._by_id

    def by_version(self, key: str) -> tuple[list[int], list]:
        """(versions ascending, snapshots in that order) of the snapshots whose summary names a
        version under ``key``; snapshots of one version stay in the metadata's order."""
        found = self.versions.get(key)
        if found is None:
            found = self._extended(key) if self._base is not None else self._built(key)
            self.versions[key] = found
            self._release()
        return found

    def _built(self, key: str) -> tuple[list[int], list]:
        numbered = [
            (number, position, snapshot)
            for position, snapshot in enumerate(self.metadata.snapshots)
            if (number := _version(snapshot, key)) is not None
        ]
        numbered.sort(key=lambda item: (item[0], item[1]))
        return [n for n, _, _ in numbered], [s for _, _, s in numbered]

    def _extended(self, key: str) -> tuple[list[int], list]:
        versions, snapshots = self._base.by_version(key)
        versions, snapshots = list(versions), list(snapshots)
        for snapshot in self._added():
            number = _version(snapshot, key)
            if number is not None:  # after every snapshot of its version already indexed
                at = bisect.bisect_right(versions, number)
                versions.insert(at, number)
                snapshots.insert(at, snapshot)
        return versions, snapshots


def _version(snapshot, key: str) -> int | None:
    summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
    number = summary.get(key)
    return None if number is None else int(number)


#: The index asked for last for each table (by uuid): the next metadata of the table extends it.
_latest: dict[str, _Index] = {}


def index_of(metadata) -> _Index:
    key = id(metadata)
    with _lock:
        found = _kept.get(key)
        table = str(metadata.table_uuid)
        if found is not None and found.metadata is metadata:
            _kept.move_to_end(key)
            _latest[table] = found
            return found
        found = _Index(metadata, _latest.get(table))
        _kept[key] = found
        _latest[table] = found
        while len(_kept) > KEPT:
            _kept.popitem(last=False)
        while len(_latest) > KEPT:
            _latest.pop(next(iter(_latest)))
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
