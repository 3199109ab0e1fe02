"""Committing new view chunks: rewrite the files that held them (copying their other fragments
unchanged) and swap the files in one snapshot that records the base versions reflected."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from arrayviews.execution import jobs
from arrayviews.model.faults import checkpoint
from arrayviews.operators import staging
from arrayviews.storage import layout
from arrayviews.storage.array_table import ArrayTable, CommitInfo
from arrayviews.storage.files import delete_files


def replace_chunks(
    spark: SparkSession,
    view: ArrayTable,
    new_fragments: DataFrame | None,
    affected: np.ndarray | None,
    expected_version: int,
    info: CommitInfo,
) -> int:
    """Replace the view chunks in ``affected`` (None: every chunk) by ``new_fragments``; one snapshot."""
    schema = view.schema
    arrow_schema = layout.fragment_schema(schema)
    frames = [] if new_fragments is None else [new_fragments]
    if affected is None:
        removed = view.data_files(expected_version)
        previous = view.current()
        cells_removed = 0 if previous is None or not removed else previous.cells_total
    else:
        overlap = staging.find_overlap(view, expected_version, affected) if len(affected) else None
        removed = overlap.files if overlap is not None else []
        cells_removed = overlap.cells_in(removed) if removed else 0
        if removed:
            kept = jobs.read_files(spark, [f.file_path for f in removed], arrow_schema)
            frames.append(_without_chunks(kept, schema, affected))
    written: list[jobs.WrittenFile] = []
    try:
        if frames:  # one job writes the new chunks and the copied ones
            frame = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
            written = jobs.write_files(frame, view.data_directory, arrow_schema)
        checkpoint("refresh.written")
        checkpoint("refresh.before-commit")
        # cells counted as the files' contents: the rewritten files re-add the fragments they copied
        counted = dataclasses.replace(
            info, cells_added=sum(w.cells for w in written), cells_removed=cells_removed
        )
        return view.commit([w.uri for w in written], removed, counted, expected_version)
    except BaseException:
        delete_files([w.uri for w in written])
        raise


def _without_chunks(frame: DataFrame, schema, chunks: np.ndarray) -> DataFrame:
    """Rows of a fragment frame whose chunk is not one of ``chunks`` (a broadcast anti-join)."""
    names = layout.chunk_columns(schema)
    unwanted = frame.sparkSession.createDataFrame(
        pa.table({name: pa.array(np.asarray(chunks)[:, k], pa.int64()) for k, name in enumerate(names)})
    )
    return frame.join(F.broadcast(unwanted), on=names, how="left_anti")
