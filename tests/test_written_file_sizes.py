"""Files written by Spark tasks hold about the target bytes each, however Spark batches the rows:
an Arrow batch of many large rows is split between files (a view's Spark computation wrote files of
400 chunk payloads, 33 MB in memory against a 4 MB target, so a refresh touching one chunk copied
the other 399)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from arrayviews.execution.jobs import write_files
from arrayviews.storage.files import filesystem


def test_a_large_batch_is_split_between_files(spark, tmp_path) -> None:
    rng = np.random.default_rng(4)
    payloads = [rng.bytes(int(n)) for n in rng.integers(8_000, 12_000, 120)]
    source = pa.table(
        {"key": pa.array(np.arange(120), pa.int64()), "payload": pa.array(payloads, pa.binary())}
    )
    frame = spark.createDataFrame(source.to_pandas()).coalesce(1)  # one task, one batch
    target = 100_000
    written = write_files(frame, (tmp_path / "out").as_uri(), source.schema, target_bytes=target)
    rows = []
    for file in written:
        fs, path = filesystem(file.uri)
        table = pq.read_table(path, filesystem=fs)
        assert table.num_rows == file.rows
        # a file stops once it holds the target: at most one row's worth past it
        assert table.nbytes <= target + 12_000 + 8 * table.num_rows + 4 * table.num_rows
        rows += list(zip(table.column("key").to_pylist(), table.column("payload").to_pylist(), strict=True))
    assert len(written) >= (sum(len(p) for p in payloads) // target)
    assert sorted(rows) == sorted(zip(range(120), payloads, strict=True))
