"""The README's Python examples run as written: its ```python blocks, in order, in one namespace (each
block builds on the ones before), in a fresh folder, on the test run's Spark session."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def python_blocks() -> list[str]:
    return _BLOCK.findall(README.read_text())


def test_the_readme_has_python_examples() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 4
    for block in blocks:
        compile(block, "README.md", "exec")  # each one is valid Python, no placeholders such as `...`
        assert not re.search(r"[(,:]\s*\.\.\.\s*[,)}]", block), block


@pytest.mark.slow
def test_the_readme_examples_run_as_written(spark, tmp_path, monkeypatch) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import arrayviews

    connect = arrayviews.connect

    def on_the_test_session(path=None, **options):
        options.setdefault("spark", spark)
        return connect(path, **options)

    monkeypatch.setattr(arrayviews, "connect", on_the_test_session)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "readme"}
    for number, block in enumerate(python_blocks(), start=1):
        try:
            exec(compile(block, f"README.md block {number}", "exec"), namespace)
        except Exception as error:  # name the block that failed
            raise AssertionError(
                f"README python block {number} failed: {type(error).__name__}: {error}"
            ) from error
    db = namespace["db"]
    assert {"A", "B", "B_smooth", "A_coarse", "B_copy", "E", "P", "P_copy"} <= set(db.arrays())
    assert db.array("P_copy").schema.dimension("ra").scale == db.array("P").schema.dimension("ra").scale
    assert db.view("V").verify()
    assert namespace["np"].asarray(db.array("B_copy")).shape == (200, 200)
