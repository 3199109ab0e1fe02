"""The SQL catalog (SQLite file by default, any SQLAlchemy URL such as PostgreSQL) holding every table."""

from __future__ import annotations

import contextlib
import functools
import logging
import operator
import os
import re
import sqlite3
import threading
from collections import OrderedDict
from typing import NamedTuple

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.exceptions import CommitFailedException, NoSuchNamespaceError, NoSuchTableError
from pyiceberg.io import load_file_io
from pyiceberg.serializers import Compressor, FromInputFile
from pyiceberg.table import CommitTableResponse, StagedTable, Table
from pyiceberg.table.locations import load_location_provider
from pyiceberg.utils.config import Config
from sqlalchemy import bindparam, delete, event, inspect, select, text, update
from sqlalchemy.exc import SQLAlchemyError

from arrayviews.model.errors import CatalogBusyError
from arrayviews.model.faults import checkpoint
from arrayviews.storage import inline_executor, kinds
from arrayviews.storage.avro_schemas import write_whole
from arrayviews.storage.files import filesystem, to_uri
from arrayviews.storage.metadata_updates import apply_updates

logger = logging.getLogger(__name__)

CATALOG_FILE = "catalog.db"
CATALOG_NAME = "arrayviews"
#: Parsed table metadata files a catalog keeps (one per metadata location, oldest dropped first).
METADATA_KEPT = 256
#: How long a statement on a SQLite catalog waits for another process's lock before it fails with
#: CatalogBusyError (read when a connection is made).
BUSY_TIMEOUT_SECONDS = 5.0
#: Sizes of the metadata files this process wrote lately, by location (for the catalog's cache).
_written_sizes: dict[str, int] = {}


