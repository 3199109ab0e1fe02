"""What readers see of a view that keeps maintenance state in its own table (model/viewdf.py
``Presentation``): the rows whose marker column is set, with the shown columns, for Spark frames,
Arrow tables and schemas alike. Every reader of a view other than the view's own UPDATE goes
through here (user reads, SQL over streams, views reading it, in-process or on Spark)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from arrayviews.model.names import PART
from arrayviews.model.viewdf import Presentation


def _stored(fields: list[str], name: str) -> str:
    """The stored column named ``name`` (letter case ignored, as Spark does)."""
    for stored in fields:
        if stored.lower() == name.lower():
            return stored
    raise KeyError(f"the view's table has no column {name}")


def presented_frame(frame: DataFrame, presentation: Presentation | None) -> DataFrame:
    """The rows and columns readers see (``_part`` kept when the frame has it)."""
    if presentation is None:
        return frame
    names = frame.columns
    shown = [F.col(_stored(names, stored)).alias(name) for stored, name in presentation.columns]
    if PART in names:
        shown.append(F.col(PART))
    return frame.filter(F.col(_stored(names, presentation.when_set)).isNotNull()).select(*shown)


def presented_table(table: pa.Table, presentation: Presentation | None) -> pa.Table:
    """:func:`presented_frame` for rows read in this process."""
    if presentation is None:
        return table
    names = table.column_names
    kept = table.filter(pc.is_valid(table.column(_stored(names, presentation.when_set))))
    columns = [kept.column(_stored(names, stored)) for stored, _ in presentation.columns]
    shown = [name for _, name in presentation.columns]
    if PART in names:
        columns.append(kept.column(PART))
        shown.append(PART)
    return pa.Table.from_arrays(columns, names=shown)


def presented_schema(schema: StructType, presentation: Presentation | None) -> StructType:
    """The columns readers see, from the stored schema (without ``_part``)."""
    if presentation is None:
        return schema
    by_name = {f.name.lower(): f for f in schema.fields}
    return StructType(
        [StructField(name, by_name[stored.lower()].dataType, True) for stored, name in presentation.columns]
    )


__all__ = ["presented_frame", "presented_schema", "presented_table"]
