"""A data file is written the same whether it is encoded in memory first (a small table: one write
call) or streamed to the file (a large one): the rows read back, the size returned and the footer
kept for the commit (storage/files.py ``written_footer``) are those of the file on disk."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arrayviews.storage import files


def _table(rows: int) -> pa.Table:
    rng = np.random.default_rng(rows)
    return pa.table(
        {
            "k": pa.array(rng.integers(-(2**40), 2**40, rows), pa.int64()),
            "s": pa.array([f"g{v}" if v % 7 else None for v in rng.integers(0, 50, rows)]),
            "_part": pa.array(np.full(rows, 12), pa.int64()),
        }
    )


@pytest.mark.parametrize("buffered", [True, False])
def test_small_and_streamed_writes_give_the_same_file(tmp_path, monkeypatch, buffered) -> None:
    written = []
    original = files.write_bytes
    monkeypatch.setattr(
        files, "write_bytes", lambda fs, path, data: written.append(path) or original(fs, path, data)
    )
    if not buffered:
        monkeypatch.setattr(files, "BUFFERED_BYTES", 0)
    table = _table(5_000)
    (tmp_path / "data").mkdir()
    uri = files.new_data_file_uri("file://" + str(tmp_path / "data"))
    size = files.write_parquet(table, uri, statistics=["_part"])
    path = uri.removeprefix("file://")
    assert written == ([path] if buffered else [])
    assert size == os.path.getsize(path)
    assert pq.read_table(path).equals(table)
    kept = files.written_footer(uri)
    on_disk = pq.read_metadata(path)
    assert kept is not None and kept.size == size
    assert kept.footer.num_rows == on_disk.num_rows == 5_000
    assert kept.footer.num_row_groups == on_disk.num_row_groups
    for group in range(on_disk.num_row_groups):
        for column in range(on_disk.num_columns):
            ours, theirs = (
                kept.footer.row_group(group).column(column),
                on_disk.row_group(group).column(column),
            )
            assert (ours.path_in_schema, ours.total_compressed_size) == (
                theirs.path_in_schema,
                theirs.total_compressed_size,
            )
            assert (ours.statistics is None) == (theirs.statistics is None)
            if theirs.statistics is not None and theirs.statistics.has_min_max:
                assert (ours.statistics.min, ours.statistics.max) == (
                    theirs.statistics.min,
                    theirs.statistics.max,
                )
