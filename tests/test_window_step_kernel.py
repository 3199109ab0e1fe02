"""The window-step kernel (kernels/window_steps.py) against plain Python: sliding-window views
maintained in-process through the public API (stream appends, reads), each part's rows recomputed
from the window's stream rows (count, sum with Python ints, avg, min, max per group with a row in
the window), and the kernel's ran asserted where the view qualifies; views it refuses (bigint or
double sums, HAVING, double extremes) are checked to be right on the SQL path."""

from __future__ import annotations

import datetime as dt
import math

import pyarrow as pa
import pytest

import arrayviews
import arrayviews.streams.local_step as local_step
import arrayviews.streams.maintainer as maintainer
from arrayviews.execution.local_sql import run_sql
from arrayviews.kernels.window_steps import StepRefused
from arrayviews.streams import exact_sums

MINUTE = 60
EPOCH = 1_700_000_040  # a minute boundary
UTC = dt.UTC

#: The stream's columns: group keys of every kind the kernel takes (a stream stores no
#: tinyint or smallint), values of every width.
COLUMNS = {
    "g": ("string", pa.string()),
    "k": ("int", pa.int32()),
    "d": ("date", pa.date32()),
    "b": ("boolean", pa.bool_()),
    "t": ("timestamp", pa.timestamp("us", "UTC")),
    "x": ("int", pa.int32()),
    "y": ("int", pa.int32()),
    "z": ("int", pa.int32()),
    "e": ("date", pa.date32()),
    "u": ("timestamp", pa.timestamp("us", "UTC")),
    "w": ("bigint", pa.int64()),
    "f": ("double", pa.float64()),
}
SCHEMA = "ts timestamp, " + ", ".join(f"{name} {ddl}" for name, (ddl, _) in COLUMNS.items())


def _part_table(number: int, rows: list[dict]) -> pa.Table:
    """Part ``number`` of the stream (minutes from EPOCH) as Arrow, the rows' columns in their types."""
    stamps = [(EPOCH + MINUTE * number + k % MINUTE) * 1_000_000 for k in range(len(rows))]
    arrays = {"ts": pa.array(stamps, pa.timestamp("us", "UTC"))}
    for name, (_, kind) in COLUMNS.items():
        arrays[name] = pa.array([row.get(name) for row in rows], kind)
    return pa.table(arrays)


def _value(function: str, values: list) -> object:
    present = [v for v in values if v is not None]
    if function == "count*":
        return len(values)
    if function == "count":
        return len(present)
    if not present:
        return None
    if function == "sum":
        return sum(present)  # Python ints: exact
    if function == "avg":
        return (
            math.fsum(present) / len(present)
            if isinstance(present[0], float)
            else sum(present) / len(present)
        )
    return max(present) if function == "max" else min(present)


def reference(parts: list[list[dict]], window: int, groups: tuple, items: list[tuple]) -> dict[int, set]:
    """Per part number, the view's rows from plain Python over the window's stream rows: one row per
    group (NULL a key like any other) with a row in the window's ``window`` parts."""
    result: dict[int, set] = {}
    for number in range(len(parts)):
        found: dict[tuple, list[dict]] = {}
        for rows in parts[max(0, number - window + 1) : number + 1]:
            for row in rows:
                found.setdefault(tuple(row.get(g) for g in groups), []).append(row)
        result[number] = {
            key
            + tuple(
                _value("count*" if attribute is None else function, [r.get(attribute) for r in rows])
                for _, function, attribute in items
            )
            for key, rows in found.items()
        }
    return result


def _normal(value: object) -> object:
    """A value read back through Spark, comparable with the reference's."""
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def stored(db, name: str, columns: list[str]) -> dict[int, set]:
    """Per part number (minutes from EPOCH), the view's rows as readers see them."""
    found: dict[int, set] = {}
    for row in db.stream_view(name).read().collect():
        stamp = _normal(row["PART_TIMESTAMP"])
        number = (int(stamp.timestamp()) - EPOCH) // MINUTE
        found.setdefault(number, set()).add(tuple(_normal(row[c]) for c in columns))
    return found


def _reference_value(value: object) -> object:
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


