"""Command-line output never loses text: markup-like values, narrow terminals, CSV and JSON, --version,
and the statement list of ``sql --help``."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from arrayviews.cli.main import Context, cli
from arrayviews.cli.render import render

TRICKY = [
    "T<tmax:float64>[i=1:10:5; j=0:9:5]",
    "[bold]x[/bold]",
    ":smile: [red]alarm[/red]",
    "[link=http://a]b[/link] \\[escaped]",
    "a_very_long_value_without_any_space_that_cannot_wrap_at_a_word_boundary_" * 2,
]

_DRAWING = re.compile(r"[\s\u2500-\u257f]")


def squeezed(text: str) -> str:
    """Text without whitespace and box-drawing characters: folding may split a value over lines and
    boxes, but never drop a character of it."""
    return _DRAWING.sub("", text)


def frame_of_tricky_values() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "name": [f"r{k}" for k in range(len(TRICKY))],
            "value": TRICKY,
            "number": np.arange(len(TRICKY), dtype=np.int64) * 1000,
            "a_rather_long_column_name": [0.5] * len(TRICKY),
        }
    )


@pytest.mark.parametrize("width", [40, 60, 200])
def test_tables_keep_every_character_of_markup_like_values(width: int) -> None:
    frame = frame_of_tricky_values()
    text = render(frame, width=width)
    for line in text.splitlines():
        assert len(line) <= width, line
    flat = squeezed(text)
    for value in [*TRICKY, "a_rather_long_column_name", "4000"]:
        assert squeezed(value) in flat, value


def test_wide_rows_turn_vertical_on_narrow_terminals() -> None:
    frame = frame_of_tricky_values()
    narrow = render(frame, width=40)
    assert "row 1" in narrow and f"row {len(TRICKY)}" in narrow
    wide = render(frame, width=400)
    assert "row 1" not in wide
    # horizontally, the first value stands whole on one line with its row's other values
    assert any(TRICKY[0] in line and "r0" in line for line in wide.splitlines())


def test_text_results_are_printed_verbatim() -> None:
    for value in TRICKY[:4]:
        assert render(value, width=120).strip() == value


def test_csv_and_json_hold_every_row_and_value() -> None:
    frame = frame_of_tricky_values()
    rows = list(csv.DictReader(io.StringIO(render(frame, "csv"))))
    assert [r["value"] for r in rows] == TRICKY
    assert [int(r["number"]) for r in rows] == [0, 1000, 2000, 3000, 4000]
    records = json.loads(render(frame, "json"))
    assert [r["value"] for r in records] == TRICKY
    assert records[0] == {"name": "r0", "value": TRICKY[0], "number": 0, "a_rather_long_column_name": 0.5}
    many = pd.DataFrame({"k": range(50)})
    assert len(json.loads(render(many, "json"))) == 50  # no preview limit outside tables
    assert "50 rows in all" in render(many, "table")


def test_version_and_statement_help() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "arrayviews.cli.main", "--version"], capture_output=True, text=True, check=True
    )
    assert re.fullmatch(r"arrayviews \d+\.\d+\.\d+\S*\n", run.stdout)
    result = CliRunner().invoke(cli, ["sql", "--help"])
    assert result.exit_code == 0
    for form in ("CREATE ARRAY", "INSERT INTO", "SHOW VERSIONS", "CREATE STREAM", "REFRESH VIEW", "EXPLAIN"):
        assert form in result.output, form
    assert "table|csv|json" in result.output
    for word in statement_first_words():
        assert re.search(rf"^\s+(.*\|\s+)?{word}\b", result.output, re.MULTILINE), word


def statement_first_words() -> set[str]:
    """The keyword each statement of the grammar starts with (read from the grammar's rules)."""
    from arrayviews.language.source import _parser

    rules = _parser().rules
    kinds = {r.expansion[0].name for r in rules if r.origin.name == "statement"}
    words = set()
    for rule in rules:
        if rule.origin.name in kinds and rule.expansion and rule.expansion[0].is_term:
            words.add(rule.expansion[0].name)
    assert {"CREATE", "SHOW", "INSERT", "DROP"} <= words
    return words


def _run(db, *arguments: str, columns: int = 40) -> str:
    result = CliRunner(env={"COLUMNS": str(columns)}).invoke(
        cli, list(arguments), obj=Context.of(db), catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_cli_shows_dimensions_and_fits_narrow_terminals(db) -> None:
    _run(db, "sql", "CREATE ARRAY T <tmax:float64, note:float64> [i=1:10:5; j=0:9:5]")
    schema = _run(db, "sql", "SHOW SCHEMA OF T")
    assert squeezed(schema) == squeezed("T<tmax:float64, note:float64>[i=1:10:5; j=0:9:5]")
    _run(db, "sql", "INSERT INTO T VALUES (1, 0, 1.5, 2.0), (10, 9, -3.25, 4.0)")
    for command in (["arrays"], ["chunks", "T"], ["versions", "T"], ["sql", "SELECT * FROM T"]):
        text = _run(db, *command, columns=40)
        assert all(len(line) <= 40 for line in text.splitlines()), command
    listing = squeezed(_run(db, "arrays", columns=40))
    assert squeezed("T<tmax:float64, note:float64>[i=1:10:5; j=0:9:5]") in listing
    chunks = json.loads(_run(db, "chunks", "T", "--format", "json"))
    assert sum(c["cells"] for c in chunks) == 2
    cells = list(csv.DictReader(io.StringIO(_run(db, "sql", "SELECT * FROM T", "--format", "csv"))))
    assert [(int(c["i"]), int(c["j"]), float(c["tmax"])) for c in cells] == [(1, 0, 1.5), (10, 9, -3.25)]
    versions = json.loads(_run(db, "versions", "T", "--format", "json"))
    assert [v["version"] for v in versions] == [0, 1] or [v["version"] for v in versions] == [1]


def test_spark_sql_results_are_tables_not_object_names(db) -> None:
    text = _run(db, "sql", "SELECT 1 + 1 AS two, '[b]x[/b]' AS s", columns=80)
    assert "[b]x[/b]" in text and "2" in text and "DataFrame[" not in text
    records = json.loads(_run(db, "sql", "SELECT 1 + 1 AS two, '[b]x[/b]' AS s", "--format", "json"))
    assert records == [{"two": 2, "s": "[b]x[/b]"}]
