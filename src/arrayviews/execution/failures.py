"""Errors that cross the Spark boundary, translated at one point into arrayviews' own errors.

Inside a task, :func:`reporting` turns an arrayviews error into a one-line carrier message
(JSON: the error's class name, message, array, column, value and position) that survives Spark's
trip from the Python worker through the JVM to the driver. On the driver, :func:`translated` (a
decorator and context manager applied to the public API) catches Py4J and PySpark exceptions and
raises the carried error again, with its own type and message; any other failure of a Spark job
becomes an :class:`~arrayviews.model.errors.ExecutionError` whose message is one line (the Python
exception of the task, or the root cause of the Java one) and whose ``details`` keep Spark's report.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TypeVar

from arrayviews.model import errors

_START, _END = "<<arrayviews-error:", ":arrayviews-error>>"
_CARRIED = re.compile(re.escape(_START) + r"([A-Za-z0-9+/=]+)" + re.escape(_END))
#: Attributes of arrayviews errors that travel with them (JSON values only).
_FIELDS = ("array", "column", "value", "text", "line", "reason", "expected", "details")

F = TypeVar("F", bound=Callable)


class TaskFailure(RuntimeError):
    """Raised inside a Spark task to carry an arrayviews error to the driver."""


def carry(error: errors.ArrayViewsError) -> TaskFailure:
    """The exception a task raises so that the driver can raise ``error`` again."""
    payload = {"type": type(error).__name__, "message": str(error), "fields": {}}
    for name in _FIELDS:
        if name in vars(error):
            payload["fields"][name] = _plain(vars(error)[name])
    encoded = base64.b64encode(json.dumps(payload).encode()).decode()
    return TaskFailure(f"{_START}{encoded}{_END} {type(error).__name__}: {_first_line(str(error))}")


def _plain(value: object) -> object:
    """``value`` as something JSON keeps (numpy scalars as Python numbers, others as text)."""
    if hasattr(value, "item") and callable(value.item):
        with suppress(TypeError, ValueError):
            value = value.item()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return repr(value)


@contextmanager
def reporting() -> Iterator[None]:
    """Run task code so that an arrayviews error it raises reaches the driver as itself."""
    try:
        yield
    except errors.ArrayViewsError as error:
        raise carry(error) from None


def _rebuilt(encoded: str) -> errors.ArrayViewsError | None:
    """The error a carrier message stands for; only arrayviews' own error classes are rebuilt."""
    try:
        payload = json.loads(base64.b64decode(encoded))
    except (ValueError, TypeError):
        return None
    cls = getattr(errors, str(payload.get("type")), None)
    if not (isinstance(cls, type) and issubclass(cls, errors.ArrayViewsError)):
        return None
    error = cls.__new__(cls)
    Exception.__init__(error, payload.get("message", ""))
    fields = dict(payload.get("fields", {}))
    if "expected" in fields and isinstance(fields["expected"], list):
        fields["expected"] = tuple(fields["expected"])
    for name, value in fields.items():
        setattr(error, name, value)
    return error


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


#: The class name a Java exception's text starts with (``java.lang.RuntimeException: ``).
_JAVA_CLASS = re.compile(r"^(?:[a-z_][\w$]*\.)+([A-Z][\w$]*(?:Exception|Error))\s*:\s*")


def _without_java_class(line: str) -> str:
    """A Java cause's message without its class in front (an exception's name says nothing a user
    acts on; an error's short name, such as OutOfMemoryError, stays). ``details`` keep it whole."""
    found = _JAVA_CLASS.match(line)
    if found is None or not line[found.end() :]:
        return line
    kept = f"{found.group(1)}: " if found.group(1).endswith("Error") else ""
    return kept + line[found.end() :]


