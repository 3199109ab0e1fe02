"""Stream statements through ``db.sql``: ViewDF and translated view definitions, EXPLAIN, and
Spark SQL queries over streams and stream views (each visible under its name, with PART_TIMESTAMP)."""

from __future__ import annotations

import re

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from arrayviews.streams import relations as rel
from arrayviews.streams.world import PART, StreamWorld

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_QUERY_START = re.compile(r"\s*(select|with)\b", re.IGNORECASE)


def reads_streams(spark: SparkSession, catalog, text: str) -> bool:
    """Whether ``text`` is a SELECT (or WITH) query naming a stream or a stream view."""
    if not _QUERY_START.match(text):
        return False
    names = set(StreamWorld(spark, catalog).kinds)
    return any(word.lower() in names for word in _WORD.findall(text))


_DROP_VIEW = re.compile(r"\s*drop\s+view\s+([A-Za-z_][A-Za-z0-9_]*)\s*;?\s*$", re.IGNORECASE)


def dropped_stream_view(spark: SparkSession, catalog, text: str) -> str | None:
    """The name in ``DROP VIEW name`` when it names a stream view (array views are the array
    language's)."""
    match = _DROP_VIEW.match(text)
    if match is None:
        return None
    name = match.group(1).lower()
    return name if StreamWorld(spark, catalog).kinds.get(name) == rel.VIEW_KIND else None


def register_relations(spark: SparkSession, catalog) -> list[str]:
    """Register every stream and stream view as a temporary view of all its held parts."""
    from arrayviews.streams.stream_views import PART_TIMESTAMP, StreamView

    world = StreamWorld(spark, catalog)
    for name, kind in world.kinds.items():
        if kind == rel.VIEW_KIND:
            frame = StreamView(spark, catalog, name).read()
        else:
            table = world.table(name)
            frame = table.read_parts(spark, *(table.part_range() or (0, -1)))
            stamp = F.timestamp_seconds(F.col(PART) * F.lit(table.partition_length))
            frame = frame.withColumn(PART_TIMESTAMP, stamp).drop(PART)
        frame.createOrReplaceTempView(name)
    return sorted(world.kinds)


def run_query(spark: SparkSession, catalog, text: str) -> DataFrame:
    """A Spark SQL query over streams and stream views."""
    register_relations(spark, catalog)
    return spark.sql(text)


def execute(db, text: str, lateness_parts: int | None = None):
    """Run one stream statement (see streams.parser): returns the created StreamView, the EXPLAIN
    text, or a Spark DataFrame for queries."""
    from arrayviews.streams import statements as st
    from arrayviews.streams.parser import parse_stream_statement
    from arrayviews.streams.translate import explain, translate

    statement = parse_stream_statement(text)
    if isinstance(statement, st.Explain):
        inner = statement.statement
        if isinstance(inner, st.CreateViewDF):
            return inner.definition.text
        stream = db.stream(inner.query.stream)
        return explain(inner, stream.partition_length, types=_types(stream))
    if isinstance(statement, st.CreateViewDF):
        return db.create_stream_view(statement.definition, lateness_parts)
    stream = db.stream(statement.query.stream)
    return db.create_stream_view(
        translate(statement, stream.partition_length, types=_types(stream)), lateness_parts
    )


def _types(stream) -> dict[str, str]:
    """The stream's attribute types as Spark SQL names (what the translation widens sums from)."""
    return {field.name: field.dataType.simpleString() for field in stream.schema.fields}
