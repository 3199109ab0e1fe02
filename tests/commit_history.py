"""A part table's history of mixed commits for the commit-path tests: thirty commits that add two
parts each, replace a part every third commit and drop the oldest parts every fifth (manifests
merge on the way), made in turn through the given handles (two catalogs: two processes)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa

from arrayviews.storage.part_table import PartTable


def thirty_mixed_commits(handles: Sequence[PartTable], rows: Callable[[list[int], int], pa.Table]) -> int:
    """Make the thirty commits (``rows(parts, tag)`` gives each one's rows); returns the version."""
    version = 0
    for step in range(30):
        handle = handles[step % len(handles)]
        if len(handles) > 1:
            handle.refresh()
        version = handle.commit(
            handle.stage_local(rows([step % 4, step], step)),
            replace_parts=[step % 4] if step % 3 == 0 else [],
            drop_below=step - 6 if step % 5 == 4 else None,
            operation="add",
            expected_version=version,
        )
    return version
