"""Fragment metadata read once per process: a listing equals the files' own rows read with pyarrow,
follows the version's file list through inserts, deletes and compaction, and a second listing of
the same files opens none of them (a refresh's chunk list no longer reads every file of the view)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import arrayviews
from arrayviews.model.shapes import L1
from arrayviews.operators.source import StoredSource
from arrayviews.storage import fragment_metadata, layout
from arrayviews.storage.files import filesystem
from arrayviews.views.definition import similarity


@pytest.fixture
def ldb(spark, tmp_path):
    return arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution="local")


def _source(array) -> StoredSource:
    table = array._current().table
    return StoredSource(table, table.current_version())


def _reference(source: StoredSource, ranges=None) -> pa.Table:
    """Every file of the version read whole with pyarrow, its metadata columns kept, rows of
    ``ranges`` of chunks only, in file order."""
    columns = layout.metadata_columns(source.schema)
    pieces = []
    for stored in source.table.data_files(source.version):
        fs, path = filesystem(stored.file_path)
        rows = pq.read_table(path, filesystem=fs, columns=columns)
        if ranges is not None:
            keep = np.ones(rows.num_rows, bool)
            for column, (low, high) in zip(layout.chunk_columns(source.schema), ranges, strict=True):
                values = rows.column(column).to_numpy()
                keep &= (values >= low) & (values <= high)
            rows = rows.filter(pa.array(keep))
        pieces.append(rows)
    return pa.concat_tables(pieces)


def _sorted_rows(table: pa.Table) -> list[tuple]:
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))


def test_listing_equals_the_files_rows_through_inserts_deletes_and_compaction(ldb) -> None:
    array = ldb.create_array("A<v:int64>[i=0:59:10; j=0:59:10]")
    rng = np.random.default_rng(3)
    for step in range(4):
        cells = np.unique(rng.integers(0, 60, (40, 2)), axis=0)
        array.insert(
            {"i": cells[:, 0], "j": cells[:, 1], "v": cells[:, 0] * 100 + step}, on_conflict="replace"
        )
        for ranges in (None, [(0, 2), (1, 4)], [(5, 5), (0, 0)]):
            got = _source(array).metadata(ranges)
            assert _sorted_rows(got) == _sorted_rows(_reference(_source(array), ranges))
    array.delete(box={"i": (0, 29)})
    assert _sorted_rows(_source(array).metadata()) == _sorted_rows(_reference(_source(array)))
    array.compact()
    source = _source(array)
    assert _sorted_rows(source.metadata()) == _sorted_rows(_reference(source))
    assert all(i >= 3 for i in source.metadata().column("c__i").to_pylist())


def test_a_second_listing_opens_no_file(ldb, monkeypatch) -> None:
    array = ldb.create_array("B<v:float64>[i=0:39:10; j=0:39:10]")
    for step in range(3):
        array.insert({"i": [step, 20 + step], "j": [step, 30 + step], "v": [1.0, 2.0]})
    opened: list[str] = []
    real = ds.dataset

    def counting(source, *args, **kwargs):
        opened.extend(source if isinstance(source, list) else [source])
        return real(source, *args, **kwargs)

    monkeypatch.setattr(ds, "dataset", counting)
    first = _source(array).metadata()
    assert len(opened) == 3  # the three inserts' files, once
    opened.clear()
    again = _source(array).metadata()
    assert opened == [] and _sorted_rows(again) == _sorted_rows(first)
    array.insert({"i": [9], "j": [9], "v": [3.0]})
    opened.clear()
    assert _source(array).metadata().num_rows == first.num_rows + 1
    assert len(opened) == 1  # only the new file


def test_refreshes_with_cached_listings_match_brute_force(ldb) -> None:
    base = ldb.create_array("C<v:float64>[i=0:79:10; j=0:79:10]")
    rng = np.random.default_rng(5)
    present = rng.random((80, 80)) < 0.5
    base.write_dense(np.ma.MaskedArray(rng.random((80, 80)), mask=~present))
    view = ldb.create_view("C_near", similarity("C", "C", L1(1), ["count(*) as cnt"]))
    free = np.argwhere(~present)
    for step in range(3):  # each refresh lists the view's chunks from the cache and its new files
        cell = free[step * 7]
        base.insert({"i": [int(cell[0])], "j": [int(cell[1])], "v": [1.0]})
        present[cell[0], cell[1]] = True
        view.refresh("auto")
    # each held cell's count: the held cells within L1 distance 1, itself included
    padded = np.pad(present, 1).astype(np.int64)
    expected = (
        padded[1:-1, 1:-1] + padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]
    )
    got = view.to_numpy("cnt", masked=True)
    np.testing.assert_array_equal(np.ma.getmaskarray(got), ~present)
    np.testing.assert_array_equal(got.filled(0), np.where(present, expected, 0))


def test_the_cache_is_bounded_and_apart_from_the_chunk_cache() -> None:
    from arrayviews.storage.chunk_cache import process_cache

    assert fragment_metadata.metadata_cache() is not process_cache()
    assert fragment_metadata.metadata_cache().budget == fragment_metadata.METADATA_BUDGET


def test_a_refresh_reads_each_old_chunk_once(ldb, monkeypatch) -> None:
    """Both sides of a self-join read the same old chunks: one read serves them (execution/
    local_engine.py keeps recent reads of data files, which never change once written)."""
    from arrayviews.execution import local_engine
    from arrayviews.storage.chunk_cache import ChunkCache

    base = ldb.create_array("D<v:float64>[i=0:59:10; j=0:59:10]")
    rng = np.random.default_rng(8)
    present = rng.random((60, 60)) < 0.6
    base.write_dense(np.ma.MaskedArray(rng.random((60, 60)), mask=~present))
    view = ldb.create_view("D_near", similarity("D", "D", L1(1), ["count(*) as cnt"]))
    # a cache of the default size, whatever budget earlier tests of the run left
    monkeypatch.setattr(local_engine, "_RECENT_READS", ChunkCache(local_engine.RECENT_READS_BYTES))
    reads: list[tuple] = []
    real = local_engine.read_parquet_files

    def recording(uris, columns=None, row_filter=None, schema=None):
        reads.append((tuple(uris), None if columns is None else tuple(columns), str(row_filter)))
        return real(uris, columns, row_filter, schema)

    monkeypatch.setattr(local_engine, "read_parquet_files", recording)
    cell = np.argwhere(~present)[0]
    base.insert({"i": [int(cell[0])], "j": [int(cell[1])], "v": [1.0]})
    view.refresh("baseline")
    assert reads and len(reads) == len(set(reads)), reads
    assert view.verify()


def test_recent_reads_follow_the_chunk_cache_budget(spark, tmp_path) -> None:
    from arrayviews.execution import local_engine
    from arrayviews.storage.chunk_cache import process_cache

    before = process_cache().budget
    try:
        arrayviews.connect(str(tmp_path / "w0"), spark=spark, chunk_cache_bytes=0)
        assert local_engine._RECENT_READS.budget == 0
        arrayviews.connect(str(tmp_path / "w1"), spark=spark, chunk_cache_bytes=40_000)
        assert local_engine._RECENT_READS.budget == 10_000
        arrayviews.connect(str(tmp_path / "w2"), spark=spark, chunk_cache_bytes=1 << 30)
        assert local_engine._RECENT_READS.budget == local_engine.RECENT_READS_BYTES
    finally:
        arrayviews.connect(str(tmp_path / "w3"), spark=spark, chunk_cache_bytes=before)
