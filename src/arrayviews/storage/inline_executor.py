"""pyiceberg's metadata work (manifest reads and writes of a commit, file planning) run in the
calling thread instead of handed to a thread pool.

pyiceberg submits each manifest read and write to a process-wide thread pool. In arrayviews that
work is small (a part table's commit writes two or three manifests of a few entries; manifest
entries are decoded once per process, ``storage.manifest_entries``) and it is Python holding the
GIL, so the hand-offs only added latency: a fifth of a commit of a stream view's part. arrayviews
does not read data files through pyiceberg (its readers are its own), so nothing parallel is lost
on a local disk. On a remote file system (HDFS, S3) a manifest read or write waits on the network,
where pyiceberg's threads overlap the waits: a process that opens a warehouse there gets the pool
back (``open_catalog`` decides, by the warehouse's location).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Executor, Future

from pyiceberg.utils.concurrent import ExecutorFactory


class InlineExecutor(Executor):
    """An executor that runs each task at once, in the thread that submits it."""

    def submit(self, fn: Callable, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:  # noqa: BLE001 - handed to the caller by future.result()
            future.set_exception(error)
        return future


def install() -> None:
    """Make pyiceberg's executor in this process the inline one (a forked child makes its own),
    unless a warehouse on a remote file system was opened in this process."""
    if _remote_opened:
        return
    ExecutorFactory._instance_pid = os.getpid()
    ExecutorFactory._instance = InlineExecutor()


_remote_opened = False


def use_threads() -> None:
    """Give pyiceberg its thread pool back for the rest of this process (a warehouse on a remote
    file system was opened: its metadata reads and writes wait on the network)."""
    global _remote_opened
    _remote_opened = True
    if isinstance(ExecutorFactory._instance, InlineExecutor):
        ExecutorFactory._instance = None  # pyiceberg makes its pool on the next request


__all__ = ["InlineExecutor", "install", "use_threads"]
