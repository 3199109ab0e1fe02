"""Which window views' update steps the numpy kernel takes (model/window_step.py, written by
streams/windows.py): integer sums and counts, min/max, with group columns and no HAVING; the spec
survives the definition's JSON, names the stored columns of the SQL it stands for, and EXPLAIN says
which of the two runs."""

from __future__ import annotations

import pytest

from arrayviews.language.parser import parse_statement
from arrayviews.model.viewdf import ViewDFDefinition
from arrayviews.streams.translate import explain
from arrayviews.streams.windows import RECOMPUTE, WindowTranslation

TYPES = {
    "ts": "timestamp",
    "g": "string",
    "h": "int",
    "v": "int",
    "b": "bigint",
    "f": "double",
    "d": "decimal(10,2)",
}


def _translation(
    select: str, group: str = "g", plan: str = "incremental", having: str = ""
) -> WindowTranslation:
    text = f"CREATE VIEW w AS SELECT {group}, {select} FROM s [WINDOW 3 MINUTES] GROUP BY {group}{having}"
    return WindowTranslation(parse_statement(text), 60, TYPES, plan)


@pytest.mark.parametrize(
    ("select", "group", "having", "takes"),
    [
        ("sum(v) AS t, count(*) AS n, avg(v) AS a", "g", "", True),
        ("max(v) AS hi, min(v) AS lo, count(v) AS n", "g, h", "", True),
        ("max(ts) AS latest", "g", "", True),
        ("sum(b) AS t, avg(b) AS a", "g", "", True),  # kept as DECIMAL(38,0), taken while they fit
        ("sum(d) AS t", "g", "", False),  # DECIMAL sums are not the kernel's
        ("sum(f) AS t", "g", "", False),  # float sums are kept exactly (components)
        ("sum(v) AS t", "g", " HAVING sum(v) > 3", False),
    ],
)
def test_the_kernel_takes_integer_windows_with_groups_and_no_having(
    select: str, group: str, having: str, takes: bool
) -> None:
    translation = _translation(select, group, having=having)
    step = translation.window_step()
    assert (step is not None) == takes
    if step is None:
        return
    (definition,) = translation.definitions()
    stored = {c.lower() for c in _stored_columns(definition)}
    # every column the kernel writes is a column the SQL's result has
    written = {*step.groups, step.age, step.idle, *step.cumulated(), *(i.stored for i in step.items)}
    if step.queues:  # each queue's newest entry and the list of the earlier ones (no ``at`` column)
        assert all(q.entries for q in step.queues)
        written |= {*(q.entry for q in step.queues), *(q.entries for q in step.queues)}
    assert {c.lower() for c in written} == stored
    assert step.parts == 3 and step.stream.lower() == "s"
    assert set(step.wide) == {column for attribute, column in step.sums if TYPES[attribute] == "bigint"}


def _stored_columns(definition: ViewDFDefinition) -> list[str]:
    """The output columns of the update query, read from its SQL with sqlglot."""
    import sqlglot

    names = {number: f"input_{number}" for number in range(len(definition.update.references))}
    tree = sqlglot.parse_one(definition.update.render(names), read="spark")
    return [expression.alias_or_name for expression in tree.expressions]


def test_the_recompute_plan_has_no_kernel_step() -> None:
    assert _translation("sum(v) AS t", plan=RECOMPUTE).window_step() is None


def test_the_step_survives_the_definitions_json() -> None:
    (definition,) = _translation("max(v) AS hi, sum(v) AS t, count(*) AS n").definitions()
    again = ViewDFDefinition.from_json(definition.to_json())
    assert again.window_step == definition.window_step is not None
    (older,) = _translation("sum(f) AS t").definitions()
    assert ViewDFDefinition.from_json(older.to_json()).window_step is None


def test_explain_says_which_runs_the_update_steps() -> None:
    kernel = explain(
        parse_statement("CREATE VIEW w AS SELECT g, max(v) AS hi FROM s [WINDOW 3 MINUTES] GROUP BY g"),
        60,
        types=TYPES,
    )
    assert "numpy window kernel" in kernel
    sql = explain(
        parse_statement("CREATE VIEW w AS SELECT g, sum(f) AS t FROM s [WINDOW 3 MINUTES] GROUP BY g"),
        60,
        types=TYPES,
    )
    assert "update steps: the SQL below" in sql and "numpy window kernel" not in sql