class _Catalog(SqlCatalog):
    """pyiceberg's SQL catalog with a fault checkpoint between writing a new metadata file and
    swapping the table's pointer to it (the last instant before a commit becomes visible), and a
    cache of parsed metadata files by location (``metadata_loads`` counts the files parsed), and
    commits that do not deep-copy the table's metadata (``storage.metadata_updates``)."""

    metadata_loads = 0

    def __init__(self, name: str, **properties: str) -> None:
        super().__init__(name, **properties)
        if self.engine.dialect.name == "sqlite":
            _write_ahead_log(self.engine, name)
        one_namespace_of_names(self.engine)

    @staticmethod
    def _write_metadata(metadata, io, metadata_path: str) -> None:
        # pyiceberg's writer, with its configuration read once per process (pyiceberg reads its
        # configuration file and environment again for every metadata file it writes)
        text = metadata_json(metadata, exclude_none=not _legacy_snapshot_id()).encode("utf-8")
        compressed = Compressor.get_compressor(metadata_path).bytes_compressor()(text)
        output = io.new_output(metadata_path)
        write_whole(output, compressed, overwrite=False)
        _written_sizes[metadata_path] = len(output)  # the size written (no look at the disk)
        while len(_written_sizes) > 64:
            _written_sizes.pop(next(iter(_written_sizes)), None)
        checkpoint("catalog.metadata-written")

    def _update_and_stage_table(self, current_table, table_identifier, requirements, updates) -> StagedTable:
        if current_table is None:  # a new table: pyiceberg's path, which validates the new metadata
            return super()._update_and_stage_table(current_table, table_identifier, requirements, updates)
        for requirement in requirements:
            requirement.validate(current_table.metadata)
        metadata = apply_updates(current_table.metadata, updates, current_table.metadata_location)
        version = self._parse_metadata_version(current_table.metadata_location) + 1
        location = load_location_provider(
            metadata.location, metadata.properties
        ).new_table_metadata_file_location(version)
        return StagedTable(
            identifier=table_identifier,
            metadata=metadata,
            metadata_location=location,
            io=self._file_io(metadata.properties, location),
            catalog=self,
        )

    def _file_io(self, properties, location: str):
        """pyiceberg's ``_load_file_io`` (a new file IO for the catalog's and table's properties and
        the location's scheme), kept per catalog for the properties and scheme it was made for:
        a file IO holds only those, and each new one also made its file system again."""
        merged = {**self.properties, **properties}
        scheme = location.split("://", 1)[0] if "://" in location else ""
        key = (scheme, tuple(sorted(merged.items())))
        kept = self.__dict__.setdefault("_ios_kept", {})
        io = kept.get(key)
        if io is None:
            io = self._load_file_io(properties=properties, location=location)
            if len(kept) >= 64:
                kept.clear()
            kept[key] = io
        return io

    # Every load still asks the catalog for the table's current metadata location (another process
    # may have committed); only the parsing of a metadata file already read is skipped. A metadata
    # file is never rewritten in place (every commit writes a new one), so the location names its
    # content; each load returns a new Table over the (immutable) parsed metadata.
    def _convert_orm_to_iceberg(self, orm_table) -> Table:
        metadata_location = orm_table.metadata_location
        if not metadata_location or not orm_table.table_namespace or not orm_table.table_name:
            return super()._convert_orm_to_iceberg(orm_table)
        kept = self.__dict__.setdefault("_metadata_kept", {})
        io = kept[metadata_location][1] if metadata_location in kept else None
        if io is None:
            io = load_file_io(properties=self.properties, location=metadata_location)
        file = io.new_input(metadata_location)
        # the file must still be there as it was parsed (a lost or truncated metadata file fails
        # the load as it would without the cache, so `check` and listings see it)
        if metadata_location in kept:
            try:
                size = len(file)  # one look at the file (it raises FileNotFoundError when it is gone)
            except FileNotFoundError:
                size = None
            if size != kept[metadata_location][2]:
                del kept[metadata_location]
        if metadata_location not in kept:
            self._keep(metadata_location, FromInputFile.table_metadata(file), len(file))
            self.metadata_loads = getattr(self, "metadata_loads", 0) + 1
        metadata, io, _ = kept[metadata_location]
        return Table(
            identifier=Catalog.identifier_to_tuple(orm_table.table_namespace) + (orm_table.table_name,),
            metadata=metadata,
            metadata_location=metadata_location,
            io=io,
            catalog=self,
        )

    def _swap_statement(self):
        """The compare-and-set of a table's metadata location (it changes only if it is still the
        location the commit was applied to), with bound parameters, built once per catalog."""
        swap = self.__dict__.get("_swap")
        if swap is None:
            swap = (
                update(IcebergTables)
                .where(
                    IcebergTables.catalog_name == bindparam("catalog"),
                    IcebergTables.table_namespace == bindparam("namespace"),
                    IcebergTables.table_name == bindparam("name"),
                    IcebergTables.metadata_location == bindparam("expected"),
                )
                .values(
                    metadata_location=bindparam("location"), previous_metadata_location=bindparam("expected")
                )
            )
            self.__dict__["_swap"] = swap
        return swap

    def _rows_statement(self, by_name: bool):
        """The query of the tables' rows of one namespace (``by_name``: of one table), with bound
        parameters, built once per catalog object."""
        key = "_row_statement" if by_name else "_namespace_statement"
        statement = self.__dict__.get(key)
        if statement is None:
            statement = select(
                IcebergTables.table_namespace, IcebergTables.table_name, IcebergTables.metadata_location
            ).where(
                IcebergTables.catalog_name == bindparam("catalog"),
                IcebergTables.table_namespace == bindparam("namespace"),
            )
            if by_name:
                statement = statement.where(IcebergTables.table_name == bindparam("name"))
            if (type_filter := self._iceberg_type_filter()) is not None:
                statement = statement.where(type_filter)
            self.__dict__[key] = statement
        return statement

    def load_table(self, identifier) -> Table:
        """pyiceberg's load, with one plain SQL query for the table's row, its statement built once
        (no ORM session; building the statement each time cost as much as running it: every fresh
        read of a table pays this lookup)."""
        namespace = Catalog.namespace_to_string(Catalog.namespace_from(identifier))
        name = Catalog.table_name_from(identifier)
        row = self._row(namespace, name)
        while True:
            if row is None:
                raise NoSuchTableError(f"Table does not exist: {namespace}.{name}")
            try:
                return self._convert_orm_to_iceberg(row)
            except FileNotFoundError:
                # A drop by another process deletes the row and then the folder, and a commit
                # deletes metadata files some commits old: a row read just before either names a
                # file that is gone. Read the row again; only a row still naming the missing file
                # is a lost metadata file (``check --repair``).
                again = self._row(namespace, name)
                if again is not None and again.metadata_location == row.metadata_location:
                    raise
                row = again

    def _row(self, namespace: str, name: str):
        """The catalog's row of table ``namespace.name`` (None when there is none)."""
        with self.engine.connect() as connection:
            return connection.execute(
                self._rows_statement(by_name=True),
                {"catalog": self.name, "namespace": namespace, "name": name},
            ).first()

    def drop_table_if_at(self, identifier, metadata_location: str) -> bool:
        """Drop the table only while its metadata location is still ``metadata_location`` (the table
        as the caller checked it: not one another process committed to, or created again under the
        name, since); True when it was dropped."""
        statement = delete(IcebergTables).where(
            IcebergTables.catalog_name == self.name,
            IcebergTables.table_namespace == Catalog.namespace_to_string(Catalog.namespace_from(identifier)),
            IcebergTables.table_name == Catalog.table_name_from(identifier),
            IcebergTables.metadata_location == metadata_location,
        )
        with self.engine.begin() as connection:
            return connection.execute(statement).rowcount > 0

    def load_tables(self, namespace: str) -> list[tuple[tuple[str, ...], Table | Exception]]:
        """Every table of ``namespace`` loaded with one catalog query (not one per table): each
        identifier with its table, or the error that loading it raised (a broken table). The
        statement is built once, run on a plain connection (no ORM session), and the namespace
        is looked up only when it holds no table (every maintenance pass lists its namespace)."""
        parameters = {"catalog": self.name, "namespace": namespace}
        rows = _sqlite_namespace_rows(self, parameters)
        if rows is None:
            with self.engine.connect() as connection:
                rows = connection.execute(self._rows_statement(by_name=False), parameters).all()
        if not rows and not self.namespace_exists(namespace):
            raise NoSuchNamespaceError(f"Namespace does not exist: {namespace}")
        found: list[tuple[tuple[str, ...], Table | Exception]] = []
        for row in rows:
            identifier = Catalog.identifier_to_tuple(row.table_namespace) + (row.table_name,)
            try:
                found.append((identifier, self._convert_orm_to_iceberg(row)))
            except FileNotFoundError:  # dropped, or committed to, since the query: look again
                try:
                    found.append((identifier, self.load_table(identifier)))
                except NoSuchTableError:
                    continue  # dropped meanwhile: not listed
                except Exception as error:  # noqa: BLE001 - the caller reports a broken table
                    found.append((identifier, error))
            except Exception as error:  # noqa: BLE001 - the caller reports a broken table
                found.append((identifier, error))
        return found

    def _keep(self, metadata_location: str, metadata, size: int, io=None) -> None:
        kept = self.__dict__.setdefault("_metadata_kept", {})
        if len(kept) >= METADATA_KEPT:
            kept.pop(next(iter(kept)))
        if io is None:
            io = self._load_file_io(metadata.properties, metadata_location)
        kept[metadata_location] = (metadata, io, size)

    def commit_table(self, table, requirements, updates):
        # The metadata this process just wrote is kept as written, so the next load of the table
        # does not read and parse it back.
        response = self._commit_on_loaded(table, requirements, updates)
        if response is None:
            response = super().commit_table(table, requirements, updates)
        location = response.metadata_location
        # the table's file IO serves the new metadata too unless the commit changed its properties
        same_io = response.metadata.properties == table.metadata.properties
        io = table.io if same_io else self._load_file_io(response.metadata.properties, location)
        size = _written_sizes.pop(location, None)
        self._keep(location, response.metadata, len(io.new_input(location)) if size is None else size, io)
        return response

    def _commit_on_loaded(self, table, requirements, updates) -> CommitTableResponse | None:
        """The commit applied to the metadata ``table`` was loaded with, when that is still the
        table's current metadata; None when it is not (or cannot be told), for pyiceberg's path.

        pyiceberg's commit first loads the table again (a catalog query and the metadata file's
        size) to apply the updates to its newest metadata. The swap of the metadata pointer is a
        compare-and-set on the location the updates were applied to, so here they are applied to
        the metadata already at hand, and the swap itself tells whether that was still current:
        when another process committed meanwhile, nothing is swapped, the metadata file written is
        deleted, and pyiceberg's path loads the table and checks the requirements against it."""
        location = table.metadata_location
        if not location or not updates or not self.engine.dialect.supports_sane_rowcount:
            return None
        try:
            for requirement in requirements:
                requirement.validate(table.metadata)
        except CommitFailedException:
            return None  # perhaps only stale here: pyiceberg's path decides against the newest
        identifier = table.name()
        namespace = Catalog.namespace_to_string(Catalog.namespace_from(identifier))
        name = Catalog.table_name_from(identifier)
        staged = self._update_and_stage_table(table, identifier, requirements, updates)
        self._write_metadata(staged.metadata, staged.io, staged.metadata_location)
        values = {
            "catalog": self.name,
            "namespace": namespace,
            "name": name,
            "expected": location,
            "location": staged.metadata_location,
        }
        try:
            swapped = _swap_on_sqlite(self, values)
            if swapped is None:
                with self.engine.begin() as connection:
                    swapped = connection.execute(self._swap_statement(), values).rowcount
        except CatalogBusyError:  # the swap never ran: the new metadata file is nobody's
            _delete_quietly(staged.io, staged.metadata_location)
            raise
        if swapped < 1:
            _delete_quietly(staged.io, staged.metadata_location)
            return None
        return CommitTableResponse(metadata=staged.metadata, metadata_location=staged.metadata_location)


