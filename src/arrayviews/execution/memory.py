"""Process memory tuning: keep freed large buffers for reuse instead of returning them to the OS.

glibc serves allocations above 32 MB with fresh ``mmap`` pages and unmaps them on free, so every
large numpy temporary pays first-touch page faults again; on the virtual machines measured here
that cost more than the arithmetic itself (benchmarks/ingest.py). arrayviews therefore asks glibc
to serve everything from its heap and to keep freed memory (``mallopt``), in the driver when a
database is opened and in every Spark Python worker that runs arrayviews tasks. Set
``ARRAYVIEWS_MALLOC_TUNING=0`` to leave the allocator alone.

The same call makes jemalloc Arrow's default memory pool where pyarrow's default is mimalloc
(pyarrow 26), unless ``ARROW_DEFAULT_MEMORY_POOL`` names a pool: with mimalloc, every other
in-process stream step stalled 5-6 ms while its freed buffers went back to the OS (a window
view's step median 14.4-15.3 ms against 9.7-11.3 ms with jemalloc, docs/performance.md round 12).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_tuned = False


def choose_arrow_pool() -> str:
    """Make jemalloc Arrow's default pool when pyarrow chose mimalloc and nobody chose a pool
    (``ARROW_DEFAULT_MEMORY_POOL``); returns the default pool's backend."""
    import pyarrow as pa

    if (
        os.environ.get("ARROW_DEFAULT_MEMORY_POOL") is None
        and pa.default_memory_pool().backend_name == "mimalloc"
    ):
        with contextlib.suppress(NotImplementedError):  # a pyarrow without jemalloc keeps its default
            pa.set_memory_pool(pa.jemalloc_memory_pool())
    return pa.default_memory_pool().backend_name


def tune_allocator() -> bool:
    """Apply the tuning once per process; returns True if it is in effect."""
    global _tuned
    if _tuned:
        return True
    if os.environ.get("ARRAYVIEWS_MALLOC_TUNING", "1") == "0":
        return False
    choose_arrow_pool()
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to tune
        return False
    _tuned = bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 1 << 30))
    return _tuned
