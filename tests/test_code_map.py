"""docs/code-map.md names every module with its docstring's first sentence (the README's map, file by file)."""

from __future__ import annotations

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _code_map():
    spec = importlib.util.spec_from_file_location("code_map", ROOT / "scripts" / "code_map.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_module_is_in_the_map_once():
    text = (ROOT / "docs" / "code-map.md").read_text(encoding="utf-8")
    package = ROOT / "src" / "arrayviews"
    listed = [line.split("`")[1] for line in text.splitlines() if line.startswith("| `")]
    on_disk = sorted(
        p.relative_to(package).as_posix() for p in package.rglob("*.py") if "__pycache__" not in p.parts
    )
    assert sorted(listed) == on_disk, "run: python scripts/code_map.py"


def test_the_map_is_current():
    text = (ROOT / "docs" / "code-map.md").read_text(encoding="utf-8")
    assert text == _code_map().render(), "a module's docstring changed: run python scripts/code_map.py"