#: Snapshots whose JSON text is kept (all tables together), by object: see :func:`metadata_json`.
SNAPSHOT_TEXTS_KEPT = 8192
_snapshot_texts: OrderedDict[tuple[int, bool], tuple[object, str]] = OrderedDict()
_snapshot_texts_lock = threading.Lock()


#: The joined texts of the last snapshot list and snapshot log written per table.
JOINED_KEPT = 512
_joined: OrderedDict[tuple, tuple[tuple, str]] = OrderedDict()


def metadata_json(metadata, exclude_none: bool) -> str:
    """The JSON text of table metadata, as pyiceberg writes it, but with the text of each snapshot
    kept from the last time it was written, and the texts of the snapshot list and snapshot log
    extended from those of the table's last metadata.

    Every commit writes a metadata file listing every snapshot the table holds (a hundred for a
    stream view, say), and pyiceberg serializes each snapshot through a Python hook; a snapshot never
    changes, and the metadata objects of one table's successive commits share their snapshot
    objects, so each is serialized once. A commit's snapshot list and snapshot log are the last ones
    with one more member (the same objects before it): their texts are the last texts with one more
    member. The text differs from pyiceberg's only in the place of the ``snapshot-log`` and
    ``snapshots`` members (last), which JSON readers do not see."""
    snapshots = metadata.snapshots
    if not snapshots:
        return metadata.model_dump_json(exclude_none=exclude_none)
    head = metadata.model_dump_json(exclude={"snapshots", "snapshot_log"}, exclude_none=exclude_none)
    table = metadata.table_uuid
    log = _joined_text(("log", table, exclude_none), metadata.snapshot_log, _texts_of(exclude_none, False))
    listed = _joined_text(("snapshots", table, exclude_none), snapshots, _texts_of(exclude_none, True))
    separator = "," if head != "{}" else ""
    return f'{head[:-1]}{separator}"snapshot-log":[{log}],"snapshots":[{listed}]}}'


