"""The resolved reads the chunk cache keeps beside its entries (per snapshot and attribute: chunk ->
cached parts, and a box's chunks and geometry under its chunk ranges), checked against numpy slicing
of the reference array the test wrote: reused only at their own snapshot (a commit through a second
connection, a pinned older version read after a newer one), never referring to a value the cache no
longer holds, and dropped whenever an entry leaves."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews.operators import reads
from arrayviews.operators.source import stored_box
from arrayviews.storage import chunk_cache, chunk_read
from arrayviews.storage.chunk_cache import DERIVED_KEPT, ChunkCache

_names = itertools.count()
ROWS, COLUMNS = 23, 31  # chunks of 5 x 7: the last row and column of chunks are clipped
CHUNK_BYTES = 5 * 7 * 8


@pytest.fixture(scope="module")
def mdb(spark, tmp_path_factory):
    return arrayviews.connect(str(tmp_path_factory.mktemp("plans") / "warehouse"), spark=spark)


def reference(seed: int, density: float) -> np.ma.MaskedArray:
    rng = np.random.default_rng(seed)
    values = rng.normal(size=(ROWS, COLUMNS))
    return np.ma.MaskedArray(values, mask=rng.random((ROWS, COLUMNS)) >= density)


def stored(db, data: np.ma.MaskedArray):
    name = f"P{next(_names)}"
    array = db.create_array(f"{name}<v:float64>[i=0:{ROWS - 1}:5; j=0:{COLUMNS - 1}:7]")
    array.write_dense(data)
    return array


def expected_box(data: np.ma.MaskedArray, box: dict) -> np.ma.MaskedArray:
    (i0, i1), (j0, j1) = box["i"], box["j"]
    return data[max(i0, 0) : i1 + 1, max(j0, 0) : j1 + 1]


def read(array, box: dict, cache: ChunkCache) -> tuple[np.ma.MaskedArray, chunk_read.BoxRead]:
    """``array.subarray(**box)`` read through the chunk path with ``cache``, masked."""
    spec = array.schema.attributes[0]
    got = reads.box_to_numpy(stored_box(array.subarray(**box).source), spec, np.nan, True, cache)
    assert got is not None
    return got


def assert_matches(got: np.ma.MaskedArray, want: np.ma.MaskedArray) -> None:
    np.testing.assert_array_equal(np.ma.getmaskarray(got), np.ma.getmaskarray(want))
    np.testing.assert_array_equal(got.compressed(), want.compressed())


def assert_derived_only_refers_to_held(cache: ChunkCache) -> None:
    """Every part a derived map refers to is a value the cache holds, under a key it names."""
    held = {id(part) for value, _ in cache._entries.values() for part in value}
    for derived in cache._derived.values():
        for entry in derived.values():
            if isinstance(entry, tuple):
                parts, keys = entry
                chunks = () if parts is None else (parts,)
            else:
                chunks, keys = entry.chunks, entry.keys
            assert all(key in cache._entries for key in keys)
            for chunk in chunks:
                assert all(id(part) in held for part in chunk.parts)


# -- the cache's derived maps on their own -------------------------------------------------------


def test_derived_maps_are_dropped_when_an_entry_leaves() -> None:
    cache = ChunkCache(100)
    cache.put("a", "A", 40)
    generation, kept = cache.derived("m")
    assert kept == {}
    assert cache.add_derived("m", generation, {"x": 1})
    assert cache.derived("m")[1] == {"x": 1}
    cache.put("b", "B", 40)  # nothing leaves: the map stays
    assert cache.derived("m") == (generation, {"x": 1})
    cache.put("c", "C", 40)  # a is evicted
    newer, kept = cache.derived("m")
    assert kept == {} and newer != generation
    assert not cache.add_derived("m", generation, {"y": 2})  # made before the eviction: refused
    assert cache.derived("m")[1] == {}
    assert cache.add_derived("m", newer, {"y": 2})
    cache.put("c", "C2", 10)  # replacing an entry: its old value left
    generation, kept = cache.derived("m")
    assert kept == {}
    assert cache.add_derived("m", generation, {"z": 3})
    cache.resize(1000)  # nothing leaves
    assert cache.derived("m")[1] == {"z": 3}
    cache.resize(20)  # b leaves
    generation, kept = cache.derived("m")
    assert kept == {}
    cache.add_derived("m", generation, {"z": 3})
    cache.clear()
    assert cache.derived("m")[1] == {}
    empty = ChunkCache(0)
    generation, _ = empty.derived("m")
    assert not empty.add_derived("m", generation, {"x": 1}) and empty.derived("m")[1] == {}


def test_derived_maps_are_bounded_in_number() -> None:
    cache = ChunkCache(100)
    for n in range(DERIVED_KEPT + 5):
        generation, _ = cache.derived(n)
        cache.add_derived(n, generation, {"n": n})
    assert len(cache._derived) == DERIVED_KEPT
    assert cache.derived(DERIVED_KEPT + 4)[1] == {"n": DERIVED_KEPT + 4}
    assert cache.derived(0)[1] == {}  # the least recently asked for left first


def test_derived_entries_are_bounded_in_all(monkeypatch) -> None:
    monkeypatch.setattr(chunk_cache, "DERIVED_ENTRIES_KEPT", 10)
    cache = ChunkCache(100)
    for n in range(3):
        generation, _ = cache.derived(n)
        assert cache.add_derived(n, generation, {k: k for k in range(3)})
    assert sum(len(m) for m in cache._derived.values()) == 9
    generation, _ = cache.derived(0)
    cache.add_derived(0, generation, {"more": 1, "again": 2})  # 11 entries: every map is dropped
    assert not cache._derived and cache._derived_entries == 0
    generation, _ = cache.derived("m")
    cache.add_derived("m", generation, {"x": 1})
    assert cache.derived("m")[1] == {"x": 1}
    generation, _ = cache.derived("heavy")
    cache.add_derived("heavy", generation, {"plan": 1}, weight=10)  # one item counted as ten: 11
    assert not cache._derived and cache._derived_entries == 0
    # maps leaving by number give their entries back
    monkeypatch.setattr(chunk_cache, "DERIVED_KEPT", 2)
    for n in range(4):
        generation, _ = cache.derived(n)
        cache.add_derived(n, generation, {n: n})
    assert len(cache._derived) == 2 and cache._derived_entries == 2


def test_touch_counts_hits_and_keeps_the_touched_entries() -> None:
    cache = ChunkCache(90)
    for key in "abc":
        cache.put(key, key.upper(), 30)
    cache.touch(["a", "gone"])  # a is now the most recently used; an absent key is skipped
    cache.put("d", "D", 30)
    assert cache.get("b") is None and cache.get("a") == "A"
    assert cache.stats().hits == 2  # the touch of a and the get of a


# -- reads through the kept plans --------------------------------------------------------------------


def test_a_second_read_takes_the_kept_plan(mdb, monkeypatch) -> None:
    data = reference(21, 0.6)
    array = stored(mdb, data)
    free = np.argwhere(np.ma.getmaskarray(data))[::5]  # a second file: chunks made of two files' parts
    array.insert({"i": free[:, 0], "j": free[:, 1], "v": np.arange(len(free), dtype=float)})
    data = data.copy()
    data[free[:, 0], free[:, 1]] = np.arange(len(free), dtype=float)
    cache = ChunkCache(1 << 20)
    box = {"i": (3, 17), "j": (4, 26)}
    got, first = read(array, box, cache)
    assert_matches(got, expected_box(data, box))
    assert first.misses > 0 and first.files_opened == 2 and first.hits == 0

    def no_resolving(*args, **kwargs):
        raise AssertionError("resolved afresh")

    monkeypatch.setattr(chunk_read, "_resolve", no_resolving)
    got, again = read(array, box, cache)
    assert_matches(got, expected_box(data, box))
    assert (again.hits, again.misses, again.files_opened) == (first.misses, 0, 0)
    assert again.files_kept == first.files_kept and again.chunks_touched == first.chunks_touched
    # other boxes within chunks already resolved: from the per-chunk map, nothing read
    for inner in ({"i": (5, 9), "j": (7, 13)}, {"i": (4, 16), "j": (10, 11)}, {"i": (14, 14), "j": (0, 25)}):
        got, cost = read(array, inner, cache)
        assert_matches(got, expected_box(data, inner))
        assert cost.misses == 0 and cost.files_opened == 0
    assert_derived_only_refers_to_held(cache)
    # to_numpy with a fill and unmasked, through the process cache, twice
    monkeypatch.undo()
    for _ in range(2):
        sub = array.subarray(**box)
        np.testing.assert_array_equal(sub.to_numpy(fill=-7.0), expected_box(data, box).filled(-7.0))


def test_a_commit_through_another_connection_between_two_reads(mdb, spark) -> None:
    data = reference(22, 0.5)
    array = stored(mdb, data)
    other = arrayviews.connect(mdb.warehouse.location, spark=spark).array(array.name)
    box = {"i": (2, 18), "j": (3, 24)}
    old_version = array.version
    for _ in range(2):  # the second read comes from the kept plan
        np.testing.assert_array_equal(
            array.subarray(**box).to_numpy(masked=True).mask, np.ma.getmaskarray(expected_box(data, box))
        )
    # an insert into free cells of one chunk: the other chunks' files are unchanged
    free = np.argwhere(np.ma.getmaskarray(data)[5:10, 7:14])[:6] + [5, 7]
    other.insert({"i": free[:, 0], "j": free[:, 1], "v": np.full(len(free), 9.5)})
    newer = data.copy()
    newer[free[:, 0], free[:, 1]] = 9.5
    for _ in range(2):
        assert_matches(array.subarray(**box).to_numpy(masked=True), expected_box(newer, box))
    # a delete through the other connection rewrites a file the kept plans were made of
    other.delete(box={"i": (6, 12), "j": (0, 9)})
    newest = newer.copy()
    newest[6:13, 0:10] = np.ma.masked
    for _ in range(2):
        assert_matches(array.subarray(**box).to_numpy(masked=True), expected_box(newest, box))
    # the pinned older versions, read after the newer ones, keep their cells
    pinned = array.at_version(old_version)
    middle = array.at_version(old_version + 1)
    for _ in range(2):
        assert_matches(pinned.subarray(**box).to_numpy(masked=True), expected_box(data, box))
        assert_matches(middle.subarray(**box).to_numpy(masked=True), expected_box(newer, box))
        assert_matches(array.subarray(**box).to_numpy(masked=True), expected_box(newest, box))


def test_evictions_leave_no_plan_referring_to_what_left(mdb) -> None:
    data = reference(23, 0.9)
    array = stored(mdb, data)
    # six chunks with their masks; a box of four chunks is still put (at most half the budget)
    cache = ChunkCache(6 * (CHUNK_BYTES + 64 + 5 * 7))
    boxes = [
        {"i": (0, 9), "j": (0, 6)},  # two chunks
        {"i": (0, 4), "j": (0, 13)},  # one of them and another
        {"i": (10, 19), "j": (14, 27)},  # four others: the first ones leave
        {"i": (0, 9), "j": (0, 6)},
        {"i": (20, 22), "j": (28, 30)},  # the clipped corner chunk
    ]
    for box in boxes:
        for _ in range(2):
            got, _ = read(array, box, cache)
            assert_matches(got, expected_box(data, box))
            assert_derived_only_refers_to_held(cache)
    assert cache.stats().evictions > 0


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_reads_and_commits(mdb, spark, data) -> None:
    """Random boxes read through a small cache, with inserts and deletes committed through a second
    connection and pinned older versions read between them, each read against numpy's slice."""
    grid = reference(data.draw(st.integers(0, 2**16)), 0.5)
    array = stored(mdb, grid)
    other = arrayviews.connect(mdb.warehouse.location, spark=spark).array(array.name)
    cache = ChunkCache(data.draw(st.sampled_from([3, 12, 1000])) * (CHUNK_BYTES + 64 + 5 * 7))
    history = {array.version: grid}
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    for _ in range(data.draw(st.integers(3, 8))):
        action = data.draw(st.sampled_from(["read", "read", "read", "insert", "delete", "old"]))
        if action == "insert":
            free = np.argwhere(np.ma.getmaskarray(grid))
            cells = free[rng.choice(len(free), size=min(len(free), 8), replace=False)]
            values = rng.normal(size=len(cells))
            other.insert({"i": cells[:, 0], "j": cells[:, 1], "v": values})
            grid = grid.copy()
            grid[cells[:, 0], cells[:, 1]] = values
            history[other.version] = grid
            continue
        if action == "delete":
            i0, j0 = int(rng.integers(0, ROWS)), int(rng.integers(0, COLUMNS))
            i1, j1 = (
                min(ROWS - 1, i0 + int(rng.integers(0, 6))),
                min(COLUMNS - 1, j0 + int(rng.integers(0, 8))),
            )
            gone = {"i": (i0, i1), "j": (j0, j1)}
            other.delete(box=gone)
            grid = grid.copy()
            grid[gone["i"][0] : gone["i"][1] + 1, gone["j"][0] : gone["j"][1] + 1] = np.ma.masked
            history[other.version] = grid
            continue
        version = data.draw(st.sampled_from(sorted(history))) if action == "old" else None
        target = array if version is None else array.at_version(version)
        want = grid if version is None else history[version]
        i0 = data.draw(st.integers(-2, ROWS - 1))
        j0 = data.draw(st.integers(-2, COLUMNS - 1))
        box = {
            "i": (i0, max(i0, 0) + data.draw(st.integers(0, 14))),
            "j": (j0, max(j0, 0) + data.draw(st.integers(0, 20))),
        }
        for _ in range(2):
            got, _ = read(target, box, cache)
            assert_matches(got, expected_box(want, box))
            assert_derived_only_refers_to_held(cache)


def test_kept_subarray_schemas_refuse_what_a_fresh_cut_refuses(mdb) -> None:
    from arrayviews.model.errors import SchemaError, ValidationError

    data = reference(24, 1.0)
    array = stored(mdb, data)
    for _ in range(2):  # the second time from the kept schemas
        np.testing.assert_array_equal(array.subarray(i=(1, 3), j=(2, 8)).to_numpy(), data.data[1:4, 2:9])
        np.testing.assert_array_equal(array.subarray(i=[1, 3]).to_numpy(), data.data[1:4, :])
        # equal to (1, 3) as keys go, but not integers
        with pytest.raises(
            ValidationError, match=r"bounds of i are a \(low, high\) pair of integer.*got \(1.0, 3.0\)"
        ):
            array.subarray(i=(1.0, 3.0), j=(2, 8))
        with pytest.raises(
            ValidationError, match=r"bounds of i are a \(low, high\) pair of integer.*got \(True, 3\)"
        ):
            array.subarray(i=(True, 3), j=(2, 8))
        with pytest.raises(ValidationError, match="is empty"):
            array.subarray(i=(3, 1))
        with pytest.raises(SchemaError, match="no dimension 'k'"):
            array.subarray(k=(1, 2))
