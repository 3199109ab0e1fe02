"""Which parts a part table's snapshot holds, kept per snapshot: its data files sorted by part,
carried forward from each commit this process makes to the next snapshot (finding a step's files
never sorts every file of a long stream again), and its lowest and highest part, from each
manifest's bounds kept per manifest (a manifest is never rewritten: a new snapshot reads the
bounds of its new manifests only)."""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence

from pyiceberg.manifest import DataFile as StoredFile
from pyiceberg.manifest import ManifestFile

#: Snapshots whose files sorted by part are kept (all part tables together).
BY_PART_KEPT = 256
#: How many data files' parts are remembered (a file holds one part for good).
PARTS_BY_PATH_KEPT = 1 << 16
#: Snapshots whose part range, and manifests whose bounds, are kept.
RANGES_KEPT = 1024
BOUNDS_KEPT = 1 << 14

PartIndex = tuple[list[int], list[StoredFile]]

_by_part: OrderedDict[tuple[str, int], PartIndex] = OrderedDict()
_lock = threading.Lock()
_part_by_path: dict[str, int] = {}
_ranges: OrderedDict[tuple[str, int], tuple[int, int] | None] = OrderedDict()
_bounds: dict[tuple, tuple[int, int] | None] = {}


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


def part_range(
    table_uuid: str, snapshot, io, bounds_of: Callable[[ManifestFile], tuple[int, int] | None]
) -> tuple[int, int] | None:
    """The lowest and highest part of ``snapshot``'s live files (None when it has none): the
    bounds ``bounds_of`` gives for each of its manifests, each manifest's kept by its path and
    the counts of its record (the same file listed with other counts is asked again)."""
    key = (table_uuid, snapshot.snapshot_id)
    with _lock:
        if key in _ranges:
            _ranges.move_to_end(key)
            return _ranges[key]
    low = high = None
    for manifest in snapshot.manifests(io):
        manifest_key = (
            manifest.manifest_path,
            manifest.content,
            manifest.added_files_count,
            manifest.existing_files_count,
            manifest.deleted_files_count,
        )
        if manifest_key in _bounds:
            bounds = _bounds[manifest_key]
        else:
            bounds = _bounds[manifest_key] = bounds_of(manifest)
            if len(_bounds) > BOUNDS_KEPT:
                _bounds.clear()
        if bounds is not None:
            low = bounds[0] if low is None else min(low, bounds[0])
            high = bounds[1] if high is None else max(high, bounds[1])
    found = None if low is None else (low, high)
    with _lock:
        _ranges[key] = found
        while len(_ranges) > RANGES_KEPT:
            _ranges.popitem(last=False)
    return found
