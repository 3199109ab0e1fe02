"""Tests of the translation of pattern and sliding-window queries into ViewDFs (paper 004, section 5).

The state machines and the generated SQL are checked without Spark. The Spark tests evaluate the
generated queries directly with spark.sql over tiny part tables, part after part, each Helper part
feeding the next, and compare the final views with independent references: tests/pattern_reference.py
for patterns, a pandas recomputation over each window for sliding windows.

Spark runs small queries slowly, so the Spark tests run many random chains (a chain is one view's
definitions over its own stream) in lockstep: at each step every chain's definition number ``l``
builds part ``step - l`` (a definition reads earlier definitions only at parts it has already built),
and all those queries are collected in one Spark job (each row encoded as JSON).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from arrayviews.language.parser import parse_statement
from arrayviews.language.syntax import CreatePatternView, CreateViewDF, CreateWindowView
from arrayviews.model.errors import ParseError
from arrayviews.model.viewdf import Presentation, ViewDFDefinition
from arrayviews.streams.fsm import build_state_machine
from arrayviews.streams.translate import explain, translate
from pattern_reference import Pattern, Predicate, earliest_matches, pattern_results
from spark_literals import literals

VIEW1 = """CREATE VIEW View1 AS
SELECT src, dest, count(*) AS ct, sum(loss) AS sum_loss
FROM M PATTERN [a, b, c, d+]
WHERE a.loss>10 AND b.loss>10 AND c.loss>10 AND d.loss>10
GROUP BY src, dest"""


def _pattern(text: str) -> CreatePatternView:
    statement = parse_statement(text)
    assert isinstance(statement, CreatePatternView)
    return statement


def _window(text: str) -> CreateWindowView:
    statement = parse_statement(text)
    assert isinstance(statement, CreateWindowView)
    return statement


# -- state machines ------------------------------------------------------------------------------
def test_view1_state_machine_is_figure_4() -> None:
    machine = build_state_machine(_pattern(VIEW1).query)
    assert list(machine.states()) == [0, 1, 2, 3, 4]
    assert machine.accepting == 4
    assert [machine.is_kleene(k) for k in machine.states()] == [False, False, False, False, True]
    edges = {(e.source, e.target): e.text() for e in machine.edges}
    assert edges == {(k, k + 1): "New.loss > 10" for k in range(4)} | {(4, 4): "New.loss > 10"}
    assert machine.auxiliary == ()
    assert "E[4][4]: New.loss > 10" in machine.describe()


def test_two_variable_predicates_read_the_previous_tuple() -> None:
    query = _pattern(
        "CREATE VIEW V AS SELECT g, count(*) FROM S PATTERN [a, b+, c] "
        "WHERE a.x > 1 AND b.x > a.x AND b.y < 5 AND c.x <= b.y GROUP BY g"
    ).query
    machine = build_state_machine(query)
    assert machine.auxiliary == (("x", "prev_x"), ("y", "prev_y"))
    assert machine.edge(0, 1).text() == "New.x > 1"
    assert machine.edge(1, 2).text() == "New.x > Prev.prev_x AND New.y < 5"
    # on the Kleene self-edge only b's own single-variable predicates apply
    assert machine.edge(2, 2).text() == "New.y < 5"
    assert machine.edge(2, 3).text() == "New.x <= Prev.prev_y"
    assert machine.edge(3, 3) is None
    assert set(machine.attributes) == {"x", "y"}


def test_edges_without_predicates_are_true() -> None:
    machine = build_state_machine(
        _pattern("CREATE VIEW V AS SELECT g FROM S PATTERN [a, b+] GROUP BY g").query
    )
    assert [e.text() for e in machine.edges] == ["TRUE", "TRUE", "TRUE"]


# -- generated SQL ---------------------------------------------------------------------------------
def test_pattern_translation_structure() -> None:
    """One view: the paper's Helper, reading its own previous part, shown as the final view."""
    (view,) = translate(_pattern(VIEW1), 60)
    assert view.name == "View1" and not view.helper and view.backfill and view.partition_length == 60
    assert [r.text("i") for r in view.initialize.references] == ["M[i]"]
    assert [r.text("j") for r in view.update.references] == ["M[j]", "View1[j-1]"]
    update = view.update.text
    assert "LEFT OUTER JOIN View1[j-1] AS Prev" in update
    assert "New.src IS NOT DISTINCT FROM Prev.src AND New.dest IS NOT DISTINCT FROM Prev.dest" in update
    # one count per state, null when the state is not active: every state advances at once
    for k in (2, 3, 4):
        entered = f"CASE WHEN NOT Prev.s{k - 1}_ct IS NULL AND New.loss > 10 THEN Prev.s{k - 1}_ct + 1 END"
        assert f"{entered} AS enter_s{k}" in update
    assert "CASE WHEN NOT Prev.s4_ct IS NULL AND New.loss > 10 THEN Prev.s4_ct + 1 END AS stay_s4" in update
    assert "GREATEST(enter_s4, stay_s4) AS s4_ct" in update
    # a complete match drops every other partial match (AFTER MATCH SKIP PAST LAST ROW)
    assert "CASE WHEN s4_ct IS NULL THEN s1_ct END AS s1_ct" in update
    # one row per group and part, the least loss (a null first): an aggregate, no sort per group
    assert "CASE WHEN COUNT(loss) < COUNT(*) THEN NULL ELSE MIN(loss) END AS loss" in update
    assert "WHERE\n  New.loss > 10" in view.initialize.text
    # readers see the complete matches: the accepting state's count and sums, under the query's names
    assert view.presentation == Presentation(
        (("src", "src"), ("dest", "dest"), ("s4_ct", "ct"), ("s4_sum_loss", "sum_loss")), "s4_ct"
    )
    assert view.sources() == {"M"}
    assert ViewDFDefinition.from_json(view.to_json()).presentation == view.presentation