class View:
    """One window view of the test stream: its window in parts, group columns and query items
    ``(alias, function, attribute)`` (attribute None: ``count(*)``), and whether the kernel takes it."""

    def __init__(
        self, name: str, window: int, groups: tuple, items: list[tuple], kernel: bool, having: str = ""
    ) -> None:
        self.name, self.window, self.groups, self.items = name, window, groups, items
        self.kernel, self.having = kernel, having

    def statement(self, stream: str) -> str:
        calls = ", ".join(
            f"{function}({'*' if attribute is None else attribute}) AS {alias}"
            for alias, function, attribute in self.items
        )
        having = f" HAVING {self.having}" if self.having else ""
        return (
            f"CREATE VIEW {self.name} USING INCREMENTAL AS SELECT {', '.join(self.groups)}, {calls} "
            f"FROM {stream} [WINDOW {self.window} MINUTES] GROUP BY {', '.join(self.groups)}{having}"
        )


class KernelCalls:
    """Counts the window kernel's steps that ran and those it refused (the SQL ran instead), and
    checks each step it ran against the step's SQL (the definition of record) over the same inputs:
    the stored rows, queue entries and state included, not only what readers see."""

    def __init__(self, monkeypatch) -> None:
        self.ran = self.refused = 0
        self.made: list[pa.Table] = []
        kernel, build = local_step.window_step, maintainer.build_window_part

        def counted(*arguments):
            try:
                result = kernel(*arguments)
            except StepRefused:
                self.refused += 1
                raise
            self.ran += 1
            self.made.append(result)
            return result

        def checked(query, step, part, inputs, view, name):
            self.made.clear()
            staged = build(query, step, part, inputs, view, name)
            if staged is not None:
                (made,) = self.made
                names = {number: f"kernel_check_{number}" for number in range(len(inputs))}
                tables = {names[n]: local_step.read_input(source) for n, source in enumerate(inputs)}
                functions = (exact_sums.LOCAL_FUNCTIONS, exact_sums.LOCAL_MACROS)
                by_sql = run_sql(query.render(names), tables, *functions, arrow_first=True)
                schema = view.arrow_schema
                assert _rows(local_step.conform_result(made, schema, name, part)) == _rows(
                    local_step.conform_result(by_sql, schema, name, part)
                ), (name, part)
            return staged

        monkeypatch.setattr(local_step, "window_step", counted)
        monkeypatch.setattr(maintainer, "build_window_part", checked)


def _rows(table: pa.Table) -> list:
    return sorted((tuple(_normal(v) for v in row.values()) for row in table.to_pylist()), key=repr)


def run(db, stream: str, parts: list[list[dict]], views: list[View], calls: KernelCalls, late=()) -> None:
    """Create the stream and ``views`` over its first part, append the other parts one a step (and
    then the ``late`` rows, (part, row) pairs, at once), and check every part of every view against
    plain Python; each step of a view the kernel takes ran the kernel, the others the SQL."""
    handle = db.create_stream(stream, SCHEMA, MINUTE, "ts")
    handle.append(_part_table(0, parts[0]))
    for view in views:
        db.sql(view.statement(stream))
    for number in range(1, len(parts)):
        if not parts[number]:
            continue  # a minute without rows: its parts are built by the next append
        before = calls.ran
        result = handle.append(_part_table(number, parts[number]))
        assert not result.failed, result.failed
        reasons = {m.view: m.executor_reason or "" for m in result.maintenance}
        for view in views:
            assert ("window kernel" in reasons[view.name]) == view.kernel, (view.name, reasons[view.name])
        assert calls.ran > before or not any(v.kernel for v in views)
    if late:
        parts = [list(rows) for rows in parts]
        by_part: dict[int, list[dict]] = {}
        for number, row in late:
            by_part.setdefault(number, []).append(row)
            parts[number].append(row)
        batch = pa.concat_tables([_part_table(number, rows) for number, rows in by_part.items()])
        result = handle.append(batch)
        assert result.late_parts and not result.failed, result.failed
    for view in views:
        columns = [*view.groups, *(alias for alias, _, _ in view.items)]
        expected = reference(parts, view.window, view.groups, view.items)
        expected = {
            n: {tuple(map(_reference_value, r)) for r in rows} for n, rows in expected.items() if rows
        }
        got = stored(db, view.name, columns)
        assert sorted(got) == sorted(expected), view.name
        for number, rows in expected.items():
            assert sorted(got[number], key=repr) == sorted(rows, key=repr), (view.name, number)


