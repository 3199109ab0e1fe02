"""In-process stream steps where a helper's one consumer builds its new part in a worker thread
while the helper commits (streams/fusion.py ``Fusion.start_local``): contents equal the naive
run-length reference and a run with fusion off; a failing consumer fails its own step only, with the
error it has without fusion; a part not taken leaves no staged file; a crash between the helper's
and the consumer's commits is repaired by the next pass."""

from __future__ import annotations

import contextlib
from pathlib import Path
from urllib.parse import urlparse

import pytest

import arrayviews
import arrayviews.streams.fusion as fusion
from arrayviews.model.faults import InjectedFault, inject, interleave
from test_stream_views import (
    M0,
    SCHEMA,
    VIEW2,
    Truth,
    at_least,
    contents,
    folder_files,
    helper_and_reader,
    helper_text,
    network,
    run_lengths,
)

FUSED_LOCAL = "built in-process while the helper it reads committed"


@pytest.fixture(autouse=True)
def in_process_fusion(monkeypatch):
    """The in-process path is off by default (streams/fusion.py ``FUSE_IN_PROCESS``): on here."""
    monkeypatch.setattr(fusion, "FUSE_IN_PROCESS", True)


#: A reader failing (through raise_error, which both executors raise) once a run reaches 5.
FRAGILE = VIEW2.replace("View2", "Fragile").replace(
    "SELECT src, dest, ct, sum_loss\n  FROM Helper[j]",
    "SELECT src, dest, coalesce(CASE WHEN ct < 5 THEN ct END, raise_error(concat('run too long at ', src))) AS ct,"
    " sum_loss\n  FROM Helper[j]",
)


def _recorded(monkeypatch, method: str) -> list:
    """What ``Fusion.<method>`` returned (or whether it left a pending build), each call."""
    real = getattr(fusion.Fusion, method)
    calls = []

    def wrapped(self, *args):
        found = real(self, *args)
        calls.append((args, found if method == "take" else self.pending is not None))
        return found

    monkeypatch.setattr(fusion.Fusion, method, wrapped)
    return calls


def _committed_names(table) -> set[str]:
    """Names of the data files of every version a table holds (nothing expired in these tests)."""
    names = set()
    for version in range(table.current_version() + 1):
        names |= {Path(urlparse(uri).path).name for uri in table.all_files(version)}
    return names


def _no_staged_file_left(db, *views: str) -> None:
    for name in views:
        table = db.stream_view(name)._handle.table
        assert folder_files(table) <= _committed_names(table), f"{name} keeps files no version holds"


def test_the_reader_is_built_in_process_while_the_helper_commits(spark, tmp_path, monkeypatch) -> None:
    """Helper and View2 in-process, one minute a step: View2's part is the fused one each step (its
    reason says so, not with fusion off); contents equal the reference and the run without fusion;
    no staged file is left."""
    truth = Truth()
    db, stream = helper_and_reader(spark, tmp_path / "fused", truth)
    plain, plain_stream = helper_and_reader(spark, tmp_path / "plain", Truth())
    for minute in range(2, 7):
        rows = truth.add(network([minute]))
        monkeypatch.setattr(fusion, "FUSE_READER_PARTS", True)
        result = stream.append(rows)
        monkeypatch.setattr(fusion, "FUSE_READER_PARTS", False)
        unfused = plain_stream.append(rows)
        for found, fused in ((result, True), (unfused, False)):
            assert [(r.view, r.built, r.executor, r.error) for r in found.maintenance] == [
                ("Helper", [M0 + minute], "local", None),
                ("View2", [M0 + minute], "local", None),
            ]
            assert (FUSED_LOCAL in found.maintenance[1].executor_reason) == fused
            assert FUSED_LOCAL not in found.maintenance[0].executor_reason
    reference = run_lengths(truth.rows(), M0 + 1, M0 + 6)
    assert contents(db, "Helper") == reference == contents(plain, "Helper")
    assert contents(db, "View2") == at_least(reference) == contents(plain, "View2")
    assert contents(db, "View2")  # not trivially empty
    _no_staged_file_left(db, "Helper", "View2")
    # a second connection reads the same contents
    other = arrayviews.connect(str(tmp_path / "fused"), spark=spark, execution="local")
    assert contents(other, "View2") == at_least(reference)


