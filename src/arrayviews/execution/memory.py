"""Process memory tuning: keep freed large buffers for reuse instead of returning them to the OS.

glibc serves allocations above 32 MB with fresh ``mmap`` pages and unmaps them on free, so every
large numpy temporary pays first-touch page faults again; on the virtual machines measured here
that cost more than the arithmetic itself (benchmarks/ingest.py). arrayviews therefore asks glibc
to serve everything from its heap and to keep freed memory (``mallopt``), in the driver when a
database is opened and in every Spark Python worker that runs arrayviews tasks. Set
``ARRAYVIEWS_MALLOC_TUNING=0`` to leave the allocator alone.

Arrow's memory pool is jemalloc, not pyarrow 26's default mimalloc, unless
``ARROW_DEFAULT_MEMORY_POOL`` names a pool: mimalloc gives freed memory back to the OS within
milliseconds and takes it again as fresh transparent huge pages, so about half of the in-process
stream steps stalled 6 ms zeroing them (a window view's step median 12.5 ms against 7.0 ms with
jemalloc, docs/performance.md rounds 12 and 24). Arrow's C++ code (Acero plans, the Parquet writer)
reads the variable once, when pyarrow is loaded, and ``pyarrow.set_memory_pool`` reaches only
pyarrow's own calls; so importing arrayviews names jemalloc in the variable when pyarrow is not
loaded yet (Linux, whose wheels carry jemalloc), and a database opened later still switches
pyarrow's own calls.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_tuned = False


def prefer_jemalloc_before_arrow_loads() -> bool:
    """Name jemalloc in ``ARROW_DEFAULT_MEMORY_POOL`` if pyarrow is not loaded, nobody named a pool
    and the tuning is on (Linux only); returns True if it did. Spark's workers inherit it."""
    if (
        sys.platform != "linux"
        or "pyarrow" in sys.modules
        or os.environ.get("ARROW_DEFAULT_MEMORY_POOL") is not None
        or os.environ.get("ARRAYVIEWS_MALLOC_TUNING", "1") == "0"
    ):
        return False
    os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "jemalloc"
    return True


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
