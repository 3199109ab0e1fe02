"""Running the statements of uncertain arrays (paper 001) through the Python API: CREATE UNCERTAIN ARRAY,
INSERT and LOAD of tuples, ``SELECT * FROM`` an uncertain array, ``subarray(U, ..., THRESHOLD p)`` or
``structure_join(A, B, delta, threshold)`` (the API's result objects, evaluated when read), their
EXPLAIN (the expanded regions and the chosen step) and the rows of SHOW ARRAYS / RELATIONS."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
from pyarrow import csv as pacsv
from pyarrow.fs import FileSystem, FileType

from arrayviews.execution.cell_file_checks import check_cell_files
from arrayviews.language import relations
from arrayviews.language import syntax as ast
from arrayviews.language.literals import time_problem
from arrayviews.language.registry import statement_runner
from arrayviews.model.copy_layout import STORE_ALL, STORE_MEAN
from arrayviews.model.errors import NotFoundError, ValidationError
from arrayviews.model.time_scale import instant_nanoseconds
from arrayviews.model.types import arrow_type, python_value_problem
from arrayviews.model.uncertain import EXACT, ID, UncertainSchema
from arrayviews.operators.uncertain_ingest import spelled_columns
from arrayviews.storage.files import filesystem
from arrayviews.storage.uncertain_table import Workload

if TYPE_CHECKING:
    from arrayviews.database import Database
    from arrayviews.uncertain import UncertainArray

USAGE = (
    "uncertain arrays are queried with SELECT * FROM subarray(U, lo..., hi..., THRESHOLD p) or "
    "structure_join(A, B, delta, threshold)"
)


@statement_runner(ast.CreateUncertainArray)
def _create(db: Database, s: ast.CreateUncertainArray) -> UncertainArray:
    workload = None if s.workload is None else Workload(s.workload, s.workload_threshold)
    return db.create_uncertain_array(s.schema, s.scheme, s.step, s.sigmas, workload)


def open_uncertain(db: Database, name: str, role: str) -> UncertainArray:
    """The uncertain array ``name``; a clear error when ``name`` is another kind of relation or none."""
    kind = relations.kind_of(db, name)
    if kind == relations.UNCERTAIN_ARRAY:
        return db.uncertain_array(name)
    if kind is None:
        known = ", ".join(db.uncertain_arrays()) or "none"
        raise NotFoundError(f"no uncertain array named {name} (uncertain arrays: {known})")
    raise ValidationError(f"{name} is {relations.a_kind(kind)}, not an uncertain array: {role}", array=name)


# -- queries ----------------------------------------------------------------------------------------
def is_uncertain_select(db: Database, s: ast.Select) -> bool:
    """Whether a SELECT reads an uncertain array (a probabilistic operator, or an uncertain array's name)."""
    if isinstance(s.source, ast.UncertainOperator):
        return True
    return (
        isinstance(s.source, ast.ArrayName)
        and relations.kind_of(db, s.source.name) == relations.UNCERTAIN_ARRAY
    )


def select(db: Database, s: ast.Select) -> Any:
    """The API's result: the UncertainArray (every tuple once), an UncertainSubarray or a StructureJoin."""
    source = s.source
    if isinstance(source, ast.ArrayName):
        clause = "a list of columns" if s.attributes else "WHERE" if s.where is not None else "INTO"
        if s.attributes or s.where is not None or s.into is not None:
            raise ValidationError(
                f"{source.name} is an uncertain array: SELECT * FROM {source.name} gives every tuple; "
                f"{clause} is not supported for uncertain arrays ({USAGE})",
                array=source.name,
            )
        return db.uncertain_array(source.name)
    if isinstance(source, ast.ProbabilisticSubarray):
        array = open_uncertain(db, source.source.name, "subarray(..., THRESHOLD p) reads uncertain arrays")
        return array.subarray(_box(array.schema, source), threshold=source.threshold, method=source.method)
    if isinstance(source, ast.StructureJoin):
        role = "structure_join reads two uncertain arrays"
        left, right = open_uncertain(db, source.left.name, role), open_uncertain(db, source.right.name, role)
        return left.structure_join(
            right,
            source.delta,
            source.threshold,
            method=source.method,
            engine=source.engine,
            outer=source.outer,
        )
    raise TypeError(f"no executor for {source!r}")  # pragma: no cover - the parser makes no other node


def _box(schema: UncertainSchema, node: ast.ProbabilisticSubarray) -> dict[str, tuple[int, int]]:
    if len(node.low) != schema.ndim:
        raise ValidationError(
            f"subarray of uncertain array {schema.name} needs {2 * schema.ndim} coordinates (the low then "
            f"the high cell of each of {', '.join(schema.dimension_names)}), got {len(node.low) + len(node.high)}",
            array=schema.name,
        )
    return {d: (lo, hi) for d, lo, hi in zip(schema.dimension_names, node.low, node.high, strict=True)}


def explain(db: Database, s: ast.Select) -> str:
    """EXPLAIN of a SELECT over an uncertain array: the plan the API gives (nothing is read)."""
    result = select(db, s)
    if isinstance(s.source, ast.ArrayName):
        return (
            f"every tuple of uncertain array {result.name} once (its home copies), version {result.version}\n"
            f"storage: {_layout_text(result.layout.scheme, result.layout.steps, result.layout.sigmas)}\n"
        )
    return explain_text(result.explain())


def _layout_text(scheme: str, step, sigmas: float) -> str:
    text = scheme
    if scheme not in (STORE_ALL, STORE_MEAN):
        text += ", step " + ("AUTO (chosen at the first insert)" if step is None else str(list(step)))
    return f"{text}, possible range mean +- {sigmas:g} sigma"


def _region(region: dict) -> str:
    return ", ".join(f"{d} {lo}..{hi}" for d, (lo, hi) in region.items())


def explain_text(plan: dict) -> str:
    """The text of an operator's ``explain()``: its layouts, the query, the expanded regions."""
    plan = dict(plan)
    lines = []
    if plan.pop("operator") == "subarray":
        scheme = plan.pop("scheme")
        lines.append(
            f"probabilistic subarray of uncertain array {plan.pop('array')} (version {plan.pop('version')})"
        )
        lines.append(f"storage: {_layout_text(scheme, plan.pop('step'), plan.pop('sigmas'))}")
        query = plan.pop("query")
        query_text = "outside the domain (no tuple)" if query is None else _region(query) or "the whole array"
        lines.append(f"query: {query_text} ({plan.pop('query_cells')} cells)")
        lines.append(f"threshold: {plan.pop('threshold')!r}; method: {plan.pop('method')}")
        if "expanded_region" in plan:
            how = {
                STORE_ALL: "the query box: every cell of a possible range holds a copy",
                STORE_MEAN: "the union of the fence boxes of the query cells",
            }.get(scheme, "the query widened by the step per dimension (Prop. 3.1)")
            lines.append(
                f"expanded region: {_region(plan.pop('expanded_region'))} ({plan.pop('expanded_cells')} cells; {how})"
            )
            lines.append(f"chunks to read: {plan.pop('chunks_to_read')}")
        else:
            lines.append("expanded region: none (the array is empty or the query misses the domain)")
    else:
        lines.append(
            f"probabilistic structure join: delta {plan.pop('delta')!r}, threshold {plan.pop('threshold')!r}"
        )
        lines.append(f"method: {plan.pop('method')} on engine {plan.pop('engine')}")
        outer_is = plan.pop("outer_is")
        for side in ("outer", "inner"):
            layout = plan.pop(side)
            which = outer_is if side == "outer" else ("left" if outer_is == "right" else "right")
            lines.append(
                f"{side}: {layout['array']} ({which}), version {layout['version']}, "
                f"{_layout_text(layout['scheme'], layout['step'], layout['sigmas'])}"
            )
        lines.append(f"outer cell region: {plan.pop('outer_cell_region')}")
        walks = plan.pop("inner_expansion")
        lines.append(
            "inner expansion of each outer-cell region (cells below, above): "
            + ", ".join(f"{d} {below}, {above}" for d, (below, above) in walks.items())
        )
        lines.append(f"outer blocks: {plan.pop('outer_blocks')}")
    for key, value in plan.items():
        lines.append(f"{key.replace('_', ' ')}: {value}")
    return "\n".join(lines) + "\n"


# -- writes -----------------------------------------------------------------------------------------
def insert(db: Database, s: ast.Insert) -> Any:
    """INSERT INTO U [(columns)] VALUES ...: without a column list, each row gives every input column
    but ``id`` in the schema's order (means and sigmas per dimension, correlations, value columns)."""
    array = db.uncertain_array(s.array)
    inputs = list(array.schema.input_columns())
    columns = None if s.columns is None else tuple(_spelled(inputs, c) for c in s.columns)
    names = list(columns) if columns is not None else [c for c in inputs if c != ID]
    try:
        return array.insert(tuple_rows(array.schema, columns, s.rows, s.positions))
    except ValidationError as error:
        raise _placed(error, names, s.positions) from None


def _spelled(names: list[str], name: str) -> str:
    """``name`` as the array spells the column (names are case-insensitive), or as written."""
    return name if name in names else next((n for n in names if n.lower() == name.lower()), name)


#: How the array's insert names a row of its batch: 0-based, ``in row 3``.
_BATCH_ROW = re.compile(r" in row (\d+)(?=[;,.)]| is|$)")


def _placed(
    error: ValidationError, names: list[str], positions: tuple[tuple[tuple[int, int], ...], ...] | None
) -> ValidationError:
    """The array's error about row k of the batch (0-based), as the statement's row k + 1 at the line
    and column of the value (the error keeps its type and fields)."""
    message = error.args[0] if error.args and isinstance(error.args[0], str) else None
    found = None if message is None else _BATCH_ROW.search(message)
    if found is None or positions is None or error.column not in names:
        return error
    row = int(found.group(1))
    if row >= len(positions):
        return error
    line, column = positions[row][names.index(error.column)]
    error.args = (
        message[: found.start()]
        + f" in row {row + 1} at line {line}, column {column}"
        + message[found.end() :],
    )
    return error


def tuple_rows(
    schema: UncertainSchema,
    columns: tuple[str, ...] | None,
    rows: tuple[tuple[ast.Value, ...], ...],
    positions: tuple[tuple[tuple[int, int], ...], ...] | None = None,
) -> pa.Table:
    """The rows of INSERT ... VALUES as an Arrow table with the types the array's columns take; the
    array's insert checks the rest (names, missing columns, ranges, sigmas, ids). A value of the
    wrong type is named with its line and column when ``positions`` says where each was written."""
    names = list(columns) if columns is not None else [c for c in schema.input_columns() if c != ID]
    for number, row in enumerate(rows, start=1):
        if len(row) != len(names):
            raise ValidationError(
                f"uncertain array {schema.name}: row {number} has {len(row)} value(s); each row needs "
                f"{len(names)} ({', '.join(names)})",
                array=schema.name,
            )
    types = _column_types(schema)
    arrays = {}
    for k, name in enumerate(names):
        values = [row[k] for row in rows]
        type_name = types.get(name)
        if type_name is None:  # an unknown column: the array's insert names it
            arrays[name] = pa.array([None] * len(values), pa.null())
            continue
        for number, value in enumerate(values, start=1):
            problem = None
            if type_name == "string":  # text only, quoted (the array's insert checks nulls)
                if value is not None and not isinstance(value, str):
                    problem = f"{value!r} is not a string (quote it: '...')"
            elif type_name == "datetime64":  # ISO text, as an array's INSERT reads it
                problem = None if value is None else time_problem(value)
            elif isinstance(value, str):
                problem = f"{value!r} is a string, not a{'n' if type_name.startswith('int') else ''} {type_name} value"
            elif value is not None:
                problem = python_value_problem(value, type_name)
            if problem:
                where = (
                    "" if positions is None else " at line {}, column {}".format(*positions[number - 1][k])
                )
                raise ValidationError(
                    f"uncertain array {schema.name}, column {name}: {problem} in row {number}{where}",
                    array=schema.name,
                    column=name,
                    value=value,
                )
        if type_name.startswith("float"):
            values = [None if v is None else float(v) for v in values]
        if type_name == "datetime64":  # exact nanoseconds since 1970, UTC
            values = [None if v is None else instant_nanoseconds(v) for v in values]
            arrays[name] = pa.array(values, pa.int64()).cast(arrow_type(type_name))
            continue
        arrays[name] = pa.array(values, arrow_type(type_name))
    return pa.table(arrays)


def _column_types(schema: UncertainSchema) -> dict[str, str]:
    """The attribute type of every input column (``id`` int64, positions and uncertain values float64)."""
    types = {name: "float64" for name in schema.input_columns()}
    types[ID] = "int64"
    for attribute in schema.attributes:
        if attribute.kind == EXACT:
            types[attribute.name] = attribute.type
    return types


def load(db: Database, s: ast.Load) -> Any:
    """LOAD U FROM 'path' [AS CSV | PARQUET]: a file or folder of tuples with the input columns (CSV
    values read as the columns' types); one version, checked as INSERT is."""
    array = db.uncertain_array(s.array)
    schema = array.schema
    path = s.path
    try:  # a local path or a URI (file://, and the others Arrow reads), as an array's LOAD takes
        fs, inner = filesystem(path)
        found = fs.get_file_info(inner).type != FileType.NotFound
    except (pa.ArrowException, OSError, ValueError):
        found = False
    if not found:
        raise NotFoundError(f"uncertain array {schema.name}: no file or folder at {path}")
    file_format = s.format or ("csv" if path.lower().rstrip("/").endswith((".csv", ".csv.gz")) else "parquet")
    # an empty folder, a file of another format, Parquet files disagreeing on their columns (the
    # dataset takes the first file's: another file's own columns were dropped)
    check_cell_files(path, file_format.lower(), f"uncertain array {schema.name}", spark=False)
    header: list[str] = []
    try:
        if file_format == "csv":
            # the header's names as the array spells its columns (without regard to case), so that
            # each column is read as its type
            header = pads.dataset(inner, filesystem=fs, format="csv").schema.names
            spelled = dict(zip(header, spelled_columns(header, schema.input_columns()), strict=True))
            types = {  # times as text, read below as INSERT reads them
                name: pa.string() if t == "datetime64" else arrow_type(t)
                for name, t in ((n, _column_types(schema).get(spelled[n])) for n in header)
                if t is not None
            }
            # only an empty field is missing: Arrow's default null texts also take "NaN", "nan", "NA"
            # and "null", so a NaN mean or sigma was refused as a missing value and a NaN of a float
            # attribute stored as a null (Spark's reader of an array's CSV keeps NaN a number)
            options = pacsv.ConvertOptions(column_types=types, null_values=[""], strings_can_be_null=True)
            dataset = pads.dataset(inner, filesystem=fs, format=pads.CsvFileFormat(convert_options=options))
            table = _with_quoted_empty_texts(dataset.to_table(), inner, fs, types)
        else:
            table = pads.dataset(inner, filesystem=fs, format="parquet").to_table()
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as error:
        reason = str(error).strip().splitlines()[0]
        raise _unconverted(schema, path, fs, header, reason) or ValidationError(
            f"uncertain array {schema.name}: cannot read {path} as {file_format.upper()}: {reason}",
            array=schema.name,
        ) from None
    return array.insert(_text_times(table, schema, path))  # it matches the columns by name


def _text_times(table: pa.Table, schema: UncertainSchema, path: str) -> pa.Table:
    """Times written as text (CSV fields, Parquet text) for a datetime64 attribute, read as INSERT
    reads a time literal (as an array's LOAD reads them): ISO text, UTC unless it names its zone,
    to the nanosecond; spaces around it cut, an empty text missing."""
    types = _column_types(schema)
    spelled = spelled_columns(table.column_names, schema.input_columns())
    for k, name in enumerate(spelled):
        column = table.column(k)
        if types.get(name) != "datetime64" or not pa.types.is_string(column.type):
            continue
        texts = [None if t is None or not t.strip(" ") else t.strip(" ") for t in column.to_pylist()]
        for row, text in enumerate(texts):
            problem = None if text is None else time_problem(text)
            if problem is not None:
                raise ValidationError(
                    f"uncertain array {schema.name}, column {name}: {problem} (row {row} of {path}); "
                    "nothing was written",
                    array=schema.name,
                    column=name,
                    value=text,
                )
        nanoseconds = [None if t is None else instant_nanoseconds(t) for t in texts]
        table = table.set_column(
            k, table.column_names[k], pa.array(nanoseconds, pa.int64()).cast(arrow_type("datetime64"))
        )
    return table


def _with_quoted_empty_texts(table: pa.Table, inner: str, fs: FileSystem, types: dict) -> pa.Table:
    """``table`` with the text columns read again as an array's LOAD reads them: an empty field is a
    null (missing), a quoted empty field (``""``) the empty text (Arrow takes both for a null, or
    neither, for every column at once)."""
    texts = [name for name, kind in types.items() if pa.types.is_string(kind)]
    if not texts:
        return table
    options = pacsv.ConvertOptions(
        column_types={name: pa.string() for name in table.column_names},
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )
    fields = pads.dataset(inner, filesystem=fs, format=pads.CsvFileFormat(convert_options=options))
    exact = fields.to_table(columns=texts)
    for name in texts:
        table = table.set_column(table.column_names.index(name), name, exact.column(name))
    return table


#: Arrow's words for a CSV field its column's type cannot read (1-based line, 0-based column).
_UNCONVERTED = re.compile(
    r"(?:input source '(?P<file>[^']*)'.*)?In CSV column #(?P<column>\d+): Row #(?P<line>\d+): "
    r"CSV conversion error to [\w\[\], :/=]+: invalid value '(?P<value>.*)'$"
)


def _unconverted(
    schema: UncertainSchema, path: str, fs: FileSystem, header: list[str], reason: str
) -> ValidationError | None:
    """A CSV field its column's type cannot read, as an error naming the column, the value and where
    it is (before: Arrow's 'In CSV column #2: Row #3: CSV conversion error to double'), or None."""
    found = _UNCONVERTED.search(reason)
    if found is None:
        return None
    if found.group("file"):  # one file of a folder: its own header (the files may order columns apart)
        try:
            header = pads.dataset(found.group("file"), filesystem=fs, format="csv").schema.names
        except (pa.ArrowInvalid, OSError):
            return None
    if int(found.group("column")) >= len(header):
        return None
    name = spelled_columns([header[int(found.group("column"))]], schema.input_columns())[0]
    type_name = _column_types(schema).get(name, "float64")
    value = found.group("value")
    return ValidationError(
        f"uncertain array {schema.name}, column {name}: {value!r} (line {found.group('line')} of "
        f"{found.group('file') or path}) is not a{'n' if type_name.startswith(('int', 'uint')) else ''} "
        f"{type_name} value; nothing was written",
        array=schema.name,
        column=name,
        value=value,
    )


# -- listings ---------------------------------------------------------------------------------------
def uncertain_frame(db: Database) -> pd.DataFrame:
    """One row per uncertain array: name, kind, schema, version, tuples."""
    rows = []
    for name in db.uncertain_arrays():
        array = db.uncertain_array(name)
        version = array.version
        rows.append(
            {
                "name": array.name,
                "kind": relations.UNCERTAIN_ARRAY,
                "schema": array.schema.to_text(),
                "version": version,
                "cells": array.count(),
            }
        )
    return pd.DataFrame(rows, columns=["name", "kind", "schema", "version", "cells"])


def with_uncertain_arrays(db: Database, frame: pd.DataFrame, listing: str) -> pd.DataFrame:
    """SHOW ARRAYS (``listing="arrays"``, with a kind column) or SHOW RELATIONS with the uncertain
    arrays added, sorted by name."""
    uncertain = uncertain_frame(db)
    if listing == "arrays":
        frame = frame.copy()
        frame.insert(1, "kind", relations.ARRAY)
        rows = uncertain
    else:
        rows = pd.DataFrame(
            {
                "name": uncertain.name,
                "kind": uncertain.kind,
                "version": uncertain.version,
                "description": uncertain.schema,
                "pending": [None] * len(uncertain),
            },
            columns=list(frame.columns),
        )
    if rows.empty:
        return frame
    if frame.empty:
        return rows.reset_index(drop=True)
    merged = pd.concat([frame, rows], ignore_index=True)
    return merged.sort_values("name", key=lambda names: names.str.lower()).reset_index(drop=True)


__all__ = [
    "explain",
    "explain_text",
    "insert",
    "is_uncertain_select",
    "load",
    "open_uncertain",
    "select",
    "tuple_rows",
    "uncertain_frame",
    "with_uncertain_arrays",
]
