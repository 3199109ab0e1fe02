"""Running the statements of streams and stream views (CREATE STREAM, CREATE VIEW as a ViewDF, a
pattern or a window query, ALTER VIEW, DROP STREAM / VIEW), INSERT rows into a stream, and Spark SQL
queries over registered relations of every kind."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.errors import AnalysisException

from arrayviews.execution.spark_cells import with_time_labels
from arrayviews.language import relations
from arrayviews.language import syntax as ast
from arrayviews.language.registry import explainer, statement_runner
from arrayviews.model.errors import NotFoundError, ValidationError
from arrayviews.model.types import python_value_problem
from arrayviews.streams import window_plans, windows
from arrayviews.streams.sql import check_query, register_relations
from arrayviews.streams.translate import explain, translate

if TYPE_CHECKING:
    from arrayviews.database import Database
    from arrayviews.stream import Stream


@statement_runner(ast.CreateStream)
def _create_stream(db: Database, s: ast.CreateStream) -> Stream:
    return db.create_stream(s.name, s.ddl, s.partition_length, s.time_column, s.max_gap_parts)


@statement_runner(ast.DropStream)
def _drop_stream(db: Database, s: ast.DropStream) -> None:
    kind = relations.kind_of(db, s.name)
    if kind is None:
        raise relations.unknown(db, s.name)
    if kind != relations.STREAM:
        drop = {
            relations.ARRAY: "DROP ARRAY",
            relations.ARRAY_VIEW: "DROP VIEW",
            relations.STREAM_VIEW: "DROP VIEW",
            relations.UNCERTAIN_ARRAY: "DROP ARRAY",
        }
        use = drop.get(kind, f"DROP {kind.upper()}")
        raise ValidationError(
            f"{s.name} is {relations.a_kind(kind)}, not a stream; use {use} {s.name}", array=s.name
        )
    db.drop_stream(s.name)


@statement_runner(ast.DropView)
def _drop_view(db: Database, s: ast.DropView) -> None:
    kind = relations.kind_of(db, s.name)
    if kind == relations.ARRAY_VIEW:
        db.drop_view(s.name)
    elif kind == relations.STREAM_VIEW:
        db.drop_stream_view(s.name)
    elif kind in (relations.ARRAY, relations.STREAM, relations.UNCERTAIN_ARRAY):
        raise ValidationError(f"{s.name} is {relations.a_kind(kind)}, not a view", array=s.name)
    else:
        known = ", ".join([*db.views(), *db.stream_views()]) or "none"
        raise NotFoundError(f"no view named {s.name} (views: {known})")


def _source(db: Database, statement: ast.CreatePatternView | ast.CreateWindowView) -> Stream:
    """The stream a pattern or window query reads; another kind of relation is named as such."""
    name = statement.query.stream
    kind = relations.kind_of(db, name)
    if kind is not None and kind != relations.STREAM:
        raise ValidationError(
            f"view {statement.name}: {name} is {relations.a_kind(kind)}; a PATTERN or WINDOW query "
            f"reads a stream (a view written with INITIALIZE and UPDATE may read {name})",
            array=statement.name,
        )
    return db.stream(name)


def _stream_length(db: Database, statement: ast.CreatePatternView | ast.CreateWindowView) -> int:
    return _source(db, statement).partition_length


def _stream_types(db: Database, statement: ast.CreatePatternView | ast.CreateWindowView) -> dict[str, str]:
    """The stream's columns and their Spark SQL type names (what sums are widened or kept exact by)."""
    schema = _source(db, statement).schema
    return {field.name: field.dataType.simpleString() for field in schema.fields}


@statement_runner(ast.CreateViewDF)
def _create_viewdf(db: Database, s: ast.CreateViewDF) -> Any:
    return db.create_stream_view(s.definition, s.lateness)


