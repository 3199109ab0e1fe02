"""A data file gone from under a read of an uncertain array, reported as arrays report it: the
warehouse is damaged, naming the uncertain array, its version and the file."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar

from pyarrow.fs import FileType

from arrayviews.execution.failures import file_gone
from arrayviews.model.errors import MissingFileError, NotFoundError
from arrayviews.storage.files import filesystem
from arrayviews.storage.uncertain_table import UncertainTable

T = TypeVar("T", bound=type)

#: What a result object reads: (table, version) pairs, asked only once a read failed.
Reads = Callable[[object], Sequence[tuple[UncertainTable, int]]]


def _absent(uri: str) -> bool:
    fs, inner = filesystem(uri)
    return fs.get_file_info(inner).type == FileType.NotFound


def missing_file(reads: Sequence[tuple[UncertainTable, int]]) -> NotFoundError | None:
    """The error for the first data file of the versions read that is gone (None when all are
    there: the failure was another file's, e.g. a batch the user gave)."""
    for table, version in reads:
        if version == 0:
            continue
        table.refresh()  # an array dropped meanwhile raises NotFoundError naming it
        if version not in {v.version for v in table.array.versions()}:
            try:  # expired (by this process or another): the error naming the versions held
                table.layout_at(version)
            except NotFoundError as expired:
                return expired
        for uri in table.files(version):
            if _absent(uri):
                error = MissingFileError(
                    f"{table.label}: a data file of version {version} is missing ({uri}): the warehouse "
                    "is damaged; run `arrayviews check` (with --repair to roll the array back to its "
                    "newest intact version)"
                )
                error.array, error.filename = table.name, uri
                return error
    return None


def naming_missing_files(reads: Reads) -> Callable[[T], T]:
    """A class decorator: every public method of the class turns a data file found gone (in this
    process, or by a Spark job) into the error of :func:`missing_file` for ``reads(self)``."""

    def decorate(cls: T) -> T:
        for name, member in list(vars(cls).items()):
            if name.startswith("_") or isinstance(member, property | staticmethod | classmethod):
                continue
            if callable(member):
                setattr(cls, name, _named(member, reads))
        return cls

    return decorate


def _named(method: Callable, reads: Reads) -> Callable:
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except MissingFileError:
            raise
        except Exception as error:
            if not file_gone(error):
                raise
            better = missing_file(reads(self))
            if better is None:
                raise
            raise better from None

    return wrapper
