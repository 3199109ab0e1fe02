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


# Arrow's C++ code (an Acero plan, the Parquet writer) allocates from the pool named when pyarrow
# loaded, which pyarrow.set_memory_pool does not change: count mimalloc's allocations around both.
CPP_PROBE = """
import sys
if sys.argv[1] == "arrayviews first":
    import arrayviews
import io
import pyarrow as pa, pyarrow.acero as ac, pyarrow.parquet as pq
if sys.argv[1] == "pyarrow first":
    import arrayviews
from arrayviews.execution.memory import tune_allocator
tune_allocator()
table = pa.table({"k": pa.array(range(100_000)), "v": pa.array(range(100_000))})
mimalloc = pa.mimalloc_memory_pool()
before = mimalloc.num_allocations()
plan = ac.Declaration.from_sequence([
    ac.Declaration("table_source", ac.TableSourceNodeOptions(table)),
    ac.Declaration("aggregate", ac.AggregateNodeOptions([("v", "hash_sum", None, "total")], keys=["k"])),
])
grouped = plan.to_table()
pq.write_table(grouped, io.BytesIO())
print(mimalloc.num_allocations() - before)
"""


def _mimalloc_allocations(order: str, **environment: str) -> int:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ARROW_DEFAULT_MEMORY_POOL", "ARRAYVIEWS_MALLOC_TUNING")
    }
    env.update(environment)
    done = subprocess.run(
        [sys.executable, "-c", CPP_PROBE, order], env=env, capture_output=True, text=True, check=True
    )
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(
    not (_has("jemalloc") and _has("mimalloc") and sys.platform == "linux"),
    reason="needs a Linux pyarrow with both jemalloc and mimalloc",
)
def test_importing_arrayviews_first_keeps_arrows_own_code_off_mimalloc() -> None:
    # before: only pyarrow's Python-level pool changed, and Acero and the Parquet writer still
    # allocated from mimalloc, whose purged huge pages stalled about half the stream steps 6 ms
    assert _mimalloc_allocations("pyarrow only") > 0  # the probe can see mimalloc's allocations
    assert _mimalloc_allocations("arrayviews first") == 0


@pytest.mark.skipif(not _has("mimalloc"), reason="this pyarrow has no mimalloc")
def test_a_pool_chosen_by_the_user_or_by_loading_pyarrow_first_is_left() -> None:
    assert _mimalloc_allocations("arrayviews first", ARROW_DEFAULT_MEMORY_POOL="mimalloc") > 0
    assert _mimalloc_allocations("arrayviews first", ARRAYVIEWS_MALLOC_TUNING="0") > 0
    # pyarrow loaded first has fixed its C++ pool already; nothing arrayviews does changes it
    assert _mimalloc_allocations("pyarrow first") > 0
