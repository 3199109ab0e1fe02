"""``arrayviews shell``: an interactive statement shell on one warm session (like ``psql`` or ``iquery``).

Line editing, history and completion are prompt_toolkit's. A statement may span lines and runs when a
line ends with ``;`` (outside strings and comments); a line starting with ``\\`` is a shell command
(``\\help``, ``\\q``, ``\\format``, ``\\d``). Every statement prints its result and the time it took;
an error prints one line and the shell goes on. Without a terminal (``arrayviews shell < script.sql``)
the same loop reads the lines of standard input, prints the error lines on standard error and exits
with status 1 when a statement failed.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings

from arrayviews.cli.render import FORMATS, print_text, show
from arrayviews.cli.statements import ARRAY_FUNCTIONS, keywords, summary_lines
from arrayviews.execution.failures import translated_errors
from arrayviews.model.errors import ArrayViewsError, MaintenanceError
from arrayviews.model.text_lines import LINE_BREAK

PROMPT = "arrayviews> "
CONTINUATION = "         -> "
#: Where the history is kept unless ``--history`` or ``$ARRAYVIEWS_HISTORY`` says otherwise.
DEFAULT_HISTORY = "~/.arrayviews_history"

SHELL_COMMANDS = (
    ("\\help, \\h, \\?", "this help"),
    ("\\q, \\quit, Ctrl-D", "leave the shell"),
    ("\\d", "list the relations (SHOW RELATIONS)"),
    ("\\format table|csv|json", "how relations are printed"),
    ("\\timing on|off", "print how long each statement took (on at start)"),
)


# -- where a statement ends --------------------------------------------------------------------------
def _code_end(text: str) -> str:
    """``text`` with comments and quoted parts removed, and ``"'"`` appended while a string, quoted
    name or block comment is open (so a ``;`` inside one never ends the statement)."""
    out: list[str] = []
    index, length = 0, len(text)
    while index < length:
        char = text[index]
        if char in "'\"`":
            index += 1
            while index < length and text[index] != char:
                index += 2 if text[index] == "\\" and char != "`" else 1
            if index >= length:
                return "".join(out) + "'"
            index += 1
        elif text.startswith("--", index):
            newline = LINE_BREAK.search(text, index)  # a '--' comment ends at '\n' or '\r'
            index = length if newline is None else newline.start()
        elif text.startswith("/*", index):
            close = text.find("*/", index + 2)
            if close == -1:
                return "".join(out) + "'"
            index = close + 2
        else:
            out.append(char)
            index += 1
    return "".join(out)


def is_complete(text: str) -> bool:
    """Whether the lines typed so far form something to run: a shell command, or statements whose
    last one ends with ``;``. Blank input is complete (it runs nothing)."""
    stripped = text.strip()
    if not stripped or stripped.startswith("\\"):
        return True
    return _code_end(text).rstrip().endswith(";")


def split_lines(lines: Iterable[str]) -> Iterator[str]:
    """Group input lines into units to run (statements ending with ``;``, or shell commands); what
    is left unterminated at the end of the input is run as well."""
    for _, unit in numbered_units(lines):
        yield unit


def numbered_units(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """The units of :func:`split_lines`, each with the number of the input line it starts on."""
    pending: list[str] = []
    first = 1
    for number, line in enumerate(lines, start=1):
        if not pending:
            first = number
            if line.strip().startswith("\\"):
                yield number, line.strip()
                continue
        pending.append(line.rstrip("\n"))
        text = "\n".join(pending)
        if is_complete(text):
            if text.strip():
                yield first, text
            pending = []
    if "\n".join(pending).strip():
        yield first, "\n".join(pending)


# -- completion -------------------------------------------------------------------------------------
#: Words after which a relation name stands (only names, and array functions after FROM, complete there).
NAME_CONTEXT = frozenset({"FROM", "INTO", "OF", "JOIN", "ARRAY", "VIEW", "STREAM", "LOAD", "TABLE"})


class StatementCompleter(Completer):
    """Completes the word before the cursor: after FROM, INTO, OF, JOIN, ... with relation names
    (and array functions after FROM), elsewhere also with the keywords of the grammar (in the case
    typed) and array functions."""

    def __init__(self, relation_names: Callable[[], Iterable[str]]) -> None:
        self._relation_names = relation_names

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        word = document.get_word_before_cursor(WORD=False)
        if not word or not (word[0].isalpha() or word[0] == "_"):
            return
        prefix = word.lower()
        lower = word.islower()
        before = document.text_before_cursor[: -len(word)].split()
        previous = before[-1].upper() if before else ""
        names_only = previous in NAME_CONTEXT
        seen = set()
        for name in sorted(set(self._relation_names())):
            if name.lower().startswith(prefix) and name not in seen:
                seen.add(name)
                yield Completion(name, -len(word), display_meta="relation")
        if names_only and previous != "FROM":
            return
        for function in ARRAY_FUNCTIONS:
            if function.startswith(prefix) and function not in seen:
                seen.add(function)
                yield Completion(function, -len(word), display_meta="function")
        if names_only:
            return
        for keyword in keywords():
            candidate = keyword.lower() if lower else keyword
            if keyword.lower().startswith(prefix) and candidate not in seen:
                seen.add(candidate)
                yield Completion(candidate, -len(word), display_meta="keyword")


def _enter_bindings() -> KeyBindings:
    """Enter runs the input when it is complete (see :func:`is_complete`), else starts a new line."""
    bindings = KeyBindings()

    @bindings.add("enter")
    def _(event) -> None:
        buffer = event.current_buffer
        if buffer.complete_state is not None and buffer.complete_state.current_completion is not None:
            buffer.apply_completion(buffer.complete_state.current_completion)
            return
        if is_complete(buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.insert_text("\n")

    return bindings


# -- the shell ---------------------------------------------------------------------------------------
class Shell:
    """One warm database and a loop of statements. ``connect`` opens the database on first use."""

    def __init__(
        self,
        connect: Callable[[], object],
        out: TextIO | None = None,
        output: str = "table",
        width: int | None = None,
        errors: TextIO | None = None,
    ) -> None:
        self._connect = connect
        self._db = None
        self.out = out or sys.stdout
        self.errors = errors or self.out  # where the error lines go (standard error for a script)
        self.failures = 0
        self.output = output
        self.width = width
        self.timing = True
        self.running = True

    @property
    def db(self):
        if self._db is None:
            self._db = self._connect()
        return self._db

    def say(self, text: str) -> None:
        print_text(text, self.out, self.width)

    def relation_names(self) -> list[str]:
        """Names of the relations (for completion); none while the database is not open yet."""
        if self._db is None:
            return []
        try:
            db = self._db
            names = [*db.arrays(), *db.views(), *db.uncertain_arrays(), *db.streams(), *db.stream_views()]
        except Exception:  # noqa: BLE001 - completion never breaks the line being typed
            return []
        return names

    def run(self, unit: str, line: int = 1) -> None:
        """Run one unit of input: a shell command, or statements (the last one's result is shown);
        ``line`` is where the unit starts in a script, so errors give their line in the script."""
        text = unit.strip()
        if not text:
            return
        if text.startswith("\\"):
            self.command(text)
            return
        started = time.perf_counter()
        try:
            with translated_errors():  # showing a Spark SQL result runs its Spark job
                result = self.db.sql("\n" * (line - 1) + unit)
                show(result, output=self.output, file=self.out, width=self.width)
        except ArrayViewsError as error:
            if isinstance(error, MaintenanceError) and error.report is not None:
                show(error.report, output=self.output, file=self.out, width=self.width)  # what did run
            message = str(error)
            self.fail(f"error: {message.splitlines()[0] if message else type(error).__name__}")
        except KeyboardInterrupt:
            self._cancel()
            self.say("cancelled")
        except Exception as error:  # noqa: BLE001 - a bug: one line, and the shell goes on
            self.fail(f"internal error: {type(error).__name__}: {error}")
        if self.timing:
            self.say(f"({time.perf_counter() - started:.3f} s)")

    def fail(self, text: str) -> None:
        """Report a failed unit in one line (counted: a script with failures exits with status 1)."""
        self.failures += 1
        if self.errors is self.out:
            print_text(text, self.out, self.width)
        else:  # standard error: one line, never folded
            self.errors.write(text + "\n")

    def command(self, text: str) -> None:
        """A shell command (``\\help``, ``\\q``, ...)."""
        name, _, argument = text.partition(" ")
        name, argument = name.lower(), argument.strip().lower()
        if name in ("\\q", "\\quit", "\\exit"):
            self.running = False
        elif name in ("\\help", "\\h", "\\?"):
            width = max(len(c) for c, _ in SHELL_COMMANDS)
            lines = ["Shell commands:"] + [f"  {c.ljust(width)}  {what}" for c, what in SHELL_COMMANDS]
            lines += [
                "",
                "Statements end with ';' and may span lines; Tab completes words.",
                *summary_lines(),
            ]
            self.say("\n".join(lines))
        elif name == "\\d":
            self.run("SHOW RELATIONS;")
        elif name == "\\format" and argument in FORMATS:
            self.output = argument
            self.say(f"format {argument}")
        elif name == "\\timing" and argument in ("on", "off"):
            self.timing = argument == "on"
            self.say(f"timing {argument}")
        else:
            self.fail(f"error: unknown shell command {text!r}; \\help lists them")

    def _cancel(self) -> None:
        if self._db is not None:
            with contextlib.suppress(Exception):  # cancelling is best effort
                self._db.spark.sparkContext.cancelAllJobs()

    # -- loops ------------------------------------------------------------------------------------
    def loop(self, session: PromptSession) -> None:
        """Read and run units until ``\\q`` or end of input (Ctrl-D); Ctrl-C drops the line being typed."""
        while self.running:
            try:
                unit = session.prompt(PROMPT)
            except KeyboardInterrupt:
                continue
            except EOFError:
                break
            self.run(unit)

    def run_lines(self, lines: Iterable[str]) -> None:
        """Run the statements of a script given line by line (no terminal)."""
        for line, unit in numbered_units(lines):
            if not self.running:
                break
            self.run(unit, line)


def without_byte_order_mark(lines: Iterable[str]) -> Iterator[str]:
    """``lines`` without a byte order mark at the start of the first (a script saved as "UTF-8 with
    BOM" by some Windows editors), which would otherwise be read as part of the first word."""
    for number, line in enumerate(lines):
        yield line.removeprefix("\ufeff") if number == 0 else line


def prompt_session(shell: Shell, history: History | None = None, **io) -> PromptSession:
    """The prompt_toolkit session of a shell: multi-line input, history, completion of words."""
    return PromptSession(
        multiline=True,
        key_bindings=_enter_bindings(),
        completer=StatementCompleter(shell.relation_names),
        complete_while_typing=False,
        history=history or InMemoryHistory(),
        prompt_continuation=lambda width, line_number, wrapped: CONTINUATION,
        enable_history_search=True,
        **io,
    )


def history_file(path: str | None) -> FileHistory:
    location = Path(os.path.expanduser(path or os.environ.get("ARRAYVIEWS_HISTORY") or DEFAULT_HISTORY))
    location.parent.mkdir(parents=True, exist_ok=True)
    return FileHistory(str(location))


def run_shell(connect: Callable[[], object], history: str | None = None, output: str = "table") -> None:
    """The ``arrayviews shell`` command: connect once, then read statements until ``\\q``."""
    if not sys.stdin.isatty():  # a script: every statement runs; errors on standard error, status 1
        shell = Shell(connect, output=output, errors=sys.stderr)
        shell.run_lines(without_byte_order_mark(sys.stdin))
        if shell.failures:
            sys.exit(1)
        return
    shell = Shell(connect, output=output)
    shell.say("arrayviews shell: statements end with ';', \\help for help, \\q to leave")
    started = time.perf_counter()
    database = shell.db
    shell.say(f"connected to {database.warehouse.location} in {time.perf_counter() - started:.1f} s")
    shell.loop(prompt_session(shell, history_file(history)))