def _failing_run(spark, path, truth: Truth) -> tuple[int | None, str | None]:
    db, stream = helper_and_reader(spark, path, truth, reader=FRAGILE)
    failed, error = None, None
    for minute in range(2, 9):
        result = stream.append(truth.add(network([minute])))
        by_view = {r.view: r for r in result.maintenance}
        assert by_view["Helper"].built == [M0 + minute] and by_view["Helper"].error is None
        if by_view["Fragile"].error is not None and failed is None:
            failed, error = minute, by_view["Fragile"].error
    assert contents(db, "Helper") == run_lengths(truth.rows(), M0 + 1, M0 + 8)
    _no_staged_file_left(db, "Helper", "Fragile")
    return failed, error


@pytest.mark.slow
def test_a_reader_failing_in_the_worker_fails_its_own_step_as_without_fusion(
    spark, tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(fusion, "FUSE_READER_PARTS", True)
    fused = _failing_run(spark, tmp_path / "fused", Truth())
    monkeypatch.setattr(fusion, "FUSE_READER_PARTS", False)
    plain = _failing_run(spark, tmp_path / "plain", Truth())
    assert fused[0] is not None, "the reader never failed: the test does not test anything"
    assert "run too long at " in fused[1]
    assert fused == plain


def test_a_part_not_taken_leaves_no_staged_file(spark, tmp_path, monkeypatch) -> None:
    """Something the reader read changed after its part was started (here: the versions the
    fusion recorded no longer match), so its step builds the part itself and the worker's files are
    deleted; contents equal the reference."""
    monkeypatch.setattr(fusion, "FUSE_READER_PARTS", True)
    real_take = fusion.Fusion.take
    refused = []

    def take(self, view, part):
        if self.pending is not None and view == self.consumer:
            self.pending = (*self.pending[:4], {**self.pending[4], "elsewhere": -1})
            refused.append(part)
        return real_take(self, view, part)

    monkeypatch.setattr(fusion.Fusion, "take", take)
    truth = Truth()
    db, stream = helper_and_reader(spark, tmp_path / "w", truth)
    for minute in range(2, 6):
        result = stream.append(truth.add(network([minute])))
        assert [(r.view, r.built, r.error) for r in result.maintenance] == [
            ("Helper", [M0 + minute], None),
            ("View2", [M0 + minute], None),
        ]
        assert FUSED_LOCAL not in result.maintenance[1].executor_reason
        _no_staged_file_left(db, "Helper", "View2")
    assert refused == [M0 + m for m in range(2, 6)]  # a part was started (and refused) every step
    reference = run_lengths(truth.rows(), M0 + 1, M0 + 5)
    assert contents(db, "Helper") == reference
    assert contents(db, "View2") == at_least(reference)


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("commit.done", "viewdf.before-commit"),  # the reader dies about to commit the fused part
        ("commit.done", "viewdf.staged"),  # the reader dies with the fused part staged
    ],
)
def test_a_crash_between_the_two_commits_is_repaired_by_the_next_pass(
    spark, tmp_path, monkeypatch, first, then
) -> None:
    monkeypatch.setattr(fusion, "FUSE_READER_PARTS", True)
    truth = Truth()
    db, stream = helper_and_reader(spark, tmp_path / "w", truth)
    for minute in range(2, 5):
        stream.append(truth.add(network([minute])))
    view2 = db.stream_view("View2")
    before = view2.status()
    files_before = folder_files(view2._handle.table)
    stream.append(truth.add(network([5])), maintain=False)
    taken = _recorded(monkeypatch, "take")
    with contextlib.ExitStack() as stack:
        # the first commit to finish is the helper's; from then on View2's step dies at ``then``
        stack.enter_context(interleave(first, lambda: stack.enter_context(inject(then))))
        with pytest.raises(InjectedFault):
            db.maintain_streams()
    # View2 took the part the worker built (files of its part 5), then died
    assert [(args, found is not None and len(found[0]) > 0) for args, found in taken] == [
        (("helper", M0 + 5), False),
        (("view2", M0 + 5), True),
    ]
    reference = run_lengths(truth.rows(), M0 + 1, M0 + 5)
    assert contents(db, "Helper") == reference  # the helper's part 5 is committed
    assert db.stream_view("View2").status() == before  # View2 is as it was
    assert folder_files(view2._handle.table) == files_before  # the worker's staged part is gone
    results = db.maintain_streams()
    assert [(r.view, r.built, r.error) for r in results] == [("View2", [M0 + 5], None)]
    assert contents(db, "View2") == at_least(reference)
    assert M0 + 5 in contents(db, "View2")
    _no_staged_file_left(db, "Helper", "View2")