def _window_plan(
    db: Database, statement: ast.CreatePatternView | ast.CreateWindowView
) -> tuple[window_plans.PlanChoice | str, str | None]:
    """A window view's plan, chosen by cost from the stream's parts (a pattern view has one plan),
    and the plan as the view keeps it."""
    if not isinstance(statement, ast.CreateWindowView):
        return windows.INCREMENTAL, None
    stream = _source(db, statement)
    length, types = stream.partition_length, _stream_types(db, statement)
    translation = windows.WindowTranslation(statement, length, types)
    sizes = window_plans.part_sizes(stream.table, statement.query.group_by)
    choice = window_plans.choose_plan(translation, sizes, db.executors.costs.stream_step, statement.plan)
    return choice, choice.property_text()


@statement_runner(ast.CreatePatternView)
@statement_runner(ast.CreateWindowView)
def _create_translated_view(db: Database, s: ast.CreatePatternView | ast.CreateWindowView) -> Any:
    plan, kept = _window_plan(db, s)
    definitions = translate(s, _stream_length(db, s), types=_stream_types(db, s), plan=plan)
    return db.create_stream_view(definitions, s.lateness, window_plan=kept)


@explainer(ast.CreateViewDF)
def _explain_viewdf(db: Database, s: ast.CreateViewDF) -> str:
    return explain(s, s.definition.partition_length)


@explainer(ast.CreatePatternView)
@explainer(ast.CreateWindowView)
def _explain_translated(db: Database, s: ast.CreatePatternView | ast.CreateWindowView) -> str:
    return explain(s, _stream_length(db, s), types=_stream_types(db, s), plan=_window_plan(db, s)[0])


def _stream_view(db: Database, name: str, setting: str):
    """The stream view ``name`` an ALTER VIEW sets ``setting`` of (an error for any other kind)."""
    kind = relations.kind_of(db, name)
    if kind != relations.STREAM_VIEW:
        if kind is None:
            raise relations.unknown(db, name)
        raise ValidationError(
            f"{name} is {relations.a_kind(kind)}: {setting} belongs to stream views", array=name
        )
    return db.stream_view(name)


@statement_runner(ast.AlterViewLateness)
def _alter_view(db: Database, s: ast.AlterViewLateness) -> None:
    _stream_view(db, s.name, "the lateness allowance").set_lateness(s.lateness)


@statement_runner(ast.AlterViewKeepVersions)
def _alter_view_versions(db: Database, s: ast.AlterViewKeepVersions) -> None:
    _stream_view(db, s.name, "the number of versions kept").set_keep_versions(s.versions)


# -- rows and queries ---------------------------------------------------------------------------
#: The attribute type of each Spark column type whose values INSERT checks one by one.
_NUMBER_TYPES = {
    "byte": "int8",
    "short": "int16",
    "integer": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "boolean": "bool",
}
_TIME_TYPES = {"timestamp": pa.timestamp("us"), "date": pa.date32()}


def _times(values: list[str], type_name: str) -> pa.Array:
    """Strings read as the values of a timestamp (UTC) or date column. A timestamp may end in ``Z``
    or an offset (``+02:00``, ``-0130``): it is that instant, stored as UTC; without one it is UTC."""
    target = _TIME_TYPES[type_name]
    text = pa.array(values, pa.string())
    try:
        return text.cast(target)
    except pa.ArrowInvalid:
        if type_name != "timestamp":
            raise
    # some carry a zone: each is read as written (zone-less as UTC, the rest as their instant)
    return pa.array([_instant(value) for value in values], target)


def _instant(value: str | None):
    if value is None:
        return None
    try:
        return pa.scalar(value).cast(_TIME_TYPES["timestamp"]).as_py()
    except pa.ArrowInvalid:
        aware = pa.scalar(value).cast(pa.timestamp("us", "UTC"))
        return aware.cast(_TIME_TYPES["timestamp"]).as_py()


def _value_problem(value: ast.Value, type_name: str) -> str | None:
    """Why the INSERT literal ``value`` does not fit a column of Spark type ``type_name`` (None if it
    does, or if the stream's append is left to judge it)."""
    if value is None:
        return None  # nullability is the append's to check
    if type_name == "string":
        return None if isinstance(value, str) else f"{value!r} is not a string (quote it: '...')"
    if type_name in _TIME_TYPES:
        if not isinstance(value, str):
            return f"{value!r} is not a {type_name} (write it as a string, e.g. '2015-01-01 00:05:00')"
        try:
            _times([value], type_name)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            example = (
                "'2015-01-01'"
                if type_name == "date"
                else "'2015-01-01 00:05:00' (UTC) or '2015-01-01T00:05:00+02:00'"
            )
            return f"{value!r} is not a {type_name} (write it as e.g. {example})"
        return None
    target = _NUMBER_TYPES.get(type_name)
    if target is None:
        return None
    if isinstance(value, str):
        return f"{value!r} is a string, not a{'n' if target.startswith('int') else ''} {target} value"
    return python_value_problem(value, target)