def _texts_of(exclude_none: bool, kept: bool):
    """The JSON texts of some model objects (``kept``: snapshots, each kept by object)."""
    if not kept:
        return lambda objects: [o.model_dump_json(exclude_none=exclude_none) for o in objects]
    return lambda objects: _snapshot_texts_of(objects, exclude_none)


def _joined_text(key: tuple, objects: list, texts_of) -> str:
    """The members' texts joined with commas, extended from the text kept under ``key`` when the
    objects it was made of are the first of ``objects`` (the same objects, in order)."""
    with _snapshot_texts_lock:
        kept = _joined.get(key)
    if kept is not None:
        before, text = kept
        count = len(before)
        if count <= len(objects) and all(map(operator.is_, before, objects)):
            if count < len(objects):
                more = ",".join(texts_of(objects[count:]))
                text = f"{text},{more}" if count else more
        else:
            kept = None
    if kept is None:
        text = ",".join(texts_of(objects))
    with _snapshot_texts_lock:
        _joined[key] = (tuple(objects), text)
        _joined.move_to_end(key)
        while len(_joined) > JOINED_KEPT:
            _joined.popitem(last=False)
    return text


def _snapshot_texts_of(snapshots, exclude_none: bool) -> list[str]:
    texts = []
    with _snapshot_texts_lock:
        for snapshot in snapshots:
            kept = _snapshot_texts.get((id(snapshot), exclude_none))
            if kept is not None and kept[0] is snapshot:
                texts.append(kept[1])
            else:
                texts.append(None)
    for number, snapshot in enumerate(snapshots):
        if texts[number] is None:
            texts[number] = snapshot.model_dump_json(exclude_none=exclude_none)
            with _snapshot_texts_lock:
                _snapshot_texts[(id(snapshot), exclude_none)] = (snapshot, texts[number])
                while len(_snapshot_texts) > SNAPSHOT_TEXTS_KEPT:
                    _snapshot_texts.popitem(last=False)
    return texts


