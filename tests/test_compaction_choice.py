"""Compaction is routed by the cost model like the operators: small work in-process, forced modes
obeyed, the content unchanged (a plain-Python replay of every insert)."""

from __future__ import annotations

import numpy as np
import pytest

import arrayviews


@pytest.mark.parametrize("execution", ["auto", "spark", "local"])
def test_compaction_runs_where_the_cost_model_says_and_keeps_every_cell(spark, tmp_path, execution) -> None:
    db = arrayviews.connect(str(tmp_path / "w"), spark=spark, execution=execution)
    array = db.create_array("b<v:float64>[i=0:99:10; j=0:99:10]")
    rng = np.random.default_rng(4)
    replay: dict[tuple[int, int], float] = {}
    for _ in range(6):
        cells = rng.choice(100 * 100, 40, replace=False)
        values = rng.normal(size=40)
        array.insert({"i": cells // 100, "j": cells % 100, "v": values}, on_conflict="replace")
        replay.update({(int(c // 100), int(c % 100)): float(v) for c, v in zip(cells, values, strict=True)})
    before = array.version
    result = array.compact()
    assert result.committed and array.version == before + 1
    assert result.executor == ("spark" if execution == "spark" else "local")
    assert result.executor_reason and result.executor_reason in result.message
    frame = array.to_pandas()
    got = {(int(i), int(j)): float(v) for i, j, v in zip(frame["i"], frame["j"], frame["v"], strict=True)}
    assert got == replay
    assert len(array.source.file_uris()) == 1
