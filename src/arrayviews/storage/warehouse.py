"""The warehouse: a folder (or file system URL) of array tables registered in one SQL catalog."""

from __future__ import annotations

import logging
from collections.abc import Callable

from pyiceberg.exceptions import NoSuchTableError

from arrayviews.model.errors import NotFoundError
from arrayviews.model.schema import ArraySchema
from arrayviews.storage import layout
from arrayviews.storage.array_table import (
    KIND_PROPERTY,
    SCHEMA_PROPERTY,
    ArrayTable,
    CommitInfo,
    version_summary,
)
from arrayviews.storage.catalog import ensure_namespace, open_catalog
from arrayviews.storage.creation import create_table, delete_folder
from arrayviews.storage.files import to_uri

NAMESPACE = "arrays"
logger = logging.getLogger(__name__)

#: fill(data folder) -> (data files written there, what the first version holds)
ArrayFill = Callable[[str], tuple[list[str], CommitInfo]]


class Warehouse:
    """Creates, opens, lists and drops array tables."""

    def __init__(self, location: str, catalog_uri: str | None = None) -> None:
        self.location = to_uri(location)
        self.catalog = open_catalog(location, catalog_uri)
        ensure_namespace(self.catalog, NAMESPACE)

    def _identifier(self, name: str) -> tuple[str, str]:
        return (NAMESPACE, name.lower())

    def create(
        self,
        schema: ArraySchema,
        kind: str = "array",
        properties: dict[str, str] | None = None,
        fill: ArrayFill | None = None,
    ) -> ArrayTable:
        """Create an array table; with ``fill``, its first version too, in the same commit (a crash
        leaves the whole array or none)."""
        arrow_schema = layout.fragment_schema(schema)
        props = {SCHEMA_PROPERTY: schema.to_json(), KIND_PROPERTY: kind, **(properties or {})}

        def first_version(data_directory: str) -> tuple[list[str], dict[str, str]]:
            added, info = fill(data_directory)
            return added, version_summary(1, info.cells_added, info)

        table = create_table(
            self.catalog,
            NAMESPACE,
            schema.name,
            arrow_schema,
            props,
            f"an array named {schema.name}",
            fill=None if fill is None else first_version,
        )
        return ArrayTable(table, schema)

    def open(self, name: str) -> ArrayTable:
        try:
            table = self.catalog.load_table(self._identifier(name))
        except NoSuchTableError:
            known = ", ".join(self.names()) or "none"
            raise NotFoundError(f"no array named {name} (arrays: {known})") from None
        return ArrayTable(table, ArraySchema.from_json(table.metadata.properties[SCHEMA_PROPERTY]))

    def exists(self, name: str) -> bool:
        return self.catalog.table_exists(self._identifier(name))

    def names(self, kind: str | None = None) -> list[str]:
        """Names (as created) of the tables in the warehouse, optionally only those of one kind.
        Tables that cannot be loaded (see ``Database.check``) are left out, so one broken table
        never stops the others from being listed."""
        names = []
        for identifier in self.catalog.list_tables(NAMESPACE):
            try:
                properties = self.catalog.load_table(identifier).metadata.properties
                if kind is not None and properties.get(KIND_PROPERTY) != kind:
                    continue
                names.append(ArraySchema.from_json(properties[SCHEMA_PROPERTY]).name)
            except Exception as error:  # noqa: BLE001 - a broken table is reported by check()
                logger.warning("table %s cannot be read (%s); run `arrayviews check`", identifier[-1], error)
        return sorted(names)

    def drop(self, name: str) -> None:
        """Drop the table from the catalog and delete its files."""
        array = self.open(name)
        location = array.table.location()
        self.catalog.drop_table(self._identifier(name))
        delete_folder(location)
