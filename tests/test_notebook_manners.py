"""numpy and notebook manners: indexing in dimension coordinates (numpy as the oracle), shape/dims/attrs,
np.asarray, reprs of arrays, views, streams and stream views, xarray round trips."""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayviews.model.errors import ValidationError
from arrayviews.model.indexing import index_box
from arrayviews.model.schema_parser import parse_schema


# -- index boxes against numpy's own slicing of the coordinate vector --------------------------------
def _reference(low: int, high: int, item) -> tuple[int, int] | None:
    """What numpy selects from the coordinates low..high when they are indexed *by value*."""
    coordinates = np.arange(low, high + 1)
    if isinstance(item, slice):
        start = low if item.start is None else item.start
        stop = high + 1 if item.stop is None else item.stop
        chosen = coordinates[(coordinates >= start) & (coordinates < stop)]
    else:
        chosen = coordinates[coordinates == item]
    return (int(chosen.min()), int(chosen.max())) if chosen.size else None


bounds = st.integers(-20, 20)
ends = st.one_of(st.none(), st.integers(-30, 30))


@settings(max_examples=300, deadline=None)
@given(
    low=bounds,
    extent=st.integers(1, 15),
    first=st.one_of(st.builds(slice, ends, ends), st.integers(-30, 30)),
    second=st.one_of(st.builds(slice, ends, ends), st.integers(-30, 30)),
)
def test_index_boxes_select_what_numpy_selects_by_coordinate(low, extent, first, second) -> None:
    high = low + extent - 1
    schema = parse_schema(f"A<v:float64>[i={low}:{high}:4; j=0:9:5]")
    expected_i, expected_j = _reference(low, high, first), _reference(0, 9, second)
    if expected_i is None or expected_j is None:
        with pytest.raises(ValidationError, match=r"dimension [ij]"):
            index_box(schema, (first, second))
        return
    assert index_box(schema, (first, second)) == {"i": expected_i, "j": expected_j}


def test_index_forms_and_refusals() -> None:
    schema = parse_schema("A<v:float64>[i=1:10:5; j=0:9:5; k=-3:3:7]")
    full = {"i": (1, 10), "j": (0, 9), "k": (-3, 3)}
    assert index_box(schema, 3) == {**full, "i": (3, 3)}
    assert index_box(schema, (..., -2)) == {**full, "k": (-2, -2)}
    assert index_box(schema, (np.int64(2), ..., slice(None))) == {**full, "i": (2, 2)}
    assert index_box(schema, ()) == full
    for bad, message in [
        ((1, 2, 3, 4), "has 3 dimension"),
        (slice(1, 5, 2), "no step"),
        (1.5, "integer coordinates"),
        (True, "integer coordinates"),
        ((..., ...), "one '...'"),
        (11, "outside the range 1:10"),
    ]:
        with pytest.raises(ValidationError, match=re.escape(message)):
            index_box(schema, bad)


# -- arrays in a warehouse -----------------------------------------------------------------------------
def _grid(db, name: str = "G"):
    """A 2-d array with some empty cells, and its dense numpy reference (NaN where empty)."""
    rng = np.random.default_rng(3)
    reference = rng.normal(size=(12, 25))
    reference[rng.random(reference.shape) < 0.3] = np.nan
    array = db.create_array(f"{name}<v:float64>[i=-2:9:4; j=0:24:10]")
    i, j = np.nonzero(~np.isnan(reference))
    array.insert({"i": i - 2, "j": j, "v": reference[i, j]})
    return array, reference


def test_indexing_shape_dims_attrs_and_asarray(db) -> None:
    A, reference = _grid(db)
    assert A.shape == (12, 25) == reference.shape and A.ndim == 2
    assert A.dims == ("i", "j") and A.attrs == {"v": "float64"}
    np.testing.assert_array_equal(np.asarray(A), reference)
    window = A[0:10, 5:20]  # coordinates i 0..9 (rows 2..11), j 5..19
    assert not window.stored and window.shape == (10, 15)
    np.testing.assert_array_equal(np.asarray(window), reference[2:12, 5:20])
    row = A[3, :]  # one coordinate, the dimension kept
    assert row.shape == (1, 25) and row.dims == ("i", "j")
    np.testing.assert_array_equal(np.asarray(row), reference[5:6, :])
    clipped = A[-100:0]  # clipped to the range like numpy
    np.testing.assert_array_equal(np.asarray(clipped), reference[0:2, :])
    np.testing.assert_array_equal(np.asarray(A, dtype=np.float32), reference.astype(np.float32))

    B = db.create_array("B<r:int64, s:float64>[i=0:3:2]")
    B.insert({"i": [0, 1, 2, 3], "r": [1, 2, 3, 4], "s": [0.5, 1.5, 2.5, 3.5]})
    with pytest.raises(ValidationError, match="attributes r, s"):
        np.asarray(B)
    np.testing.assert_array_equal(np.asarray(B.project("r")), np.array([1, 2, 3, 4]))
    assert np.asarray(B.project("r")).dtype == np.int64
    with pytest.raises(ValidationError, match=r"int64\) has 1 empty cell"):
        np.asarray(B.project("r")[1:3].filter("r > 2"))  # cell 1 filtered out: no NaN for an int64


