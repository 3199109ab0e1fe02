"""INSERT and LOAD with ON CONFLICT REPLACE | ERROR: the statement form of the arrays' on_conflict,
checked against a plain-Python dict of the cells each statement should leave."""

from __future__ import annotations

import pytest

from arrayviews import ConflictError, ParseError, ValidationError
from arrayviews.language.parser import parse_statements
from arrayviews.language.printer import to_text


def _cells(array) -> dict[tuple[int, int], int]:
    frame = array.to_pandas()
    return {(int(i), int(j)): int(v) for i, j, v in zip(frame["i"], frame["j"], frame["v"], strict=True)}


def test_insert_on_conflict_replace_overwrites_only_the_batch_cells_and_error_refuses(db):
    """Before: ON CONFLICT was a syntax error, and the conflict message told a statement's user
    to "pass on_conflict='replace'", which no statement could do."""
    db.sql("CREATE ARRAY grid <v:int64>[i=0:9:4; j=0:9:4]")
    db.sql("INSERT INTO grid VALUES (0, 0, 1), (3, 4, 2), (9, 9, 3)")
    expected = {(0, 0): 1, (3, 4): 2, (9, 9): 3}
    with pytest.raises(ConflictError, match="end the statement with ON CONFLICT REPLACE") as refused:
        db.sql("INSERT INTO grid VALUES (3, 4, 20), (5, 5, 7)")
    assert "on_conflict=" not in str(refused.value)
    with pytest.raises(ConflictError):
        db.sql("INSERT INTO grid VALUES (3, 4, 20) ON CONFLICT ERROR")
    grid = db.array("grid")
    assert grid.version == 1 and _cells(grid) == expected
    db.sql("insert into grid values (3, 4, 20), (5, 5, 7) on conflict replace")
    expected.update({(3, 4): 20, (5, 5): 7})
    grid = db.array("grid")
    assert grid.version == 2 and _cells(grid) == expected
    db.sql("INSERT INTO grid (v, j, i) VALUES (-1, 0, 0) ON CONFLICT REPLACE")
    expected[(0, 0)] = -1
    assert _cells(db.array("grid")) == expected


def test_load_on_conflict_replace_from_csv(db, tmp_path):
    db.sql("CREATE ARRAY loaded <v:int64>[i=0:9:4; j=0:9:4]")
    db.sql("INSERT INTO loaded VALUES (1, 1, 5), (2, 2, 6)")
    path = tmp_path / "patch.csv"
    path.write_text("i,j,v\n2,2,60\n8,0,80\n")
    with pytest.raises(ConflictError, match="ON CONFLICT REPLACE"):
        db.sql(f"LOAD loaded FROM '{path}'")
    assert db.array("loaded").version == 1
    db.sql(f"LOAD loaded FROM '{path}' AS CSV ON CONFLICT REPLACE")
    assert _cells(db.array("loaded")) == {(1, 1): 5, (2, 2): 60, (8, 0): 80}


def test_on_conflict_replace_is_refused_for_streams_and_uncertain_arrays_changing_nothing(db):
    db.sql("CREATE STREAM feed (ts timestamp, v bigint) PARTITION LENGTH 60 TIME COLUMN ts")
    with pytest.raises(ValidationError, match=r"ON CONFLICT REPLACE overwrites cells of arrays; feed is not one"):
        db.sql("INSERT INTO feed VALUES ('2020-01-01 00:00:00', 1) ON CONFLICT REPLACE")
    assert db.stream("feed").read().count() == 0
    db.sql("CREATE UNCERTAIN ARRAY blobs <flux:gaussian> [x=0:99:10]")
    with pytest.raises(ValidationError, match="blobs is not one"):
        db.sql("INSERT INTO blobs VALUES (5.0, 1.0, 2.0, 0.5) ON CONFLICT REPLACE")
    assert db.uncertain_array("blobs").version == 0


@pytest.mark.parametrize(
    ("text", "message", "column"),
    [
        ("INSERT INTO A VALUES (1, 2) ON CONFLICT IGNORE", "ON CONFLICT takes REPLACE or ERROR, got 'IGNORE'", 41),
        ("INSERT INTO A VALUES (1, 2) ON CONFLICTS REPLACE", "expected ON CONFLICT, got ON 'CONFLICTS'", 32),
        ("LOAD A FROM 'x.csv' ON CONFLICT UPDATE", "ON CONFLICT takes REPLACE or ERROR", 33),
    ],
)
def test_a_bad_conflict_clause_names_its_line_and_column(text, message, column):
    with pytest.raises(ParseError, match=message) as refused:
        parse_statements(text)
    assert (refused.value.line, refused.value.column) == (1, column)


@pytest.mark.parametrize(
    "text",
    [
        "INSERT INTO A VALUES (1, 2) ON CONFLICT REPLACE",
        "INSERT INTO A (v, i) VALUES (2, 1) ON CONFLICT REPLACE",
        "LOAD A FROM 'x.csv' AS CSV ON CONFLICT REPLACE",
        "INSERT INTO M VALUES (1, 2) ALLOW GAP",
    ],
)
def test_the_conflict_clause_prints_back_as_written(text):
    statement = parse_statements(text)[0].statement
    assert to_text(statement) == text
    assert parse_statements(to_text(statement))[0].statement == statement
    default = parse_statements(text.replace("ON CONFLICT REPLACE", "ON CONFLICT ERROR"))[0].statement
    assert default.on_conflict == "error" and "ON CONFLICT" not in to_text(default)
