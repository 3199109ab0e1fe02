"""Cells a user gives as a Spark DataFrame, or as Parquet/CSV files Spark reads: checked against an
array schema (column names and types, value ranges, nulls) and cast to its exact types; and the
other way, the time labels Spark SQL shows on an array's cells (:func:`with_time_labels`).

This is the Spark side of ``insert(spark_df)`` and ``load(path)``: the DataFrame is the user's input,
so only here (below the operators) is it looked at through pyspark; what follows (chunking,
writing, conflict checks) is engine-neutral and lives in operators/writes.py.
"""

from __future__ import annotations

import decimal
from urllib.parse import unquote

from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from arrayviews.execution.cell_file_checks import check_cell_files
from arrayviews.execution.local_cells import field_place, text_times, unreadable_field
from arrayviews.model.cell_checks import check_columns, spelled_columns
from arrayviews.model.errors import NotFoundError, ValidationError
from arrayviews.model.schema import ArraySchema, CoordinateScale
from arrayviews.model.time_scale import TimeScale
from arrayviews.model.types import DATETIME64_MICROS, accepts, misfit_reason, value_limits
from arrayviews.storage.files import filesystem

_INTEGER_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_TIME_TYPES = (T.TimestampType, T.TimestampNTZType, T.DateType)


def conform_frame(frame: DataFrame, schema: ArraySchema) -> DataFrame:
    """Check a cell DataFrame's columns and types against ``schema`` and cast it to the exact types."""
    frame = frame.toDF(*spelled_columns(frame.columns, schema))
    names = frame.columns
    check_columns(names, schema)
    types = {field.name: field.dataType for field in frame.schema.fields}
    columns = []
    for dimension in schema.dimension_names:
        scale = schema.dimension(dimension).scale
        timed = isinstance(types[dimension], _TIME_TYPES)
        if timed and isinstance(scale, TimeScale):
            cells, labels_no_cell = time_cells(F.col(dimension), scale)
            row = frame.where(labels_no_cell).select(dimension).first()  # one job, times only
            if row is not None:
                raise ValidationError(
                    f"array {schema.name}, column {dimension}: {row[dimension]} labels no cell of the "
                    f"dimension ({scale.to_text()})",
                    array=schema.name,
                    column=dimension,
                    value=str(row[dimension]),
                )
            columns.append(cells.alias(dimension))
            continue
        if not isinstance(types[dimension], _INTEGER_TYPES):
            hint = " (or times, on a dimension with a time scale)" if timed else ""
            raise ValidationError(
                f"array {schema.name}, column {dimension}: coordinates must be integers{hint}, got "
                f"{types[dimension].simpleString()}",
                array=schema.name,
                column=dimension,
                value=types[dimension].simpleString(),
            )
        columns.append(F.col(dimension).cast("long").alias(dimension))
    for attribute in schema.attributes:
        spark_type = _spark_type(attribute.type)
        if attribute.name not in types:
            columns.append(F.lit(None).cast(spark_type).alias(attribute.name))
            continue
        source = types[attribute.name]
        try:
            source_type = to_arrow_type(source)
        except Exception:  # noqa: BLE001 - any type Arrow cannot map is simply not storable
            source_type = None
        if source_type is None or not accepts(attribute.type, source_type):
            raise ValidationError(
                f"array {schema.name}, column {attribute.name}: values of type {source.simpleString()} cannot be "
                f"stored in attribute {attribute.name} of type {attribute.type}",
                array=schema.name,
                column=attribute.name,
                value=source.simpleString(),
            )
        limits = value_limits(attribute.type, source_type)
        if limits is not None:
            _check_limits(frame, schema, attribute.name, attribute.type, limits)
        if attribute.type == "datetime64":
            _check_times(frame, schema, attribute.name)
        columns.append(F.col(attribute.name).cast(spark_type).alias(attribute.name))
    return frame.select(*columns)