def test_a_crash_of_the_helper_while_the_worker_builds_is_repaired_by_the_next_pass(
    spark, tmp_path, monkeypatch
) -> None:
    """The helper dies about to commit, its part staged and the reader's part started in the
    worker: neither view changes, no staged file stays, and the next pass builds both."""
    monkeypatch.setattr(fusion, "FUSE_READER_PARTS", True)
    truth = Truth()
    db, stream = helper_and_reader(spark, tmp_path / "w", truth)
    for minute in range(2, 5):
        stream.append(truth.add(network([minute])))
    statuses = [db.stream_view(v).status() for v in ("Helper", "View2")]
    files = [folder_files(db.stream_view(v)._handle.table) for v in ("Helper", "View2")]
    stream.append(truth.add(network([5])), maintain=False)
    started = _recorded(monkeypatch, "start_local")
    with inject("viewdf.before-commit"), pytest.raises(InjectedFault):
        db.maintain_streams()
    assert [(args[0], pending) for args, pending in started] == [
        (M0 + 5, True)
    ]  # the reader's part was being built when the helper died
    assert [db.stream_view(v).status() for v in ("Helper", "View2")] == statuses
    assert [folder_files(db.stream_view(v)._handle.table) for v in ("Helper", "View2")] == files
    results = db.maintain_streams()
    assert [(r.view, r.built, r.error) for r in results] == [
        ("Helper", [M0 + 5], None),
        ("View2", [M0 + 5], None),
    ]
    assert FUSED_LOCAL in results[1].executor_reason
    reference = run_lengths(truth.rows(), M0 + 1, M0 + 5)
    assert contents(db, "Helper") == reference
    assert contents(db, "View2") == at_least(reference)
    _no_staged_file_left(db, "Helper", "View2")


def test_a_fused_readers_estimate_counts_the_helpers_new_part(spark, tmp_path, monkeypatch) -> None:
    """The estimate the reader's step is chosen and reported with equals the one of the same step
    without fusion (the reader reads the same rows either way)."""
    import arrayviews.streams.maintainer as maintainer

    real_choose = maintainer.choose
    estimates = {True: [], False: []}
    for fuse in (True, False):
        monkeypatch.setattr(fusion, "FUSE_READER_PARTS", fuse)

        def recording(model, estimate, mode="auto", local_estimate=None, local_seconds=None, fuse=fuse):
            estimates[fuse].append((estimate.cells, estimate.bytes, estimate.chunks))
            return real_choose(model, estimate, mode, local_estimate, local_seconds)

        monkeypatch.setattr(maintainer, "choose", recording)
        truth = Truth()
        db, stream = helper_and_reader(spark, tmp_path / f"w{fuse}", truth)
        estimates[fuse].clear()  # from the views' creation on, only the steps below
        for minute in range(2, 5):
            stream.append(truth.add(network([minute])))
    readers = {fuse: found[1::2] for fuse, found in estimates.items()}  # helper, reader, per step
    assert len(readers[False]) == 3 and all(cells > 0 for cells, _, _ in readers[False])
    assert readers[True] == readers[False]


