"""The tables that tie syntax nodes to what runs them: statement runners and EXPLAIN writers.

Each executor module registers the runners of its statements with :func:`statement_runner`, so a new
statement is one node type, one grammar rule, one builder, one printer and one runner.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Runners of each statement type: (database, statement) -> result.
STATEMENTS: dict[type, Callable[[Any, Any], Any]] = {}
#: Writers of EXPLAIN for each statement type: (database, statement) -> text.
EXPLAINERS: dict[type, Callable[[Any, Any], str]] = {}


def statement_runner(node_type: type) -> Callable:
    """Register the runner of a statement type (a decorator)."""

    def register(runner: Callable) -> Callable:
        STATEMENTS[node_type] = runner
        return runner

    return register


def explainer(node_type: type) -> Callable:
    """Register what EXPLAIN says about a statement type (a decorator)."""

    def register(writer: Callable) -> Callable:
        EXPLAINERS[node_type] = writer
        return writer

    return register


__all__ = ["EXPLAINERS", "STATEMENTS", "explainer", "statement_runner"]
