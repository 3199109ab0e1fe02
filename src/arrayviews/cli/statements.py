"""What the command line tells about the statement language: a summary of the statements (for
``arrayviews sql --help`` and the shell's ``\\help``) and the keywords of the grammar (for completion)."""

from __future__ import annotations

import functools
import re

#: One line per statement form, grouped by relation kind (docs/language.md has the full table).
STATEMENT_SUMMARY: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "arrays",
        (
            "CREATE ARRAY A <v:double, w:int64 NULL> [i=1:100:10; j=0:*:50]",
            "INSERT INTO A [(i, j, v, w)] VALUES (1, 2, 0.5, 3), ...",
            "LOAD A FROM 'cells.parquet' [AS CSV|PARQUET]",
            "DELETE FROM A  |  DELETE FROM subarray(A, lo..., hi...)",
            "SELECT * | a, b [INTO B] FROM <array expression> [WHERE condition]",
            "DROP ARRAY A",
        ),
    ),
    (
        "array views",
        (
            "CREATE ARRAY VIEW V [WITH CHUNKS (n, ...)] AS SELECT ... SIMILARITY JOIN ... WITH SHAPE ... GROUP BY ...",
            "CREATE ARRAY VIEW W AS SELECT * FROM window(A, 1, 1, 1, 1, avg(v))",
            "REFRESH VIEW V [USING AUTO|FULL|BASELINE] [ON base, ...]  |  VERIFY VIEW V  |  SHOW STATUS OF V",
            "SELECT ... SIMILARITY JOIN ... WITH SHAPE ... GROUP BY ... [USING VIEW V | USING BASE ARRAYS]",
            "ALTER VIEW V SET REFRESH LIMIT n SECONDS | NONE  (kept by MAINTAIN)",
            "MAINTAIN [ALL]  (one maintenance pass: stream views, refresh limits, with ALL every stale view)",
            "DROP VIEW V",
        ),
    ),
    (
        "uncertain arrays",
        (
            "CREATE UNCERTAIN ARRAY U <flux:gaussian> [x=0:99:10; y=0:99:10] [STORE ALL|MEAN|MULTIPLE [STEP ...]]",
            "INSERT INTO U VALUES (x, x_sigma, y, y_sigma, flux, flux_sigma), ...  |  LOAD U FROM '...'",
            "SELECT * FROM subarray(U, lo..., hi..., THRESHOLD p)",
            "SELECT * FROM structure_join(U, V, delta, threshold)",
        ),
    ),
    (
        "streams and stream views",
        (
            "CREATE STREAM M (ts timestamp, src string, loss int) PARTITION LENGTH 60 TIME COLUMN ts",
            "INSERT INTO M VALUES ('2015-01-01 00:00:10', 'x', 12), ...  |  LOAD M FROM 'rows.parquet'",
            "CREATE VIEW H AS INITIALIZE H[i] AS ... UPDATE H[j] AS ... PARTITION LENGTH n",
            "CREATE VIEW P AS SELECT g, count(*) FROM M PATTERN [a, b+] WHERE ... GROUP BY g",
            "CREATE VIEW W AS SELECT g, max(x) FROM M [WINDOW 10 MINUTES] GROUP BY g",
            "ALTER VIEW H SET LATENESS n PARTS  |  DROP VIEW H  |  DROP STREAM M",
            "SELECT ... FROM <stream or stream view> ...  (any Spark SQL query)",
            "WITH t AS (SELECT ...) SELECT ... FROM t ...  (Spark SQL with common table expressions)",
        ),
    ),
    (
        "everything",
        (
            "SHOW ARRAYS | VIEWS | STREAMS | RELATIONS",
            "SHOW VERSIONS | CHUNKS | SCHEMA OF A",
            "EXPLAIN <statement>",
        ),
    ),
)

#: Array functions (inside FROM and as arguments of each other).
ARRAY_FUNCTIONS = (
    "subarray",
    "filter",
    "project",
    "apply",
    "regrid",
    "aggregate",
    "join",
    "window",
    "structure_join",
)


def summary_lines() -> list[str]:
    """The statement summary as indented lines (plain text)."""
    lines = ["Statements (separated by ';'; see docs/language.md):"]
    for group, forms in STATEMENT_SUMMARY:
        lines.append(f"  {group}:")
        lines.extend(f"    {form}" for form in forms)
    lines.append(f"  array functions: {', '.join(ARRAY_FUNCTIONS)}")
    return lines


_WORD = re.compile(r"[a-z]+(\\s\+[a-z]+)*")
_SEPARATOR = re.compile(r"\(\?:[^()]*\)\+")


@functools.cache
def keywords() -> tuple[str, ...]:
    """The keywords of the statement grammar in upper case (``PARTITION LENGTH`` as two words), read
    from the grammar's terminals, so a keyword a new statement adds is completed without a change here."""
    from arrayviews.language.source import _parser

    words = set()
    for terminal in _parser().terminals:
        pattern = terminal.pattern.value
        if terminal.priority != 2 or not terminal.name.replace("_", "").isalpha():
            continue
        # the words' separator, spaces or comments (``(?:\s|--...|/*...*/)+``), read as one space
        core = _SEPARATOR.sub(lambda _: "\\s+", pattern.split("(?!")[0])
        if _WORD.fullmatch(core):
            words.add(core.replace("\\s+", " ").upper())
    return tuple(sorted(words))
