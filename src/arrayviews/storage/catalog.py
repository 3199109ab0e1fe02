"""The SQL catalog (SQLite file by default, any SQLAlchemy URL such as PostgreSQL) holding every table."""

from __future__ import annotations

from pyiceberg.catalog.sql import SqlCatalog

from arrayviews.storage.files import filesystem, to_uri

CATALOG_FILE = "catalog.db"


def open_catalog(warehouse: str, catalog_uri: str | None = None, name: str = "arrayviews") -> SqlCatalog:
    """Open (creating if needed) the catalog of a warehouse.

    ``warehouse`` is a local path or a URL of any file system pyarrow reaches; ``catalog_uri`` is a
    SQLAlchemy URL (``postgresql+psycopg2://...``). Without it, the catalog is a SQLite file
    inside a local warehouse.
    """
    warehouse_uri = to_uri(warehouse)
    fs, path = filesystem(warehouse_uri)
    fs.create_dir(path, recursive=True)
    if catalog_uri is None:
        if not warehouse_uri.startswith("file://"):
            raise ValueError(
                f"warehouse {warehouse!r} is not on the local file system: pass catalog_uri "
                "(a SQL database URL) for the catalog"
            )
        catalog_uri = f"sqlite:///{path.rstrip('/')}/{CATALOG_FILE}"
    return SqlCatalog(name, uri=catalog_uri, warehouse=warehouse_uri)


def ensure_namespace(catalog: SqlCatalog, namespace: str) -> None:
    if (namespace,) not in catalog.list_namespaces():
        catalog.create_namespace(namespace)