def test_pattern_sums_are_kept_in_a_wider_type() -> None:
    text = "CREATE VIEW V AS SELECT g, sum(i), sum(b), sum(d), sum(f) FROM S PATTERN [a, b+] GROUP BY g"
    types = {"g": "string", "i": "int", "b": "bigint", "d": "decimal(30,4)", "f": "float"}
    (helper,) = translate(_pattern(text), 60, types=types)
    initialize = helper.initialize.text
    assert "CAST(New.i AS BIGINT) AS s1_sum_i" in initialize
    assert "CAST(New.b AS DECIMAL(38, 0)) AS s1_sum_b" in initialize
    assert "CAST(New.d AS DECIMAL(38, 4)) AS s1_sum_d" in initialize
    assert "CAST(New.f AS DOUBLE) AS s1_sum_f" in initialize
    # an addition that leaves the type is an error naming the view, the attribute and the group
    assert "TRY_ADD(carried_s1_sum_b, value_b)" in helper.update.text
    assert "'arrayviews: pattern view V: sum(b) overflows decimal(38,0) for group '" in helper.update.text


def test_generated_names_avoid_the_users_columns() -> None:
    statement = _pattern(
        "CREATE VIEW V AS SELECT s1_ct, count(*) AS n, sum(s2_ct) FROM S PATTERN [a, b] "
        "WHERE b.s2_ct > a.s2_ct GROUP BY s1_ct"
    )
    (view,) = translate(statement, 10)
    assert "AS s1_ct_1" in view.update.text and "AS s2_ct_1" in view.update.text
    assert "AS prev_s2_ct" in view.update.text and "AS s2_sum_s2_ct" in view.update.text
    assert view.presentation == Presentation(
        (("s1_ct", "s1_ct"), ("s2_ct_1", "n"), ("s2_sum_s2_ct", "sum_s2_ct")), "s2_ct_1"
    )


def test_subtractable_window_structure() -> None:
    """A subtractable window is one view: its UPDATE reads the stream's part, its own previous part
    (the cumulative step) and its own part one window back (the same epoch, subtracted); readers
    see the query's columns of the rows where HAVING holds."""
    statement = _window(
        "CREATE VIEW W AS SELECT g, sum(y) AS s, count(*) AS n, avg(y) FROM S [WINDOW 3 MINUTES] "
        "GROUP BY g HAVING s > 0"
    )
    (view,) = translate(statement, 60)
    assert not view.helper
    assert [r.text("j") for r in view.update.references] == ["S[j]", "W[j-1]", "W[j-3]"]
    assert [r.text("i") for r in view.initialize.references] == ["S[i]"]
    assert "FULL OUTER JOIN W[j-1] AS Prev" in view.update.text
    assert "idle < 3" in view.update.text
    assert "Old.age = (\n" in view.update.text
    assert "CASE WHEN count_y > 0 THEN sum_y END > 0" in view.update.text
    assert view.presentation == Presentation(
        (("g", "g"), ("s", "s"), ("n", "n"), ("avg_y", "avg_y")), "shown"
    )
    assert ViewDFDefinition.from_json(view.to_json()).presentation == view.presentation
    parsed = parse_statement(view.text)
    assert parsed.definition.initialize == view.initialize and parsed.definition.update == view.update


