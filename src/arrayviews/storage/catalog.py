"""The SQL catalog (SQLite file by default, any SQLAlchemy URL such as PostgreSQL) holding every table."""

from __future__ import annotations

from pyiceberg.catalog.sql import SqlCatalog

from arrayviews.model.faults import checkpoint
from arrayviews.storage.files import filesystem, to_uri

CATALOG_FILE = "catalog.db"
CATALOG_NAME = "arrayviews"


class _Catalog(SqlCatalog):
    """pyiceberg's SQL catalog with a fault checkpoint between writing a new metadata file and
    swapping the table's pointer to it (the last instant before a commit becomes visible)."""

    @staticmethod
    def _write_metadata(metadata, io, metadata_path: str) -> None:
        SqlCatalog._write_metadata(metadata, io, metadata_path)
        checkpoint("catalog.metadata-written")


def open_catalog(warehouse: str, catalog_uri: str | None = None, name: str = CATALOG_NAME) -> SqlCatalog:
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
    return _Catalog(name, uri=catalog_uri, warehouse=warehouse_uri)


def ensure_namespace(catalog: SqlCatalog, namespace: str) -> None:
    if (namespace,) not in catalog.list_namespaces():
        catalog.create_namespace(namespace)