def test_a_fused_reader_is_priced_in_process_by_the_stream_step_terms_as_without_fusion(
    spark, tmp_path, monkeypatch
) -> None:
    """The reader's part, fused or not, is chosen and reported with the same in-process prediction,
    the stream step's SQL build terms over the rows it reads (the helper's new part included; the
    terms themselves are checked against the appended rows in test_window_plans.py). Fused, it was
    priced by the engines' per-cell cost (no prediction given to ``choose``), both in
    ``Fusion.start_local`` and in the step that takes the part."""
    import arrayviews.streams.fusion as fusion_module
    import arrayviews.streams.maintainer as maintainer

    seen = {True: [], False: []}
    for fuse in (True, False):
        monkeypatch.setattr(fusion, "FUSE_READER_PARTS", fuse)
        for module in (maintainer, fusion_module):
            real = module.choose

            def recording(
                model, estimate, mode="auto", local_estimate=None, local_seconds=None, fuse=fuse, real=real
            ):
                seen[fuse].append(local_seconds)
                return real(model, estimate, mode, local_estimate, local_seconds)

            monkeypatch.setattr(module, "choose", recording)
        truth = Truth()
        db, stream = helper_and_reader(spark, tmp_path / f"p{fuse}", truth)
        seen[fuse].clear()
        results = [stream.append(truth.add(network([minute]))) for minute in range(2, 5)]
        monkeypatch.undo()  # the recorders off before the next connection
        monkeypatch.setattr(fusion, "FUSE_IN_PROCESS", True)
        assert all(r.maintenance[1].error is None for r in results)
        assert (FUSED_LOCAL in results[-1].maintenance[1].executor_reason) == fuse
    assert seen[False] and None not in seen[False]
    assert None not in seen[True]
    # helper and reader per step; fused, the reader is priced twice (before the helper commits and
    # as its step takes the part), both times as its own step prices it without fusion
    unfused_readers = seen[False][1::2]
    fused_readers = [p for n, p in enumerate(seen[True]) if n % 3 != 0]
    assert fused_readers == [p for p in unfused_readers for _ in range(2)]


WINDOW = """CREATE VIEW Window4 AS
INITIALIZE Window4[i] AS SELECT src, dest, ct, sum_loss FROM Helper[i]
UPDATE Window4[j] AS SELECT src, dest, ct, sum_loss FROM Helper[j-3 .. j]
PARTITION LENGTH 60"""


def _auto_executors(spark, path, fuse: bool, monkeypatch) -> list[tuple[str, str]]:
    """(helper's executor, reader's executor) per step under execution='auto' with an in-process
    limit of 40 cells: the helper reads about 28 (M[j] and Helper[j-1]), the reader Window4 about
    44 (four helper parts of 2-3 rows, 4 columns)."""
    import dataclasses

    monkeypatch.setattr(fusion, "FUSE_READER_PARTS", fuse)
    truth = Truth()
    db = arrayviews.connect(str(path), spark=spark, execution="auto")
    db.executors._costs = dataclasses.replace(db.executors.costs, max_local_cells=40)
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    stream.append(truth.add(network(range(2))))
    db.sql(helper_text())
    db.sql(WINDOW)
    found = []
    for minute in range(2, 9):
        result = stream.append(truth.add(network([minute])))
        found.append(tuple(r.executor for r in result.maintenance))
    return found


@pytest.mark.slow
def test_a_fused_reader_over_the_in_process_limit_goes_to_spark_as_without_fusion(
    spark, tmp_path, monkeypatch
) -> None:
    plain = _auto_executors(spark, tmp_path / "plain", False, monkeypatch)
    assert plain[-1] == ("local", "spark")  # the limit sends the reader, not the helper, to Spark
    assert _auto_executors(spark, tmp_path / "fused", True, monkeypatch) == plain


