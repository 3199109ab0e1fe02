"""Which engine runs an uncertain operator (paper 001): what it reads, from the catalog's metadata
alone (stored tuple copies, bytes and fragments of the files), and the database's cost-based choice
(execution/executors.py ``choose``, the one the array operators use)."""

from __future__ import annotations

from arrayviews.execution.cost import Choice, Estimate
from arrayviews.execution.engine import Engine
from arrayviews.model.errors import ValidationError

#: What ``engine=`` of an uncertain operator may say: ``auto`` follows the database's mode (by
#: default the cost model), ``spark`` and ``local`` force an engine.
ENGINES = ("auto", "spark", "local")


#: Spark jobs one run of an uncertain operator starts (counted with Spark's status tracker on the
#: operators' Spark plans: the aggregate maps, groups and collects in one job chain; the structure
#: join routes the outer side, cogroups with the inner side and collects).
AGGREGATE_JOBS = 2
JOIN_JOBS = 3


def read_estimate(table, version: int, chunk_ranges=None, jobs: int = 1) -> Estimate:
    """Tuple copies, bytes and fragments a read of ``version`` (``chunk_ranges`` of chunks) touches.

    The copies are the version's total (the summary property; a bound when ranges are given). They
    are priced per copy (``EngineCost.per_copy``), not as array cells: an uncertain copy costs a
    decode, a duplicate check and the closed-form kernels, far more than a cell of a dense chunk."""
    if version == 0:
        return Estimate(jobs=jobs)
    files = table.array.data_files(version, chunk_ranges)
    return Estimate(
        0,
        sum(f.file_size_in_bytes for f in files),
        sum(f.record_count for f in files),
        jobs,
        copies=table.copies_at(version),
    )


def check_engine(engine: str, operator: str) -> str:
    if engine not in ENGINES:
        raise ValidationError(f"{operator}: engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    return engine


def choose_engine(database, estimate: Estimate, engine: str = "auto") -> tuple[Engine, Choice]:
    """The engine for an uncertain operator reading ``estimate``, and why: ``engine="auto"`` asks the
    database's executors (its ``execution=`` mode, by default the cost model); ``spark`` or ``local``
    forces one."""
    return database.executors.choose(estimate, None if engine == "auto" else engine)
