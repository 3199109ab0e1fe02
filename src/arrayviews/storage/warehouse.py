"""The warehouse: a folder (or file system URL) of array tables registered in one SQL catalog."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable

from pyarrow.fs import FileSelector, FileType
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

from arrayviews.model.errors import NotFoundError, ValidationError
from arrayviews.model.schema import ArraySchema
from arrayviews.storage import kinds, layout
from arrayviews.storage.array_table import SCHEMA_PROPERTY, ArrayTable, CommitInfo, version_summary
from arrayviews.storage.catalog import (
    CATALOG_FILE,
    CATALOG_NAME,
    ensure_namespace,
    load_failure,
    load_tables,
    open_catalog,
)
from arrayviews.storage.creation import create_table, drop_table_as_checked
from arrayviews.storage.files import filesystem, to_uri
from arrayviews.storage.part_table import HELPER_PROPERTY, NAME_PROPERTY
from arrayviews.storage.versioned import KIND_PROPERTY, VERSION_KEY

NAMESPACE = kinds.ARRAYS_NAMESPACE
logger = logging.getLogger(__name__)

#: fill(data folder) -> (data files written there, what the first version holds)
ArrayFill = Callable[[str], tuple[list[str], CommitInfo]]

#: The file that marks a folder as an arrayviews warehouse.
MARKER = "arrayviews-warehouse.json"
#: What a warehouse folder holds besides the marker (also in warehouses made before the marker).
WAREHOUSE_ENTRIES = frozenset(
    {MARKER, CATALOG_FILE, CATALOG_FILE + "-journal", CATALOG_FILE + "-wal", CATALOG_FILE + "-shm"}
    | {"arrays.db", "streams.db", "_scratch"}
)


def _is_arrayviews_catalog(path: str) -> bool:
    """Whether the SQLite file at ``path`` is a catalog arrayviews made: pyiceberg's two catalog
    tables and nothing else, every table registered under the catalog name ``arrayviews``."""
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables or not tables <= {"iceberg_tables", "iceberg_namespace_properties"}:
            return False
        names = {row[0] for row in connection.execute("SELECT DISTINCT catalog_name FROM iceberg_tables")}
        return names <= {CATALOG_NAME}
    except sqlite3.Error:
        return False
    finally:
        connection.close()


def check_folder(location: str, catalog_uri: str | None, create_in_existing_folder: bool) -> None:
    """Refuse to make a warehouse in a folder that holds something else: a folder that does not
    exist or is empty becomes a warehouse; a warehouse opens; a folder with other files only with
    ``create_in_existing_folder``; never a folder whose ``catalog.db`` is not arrayviews'."""
    fs, path = filesystem(to_uri(location))
    info = fs.get_file_info(path)
    if info.type == FileType.NotFound:
        return
    if info.type != FileType.Directory:
        raise ValidationError(f"warehouse {location} is a file, not a folder", value=location)
    names = {entry.base_name for entry in fs.get_file_info(FileSelector(path))}
    if not names or MARKER in names:
        return
    if catalog_uri is None and CATALOG_FILE in names and not _is_arrayviews_catalog(f"{path}/{CATALOG_FILE}"):
        raise ValidationError(
            f"warehouse {location}: its {CATALOG_FILE} is not an arrayviews catalog; nothing was changed "
            "(choose another folder, or pass catalog_uri)",
            value=location,
        )
    if names <= WAREHOUSE_ENTRIES or create_in_existing_folder:
        return
    shown = ", ".join(sorted(names - WAREHOUSE_ENTRIES)[:5])
    raise ValidationError(
        f"warehouse {location} is not empty and is not an arrayviews warehouse (it holds {shown}); "
        "nothing was changed (choose an empty folder, or pass create_in_existing_folder=True to make "
        "a warehouse there)",
        value=location,
    )



#: Broken tables this process has warned about, with the failure (one command lists the warehouse
#: more than once: a warning each time said the same thing twice).
_WARNED: dict[tuple[str, str, str], None] = {}
_WARNED_KEPT = 1024


def _warn_unreadable(warehouse: str, table: str, error: BaseException) -> None:
    """Log once per process that ``table`` of ``warehouse`` cannot be read, and why (``check``
    reports it in full)."""
    reason = load_failure(error)
    key = (warehouse, table, reason)
    if key in _WARNED:
        return
    _WARNED[key] = None
    while len(_WARNED) > _WARNED_KEPT:
        del _WARNED[next(iter(_WARNED))]
    logger.warning("table %s cannot be read (%s); run `arrayviews check`", table, reason)


