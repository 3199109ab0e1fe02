"""The warehouse: a folder (or file system URL) of array tables registered in one SQL catalog."""

from __future__ import annotations

import contextlib

from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError

from arrayviews.model.errors import AlreadyExistsError, NotFoundError
from arrayviews.model.schema import ArraySchema
from arrayviews.storage import layout
from arrayviews.storage.array_table import KIND_PROPERTY, SCHEMA_PROPERTY, ArrayTable
from arrayviews.storage.catalog import ensure_namespace, open_catalog
from arrayviews.storage.files import filesystem, to_uri

NAMESPACE = "arrays"


class Warehouse:
    """Creates, opens, lists and drops array tables."""

    def __init__(self, location: str, catalog_uri: str | None = None) -> None:
        self.location = to_uri(location)
        self.catalog = open_catalog(location, catalog_uri)
        ensure_namespace(self.catalog, NAMESPACE)

    def _identifier(self, name: str) -> tuple[str, str]:
        return (NAMESPACE, name.lower())

    def create(
        self, schema: ArraySchema, kind: str = "array", properties: dict[str, str] | None = None
    ) -> ArrayTable:
        arrow_schema = layout.fragment_schema(schema)
        props = {
            SCHEMA_PROPERTY: schema.to_json(),
            KIND_PROPERTY: kind,
            "commit.manifest-merge.enabled": "true",
            "commit.manifest.min-count-to-merge": "16",
            **(properties or {}),
        }
        try:
            table = self.catalog.create_table(
                self._identifier(schema.name), schema=arrow_schema, properties=props
            )
        except TableAlreadyExistsError:
            raise AlreadyExistsError(f"an array named {schema.name} already exists") from None
        # add_files and overwrite both resolve Parquet columns by name through this mapping.
        with table.transaction() as transaction:
            transaction.set_properties(
                **{"schema.name-mapping.default": table.metadata.schema().name_mapping.model_dump_json()}
            )
        return ArrayTable(table.refresh(), schema)

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
        """Names (as created) of the tables in the warehouse, optionally only those of one kind."""
        names = []
        for identifier in self.catalog.list_tables(NAMESPACE):
            properties = self.catalog.load_table(identifier).metadata.properties
            if kind is not None and properties.get(KIND_PROPERTY) != kind:
                continue
            names.append(ArraySchema.from_json(properties[SCHEMA_PROPERTY]).name)
        return sorted(names)

    def drop(self, name: str) -> None:
        """Drop the table from the catalog and delete its files."""
        array = self.open(name)
        location = array.table.location()
        self.catalog.drop_table(self._identifier(name))
        fs, path = filesystem(location)
        with contextlib.suppress(FileNotFoundError):
            fs.delete_dir(path)
