"""One namespace under two processes: arrays, views and streams share one namespace of names, and the
claim of a name is atomic across kinds. Two forked processes create a stream and an array (or an
array view) of one name at the same instant, a barrier at the last checkpoint before the catalog
commit holding each until the other has passed every check: exactly one wins, the loser gets the
error naming the winner's kind, and ``relations()`` never lists the name twice. A drop racing a
creation, and a creation killed (kill -9) before its catalog row, leave the name usable.

Before the catalog refused a second table of one name across its two catalog namespaces, both
creations of a forced race succeeded (two relations called ``n0``)."""

from __future__ import annotations

import datetime as dt
import logging
import multiprocessing
import os

import numpy as np
import pandas as pd
import pytest
import sqlalchemy

import arrayviews
from arrayviews.model import faults
from arrayviews.model.errors import AlreadyExistsError, ArrayViewsError, NotFoundError, ValidationError
from arrayviews.model.shapes import L1
from arrayviews.storage import catalog as catalog_module
from arrayviews.storage import creation
from arrayviews.views.definition import similarity
from processes import fork
from test_catalogs import POSTGRES, POSTGRES_REQUIRED, _fresh_postgres_schema_url

STREAM_SCHEMA = "ts timestamp, src string, loss int"
#: Forced races per pair of kinds (each one deterministic: both processes pass every check first).
FORCED_ROUNDS = 2
#: Races left to the operating system's timing (both released by one barrier at the start).
FREE_ROUNDS = 2


@pytest.fixture(scope="module")
def place(spark, tmp_path_factory):
    return _place(spark, tmp_path_factory.mktemp("namespace_races"), {})


def _place(spark, folder, options: dict):
    """(database, what a child connects with, folder of the children's results), with the array
    ``Base`` the views read."""
    opened = {"path": str(folder / "warehouse"), "execution": "local", **options}
    db = arrayviews.connect(spark=spark, **opened)
    base = db.create_array("Base<v:float64>[i=0:9:5; j=0:9:5]")
    base.insert({"i": [1, 2, 7], "j": [3, 3, 8], "v": [1.0, 2.0, 4.0]})
    return db, opened, folder / "children"


def _outcome(action) -> dict:
    """What a child's creation did: ``won``, or the loser's error (type and message)."""
    try:
        action()
    except AlreadyExistsError as error:
        return {"won": False, "error": type(error).__name__, "message": str(error)}
    return {"won": True}


def _creator(spark, opened: dict, kind: str, name: str, barrier, forced: bool):
    """The function a child runs: open the warehouse, then create ``name`` as ``kind``; with
    ``forced``, wait for the other child at the last checkpoint before the catalog commit."""

    def run() -> dict:
        db = arrayviews.connect(spark=spark, **opened)
        actions = {
            "stream": lambda: db.create_stream(name, STREAM_SCHEMA, 60, "ts"),
            "array": lambda: db.create_array(f"{name}<v:float64>[i=0:9:5]"),
            "view": lambda: db.create_view(name, similarity("Base", "Base", L1(1), ["count(*) as c"])),
            "drop": lambda: db.drop_array(name),
        }
        if not forced:
            barrier.wait()
            return _outcome(actions[kind])
        with faults.interleave("create.before-commit", lambda: barrier.wait()):
            return _outcome(actions[kind])

    return run


def _race(spark, place, first: str, second: str, name: str, forced: bool = True) -> dict[str, dict]:
    db, opened, results = place
    barrier = multiprocessing.get_context("fork").Barrier(2, timeout=120)
    children = {
        kind: fork(spark, results, _creator(spark, opened, kind, name, barrier, forced), label=kind)
        for kind in (first, second)
    }
    outcomes = {}
    for kind, child in children.items():
        outcome = child.wait()
        assert outcome.code == 0 and not outcome.killed, f"{kind} child failed:\n{outcome.error}"
        outcomes[kind] = outcome.value
    return outcomes


def _holders(db, name: str) -> list[str]:
    """The kinds of the relations called ``name`` (without regard to case), helpers included."""
    listing = db.relations(helpers=True)
    return sorted(listing.kind[listing.name.str.lower() == name.lower()])


