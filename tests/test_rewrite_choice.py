"""Chunk rewrites of replacing inserts and deletes are routed by the cost model like compaction:
small rewrites in-process, large ones (over the in-process limit) on Spark, forced modes obeyed; the
content after every write equals a plain-Python replay of the writes (dict of cell -> value), and
every write is one new version."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import arrayviews
from arrayviews.execution.cost import CostModel

SIDE = 40


def _content(array) -> dict[tuple[int, int], float]:
    frame = array.to_pandas()
    return {(int(i), int(j)): float(v) for i, j, v in zip(frame["i"], frame["j"], frame["v"], strict=True)}


def _expected_executor(execution: str) -> str:
    return "spark" if execution == "spark" else "local"


def _check(result, array, replay, version_before: int, executor: str) -> None:
    assert result.committed and result.version == version_before + 1 == array.version
    assert result.executor == executor
    assert result.executor_reason and result.executor_reason in result.message
    assert _content(array) == replay


@pytest.mark.parametrize("execution", ["auto", pytest.param("spark", marks=pytest.mark.slow), "local"])
def test_replacing_inserts_and_deletes_run_where_the_cost_model_says(spark, tmp_path, execution) -> None:
    db = arrayviews.connect(str(tmp_path / "w"), spark=spark, execution=execution)
    array = db.create_array(f"r<v:float64>[i=0:{SIDE - 1}:10; j=0:{SIDE - 1}:10]")
    rng = np.random.default_rng(7)
    executor = _expected_executor(execution)
    replay: dict[tuple[int, int], float] = {}

    def insert(flat: np.ndarray, on_conflict: str = "replace"):
        values = rng.normal(size=len(flat))
        result = array.insert({"i": flat // SIDE, "j": flat % SIDE, "v": values}, on_conflict=on_conflict)
        replay.update({(int(c // SIDE), int(c % SIDE)): float(v) for c, v in zip(flat, values, strict=True)})
        return result

    first = insert(rng.choice(SIDE * SIDE, 300, replace=False), on_conflict="error")
    assert first.committed and first.executor == "" and first.executor_reason == ""  # nothing rewritten
    assert _content(array) == replay
    # replacing inserts: half of each batch overwrites stored cells
    for _ in range(1 if execution == "spark" else 3):
        stored = np.array([i * SIDE + j for i, j in replay])
        fresh = np.setdiff1d(np.arange(SIDE * SIDE), stored)
        batch = np.concatenate([rng.choice(stored, 40, replace=False), rng.choice(fresh, 40, replace=False)])
        before = array.version
        result = insert(batch)
        _check(result, array, replay, before, executor)
        assert result.cells_added == 80 and result.cells_removed == 40
    # a dense block over stored cells, replacing them
    block = rng.normal(size=(6, 7))
    stored_in_block = sum(1 for i, j in replay if 12 <= i < 18 and 3 <= j < 10)
    before = array.version
    result = array.write_dense(block, origin=(12, 3), on_conflict="replace")
    replay.update({(12 + a, 3 + b): float(block[a, b]) for a in range(6) for b in range(7)})
    _check(result, array, replay, before, executor)
    assert result.cells_removed == stored_in_block > 0
    # delete listed cells (some absent: ignored)
    stored = np.array([i * SIDE + j for i, j in replay])
    gone = rng.choice(stored, 25, replace=False)
    absent = np.setdiff1d(np.arange(SIDE * SIDE), stored)[:5]
    listed = np.concatenate([gone, absent])
    before = array.version
    result = array.delete(pd.DataFrame({"i": listed // SIDE, "j": listed % SIDE}))
    for c in gone:
        del replay[(int(c // SIDE), int(c % SIDE))]
    _check(result, array, replay, before, executor)
    assert result.cells_removed == 25
    # delete a box across chunk borders
    before = array.version
    result = array.delete(box={"i": (5, 23), "j": (8, 31)})
    removed = [cell for cell in replay if 5 <= cell[0] <= 23 and 8 <= cell[1] <= 31]
    for cell in removed:
        del replay[cell]
    _check(result, array, replay, before, executor)
    assert result.cells_removed == len(removed) > 0


def test_a_rewrite_over_the_in_process_limit_goes_to_spark_on_auto(spark, tmp_path) -> None:
    db = arrayviews.connect(str(tmp_path / "w"), spark=spark, execution="auto")
    array = db.create_array(f"r<v:float64>[i=0:{SIDE - 1}:10; j=0:{SIDE - 1}:10]")
    flat = np.arange(0, SIDE * SIDE, 3)
    array.insert({"i": flat // SIDE, "j": flat % SIDE, "v": flat.astype(np.float64)})
    replay = {(int(c // SIDE), int(c % SIDE)): float(c) for c in flat}
    # a replacing insert and a delete each rewrite the chunks they touch: in-process by default ...
    before = array.version
    result = array.insert({"i": [0], "j": [0], "v": [-1.0]}, on_conflict="replace")
    replay[(0, 0)] = -1.0
    _check(result, array, replay, before, "local")
    # ... and on Spark once this machine's limit is below the cells of the files to rewrite
    db.executors.store_costs(CostModel(max_local_cells=30))
    before = array.version
    result = array.insert({"i": [0, 39], "j": [3, 39], "v": [-2.0, -3.0]}, on_conflict="replace")
    replay[(0, 3)], replay[(39, 39)] = -2.0, -3.0
    _check(result, array, replay, before, "spark")
    assert "exceed the in-process limit (30 cells" in result.executor_reason
    before = array.version
    result = array.delete(box={"i": (10, 19), "j": (0, 39)})
    replay = {cell: v for cell, v in replay.items() if not 10 <= cell[0] <= 19}
    _check(result, array, replay, before, "spark")
    # a rewrite under the limit stays in-process on the same connection
    db.executors.store_costs(CostModel(max_local_cells=10**9))
    before = array.version
    result = array.delete(pd.DataFrame({"i": [0], "j": [0]}))
    del replay[(0, 0)]
    _check(result, array, replay, before, "local")


def test_a_replacing_insert_of_a_spark_frame_rewrites_where_the_cost_model_says(spark, tmp_path) -> None:
    """The frame's cells are chunked by Spark tasks; the stored chunks they replace are rewritten
    in-process when small (auto)."""
    db = arrayviews.connect(str(tmp_path / "w"), spark=spark, execution="auto")
    array = db.create_array(f"r<v:float64>[i=0:{SIDE - 1}:10; j=0:{SIDE - 1}:10]")
    flat = np.arange(0, SIDE * SIDE, 7)
    array.insert({"i": flat // SIDE, "j": flat % SIDE, "v": flat.astype(np.float64)})
    replay = {(int(c // SIDE), int(c % SIDE)): float(c) for c in flat}
    frame = spark.createDataFrame(pd.DataFrame({"i": [0, 1, 39], "j": [0, 3, 39], "v": [-1.0, -2.0, -3.0]}))
    before = array.version
    result = array.insert(frame, on_conflict="replace")
    replay.update({(0, 0): -1.0, (1, 3): -2.0, (39, 39): -3.0})
    _check(result, array, replay, before, "local")
    assert result.cells_removed == 1  # (0, 0) was stored; (1, 3) and (39, 39) were not
