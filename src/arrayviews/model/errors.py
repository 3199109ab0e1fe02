"""The exception types every layer raises, so callers can catch arrayviews errors by kind."""

from __future__ import annotations

from arrayviews.model.text_lines import lines, pointer, position


class ArrayViewsError(Exception):
    """Base class of every error arrayviews raises on purpose."""


class ParseError(ArrayViewsError, ValueError):
    """Text (a schema, an expression or a statement) could not be parsed.

    ``line`` and ``column`` are 1-based positions in the text that was given; ``expected`` lists
    what the parser would have accepted there.
    """

    def __init__(
        self,
        message: str,
        *,
        text: str = "",
        line: int | None = None,
        column: int | None = None,
        expected: tuple[str, ...] = (),
    ) -> None:
        self.text = text
        self.line = line
        self.column = column
        self.expected = expected
        self.reason = message
        super().__init__(self._render())

    @classmethod
    def at(cls, message: str, text: str, offset: int, expected: tuple[str, ...] = ()) -> ParseError:
        """The error at ``offset`` of ``text`` (its line and column counted as :mod:`text_lines` does)."""
        line, column = position(text, offset)
        return cls(message, text=text, line=line, column=column, expected=expected)

    def _render(self) -> str:
        if self.line is None or self.column is None:
            return self.reason
        shown = lines(self.text)
        source = shown[self.line - 1] if 0 < self.line <= len(shown) else ""
        message = f"{self.reason} at line {self.line}, column {self.column}\n  {source}\n  {pointer(source, self.column)}"
        if self.expected:
            message += "\nexpected one of: " + ", ".join(self.expected)
        return message


class ValidationError(ArrayViewsError, ValueError):
    """Input data was rejected before anything was written; the array is unchanged."""

    def __init__(self, message: str, *, array: str | None = None, column: str | None = None, value=None):
        self.array = array
        self.column = column
        self.value = value
        super().__init__(message)


class SchemaError(ValidationError):
    """A schema is malformed or inconsistent (bad ranges, duplicate names, unknown types), or names a
    dimension or attribute the array does not have."""

    def __init__(self, message: str, **details) -> None:
        super().__init__(message, **details)


class ConflictError(ValidationError):
    """A batch would overwrite cells that already exist (and ``on_conflict`` was ``"error"``)."""


class NotFoundError(ArrayViewsError, KeyError):
    """An array, view, version or file that was asked for does not exist."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class MissingFileError(NotFoundError, FileNotFoundError):
    """A data file of the warehouse is gone (deleted by hand: the warehouse is damaged, and
    ``arrayviews check`` says how to repair it). Still a FileNotFoundError, which readers that retry
    after another process's compaction look for."""


class AlreadyExistsError(ArrayViewsError, ValueError):
    """An array or view with that name already exists."""


class CommitConflictError(ArrayViewsError, RuntimeError):
    """Another writer committed to the same array first; nothing of this write was committed."""


class CatalogBusyError(ArrayViewsError, RuntimeError):
    """The catalog database stayed locked by another process for longer than its busy timeout
    (``storage.catalog.BUSY_TIMEOUT_SECONDS``); the statement that waited changed nothing, so the
    operation can simply be retried. ``table`` names the table being committed, when known."""

    def __init__(self, message: str, *, table: str | None = None) -> None:
        self.table = table
        super().__init__(message)


class ExecutionError(ArrayViewsError, RuntimeError):
    """A Spark job failed for a reason arrayviews has no error of its own for (a failed task, a lost
    executor, a file Spark could not read). The message is one line; ``details`` keeps Spark's full
    report (Python and Java stack traces) for whoever needs it."""

    def __init__(self, message: str, *, details: str = "") -> None:
        self.details = details
        super().__init__(message)


class RangeError(ArrayViewsError, ArithmeticError):
    """A result cannot be represented exactly in its type (an int64 sum beyond int64, a float sum
    beyond float64 or beyond the precision an exact sum keeps); nothing was written. ``array`` names
    the array or view, ``column`` the attribute and ``value`` the value that does not fit."""

    def __init__(self, message: str, *, array: str | None = None, column: str | None = None, value=None):
        self.array = array
        self.column = column
        self.value = value
        super().__init__(message)


class MaintenanceError(ArrayViewsError, RuntimeError):
    """A maintenance pass (``MAINTAIN``) could not maintain some views; the others were maintained.
    ``views`` maps each failed view to its message and ``report`` is the whole pass
    (``scheduling.maintenance_pass.MaintenancePass``)."""

    def __init__(self, message: str, *, views: dict[str, str], report: object = None) -> None:
        self.views = dict(views)
        self.report = report
        super().__init__(message)
