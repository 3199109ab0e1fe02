"""Resolving a relation name in statements, whatever its kind (array, array view, uncertain array,
stream, stream view), and SHOW ARRAYS / VIEWS / STREAMS / RELATIONS: filters of the one catalog
listing (``Database.relations``), each with the details of its kind."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from arrayviews.model.errors import NotFoundError, ValidationError
from arrayviews.storage.kinds import ARRAY, ARRAY_VIEW, STREAM, STREAM_VIEW, UNCERTAIN_ARRAY

if TYPE_CHECKING:
    from arrayviews.array import Array
    from arrayviews.database import Database
    from arrayviews.view import View


def kind_of(db: Database, name: str) -> str | None:
    """The kind of the relation called ``name`` (case-insensitive), or None when there is none."""
    return db.kind_of(name)


def a_kind(kind: str) -> str:
    """``kind`` with its article: ``an array``, ``a stream``."""
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def all_names(db: Database) -> list[str]:
    return list(db.relations().name)


def unknown(db: Database, name: str) -> NotFoundError:
    known = ", ".join(all_names(db)) or "none"
    return NotFoundError(f"no relation named {name} (relations: {known})")


def open_array(db: Database, name: str, what: str = "this statement reads arrays and array views") -> Array:
    """The array or view called ``name`` (a view through ``db.view``: public attributes only); a
    stream or stream view is refused saying ``what`` the statement reads and how to query it."""
    kind = db.kind_of(name)  # names are compared without regard to case
    if kind in (STREAM, STREAM_VIEW):
        raise ValidationError(
            f"{name} is {a_kind(kind)}, not an array: {what} (Spark SQL reads {a_kind(kind)}: SELECT ... "
            f"FROM {name} WHERE ...)",
            array=name,
        )
    if kind == ARRAY_VIEW:
        return db.view(name)
    return db.array(name)


def open_view(db: Database, name: str) -> View:
    """The array view called ``name``; a clear error when there is none or ``name`` is another kind
    of relation (a stream view is maintained as its sources grow, not refreshed)."""
    kind = db.kind_of(name)  # names are compared without regard to case
    if kind != ARRAY_VIEW:
        if kind == STREAM_VIEW:
            raise ValidationError(
                f"{name} is a stream view: it is maintained as its sources grow (MAINTAIN); "
                "REFRESH, VERIFY and refresh limits are for array views",
                array=name,
            )
        if kind is not None:
            raise ValidationError(f"{name} is {a_kind(kind)}, not a view", array=name)
        raise NotFoundError(f"no view named {name} (views: {', '.join(db.views()) or 'none'})")
    return db.view(name)


# -- listings: filters of the one catalog listing ------------------------------------------------
def _of_kind(listing: pd.DataFrame, *wanted: str) -> pd.DataFrame:
    return listing[listing.kind.isin(wanted)].reset_index(drop=True)


def arrays_frame(db: Database, listing: pd.DataFrame | None = None) -> pd.DataFrame:
    """SHOW ARRAYS: name, schema, version, cells (views are listed by SHOW VIEWS)."""
    listing = db.relations() if listing is None else listing
    rows = []
    for entry in _of_kind(listing, ARRAY).itertuples():
        array = db.array(entry.name)
        rows.append(
            {
                "name": array.name,
                "schema": array.schema.to_text(),
                "version": array.version,
                "cells": array.count(),
            }
        )
    return pd.DataFrame(rows, columns=["name", "schema", "version", "cells"])


def views_frame(db: Database, definition_text, listing: pd.DataFrame | None = None) -> pd.DataFrame:
    """SHOW VIEWS: array and stream views with their kind, definition, version and whether base data
    is pending (not yet reflected)."""
    listing = db.relations() if listing is None else listing
    rows = []
    for entry in _of_kind(listing, ARRAY_VIEW, STREAM_VIEW).itertuples():
        if entry.kind == ARRAY_VIEW:
            definition = definition_text(db.view(entry.name).definition)
        else:
            definition = db.stream_view(entry.name).definition
        rows.append(
            {
                "name": entry.name,
                "kind": entry.kind,
                "definition": definition,
                "version": entry.version,
                "pending": entry.pending,
            }
        )
    return pd.DataFrame(rows, columns=["name", "kind", "definition", "version", "pending"])


def streams_frame(db: Database, listing: pd.DataFrame | None = None) -> pd.DataFrame:
    """SHOW STREAMS: name, columns, partition length (seconds), time column, version, parts held."""
    listing = db.relations() if listing is None else listing
    rows = []
    for entry in _of_kind(listing, STREAM).itertuples():
        stream = db.stream(entry.name)
        held = stream.part_range()
        rows.append(
            {
                "name": stream.name,
                "columns": _columns_text(stream.schema),
                "partition_length": stream.partition_length,
                "time_column": stream.time_column,
                "version": stream.version,
                "parts": 0 if held is None else held[1] - held[0] + 1,
            }
        )
    columns = ["name", "columns", "partition_length", "time_column", "version", "parts"]
    return pd.DataFrame(rows, columns=columns)


def _columns_text(schema) -> str:
    return ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in schema.fields)


def relations_frame(db: Database, definition_text) -> pd.DataFrame:
    """SHOW RELATIONS: the catalog listing (name, kind, version, pending for views, None otherwise)
    with a description of each relation (schema, definition or columns)."""
    listing = db.relations()
    described = {}
    for row in arrays_frame(db, listing).itertuples():
        described[(row.name, ARRAY)] = row.schema
    for row in views_frame(db, definition_text, listing).itertuples():
        described[(row.name, row.kind)] = row.definition
    for row in streams_frame(db, listing).itertuples():
        described[(row.name, STREAM)] = row.columns
    for entry in _of_kind(listing, UNCERTAIN_ARRAY).itertuples():
        described[(entry.name, UNCERTAIN_ARRAY)] = db.uncertain_array(entry.name).schema.to_text()
    description = [described.get((n, k)) for n, k in zip(listing.name, listing.kind, strict=True)]
    frame = listing.assign(description=description)[["name", "kind", "version", "description", "pending"]]
    return frame.sort_values("name", key=lambda names: names.str.lower()).reset_index(drop=True)


__all__ = [
    "ARRAY",
    "ARRAY_VIEW",
    "STREAM",
    "STREAM_VIEW",
    "UNCERTAIN_ARRAY",
    "all_names",
    "arrays_frame",
    "kind_of",
    "open_array",
    "open_view",
    "relations_frame",
    "streams_frame",
    "unknown",
    "views_frame",
]