@pytest.fixture(scope="module")
def local_db(spark, tmp_path_factory):
    """One warehouse for the module, maintained in-process (each test makes its own stream)."""
    return arrayviews.connect(
        str(tmp_path_factory.mktemp("kernel") / "warehouse"), spark=spark, execution="local"
    )


def _day(n: int) -> dt.date:
    return dt.date(2026, 1, 1) + dt.timedelta(days=n)


def _at(n: int) -> dt.datetime:
    return dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=n)


I32 = 2**31 - 1
TOP = {"g": "a", "k": 1, "x": I32, "y": I32, "z": I32, "d": _day(0), "b": True, "t": _at(0)}
BOTTOM = {"g": None, "k": None, "x": -I32 - 1, "y": -I32 - 1, "z": -I32 - 1, "d": None, "b": None, "t": None}

# a group (g, k) in every part; a group leaving for exactly the window (2), one part less and one
# more; NULL keys; values at the ends of their types, all-NULL groups
MIXED = [
    [
        {**TOP, "e": _day(5), "u": _at(9)},
        BOTTOM,
        {**TOP, "e": _day(3), "u": _at(3)},
        {"g": "b", "k": None, "x": None, "y": None, "z": None, "d": _day(1), "b": False, "t": _at(1)},
    ],
    [
        {**TOP, "e": _day(5), "u": _at(1)},
        {"g": "a", "k": 2, "x": -1, "z": -5, "d": _day(2), "b": None, "t": _at(2), "e": _day(1), "u": _at(1)},
        BOTTOM,
    ],
    [
        {"g": "a", "k": 1, "x": 5, "z": I32, "d": _day(0), "b": True, "t": _at(0), "e": _day(4), "u": _at(8)},
        {"g": "b", "k": None, "x": None, "y": None, "z": None, "d": _day(1), "b": False, "t": _at(1)},
    ],
    [],
    [
        {**TOP, "e": _day(4), "u": _at(8)},
        BOTTOM,
        {"g": "a", "k": 2, "x": 3, "z": 7, "d": _day(2), "b": None, "t": _at(2), "e": _day(1), "u": _at(1)},
    ],
    [
        {**TOP, "x": -I32 - 1, "y": None, "z": -I32 - 1, "e": _day(9), "u": _at(0)},
        {"g": "b", "k": None, "x": 1, "z": 1, "d": _day(1), "b": False, "t": _at(1), "e": _day(9)},
    ],
    [
        {**TOP, "e": _day(2), "u": _at(2)},
    ],
]

ITEMS_SUM = [
    ("n", "count", None),
    ("nx", "count", "x"),
    ("sx", "sum", "x"),
    ("ax", "avg", "x"),
    ("sy", "sum", "y"),
    ("sz", "sum", "z"),
    ("az", "avg", "z"),
]
ITEMS_EXTREMES = [
    ("lo", "min", "z"),
    ("hi", "max", "z"),
    ("n", "count", None),
    ("sz", "sum", "z"),
    ("emax", "max", "e"),
    ("emin", "min", "e"),
    ("umax", "max", "u"),
    ("umin", "min", "u"),
]


def test_mixed_keys_and_extreme_values_equal_plain_python(local_db, monkeypatch) -> None:
    calls = KernelCalls(monkeypatch)
    views = [
        View("m_sums", 2, ("g", "k"), ITEMS_SUM, kernel=True),
        View("m_ext", 3, ("d", "b", "t"), ITEMS_EXTREMES, kernel=True),
        View("m_one", 1, ("b",), [("hi", "max", "x"), ("lo", "min", "y"), ("n", "count", None)], kernel=True),
        View(
            "m_seven",
            7,
            ("g", "d"),
            [("sx", "sum", "x"), ("hi", "max", "z"), ("nz", "count", "z")],
            kernel=True,
        ),
        View("m_bigint", 2, ("g",), [("sw", "sum", "w"), ("n", "count", None)], kernel=False),
        View("m_double", 2, ("g",), [("sf", "sum", "f"), ("hi", "max", "z")], kernel=False),
        View("m_having", 2, ("g",), [("sz", "sum", "z")], kernel=False, having="count(*) > 0"),
    ]
    run(local_db, "mixed", MIXED, views, calls)