@functools.cache
def _legacy_snapshot_id() -> bool:
    """pyiceberg's ``legacy-current-snapshot-id`` setting (a table without a snapshot written with
    ``current-snapshot-id: -1``), read once per process."""
    return bool(Config().get_bool("legacy-current-snapshot-id"))


def _write_ahead_log(engine, catalog_name: str) -> None:
    """SQLite catalog connections in write-ahead-log mode with normal synchronisation.

    A commit then appends to the log file instead of rewriting the database through a rollback
    journal, and readers (another process listing tables, say) read the last committed state while
    a writer works instead of waiting on its lock. Normal synchronisation does not flush to the
    disk at every commit: a committed swap survives the committing process being killed at any
    point (it is in the operating system's hands once the commit returns), and only an operating
    system crash or power loss can lose the last swaps, which then roll back whole, as the data and
    metadata files written before them (never flushed by their writers either) may be lost too.
    The log needs shared memory beside the database file, so every process of one SQLite catalog
    runs on one machine (a shared catalog across machines is a SQL server: ``catalog_uri``)."""

    @event.listens_for(engine, "connect")
    def _pragmas(connection, _record) -> None:
        cursor = connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_SECONDS * 1000)}")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "handle_error")
    def _locked(context) -> CatalogBusyError | None:
        if not is_busy(context.original_exception):
            return None
        parameters = context.parameters
        if isinstance(parameters, (list, tuple)) and parameters and isinstance(parameters[0], dict):
            parameters = parameters[0]
        table = None
        if isinstance(parameters, dict):
            table = parameters.get("table_name") or parameters.get("name") or parameters.get("table_name_1")
        elif isinstance(parameters, (list, tuple)) and catalog_name in parameters:
            # positional: catalog name, namespace and table name come in that order
            at = list(parameters).index(catalog_name) + 2
            table = parameters[at] if at < len(parameters) and isinstance(parameters[at], str) else None
        return busy_error(engine.url.database, "a catalog statement", table)

    engine.dispose()  # connections made while creating the catalog's tables lack the settings


