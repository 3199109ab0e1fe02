"""Named fault-injection points, so tests can simulate a crash at any step of a write or refresh."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

_armed: dict[str, BaseException] = {}


class InjectedFault(RuntimeError):
    """Raised at an armed checkpoint; stands for the process dying at that instant."""


def checkpoint(name: str) -> None:
    """Mark a step; raises the armed fault if a test armed ``name``."""
    fault = _armed.get(name)
    if fault is not None:
        raise fault


@contextlib.contextmanager
def inject(name: str, fault: BaseException | None = None) -> Iterator[None]:
    """Within the block, reaching checkpoint ``name`` raises ``fault`` (InjectedFault by default)."""
    _armed[name] = fault or InjectedFault(f"injected fault at {name}")
    try:
        yield
    finally:
        _armed.pop(name, None)
