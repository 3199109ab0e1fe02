"""The window-step kernel (kernels/window_steps.py) against plain Python: sliding-window views
maintained in-process through the public API (stream appends, reads), each part's rows recomputed
from the window's stream rows (count, sum with Python ints, avg, min, max per group with a row in
the window), and that the kernel ran asserted where the view qualifies (each step it ran is also
compared with the step's SQL, stored state and queue entries included); views it does not take
(bigint sums, HAVING) or refuses (double extremes) are checked to be right on the SQL path."""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from itertools import pairwise

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrayviews
import arrayviews.streams.local_step as local_step
import arrayviews.streams.maintainer as maintainer
from arrayviews.execution.local_sql import run_sql
from arrayviews.kernels import window_steps
from arrayviews.language.parser import parse_statement
from arrayviews.storage.files import read_parquet_files
from arrayviews.streams import exact_sums
from arrayviews.streams.windows import WindowTranslation

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
        return math.fsum(present) if isinstance(present[0], float) else sum(present)  # exact
    if function == "avg":
        return (
            math.fsum(present) / len(present)
            if isinstance(present[0], float)
            else sum(present) / len(present)
        )
    return max(present) if function == "max" else min(present)


def reference(
    parts: list[list[dict]], window: int, groups: tuple, items: list[tuple], at_least: int = 0
) -> dict[int, set]:
    """Per part number, the view's rows from plain Python over the window's stream rows: one row per
    group (NULL a key like any other) with a row (``at_least`` rows) in the window's ``window`` parts."""
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
            if len(rows) >= at_least
        }
    return result


