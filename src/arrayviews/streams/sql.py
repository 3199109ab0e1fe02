"""Spark SQL over streams and stream views: each is registered as a temporary view of all its held
parts under its name, with PART_TIMESTAMP (the start of a row's part)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from arrayviews.streams import relations as rel
from arrayviews.streams.world import PART, StreamWorld


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
