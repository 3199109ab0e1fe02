"""Cell files both LOAD readers (in-process and Spark, of arrays and streams) refuse alike before
reading them, naming the array or stream and the file: a folder with no file to read, a file that
is no Parquet file, Parquet times in nanoseconds (which Spark cannot read), and the files of a
folder disagreeing on their columns (Spark takes one file's and reads the others by it: a CSV
header naming the columns in another order swapped them, a Parquet column of only some files was
dropped); and the error of a file removed while it was loaded."""

from __future__ import annotations

import csv
import gzip
import io
import re

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow.fs import FileSelector, FileType

from arrayviews.execution.failures import file_gone
from arrayviews.model.errors import NotFoundError, ValidationError
from arrayviews.storage.files import filesystem

#: The bytes a Parquet file starts and ends with (Spark refuses a file without them).
_MAGIC = b"PAR1"
#: Bytes of a CSV file read to find its header line.
_HEADER_BYTES = 1 << 16


def hidden_name(name: str) -> bool:
    """Whether Spark's file listing skips a file or folder (``_`` without ``=``, or ``.``)."""
    return (name.startswith("_") and "=" not in name) or name.startswith(".")


def _data_files(fs, inner: str) -> list[str]:
    """The files Spark may read at ``inner`` (a folder's files, partition folders' too), by name."""
    info = fs.get_file_info(inner)
    if info.type == FileType.File:
        return [inner]
    if info.type != FileType.Directory:
        return []
    found = []
    for entry in fs.get_file_info(FileSelector(inner, recursive=True)):
        relative = entry.path[len(inner.rstrip("/")) + 1 :].split("/")
        if entry.type == FileType.File and not any(hidden_name(part) for part in relative):
            found.append(entry.path)
    return sorted(found)


def check_cell_files(path: str, file_format: str, label: str, spark: bool = True) -> None:
    """Refuse the files at ``path`` (``file_format`` parquet or csv) that Spark would fail on with
    a message naming neither ``label`` (``"array A"``, ``"stream M"``) nor the file, or would read
    wrongly; other formats are left to the reader. ``spark=False``: only what Arrow's datasets fail
    on or read wrongly too (they read CSV files by their own headers, and times in nanoseconds)."""
    fs, inner = filesystem(path)
    files = _data_files(fs, inner)
    owner = label.split(" ", 1)[1]
    if not files and fs.get_file_info(inner).type == FileType.Directory:
        raise ValidationError(
            f"{label}: the folder {path} holds no file to load (names starting with _ or . are skipped)",
            array=owner,
            value=path,
        )
    if file_format == "parquet":
        _check_parquet(fs, files, label, owner, spark)
    elif file_format == "csv":
        _check_headers(fs, files, label, owner, spark)


def _check_parquet(fs, files: list[str], label: str, owner: str, spark: bool) -> None:
    first: tuple[str, dict[str, tuple[str, str]]] | None = None
    for file in files:
        try:
            with fs.open_input_file(file) as handle:
                size = handle.size()
                head = handle.read(4)
                handle.seek(max(size - 4, 0))
                tail = handle.read(4)
                schema = pq.ParquetFile(handle).schema if size >= 12 and head == tail == _MAGIC else None
        except (OSError, pa.ArrowException):
            schema = None
        if schema is None:
            raise ValidationError(
                f"{label}: {file} is not a Parquet file (a folder is loaded in one format; give the "
                "format with AS CSV | PARQUET, or load the files one at a time)",
                array=owner,
                value=file,
            )
        columns = {}
        for k in range(len(schema)):
            column = schema.column(k)
            logical = column.logical_type
            text = str(logical) if logical is not None else "NONE"
            if (
                spark
                and logical is not None
                and logical.type == "TIMESTAMP"
                and "timeUnit=nanoseconds" in text
            ):
                raise ValidationError(
                    f"{label}, column {column.name}: {file} stores its times in nanoseconds (Parquet "
                    "TIMESTAMP(NANOS)), which Spark cannot read; write them in microseconds (pyarrow: "
                    "pq.write_table(table, path, coerce_timestamps='us'); pandas: "
                    "frame.to_parquet(path, coerce_timestamps='us'))",
                    array=owner,
                    column=column.name,
                    value=file,
                )
            utc = re.search(r"isAdjustedToUTC=(\w+)", text)
            kind = logical.type if logical is not None else "NONE"
            # Spark resolves names without regard to case (Arrow's datasets by their spelling)
            columns[column.name.lower() if spark else column.name] = (
                column.physical_type,
                f"{kind}{utc.group(1) if utc else ''}",
            )
        if first is None:
            first = (file, columns)
        elif columns != first[1]:
            raise _drift(label, owner, first[0], file, _difference(first[1], columns))