def _normal(value: object) -> object:
    """A value read back through Spark (a naive time is the machine's local time), comparable with
    the reference's."""
    if isinstance(value, dt.datetime):
        return value.astimezone(UTC)
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
    ``(alias, function, attribute)`` (attribute None: ``count(*)``), and whether the kernel takes it
    (``by_values``: it refuses because of the values appended, which the plan's pricing cannot know)."""

    def __init__(
        self,
        name: str,
        window: int,
        groups: tuple,
        items: list[tuple],
        kernel: bool,
        at_least: int = 0,
        by_values: bool = False,
    ) -> None:
        self.name, self.window, self.groups, self.items = name, window, groups, items
        self.kernel, self.at_least, self.by_values = kernel, at_least, by_values

    def statement(self, stream: str) -> str:
        calls = ", ".join(
            f"{function}({'*' if attribute is None else attribute}) AS {alias}"
            for alias, function, attribute in self.items
        )
        having = f" HAVING count(*) >= {self.at_least}" if self.at_least else ""
        return (
            f"CREATE VIEW {self.name} USING INCREMENTAL AS SELECT {', '.join(self.groups)}, {calls} "
            f"FROM {stream} [WINDOW {self.window} MINUTES] GROUP BY {', '.join(self.groups)}{having}"
        )


class KernelCalls:
    """Per view, the window kernel's steps that ran and those it refused (the SQL ran instead); each
    step it ran is also checked against the step's SQL (the definition of record) over the same
    inputs: the stored rows with queue entries and state, not only what readers see."""

    def __init__(self, patch: pytest.MonkeyPatch) -> None:
        self.ran: Counter = Counter()
        self.refused: Counter = Counter()
        self.made: list[pa.Table] = []
        kernel, build = local_step.window_step, maintainer.build_window_part

        def counted(*arguments):
            self.made.clear()
            self.made.append(kernel(*arguments))
            return self.made[0]

        def checked(query, step, part, inputs, view, name):
            self.made.clear()
            staged = build(query, step, part, inputs, view, name)
            if staged is None:
                self.refused[name] += 1
                return None
            self.ran[name] += 1
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

        patch.setattr(local_step, "window_step", counted)
        patch.setattr(maintainer, "build_window_part", checked)


def _rows(table: pa.Table) -> list:
    return sorted((tuple(_normal(v) for v in row.values()) for row in table.to_pylist()), key=repr)


class Trial:
    """A stream and window views over it, maintained in-process: parts appended by number (minutes
    from EPOCH), every part of every view checked against plain Python over the stream's rows."""

    def __init__(self, db, calls: KernelCalls, stream: str, first: list[dict], views: list[View]) -> None:
        self.db, self.calls, self.views = db, calls, views
        self.parts: dict[int, list[dict]] = {0: list(first)}
        self.handle = db.create_stream(stream, SCHEMA, MINUTE, "ts")
        self.handle.append(_part_table(0, first))
        types = {f.name: f.dataType.simpleString() for f in self.handle.schema.fields}
        for view in views:
            # the plan's pricing (streams/window_plans.py) knows from the types which steps run here
            predicted = WindowTranslation(parse_statement(view.statement(stream)), MINUTE, types).kernel
            assert predicted == (view.kernel or view.by_values), view.name
            db.sql(view.statement(stream))

    def append(self, number: int, rows: list[dict], *more: tuple[int, list[dict]]) -> None:
        """Append part ``number`` (and the ``more`` parts after it, in one batch): each view the
        kernel takes is built by it (every part since the view's newest), each other by its SQL."""
        ran, refused = Counter(self.calls.ran), Counter(self.calls.refused)
        batch = [(number, rows), *more]
        for part, part_rows in batch:
            self.parts.setdefault(part, []).extend(part_rows)
        result = self.handle.append(pa.concat_tables([_part_table(n, r) for n, r in batch]))
        assert not result.failed, result.failed
        for view in self.views:
            reason = next(m.executor_reason or "" for m in result.maintenance if m.view == view.name)
            assert ("window kernel" in reason) == view.kernel, (view.name, reason)
            if view.kernel:
                assert self.calls.ran[view.name] > ran[view.name], view.name
                assert self.calls.refused[view.name] == refused[view.name], view.name
            else:
                assert self.calls.ran[view.name] == ran[view.name], view.name

    def append_late(self, rows: list[tuple[int, dict]]) -> None:
        """Append (part, row) pairs of parts already built in one batch: the parts are rebuilt."""
        for number, row in rows:
            self.parts.setdefault(number, []).append(row)
        numbers = sorted({number for number, _ in rows})
        batch = pa.concat_tables([_part_table(n, [r for m, r in rows if m == n]) for n in numbers])
        result = self.handle.append(batch)
        assert result.late_parts and not result.failed, result.failed

    def check(self, low: int = 0) -> None:
        """Every view's parts from ``low`` on equal plain Python's."""
        newest = max(self.parts)
        history = [self.parts.get(number, []) for number in range(newest + 1)]
        for view in self.views:
            columns = [*view.groups, *(alias for alias, _, _ in view.items)]
            expected = {
                n: {tuple(map(_reference_value, r)) for r in rows}
                for n, rows in reference(history, view.window, view.groups, view.items, view.at_least).items()
                if rows and n >= low
            }
            got = {n: rows for n, rows in stored(self.db, view.name, columns).items() if n >= low}
            assert sorted(got) == sorted(expected), view.name
            for number, rows in expected.items():
                assert sorted(got[number], key=repr) == sorted(rows, key=repr), (view.name, number)


@pytest.fixture(scope="module")
def local_db(spark, tmp_path_factory):
    """One warehouse for the module, maintained in-process (each test makes its own stream)."""
    return arrayviews.connect(
        str(tmp_path_factory.mktemp("kernel") / "warehouse"), spark=spark, execution="local"
    )


@pytest.fixture(scope="module")
def calls():
    """The kernel's steps counted and checked against their SQL for the whole module."""
    with pytest.MonkeyPatch.context() as patch:
        yield KernelCalls(patch)


def _day(n: int) -> dt.date:
    return dt.date(2026, 1, 1) + dt.timedelta(days=n)


def _at(n: int) -> dt.datetime:
    return dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=n)


I32 = 2**31 - 1
TOP = {"g": "a", "k": 1, "x": I32, "y": I32, "z": I32, "d": _day(0), "b": True, "t": _at(0), "f": 1.5}
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


def test_mixed_keys_and_extreme_values_equal_plain_python(local_db, calls) -> None:
    """Two and three group columns of string, int, date, boolean and timestamp with NULL keys; sums
    of values at INT's ends (exact, never wrapped), all-NULL groups, date and timestamp extremes,
    empty minutes (also steps reading no row at all); a BIGINT sum (of NULLs only); beside views the kernel does not take (HAVING) or refuses at
    every step (a DOUBLE max), right on the SQL path."""
    views = [
        View("m_sums", 2, ("g", "k"), ITEMS_SUM, kernel=True),
        View("m_ext", 3, ("d", "b", "t"), ITEMS_EXTREMES, kernel=True),
        View(
            "m_seven",
            7,
            ("g", "d"),
            [("sx", "sum", "x"), ("hi", "max", "z"), ("nz", "count", "z")],
            kernel=True,
        ),
        View("m_bigint", 2, ("g",), [("sw", "sum", "w"), ("n", "count", None)], kernel=True),
        View("m_having", 2, ("g",), [("sz", "sum", "z")], kernel=False, at_least=2),
        View("m_dmax", 2, ("g", "k"), [("hi", "max", "f"), ("n", "count", None)], kernel=False),
    ]
    trial = Trial(local_db, calls, "mixed", MIXED[0], views)
    for number, rows in enumerate(MIXED[1:], start=1):
        if rows:  # a minute without rows is built by the next append
            trial.append(number, rows)
    # after more empty minutes than any window holds: steps without a row in any part they read
    trial.append(len(MIXED) + 8, [{**TOP, "e": _day(1), "u": _at(1)}])
    trial.check()
    assert calls.refused["m_dmax"] >= 5 and not calls.refused["m_sums"] + calls.refused["m_ext"]