ARTICLE = {"stream": "a stream", "array": "an array", "view": "an array view"}
KIND = {"stream": "stream", "array": "array", "view": "array view"}


@pytest.mark.parametrize("other", ["array", "view"])
def test_a_stream_and_another_kind_created_at_once_under_one_name_one_wins(spark, place, other) -> None:
    rounds = [(f"n_{other}_{k}", True) for k in range(FORCED_ROUNDS)]
    rounds += [(f"f_{other}_{k}", False) for k in range(FREE_ROUNDS)]
    _one_winner_each_time(spark, place, other, rounds)


def test_on_a_shared_postgresql_catalog_one_wins_too(spark, tmp_path) -> None:
    if not POSTGRES:
        message = "set ARRAYVIEWS_TEST_POSTGRES_URL to test the PostgreSQL catalog"
        if POSTGRES_REQUIRED:
            pytest.fail(f"PostgreSQL is required (ARRAYVIEWS_TEST_POSTGRES=required): {message}")
        pytest.skip(message)
    place = _place(spark, tmp_path, {"catalog_uri": _fresh_postgres_schema_url()})
    rounds = [(f"p_{k}", True) for k in range(FORCED_ROUNDS)] + [("p_free", False)]
    _one_winner_each_time(spark, place, "array", rounds)
    _one_winner_each_time(spark, place, "view", [("p_view", True)])


def _one_winner_each_time(spark, place, other: str, rounds: list[tuple[str, bool]]) -> None:
    db = place[0]
    for name, forced in rounds:
        outcomes = _race(spark, place, "stream", other, name, forced)
        winners = [kind for kind, outcome in outcomes.items() if outcome["won"]]
        assert len(winners) == 1, (name, outcomes)
        (winner,) = winners
        (loser,) = set(outcomes) - {winner}
        message = outcomes[loser]["message"]
        assert f"{ARTICLE[winner]} named {name}" in message, (name, message)
        assert "share one namespace" in message, message
        assert _holders(db, name) == [KIND[winner]], (name, outcomes)


def test_a_drop_racing_a_creation_of_another_kind_leaves_the_name_usable(spark, place) -> None:
    db = place[0]
    for k in range(4):
        name = f"d{k}"
        db.create_array(f"{name}<v:float64>[i=0:9:5]")
        outcomes = _race(spark, place, "drop", "stream", name, forced=False)
        assert outcomes["drop"]["won"], outcomes
        created = outcomes["stream"]["won"]
        if not created:  # checked before the drop: refused, naming the array
            assert f"an array named {name}" in outcomes["stream"]["message"], outcomes
        assert _holders(db, name) == (["stream"] if created else []), outcomes
        # the name is usable afterwards, by either kind
        if created:
            db.drop_stream(name)
        again = db.create_array(f"{name}<v:float64>[i=0:9:5]")
        again.insert({"i": [4], "v": [2.5]})
        assert again.to_pandas().v.tolist() == [2.5]
        assert _holders(db, name) == ["array"]


@pytest.mark.parametrize("kill_at", [1, 2])
def test_a_creation_killed_before_its_catalog_row_leaves_the_name_usable(spark, place, kill_at) -> None:
    """Killed at the check-to-commit checkpoint (1) or with its metadata file written but no catalog
    row yet (2): the name is claimed by nothing, and another kind takes it at once."""
    db, opened, results = place
    name = f"k{kill_at}"

    def create() -> None:
        arrayviews.connect(spark=spark, **opened).create_array(f"{name}<v:float64>[i=0:9:5]")

    outcome = fork(spark, results, create, kill_at=kill_at, label="killed").wait()
    assert outcome.killed, outcome
    assert _holders(db, name) == []
    stream = db.create_stream(name, STREAM_SCHEMA, 60, "ts")
    stream.append(
        pd.DataFrame({"ts": pd.to_datetime(["2026-01-01T00:00:10"], utc=True), "src": ["a"], "loss": [3]})
    )
    assert _holders(db, name) == ["stream"]
    with pytest.raises(AlreadyExistsError, match=f"a stream named {name}"):
        db.create_array(f"{name}<v:float64>[i=0:9:5]")
    db.drop_stream(name)
    array = db.create_array(f"{name}<v:float64>[i=0:9:5]")
    array.insert({"i": [0, 9], "v": [1.0, 2.0]})
    np.testing.assert_array_equal(array.to_pandas().sort_values("i").v, [1.0, 2.0])