ROUNDED_READER = """CREATE VIEW Rounded AS
INITIALIZE Rounded[i] AS SELECT src, dest, ct, bround(sum_loss / 4, 0) AS q FROM Helper[i]
UPDATE Rounded[j] AS SELECT src, dest, ct, bround(sum_loss / 4, 0) AS q FROM Helper[j]
PARTITION LENGTH 60"""


def test_a_reader_the_worker_cannot_run_is_built_on_spark_by_its_own_step(
    spark, tmp_path, monkeypatch
) -> None:
    """bround has no in-process meaning: the worker's build is refused, so the reader's step builds
    its part on Spark and says why; values against Python's half-even round of the reference; no
    staged file left."""
    monkeypatch.setattr(fusion, "FUSE_READER_PARTS", True)
    truth = Truth()
    db, stream = helper_and_reader(spark, tmp_path / "w", truth, reader=ROUNDED_READER)
    started = _recorded(monkeypatch, "start_local")
    for minute in range(2, 5):
        result = stream.append(truth.add(network([minute])))
        helper, reader = result.maintenance
        assert (helper.executor, reader.executor, reader.error) == ("local", "spark", None)
        assert "not in-process" in reader.executor_reason and "bround" in reader.executor_reason
        assert FUSED_LOCAL not in reader.executor_reason
    assert [pending for _, pending in started] == [True] * 3  # the worker was asked each step
    reference = run_lengths(truth.rows(), M0 + 1, M0 + 4)
    expected = {
        p: sorted((s, d, c, float(round(t / 4))) for s, d, c, t in rows) for p, rows in reference.items()
    }
    found = contents(db, "Rounded", (["src", "dest", "ct", "q"], ["ct"]))
    assert {p: sorted((s, d, c, float(q)) for s, d, c, q in rows) for p, rows in found.items()} == expected
    _no_staged_file_left(db, "Helper", "Rounded")


def test_a_helper_step_planned_again_after_losing_its_commit_is_not_read_from_the_early_part(
    spark, tmp_path, monkeypatch
) -> None:
    """The helper's first commit of minute 6 loses to another process, which meanwhile appended the
    minute's missing C reading; the helper's step is planned again and commits a part holding it.
    The reader's part built from the first attempt read the part without it, so it is not taken:
    View2 equals the reference with the late reading (C's run goes on through minute 6)."""
    from arrayviews.storage.part_table import PartTable
    from arrayviews.storage.snapshots import BaseMovedError
    from test_stream_views import PAIRS, late_c

    monkeypatch.setattr(fusion, "FUSE_READER_PARTS", True)
    truth = Truth()
    db, stream = helper_and_reader(spark, tmp_path / "w", truth)
    other = arrayviews.connect(str(tmp_path / "w"), spark=spark, execution="local").stream("M")
    for minute in range(2, 6):
        stream.append(truth.add(network([minute])))
    real_commit = PartTable.commit
    lost = []

    def commit(self, added, **options):
        if self.name.lower() == "helper" and options.get("operation") == "maintain" and not lost:
            lost.append(True)
            other.append(truth.add(late_c(6)), maintain=False)  # another process's late reading
            raise BaseMovedError("stream view helper", "another process committed first (test)")
        return real_commit(self, added, **options)

    monkeypatch.setattr(PartTable, "commit", commit)
    taken = _recorded(monkeypatch, "take")
    result = stream.append(truth.add(network([6], missing=(6,))))
    assert lost and [r.error for r in result.maintenance] == [None, None]
    assert taken and all(found is None for _, found in taken)  # the early part was refused
    stream.append(truth.add(network([7])))
    reference = run_lengths(truth.rows(), M0 + 1, M0 + 7)
    c_pair = tuple(PAIRS["C"])
    assert any(tuple(row[:2]) == c_pair for row in reference[M0 + 6])  # the late reading counts
    assert contents(db, "Helper") == reference
    assert contents(db, "View2") == at_least(reference)
    _no_staged_file_left(db, "Helper", "View2")
