"""Resolving a relation name in statements, whatever its kind (array, array view, stream, stream
view), and the listings of SHOW ARRAYS / VIEWS / STREAMS / RELATIONS."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from arrayviews.model.errors import NotFoundError, ValidationError

if TYPE_CHECKING:
    from arrayviews.array import Array
    from arrayviews.database import Database
    from arrayviews.views.view import View

ARRAY, ARRAY_VIEW, STREAM, STREAM_VIEW = "array", "array view", "stream", "stream view"
UNCERTAIN_ARRAY = "uncertain array"


def kind_of(db: Database, name: str) -> str | None:
    """The kind of the relation called ``name`` (case-insensitive), or None when there is none."""
    key = name.lower()
    for kind, names in (
        (ARRAY_VIEW, db.views()),
        (ARRAY, db.arrays()),
        (STREAM, db.streams()),
        (STREAM_VIEW, db.stream_views(helpers=True)),
        (UNCERTAIN_ARRAY, db.uncertain_arrays()),
    ):
        if key in (n.lower() for n in names):
            return kind
    return None


def all_names(db: Database) -> list[str]:
    return sorted([*db.arrays(), *db.views(), *db.streams(), *db.stream_views()], key=str.lower)


def unknown(db: Database, name: str) -> NotFoundError:
    known = ", ".join(all_names(db)) or "none"
    return NotFoundError(f"no relation named {name} (relations: {known})")


def open_array(db: Database, name: str) -> Array:
    """The array or view called ``name`` (a view through ``db.view``: public attributes only)."""
    if name in db.views():
        return db.view(name)
    return db.array(name)


def open_view(db: Database, name: str) -> View:
    """The array view called ``name``; a clear error when there is none or ``name`` is an array."""
    views = db.views()
    if name not in views:
        if name in db.arrays():
            raise ValidationError(f"{name} is an array, not a view", array=name)
        raise NotFoundError(f"no view named {name} (views: {', '.join(views) or 'none'})")
    return db.view(name)


# -- listings -------------------------------------------------------------------------------------
def arrays_frame(db: Database) -> pd.DataFrame:
    """SHOW ARRAYS: name, schema, version, cells (views are listed by SHOW VIEWS)."""
    frame = db.describe()
    views = db.views()
    return frame[~frame.name.isin(views)].reset_index(drop=True) if views else frame


def views_frame(db: Database, definition_text) -> pd.DataFrame:
    """SHOW VIEWS: array and stream views with their kind, definition, version and whether base data
    is pending (not yet reflected)."""
    rows = []
    for name in db.views():
        view = db.view(name)
        status = view.status()
        rows.append(
            {
                "name": name,
                "kind": ARRAY_VIEW,
                "definition": definition_text(view.definition),
                "version": status["version"],
                "pending": status["pending"],
            }
        )
    for name in db.stream_views():
        view = db.stream_view(name)
        rows.append(
            {
                "name": view.name,
                "kind": STREAM_VIEW,
                "definition": view.definition,
                "version": view.status()["version"],
                "pending": view.pending(),
            }
        )
    return pd.DataFrame(rows, columns=["name", "kind", "definition", "version", "pending"])


def streams_frame(db: Database) -> pd.DataFrame:
    """SHOW STREAMS: name, columns, partition length (seconds), time column, version, parts held."""
    rows = []
    for name in db.streams():
        stream = db.stream(name)
        held = stream.part_range()
        rows.append(
            {
                "name": stream.name,
                "columns": ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in stream.schema.fields),
                "partition_length": stream.partition_length,
                "time_column": stream.time_column,
                "version": stream.version,
                "parts": 0 if held is None else held[1] - held[0] + 1,
            }
        )
    columns = ["name", "columns", "partition_length", "time_column", "version", "parts"]
    return pd.DataFrame(rows, columns=columns)


def relations_frame(db: Database, definition_text) -> pd.DataFrame:
    """SHOW RELATIONS: every relation with its kind, version, description and pending state (None
    for relations that are not views)."""
    rows = []
    for row in arrays_frame(db).itertuples():
        rows.append((row.name, ARRAY, row.version, row.schema, None))
    for row in views_frame(db, definition_text).itertuples():
        rows.append((row.name, row.kind, row.version, row.definition, bool(row.pending)))
    for row in streams_frame(db).itertuples():
        rows.append((row.name, STREAM, row.version, row.columns, None))
    frame = pd.DataFrame(rows, columns=["name", "kind", "version", "description", "pending"])
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