def test_a_warehouse_holding_a_name_twice_from_before_opens_with_a_warning_naming_it(
    spark, tmp_path, monkeypatch, caplog
) -> None:
    """A catalog two racing creations left with one name twice (possible before the unique index)
    cannot have the index: it opens, a warning names the name, and once one of the two is dropped
    the next opening gives the catalog the index."""
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark, execution="local")
    db.create_array("Twice<v:float64>[i=0:9:5]")
    with sqlalchemy.create_engine(f"sqlite:///{location}/catalog.db").begin() as connection:
        connection.execute(sqlalchemy.text(f"DROP INDEX {catalog_module.ONE_NAMESPACE_INDEX}"))
    # the stream a racing process created after this one's check (the check is skipped here)
    monkeypatch.setattr(creation, "_refuse_name_of_another_kind", lambda *args: None)
    db.create_stream("twice", STREAM_SCHEMA, 60, "ts")
    monkeypatch.undo()
    monkeypatch.setattr(catalog_module, "_indexed", set())
    with caplog.at_level(logging.WARNING, logger="arrayviews.storage.catalog"):
        again = arrayviews.connect(location, spark=spark, execution="local")
    assert "holds names twice (twice: two relations of each" in caplog.text, caplog.text
    assert _holders(again, "twice") == ["array", "stream"]
    again.drop_stream("twice")
    third = arrayviews.connect(location, spark=spark, execution="local")
    with pytest.raises(AlreadyExistsError, match="an array named twice"):
        third.create_stream("twice", STREAM_SCHEMA, 60, "ts")
    with sqlalchemy.create_engine(f"sqlite:///{location}/catalog.db").connect() as connection:
        indexes = connection.execute(sqlalchemy.text("SELECT name FROM sqlite_master WHERE type='index'"))
        assert catalog_module.ONE_NAMESPACE_INDEX in {row[0] for row in indexes}


def test_a_drop_leaves_the_relation_another_process_created_again_under_the_name(spark, place) -> None:
    """While a drop of stream S is between opening it and deleting its catalog row, another process
    drops it and creates it again, with a row: the waiting drop is refused, and the new stream is
    intact. Before, the drop deleted the new stream's catalog row (by name), leaving its folder
    behind (and a view created over the new stream meanwhile read a stream that no longer existed:
    ``relations()`` itself then failed). Stream views are dropped the same way
    (``storage/creation.drop_table_as_checked``)."""
    db, opened, results = place
    row = pd.DataFrame({"ts": pd.to_datetime(["2026-01-01T00:00:05"], utc=True), "src": ["a"], "loss": [7]})

    def again() -> None:
        other = arrayviews.connect(spark=spark, **opened)
        other.drop_stream("S_again")
        other.create_stream("S_again", STREAM_SCHEMA, 60, "ts").append(row)

    def in_another_process() -> None:
        outcome = fork(spark, results, again, label="again").wait()
        assert outcome.code == 0 and not outcome.killed, outcome.error

    db.create_stream("S_again", STREAM_SCHEMA, 60, "ts")
    with (
        faults.interleave("drop.before-commit", in_another_process),
        pytest.raises(NotFoundError, match="stream S_again was dropped and created again"),
    ):
        db.drop_stream("S_again")
    listing = db.relations()
    assert listing[listing.name == "S_again"][["kind", "version"]].values.tolist() == [["stream", 1]]
    db.drop_stream("S_again")
    assert _holders(db, "S_again") == []


VIEW_OVER = """CREATE VIEW {view} AS
INITIALIZE {view}[i] AS SELECT src, count(*) AS n FROM {stream}[i] GROUP BY src
UPDATE {view}[j] AS SELECT src, count(*) AS n FROM {stream}[j] GROUP BY src
PARTITION LENGTH 60"""


