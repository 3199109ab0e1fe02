"""Creating and dropping a relation's table, each in one catalog commit.

A table is created, configured and (optionally) filled with its first snapshot at once, in a folder
of its own, so a crash at any instant leaves either the whole table or no table (only unreferenced
files in a folder no table owns, which ``check`` removes). Its name is checked first (its length,
and that no relation of another kind holds it); the catalog's unique index
(``catalog.ONE_NAMESPACE_INDEX``) makes the claim atomic. A drop deletes only the table it checked."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError, TableAlreadyExistsError
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from arrayviews.model.errors import (
    AlreadyExistsError,
    CatalogBusyError,
    CommitConflictError,
    NotFoundError,
    ValidationError,
)
from arrayviews.model.faults import checkpoint
from arrayviews.model.names import SEPARATOR
from arrayviews.storage import kinds
from arrayviews.storage.files import filesystem
from arrayviews.storage.snapshots import (
    TABLE_PROPERTIES,
    mark_maybe_committed,
    may_have_committed,
    stage_snapshot,
)
from arrayviews.storage.versioned import KIND_PROPERTY

logger = logging.getLogger(__name__)

#: The longest name of a relation (characters; names are ASCII). Its table's folder is named after it
#: (with a random suffix) within the 255 bytes file systems allow a path component, and the names
#: arrayviews derives from it (``<view>__helper``) fit the catalog's name column.
MAX_NAME_LENGTH = 128
#: The width of the catalog's table-name column (the longest derived name).
CATALOG_NAME_WIDTH = 255
#: How much of a name its folder's name keeps.
FOLDER_NAME_LENGTH = 64

#: fill(data folder) -> (data files written there, summary properties of the first snapshot)
Fill = Callable[[str], tuple[list[str], dict[str, str]]]


def new_location(catalog: Catalog, namespace: str, name: str) -> str:
    """A folder no table has used: ``<warehouse>/<namespace>.db/<name>-<random>``."""
    warehouse = catalog.properties["warehouse"].rstrip("/")
    return f"{warehouse}/{namespace}.db/{name.lower()[:FOLDER_NAME_LENGTH]}-{uuid.uuid4().hex[:10]}"


def delete_folder(location: str) -> None:
    """Delete a table's folder (one that no table of the catalog owns any more). A folder another
    process is still writing into (a write racing the drop stages a file there) may not go at
    once: it is then left, with a warning, as an orphan that ``check --repair`` deletes."""
    fs, path = filesystem(location)
    for attempt in range(3):
        try:
            fs.delete_dir(path)
            return
        except FileNotFoundError:
            return
        except OSError as error:
            if attempt == 2:
                logger.warning(
                    "folder %s could not be deleted (%s); `arrayviews check --repair` deletes it",
                    location,
                    error,
                )
                return


#: How many times a drop looks at the table again when other processes commit to it meanwhile.
DROP_ATTEMPTS = 20


def drop_table_as_checked(
    catalog: Catalog,
    identifier: tuple[str, str],
    identity: str,
    label: str,
    refuse: Callable[[], None] | None = None,
) -> None:
    """Drop the table ``identifier`` and delete its folder, only while it is the table whose
    identity (its uuid) the caller checked (``label`` names it in errors, e.g. "stream S"): one
    another process dropped, or dropped and created again under the name, meanwhile is not
    dropped (NotFoundError; nothing changed). The catalog row goes only as it was loaded (a commit
    meanwhile, an append, makes the drop look again).

    ``refuse`` (the check that no view reads the table, which raises when one does) runs again once
    the row is gone: a view another process created meanwhile, after the caller's check, makes the
    drop put the row back as it was (the folder is still there) and fail with that error. A view
    created after this second check no longer finds its source, and is refused. A drop killed
    before its put-back leaves the folder without a row while the view reads it: ``check --repair``
    registers the table again (storage/check.py)."""
    for _ in range(DROP_ATTEMPTS):
        try:
            table = catalog.load_table(identifier)
        except NoSuchTableError:
            raise NotFoundError(f"{label} was dropped by another process meanwhile") from None
        if str(table.metadata.table_uuid) != identity:
            raise NotFoundError(
                f"{label} was dropped and created again by another process while it was being dropped; "
                "nothing was dropped (drop it again to drop the new one)"
            )
        checkpoint("drop.before-commit")
        if catalog.drop_table_if_at(identifier, table.metadata_location):
            # a kill -9 from here to the put-back leaves the folder but no row, perhaps with a view
            # reading the table: ``check --repair`` registers it again then (storage/check.py)
            checkpoint("drop.row-deleted")
            if refuse is not None:
                try:
                    refuse()
                except BaseException:
                    _put_back(catalog, identifier, table.metadata_location, label)
                    raise
            checkpoint("drop.committed")
            delete_folder(table.location())
            return
    raise CommitConflictError(
        f"{label}: the drop lost to other commits {DROP_ATTEMPTS} times; nothing was dropped"
    )


def _put_back(catalog: Catalog, identifier: tuple[str, str], metadata_location: str, label: str) -> None:
    """The catalog row of a table dropped a moment ago, as it was (its files are untouched)."""
    try:
        catalog.register_table(identifier, metadata_location)
    except TableAlreadyExistsError:  # another process created a table of the name in that moment
        logger.warning(
            "%s could not be put back after a refused drop: another process created a table of its "
            "name meanwhile; its folder is left for `arrayviews check --repair`",
            label,
        )


def refuse_long_name(name: str) -> None:
    """Refuse a relation name longer than :data:`MAX_NAME_LENGTH` (a name arrayviews derived from
    one, holding ``__``, up to the catalog's column width), showing its start and its length."""
    limit = CATALOG_NAME_WIDTH if SEPARATOR in name else MAX_NAME_LENGTH
    if len(name) > limit:
        raise ValidationError(
            f"the name {name[:24]}… ({len(name)} characters) is too long: names of arrays, views and "
            f"streams have at most {MAX_NAME_LENGTH} characters; nothing was created",
            array=name,
            value=name,
        )


def _refuse_name_of_another_kind(catalog: Catalog, namespace: str, name: str) -> None:
    """Arrays, views and streams share one namespace (names compared without regard to case), though
    their tables live in two catalog namespaces: a name a table of the other namespace holds is
    refused, naming that relation's kind."""
    for other in kinds.NAMESPACES:
        if other == namespace or not catalog.table_exists((other, name.lower())):
            continue
        try:
            table = catalog.load_table((other, name.lower()))
            kind = kinds.kind_of_stored(other, table.metadata.properties.get(KIND_PROPERTY))
        except NoSuchTableError:
            continue  # dropped by another process since the look above: it holds the name no more
        except Exception:  # noqa: BLE001 - a broken table still holds the name
            kind = None
        holder = kinds.with_article(kind) if kind else "a relation"
        raise AlreadyExistsError(
            f"{holder} named {name} already exists (arrays, views and streams share one namespace; "
            "names are compared without regard to case)"
        )


def _lost_race(catalog: Catalog, namespace: str, name: str, what: str) -> AlreadyExistsError:
    """The error of a creation whose catalog commit found the name taken (the catalog's unique keys
    hold one table per name across both namespaces): it names the holder's kind when another kind
    took the name after this creation's check."""
    try:
        _refuse_name_of_another_kind(catalog, namespace, name)
    except AlreadyExistsError as error:
        return error
    if catalog.table_exists((namespace, name.lower())):
        return AlreadyExistsError(f"{what} already exists")
    return AlreadyExistsError(
        f"{what} already exists: another process created a relation of that name at the same instant "
        "(and has dropped it since); nothing was created"
    )


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
    refuse_long_name(name)
    identifier = (namespace, name.lower())
    if catalog.table_exists(identifier):
        raise AlreadyExistsError(f"{what} already exists")
    _refuse_name_of_another_kind(catalog, namespace, name)
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
            created = transaction.commit_transaction()
        except (TableAlreadyExistsError, CatalogBusyError):  # nothing was created
            raise
        except CommitFailedException:
            # another process created a table of that name after the check above: the creation's
            # requirement (no table yet) failed before anything was written to the catalog (that
            # table may be dropped again by now: the creation still lost the race for the name)
            raise TableAlreadyExistsError(what) from None
        except BaseException as error:  # the catalog may have created the table before it failed
            mark_maybe_committed(error)
            raise
    except TableAlreadyExistsError:
        delete_folder(location)
        raise _lost_race(catalog, namespace, name, what) from None
    except BaseException as error:
        if not may_have_committed(error):  # a table that may exist keeps its folder
            delete_folder(location)
        raise
    try:
        return catalog.load_table(identifier)
    except NoSuchTableError:  # created, then dropped by another process at once: a handle on it
        return Table(identifier, created.metadata, created.metadata_location, created.io, catalog)
