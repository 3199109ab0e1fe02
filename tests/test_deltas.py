"""``version_delta`` (operators/deltas.py) against a dict model of every version: over random sequences
of inserts, replacing inserts, deletes and compactions, the delta between any two versions holds
exactly the deleted cells and old values of updated cells (minus) and the inserted cells and new
values of updated cells (plus); cells merely copied (same value, NaN stays NaN, null stays null) cancel."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrayviews
from arrayviews.operators.deltas import version_delta

EXTENT = 12
CHUNK = 4
SCHEMA = "{name}<v:float64, w:int64 NULL>[i=0:11:4; j=0:11:4]"

Cell = tuple[int, int]
Value = tuple[float, int | None]
Model = dict[Cell, Value]


@pytest.fixture(scope="module")
def mdb(spark, tmp_path_factory):
    """One warehouse for the module: each example writes its own array."""
    return arrayviews.connect(str(tmp_path_factory.mktemp("deltas") / "warehouse"), spark=spark)


_names = itertools.count()


def batch(cells: dict[Cell, Value]) -> pa.Table:
    coords = sorted(cells)
    v = [cells[c][0] for c in coords]
    w = [cells[c][1] for c in coords]
    return pa.table(
        {
            "i": pa.array([c[0] for c in coords], pa.int64()),
            "j": pa.array([c[1] for c in coords], pa.int64()),
            "v": pa.array(v, pa.float64()),
            "w": pa.array(
                [0 if x is None else x for x in w], pa.int64(), mask=np.array([x is None for x in w])
            ),
        }
    )


def same(a: Value, b: Value) -> bool:
    (va, wa), (vb, wb) = a, b
    return (va == vb or (math.isnan(va) and math.isnan(vb))) and wa == wb


def as_model(table: pa.Table) -> Model:
    rows = table.to_pylist()
    model = {(r["i"], r["j"]): (r["v"], r["w"]) for r in rows}
    assert len(model) == len(rows), "a cell appears twice on one side of the delta"
    return model


def expected_delta(old: Model, new: Model) -> tuple[Model, Model]:
    minus = {c: v for c, v in old.items() if c not in new or not same(v, new[c])}
    plus = {c: v for c, v in new.items() if c not in old or not same(v, old[c])}
    return minus, plus


def assert_models_equal(actual: Model, expected: Model, label: str) -> None:
    assert set(actual) == set(expected), label
    for cell, value in expected.items():
        assert same(actual[cell], value), (label, cell, actual[cell], value)


def check_delta(array, old_version: int, new_version: int, old: Model, new: Model) -> None:
    delta = version_delta(array.source.table, old_version, new_version)
    label = f"v{old_version} -> v{new_version}"
    assert (delta.old_version, delta.new_version) == (old_version, new_version)
    minus, plus = expected_delta(old, new)
    assert_models_equal(as_model(delta.minus), minus, f"minus {label}")
    assert_models_equal(as_model(delta.plus), plus, f"plus {label}")
    assert delta.empty == (not minus and not plus)
    changed = sorted(set(minus) | set(plus))
    chunks = sorted({(i // CHUNK, j // CHUNK) for i, j in changed})
    assert sorted(map(tuple, delta.touched_chunks().tolist())) == chunks
    coords = delta.coords("plus")
    assert coords.shape == (len(plus), 2)
    assert sorted(map(tuple, coords.tolist())) == sorted(plus)


# -- operations on the model and on the array -----------------------------------------------------------

values = st.tuples(
    st.one_of(st.integers(-3, 3).map(float), st.just(float("nan"))),
    st.one_of(st.none(), st.integers(-3, 3)),
)
coordinates = st.tuples(st.integers(0, EXTENT - 1), st.integers(0, EXTENT - 1))


@st.composite
def operations(draw):
    kind = draw(st.sampled_from(["insert", "replace", "rewrite", "delete", "delete_box", "compact"]))
    if kind in ("insert", "replace"):
        return kind, draw(st.dictionaries(coordinates, values, min_size=1, max_size=15))
    if kind in ("rewrite", "delete"):  # pick among the present cells when the op runs
        return kind, draw(st.integers(0, 2**31))
    if kind == "delete_box":
        i0, j0 = draw(coordinates)
        return kind, (i0, min(i0 + draw(st.integers(0, 4)), EXTENT - 1), j0, min(j0 + 3, EXTENT - 1))
    return kind, None


def apply(array, model: Model, operation) -> Model:
    """Run one write on the array and the model; returns the new model."""
    kind, argument = operation
    model = dict(model)
    if kind == "insert":
        new = {c: v for c, v in argument.items() if c not in model}
        if new:
            array.insert(batch(new))
            model.update(new)
    elif kind == "replace":  # new cells and updates of present ones
        array.insert(batch(argument), on_conflict="replace")
        model.update(argument)
    elif kind == "rewrite":  # replace present cells, some with their very same value
        rng = np.random.default_rng(argument)
        present = sorted(model)
        if present:
            chosen = [present[k] for k in rng.choice(len(present), min(6, len(present)), replace=False)]
            cells = {
                c: model[c] if k % 2 == 0 else (float(rng.integers(-3, 4)), None)
                for k, c in enumerate(chosen)
            }
            array.insert(batch(cells), on_conflict="replace")
            model.update(cells)
    elif kind == "delete":
        rng = np.random.default_rng(argument)
        present = sorted(model)
        if present:
            chosen = [present[k] for k in rng.choice(len(present), min(4, len(present)), replace=False)]
            array.delete(np.array(chosen, dtype=np.int64))
            for c in chosen:
                del model[c]
    elif kind == "delete_box":
        i0, i1, j0, j1 = argument
        if any(i0 <= i <= i1 and j0 <= j <= j1 for i, j in model):
            array.delete(box={"i": (i0, i1), "j": (j0, j1)})
            model = {c: v for c, v in model.items() if not (i0 <= c[0] <= i1 and j0 <= c[1] <= j1)}
    else:
        array.compact()
    return model


def run(mdb, ops) -> tuple[object, dict[int, Model]]:
    array = mdb.create_array(SCHEMA.format(name=f"D{next(_names)}"))
    history: dict[int, Model] = {0: {}}
    model: Model = {}
    for operation in ops:
        model = apply(array, model, operation)
        version = mdb.array(array.name).version
        if version in history:  # nothing was committed: the model must not have changed
            assert history[version] == model or all(same(model[c], history[version][c]) for c in model)
        history[version] = model
    return mdb.array(array.name), history


@pytest.mark.slow
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(operations(), min_size=3, max_size=6))
def test_random_histories(mdb, ops) -> None:
    array, history = run(mdb, ops)
    versions = sorted(history)
    for old, new in itertools.combinations(versions, 2):
        check_delta(array, old, new, history[old], history[new])
    for version in versions:  # a version against itself: nothing changed
        assert version_delta(array.source.table, version, version).empty


def test_insert_update_delete_and_compact(mdb) -> None:
    """A fixed history covering every kind of change, compared version by version and overall."""
    ops = [
        ("insert", {(0, 0): (1.0, 1), (0, 1): (float("nan"), None), (5, 5): (2.0, 2), (11, 11): (3.0, None)}),
        ("replace", {(0, 0): (1.0, 1), (0, 1): (float("nan"), None), (5, 5): (7.0, 2), (6, 6): (4.0, 4)}),
        ("replace", {(11, 11): (3.0, 5), (5, 5): (float("nan"), 2)}),
        ("delete", 1),
        ("compact", None),
        ("replace", {(6, 6): (4.0, 4), (0, 0): (1.0, None)}),
        ("delete_box", (0, 11, 0, 11)),
        ("insert", {(3, 3): (0.5, 0)}),
    ]
    array, history = run(mdb, ops)
    versions = sorted(history)
    assert len(versions) >= len(ops), "a write of this history did not commit"
    for old, new in itertools.combinations(versions, 2):
        check_delta(array, old, new, history[old], history[new])


def test_copied_cells_cancel(mdb) -> None:
    """Replacing cells by the very same values (NaN, null included) or compacting is no change."""
    array = mdb.create_array(SCHEMA.format(name=f"D{next(_names)}"))
    cells = {(1, 1): (float("nan"), None), (1, 2): (2.0, 3), (9, 9): (-1.0, None)}
    array.insert(batch(cells))
    first = mdb.array(array.name).version
    array.insert(batch(cells), on_conflict="replace")
    array.compact()
    array = mdb.array(array.name)
    assert array.version > first
    delta = version_delta(array.source.table, first, array.version)
    assert delta.empty, (delta.minus.to_pylist(), delta.plus.to_pylist())
    assert len(delta.touched_chunks()) == 0
    # null -> value and NaN -> number are changes
    array.insert(
        batch({(1, 1): (float("nan"), 0), (9, 9): (-1.0, None), (1, 2): (2.5, 3)}), on_conflict="replace"
    )
    array = mdb.array(array.name)
    delta = version_delta(array.source.table, first, array.version)
    assert sorted(as_model(delta.minus)) == [(1, 1), (1, 2)]
    assert as_model(delta.plus)[(1, 1)][1] == 0 and as_model(delta.plus)[(1, 2)][0] == 2.5


def _recording_reads(monkeypatch) -> list[tuple[list[str] | None, int]]:
    """Record every Parquet read of ``version_delta``: the columns asked for and the rows returned."""
    from arrayviews.operators import deltas

    calls: list[tuple[list[str] | None, int]] = []
    original = deltas.read_parquet_files

    def recording(uris, columns=None, row_filter=None, schema=None):
        table = original(uris, columns=columns, row_filter=row_filter, schema=schema)
        calls.append((columns, table.num_rows))
        return table

    monkeypatch.setattr(deltas, "read_parquet_files", recording)
    return calls


def test_a_compaction_is_no_change_and_reads_no_cells(mdb, monkeypatch) -> None:
    """After inserts and a compaction, the delta across the compaction is found from fragment
    metadata alone: no file's cell data is read (the array is not read twice)."""
    array = mdb.create_array(SCHEMA.format(name=f"D{next(_names)}"))
    array.insert(batch({(i, j): (float(i), j) for i in range(0, 12, 2) for j in range(0, 12, 3)}))
    array.insert(batch({(1, 1): (5.0, None), (9, 10): (float("nan"), 2)}))
    before = mdb.array(array.name).version
    array.compact()
    after = mdb.array(array.name)
    assert after.version == before + 1
    calls = _recording_reads(monkeypatch)
    delta = version_delta(after.source.table, before, after.version)
    assert delta.empty
    assert calls and all(columns is not None and "cells" not in columns for columns, _ in calls), calls
    # across an insert and the compaction: only the inserted cells, read from the changed chunk only
    array.insert(batch({(2, 1): (1.5, 1)}))
    newest = mdb.array(array.name)
    newest.compact()
    newest = mdb.array(array.name)
    calls.clear()
    delta = version_delta(newest.source.table, before, newest.version)
    assert as_model(delta.minus) == {}
    assert list(as_model(delta.plus)) == [(2, 1)]
    payload_rows = [rows for columns, rows in calls if columns is None]
    assert payload_rows and sum(payload_rows) <= 3, calls  # chunk (0, 0): two old fragments, one merged


def test_a_replace_in_one_chunk_reads_that_chunk_only(mdb, monkeypatch) -> None:
    """A replacing insert that rewrites a file holding every chunk: the delta reads the fragments of
    the changed chunk, not the whole dropped and added files."""
    array = mdb.create_array(SCHEMA.format(name=f"D{next(_names)}"))
    cells = {(i, j): (float(i * j), None) for i in range(EXTENT) for j in range(EXTENT)}
    array.insert(batch(cells))  # one file, nine chunks
    before = mdb.array(array.name).version
    array.insert(batch({(5, 6): (-1.0, 3)}), on_conflict="replace")
    after = mdb.array(array.name)
    calls = _recording_reads(monkeypatch)
    delta = version_delta(after.source.table, before, after.version)
    assert as_model(delta.minus) == {(5, 6): (30.0, None)}
    assert as_model(delta.plus) == {(5, 6): (-1.0, 3)}
    payload_rows = [rows for columns, rows in calls if columns is None]
    assert payload_rows and max(payload_rows) <= 2, calls  # chunk (1, 1): old fragment, new ones
