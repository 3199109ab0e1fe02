"""One Iceberg snapshot that removes some data files and adds others, with summary properties: the
single commit path of array tables and stream part tables."""

from __future__ import annotations

from collections.abc import Sequence

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io.pyarrow import parquet_files_to_data_files
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from arrayviews.model.errors import CommitConflictError


def commit_snapshot(
    table: Table, added: Sequence[str], removed: Sequence[DataFile], properties: dict[str, str], label: str
) -> None:
    """Commit ``added`` Parquet files and the removal of ``removed`` as one snapshot carrying
    ``properties``; a snapshot with nothing to add or remove is still made (an append of no files).
    Raises CommitConflictError, naming ``label``, if another writer committed first."""
    try:
        with table.transaction() as transaction:
            data_files = list(parquet_files_to_data_files(table.io, transaction.table_metadata, iter(added)))
            update = transaction.update_snapshot(snapshot_properties=properties)
            # Pure appends merge small manifests as they go, so planning stays fast after many
            # batches; anything that removes files is an overwrite.
            producer = update.overwrite() if removed else update.merge_append()
            with producer as snapshot:
                for data_file in removed:
                    snapshot.delete_data_file(data_file)
                for data_file in data_files:
                    snapshot.append_data_file(data_file)
    except CommitFailedException as error:
        raise CommitConflictError(f"{label}: concurrent commit, nothing committed ({error})") from error
