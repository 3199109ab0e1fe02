"""Running one ViewDF query for one part: every part reference becomes a temporary view of the
parts it names, and the rendered query runs on Spark SQL."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession

from arrayviews.model.viewdf import PartQuery
from arrayviews.streams import exact_sums

# (relation, first part, last part) -> the rows of those parts (user columns only)
PartResolver = Callable[[str, int, int], DataFrame]


def run_part_query(
    spark: SparkSession,
    query: PartQuery,
    part: int,
    resolve: PartResolver,
    registered: list[str] | None = None,
) -> DataFrame:
    """The result of ``query`` building part ``part``; the temporary views it registers are named
    uniquely (and appended to ``registered``), so the lazy result stays valid after later queries
    register theirs."""
    exact_sums.register(spark)  # translated window views sum floats exactly with these
    tag = uuid.uuid4().hex[:12]
    names: dict[int, str] = {}
    for number, reference in enumerate(query.references):
        frame = resolve(reference.relation, reference.low.at(part), reference.high.at(part))
        name = f"viewdf_{tag}_{number}"
        frame.createOrReplaceTempView(name)
        names[number] = name
        if registered is not None:
            registered.append(name)
    return spark.sql(query.render(names))


def drop_temporary_views(spark: SparkSession, names: list[str]) -> None:
    """Forget the temporary views registered by part queries (after their results were written)."""
    for name in names:
        spark.catalog.dropTempView(name)
    names.clear()
