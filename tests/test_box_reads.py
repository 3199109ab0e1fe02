"""Small reads straight from chunks (to_numpy of a stored array or of a subarray of one) and the chunk
cache behind them, against numpy slicing of the reference array the test wrote: after inserts by
another catalog object, deletes, replacing inserts and compaction, with missing and null cells,
boxes crossing chunk edges and the array's edge, and random boxes (hypothesis)."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews.execution.local_engine import follow_chunk_cache_budget
from arrayviews.operators import reads
from arrayviews.operators.source import stored_box
from arrayviews.storage.chunk_cache import ChunkCache, process_cache
from arrayviews.storage.chunk_read import DenseChunk, SparseCells

_names = itertools.count()
ROWS, COLUMNS = 23, 31  # chunks of 5 x 7: the last row and column of chunks are clipped


@pytest.fixture(scope="module")
def mdb(spark, tmp_path_factory):
    return arrayviews.connect(str(tmp_path_factory.mktemp("box") / "warehouse"), spark=spark)


def reference(seed: int, density: float) -> np.ma.MaskedArray:
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(ROWS, COLUMNS))
    return np.ma.MaskedArray(values, mask=rng.random((ROWS, COLUMNS)) >= density)


def stored(db, data: np.ma.MaskedArray, schema: str = "<v:float64>"):
    name = f"B{next(_names)}"
    array = db.create_array(f"{name}{schema}[i=0:{ROWS - 1}:5; j=0:{COLUMNS - 1}:7]")
    array.write_dense(data)
    return array


def check_box(array, expected: np.ma.MaskedArray, box: dict, fill: float = -3.5) -> None:
    """``array.subarray(**box)`` read three ways against numpy slicing of ``expected``."""
    (i0, i1), (j0, j1) = box["i"], box["j"]
    want = expected[max(i0, 0) : i1 + 1, max(j0, 0) : j1 + 1]  # the box clipped to the array
    sub = array.subarray(**box)
    masked = sub.to_numpy(masked=True)
    np.testing.assert_array_equal(np.ma.getmaskarray(masked), np.ma.getmaskarray(want))
    np.testing.assert_array_equal(masked.compressed(), want.compressed())
    np.testing.assert_array_equal(sub.to_numpy(), want.filled(np.nan))
    np.testing.assert_array_equal(sub.to_numpy(fill=fill), want.filled(fill))


BOXES = [
    {"i": (0, ROWS - 1), "j": (0, COLUMNS - 1)},  # everything
    {"i": (5, 9), "j": (7, 13)},  # exactly one chunk
    {"i": (3, 12), "j": (4, 20)},  # across chunk edges
    {"i": (18, 40), "j": (25, 30)},  # past the array's edge, in the clipped chunks
    {"i": (7, 7), "j": (0, 30)},  # one row
    {"i": (-4, 2), "j": (29, 29)},  # one column, below the range
]


@pytest.mark.parametrize("density", [1.0, 0.6, 0.05])
def test_subarrays_match_numpy_slicing(mdb, density: float) -> None:
    data = reference(7, density)
    array = stored(mdb, data)
    for box in BOXES:
        check_box(array, data, box)
        check_box(array, data, box)  # the second read of the same chunks comes from the cache
    np.testing.assert_array_equal(array.to_numpy(masked=True).mask, np.ma.getmaskarray(data))


def test_reads_come_from_the_cache_and_touch_only_the_box(mdb) -> None:
    data = reference(3, 1.0)
    array = stored(mdb, data)
    box = stored_box(array.subarray(i=(5, 9), j=(7, 13)).source)
    spec = array.schema.attributes[0]
    cache = ChunkCache(1 << 20)
    first, cost = reads.box_to_numpy(box, spec, np.nan, False, cache)
    np.testing.assert_array_equal(first, data.data[5:10, 7:14])
    assert (cost.chunks_touched, cost.hits, cost.misses, cost.files_opened) == (1, 0, 1, 1)
    again, cost = reads.box_to_numpy(box, spec, np.nan, False, cache)
    np.testing.assert_array_equal(again, first)
    assert (cost.hits, cost.misses, cost.files_opened) == (1, 0, 0)
    # the one decoded chunk (5 x 7 float64 values) is all the cache holds
    assert cache.stats().entries == 1 and cache.stats().bytes >= 5 * 7 * 8


def test_callers_cannot_change_the_cache(mdb) -> None:
    data = reference(4, 0.5)
    array = stored(mdb, data)
    first = array.subarray(i=(0, 9), j=(0, 13)).to_numpy(fill=0.0)
    first[:] = 99.0  # the caller owns its result
    again = array.subarray(i=(0, 9), j=(0, 13)).to_numpy(fill=0.0)
    np.testing.assert_array_equal(again, data[:10, :14].filled(0.0))
    for value, _ in list(process_cache()._entries.values()):
        for part in value if isinstance(value, tuple) else ():
            arrays = (
                [part.block, part.valid]
                if isinstance(part, DenseChunk)
                else [part.offsets, part.values, part.valid]
            )
            assert all(a is None or not a.flags.writeable for a in arrays)


def test_a_commit_through_another_catalog_is_seen_at_the_next_read(mdb, spark) -> None:
    data = reference(5, 0.5)
    array = stored(mdb, data)
    other = arrayviews.connect(mdb.warehouse.location, spark=spark).array(array.name)
    box = {"i": (3, 12), "j": (4, 20)}
    check_box(array, data, box)  # fills the cache
    free = np.argwhere(np.ma.getmaskarray(data)[3:13, 4:21])[:10] + [3, 4]
    other.insert({"i": free[:, 0], "j": free[:, 1], "v": np.arange(10.0)})
    data = data.copy()
    data[free[:, 0], free[:, 1]] = np.arange(10.0)
    check_box(array, data, box)
    # a replacing insert rewrites a file the cache holds chunks of
    taken = np.argwhere(~np.ma.getmaskarray(data)[3:13, 4:21])[:7] + [3, 4]
    other.insert({"i": taken[:, 0], "j": taken[:, 1], "v": -np.arange(7.0)}, on_conflict="replace")
    data[taken[:, 0], taken[:, 1]] = -np.arange(7.0)
    check_box(array, data, box)


def test_deletes_and_compaction(mdb) -> None:
    data = reference(6, 0.8)
    array = stored(mdb, data)
    box = {"i": (2, 19), "j": (6, 28)}
    check_box(array, data, box)
    array.delete(box={"i": (4, 8), "j": (10, 17)})
    data = data.copy()
    data[4:9, 10:18] = np.ma.masked
    check_box(array, data, box)
    present = np.argwhere(~np.ma.getmaskarray(data))[::9]
    array.delete({"i": present[:, 0], "j": present[:, 1]})
    data[present[:, 0], present[:, 1]] = np.ma.masked
    check_box(array, data, box)
    free = np.argwhere(np.ma.getmaskarray(data))[::4]
    array.insert({"i": free[:, 0], "j": free[:, 1], "v": np.full(len(free), 2.5)})
    data[free[:, 0], free[:, 1]] = 2.5
    check_box(array, data, box)
    array.compact()
    check_box(array, data, box)
    check_box(array, data, {"i": (0, ROWS - 1), "j": (0, COLUMNS - 1)})


def test_a_pinned_version_keeps_its_cells(mdb) -> None:
    data = reference(8, 0.5)
    array = stored(mdb, data)
    version = array.version
    free = np.argwhere(np.ma.getmaskarray(data))[:20]
    array.insert({"i": free[:, 0], "j": free[:, 1], "v": np.ones(20)})
    old = array.at_version(version)
    check_box(old, data, {"i": (0, 15), "j": (3, 30)})
    newer = data.copy()
    newer[free[:, 0], free[:, 1]] = 1.0
    check_box(array, newer, {"i": (0, 15), "j": (3, 30)})


def test_nullable_integer_and_string_attributes(mdb) -> None:
    name = f"N{next(_names)}"
    array = mdb.create_array(f"{name}<k:int64 NULL, s:string>[i=0:9:4; j=0:9:3]")
    coords = np.array([(i, j) for i in range(10) for j in range(10) if (i * 7 + j * 3) % 4 != 0])
    k = [None if n % 5 == 0 else n for n in range(len(coords))]
    s = [f"c{n}" for n in range(len(coords))]
    array.insert({"i": coords[:, 0], "j": coords[:, 1], "k": k, "s": s})
    present = np.zeros((10, 10), bool)
    present[coords[:, 0], coords[:, 1]] = True
    kv = np.zeros((10, 10), np.int64)
    valid = np.zeros((10, 10), bool)
    sv = np.full((10, 10), None, object)
    for (i, j), kk, ss in zip(coords, k, s, strict=True):
        sv[i, j] = ss
        if kk is not None:
            kv[i, j], valid[i, j] = kk, True
    for box in ({"i": (1, 7), "j": (2, 8)}, {"i": (0, 9), "j": (0, 9)}, {"i": (8, 9), "j": (5, 5)}):
        (i0, i1), (j0, j1) = box["i"], box["j"]
        cut = array.subarray(**box)
        for _ in range(2):
            got = cut.to_numpy("k", masked=True)
            np.testing.assert_array_equal(got.mask, ~valid[i0 : i1 + 1, j0 : j1 + 1])
            np.testing.assert_array_equal(got.data[~got.mask], kv[i0 : i1 + 1, j0 : j1 + 1][~got.mask])
            np.testing.assert_array_equal(
                cut.to_numpy("k", fill=-1), np.where(valid, kv, -1)[i0 : i1 + 1, j0 : j1 + 1]
            )
            strings = cut.to_numpy("s")
            assert strings.dtype == object
            assert strings.tolist() == sv[i0 : i1 + 1, j0 : j1 + 1].tolist()


def test_subarray_of_a_subarray(mdb) -> None:
    data = reference(9, 0.7)
    array = stored(mdb, data)
    inner = array.subarray(i=(3, 20), j=(2, 27)).subarray(i=(6, 30), j=(-5, 9))
    got = inner.to_numpy(masked=True)
    want = data[6:21, 2:10]
    np.testing.assert_array_equal(got.mask, np.ma.getmaskarray(want))
    np.testing.assert_array_equal(got.compressed(), want.compressed())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_boxes(mdb, data) -> None:
    if not hasattr(test_random_boxes, "array"):
        grid = reference(11, 0.4)
        array = stored(mdb, grid)
        # a second batch into free cells: chunks made of fragments from two files
        free = np.argwhere(np.ma.getmaskarray(grid))[::3]
        array.insert({"i": free[:, 0], "j": free[:, 1], "v": np.arange(len(free), dtype=float)})
        grid = grid.copy()
        grid[free[:, 0], free[:, 1]] = np.arange(len(free), dtype=float)
        test_random_boxes.array, test_random_boxes.grid = array, grid
    i0 = data.draw(st.integers(-3, ROWS + 2))
    i1 = data.draw(st.integers(max(i0, 0), ROWS + 4))
    j0 = data.draw(st.integers(-3, COLUMNS + 2))
    j1 = data.draw(st.integers(max(j0, 0), COLUMNS + 4))
    if i0 >= ROWS or j0 >= COLUMNS:
        return
    check_box(test_random_boxes.array, test_random_boxes.grid, {"i": (i0, i1), "j": (j0, j1)})


# -- the cache on its own ----------------------------------------------------------------------------


def test_cache_keeps_the_most_recently_used_within_its_budget() -> None:
    cache = ChunkCache(100)
    for key in "abcd":
        assert cache.put(key, key.upper(), 30)
    assert cache.get("a") is None  # the oldest left when d came
    assert cache.get("b") == "B"  # b is now the most recently used
    cache.put("e", "E", 30)
    assert cache.get("c") is None and cache.get("b") == "B"
    assert not cache.put("huge", "H", 101)
    assert cache.get("huge") is None
    stats = cache.stats()
    assert (stats.entries, stats.bytes, stats.evictions) == (3, 90, 2)
    cache.resize(40)
    assert cache.stats().entries == 1 and cache.get("b") == "B"  # b was used last
    cache.put("b", "B2", 10)  # replacing counts the new size only
    assert cache.stats().bytes == 10 and cache.get("b") == "B2"
    with pytest.raises(ValueError, match="bytes >= 0"):
        cache.resize(-1)
    disabled = ChunkCache(0)
    assert not disabled.put("x", 1, 1) and disabled.get("x") is None


def test_cache_is_consistent_under_threads() -> None:
    cache = ChunkCache(10_000)

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(2000):
            key = int(rng.integers(0, 300))
            if rng.random() < 0.5:
                cache.put(key, key, int(rng.integers(1, 200)))
            else:
                value = cache.get(key)
                assert value is None or value == key

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    held = sum(nbytes for _, nbytes in cache._entries.values())
    assert cache.stats().bytes == held <= 10_000


def test_sparse_parts_are_decoded_for_sparse_fragments(mdb) -> None:
    data = reference(12, 0.05)
    array = stored(mdb, data)
    box = stored_box(array.source)
    result = reads.box_to_numpy(box, array.schema.attributes[0], np.nan, True, ChunkCache(1 << 20))[1]
    kinds = {type(p) for c in result.chunks for p in c.parts}
    assert SparseCells in kinds  # the sparse path was exercised, not only dense blocks


# -- file pruning by chunk bounds ------------------------------------------------------------------


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_files_of_a_chunk_box_are_those_iceberg_plans(mdb, data) -> None:
    """``data_files(version, ranges)`` (pruned by the listing's chunk bounds) equals pyiceberg's
    planned scan with the same chunk filter, at every version of a random history."""
    from arrayviews.storage.array_table import chunk_box_filter

    array = mdb.create_array(f"F{next(_names)}<v:float64>[i=0:39:4; j=0:29:6]")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    for _ in range(data.draw(st.integers(1, 5))):
        action = data.draw(st.sampled_from(["insert", "delete", "compact"]))
        cells = np.unique(np.stack([rng.integers(0, 40, 12), rng.integers(0, 30, 12)], axis=1), axis=0)
        if action == "insert":
            array.insert(
                {"i": cells[:, 0], "j": cells[:, 1], "v": rng.random(len(cells))}, on_conflict="replace"
            )
        elif action == "delete" and array.version:
            array.delete(box={"i": (int(cells[0, 0]), int(cells[0, 0]) + 6), "j": (0, 29)})
        elif array.version:
            array.compact()
    table = array.source.table
    for version in table.versions():
        for _ in range(4):
            first_i = data.draw(st.integers(-1, 10))
            first_j = data.draw(st.integers(-1, 5))
            ranges = (
                (first_i, first_i + data.draw(st.integers(0, 4))),
                (first_j, first_j + data.draw(st.integers(0, 2))),
            )
            snapshot = table.snapshot_of(version.version)
            scan = table.table.scan(row_filter=chunk_box_filter(table.schema, ranges), snapshot_id=snapshot)
            expected = sorted(task.file.file_path for task in scan.plan_files())
            assert sorted(f.file_path for f in table.data_files(version.version, ranges)) == expected


def test_connect_sets_the_process_cache_budget(mdb, spark) -> None:
    cache = process_cache()
    before = cache.budget
    try:
        arrayviews.connect(mdb.warehouse.location, spark=spark, chunk_cache_bytes=4096)
        assert cache.budget == 4096 and cache.stats().bytes <= 4096
        for bad in (-1, 1.5, True, "1GiB"):
            with pytest.raises(arrayviews.ValidationError, match="chunk_cache_bytes"):
                arrayviews.connect(mdb.warehouse.location, spark=spark, chunk_cache_bytes=bad)
            assert cache.budget == 4096  # a refused value changes nothing
        arrayviews.connect(mdb.warehouse.location, spark=spark, chunk_cache_bytes=0)
        data = reference(13, 0.5)
        array = stored(mdb, data)
        check_box(array, data, {"i": (2, 17), "j": (3, 22)})  # no cache: read from the files each time
        assert cache.stats().entries == 0
    finally:
        cache.resize(before)
        follow_chunk_cache_budget(before)  # the in-process engine's recent reads follow the budget


def test_concurrent_reads_share_the_cache(mdb) -> None:
    """Threads reading random boxes at once (a small cache, so entries are evicted while others are
    read) each get numpy's slice."""
    data = reference(14, 0.6)
    array = stored(mdb, data)
    cache = process_cache()
    before = cache.budget
    cache.resize(4 * 5 * 7 * 8)  # about four chunks
    failures = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(15):
            i0, j0 = int(rng.integers(0, ROWS)), int(rng.integers(0, COLUMNS))
            i1, j1 = i0 + int(rng.integers(0, 12)), j0 + int(rng.integers(0, 15))
            try:
                check_box(array, data, {"i": (i0, i1), "j": (j0, j1)})
            except AssertionError as error:  # pragma: no cover - reported below
                failures.append(error)

    try:
        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        cache.resize(before)
    assert not failures


def test_boxes_over_many_files_go_to_the_bulk_reader(mdb, monkeypatch) -> None:
    from arrayviews.storage import chunk_read

    data = reference(15, 0.3)
    array = stored(mdb, data)
    free = np.argwhere(np.ma.getmaskarray(data))
    data = data.copy()
    for batch in np.array_split(free[:60], 3):  # three more files
        array.insert({"i": batch[:, 0], "j": batch[:, 1], "v": batch[:, 0] * 100.0 + batch[:, 1]})
        data[batch[:, 0], batch[:, 1]] = batch[:, 0] * 100.0 + batch[:, 1]
    box = {"i": (0, 20), "j": (3, 30)}
    spec = array.schema.attributes[0]
    monkeypatch.setattr(chunk_read, "MAX_FILE_CHUNKS", 3)
    assert reads.box_to_numpy(stored_box(array.subarray(**box).source), spec, np.nan, False) is None
    check_box(array, data, box)  # read by the bulk reader
    monkeypatch.setattr(chunk_read, "MAX_FILE_CHUNKS", 1024)
    got = reads.box_to_numpy(stored_box(array.subarray(**box).source), spec, np.nan, False)
    assert got is not None and got[1].files_kept == 4
    check_box(array, data, box)