def test_a_view_created_over_a_stream_while_it_is_dropped_keeps_its_stream(spark, tmp_path) -> None:
    """Another process creates stream view R over stream S while a drop of S is between its check
    of S's readers and its catalog delete: the drop is refused naming R (S's row put back as it was),
    S keeps its row and R reads it. Once the drop has committed and checked again, a view over S
    is refused instead. Before, R was left reading a dropped stream and ``relations()`` failed
    ("no stream or stream view named s_read")."""
    db, opened, results = _place(spark, tmp_path, {})
    row = pd.DataFrame({"ts": pd.to_datetime(["2026-01-01T00:00:05"], utc=True), "src": ["a"], "loss": [7]})
    db.create_stream("S_read", STREAM_SCHEMA, 60, "ts").append(row)

    def view_in_another_process(view: str):
        def create() -> dict:
            try:
                arrayviews.connect(spark=spark, **opened).sql(VIEW_OVER.format(view=view, stream="S_read"))
            except ArrayViewsError as error:
                return {"created": False, "message": str(error)}
            return {"created": True}

        def action() -> None:
            outcome = fork(spark, results, create, label=view).wait()
            assert outcome.code == 0 and not outcome.killed, outcome.error
            created[view] = outcome.value

        return action

    created: dict[str, dict] = {}
    with (
        faults.interleave("drop.before-commit", view_in_another_process("R_read")),
        pytest.raises(ValidationError, match=r"stream S_read is read by view\(s\) R_read"),
    ):
        db.drop_stream("S_read")
    assert created["R_read"] == {"created": True}
    listing = db.relations(helpers=True)
    assert sorted(zip(listing.name.str.lower(), listing.kind, listing.version, strict=True)) == [
        ("base", "array", 1),
        ("r_read", "stream view", 1),
        ("s_read", "stream", 1),
    ]
    assert db.stream_view("R_read").to_pandas().n.tolist() == [1]  # S's row, read after the refusal
    db.drop_stream_view("R_read")
    with faults.interleave("drop.committed", view_in_another_process("Q_read")):
        db.drop_stream("S_read")
    assert not created["Q_read"]["created"] and "s_read" in created["Q_read"]["message"].lower()
    assert sorted(db.relations(helpers=True).name.str.lower()) == ["base"]


def test_an_array_view_created_over_an_array_while_it_is_dropped_keeps_its_array(spark, tmp_path) -> None:
    """As for streams: another process creates array view V over array A while a drop of A is between
    its check of A's views and its catalog delete: the drop is refused naming V, and A and V stay
    readable. Before, V was left over a dropped array."""
    db, opened, results = _place(spark, tmp_path, {})

    def view_in_another_process() -> None:
        def create() -> None:
            other = arrayviews.connect(spark=spark, **opened)
            other.create_view("V_over", similarity("Base", "Base", L1(1), ["count(*) as c"]))

        outcome = fork(spark, results, create, label="view").wait()
        assert outcome.code == 0 and not outcome.killed, outcome.error

    with (
        faults.interleave("drop.before-commit", view_in_another_process),
        pytest.raises(ValidationError, match=r"array Base is a base of view\(s\) V_over"),
    ):
        db.drop_array("Base")
    assert sorted(zip(db.relations().name, db.relations().kind, strict=True)) == [
        ("Base", "array"),
        ("V_over", "array view"),
    ]
    cells = {(1, 3): 1.0, (2, 3): 2.0, (7, 8): 4.0}  # Base's cells: count of cells within L1 distance 1
    expected = {c: sum(abs(c[0] - o[0]) + abs(c[1] - o[1]) <= 1 for o in cells) for c in cells}
    got = {(int(r.i), int(r.j)): int(r.c) for r in db.view("V_over").to_pandas().itertuples()}
    assert got == expected
    assert db.array("Base").to_pandas().v.sort_values().tolist() == [1.0, 2.0, 4.0]


def _kill_a_drop_racing_a_view(spark, opened: dict, results, create_view, drop) -> None:
    """In a forked process: ``drop(db)``, during which (at its last check of the readers)
    ``create_view(db)`` runs on another connection, and the process is killed (SIGKILL) right after
    the drop deleted the catalog row, before it can put the row back for the new view."""

    def drop_killed() -> None:
        other = arrayviews.connect(spark=spark, **opened)

        def view_meanwhile() -> None:
            create_view(arrayviews.connect(spark=spark, **opened))
            os.environ[faults.KILL_ENVIRONMENT] = "1:drop.row-deleted"

        with faults.interleave("drop.before-commit", view_meanwhile):
            drop(other)

    outcome = fork(spark, results, drop_killed, label="killed-drop").wait()
    assert outcome.killed, outcome.error