#: The unique index of the catalog's table rows that makes arrays, views and streams one namespace of
#: names: no two tables of the relation namespaces (``arrays``, ``streams``) share a table name (names
#: are stored lowercased). The claim of a name is the insert of the table's own row, so it is as
#: atomic as the catalog's commit: two processes creating a stream and an array of one name at once
#: cannot both insert, and a creation killed at any instant holds no name (no row, no claim).
ONE_NAMESPACE_INDEX = "arrayviews_one_namespace"
#: Catalog databases (by URL) this process has given the index, or found it in.
_indexed: set[str] = set()


def one_namespace_of_names(engine) -> bool:
    """Give the catalog's table rows the unique index :data:`ONE_NAMESPACE_INDEX` (SQLite and
    PostgreSQL, which have partial indexes; created once, looked for at each first open in a
    process); True when the catalog has it. A catalog that already holds a name twice (two
    relations created at once before the index) cannot have it: a warning names those names, and
    creations there fall back to the check before the commit."""
    key = engine.url.render_as_string(hide_password=False)
    if key in _indexed:
        return True
    if engine.dialect.name not in ("sqlite", "postgresql"):
        return False
    table = IcebergTables.__tablename__
    names = ", ".join(f"'{namespace}'" for namespace in kinds.NAMESPACES)
    statement = text(
        f"CREATE UNIQUE INDEX IF NOT EXISTS {ONE_NAMESPACE_INDEX} ON {table} (catalog_name, table_name) "
        f"WHERE table_namespace IN ({names})"
    )
    try:
        if not _has_index(engine, table):
            with engine.begin() as connection:
                connection.execute(statement)
    except (SQLAlchemyError, CatalogBusyError) as error:
        try:
            present = _has_index(engine, table)  # (another process creating it at once is fine)
        except (SQLAlchemyError, CatalogBusyError):
            present = False
        if not present:
            twice = _names_held_twice(engine, table, names)
            shown = engine.url.render_as_string(hide_password=True)
            if twice:
                logger.warning(
                    "catalog %s holds names twice (%s: two relations of each, created at once before "
                    "names were kept unique); drop one of each, and the next opening keeps names "
                    "unique across arrays and streams",
                    shown,
                    ", ".join(twice),
                )
            else:
                logger.warning(
                    "catalog %s: the index keeping names unique across arrays and streams could not "
                    "be made (%s); two processes creating relations of one name at the same instant "
                    "may both succeed",
                    shown,
                    load_failure(getattr(error, "orig", None) or error),
                )
            return False
    _indexed.add(key)
    return True


def _has_index(engine, table: str) -> bool:
    return any(index.get("name") == ONE_NAMESPACE_INDEX for index in inspect(engine).get_indexes(table))


def _names_held_twice(engine, table: str, names: str) -> list[str]:
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text(
                    f"SELECT table_name FROM {table} WHERE table_namespace IN ({names}) "
                    "GROUP BY catalog_name, table_name HAVING COUNT(*) > 1 ORDER BY table_name"
                )
            ).all()
    except SQLAlchemyError:
        return []
    return [row[0] for row in rows]


def _delete_quietly(io, location: str) -> None:
    """Delete a metadata file no table refers to; one already gone (its table's folder was deleted
    by a drop in another process) is fine."""
    with contextlib.suppress(FileNotFoundError):
        io.delete(location)


def is_busy(error: BaseException | None) -> bool:
    """Whether ``error`` is SQLite's "database is locked" / "busy" (another process held the lock
    for longer than the busy timeout; the statement changed nothing)."""
    if not isinstance(error, sqlite3.OperationalError):
        return False
    text = str(error).lower()
    return "locked" in text or "busy" in text


def busy_error(database: str | None, what: str, table: str | None = None) -> CatalogBusyError:
    """The error for a SQLite catalog that stayed locked: which file, what waited, for which table."""
    subject = f" (table {table})" if table else ""
    return CatalogBusyError(
        f"catalog {database}: another process held its lock for more than {BUSY_TIMEOUT_SECONDS:g} s "
        f"during {what}{subject}; nothing was changed, retry the operation",
        table=table,
    )


