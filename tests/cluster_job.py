"""A job run in a child process by test_cluster.py: the same work on any Spark master, results as JSON.

Usage: ``python cluster_job.py MASTER WAREHOUSE``. It creates arrays in the (empty) warehouse folder,
inserts cells from a Spark DataFrame, writes a dense block, runs subarray, filter, regrid,
aggregate, join and delete, and prints one JSON object on the last line of stdout. The input data
come from ``make_data()`` (deterministic), which the test imports to compute numpy references.
"""

from __future__ import annotations

import json
import math
import os
import sys

import numpy as np

# Array A is sparse (cells from a Spark DataFrame); array B is dense (one write_dense block).
SCHEMA_A = "A<v:float64, k:int64>[i=0:23:5; j=0:17:4]"
SCHEMA_B = "B<w:float64>[i=0:23:5; j=0:17:4]"
SHAPE = (24, 18)
DELETE_BOX = {"i": (3, 12), "j": (2, 9)}


def make_data() -> dict[str, np.ndarray]:
    """The cells of A (coordinates i, j and values v, k) and the dense block of B."""
    rng = np.random.default_rng(20261125)
    flat = np.sort(rng.choice(SHAPE[0] * SHAPE[1], size=150, replace=False))
    i, j = np.unravel_index(flat, SHAPE)
    v = np.round(rng.normal(size=len(flat)), 6)
    k = rng.integers(-50, 50, size=len(flat))
    w = np.round(rng.uniform(0, 10, size=SHAPE), 6)
    return {"i": i.astype(np.int64), "j": j.astype(np.int64), "v": v, "k": k.astype(np.int64), "w": w}


def _cells(frame) -> list[list]:
    """Cells of a to_pandas() frame as sorted lists of plain Python values (NaN as None)."""
    rows = []
    for row in frame.itertuples(index=False):
        rows.append(
            [
                None if isinstance(x, float) and math.isnan(x) else x.item() if hasattr(x, "item") else x
                for x in row
            ]
        )
    return sorted(rows)


def run(master: str, warehouse: str) -> dict:
    import arrayviews

    db = arrayviews.connect(
        warehouse,
        master=master,
        spark_config={
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "1g",
            "spark.executor.memory": "1g",
        },
    )
    spark = db.spark
    data = make_data()
    a = db.create_array(SCHEMA_A)
    b = db.create_array(SCHEMA_B)
    rows = list(
        zip(
            data["i"].tolist(),
            data["j"].tolist(),
            data["v"].tolist(),
            data["k"].tolist(),
            strict=True,
        )
    )
    frame = spark.createDataFrame(rows, "i long, j long, v double, k long").repartition(3)
    results: dict = {"master": spark.sparkContext.master}
    inserted = a.insert(frame)
    results["insert"] = [inserted.version, inserted.cells_added]
    dense = b.write_dense(data["w"])
    results["write_dense"] = [dense.version, dense.cells_added]
    results["subarray"] = _cells(a.subarray(i=(4, 15), j=(3, 11)).to_pandas())
    results["filter"] = _cells(a.filter("v > 0.5 and k < 20").to_pandas())
    results["regrid"] = _cells(b.regrid([5, 4], "avg(w)", "max(w)", "count(*)").to_pandas())
    results["aggregate"] = _cells(a.aggregate("sum(k)", "count(*)", "max(v)").to_pandas())
    results["aggregate_by"] = _cells(a.aggregate("sum(k)", "count(*)", by=["i"]).to_pandas())
    results["join"] = _cells(a.join(b).to_pandas())
    deleted = a.delete(box=DELETE_BOX)
    results["delete"] = [deleted.version, deleted.cells_removed]
    results["after_delete"] = _cells(a.to_pandas())
    results["count"] = a.count()
    # Executors that ran tasks (the driver is listed too, and excluded).
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    results["executors"] = len(infos) - 1
    spark.stop()
    return results


def main() -> None:
    master, warehouse = sys.argv[1], sys.argv[2]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    results = run(master, warehouse)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
