"""Named fault-injection points, so tests can simulate a crash (or a concurrent writer) at any step
of a write, a refresh or a maintenance step.

Three ways to use a checkpoint:

- ``inject(name)``: reaching ``name`` raises (a crash the process survives, so cleanup runs);
- ``interleave(name, action)``: reaching ``name`` runs ``action`` once (another writer committing
  between this writer's planning and its commit);
- the environment variable ``ARRAYVIEWS_KILL_AT_CHECKPOINT=k`` (optionally ``k:prefix``): the
  process sends itself SIGKILL at the k-th checkpoint it reaches (counting only names starting
  with ``prefix``), so no handler, ``finally`` or cleanup runs: a real ``kill -9``.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator

KILL_ENVIRONMENT = "ARRAYVIEWS_KILL_AT_CHECKPOINT"

_armed: dict[str, BaseException] = {}
_actions: dict[str, Callable[[], None]] = {}
_reached = 0


class InjectedFault(RuntimeError):
    """Raised at an armed checkpoint; stands for the process dying at that instant."""


def _kill_plan() -> tuple[int, str] | None:
    text = os.environ.get(KILL_ENVIRONMENT)
    if not text:
        return None
    count, _, prefix = text.partition(":")
    return int(count), prefix


def checkpoint(name: str) -> None:
    """Mark a step; raises the armed fault, runs the armed action, or kills the process if asked to."""
    global _reached
    plan = _kill_plan()
    if plan is not None and name.startswith(plan[1]):
        _reached += 1
        if _reached == plan[0]:
            os.kill(os.getpid(), signal.SIGKILL)
    action = _actions.pop(name, None)
    if action is not None:
        action()
    fault = _armed.get(name)
    if fault is not None:
        raise fault


def reached() -> int:
    """How many checkpoints counted by the kill plan this process has reached."""
    return _reached


def reset_count() -> None:
    global _reached
    _reached = 0


@contextlib.contextmanager
def inject(name: str, fault: BaseException | None = None) -> Iterator[None]:
    """Within the block, reaching checkpoint ``name`` raises ``fault`` (InjectedFault by default)."""
    _armed[name] = fault or InjectedFault(f"injected fault at {name}")
    try:
        yield
    finally:
        _armed.pop(name, None)


@contextlib.contextmanager
def interleave(name: str, action: Callable[[], None]) -> Iterator[None]:
    """Within the block, the first time checkpoint ``name`` is reached ``action`` runs there (it may
    itself pass through checkpoints, including ``name``, without running again)."""
    _actions[name] = action
    try:
        yield
    finally:
        _actions.pop(name, None)