class Warehouse:
    """Creates, opens, lists and drops array tables."""

    def __init__(
        self, location: str, catalog_uri: str | None = None, create_in_existing_folder: bool = False
    ) -> None:
        check_folder(location, catalog_uri, create_in_existing_folder)
        self.location = to_uri(location)
        self.catalog = open_catalog(location, catalog_uri)
        ensure_namespace(self.catalog, NAMESPACE)
        fs, path = filesystem(self.location)
        marker = f"{path.rstrip('/')}/{MARKER}"
        if fs.get_file_info(marker).type == FileType.NotFound:
            with fs.open_output_stream(marker) as out:
                out.write(json.dumps({"arrayviews-warehouse": 1}).encode() + b"\n")

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
        except Exception as error:  # noqa: BLE001 - e.g. its metadata file is gone
            raise NotFoundError(
                f"array {name} cannot be read ({load_failure(error)}); run `arrayviews check`"
            ) from None
        return ArrayTable(table, ArraySchema.from_json(table.metadata.properties[SCHEMA_PROPERTY]))

    def exists(self, name: str) -> bool:
        return self.catalog.table_exists(self._identifier(name))

    def names(self, kind: str | None = None) -> list[str]:
        """Names (as created) of the tables in the warehouse, optionally only those of one kind.
        Tables that cannot be loaded (see ``Database.check``) are left out, so one broken table
        never stops the others from being listed."""
        names = []
        for identifier, table in load_tables(self.catalog, NAMESPACE):
            try:
                if isinstance(table, Exception):
                    raise table
                properties = table.metadata.properties
                if kind is not None and properties.get(KIND_PROPERTY) != kind:
                    continue
                names.append(ArraySchema.from_json(properties[SCHEMA_PROPERTY]).name)
            except Exception as error:  # noqa: BLE001 - a broken table is reported by check()
                _warn_unreadable(self.location, identifier[-1], error)
        return sorted(names)

    def kind(self, name: str) -> str | None:
        """The stored kind (``array``, ``view``, ``uncertain``) of the array table ``name``."""
        return self.open(name).kind

    def drop(self, name: str, identity: str | None = None) -> None:
        """Drop the table from the catalog and delete its files. With ``identity`` (the table's
        :attr:`~arrayviews.storage.versioned.VersionedTable.identity` when the caller checked it, e.g.
        that no view reads it), only that table: one another process dropped and created again under
        the name meanwhile is not dropped (NotFoundError; nothing changed)."""
        if identity is None:
            identity = self.open(name).identity
        drop_table_as_checked(self.catalog, self._identifier(name), identity, f"array {name}")

    # -- the one listing of every relation ---------------------------------------------------------
    def relations(self) -> list[kinds.RelationEntry]:
        """Every relation of the warehouse (arrays, array views, uncertain arrays, streams, stream
        views) with its kind and current version, read from table metadata only. Tables that cannot
        be loaded are left out (and logged), as in :meth:`names`."""
        found = []
        for namespace in kinds.NAMESPACES:
            try:
                loaded = load_tables(self.catalog, namespace)
            except NoSuchNamespaceError:
                continue
            for identifier, table in loaded:
                try:
                    if isinstance(table, Exception):
                        raise table
                    properties = table.metadata.properties
                    kind = kinds.kind_of_stored(namespace, properties.get(KIND_PROPERTY))
                    if kind is None:
                        continue
                    if namespace == kinds.ARRAYS_NAMESPACE:
                        name = ArraySchema.from_json(properties[SCHEMA_PROPERTY]).name
                    else:
                        name = properties[NAME_PROPERTY]
                    snapshot = table.current_snapshot()
                    summary = snapshot.summary.additional_properties if snapshot and snapshot.summary else {}
                    found.append(
                        kinds.RelationEntry(
                            name,
                            kind,
                            int(summary.get(VERSION_KEY, 0)),
                            properties.get(HELPER_PROPERTY) == "true",
                        )
                    )
                except Exception as error:  # noqa: BLE001 - a broken table is reported by check()
                    _warn_unreadable(self.location, identifier[-1], error)
        return sorted(found, key=lambda entry: (entry.name.lower(), entry.kind))
