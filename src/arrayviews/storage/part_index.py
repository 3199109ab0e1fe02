"""The data files of a part table's snapshot sorted by part, kept per snapshot and carried forward
from each commit this process makes to the next snapshot, so finding a step's files never sorts
every file of a long stream again."""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence

from pyiceberg.manifest import DataFile as StoredFile

#: Snapshots whose files sorted by part are kept (all part tables together).
BY_PART_KEPT = 256
#: How many data files' parts are remembered (a file holds one part for good).
PARTS_BY_PATH_KEPT = 1 << 16

PartIndex = tuple[list[int], list[StoredFile]]

_by_part: OrderedDict[tuple[str, int], PartIndex] = OrderedDict()
_lock = threading.Lock()
_part_by_path: dict[str, int] = {}


def part_of(data_file: StoredFile) -> int:
    """The part a data file holds (its partition value)."""
    return int(data_file.partition[0])


def _known_part(data_file: StoredFile) -> int:
    part = _part_by_path.get(data_file.file_path)
    if part is None:  # a file not seen yet (its part never changes: paths are not reused)
        part = _part_by_path[data_file.file_path] = part_of(data_file)
    return part


def _keep(key: tuple[str, int], index: PartIndex) -> None:
    with _lock:
        _by_part[key] = index
        while len(_by_part) > BY_PART_KEPT:
            _by_part.popitem(last=False)
    if len(_part_by_path) > PARTS_BY_PATH_KEPT:
        _part_by_path.clear()


def kept_index(table_uuid: str, snapshot_id: int) -> PartIndex | None:
    with _lock:
        found = _by_part.get((table_uuid, snapshot_id))
        if found is not None:
            _by_part.move_to_end((table_uuid, snapshot_id))
        return found


def index_of_listing(table_uuid: str, snapshot_id: int, listing: Mapping[str, StoredFile]) -> PartIndex:
    """The files of ``listing`` (path -> file, in listing order) sorted by part, stably (listing
    order within a part), kept for the snapshot."""
    files = list(listing.values())
    parts = [_known_part(data_file) for data_file in files]
    order = sorted(range(len(files)), key=parts.__getitem__)
    index = ([parts[i] for i in order], [files[i] for i in order])
    _keep((table_uuid, snapshot_id), index)
    return index


def carry_forward(
    table_uuid: str,
    base_snapshot_id: int,
    snapshot_id: int,
    added: Iterable[StoredFile],
    removed: Sequence[StoredFile],
) -> None:
    """Keep the index of ``snapshot_id``, committed on ``base_snapshot_id`` by adding and removing
    these files, from the base's index when that is kept: its files less those removed, each added
    file after the files of its part. That is where sorting the new snapshot's listing puts it,
    since the listing keeps the base's order and adds the new files last
    (``VersionedTable._note_commit``)."""
    base = kept_index(table_uuid, base_snapshot_id)
    if base is None:
        return
    parts, files = base
    if removed:
        gone = {data_file.file_path for data_file in removed}
        kept = [i for i, data_file in enumerate(files) if data_file.file_path not in gone]
        parts, files = [parts[i] for i in kept], [files[i] for i in kept]
    else:
        parts, files = list(parts), list(files)
    for data_file in added:
        part = _known_part(data_file)
        at = bisect.bisect_right(parts, part)
        parts.insert(at, part)
        files.insert(at, data_file)
    _keep((table_uuid, snapshot_id), (parts, files))
