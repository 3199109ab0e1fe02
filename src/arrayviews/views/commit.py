"""Committing new view chunks: rewrite the files that held them (copying their other fragments
unchanged) and swap the files in one snapshot that records the base versions reflected."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrayviews.execution.engine import Data, Engine, WrittenFile
from arrayviews.model.faults import checkpoint
from arrayviews.model.schema import ArraySchema
from arrayviews.operators import staging
from arrayviews.storage import layout
from arrayviews.storage.array_table import ArrayTable, CommitInfo
from arrayviews.storage.snapshots import discard_unless_committed

#: A view's data files hold about this many bytes of fragments, each a run of neighbouring chunks:
#: a refresh rewrites the files holding the chunks it changes (copying their other fragments), so
#: small files keep that copy proportional to the change, not to the view.
VIEW_FILE_BYTES = 4 * 1024 * 1024


def stamp_computed(rows: pa.Table, version: int) -> pa.Table:
    """Fragments computed by this refresh (stamped 0 when built) take the version that commits
    them; fragments copied from rewritten files keep theirs. So the view's version delta (what a
    view over this view reads) tells a rewritten chunk from a copied one, as it does for arrays."""
    index = rows.schema.get_field_index(layout.VERSION)
    stamps = rows.column(index)
    fresh = pc.if_else(pc.equal(stamps, 0), pa.scalar(version, pa.int64()), stamps)
    return rows.set_column(index, layout.VERSION, fresh)


def write_view_files(
    engine: Engine, fragments: Data, directory: str, schema: ArraySchema, version: int
) -> list[WrittenFile]:
    """Write view fragments (of ``schema``) under ``directory`` as files of about VIEW_FILE_BYTES,
    clustered by chunk; the fragments computed now are stamped with ``version``, the one the
    commit will create."""
    return engine.write_files(
        fragments,
        directory,
        layout.fragment_schema(schema),
        stamp=functools.partial(stamp_computed, version=version),
        target_bytes=VIEW_FILE_BYTES,
        cluster_by=layout.chunk_columns(schema),
    )


def replace_chunks(
    engine: Engine,
    view: ArrayTable,
    new_fragments: Data | None,
    affected: np.ndarray | None,
    expected_version: int,
    info: CommitInfo,
    timings: dict[str, float] | None = None,
    annotate: Callable[[dict[str, float]], dict[str, str]] | None = None,
    cells: int | None = None,
) -> int:
    """Replace the view chunks in ``affected`` (None: every chunk) by ``new_fragments``; one snapshot.

    ``timings`` receives the seconds of the write (which runs the computation) and of the commit;
    ``annotate`` adds properties to the commit from the timings measured before it. The computation
    and write run as one job of the engine; ``cells``, the cells the plan reads, sizes its shuffles."""
    timings = {} if timings is None else timings
    started = time.perf_counter()
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
            kept = engine.read_files([f.file_path for f in removed], arrow_schema)
            frames.append(engine.where_keys(kept, layout.chunk_columns(schema), affected, keep=False))
    written: list[WrittenFile] = []
    try:
        if frames:  # one job writes the new chunks and the copied ones
            frame = frames[0] if len(frames) == 1 else engine.union(frames)
            with engine.one_job(cells):
                written = write_view_files(engine, frame, view.data_directory, schema, expected_version + 1)
        checkpoint("refresh.written")
        timings["write"] = time.perf_counter() - started
        checkpoint("refresh.before-commit")
        properties = info.properties if annotate is None else {**info.properties, **annotate(dict(timings))}
        # cells counted as the files' contents: the rewritten files re-add the fragments they copied
        counted = dataclasses.replace(
            info,
            cells_added=sum(w.cells for w in written),
            cells_removed=cells_removed,
            properties=properties,
        )
        committing = time.perf_counter()
        version = view.commit([w.uri for w in written], removed, counted, expected_version)
        timings["commit"] = time.perf_counter() - committing
        return version
    except BaseException as error:
        discard_unless_committed([w.uri for w in written], error)
        raise
