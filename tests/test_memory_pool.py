"""Arrow's memory pool in an arrayviews process (execution/memory.py): jemalloc where pyarrow's
default is mimalloc, unless the user named a pool or turned the tuning off. Each case runs in a
fresh interpreter, since the pool is the process's."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pytest

PROBE = (
    "import pyarrow as pa; from arrayviews.execution.memory import tune_allocator; "
    "before = pa.default_memory_pool().backend_name; tune_allocator(); "
    "print(before, pa.default_memory_pool().backend_name)"
)


def _pools(**environment: str) -> tuple[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ARROW_DEFAULT_MEMORY_POOL", "ARRAYVIEWS_MALLOC_TUNING")
    }
    env.update(environment)
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    before, after = done.stdout.split()
    return before, after


def _has(backend: str) -> bool:
    try:
        getattr(pa, f"{backend}_memory_pool")()
    except NotImplementedError:
        return False
    return True


@pytest.mark.skipif(not _has("jemalloc"), reason="this pyarrow has no jemalloc")
def test_mimalloc_by_default_becomes_jemalloc() -> None:
    before, after = _pools()
    assert after == ("jemalloc" if before == "mimalloc" else before)


def test_a_named_pool_is_kept() -> None:
    assert _pools(ARROW_DEFAULT_MEMORY_POOL="system") == ("system", "system")


@pytest.mark.skipif(not _has("mimalloc"), reason="this pyarrow has no mimalloc")
def test_turning_the_tuning_off_leaves_the_pool() -> None:
    before, after = _pools(ARRAYVIEWS_MALLOC_TUNING="0")
    assert before == after
