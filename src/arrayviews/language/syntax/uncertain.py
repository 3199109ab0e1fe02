"""The syntax tree of uncertain arrays (paper 001): CREATE UNCERTAIN ARRAY with its storage layout, and
the two probabilistic operators, ``subarray(U, lo..., hi..., THRESHOLD p)`` and
``structure_join(A, B, delta, threshold)``, which stand alone after ``SELECT * FROM``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from arrayviews.language.syntax.arrays import ArrayExpr, ArrayName
from arrayviews.language.syntax.base import Statement, _integers, _set
from arrayviews.model.copy_layout import SCHEMES, STORE_MULTIPLE
from arrayviews.model.uncertain import DEFAULT_SIGMAS, UncertainSchema

#: ``STEP AUTO``: the cost model chooses the step at the first insert.
AUTO_STEP = "auto"
#: Storage schemes by their word after STORE (``STORE MULTIPLE``) and back.
SCHEME_WORDS = {scheme.split("-", 1)[1]: scheme for scheme in SCHEMES}
#: Evaluation methods of the operators (the API's ``method=``), and the join's engines and outer sides.
SUBARRAY_METHODS = ("scheme", "rtree")
JOIN_METHODS = ("sbj", "bnl", "index")
JOIN_ENGINES = ("auto", "spark", "local")
JOIN_OUTER = ("auto", "left", "right")
#: The default threshold of a workload (the cost model's lambda).
DEFAULT_WORKLOAD_THRESHOLD = 0.9


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    return number


def _probability(value: object, what: str) -> float:
    number = _number(value, what)
    if not 0.0 < number <= 1.0:
        raise ValueError(f"{what} must lie in (0, 1], got {value!r}")
    return number


def _choice(value: object, choices: tuple[str, ...], what: str) -> str:
    text = str(value).lower()
    if text not in choices:
        raise ValueError(f"unknown {what} {value!r}; use {', '.join(choices)}")
    return text


@dataclass(frozen=True)
class CreateUncertainArray(Statement):
    """``CREATE UNCERTAIN ARRAY name <attributes> [dimensions; corr(x, y)] [STORE ALL | MEAN | MULTIPLE
    [STEP AUTO | k | (k_1, ..., k_d)]] [SIGMAS k] [WORKLOAD (q_1, ..., q_d), ... [THRESHOLD p]]``.

    ``step`` is a step per dimension, ``"auto"`` (store-multiple, chosen by the cost model) or None
    (store-all and store-mean have none). ``workload`` lists common query sizes in cells per dimension.
    """

    schema: UncertainSchema
    scheme: str = STORE_MULTIPLE
    step: tuple[int, ...] | str | None = AUTO_STEP
    sigmas: float = DEFAULT_SIGMAS
    workload: tuple[tuple[float, ...], ...] | None = None
    workload_threshold: float = DEFAULT_WORKLOAD_THRESHOLD

    def __post_init__(self) -> None:
        if not isinstance(self.schema, UncertainSchema):
            raise ValueError(f"CREATE UNCERTAIN ARRAY needs an uncertain schema, got {self.schema!r}")
        _set(self, "scheme", _choice(self.scheme, SCHEMES, "storage scheme"))
        step = self.step
        if self.scheme != STORE_MULTIPLE:
            if step not in (None, AUTO_STEP):
                raise ValueError(f"STEP applies to STORE MULTIPLE only, not to {self.scheme}")
            step = None
        elif step is None or (isinstance(step, str) and step.lower() == AUTO_STEP):
            step = AUTO_STEP
        else:
            if isinstance(step, int) and not isinstance(step, bool):
                step = (step,) * self.schema.ndim
            step = _integers(step, "steps")
            if len(step) != self.schema.ndim or any(k < 0 for k in step):
                raise ValueError(
                    f"STEP needs one integer >= 0, or {self.schema.ndim} of them (one per dimension), got {step}"
                )
        _set(self, "step", step)
        sigmas = _number(self.sigmas, "SIGMAS")
        if not sigmas > 0:
            raise ValueError(f"SIGMAS (k of mean +- k sigma) must be positive, got {self.sigmas!r}")
        _set(self, "sigmas", sigmas)
        if self.workload is not None:
            queries = tuple(tuple(_number(x, "a workload query size") for x in q) for q in self.workload)
            if not queries:
                raise ValueError("WORKLOAD needs at least one query size")
            for query in queries:
                if len(query) != self.schema.ndim or any(x <= 0 for x in query):
                    raise ValueError(
                        f"a workload query size gives {self.schema.ndim} positive numbers of cells (one per "
                        f"dimension), got {query}"
                    )
            _set(self, "workload", queries)
        _set(self, "workload_threshold", _probability(self.workload_threshold, "the workload THRESHOLD"))
        if self.workload is None and self.workload_threshold != DEFAULT_WORKLOAD_THRESHOLD:
            raise ValueError("a workload THRESHOLD needs a WORKLOAD of query sizes")

    @property
    def name(self) -> str:
        return self.schema.name


class UncertainOperator(ArrayExpr):
    """Base of the probabilistic operators: their result is tuples (or pairs) with probabilities, not
    an array, so they stand alone after ``SELECT * FROM`` and are no input of array functions."""

    __slots__ = ()


@dataclass(frozen=True)
class ProbabilisticSubarray(UncertainOperator):
    """``subarray(U, lo_1, ..., lo_d, hi_1, ..., hi_d, THRESHOLD p [, METHOD RTREE])``: the tuples of U
    lying in the box with probability at least p (Definition 2.1)."""

    function: ClassVar[str] = "subarray"
    source: ArrayName
    low: tuple[int, ...]
    high: tuple[int, ...]
    threshold: float
    method: str = "scheme"

    def __post_init__(self) -> None:
        if not isinstance(self.source, ArrayName):
            raise ValueError("a subarray with THRESHOLD reads a stored uncertain array, by name")
        _set(self, "low", _integers(self.low, "subarray coordinates"))
        _set(self, "high", _integers(self.high, "subarray coordinates"))
        if not self.low or len(self.low) != len(self.high):
            raise ValueError(
                f"subarray needs as many high as low coordinates (at least one), got {self.low} and {self.high}"
            )
        _set(self, "threshold", _probability(self.threshold, "THRESHOLD"))
        _set(self, "method", _choice(self.method, SUBARRAY_METHODS, "subarray method"))

    def inputs(self) -> tuple[ArrayExpr, ...]:
        return (self.source,)


@dataclass(frozen=True)
class StructureJoin(UncertainOperator):
    """``structure_join(A, B, delta, threshold [, METHOD m] [, ENGINE e] [, OUTER o])``: the pairs with
    |a.d - b.d| < delta in every dimension with probability at least threshold (Definition 2.2)."""

    function: ClassVar[str] = "structure_join"
    left: ArrayName
    right: ArrayName
    delta: float
    threshold: float
    method: str = "sbj"
    engine: str = "auto"
    outer: str = "auto"

    def __post_init__(self) -> None:
        if not isinstance(self.left, ArrayName) or not isinstance(self.right, ArrayName):
            raise ValueError("structure_join reads two stored uncertain arrays, by name")
        delta = _number(self.delta, "delta")
        if not delta > 0:
            raise ValueError(f"delta must be a positive number of cells, got {self.delta!r}")
        _set(self, "delta", delta)
        _set(self, "threshold", _probability(self.threshold, "the threshold"))
        _set(self, "method", _choice(self.method, JOIN_METHODS, "structure join method"))
        _set(self, "engine", _choice(self.engine, JOIN_ENGINES, "structure join engine"))
        _set(self, "outer", _choice(self.outer, JOIN_OUTER, "outer side"))

    def inputs(self) -> tuple[ArrayExpr, ...]:
        return (self.left, self.right)


__all__ = [
    "AUTO_STEP",
    "DEFAULT_WORKLOAD_THRESHOLD",
    "JOIN_ENGINES",
    "JOIN_METHODS",
    "JOIN_OUTER",
    "SCHEME_WORDS",
    "SUBARRAY_METHODS",
    "CreateUncertainArray",
    "ProbabilisticSubarray",
    "StructureJoin",
    "UncertainOperator",
]
