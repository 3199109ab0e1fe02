"""The data files of a part table's parts with their row counts and sizes, from the table's
manifests (what a maintenance step reads, known before any data is read)."""

from __future__ import annotations

from dataclasses import dataclass

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
    return [PartFile(*found) for found in table.sized_files_of_parts(low, high)]