def time_cells(column: Column, scale: TimeScale) -> tuple[Column, Column]:
    """(the cells, whether it labels no cell) of Spark times (timestamps, or dates at midnight UTC)
    on a dimension with time scale ``scale``: exact, in decimal nanoseconds; a time between two
    labels, or whose cell is past 2**62, labels none (its cell is null)."""
    nanoseconds = F.unix_micros(column.cast(T.TimestampType())).cast(T.DecimalType(38, 0)) * F.lit(
        decimal.Decimal(1000)
    )
    origin = scale.nanoseconds(0)
    step = decimal.Decimal(scale.nanoseconds(1) - origin)
    offset = nanoseconds - F.lit(decimal.Decimal(origin))
    remainder = offset % F.lit(step)
    whole = ((offset - remainder) / F.lit(step)).cast(T.DecimalType(38, 0))
    labels_no_cell = (remainder != 0) | (F.abs(whole) > F.lit(decimal.Decimal(2**62)))
    return F.when(~labels_no_cell, whole.cast(T.LongType())), labels_no_cell


def with_time_labels(frame: DataFrame, schema: ArraySchema) -> DataFrame:
    """``frame`` (one row per cell of an array of ``schema``) with each time dimension's cells
    replaced by their labels as Spark TIMESTAMPs, ``origin + cell * step`` in exact microseconds
    (a cell whose label passes BIGINT microseconds stops the query with Spark's overflow error).
    A scale finer than a microsecond has no exact TIMESTAMP: that dimension keeps its cells."""
    scales = {d.name: d.scale for d in schema.dimensions if isinstance(d.scale, TimeScale)}
    columns = []
    for name in frame.columns:
        scale = scales.get(name)
        origin = scale.nanoseconds(0) if scale is not None else 0
        step = scale.nanoseconds(1) - origin if scale is not None else 0
        if scale is None or origin % 1000 or step % 1000:
            columns.append(F.col(name))
            continue
        micros = F.lit(origin // 1000) + F.col(name) * F.lit(step // 1000)
        columns.append(F.timestamp_micros(micros).alias(name))
    return frame.select(*columns)


def with_labels(frame: DataFrame, schema: ArraySchema) -> DataFrame:
    """``frame`` (one row per cell of an array of ``schema``) with each scaled dimension's cells
    replaced by their coordinates, as ``to_pandas(labels=True)`` gives them: ``offset + cell *
    step`` as DOUBLE (the same float numpy computes), a time as a TIMESTAMP (UTC, exact
    microseconds). A time scale finer than a microsecond has no exact TIMESTAMP: refused by name."""
    for dimension in schema.dimensions:
        scale = dimension.scale
        if isinstance(scale, TimeScale) and (scale.nanoseconds(0) % 1000 or scale.nanoseconds(1) % 1000):
            raise ValidationError(
                f"array {schema.name}, dimension {dimension.name}: its times ({scale.to_text()}) are "
                "finer than Spark's microsecond TIMESTAMP; to_arrow(labels=True) or "
                "to_pandas(labels=True) give them exactly",
                array=schema.name,
                column=dimension.name,
            )
    numeric = {d.name: d.scale for d in schema.dimensions if isinstance(d.scale, CoordinateScale)}
    columns = [
        (F.lit(numeric[name].offset) + F.col(name).cast("double") * F.lit(numeric[name].step)).alias(name)
        if name in numeric
        else F.col(name)
        for name in frame.columns
    ]
    return with_time_labels(frame.select(*columns), schema)


def _check_limits(frame: DataFrame, schema: ArraySchema, name: str, type_name: str, limits) -> None:
    """One job over a column whose type is wider than the attribute's: every value must fit
    (model.types.value_limits); the first that does not is named."""
    low, high = limits
    column = F.col(name)
    if isinstance(low, int):  # as decimals: a uint64 bound is past Spark's long
        low, high = decimal.Decimal(low), decimal.Decimal(high)
    outside = (column < F.lit(low)) | (column > F.lit(high))
    if isinstance(low, float):  # floats: NaN and infinities are values of every float type
        outside = outside & ~F.isnan(column) & (F.abs(column) != F.lit(float("inf")))
    row = frame.where(outside).select(name).first()
    if row is not None:
        value = int(row[name]) if isinstance(row[name], decimal.Decimal) else row[name]
        raise ValidationError(
            f"array {schema.name}, column {name}: {misfit_reason(type_name, value)}",
            array=schema.name,
            column=name,
            value=value,
        )


def _check_times(frame: DataFrame, schema: ArraySchema, name: str) -> None:
    """One job: every time bound for a datetime64 attribute must lie in its nanoseconds' range."""
    low, high = DATETIME64_MICROS
    micros = F.unix_micros(F.col(name).cast(T.TimestampType()))
    row = frame.where((micros < F.lit(low)) | (micros > F.lit(high))).select(name).first()
    if row is not None:
        raise ValidationError(
            f"array {schema.name}, column {name}: {row[name]} is outside the datetime64 range "
            "1677-09-21 00:12:43.145225 .. 2262-04-11 23:47:16.854775",
            array=schema.name,
            column=name,
            value=str(row[name]),
        )


def _spark_type(type_name: str) -> T.DataType:
    """The Spark type an attribute's values take in a Spark DataFrame: Spark has no unsigned
    integers, so each is in the signed type holding all its values (uint64 in DECIMAL(20,0))."""
    return {
        "int8": T.ByteType(),
        "int16": T.ShortType(),
        "uint8": T.ShortType(),
        "uint16": T.IntegerType(),
        "uint32": T.LongType(),
        "uint64": T.DecimalType(20, 0),
        "int32": T.IntegerType(),
        "int64": T.LongType(),
        "float32": T.FloatType(),
        "float64": T.DoubleType(),
        "bool": T.BooleanType(),
        "string": T.StringType(),
        "datetime64": T.TimestampType(),
    }[type_name]


def check_frame(frame: DataFrame, schema: ArraySchema) -> int:
    """One job: count the cells and find coordinates out of range and nulls where none may be."""
    checks = [F.count(F.lit(1)).alias("cells")]
    for dimension in schema.dimensions:
        column = F.col(dimension.name)
        bad = column.isNull() | (column < dimension.low) | (column > dimension.high)
        checks.append(F.sum(bad.cast("long")).alias(f"bad_{dimension.name}"))
    for attribute in schema.attributes:
        if not attribute.nullable:
            checks.append(F.sum(F.col(attribute.name).isNull().cast("long")).alias(f"null_{attribute.name}"))
    result = frame.agg(*checks).first()
    for dimension in schema.dimensions:
        if result[f"bad_{dimension.name}"]:
            column = F.col(dimension.name)
            row = frame.where(column.isNull() | (column < dimension.low) | (column > dimension.high)).first()
            value = row[dimension.name]
            if value is None:
                raise ValidationError(
                    f"array {schema.name}, column {dimension.name}: missing coordinate",
                    array=schema.name,
                    column=dimension.name,
                )
            raise ValidationError(
                f"array {schema.name}, column {dimension.name}: coordinate {value} is outside the dimension range "
                f"{dimension.low}:{dimension.high} ({result[f'bad_{dimension.name}']} such cells)",
                array=schema.name,
                column=dimension.name,
                value=value,
            )
    for attribute in schema.attributes:
        if not attribute.nullable and result[f"null_{attribute.name}"]:
            raise ValidationError(
                f"array {schema.name}, column {attribute.name}: {result[f'null_{attribute.name}']} null value(s), but "
                f"{attribute.null_hint} (NaN is a valid float value; null is not)",
                array=schema.name,
                column=attribute.name,
            )
    return int(result["cells"])


#: Spark's CSV null marker while reading: a text no field of a text file holds.
_NULL_TEXT = "\u0000"


def csv_reader(spark: SparkSession) -> DataFrameReader:
    """Spark's reader of CSV files with a header line, read as RFC 4180 says: a quoted field may
    hold separators and line breaks and doubles its quotes; an empty field is a null and a quoted
    empty field (``""``) the empty string."""
    return (
        spark.read.option("header", True)
        .option("multiLine", True)
        .option("escape", '"')
        # Spark turns an empty field into its null text and then any field equal to that text into
        # a null, so with the default null text ("") a quoted empty field was a null as well
        .option("nullValue", _NULL_TEXT)
    )


def read_cell_files(
    spark: SparkSession, path: str, schema: ArraySchema, file_format: str | None = None
) -> DataFrame:
    """A cell DataFrame over Parquet or CSV files (CSV values checked and converted by name)."""
    fs, inner = filesystem(path)
    info = fs.get_file_info(inner)
    if info.type.name == "NotFound":
        raise NotFoundError(f"array {schema.name}: no file or folder at {path}")
    file_format = (file_format or _format_of(path)).lower()
    check_cell_files(path, file_format, f"array {schema.name}")
    if file_format == "parquet":
        frame = spark.read.parquet(path)
        frame = frame.toDF(*spelled_columns(frame.columns, schema))
        texts = [isinstance(f.dataType, T.StringType) for f in frame.schema.fields]
        names = text_times(frame.columns, texts, schema)
        return _converted(frame, path, schema, names, lambda: spark.read.parquet(path)) if names else frame
    if file_format != "csv":
        raise ValidationError(
            f"array {schema.name}: unknown file format {file_format!r} (use parquet or csv)"
        )

    def read_csv() -> DataFrame:
        return csv_reader(spark).option("inferSchema", False).csv(path)

    raw = read_csv()
    raw = raw.toDF(*spelled_columns(raw.columns, schema))
    check_columns(raw.columns, schema)
    return _converted(raw, path, schema, raw.columns, read_csv)


def _conversion(name: str, schema: ArraySchema) -> tuple[Column, Column]:
    """The text of column ``name`` as read (trimmed unless the column holds text) and that text
    converted to the column's type (NULL where it cannot be)."""
    target = T.LongType() if schema.has_dimension(name) else _spark_type(schema.attribute(name).type)
    # spaces around a number are no part of it; around a text they are the text's own
    text = F.col(f"`{name}`") if isinstance(target, T.StringType) else F.trim(F.col(f"`{name}`"))
    # a datetime64 attribute reads times as a time dimension does
    converted = stamped(text).try_cast(target) if target == T.TimestampType() else text.try_cast(target)
    scale = schema.dimension(name).scale if schema.has_dimension(name) else None
    if isinstance(scale, TimeScale):  # a cell number or a time labelling a cell
        times = time_cells(stamped(text).try_cast(T.TimestampType()), scale)[0]
        converted = F.coalesce(converted, times)
    return text, converted


def _unreadable(text: Column, converted: Column) -> Column:
    return text.isNotNull() & (text != "") & converted.isNull()


def _converted(raw: DataFrame, path: str, schema: ArraySchema, names: list[str], read) -> DataFrame:
    """The text columns ``names`` of ``raw`` converted to the columns' types by name (the others
    kept); the first bad value of the first column with any is refused, naming the file and the
    row (``read()`` reads the files again, as ``raw`` was read, to find them)."""
    converted, problems = {name: F.col(f"`{name}`") for name in raw.columns}, []
    for name in names:
        text, converted[name] = _conversion(name, schema)
        problems.append(F.sum(_unreadable(text, converted[name]).cast("long")).alias(name))
    counts = raw.agg(*problems).first()
    for name in names:
        if counts[name]:
            bad, file, row = _first_unreadable(read(), schema, name)
            raise unreadable_field(schema, name, bad, field_place(path, file, row), counts[name])
    return raw.select(*[converted[name].alias(name) for name in raw.columns])


def _first_unreadable(frame: DataFrame, schema: ArraySchema, name: str) -> tuple[object, str, int]:
    """The first field of column ``name`` that cannot be read, in Spark's order of the rows (what
    ``first()`` returns), with the name of its file and its data row there (from 1). A CSV file is
    never cut into pieces (its fields may hold line ends), so its rows are numbered by their
    position in the one task that reads it; a Parquet file's by Spark's row index."""
    parquet = "row_index" in frame.select("_metadata.*").columns
    located = frame.select(
        *[
            F.col(f"`{c}`").alias(s)
            for c, s in zip(frame.columns, spelled_columns(frame.columns, schema), strict=True)
        ],
        F.col("_metadata.file_path").alias("__file"),
        (F.col("_metadata.row_index") if parquet else F.lit(None).cast("long")).alias("__row"),
        F.monotonically_increasing_id().alias("__order"),
    )
    text, converted = _conversion(name, schema)
    first = (
        located.where(_unreadable(text, converted))
        .orderBy("__order")
        .select(name, "__file", "__row", "__order")
        .first()
    )
    if parquet:
        row = first["__row"]
    else:
        start = located.where(F.col("__file") == first["__file"]).agg(F.min("__order")).first()[0]
        row = first["__order"] - start
    return first[name], unquote(first["__file"].rsplit("/", 1)[-1]), row + 1


def stamped(text: Column) -> Column:
    """Times as Spark reads them: it reads a zone only after the seconds, so '2026-01-02T06:00Z'
    is read as '2026-01-02T06:00:00Z'."""
    return F.regexp_replace(text, r"^(\d{4}-\d\d-\d\d[T ]\d\d:\d\d)(Z|[+-]\d\d:\d\d)$", "$1:00$2")


def read_text_times(frame: DataFrame, times: list[str], path: str, stream: str) -> DataFrame:
    """``frame`` (rows of ``path`` for stream ``stream``) with its text columns ``times`` read as
    timestamps as Spark's cast reads them (:func:`stamped`: a zone after the minutes too); one job
    finds a text that is no time, or one finer than a microsecond (Spark's cast would cut it),
    named with its column and file."""
    read = {n: stamped(F.col(f"`{n}`")).try_cast(T.TimestampType()) for n in times}
    flags = [
        (F.col(f"`{n}`").isNotNull() & (F.trim(F.col(f"`{n}`")) != "") & read[n].isNull()).alias(f"bad_{k}")
        for k, n in enumerate(times)
    ]
    # digits of the seconds' fraction past the sixth that are not all zeros
    finer = [
        F.regexp_extract(F.col(f"`{n}`"), r":\d\d\.\d{6}(\d*[1-9])", 1).alias(f"finer_{k}")
        for k, n in enumerate(times)
    ]
    found = frame.select(*[F.col(f"`{n}`") for n in times], *flags, *finer)
    caught = [F.col(f"bad_{k}") | (F.col(f"finer_{k}") != "") for k in range(len(times))]
    row = found.where(F.greatest(*caught, F.lit(False))).first()
    if row is not None:
        k = next(k for k in range(len(times)) if row[f"bad_{k}"] or row[f"finer_{k}"])
        why = (
            "is not a timestamp value"
            if row[f"bad_{k}"]
            else "is finer than a microsecond (a stream's times keep microseconds, and it would be cut)"
        )
        raise ValidationError(
            f"stream {stream}, column {times[k]}: {row[k]!r} in {path} {why}; nothing was appended",
            array=stream,
            column=times[k],
            value=row[k],
        )
    return frame.select(
        *[read[f.name].alias(f.name) if f.name in read else F.col(f"`{f.name}`") for f in frame.schema.fields]
    )


def _format_of(path: str) -> str:
    lowered = path.lower().rstrip("/")
    if lowered.endswith(".csv") or lowered.endswith(".csv.gz"):
        return "csv"
    return "parquet"