def _chunk_count(reference: np.ndarray, lows: tuple[int, ...], lengths: tuple[int, ...]) -> int:
    coordinates = np.argwhere(~np.isnan(reference)) + np.array(lows)
    return len({tuple(c) for c in (coordinates - np.array(lows)) // np.array(lengths)})


def test_reprs_of_arrays_and_views(db) -> None:
    A, reference = _grid(db)
    text = repr(A)
    assert text.startswith("<array G>")
    assert "G<v:float64>[i=-2:9:4; j=0:24:10]" in text
    assert re.search(rf"cells\s+{int((~np.isnan(reference)).sum())} non-empty of 300", text)
    assert re.search(rf"chunks\s+{_chunk_count(reference, (-2, 0), (4, 10))} non-empty, 4 x 10", text)
    assert re.search(r"version\s+1\b", text)
    page = A._repr_html_()
    assert html.escape("G<v:float64>[i=-2:9:4; j=0:24:10]") in page and "<v:float64>" not in page
    assert "computed array" in repr(A[0:3]) and "lazy" in repr(A[0:3])
    assert "(pinned)" in repr(A.at_version(1))

    view = db.create_view("W", "SELECT * FROM window(G, 1, 1, 1, 1, count(v))")
    assert "up to date" in repr(view) and "G v1" in repr(view)
    A.insert({"i": [9], "j": [24], "v": [1.0]}, on_conflict="replace")
    stale = repr(db.view("W"))
    assert "deltas pending" in stale and "G v1 (now v2)" in stale
    db.view("W").refresh()
    assert "up to date" in repr(db.view("W")) and "array view W" in db.view("W")._repr_html_()
    db.drop_view("W")
    db.drop_array("G")
    assert "unreadable" in repr(A)  # a dropped array still shows its name, never raises


@pytest.mark.slow
def test_reprs_of_streams_and_stream_views(db) -> None:
    stream = db.create_stream("M", "ts timestamp, g string, y double", 60, "ts")
    assert re.search(r"held\s+none yet", repr(stream))
    epoch = 1_420_070_400
    rows = pd.DataFrame(
        {
            "ts": pd.to_datetime([epoch + 60 * k for k in range(4)], unit="s", utc=True),
            "g": ["a", "b", "a", "b"],
            "y": [1.0, 2.0, 3.0, 4.0],
        }
    )
    stream.append(rows.iloc[:2])
    view = db.create_stream_view(
        "CREATE VIEW S AS SELECT g, sum(y) AS s FROM M [WINDOW 2 MINUTES] GROUP BY g"
    )
    text = repr(stream)
    assert "ts timestamp, g string, y double" in text and "every 60 s of ts" in text
    first = epoch // 60
    assert f"parts {first}..{first + 1}" in text
    assert re.search(r"freshness\s+up to date", repr(view))
    assert f"held {first}..{first + 1}" in repr(view)
    stream.append(rows.iloc[2:])
    assert f"held {first}..{first + 3}" in repr(db.stream_view("S"))  # appends maintain the views
    assert "stream view s" in view._repr_html_().lower() and "stream m" in stream._repr_html_().lower()


# -- xarray -------------------------------------------------------------------------------------------
def test_xarray_round_trips_keep_coordinates_values_and_dtypes(db) -> None:
    xr = pytest.importorskip("xarray")
    A, reference = _grid(db)
    dataset = A.to_xarray()
    np.testing.assert_array_equal(dataset.coords["i"].values, np.arange(-2, 10))
    np.testing.assert_array_equal(dataset.coords["j"].values, np.arange(0, 25))
    np.testing.assert_array_equal(dataset["v"].values, reference)
    copy = db.from_xarray(dataset, "G2")
    assert copy.schema.dimension_names == ("i", "j") and copy.shape == A.shape
    assert (copy.schema.dimensions[0].low, copy.schema.dimensions[0].high) == (-2, 9)
    assert copy.count() == A.count()
    assert copy.to_xarray().equals(dataset)

    counts = xr.DataArray(
        np.arange(12, dtype=np.int16).reshape(3, 4),
        dims=("y", "x"),
        coords={"y": [100, 101, 102], "x": np.arange(-1, 3)},
        name="n",
    )
    B = db.from_xarray(counts, "B")
    assert B.attrs == {"n": "int16"} and B.dims == ("y", "x")
    back = B.to_xarray()["n"]
    assert back.dtype == np.int16
    xr.testing.assert_equal(back.drop_attrs(), counts)

    before = db.arrays()
    # evenly spaced float coordinates become a scale (tests/test_coordinates.py); others are refused
    uneven = counts.assign_coords(x=[0.0, 0.25, 0.5, 0.8])
    with pytest.raises(ValidationError, match=r"coordinate x \(0.0, 0.25, 0.5, \.\.\.\) is not evenly"):
        db.from_xarray(uneven, "C")
    with pytest.raises(ValidationError, match=r"coordinate x \(0, 2, 4, \.\.\.\) is not consecutive"):
        db.from_xarray(counts.assign_coords(x=[0, 2, 4, 6]), "C")
    assert db.arrays() == before  # refused inputs create nothing
    # variables missing in different cells: each keeps its own missing cells as nulls
    # (tests/test_front_trial.py checks the values)
    mixed = xr.Dataset(
        {"a": (("t",), np.array([1.0, np.nan, 3.0])), "b": (("t",), np.array([np.nan, 2.0, 3.0]))}
    )
    assert db.from_xarray(mixed, "D").schema.to_text() == "D<a:float64 NULL, b:float64 NULL>[t=0:2:3]"