def test_subtractable_float_sums_are_kept_exactly() -> None:
    """With the stream's column types, a float column's cumulative sum is an exact sum state (seven
    stored columns) and the window's sum the exact difference; integer sums are Spark's SUM (of BIGINT
    columns formed in DECIMAL(38,0))."""
    statement = _window(
        "CREATE VIEW W AS SELECT g, sum(y) AS s, avg(y) AS m, sum(k) AS t FROM S [WINDOW 3 MINUTES] GROUP BY g"
    )
    (view,) = translate(statement, 60, types={"g": "string", "y": "double", "k": "bigint"})
    state = "AV_EXACT_SUM(COLLECT_LIST(y), 'view W, sum of y') AS state_y"
    assert state in view.initialize.text and state in view.update.text
    assert "AV_EXACT_ADD(" in view.update.text
    # a BIGINT column's running sums are formed in DECIMAL(38,0), the window's sum checked into BIGINT
    assert "CAST(COALESCE(SUM(CAST(k AS DECIMAL(38, 0))), 0) AS DECIMAL(38, 0)) AS sum_k" in view.update.text
    assert "WHEN sum_k BETWEEN -9223372036854775808 AND 9223372036854775807" in view.update.text
    (narrow,) = translate(statement, 60, types={"g": "string", "y": "double", "k": "int"})
    assert "COALESCE(SUM(k), 0) AS sum_k" in narrow.update.text  # INT: BIGINT sums, the fast plan
    for column in ("sum_y", "sum_y_x1", "sum_y_x2", "sum_y_x3", "sum_y_pinf", "sum_y_ninf", "sum_y_nan"):
        assert f"AS {column}" in view.initialize.text and f"AS {column}" in view.update.text
        assert f"Old.{column}" in view.update.text
    assert "AV_EXACT_DIFFERENCE(" in view.initialize.text
    assert (
        "AV_EXACT_DIFFERENCE(" in view.update.text
        and "Cur.sum_k - COALESCE(Old.sum_k, 0)" in view.update.text
    )
    parsed = parse_statement(view.text)
    assert parsed.definition.initialize == view.initialize
    assert parsed.definition.update == view.update
    # without types (or for integer columns) nothing is summed exactly
    (plain,) = translate(statement, 60)
    assert "AV_EXACT" not in plain.update.text


def test_distributive_window_structure_is_one_table_with_a_queue() -> None:
    statement = _window(
        "CREATE VIEW W AS SELECT g, max(x), sum(y) FROM S [WINDOW 120 SECONDS] GROUP BY g HAVING max(x) > 1"
    )
    (view,) = translate(statement, 30)  # one table: a queue of maxima and the cumulative sums
    # the stream's part, the previous part (a row per group, its queue a list) and the part Wp back
    assert sorted(r.text("j") for r in view.update.references) == ["S[j]", "W[j-1]", "W[j-4]"]
    assert [r.text("i") for r in view.initialize.references] == ["S[i]"]
    text = " ".join(view.update.text.split())
    # the earlier entries still in the window: the kept list, then the newest entry (made at age)
    assert (
        "CASE WHEN Prev.earlier_max_x IS NULL THEN ARRAY(STRUCT(Prev.queue_max_x AS v, Prev.age AS at))"
        in text
    )
    assert "Prev.age + 1 - e.at < 4" in text
    assert "ARRAY_MAX(TRANSFORM(candidates_max_x, e -> e.v)) AS prev_max_x" in text
    assert "e.v > W.batch_max_x" in text  # a newer equal value pops an entry
    assert view.presentation.when_set == "shown"
    assert view.presentation.columns == (("g", "g"), ("max_x_1", "max_x"), ("sum_y_1", "sum_y"))


def test_window_must_be_a_multiple_of_the_partition_length() -> None:
    text = "CREATE VIEW W AS SELECT g, sum(y)\nFROM S [WINDOW 10 MINUTES] GROUP BY g"
    with pytest.raises(ParseError) as caught:
        translate(_window(text), 420)
    error = caught.value
    assert error.reason == "window of 10 minutes is not a multiple of the partition length 420 seconds"
    assert (error.line, error.column) == (2, 9)


@pytest.mark.parametrize(
    "text",
    [
        VIEW1,
        "CREATE VIEW V AS SELECT g, sum(x) FROM S PATTERN [a+] WHERE a.x > 0 GROUP BY g",
        "CREATE VIEW W AS SELECT g, min(x), avg(y) FROM S [WINDOW 1 MINUTES] GROUP BY g",
        "CREATE VIEW W AS SELECT g, h, count(*) FROM S [WINDOW 2 HOURS] GROUP BY g, h HAVING count(*) > 1",
    ],
)
def test_explain_statements_parse_back_to_the_definitions(text: str) -> None:
    statement = parse_statement(text)
    definitions = translate(statement, 60)
    shown = explain(parse_statement("EXPLAIN " + text), 60)
    for definition in definitions:
        assert definition.text + ";" in shown
        parsed = parse_statement(definition.text)
        assert isinstance(parsed, CreateViewDF)
        assert parsed.definition.initialize == definition.initialize
        assert parsed.definition.update == definition.update
        assert (parsed.definition.name, parsed.definition.partition_length) == (
            definition.name,
            definition.partition_length,
        )
    if isinstance(statement, CreatePatternView):
        assert "-- E[0][1]:" in shown


