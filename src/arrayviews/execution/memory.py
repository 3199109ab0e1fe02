"""Process memory tuning: keep freed large buffers for reuse instead of returning them to the OS.

glibc serves allocations above 32 MB with fresh ``mmap`` pages and unmaps them on free, so every
large numpy temporary pays first-touch page faults again; on the virtual machines measured here
that cost more than the arithmetic itself (benchmarks/ingest.py). arrayviews therefore asks glibc
to serve everything from its heap and to keep freed memory (``mallopt``), in the driver when a
database is opened and in every Spark Python worker that runs arrayviews tasks. Set
``ARRAYVIEWS_MALLOC_TUNING=0`` to leave the allocator alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_tuned = False


def tune_allocator() -> bool:
    """Apply the tuning once per process; returns True if it is in effect."""
    global _tuned
    if _tuned:
        return True
    if os.environ.get("ARRAYVIEWS_MALLOC_TUNING", "1") == "0":
        return False
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