def stream_rows(
    stream: Stream,
    rows: tuple[tuple[ast.Value, ...], ...],
    positions: tuple[tuple[tuple[int, int], ...], ...] | None = None,
) -> pa.Table:
    """The rows of INSERT ... VALUES for ``stream``, one value per column in the stream's order.
    Strings for timestamp and date columns are read as times (``'2015-01-01 00:05:00'``, UTC); each
    value is checked against its column's type (a refused one is named with its line and column when
    ``positions`` says where each was written), the stream's append checks the rest."""
    names = [field.name for field in stream.schema.fields]
    for number, row in enumerate(rows, start=1):
        if len(row) != len(names):
            raise ValidationError(
                f"stream {stream.name}: row {number} has {len(row)} value(s); each row needs {len(names)} "
                f"({', '.join(names)})",
                array=stream.name,
            )
    columns = {}
    for k, field in enumerate(stream.schema.fields):
        values = [row[k] for row in rows]
        type_name = field.dataType.typeName()
        for number, value in enumerate(values, start=1):
            problem = _value_problem(value, type_name)
            if problem:
                where = (
                    "" if positions is None else " at line {}, column {}".format(*positions[number - 1][k])
                )
                raise ValidationError(
                    f"stream {stream.name}, column {field.name}: {problem} in row {number}{where}",
                    array=stream.name,
                    column=field.name,
                    value=value,
                )
        time_type = _TIME_TYPES.get(type_name)
        try:
            column = pa.array(values)
            if time_type is not None and pa.types.is_string(column.type):
                column = _times(values, type_name)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as error:
            raise ValidationError(
                f"stream {stream.name}, column {field.name}: the values {values!r} are not "
                f"{field.dataType.simpleString()} values ({error})",
                array=stream.name,
                column=field.name,
            ) from None
        columns[field.name] = column
    return pa.table(columns)


def spark_query(db: Database, text: str, names: tuple[str, ...]) -> Any:
    """Run a Spark SQL query over relations of any kind: each relation it names is registered as a
    temporary view under its name (arrays and array views as one row per cell; streams and stream
    views with PART_TIMESTAMP). A name that is no relation is an error. Unless the database was
    opened with ``allow_unsafe_sql=True``, the query may read only those relations and may not call
    Java reflection, read paths or run programs (streams/sql.py: ``check_query``)."""
    if not getattr(db, "allow_unsafe_sql", False):
        check_query(text, {name.lower() for name in names})
    arrays = []
    for name in names:
        kind = relations.kind_of(db, name)
        if kind is None:
            raise relations.unknown(db, name)
        if kind in (relations.ARRAY, relations.ARRAY_VIEW):
            arrays.append(name)
        if kind == relations.UNCERTAIN_ARRAY:
            raise ValidationError(
                f"{name} is an uncertain array, which Spark SQL queries do not read; query it with "
                f"SELECT * FROM {name}, subarray({name}, lo..., hi..., THRESHOLD p) or structure_join(...)",
                array=name,
            )
    if any(relations.kind_of(db, name) in (relations.STREAM, relations.STREAM_VIEW) for name in names):
        register_relations(db.spark, db.warehouse.catalog)
    for name in arrays:
        array = relations.open_array(db, name)
        with_time_labels(array.to_spark(), array.schema).createOrReplaceTempView(name)
    try:
        return db.spark.sql(text)
    except AnalysisException as error:
        reason = str(error).strip().splitlines()[0]
        raise ValidationError(f"Spark SQL could not run the query: {reason}") from None


__all__ = ["spark_query", "stream_rows"]
