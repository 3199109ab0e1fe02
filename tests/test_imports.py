"""Every module of the package imports (a name removed from one module but still imported by another
fails here, not in front of a user: the demo once imported a renderer that was gone)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import arrayviews

MODULES = sorted(m.name for m in pkgutil.walk_packages(arrayviews.__path__, "arrayviews."))


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name: str) -> None:
    importlib.import_module(name)