def open_catalog(warehouse: str, catalog_uri: str | None = None, name: str = CATALOG_NAME) -> SqlCatalog:
    """Open (creating if needed) the catalog of a warehouse.

    ``warehouse`` is a local path or a URL of any file system pyarrow reaches; ``catalog_uri`` is a
    SQLAlchemy URL (``postgresql+psycopg2://...``). Without it, the catalog is a SQLite file
    inside a local warehouse.
    """
    warehouse_uri = to_uri(warehouse)
    if warehouse_uri.startswith("file://"):
        inline_executor.install()
    else:
        inline_executor.use_threads()
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


def kept_plans(catalog: object, table_uuid: object) -> dict:
    """The file plans of one table kept by its catalog object across loads (by snapshot and filter;
    a snapshot never changes), or a new dict for a catalog that keeps none."""
    if not isinstance(catalog, _Catalog):
        return {}
    return catalog.__dict__.setdefault("_plans_kept", {}).setdefault(str(table_uuid), {})


def kept_listing(catalog: object, table_uuid: object) -> dict:
    """The live-file listings of one table kept by its catalog object across loads (snapshot id ->
    files by path, oldest first), or a new dict for a catalog that keeps none."""
    if not isinstance(catalog, _Catalog):
        return {}
    return catalog.__dict__.setdefault("_listings_kept", {}).setdefault(str(table_uuid), {})


def load_failure(error: BaseException) -> str:
    """Why a table could not be loaded, on one line: the error's type and its message without
    pydantic's echo of the file's text or its help link (a truncated metadata file's error spans
    lines and quotes the JSON)."""
    lines = [line.strip() for line in str(error).splitlines()]
    kept = [line for line in lines if line and not line.startswith("For further information")]
    text = re.sub(r"\s*\[type=.*", "", "; ".join(kept))  # "[type=json_invalid, input_value='{...'"
    text = text if len(text) <= 200 else text[:199] + "…"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def load_tables(catalog: Catalog, namespace: str) -> list[tuple[tuple[str, ...], Table | Exception]]:
    """Every table of ``namespace`` with its identifier (or the error loading it raised): one query
    for arrayviews' catalog, one load per table for any other."""
    if isinstance(catalog, _Catalog):
        return catalog.load_tables(namespace)
    found: list[tuple[tuple[str, ...], Table | Exception]] = []
    for identifier in catalog.list_tables(namespace):
        try:
            found.append((identifier, catalog.load_table(identifier)))
        except Exception as error:  # noqa: BLE001 - the caller reports a broken table
            found.append((identifier, error))
    return found


def current_metadata_location(catalog: Catalog, identifier: tuple[str, ...]) -> str | None:
    """The metadata location the catalog holds now for the table ``identifier`` (None: no such table,
    or a catalog other than arrayviews' own, which cannot be asked this alone). It is what a load
    asks first, and all a reader needs to tell whether the table it holds is still current.

    On a SQLite catalog the query runs on a plain ``sqlite3`` connection of this thread and process
    (in autocommit, so each query sees every commit made before it, by any process) with the load's
    statement compiled once; on any other database, on a pooled connection as the load does."""
    if not isinstance(catalog, _Catalog):
        return None
    namespace = Catalog.namespace_to_string(Catalog.namespace_from(identifier))
    parameters = {
        "catalog": catalog.name,
        "namespace": namespace,
        "name": Catalog.table_name_from(identifier),
    }
    statement = catalog._rows_statement(by_name=True)
    reader = _sqlite_reader(catalog)
    if reader is None:
        with catalog.engine.connect() as connection:
            row = connection.execute(statement, parameters).first()
        return None if row is None else row.metadata_location
    rows = _run_compiled(catalog, reader, parameters, "a table lookup", parameters["name"])
    return rows[0][2] if rows else None


