"""The data files of a part table's parts with their row counts and sizes, from the table's
manifests (what a maintenance step reads, known before any data is read)."""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.expressions import And, GreaterThanOrEqual, LessThanOrEqual

from arrayviews.model.names import PART
from arrayviews.storage.part_table import PartTable


@dataclass(frozen=True)
class PartFile:
    """One data file of a part, with its size from the table's metadata (no data read)."""

    uri: str
    part: int
    rows: int
    nbytes: int


def part_files(table: PartTable, low: int, high: int) -> list[PartFile]:
    """The data files of parts ``low`` .. ``high`` in the table's current version, with their sizes
    (from the manifests: the same planning the Spark read of those parts does)."""
    row_filter = And(GreaterThanOrEqual(PART, low), LessThanOrEqual(PART, high))
    found = []
    for data_file in table.live_files(None, row_filter):
        part = int(data_file.partition[0])
        if low <= part <= high:
            found.append(
                PartFile(data_file.file_path, part, data_file.record_count, data_file.file_size_in_bytes)
            )
    return found


def files_by_part(table: PartTable) -> dict[int, list[PartFile]]:
    """The data files (with sizes) of every part of the table's current version."""
    found: dict[int, list[PartFile]] = {}
    for data_file in table.live_files():
        part = int(data_file.partition[0])
        found.setdefault(part, []).append(
            PartFile(data_file.file_path, part, data_file.record_count, data_file.file_size_in_bytes)
        )
    return dict(sorted(found.items()))