def _summary(error: BaseException) -> str:
    """One line saying why a Spark job failed: the task's Python exception, or the root Java cause."""
    text = str(error)
    python = [line for line in text.splitlines() if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b.*", line)]
    if "Traceback (most recent call last)" in text and python:
        return python[-1].strip()
    java = getattr(error, "java_exception", None)
    if java is not None:
        try:
            while java.getCause() is not None and java.getCause() != java:
                java = java.getCause()
            return _without_java_class(_first_line(str(java.toString())))
        except Exception:  # noqa: BLE001 - the JVM may be gone: fall back to the text we have
            pass
    line = _first_line(text)
    return re.sub(r"\s*SQLSTATE: \w+\.?", "", line)


def translate(error: BaseException) -> errors.ArrayViewsError:
    """The arrayviews error for an exception raised by a Spark action on the driver."""
    text = str(error)
    match = _CARRIED.search(text)
    if match is not None:
        rebuilt = _rebuilt(match.group(1))
        if rebuilt is not None:
            return rebuilt
    return errors.ExecutionError(f"a Spark job failed: {_summary(error)}", details=text)


#: How Spark says a file it was to read does not exist: a path given to a read, or a file gone
#: while a job read it (and the Java exception beneath either).
_FILE_GONE_MARKS = ("[PATH_NOT_FOUND]", "FILE_NOT_EXIST", "java.io.FileNotFoundException")


def file_gone(error: BaseException) -> bool:
    """Whether ``error`` says that a data file being read does not exist: raised in this process
    (FileNotFoundError), by a Spark action, or translated from one (ExecutionError). Another
    process's compaction and expiry delete files a plan made a moment earlier still names."""
    if isinstance(error, FileNotFoundError):
        return True
    if isinstance(error, errors.ExecutionError):
        text = f"{error} {getattr(error, 'details', '')}"
    elif isinstance(error, _spark_errors()):
        text = str(error)
    else:
        return False
    return any(mark in text for mark in _FILE_GONE_MARKS)


def _spark_errors() -> tuple[type[BaseException], ...]:
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (Py4JError, PySparkException)


#: PySpark's loggers that print a failed query's Java stack trace (as JSON) on standard error when
#: the exception is made, before arrayviews can translate it.
PYSPARK_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
_quiet_lock = threading.Lock()
_quiet_depth = 0
_quiet_installed = False


class _SilentWhileArrayviewsRuns(logging.Filter):
    """Drops the records of PySpark's error loggers while any arrayviews call runs, in any thread.
    A filter, not a level: setting a logger's level clears the level cache of every logger of the
    process, which each public call (an append, a maintenance pass) paid twice on entry and twice
    on exit."""

    def filter(self, record: logging.LogRecord) -> bool:
        return _quiet_depth == 0


def _install_quiet_filter() -> None:
    global _quiet_installed
    from pyspark.logger import PySparkLogger  # its own logger class: a plain one breaks its calls

    with _quiet_lock:
        if not _quiet_installed:
            silent = _SilentWhileArrayviewsRuns()
            for name in PYSPARK_ERROR_LOGGERS:
                PySparkLogger.getLogger(name).addFilter(silent)
            _quiet_installed = True


@contextmanager
def _pyspark_errors_unlogged() -> Iterator[None]:
    """While arrayviews runs (any thread, nested calls), PySpark's error loggers stay silent: the
    error reaches the user once, translated, instead of also as a Java stack trace on stderr."""
    global _quiet_depth
    if not _quiet_installed:
        _install_quiet_filter()
    with _quiet_lock:
        _quiet_depth += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_depth -= 1


def set_pyspark_error_log_level(level: int) -> None:
    """The level of PySpark's error loggers outside arrayviews' own calls (inside them they stay
    silent, whatever their level)."""
    from pyspark.logger import PySparkLogger

    for name in PYSPARK_ERROR_LOGGERS:
        PySparkLogger.getLogger(name).setLevel(level)


@contextmanager
def translated_errors() -> Iterator[None]:
    """Raise arrayviews errors instead of the Py4J and PySpark exceptions of the block."""
    with _pyspark_errors_unlogged():
        try:
            yield
        except _spark_errors() as error:
            raise translate(error) from None


def translated(function: F) -> F:
    """``function`` raising arrayviews errors instead of Py4J and PySpark exceptions."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with translated_errors():
            return function(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def translating(cls: type) -> type:
    """A class decorator: every public method (and property) of ``cls`` itself translates errors."""
    for name, member in list(vars(cls).items()):
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            setattr(
                cls,
                name,
                property(
                    translated(member.fget) if member.fget else None,
                    member.fset,
                    member.fdel,
                    member.__doc__,
                ),
            )
        elif isinstance(member, staticmethod | classmethod):
            setattr(cls, name, type(member)(translated(member.__func__)))
        elif callable(member):
            setattr(cls, name, translated(member))
    return cls