def test_explain_of_a_hand_written_viewdf() -> None:
    text = (
        "CREATE VIEW J AS INITIALIZE J[i] AS SELECT * FROM M[i] NATURAL JOIN N[i] "
        "UPDATE J[j] AS SELECT * FROM M[j] NATURAL JOIN N[j] PARTITION LENGTH 60"
    )
    shown = explain(parse_statement(text), 60)
    assert "-- UPDATE J[j] reads N[j]" in shown and text + ";" in shown


# -- Spark: evaluating the generated queries ---------------------------------------------------------
Rows = list[dict]


@dataclass
class Chain:
    """One view's definitions over its own stream of parts 1..len(parts) (rows as dicts)."""

    definitions: list[ViewDFDefinition]
    stream: str
    stream_schema: str
    parts: list[Rows]
    results: dict[str, dict[int, Rows]] = field(default_factory=dict)

    def final(self) -> list[Rows]:
        """What readers see of the final view's parts: for a view keeping state in its own rows,
        the rows whose marker is set, with the shown columns (as streams/presentation.py shows)."""
        final = self.definitions[-1]
        built = self.results[final.name]
        parts = [built[part] for part in range(1, len(self.parts) + 1)]
        shown = final.presentation
        if shown is None:
            return parts
        return [
            [  # (to_json leaves NULL fields out)
                {name: row.get(stored) for stored, name in shown.columns}
                for row in rows
                if row.get(shown.when_set) is not None
            ]
            for rows in parts
        ]


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _literal_rows(keys_and_rows: list[tuple[int, str]]) -> str:
    """A query over literal ``(key, row)`` pairs (JSON rows)."""
    values = ", ".join(f"({key}, {_sql_string(row)})" for key, row in keys_and_rows) or "(0, '')"
    return f"SELECT * FROM VALUES {values} AS t(key, row)" + ("" if keys_and_rows else " WHERE false")


def _decoded(view: str, key: int | None, schema: str) -> str:
    """A parenthesised query decoding the JSON rows of ``view`` under ``key`` (None: no rows)."""
    condition = "false" if key is None else f"key = {key}"
    return (
        f"(SELECT r.* FROM (SELECT from_json(row, {_sql_string(schema)}) AS r FROM {view} WHERE {condition}))"
    )


# Small queries run much faster interpreted than compiled (and in one stage each without AQE).
FAST_SMALL_QUERIES = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
}


def run_chains(spark, chains: list[Chain]) -> None:
    """Build every part of every chain's definitions, in lockstep (see the module docstring).

    Part tables are literal JSON rows (one temporary view per stream and per step), decoded in
    place of each part reference; each step is one spark.sql over the UNION ALL of its queries.
    """
    saved = {key: spark.conf.get(key, None) for key in FAST_SMALL_QUERIES}
    for key, value in FAST_SMALL_QUERIES.items():
        spark.conf.set(key, value)
    try:
        _run_chains(spark, chains)
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _run_chains(spark, chains: list[Chain]) -> None:
    schemas: dict[tuple[int, str], str] = {}  # (chain, relation) -> schema of its rows
    built: dict[tuple[int, str], dict[int, tuple[str, int]]] = {}  # -> part -> (view, key)
    for number, chain in enumerate(chains):
        view = f"chain{number}_stream"
        rows = [(part, json.dumps(row)) for part, rows in enumerate(chain.parts, 1) for row in rows]
        spark.sql(_literal_rows(rows)).createOrReplaceTempView(view)
        schemas[(number, chain.stream)] = chain.stream_schema
        built[(number, chain.stream)] = {
            p: (view, p) for p in range(1, len(chain.parts) + 1) if chain.parts[p - 1]
        }
    steps = max(len(c.parts) + len(c.definitions) - 1 for c in chains)
    for step in range(1, steps + 1):
        queries: list[tuple[int, str, int, str]] = []
        for number, chain in enumerate(chains):
            for level, definition in enumerate(chain.definitions):
                part = step - level
                if not 1 <= part <= len(chain.parts):
                    continue
                query = definition.initialize if part == 1 else definition.update
                tables = {}
                for k, reference in enumerate(query.references):
                    key = (number, reference.relation)
                    pieces = [built[key][p] for p in reference.parts(part) if p in built.get(key, {})]
                    decoded = [_decoded(view, row_key, schemas[key]) for view, row_key in pieces]
                    empty = f"chain{number}_stream"
                    tables[k] = (
                        " UNION ALL ".join(decoded) if decoded else _decoded(empty, None, schemas[key])
                    )
                    if len(decoded) > 1:
                        tables[k] = f"({tables[k]})"
                text = query.render(tables)
                if (number, definition.name) not in schemas:
                    schemas[(number, definition.name)] = spark.sql(text).schema.simpleString()
                queries.append((number, definition.name, part, text))
        union = " UNION ALL ".join(
            f"SELECT {k} AS key, to_json(struct(*)) AS row FROM ({text})"
            for k, (_, _, _, text) in enumerate(queries)
        )
        collected = spark.sql(union).collect()
        step_view = f"step{step}"
        spark.sql(_literal_rows([(row["key"], row["row"]) for row in collected])).createOrReplaceTempView(
            step_view
        )
        rows_of: dict[int, list[str]] = {}
        for row in collected:
            rows_of.setdefault(row["key"], []).append(row["row"])
        for k, (number, name, part, _) in enumerate(queries):
            texts = rows_of.get(k, [])
            chains[number].results.setdefault(name, {})[part] = [json.loads(text) for text in texts]
            if texts:
                built.setdefault((number, name), {})[part] = (step_view, k)


