"""``arrayviews shell``: where statements end, completion, the prompt_toolkit app driven through a pipe,
and one real pseudo-terminal session of the command."""

from __future__ import annotations

import io
import os
import re
import sys
import threading
import time

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from arrayviews.cli.shell import Shell, StatementCompleter, is_complete, prompt_session, split_lines

ENDS = [
    ("SELECT * FROM A;", True),
    ("SELECT * FROM A", False),
    ("SELECT * FROM A; -- done", True),
    ("SELECT * FROM A -- not yet;", False),
    ("INSERT INTO M VALUES ('a;b', 1)", False),
    ("INSERT INTO M VALUES ('a;b', 1);", True),
    ("INSERT INTO M VALUES ('it''s;', 1)", False),
    ("INSERT INTO M VALUES ('it\\'s;', 1)", False),
    ("INSERT INTO M VALUES ('it\\'s', 1);", True),
    ("SELECT `a;b` FROM S", False),
    ("SELECT 1 /* ; */", False),
    ("SELECT 1 /* ; */ ;", True),
    ("SELECT 1 /* open ;", False),
    ("CREATE ARRAY A\n  <v:double>\n  [i=0:9:5];\n", True),
    ("\\q", True),
    ("", True),
]


@pytest.mark.parametrize(("text", "complete"), ENDS)
def test_a_statement_ends_with_a_semicolon_outside_strings_and_comments(text: str, complete: bool) -> None:
    assert is_complete(text) is complete


def test_lines_group_into_statements_and_commands() -> None:
    lines = [
        "CREATE ARRAY A\n",
        " <v:double> [i=0:9:5];\n",
        "\\help\n",
        "SELECT 1; SELECT\n",
        "2;\n",
        "SELECT 3",
    ]
    assert list(split_lines(lines)) == [
        "CREATE ARRAY A\n <v:double> [i=0:9:5];",
        "\\help",
        "SELECT 1; SELECT\n2;",
        "SELECT 3",
    ]


def _completions(text: str, names=("temperature", "Tiles")) -> list[str]:
    completer = StatementCompleter(lambda: list(names))
    return [
        c.text for c in completer.get_completions(Document(text), CompleteEvent(completion_requested=True))
    ]


def test_completion_of_keywords_functions_and_relation_names() -> None:
    assert _completions("SEL") == ["SELECT"]
    assert _completions("sel") == ["select"]
    assert _completions("SHOW ARR") == ["ARRAY", "ARRAYS"]
    assert _completions("SELECT * FROM te") == ["temperature"]
    assert _completions("SELECT * FROM t") == ["Tiles", "temperature"]  # a name stands after FROM
    assert _completions("SHOW SCHEMA OF T") == ["Tiles", "temperature"]
    found = _completions("SELECT * FROM A WHERE t")
    assert found[:2] == ["Tiles", "temperature"]  # relations first, then keywords in the case typed
    assert set(found[2:]) == {w.lower() for w in grammar_keywords() if w.startswith("T")} >= {"time", "true"}
    assert "partition length" in _completions("CREATE STREAM M (x int) part")


def grammar_keywords() -> set[str]:
    """The keywords grammar.lark declares (read from its text: priority-2 terminals of plain words)."""
    from pathlib import Path

    import arrayviews.language

    text = (Path(arrayviews.language.__file__).parent / "grammar.lark").read_text()
    found = re.findall(r"^[A-Z_]+\.2: /([a-z]+(?:\\s\+[a-z]+)*)\(\?!", text, re.MULTILINE)
    return {word.replace("\\s+", " ").upper() for word in found}
    assert "regrid" in _completions("SELECT * FROM reg")
    assert _completions("SELECT * FROM A WHERE v > 1") == []  # a number is no word to complete


# -- the application, driven through a pipe -------------------------------------------------------
def _screen(db, tmp_path, keys: str, width: int = 100) -> tuple[str, Shell]:
    """Type ``keys`` into the shell's prompt (pausing after each Tab, as completion runs
    asynchronously), then close the input (Ctrl-D); returns what the shell printed."""
    out = io.StringIO()
    shell = Shell(lambda: db, out=out, width=width)
    with create_pipe_input() as pipe:
        session = prompt_session(
            shell, FileHistory(str(tmp_path / "history")), input=pipe, output=DummyOutput()
        )

        def typist() -> None:
            for piece in re.split(r"(?<=\t)", keys):
                pipe.send_text(piece)
                if piece.endswith("\t"):
                    _completed(session, re.split(r"[\s(]", piece[:-1])[-1])
            time.sleep(0.5)
            pipe.close()

        typing = threading.Thread(target=typist)
        typing.start()
        shell.loop(session)
        typing.join()
    return out.getvalue(), shell


