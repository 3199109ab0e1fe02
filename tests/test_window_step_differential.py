"""The window kernel against the step's own SQL (the definition of record, run in-process by Acero or
DuckDB) over random histories, without Spark: each history starts from the SQL's INITIALIZE of a
random part and steps the SQL's UPDATE over random parts (keys with NULL and '', values at INT's
ends and NULL, BIGINT sums); at every step the kernel, given the same inputs, must give the SQL's
rows exactly or refuse. A plain-Python reference for the same views is in
tests/test_window_step_kernel.py; this one reaches many more states per second."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from arrayviews.execution.local_sql import CannotRunLocally, run_sql
from arrayviews.kernels.window_steps import StepRefused, window_step
from arrayviews.language.parser import parse_statement
from arrayviews.streams import exact_sums
from arrayviews.streams.local_step import conform_result
from arrayviews.streams.windows import WindowTranslation

TYPES = {"ts": "timestamp", "g": "string", "k": "int", "x": "int", "w": "bigint"}
VIEWS = (
    "SELECT g, sum(x) AS s, count(*) AS n, avg(x) AS a, count(x) AS nx FROM s [WINDOW {w} MINUTES] GROUP BY g",
    "SELECT g, k, max(x) AS hi, min(x) AS lo FROM s [WINDOW {w} MINUTES] GROUP BY g, k",
    "SELECT k, max(x) AS hi, sum(w) AS sw, avg(w) AS aw, count(*) AS n FROM s [WINDOW {w} MINUTES] GROUP BY k",
)
I32 = 2**31 - 1


def _part(rng: random.Random, rows: int) -> pa.Table:
    def value():
        return rng.choice([None, rng.randint(-5, 5), rng.randint(-5, 5), I32, -I32 - 1])

    return pa.table(
        {
            "ts": pa.array([0] * rows, pa.timestamp("us", "UTC")),
            "g": pa.array([rng.choice(["a", "b", "", None]) for _ in range(rows)], pa.string()),
            "k": pa.array([rng.choice([0, 1, None]) for _ in range(rows)], pa.int32()),
            "x": pa.array([value() for _ in range(rows)], pa.int32()),
            "w": pa.array(
                [rng.choice([None, rng.randint(-(10**12), 10**12)]) for _ in range(rows)], pa.int64()
            ),
        }
    )


def _run(query, tables: dict[str, pa.Table]) -> pa.Table:
    names = {number: f"t{number}" for number in range(len(query.references))}
    functions = (exact_sums.LOCAL_FUNCTIONS, exact_sums.LOCAL_MACROS)
    return run_sql(query.render(names), tables, *functions, arrow_first=True)


def _rows(table: pa.Table) -> list:
    return sorted((tuple(row.values()) for row in table.to_pylist()), key=repr)


@pytest.mark.parametrize("seed", range(3))
def test_the_kernel_gives_the_sqls_rows_over_random_histories(seed: int) -> None:
    rng = random.Random(seed)
    compared = 0
    for _ in range(40):
        window = rng.choice([1, 2, 3, 5])
        statement = parse_statement(f"CREATE VIEW v AS {rng.choice(VIEWS).format(w=window)}")
        (definition,) = WindowTranslation(statement, 60, TYPES).definitions()
        step, update = definition.window_step, definition.update
        assert step is not None
        # the stored schema: the INITIALIZE's result types over a part without NULLs, and _part
        empty = _part(rng, 0)
        full = pa.table(
            {f.name: pa.array(["a" if pa.types.is_string(f.type) else 1], f.type) for f in empty.schema}
        )
        typed = _run(definition.initialize, {"t0": full})
        schema = typed.append_column("_part", pa.array([0], pa.int64())).schema
        history = [
            conform_result(_run(definition.initialize, {"t0": _part(rng, rng.randint(0, 8))}), schema, "v", 0)
        ]
        for number in range(1, rng.randint(2, 9)):
            batch = _part(rng, rng.randint(0, 8))
            tables, previous, old = {}, None, None
            for index, reference in enumerate(update.references):
                if reference.relation.lower() == "s":
                    tables[f"t{index}"] = batch
                    continue
                at = number + reference.low.offset
                part = history[at] if at >= 0 else history[0].slice(0, 0)
                tables[f"t{index}"] = part
                previous = part if reference.low.offset == -1 else previous
                old = part if reference.low.offset == -window else old
            try:
                by_sql = conform_result(_run(update, tables), schema, "v", number)
            except CannotRunLocally:  # e.g. a sum the in-process SQL leaves to Spark
                break
            try:
                by_kernel = conform_result(window_step(step, batch, previous, old), schema, "v", number)
            except StepRefused:
                by_kernel = None
            if by_kernel is not None:
                assert _rows(by_kernel) == _rows(by_sql), (statement.text, number)
                compared += 1
            history.append(by_sql)
    assert compared > 60  # the kernel took most steps
