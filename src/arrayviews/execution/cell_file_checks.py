"""Parquet files both LOAD readers refuse before reading them, with the same error: times stored in
nanoseconds (pandas' and pyarrow's default), which Spark cannot read, named by file and column."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow.fs import FileSelector, FileType

from arrayviews.model.errors import ValidationError
from arrayviews.storage.files import filesystem


def hidden_name(name: str) -> bool:
    """Whether Spark's file listing skips a file or folder (``_`` without ``=``, or ``.``)."""
    return (name.startswith("_") and "=" not in name) or name.startswith(".")


def _parquet_files(path: str) -> list[tuple[object, str]]:
    """(filesystem, path) of every file Spark may read at ``path`` (a folder's files, partition
    folders too), by name."""
    fs, inner = filesystem(path)
    info = fs.get_file_info(inner)
    if info.type == FileType.File:
        return [(fs, inner)]
    if info.type != FileType.Directory:
        return []
    found = []
    for entry in fs.get_file_info(FileSelector(inner, recursive=True)):
        relative = entry.path[len(inner.rstrip("/")) + 1 :].split("/")
        if entry.type == FileType.File and not any(hidden_name(part) for part in relative):
            found.append((fs, entry.path))
    return sorted(found, key=lambda pair: pair[1])


def refuse_nanosecond_times(path: str, label: str) -> None:
    """ValidationError naming ``label`` (``"array A"``, ``"stream M"``), the file and the column of
    the first Parquet column of the files at ``path`` storing times in nanoseconds; a file that is
    no Parquet file is left to the reader."""
    for fs, file in _parquet_files(path):
        try:
            with fs.open_input_file(file) as handle:
                schema = pq.ParquetFile(handle).schema
        except (OSError, pa.ArrowException):
            continue
        for k in range(len(schema)):
            column = schema.column(k)
            logical = column.logical_type
            if logical is not None and logical.type == "TIMESTAMP" and "timeUnit=nanoseconds" in str(logical):
                raise ValidationError(
                    f"{label}, column {column.name}: {file} stores its times in nanoseconds (Parquet "
                    "TIMESTAMP(NANOS)), which Spark cannot read; write them in microseconds (pyarrow: "
                    "pq.write_table(table, path, coerce_timestamps='us'); pandas: "
                    "frame.to_parquet(path, coerce_timestamps='us'))",
                    array=label.split(" ", 1)[1],
                    column=column.name,
                    value=file,
                )