def test_bigint_sums_run_in_the_kernel_while_they_stay_well_inside_bigint(local_db, calls) -> None:
    """A BIGINT column's sums are kept as DECIMAL(38,0) by the SQL; the kernel takes them while every
    sum it forms stays below 2^62 (Python integers as the reference, avg as their quotient), and
    refuses a view whose cumulative sums pass that (3 * 2^60 a part: the window's sum of two parts
    still fits BIGINT, its epoch's cumulative sum does not), which the SQL keeps exact."""
    large = 3 * 2**60
    moderate = Trial(
        local_db,
        calls,
        "bigint_sums",
        [{"g": "a", "w": 10**15}, {"g": None, "w": -(10**15)}],
        [View("bw", 2, ("g",), [("sw", "sum", "w"), ("aw", "avg", "w"), ("n", "count", None)], kernel=True)],
    )
    huge = Trial(
        local_db,
        calls,
        "bigint_huge",
        [{"g": "a", "w": large}],
        [View("bhuge", 2, ("g",), [("sw", "sum", "w"), ("n", "count", None)], kernel=False, by_values=True)],
    )
    for number in range(1, 5):
        moderate.append(
            number, [{"g": "a", "w": 10**15 + number}, {"g": None, "w": -number}, {"g": "b", "w": 7}]
        )
        huge.append(number, [{"g": "a", "w": large - number}, {"g": None, "w": -large}])
    moderate.check()
    huge.check()
    assert calls.refused["bhuge"] >= 4 and not calls.refused["bw"]


EXTREMES_AND_SUMS = [("n", "count", None), ("s", "sum", "x"), ("hi", "max", "x"), ("lo", "min", "x")]
GAPS = (0, 1, 2, 3, 6, 7, 8)  # Wp - 1, Wp and Wp + 1 parts away for Wp = 1, 2 and 7


def _returning(number: int) -> list[dict]:
    """Part ``number``: group "gG" has a row every G + 1 parts (G parts away between them), the NULL
    group every third part; values fall, so a queue of max holds its whole window."""
    rows = [{"g": f"g{gap}", "x": 100 - number} for gap in GAPS if number % (gap + 1) == 0]
    return rows + ([{"g": None, "x": -number}] if number % 3 == 0 else [])


def test_groups_leaving_and_coming_back_at_the_windows_edge_and_late_rows(local_db, calls) -> None:
    """Groups away for exactly Wp parts, one less and one more (Wp = 1, 2, 7), start a new epoch or
    keep theirs, for sums and queues alike; then late rows rebuild parts already built (by the
    kernel again) and every part equals plain Python."""
    views = [View(f"r{w}", w, ("g",), EXTREMES_AND_SUMS, kernel=True) for w in (1, 2, 7)]
    trial = Trial(local_db, calls, "returns", _returning(0), views)
    for number in range(1, 19):
        trial.append(number, _returning(number))
    trial.check()
    for view in views:
        assert_queues(trial, view, 18)
    ran = Counter(calls.ran)
    # a value above all (the queue's new head) and one below all, in parts five and two back
    trial.append_late([(13, {"g": "g6", "x": 500}), (16, {"g": "g0", "x": -500}), (16, {"g": "new", "x": 1})])
    assert all(calls.ran[view.name] > ran[view.name] for view in views)
    trial.check()
    for view in views:
        assert_queues(trial, view, 18)


