"""Other processes on the same warehouse, cheaply: ``fork`` the test process (which has the shared
Spark session) instead of starting a new interpreter and a new Spark driver per process.

A forked child gets its own connection to the Spark JVM (so children and parent never share a
socket), opens its own catalog connection (``arrayviews.connect``), runs one function and ends with
``os._exit`` (no pytest teardown in the child). Its result, or its error, comes back through a file.
A child may also be told to SIGKILL itself at its k-th fault checkpoint (a real ``kill -9``: no
handler, ``finally`` or cleanup runs)."""

from __future__ import annotations

import collections
import json
import os
import signal
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from arrayviews.model import faults

_kept_connections: list = []


def _own_spark_connection(spark) -> None:
    """Give this (forked) process its own py4j connection to the JVM: the inherited ones stay
    referenced (closing them would close the parent's sockets) but unused."""
    if spark is None or not hasattr(spark, "sparkContext"):
        return
    client = spark.sparkContext._gateway._gateway_client
    _kept_connections.append((client.deque, client.thread_connection))
    client.thread_connection = threading.local()
    client.deque = collections.deque()


@dataclass
class Child:
    pid: int
    result_file: Path

    def wait(self) -> Outcome:
        _, status = os.waitpid(self.pid, 0)
        if os.WIFSIGNALED(status):
            return Outcome(os.WTERMSIG(status) == signal.SIGKILL, None, None, None)
        code = os.WEXITSTATUS(status)
        payload = json.loads(self.result_file.read_text()) if self.result_file.exists() else {}
        return Outcome(False, code, payload.get("value"), payload.get("error"), payload.get("reached", 0))


@dataclass
class Outcome:
    killed: bool
    code: int | None
    value: object
    error: str | None
    #: checkpoints the child passed (counted when it was given a kill point)
    reached: int = 0


def fork(
    spark, folder: Path, function: Callable[[], object], kill_at: int | None = None, label: str = "child"
) -> Child:
    """Run ``function()`` (which should call ``arrayviews.connect`` itself) in a forked process; its
    JSON-able return value or its error text comes back in ``Child.wait()``."""
    folder.mkdir(parents=True, exist_ok=True)
    result_file = folder / f"{label}-{os.getpid()}-{len(list(folder.iterdir()))}.json"
    pid = os.fork()
    if pid:
        return Child(pid, result_file)
    code = 0
    try:
        _own_spark_connection(spark)
        if kill_at is not None:
            faults.reset_count()
            os.environ[faults.KILL_ENVIRONMENT] = str(kill_at)
        value = function()
        reached = faults.reached() if kill_at is not None else 0
        result_file.write_text(json.dumps({"value": value, "reached": reached}, default=str))
    except BaseException:  # noqa: BLE001 - reported to the parent
        code = 1
        result_file.write_text(json.dumps({"error": traceback.format_exc()}))
    finally:
        os._exit(code)