# Each example runs Spark for several seconds: few examples, many chains each, and no shrinking (a
# failure reports the chain's statement and the whole example).
SPARK_PROPERTY = settings(
    max_examples=2,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- patterns ------------------------------------------------------------------------------------------
PATTERN_SCHEMA = "g string, loss bigint, delay bigint"
PATTERN_TYPES = {"g": "string", "loss": "bigint", "delay": "bigint"}
GROUPS = ("g0", "g1", "g2", None)


@dataclass
class PatternCase:
    pattern: Pattern
    parts: list[dict[Hashable, dict]]

    def statement(self, name: str) -> str:
        variables = ", ".join(v + ("+" if kleene else "") for v, kleene in self.pattern.variables)
        where = " AND ".join(p.sql() for p in self.pattern.predicates)
        return (
            f"CREATE VIEW {name} AS SELECT g, count(*) AS ct, sum(loss) AS total, sum(delay) "
            f"FROM S PATTERN [{variables}] {'WHERE ' + where if where else ''} GROUP BY g"
        )

    def stream_parts(self) -> list[Rows]:
        return [[{"g": g, **row} for g, row in part.items()] for part in self.parts]

    def expected(self) -> list[set[tuple]]:
        return pattern_results(self.pattern, self.parts, ("loss", "delay"))


@st.composite
def pattern_cases(draw) -> PatternCase:
    count = draw(st.integers(1, 4))
    names = ("a", "b", "c", "d")[:count]
    comparisons = st.sampled_from([">", ">=", "<", "<="])
    attributes = st.sampled_from(["loss", "delay"])
    variables, predicates = [], []
    for k, name in enumerate(names):
        variables.append((name, draw(st.booleans())))
        if draw(st.integers(0, 2)):
            predicates.append(Predicate(name, draw(attributes), draw(comparisons), draw(st.integers(0, 6))))
        if k and draw(st.integers(0, 2)) == 0:
            predicates.append(
                Predicate(
                    name,
                    draw(attributes),
                    draw(comparisons),
                    other=names[k - 1],
                    other_attribute=draw(attributes),
                )
            )
    groups = draw(st.lists(st.sampled_from(GROUPS), min_size=1, max_size=4, unique=True))
    value = st.integers(0, 8)
    row = st.fixed_dictionaries({"loss": value, "delay": st.one_of(value, value, value, st.none())})
    parts = draw(
        st.lists(st.fixed_dictionaries({}, optional={g: row for g in groups}), min_size=1, max_size=12)
    )
    return PatternCase(Pattern(tuple(variables), tuple(predicates)), parts)


def _result_set(rows: Rows, columns: tuple[str, ...]) -> set[tuple]:
    return {tuple(row.get(c) for c in columns) for row in rows}


# The paper's example (section 2): one pair's losses from 10:00 to 10:06.
PAPER_LOSSES = [6, 12, 15, 24, 20, 16, 7]


@settings(max_examples=400, deadline=None)
@given(case=pattern_cases())
def test_the_two_references_agree(case: PatternCase) -> None:
    """MATCH_RECOGNIZE's choice (Python's backtracking regex, reluctant inner quantifiers) is the
    match that ends first, then starts first (brute force over segmentations): the semantics
    docs/streams.md states both ways."""
    by_regex = pattern_results(case.pattern, case.parts, ("loss", "delay"))
    by_search = pattern_results(case.pattern, case.parts, ("loss", "delay"), matcher=earliest_matches)
    assert by_regex == by_search


def _pattern_chain(case: PatternCase, name: str) -> Chain:
    statement = parse_statement(case.statement(name))
    return Chain(translate(statement, 60, types=PATTERN_TYPES), "S", PATTERN_SCHEMA, case.stream_parts())


@pytest.mark.spark
@pytest.mark.slow
@SPARK_PROPERTY
@given(cases=st.lists(pattern_cases(), min_size=4, max_size=4))
def test_pattern_views_match_the_reference(spark, cases: list[PatternCase]) -> None:
    chains = [_pattern_chain(case, f"P{number}") for number, case in enumerate(cases)]
    run_chains(spark, chains)
    for case, chain in zip(cases, chains, strict=True):
        got = [_result_set(rows, ("g", "ct", "total", "sum_delay")) for rows in chain.final()]
        assert got == case.expected(), case.statement("P")


def _losses(*losses: int | None) -> list[dict]:
    """One group's rows, one per part (None: no row in that part)."""
    return [{} if loss is None else {"g": {"loss": loss, "delay": 1}} for loss in losses]


def _variables(text: str) -> tuple[tuple[str, bool], ...]:
    return tuple((v.strip().rstrip("+"), v.strip().endswith("+")) for v in text.split(","))


# Cases a single partial match per group gets wrong: (pattern, predicates, losses, expected
# (count, sum of losses) per part).
PARTIAL_MATCHES = [
    # the example: 15 starts a match that 25, 25 cannot finish; (25, 25, 35) must be found
    ("a, b, c", ["a.loss > 10", "b.loss > 20", "c.loss > 30"], (15, 25, 25, 35), [None, None, None, (3, 85)]),
    # a's condition accepts b's rows: the shortest way to b (reluctant a+), then skip past it
    ("a+, b", ["a.loss > 10", "b.loss > 20"], (15, 25, 25, 5, 30), [None, (2, 40), None, None, None]),
    (
        "a+, b",
        ["a.loss > 10", "b.loss > 20"],
        (15, 12, 11, 25, 25, 25),
        [None, None, None, (4, 63), None, (2, 50)],
    ),
    # the match that began first wins when two end at the same row
    ("a+, b", ["a.loss > 0", "b.loss > 20"], (1, 2, 30), [None, None, (3, 33)]),
    # b+ in the middle, entered after a with b.loss > a.loss
    (
        "a, b+, c",
        ["a.loss > 0", "b.loss > a.loss", "c.loss > 8"],
        (5, 6, 1, 9, 7, 8, 9),
        [None, None, None, (4, 21), None, None, (3, 24)],
    ),
    # a final + is greedy: the match grows while its condition holds, the next row may start anew
    (
        "a, b+",
        ["a.loss > 10", "b.loss > 10"],
        (12, 15, 24, 7, 11, 12),
        [None, (2, 27), (3, 51), None, None, (2, 23)],
    ),
    # a part without a row for the group ends every partial match
    ("a, b, c", ["a.loss > 0"], (1, 2, None, 3, 4, 5, 6), [None, None, None, None, None, (3, 12), None]),
]


@pytest.mark.spark
def test_pattern_views_keep_every_partial_match(spark) -> None:
    cases, chains = [], []
    for number, (variables, conditions, losses, expected) in enumerate(PARTIAL_MATCHES):
        predicates = tuple(_predicate(text) for text in conditions)
        case = PatternCase(Pattern(_variables(variables), predicates), _losses(*losses))
        cases.append((case, expected))
        chains.append(_pattern_chain(case, f"K{number}"))
    run_chains(spark, chains)
    for (case, expected), chain in zip(cases, chains, strict=True):
        got = [_result_set(rows, ("ct", "total")) for rows in chain.final()]
        wanted = [set() if e is None else {e} for e in expected]
        reference = [{(ct, total) for _, ct, total, _ in found} for found in case.expected()]
        assert reference == wanted, case.statement("K")  # the hand-worked answer is the reference's
        assert got == wanted, case.statement("K")


def _predicate(text: str) -> Predicate:
    left, comparison, right = text.split()
    variable, attribute = left.split(".")
    if "." in right:
        other, other_attribute = right.split(".")
        return Predicate(variable, attribute, comparison, other=other, other_attribute=other_attribute)
    return Predicate(variable, attribute, comparison, int(right))


# -- sliding windows ------------------------------------------------------------------------------------
WINDOW_SCHEMA = "g string, x bigint, y bigint"
WINDOW_TYPES = {"g": "string", "x": "bigint", "y": "bigint"}
SUBTRACTABLE_ITEMS = "g, count(*) AS n, sum(y) AS s, avg(y) AS m, count(y) AS cy"
DISTRIBUTIVE_ITEMS = SUBTRACTABLE_ITEMS + ", max(x) AS hi, min(x)"
HAVINGS: dict[str | None, Callable[[dict], bool]] = {
    None: lambda r: True,
    "s <= 0": lambda r: r["s"] is not None and r["s"] <= 0,
    "count(*) >= 2 AND sum(y) > -2": lambda r: r["n"] >= 2 and r["s"] is not None and r["s"] > -2,
    "m IS NULL OR cy = 1": lambda r: r["m"] is None or r["cy"] == 1,
}


@dataclass
class WindowCase:
    distributive: bool
    window_parts: int
    partition_length: int
    having: str | None
    parts: list[Rows]
    plan: str = "incremental"  # or "recompute": one view reading the window's stream parts

    def translated(self, name: str) -> list:
        statement = parse_statement(self.statement(name))
        return translate(statement, self.partition_length, types=WINDOW_TYPES, plan=self.plan)

    def statement(self, name: str) -> str:
        items = DISTRIBUTIVE_ITEMS if self.distributive else SUBTRACTABLE_ITEMS
        seconds = self.window_parts * self.partition_length
        having = f" HAVING {self.having}" if self.having else ""
        return f"CREATE VIEW {name} AS SELECT {items} FROM S [WINDOW {seconds} SECONDS] GROUP BY g{having}"

    def columns(self) -> tuple[str, ...]:
        return ("g", "n", "s", "m", "cy") + (("hi", "min_x") if self.distributive else ())

    def expected(self) -> list[set[tuple]]:
        """Per part, the query recomputed with pandas over the rows of the window's parts."""
        results = []
        for part in range(len(self.parts)):
            rows = [
                row for rows in self.parts[max(0, part - self.window_parts + 1) : part + 1] for row in rows
            ]
            frame = pd.DataFrame(rows, columns=["g", "x", "y"]).astype({"x": "Int64", "y": "Int64"})
            found = set()
            for key, group in frame.groupby("g", dropna=False):
                values = group["y"].dropna()
                row = {
                    "g": None if pd.isna(key) else key,
                    "n": len(group),
                    "s": int(values.sum()) if len(values) else None,
                    "m": float(values.mean()) if len(values) else None,
                    "cy": len(values),
                    "hi": None if group["x"].dropna().empty else int(group["x"].max()),
                    "min_x": None if group["x"].dropna().empty else int(group["x"].min()),
                }
                if HAVINGS[self.having](row):
                    found.add(_rounded(tuple(row[c] for c in self.columns())))
            results.append(found)
        return results


def _rounded(values: tuple) -> tuple:
    return tuple(round(v, 9) if isinstance(v, float) and not math.isnan(v) else v for v in values)


@st.composite
def window_cases(draw) -> WindowCase:
    value = st.one_of(st.integers(-3, 3), st.integers(-3, 3), st.none())
    row = st.fixed_dictionaries({"g": st.sampled_from(("a", "b", "c", None)), "x": value, "y": value})
    return WindowCase(
        distributive=draw(st.booleans()),
        window_parts=draw(st.integers(1, 3)),
        partition_length=draw(st.sampled_from([30, 60])),
        having=draw(st.sampled_from(sorted(HAVINGS, key=str))),
        parts=draw(st.lists(st.lists(row, max_size=3), min_size=1, max_size=12)),
        plan=draw(st.sampled_from(["incremental", "recompute"])),
    )


def _zero_sum_case(distributive: bool, plan: str = "incremental") -> WindowCase:
    """Group z sums to 0 and group n to a negative number over most windows; both must stay."""
    parts = [
        [{"g": "z", "x": 1, "y": 2}, {"g": "n", "x": 1, "y": -5}],
        [{"g": "z", "x": 1, "y": -2}],
        [],
        [{"g": "z", "x": 0, "y": 0}],
        [],
        [],
        [{"g": "n", "x": 3, "y": None}],
    ]
    return WindowCase(distributive, 2, 60, None, parts, plan)


@pytest.mark.spark
@pytest.mark.slow
@SPARK_PROPERTY
@given(cases=st.lists(window_cases(), min_size=4, max_size=4))
def test_window_views_match_a_recomputation(spark, cases: list[WindowCase]) -> None:
    chains = []
    for number, case in enumerate(cases):
        chains.append(Chain(case.translated(f"W{number}"), "S", WINDOW_SCHEMA, case.parts))
    run_chains(spark, chains)
    for case, chain in zip(cases, chains, strict=True):
        got = [{_rounded(t) for t in _result_set(rows, case.columns())} for rows in chain.final()]
        assert got == case.expected(), case.statement("W")


@pytest.mark.spark
def test_paper_example_and_special_cases(spark) -> None:
    """View1 over the paper's sequence (section 2), windows where a group's sum is 0 or negative, a
    pattern without predicates or aggregates, and a part with two rows of one group."""
    paper = translate(_pattern(VIEW1), 60)
    paper_parts = [[{"src": "10.0.0.1", "dest": "10.0.0.2", "loss": loss}] for loss in PAPER_LOSSES]
    chains = [Chain(paper, "M", "src string, dest string, loss bigint", paper_parts)]
    cases = [_zero_sum_case(d, plan) for d in (False, True) for plan in ("incremental", "recompute")]
    for number, case in enumerate(cases):
        chains.append(Chain(case.translated(f"W{number}"), "S", WINDOW_SCHEMA, case.parts))
    # no predicates and nothing but the group column
    bare = translate(_pattern("CREATE VIEW B AS SELECT g FROM S PATTERN [a, b+] GROUP BY g"), 60)
    bare_parts = [
        [{"g": "p"}],
        [{"g": "p"}, {"g": "q"}],
        [{"g": "p"}, {"g": "q"}],
        [{"g": "q"}],
        [{"g": "p"}],
    ]
    chains.append(Chain(bare, "S", PATTERN_SCHEMA, bare_parts))
    # two rows of one group in a part: the one first in the order of the attributes read counts
    twice = translate(
        _pattern(
            "CREATE VIEW D AS SELECT g, sum(loss) FROM S PATTERN [a, b] WHERE a.loss > 5 AND b.loss > a.loss GROUP BY g"
        ),
        60,
    )
    twice_parts = [
        [{"g": "x", "loss": 9}, {"g": "x", "loss": 3}],
        [{"g": "x", "loss": 7}],
        [{"g": "x", "loss": 10}, {"g": "x", "loss": 8}],
    ]
    chains.append(Chain(twice, "S", PATTERN_SCHEMA, twice_parts))
    run_chains(spark, chains)
    got = [_result_set(rows, ("ct", "sum_loss")) for rows in chains[0].final()]
    assert got == [set(), set(), set(), set(), {(4, 71)}, {(5, 87)}, set()]
    bare_chain, twice_chain = chains[1 + len(cases)], chains[2 + len(cases)]
    assert [_result_set(rows, ("g",)) for rows in bare_chain.final()] == [
        set(),
        {("p",)},
        {("p",), ("q",)},
        {("q",)},
        set(),
    ]
    assert [_result_set(rows, ("g", "sum_loss")) for rows in twice_chain.final()] == [
        set(),
        set(),
        {("x", 15)},
    ]
    for case, chain in zip(cases, chains[1 : 1 + len(cases)], strict=True):
        groups = [sorted((r["g"], r.get("s")) for r in rows) for rows in chain.final()]
        assert groups == [
            [("n", -5), ("z", 2)],
            [("n", -5), ("z", 0)],
            [("z", -2)],
            [("z", 0)],
            [("z", 0)],
            [],
            [("n", None)],
        ]
        assert [
            {_rounded(t) for t in _result_set(rows, case.columns())} for rows in chain.final()
        ] == case.expected()


# -- string literals through Spark -------------------------------------------------------------------
LITERAL_SCHEMA = "g string, src string"


def _literal_chain(value: str, literal: str, name: str) -> Chain:
    """Pattern [a] with ``a.src = literal`` over rows whose src is ``value`` or near misses (the
    spellings' pieces joined, quotes dropped, quotes doubled, an extra character)."""
    statement = parse_statement(
        f"CREATE VIEW {name} AS SELECT g, count(*) AS ct FROM S PATTERN [a] WHERE a.src = {literal} GROUP BY g"
    )
    near = {
        value + "x",
        value.replace("'", ""),
        value.replace("'", "''"),
        value.replace('"', ""),
        "x" + value,
    }
    rows = [{"g": "hit", "src": value}] + [
        {"g": f"miss{k}", "src": other} for k, other in enumerate(sorted(near - {value}))
    ]
    definitions = translate(statement, 60, types={"g": "string", "src": "string"})
    return Chain(definitions, "S", LITERAL_SCHEMA, [rows])


@pytest.mark.spark
@pytest.mark.slow
@SPARK_PROPERTY
@given(spelled=st.lists(literals(), min_size=4, max_size=4))
def test_string_literals_mean_through_spark_what_they_say(spark, spelled: list[tuple[str, str]]) -> None:
    spelled = [*spelled, ("a'b", "'a''b'"), ('x"y', '"x""y"'), ("a\\'b", r"'a\\\'b'")]
    chains = [_literal_chain(value, literal, f"L{k}") for k, (value, literal) in enumerate(spelled)]
    run_chains(spark, chains)
    for (value, literal), chain in zip(spelled, chains, strict=True):
        assert [_result_set(rows, ("g",)) for rows in chain.final()] == [{("hit",)}], (value, literal)