def _completed(session, word: str, wait: float = 20.0) -> None:
    """Wait until the prompt's buffer shows ``word`` typed and then completed (completion runs in
    the background: a fixed pause was too short on a loaded machine, and the next keys arrived
    before the completion)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and not session.default_buffer.text.endswith(word):
        time.sleep(0.02)
    while time.monotonic() < deadline and session.default_buffer.text.endswith(word):
        time.sleep(0.02)
    time.sleep(0.1)


def test_the_shell_runs_multiline_statements_times_them_and_survives_errors(db, tmp_path) -> None:
    keys = (
        "CREATE ARRAY temperature <t:float64> [i=0:9:5; j=0:9:5];\r"
        "INSERT INTO temperature VALUES\r  (1, 2, 20.5),\r  (7, 3, -4.25);\r"
        "SELECT * FROM tempe\t WHERE t > 0;\r"
        "SELECT * FROM nowhere;\r"
        "SHOW RELA\t;\r"
        "\\help\r"
        "\\q\r"
        "SHOW ARRAYS;\r"  # never read: the shell has left
    )
    screen, shell = _screen(db, tmp_path, keys)
    assert not shell.running
    times = re.findall(r"^\((\d+\.\d{3}) s\)$", screen, re.MULTILINE)
    assert len(times) == 5  # one per statement, errors included
    rows = re.findall(r"^\s*(\d+)\s+(\d+)\s+(-?[\d.]+)\s*$", screen, re.MULTILINE)
    assert rows == [("1", "2", "20.5")]  # the query: the tab completed the name, the filter kept one cell
    assert re.search(r"^error: .*nowhere", screen, re.MULTILINE)
    assert "temperature" in screen.split("error:")[1]  # SHOW RELATIONS after the error
    assert "\\q" in screen and "Statements" in screen  # the help
    history = (tmp_path / "history").read_text()
    assert "+INSERT INTO temperature VALUES\n+  (1, 2, 20.5),\n+  (7, 3, -4.25);" in history
    assert "SHOW ARRAYS" not in history
    assert db.array("temperature").to_numpy("t", fill=0.0)[7, 3] == -4.25


def test_shell_commands_change_the_output(db, tmp_path) -> None:
    keys = (
        "CREATE ARRAY A <v:int64> [i=0:9:5];\rINSERT INTO A VALUES (3, 30);\r"
        "\\timing off\r\\format json\rSELECT * FROM A;\r\\format csv\rSELECT * FROM A;\r\\nonsense\r"
    )
    screen, _ = _screen(db, tmp_path, keys)  # ends with the end of input (Ctrl-D)
    assert '[{"i": 3, "v": 30}]' in screen
    assert "i,v\n3,30\n" in screen
    assert "error: unknown shell command" in screen
    assert screen.count(" s)") == 2  # timing was on for the CREATE and the INSERT only


# -- a real terminal --------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_shell_command_in_a_pseudo_terminal(tmp_path) -> None:
    pexpect = pytest.importorskip("pexpect")
    environment = {
        **os.environ,
        "COLUMNS": "100",
        "LINES": "40",
        "ARRAYVIEWS_HISTORY": str(tmp_path / "h"),
        "PROMPT_TOOLKIT_NO_CPR": "1",
    }
    child = pexpect.spawn(
        sys.executable,
        ["-m", "arrayviews.cli.main", "--warehouse", str(tmp_path / "w"), "--master", "local[1]", "shell"],
        env=environment,
        dimensions=(40, 100),
        encoding="utf-8",
        timeout=180,
    )
    transcript = io.StringIO()
    child.logfile_read = transcript
    try:
        child.expect("arrayviews>")
        child.send("CREATE ARRAY grid <h:float64> [x=0:3:2; y=0:3:2];\r")
        child.expect(r"\(\d+\.\d{3} s\)")
        child.expect("arrayviews>")
        child.send("INSERT INTO grid VALUES\r")
        child.expect("->")  # a continuation line: the statement is not finished
        child.send("(0, 1, 12.5), (3, 3, [1]);\r")  # a parse error, reported in one line
        child.expect("error: ")
        child.expect("arrayviews>")
        child.send("INSERT INTO grid VALUES (0, 1, 12.5), (3, 3, 7.0);\r")
        child.expect(r"\(\d+\.\d{3} s\)")
        child.expect("arrayviews>")
        child.send("SELECT * FROM gr\t")
        time.sleep(1.0)  # completion runs asynchronously
        child.send(";\r")
        child.expect(r"\(\d+\.\d{3} s\)")
        child.expect("arrayviews>")
        child.send("\\q\r")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, transcript.getvalue()[-2000:]
    screen = re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-B]|\r", "", transcript.getvalue())
    assert re.search(r"error: .*line 2", screen), screen[-3000:]
    assert re.search(r"^\s*0\s+1\s+12\.5\s*$", screen, re.MULTILINE), screen[-3000:]
    assert re.search(r"^\s*3\s+3\s+7\.0\s*$", screen, re.MULTILINE), screen[-3000:]  # floats as read back
    assert "grid<h:float64>[x=0:3:2; y=0:3:2]" in screen
    assert "CREATE ARRAY grid" in (tmp_path / "h").read_text()
