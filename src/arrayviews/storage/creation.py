"""Creating a table in one catalog commit: created, configured and (optionally) filled with its
first snapshot at once, in a folder of its own, so a crash at any instant leaves either the whole
table or no table (only unreferenced files in a folder no table owns, which ``check`` removes)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import TableAlreadyExistsError
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from arrayviews.model.errors import AlreadyExistsError
from arrayviews.model.faults import checkpoint
from arrayviews.storage.files import filesystem
from arrayviews.storage.snapshots import (
    TABLE_PROPERTIES,
    mark_maybe_committed,
    may_have_committed,
    stage_snapshot,
)

#: fill(data folder) -> (data files written there, summary properties of the first snapshot)
Fill = Callable[[str], tuple[list[str], dict[str, str]]]


def new_location(catalog: Catalog, namespace: str, name: str) -> str:
    """A folder no table has used: ``<warehouse>/<namespace>.db/<name>-<random>``."""
    warehouse = catalog.properties["warehouse"].rstrip("/")
    return f"{warehouse}/{namespace}.db/{name.lower()}-{uuid.uuid4().hex[:10]}"


def delete_folder(location: str) -> None:
    fs, path = filesystem(location)
    with contextlib.suppress(FileNotFoundError):
        fs.delete_dir(path)


def create_table(
    catalog: Catalog,
    namespace: str,
    name: str,
    schema: Schema | pa.Schema,
    properties: dict[str, str],
    what: str,
    partition_spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC,
    fill: Fill | None = None,
) -> Table:
    """Create table ``namespace.name`` (``what`` names it in errors, e.g. "an array named A") with
    arrayviews' commit properties, the name mapping that lets Parquet columns be added by name,
    and, when ``fill`` is given, the files it writes into the new data folder as the first
    snapshot, all in one commit. On any failure the new folder is deleted and nothing exists."""
    identifier = (namespace, name.lower())
    if catalog.table_exists(identifier):
        raise AlreadyExistsError(f"{what} already exists")
    location = new_location(catalog, namespace, name)
    try:
        transaction = catalog.create_table_transaction(
            identifier,
            schema=schema,
            location=location,
            partition_spec=partition_spec,
            properties={**TABLE_PROPERTIES, **properties},
        )
        mapping = transaction.table_metadata.schema().name_mapping.model_dump_json()
        transaction.set_properties(**{"schema.name-mapping.default": mapping})
        if fill is not None:
            added, summary = fill(location + "/data")
            stage_snapshot(transaction, added, [], summary)
        checkpoint("create.before-commit")
        try:
            transaction.commit_transaction()
        except TableAlreadyExistsError:
            raise
        except BaseException as error:  # the catalog may have created the table before it failed
            mark_maybe_committed(error)
            raise
    except TableAlreadyExistsError:
        delete_folder(location)
        raise AlreadyExistsError(f"{what} already exists") from None
    except BaseException as error:
        if not may_have_committed(error):  # a table that may exist keeps its folder
            delete_folder(location)
        raise
    return catalog.load_table(identifier)