def _run_compiled(
    catalog: _Catalog, compiled: tuple, parameters: dict[str, str], what: str, table: str | None = None
) -> list[tuple]:
    """The rows of a compiled query (connection, SQL, parameter names in order, fixed values) run
    with ``parameters`` on the plain ``sqlite3`` connection; a lock held past the busy timeout is
    CatalogBusyError naming ``what`` (and ``table``)."""
    connection, sql, names, fixed = compiled
    try:
        return connection.execute(
            sql, [parameters[n] if n in parameters else fixed[n] for n in names]
        ).fetchall()
    except sqlite3.OperationalError as error:
        if not is_busy(error):
            raise
        raise busy_error(catalog.engine.url.database, what, table) from None


class _TableRow(NamedTuple):
    """A row of the catalog's table list, as the SQLAlchemy query returns it."""

    table_namespace: str
    table_name: str
    metadata_location: str | None


def _sqlite_namespace_rows(catalog: _Catalog, parameters: dict[str, str]) -> list[_TableRow] | None:
    """The rows of every table of ``parameters["namespace"]`` (``load_tables``' query) on this
    thread's plain ``sqlite3`` connection (autocommit: every commit made before it is seen);
    None for another database. A maintenance pass lists its namespace each time, and
    SQLAlchemy's pooled connection and result cost several times the query."""
    reader = _sqlite_reader(catalog)
    if reader is None:
        return None
    listing = _compiled_on(catalog, reader[0], "listing", catalog._rows_statement(by_name=False))
    return [_TableRow(*row) for row in _run_compiled(catalog, listing, parameters, "a table listing")]


def _compiled_on(catalog: _Catalog, connection: sqlite3.Connection, name: str, statement) -> tuple:
    """(connection, SQL, parameter names in order, fixed parameter values) of ``statement``
    compiled once for this thread's plain connection and kept under ``name``."""
    local = catalog.__dict__["_sqlite_readers"]
    kept = getattr(local, name, None)
    if kept is None or kept[0] is not connection:
        compiled = statement.compile(dialect=catalog.engine.dialect)
        kept = (connection, str(compiled), list(compiled.positiontup or ()), dict(compiled.params))
        setattr(local, name, kept)
    return kept


def _swap_on_sqlite(catalog: _Catalog, values: dict[str, str]) -> int | None:
    """The rows the swap of a table's metadata location changed (1, or 0 when another commit
    came first), run on this thread's plain ``sqlite3`` connection to the catalog (autocommit:
    the one statement is its own transaction); None for another database. The statement is the
    one SQLAlchemy runs (compiled once); SQLAlchemy's connection pool and transaction around it
    cost more than the statement."""
    reader = _sqlite_reader(catalog)
    if reader is None:
        return None
    connection, sql, names, _ = _compiled_on(catalog, reader[0], "swap", catalog._swap_statement())
    try:
        return connection.execute(sql, [values[n] for n in names]).rowcount
    except sqlite3.OperationalError as error:
        if not is_busy(error):
            raise
        raise busy_error(catalog.engine.url.database, "a commit", values["name"]) from None


def _sqlite_reader(catalog: _Catalog):
    """(sqlite3 connection, SQL, parameter names in order, fixed parameter values) of the table-row
    query on this thread's own connection to the catalog's SQLite file; None for another database
    or an in-memory one. A connection is never shared across threads or a fork."""
    url = catalog.engine.url
    if catalog.engine.dialect.name != "sqlite" or not url.database or url.database == ":memory:":
        return None
    local = catalog.__dict__.get("_sqlite_readers")
    if local is None:
        local = catalog.__dict__.setdefault("_sqlite_readers", threading.local())
    reader = getattr(local, "reader", None)
    if reader is not None and reader[0] == os.getpid():
        return reader[1]
    compiled = catalog._rows_statement(by_name=True).compile(dialect=catalog.engine.dialect)
    names = list(compiled.positiontup or ())
    fixed = {n: v for n, v in compiled.params.items() if n not in ("catalog", "namespace", "name")}
    connection = sqlite3.connect(
        url.database, isolation_level=None, check_same_thread=True, timeout=BUSY_TIMEOUT_SECONDS
    )
    connection.execute("PRAGMA synchronous=NORMAL")  # as the catalog's own connections (swaps)
    local.reader = (os.getpid(), (connection, str(compiled), names, fixed))
    return local.reader[1]
