"""A per-process cache of decoded chunks, bounded by bytes: the least recently used entries leave first.

Keys name immutable things only (an Iceberg data file never changes once written, and its path is
unique), so an entry never goes stale; which files a read may use is decided by the snapshot's file
listing, checked on every read, not by the cache. Values must not be mutated once put: the readers
that fill the cache store read-only numpy arrays and copy out of them.

Beside the entries the cache keeps *derived* maps (a reader's lookups already resolved, e.g. chunk ->
decoded parts for one snapshot): they may refer only to values the cache holds, so every one is
dropped as soon as any entry leaves (evicted, replaced, cleared); the bytes bound thus holds for
them too.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

#: The default budget of the process's cache (256 MiB), unless ARRAYVIEWS_CHUNK_CACHE_BYTES says
#: otherwise or ``connect(chunk_cache_bytes=...)`` sets it.
DEFAULT_BUDGET = 256 * 1024 * 1024
BUDGET_VARIABLE = "ARRAYVIEWS_CHUNK_CACHE_BYTES"
#: Derived maps kept (the least recently asked for leave first).
DERIVED_KEPT = 64
#: Entries kept in all derived maps together (beyond it every map is dropped): their small objects
#: are not counted in the byte budget, so their number is bounded instead.
DERIVED_ENTRIES_KEPT = 1 << 16


@dataclass(frozen=True)
class CacheStats:
    """Counters of a cache since it was made (or cleared)."""

    hits: int
    misses: int
    entries: int
    bytes: int
    budget: int
    evictions: int


class ChunkCache:
    """A thread-safe least-recently-used map holding at most ``budget`` bytes of values (as their
    owners count them); a value larger than the budget is not kept, and a budget of 0 keeps nothing."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._bytes = 0
        self._budget = _checked_budget(budget)
        self._hits = self._misses = self._evictions = 0
        #: bumped whenever an entry leaves; derived maps made before then are dropped
        self._generation = 0
        self._derived: OrderedDict[Hashable, dict] = OrderedDict()
        self._weights: dict[Hashable, int] = {}  # entries each derived map counts as
        self._derived_entries = 0

    @property
    def budget(self) -> int:
        return self._budget

    def get(self, key: Hashable) -> object | None:
        """The value kept under ``key`` (now the most recently used), or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._misses += 1
                return None
            self._entries.move_to_end(key)
            self._hits += 1
            return entry[0]

    def touch(self, keys: list) -> None:
        """Count a hit on each of ``keys`` and make it the most recently used (one lock for all): what
        a reader calls for the entries it used through a derived map. Keys no longer held are skipped."""
        with self._lock:
            entries = self._entries
            for key in keys:
                if key in entries:
                    entries.move_to_end(key)
                    self._hits += 1

    def derived(self, key: Hashable) -> tuple[int, dict]:
        """The cache's generation now and the derived map kept under ``key`` (made empty if none).
        Read it freely; add to it only through :meth:`add_derived` with that generation."""
        with self._lock:
            kept = self._derived.get(key)
            if kept is None:
                kept = self._new_derived(key)
            else:
                self._derived.move_to_end(key)
            return self._generation, kept

    def add_derived(self, key: Hashable, generation: int, items: dict, weight: int | None = None) -> bool:
        """Merge ``items`` (referring only to values got from or put into this cache since
        ``generation``) into the derived map under ``key``, counting them as ``weight`` entries
        (default: one each) against DERIVED_ENTRIES_KEPT; False (nothing kept) when an entry left
        the cache since then, as the items may refer to it."""
        with self._lock:
            if generation != self._generation or self._budget == 0:
                return False
            kept = self._derived.get(key)
            if kept is None:
                kept = self._new_derived(key)
            kept.update(items)
            weight = len(items) if weight is None else weight
            self._weights[key] = self._weights.get(key, 0) + weight
            self._derived_entries += weight
            if self._derived_entries > DERIVED_ENTRIES_KEPT:
                self._derived.clear()
                self._weights.clear()
                self._derived_entries = 0
            return True

    def _new_derived(self, key: Hashable) -> dict:
        """An empty derived map under ``key`` (the lock is held), the oldest maps leaving beyond DERIVED_KEPT."""
        kept = self._derived[key] = {}
        while len(self._derived) > DERIVED_KEPT:
            old, _ = self._derived.popitem(last=False)
            self._derived_entries -= self._weights.pop(old, 0)
        return kept

    def put(self, key: Hashable, value: object, nbytes: int) -> bool:
        """Keep ``value`` (``nbytes`` bytes) under ``key``, evicting the least recently used entries
        to stay within the budget; False (nothing kept) when it alone exceeds the budget."""
        nbytes = max(0, int(nbytes))
        with self._lock:
            if nbytes > self._budget:
                return False
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
                self._forget_derived()
            self._entries[key] = (value, nbytes)
            self._bytes += nbytes
            self._evict()
            return True

    def resize(self, budget: int) -> None:
        """Set the budget (bytes), evicting at once down to it."""
        with self._lock:
            self._budget = _checked_budget(budget)
            self._evict()

    def clear(self) -> None:
        """Forget every entry and reset the counters."""
        with self._lock:
            self._entries.clear()
            self._forget_derived()
            self._bytes = 0
            self._hits = self._misses = self._evictions = 0

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                self._hits, self._misses, len(self._entries), self._bytes, self._budget, self._evictions
            )

    def _evict(self) -> None:
        while self._bytes > self._budget and self._entries:
            _, (_, nbytes) = self._entries.popitem(last=False)
            self._bytes -= nbytes
            self._evictions += 1
            self._forget_derived()

    def _forget_derived(self) -> None:
        """An entry left (the lock is held): drop every derived map, as it may refer to that entry."""
        self._generation += 1
        self._derived.clear()
        self._weights.clear()
        self._derived_entries = 0


def _checked_budget(budget: int) -> int:
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ValueError(f"a chunk cache budget is a number of bytes >= 0, got {budget!r}")
    return budget


def _budget_from_environment() -> int:
    text = os.environ.get(BUDGET_VARIABLE)
    if text is None or not text.strip():
        return DEFAULT_BUDGET
    try:
        return _checked_budget(int(text))
    except ValueError:
        raise ValueError(f"{BUDGET_VARIABLE} must be a number of bytes >= 0, got {text!r}") from None


_PROCESS_CACHE = ChunkCache(_budget_from_environment())


def process_cache() -> ChunkCache:
    """The one cache every array read of this process shares."""
    return _PROCESS_CACHE