def test_views_made_before_queue_lists_keep_their_layout_and_kernel(local_db, calls) -> None:
    """A min/max window made before round 36, whose stored definition keeps each earlier queue
    entry as a row of its own (the translation's ``nested=False``), is still stepped by the window
    kernel in that layout: each step checked against its stored SQL (``calls``), every part
    against plain Python, late rows included."""
    defaults = WindowTranslation.__init__.__defaults__
    views = [View(f"before{w}", w, ("g",), EXTREMES_AND_SUMS, kernel=True) for w in (2, 7)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(WindowTranslation.__init__, "__defaults__", (*defaults[:-1], False))
        trial = Trial(local_db, calls, "before_lists", _returning(0), views)
    for number in range(1, 12):
        trial.append(number, _returning(number))
    trial.append_late([(9, {"g": "g6", "x": 500}), (10, {"g": "g0", "x": -500})])
    trial.check()
    for view in views:
        table = trial.db.stream_view(view.name)._handle.table
        table.refresh()
        part = EPOCH // MINUTE + 11
        rows = read_parquet_files(table.files_of_parts(part, part)).to_pylist()
        assert not any(name.startswith("earlier_") for name in rows[0])
        assert any(row["idle"] is None for row in rows)  # an earlier entry, a row of its own


def assert_queues(trial: Trial, view: View, number: int) -> None:
    """The stored queues of max(x) and min(x) at part ``number``, per group, hold exactly the
    window's part extremes no newer part's extreme equals or beats (a falling run: all of them)."""
    table = trial.db.stream_view(view.name)._handle.table
    table.refresh()
    part = EPOCH // MINUTE + number
    stored_rows = read_parquet_files(table.files_of_parts(part, part)).to_pylist()
    window = range(max(0, number - view.window + 1), number + 1)
    for function, pick in (("max", max), ("min", min)):
        extremes: dict = {}  # group -> [(part, the part's extreme)]
        for at in window:
            by_group: dict = {}
            for row in trial.parts.get(at, []):
                if row.get("x") is not None:
                    by_group.setdefault(tuple(row.get(c) for c in view.groups), []).append(row["x"])
            for group, values in by_group.items():
                extremes.setdefault(group, []).append(pick(values))
        for group, values in extremes.items():
            beaten = (lambda v, w: w >= v) if function == "max" else (lambda v, w: w <= v)
            expected = [v for k, v in enumerate(values) if not any(beaten(v, w) for w in values[k + 1 :])]
            (row,) = [r for r in stored_rows if tuple(r[c] for c in view.groups) == group]
            # the list of earlier entries, oldest first, then the newest (the batch's extreme)
            got = [e["v"] for e in row[f"earlier_{function}_x"]] + [row[f"queue_{function}_x"]]
            assert [v for v in got if v is not None] == expected, (view.name, group, function)


HYPOTHESIS_VIEWS = [
    View("h1", 1, ("g",), EXTREMES_AND_SUMS, kernel=True),
    View("h2", 2, ("g", "k"), [("s", "sum", "x"), ("nx", "count", "x"), ("a", "avg", "x")], kernel=True),
    View("h3", 3, ("k",), [("hi", "max", "x"), ("lo", "min", "x")], kernel=True),
    View("h7", 7, ("k", "g"), [("hi", "max", "x"), ("lo", "min", "x"), ("s", "sum", "z")], kernel=True),
    View(
        "hd", 2, ("b", "d"), [("umax", "max", "u"), ("emin", "min", "e"), ("n", "count", None)], kernel=True
    ),
]


@st.composite
def stretches(draw) -> list[list[dict]]:
    """A run of parts (some empty) of rows with keys from a few values (strings, ints, booleans, dates),
    NULL beside "", 0 and False, values falling,
    rising, repeating (ties), small, at INT's ends, or NULL."""
    trend = draw(st.sampled_from(["falling", "rising", "repeating", "small", "ends"]))
    parts = []
    for number in range(draw(st.integers(1, 9))):
        rows = []
        for k in range(draw(st.integers(0, 4))):
            if draw(st.integers(0, 5)) == 0:
                x = None
            elif trend == "falling":
                x = 1000 - 10 * number - k
            elif trend == "rising":
                x = 10 * number + k
            elif trend == "repeating":
                x = 7
            elif trend == "small":
                x = draw(st.integers(-3, 3))
            else:
                x = draw(st.sampled_from([I32, -I32 - 1, I32 - 1, 0]))
            key = {"g": draw(st.sampled_from(["a", "", None])), "k": draw(st.sampled_from([0, -1, None]))}
            rows.append({**key, "x": x, "z": draw(st.sampled_from([None, I32, -I32 - 1, 5]))})
            rows[-1].update(
                b=draw(st.sampled_from([True, False, None])),
                d=draw(st.sampled_from([_day(0), _day(-1), None])),
                u=draw(st.sampled_from([_at(0), _at(-1), _at(90), None])),
                e=draw(st.sampled_from([_day(3), _day(-400), None])),
            )
        parts.append(rows)
    return parts


@pytest.fixture(scope="module")
def hypothesis_trial(local_db, calls) -> Trial:
    return Trial(local_db, calls, "stretches", [{"g": "a", "k": 1, "x": 1}], HYPOTHESIS_VIEWS)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(parts=stretches(), together=st.booleans())
def test_random_stretches_equal_plain_python(hypothesis_trial, parts, together) -> None:
    """Each example appends its parts to one stream after more empty parts than any window holds
    (so no group of an earlier example is in its windows), part by part or all in one batch (one
    maintenance round: each step reads the part the step before it staged), and checks them."""
    first = max(hypothesis_trial.parts) + 9
    batch = [(first + offset, rows) for offset, rows in enumerate(parts) if rows]
    if batch and together:
        hypothesis_trial.append(*batch[0], *batch[1:])
    else:
        for number, rows in batch:
            hypothesis_trial.append(number, rows)
    if batch:
        hypothesis_trial.check(low=first)
        for view in HYPOTHESIS_VIEWS:
            if any((function, attribute) == ("max", "x") for _, function, attribute in view.items):
                assert_queues(hypothesis_trial, view, batch[-1][0])


@settings(max_examples=25, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["a", "", None]) | st.text(max_size=2),
            st.integers(-60, 60) | st.none(),
            st.booleans() | st.none(),
            st.sampled_from([_day(0), _day(-9), None]),
        ),
        max_size=60,
    ),
    limit=st.integers(2, 40),
    pieces=st.integers(1, 3),
)
def test_group_numbers_match_python_tuples_when_key_products_are_large(rows, limit, pieces) -> None:
    """Rows share a group number exactly when their keys are equal as tuples (NULL equal to NULL),
    also where the product of the key columns' cardinalities passes the kernel's limit (lowered
    here so a few rows pass it) and the numbers are made dense between columns; keys in chunks, or
    none (an empty date column has no numbers in Arrow)."""
    columns = []
    for index, kind in enumerate((pa.string(), pa.int32(), pa.bool_(), pa.date32())):
        values = [row[index] for row in rows]
        cut = [len(values) * p // pieces for p in range(pieces + 1)]
        columns.append(pa.chunked_array([values[a:b] for a, b in pairwise(cut)], type=kind))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(window_steps, "_LIMIT", limit)
        ids, total = window_steps.group_ids(columns)
    first: dict[tuple, int] = {}
    for number, row in enumerate(rows):
        first.setdefault(row, number)
    assert total >= len(first) and all(0 <= i < total for i in ids)
    for number, row in enumerate(rows):
        assert ids[number] == ids[first[row]]
    assert len({int(ids[first[row]]) for row in first}) == len(first)


def test_many_groups_of_three_columns(local_db, calls) -> None:
    """Thousands of groups of (string, int, timestamp) keys, their cardinalities' product far past
    the rows (the kernel renumbers the groups densely), some coming back from part to part."""

    def rows(number: int) -> list[dict]:
        return [
            {"g": f"s{(i * 7 + number) % 53}", "k": (i * 13) % 47 - number, "t": _at(i % 41), "x": i - 700}
            for i in range(1500)
            if (i + number) % 3
        ]

    items = [("n", "count", None), ("s", "sum", "x"), ("hi", "max", "x")]
    trial = Trial(local_db, calls, "wide", rows(0), [View("w3", 2, ("g", "k", "t"), items, kernel=True)])
    for number in (1, 2, 4):
        trial.append(number, rows(number))
    trial.check()


def test_an_arrow_error_in_the_kernel_is_a_refusal_not_a_failed_view() -> None:
    """Where Arrow cannot do what the kernel asks of it (here a group's age one past INT's end, which
    does not fit the stored column), the kernel refuses and the step's SQL decides; before, the
    Arrow error left the kernel and the view's maintenance failed (as min/max of a DATE did)."""
    from arrayviews.language.parser import parse_statement
    from arrayviews.streams.windows import WindowTranslation

    text = "CREATE VIEW q AS SELECT g, max(x) AS hi FROM s [WINDOW 3 MINUTES] GROUP BY g"
    step = WindowTranslation(parse_statement(text), MINUTE, {"g": "string", "x": "int"}).window_step()
    assert step is not None and step.queues
    batch = pa.table({"g": ["a"], "x": pa.array([1], pa.int32())})
    state = {step.age: I32, step.idle: 0, "hi": 5, step.queues[0].entry: 5}
    entries = pa.list_(pa.struct([pa.field("v", pa.int32()), pa.field("at", pa.int32())]))
    previous = pa.table(
        {
            "g": ["a"],
            **{name: pa.array([value], pa.int32()) for name, value in state.items()},
            step.queues[0].entries: pa.array([[]], entries),
        }
    )
    with pytest.raises(window_steps.StepRefused, match="2147483648 not in range"):
        window_steps.window_step(step, batch, previous, None)