def _difference(one: dict, other: dict) -> str:
    """What two files' Parquet columns disagree on, in words."""
    only = sorted(set(one) ^ set(other))
    if only:
        return f"column {only[0]} is in one file only"
    name = next(n for n in one if one[n] != other[n])
    return f"column {name} is stored as {' '.join(one[name])} in one, {' '.join(other[name])} in the other"


def _drift(label: str, owner: str, one: str, other: str, why: str) -> ValidationError:
    return ValidationError(
        f"{label}: the files {one} and {other} differ in their columns ({why}); a folder's files are "
        "all read by one file's columns: load them one at a time",
        array=owner,
        value=other,
    )


def _header(fs, file: str) -> tuple[str, ...] | None:
    """The names of a CSV file's header line (``()`` for an empty file, None for one not read here)."""
    lowered = file.lower()
    if re.search(r"\.(bz2|deflate|lz4|snappy|zst|zstd|br|xz)$", lowered):
        return None
    try:
        with fs.open_input_stream(file, compression=None) as stream:
            data = (
                gzip.GzipFile(fileobj=stream).read(_HEADER_BYTES)
                if lowered.endswith(".gz")
                else stream.read(_HEADER_BYTES)
            )
        if not data.strip():
            return ()
        if len(data) == _HEADER_BYTES and b"\n" not in data and b"\r" not in data:
            return None  # a header longer than what is read here
        rows = csv.reader(io.StringIO(data.decode("utf-8", errors="replace").lstrip("\ufeff"), newline=""))
        return tuple(next(rows, ())) or None
    except (OSError, EOFError, csv.Error):
        return None


def _check_headers(fs, files: list[str], label: str, owner: str, spark: bool) -> None:
    headers = [(file, _header(fs, file)) for file in files]
    if headers and all(names == () for _, names in headers):
        raise ValidationError(
            f"{label}: {headers[0][0]} is empty (a CSV file starts with a header line naming the columns)",
            array=owner,
            value=headers[0][0],
        )
    first: tuple[str, tuple[str, ...]] | None = None
    for file, names in headers if spark else ():
        if not names:
            continue
        if first is None:
            first = (file, names)
        elif [n.lower() for n in names] != [
            n.lower() for n in first[1]
        ]:  # names match without regard to case
            raise _drift(
                label, owner, first[0], file, f"header {','.join(first[1])} and header {','.join(names)}"
            )


def vanished(label: str, path: str, file: str) -> NotFoundError:
    """The error of an input file removed while a LOAD read it (nothing was loaded)."""
    return NotFoundError(
        f"{label}: {file} was removed while it was being loaded from {path}; nothing was loaded "
        "(load again once the files stay put)"
    )


def vanished_input(error: BaseException, path: str, label: str) -> NotFoundError | None:
    """:func:`vanished` for a failure saying a file of the load's ``path`` does not exist (Spark
    lists a folder's files before its jobs read them), or None for any other failure (a data file
    of the warehouse gone is another error)."""
    if not file_gone(error):
        return None
    text = f"{error} {getattr(error, 'details', '')}"
    _, inner = filesystem(path)
    for named in re.findall(r"File (\S+) does not exist", text) + [getattr(error, "filename", None) or ""]:
        file = re.sub(r"^file:(//)?", "", named)
        if file and (file == inner or file.startswith(inner.rstrip("/") + "/")):
            return vanished(label, path, file)
    return None
