"""Spark SQL over streams and stream views: each is registered as a temporary view of all its held
parts under its name, with PART_TIMESTAMP (the start of a row's part)."""

from __future__ import annotations

import sqlglot
from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp

from arrayviews.model.errors import ValidationError
from arrayviews.model.sql_dialect import parse_spark
from arrayviews.streams import relations as rel
from arrayviews.streams.world import StreamWorld, with_part_timestamp


def register_relations(spark: SparkSession, catalog) -> list[str]:
    """Register every stream and stream view as a temporary view of all its held parts."""
    world = StreamWorld(spark, catalog)
    for name, kind in world.kinds.items():
        if kind == rel.VIEW_KIND:
            frame = world.view(name).read_held(spark)
        else:
            table = world.table(name)
            frame = table.read_parts(spark, *(table.part_range() or (0, -1)))
            frame = with_part_timestamp(frame, table.partition_length)
        frame.createOrReplaceTempView(name)
    return sorted(world.kinds)


#: Spark SQL functions that call arbitrary Java methods.
UNSAFE_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})


def check_query(text: str, relations: set[str]) -> None:
    """Accept only one query (SELECT or WITH) that reads registered relations (streams and stream
    views, by plain name, or its own WITH names) and calls no Java reflection: no path-based reads
    (``text.`/etc/hostname```), no table functions (``read_files(...)``), no catalog or database
    qualifiers, no script transforms. Raises ValidationError saying what was refused."""
    try:
        statements = [s for s in parse_spark(text) if s is not None]
    except sqlglot.errors.ParseError as error:
        raise ValidationError(f"query not accepted: it could not be checked ({error})") from None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise ValidationError("query not accepted: only one SELECT query over streams and stream views runs")
    query = statements[0]
    own = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    for table in query.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            raise ValidationError(
                f"query not accepted: table function {table.this.sql(dialect='spark')} (only streams "
                "and stream views can be read)"
            )
        if table.args.get("db") is not None or table.args.get("catalog") is not None:
            raise ValidationError(
                f"query not accepted: {table.sql(dialect='spark')} reads a path or another catalog "
                "(only streams and stream views can be read)"
            )
        if table.name.lower() not in relations | own:
            known = ", ".join(sorted(relations)) or "none"
            raise ValidationError(
                f"query not accepted: {table.name} is not a stream or stream view (known: {known})"
            )
    for node in query.find_all(exp.Func, exp.QueryTransform):
        if isinstance(node, exp.QueryTransform):
            raise ValidationError("query not accepted: TRANSFORM ... USING runs a program")
        if node.name.lower() in UNSAFE_FUNCTIONS:
            raise ValidationError(f"query not accepted: {node.name}(...) calls Java methods")


def run_query(spark: SparkSession, catalog, text: str, allow_unsafe: bool = False) -> DataFrame:
    """A Spark SQL query over streams and stream views (checked by :func:`check_query` unless the
    database was opened with ``allow_unsafe_sql=True``)."""
    relations = register_relations(spark, catalog)
    if not allow_unsafe:
        check_query(text, set(relations))
    return spark.sql(text)