def test_a_drop_killed_before_its_put_back_is_undone_by_repair(spark, tmp_path) -> None:
    """kill -9 of a drop of array Base after its catalog row went and before the put-back that the
    view V_late, created over Base meanwhile, calls for: Base's row is gone, its folder stays, and
    V_late reads a relation that is no longer listed. ``check(repair=True)`` registers Base again
    from its newest intact metadata (a view reads it) instead of deleting its folder as an orphan,
    and Base and V_late read as before. Before, repair deleted the folder: V_late was lost."""
    db, opened, results = _place(spark, tmp_path, {})

    _kill_a_drop_racing_a_view(
        spark,
        opened,
        results,
        lambda db: db.create_view("V_late", similarity("Base", "Base", L1(1), ["count(*) as c"])),
        lambda db: db.drop_array("Base"),
    )
    after = arrayviews.connect(spark=spark, **opened)
    assert not after.warehouse.exists("Base")
    # before the repair: listed without Base, named by the check, refreshing V_late says what to do
    assert after.relations().name.tolist() == ["V_late"]
    seen = after.check(orphans_older_than=dt.timedelta(0))
    assert not seen.healthy and [(p.relation, p.repaired) for p in seen.problems] == [("Base", False)]
    with pytest.raises(NotFoundError, match=r"view V_late reads array Base.*check --repair"):
        after.view("V_late").refresh()
    report = after.check(repair=True, orphans_older_than=dt.timedelta(0))
    restored = [p for p in report.problems if p.relation == "Base"]
    assert len(restored) == 1 and restored[0].repaired and "V_late" in restored[0].problem, str(report)
    again = arrayviews.connect(spark=spark, **opened)
    assert sorted(zip(again.relations().name, again.relations().kind, strict=True)) == [
        ("Base", "array"),
        ("V_late", "array view"),
    ]
    assert again.array("Base").to_pandas().v.sort_values().tolist() == [1.0, 2.0, 4.0]
    cells = {(1, 3): 1.0, (2, 3): 2.0, (7, 8): 4.0}  # Base's cells: count of cells within L1 distance 1
    expected = {c: sum(abs(c[0] - o[0]) + abs(c[1] - o[1]) <= 1 for o in cells) for c in cells}
    got = {(int(r.i), int(r.j)): int(r.c) for r in again.view("V_late").to_pandas().itertuples()}
    assert got == expected
    assert again.check().healthy


def test_a_stream_drop_killed_before_its_put_back_is_undone_by_repair(spark, tmp_path) -> None:
    """As for arrays, for a stream (named by its table's properties, not its schema): the drop of
    S_gone is killed after its catalog row went, with stream view R_late created over it meanwhile;
    repair registers S_gone again, and R_late reads S_gone's row."""
    db, opened, results = _place(spark, tmp_path, {})
    row = pd.DataFrame({"ts": pd.to_datetime(["2026-01-01T00:00:05"], utc=True), "src": ["a"], "loss": [7]})
    db.create_stream("S_gone", STREAM_SCHEMA, 60, "ts").append(row)

    _kill_a_drop_racing_a_view(
        spark,
        opened,
        results,
        lambda db: db.sql(VIEW_OVER.format(view="R_late", stream="S_gone")),
        lambda db: db.drop_stream("S_gone"),
    )
    after = arrayviews.connect(spark=spark, **opened)
    assert sorted(after.relations().name.str.lower()) == ["base", "r_late"]  # listed without S_gone
    report = after.check(repair=True, orphans_older_than=dt.timedelta(0))
    assert [(p.relation, p.kind, p.repaired) for p in report.problems] == [("S_gone", "stream", True)], str(
        report
    )
    again = arrayviews.connect(spark=spark, **opened)
    assert sorted(zip(again.relations().name.str.lower(), again.relations().kind, strict=True)) == [
        ("base", "array"),
        ("r_late", "stream view"),
        ("s_gone", "stream"),
    ]
    assert again.stream_view("R_late").to_pandas().n.tolist() == [1]
    assert again.check().healthy
