"""Coordinate scales (``ra=0:9:5 SCALE 0.001 OFFSET 10 UNIT 'deg'``): schema text and JSON, syntax
errors, regrid's scale, inference from xarray coordinates, label selection, and xarray round trips
through storage. References: exact rational arithmetic (fractions), numpy coordinate vectors and
boolean masks over them, and numpy's own blocks."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from arrayviews.model.errors import ParseError, SchemaError, ValidationError
from arrayviews.model.labels import label_box
from arrayviews.model.schema import ArraySchema, Attribute, CoordinateScale, Dimension
from arrayviews.model.schema_parser import parse_schema
from arrayviews.operators.xarray_block import MIN_STEP_ULPS, ULPS, xarray_block

xr = pytest.importorskip("xarray")

steps = st.floats(min_value=1e-12, max_value=1e12).flatmap(lambda s: st.sampled_from([s, -s]))
offsets = st.one_of(st.just(0.0), st.floats(min_value=-1e9, max_value=1e9))
units = st.text(st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="'[]-/*"), max_size=8)


# -- schema text and JSON -----------------------------------------------------------------------------
def _dimension_or_refusal(low: int, high: int, scale: CoordinateScale) -> Dimension | None:
    """Dimension ra with ``scale``, or None when it is refused, which it must be exactly when the
    step is under 4 units in the last place of the largest magnitude (neighbours could round together)."""
    biggest = abs(scale.offset) + max(abs(low), abs(high)) * abs(scale.step)
    too_fine = abs(scale.step) < 4 * np.spacing(biggest)
    try:
        dimension = Dimension("ra", low, high, 8, scale=scale)
    except SchemaError as error:
        assert too_fine and "too fine" in str(error)
        return None
    assert not too_fine
    coordinates = scale.coordinates(np.arange(low, high + 1))
    assert np.all(np.diff(coordinates) > 0 if scale.step > 0 else np.diff(coordinates) < 0)
    return dimension


@settings(max_examples=200, deadline=None)
@given(step=steps, offset=offsets, unit=units, low=st.integers(-1000, 1000), extent=st.integers(1, 1000))
def test_scales_print_and_parse_back_exactly(step, offset, unit, low, extent) -> None:
    scale = CoordinateScale(step, offset, unit)
    dimension = _dimension_or_refusal(low, low + extent - 1, scale)
    if dimension is None:
        return
    schema = ArraySchema("A", (Attribute("v", "float64"),), (dimension, Dimension("t", 0, 4, 5)))
    text = schema.to_text()
    assert parse_schema(text) == schema, text
    back = ArraySchema.from_json(schema.to_json())
    assert back == schema and back.dimensions[0].scale.step == step  # bit for bit (repr is exact)
    assert back.dimensions[1].scale is None


def test_schema_text_forms() -> None:
    schema = parse_schema(
        "sky<f:float64>[ra=0:359999:1000 scale 1e-3 unit 'deg', t=0:9:10 SCALE -2 OFFSET 5]"
    )
    ra, t = schema.dimensions
    assert ra.scale == CoordinateScale(0.001, 0.0, "deg") and t.scale == CoordinateScale(-2.0, 5.0, "")
    assert (
        schema.to_text()
        == "sky<f:float64>[ra=0:359999:1000 SCALE 0.001 UNIT 'deg'; t=0:9:10 SCALE -2.0 OFFSET 5.0]"
    )
    assert parse_schema("A<v:int64>[i=1:10, 5, 0 SCALE 0.5]").dimensions[0].scale == CoordinateScale(0.5)
    assert (
        parse_schema("A<v:int64>[i=1:10 SCALE 0.5 OFFSET -0.0]").to_text()
        == "A<v:int64>[i=1:10:10 SCALE 0.5]"
    )
    # a dimension may be called scale, unit or offset
    assert parse_schema("A<v:int64>[scale=0:1; unit=0:1, offset=0:1 SCALE 1]").dimension_names == (
        "scale",
        "unit",
        "offset",
    )


def test_json_of_schemas_stored_before_scales_still_loads() -> None:
    stored = json.dumps(
        {
            "name": "A",
            "attributes": [{"name": "v", "type": "float64", "nullable": False}],
            "dimensions": [{"name": "i", "low": 1, "high": 6, "chunk_length": 2, "chunk_origin": 1}],
        }
    )
    schema = ArraySchema.from_json(stored)
    assert schema == parse_schema("A<v:float64>[i=1:6:2]") and schema.dimensions[0].scale is None


# text, line, column, a piece of the reason
SCALE_ERRORS = [
    ("A<v:int64>[i=1:10 SCALE 0]", 1, 25, "step must not be zero"),
    ("A<v:int64>[i=1:10 SCALE -0.0]", 1, 25, "step must not be zero"),
    ("A<v:int64>[i=1:10\n  SCALE 1e400]", 2, 9, "not a finite float64"),
    ("A<v:int64>[i=1:10 SCALE 1 OFFSET -1e999]", 1, 34, "offset -1e999 is not a finite"),
    ("A<v:int64>[i=1:10 SCALE inf]", 1, 25, "unexpected 'inf'"),
    ("A<v:int64>[i=1:10 SCALE 1 UNIT deg]", 1, 32, "unexpected"),
    ("A<v:int64>[i=1:10 UNIT 'deg']", 1, 19, "unexpected 'UNIT'"),
    ("A<v:int64>[i=1:10 SCALE 1 UNIT 'a--b']", 1, 32, "may not hold"),
    ("A<v:int64>[i=1:10 SCALE 1 UNIT 'm' OFFSET 2]", 1, 36, "unexpected"),
    ("A<v:int64>[i=0:*:10 SCALE 1e300]", 1, 21, "overflow float64"),
    ("A<v:int64>[\n  i=0:9 SCALE 1 UNIT '" + "x" * 41 + "']", 2, 22, "longer than 40"),
]


@pytest.mark.parametrize(("text", "line", "column", "reason"), SCALE_ERRORS, ids=[e[0] for e in SCALE_ERRORS])
def test_scale_errors_name_line_and_column(text: str, line: int, column: int, reason: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse_schema(text)
    assert (caught.value.line, caught.value.column) == (line, column), str(caught.value)
    assert reason in str(caught.value)
    assert "dimension i" in str(caught.value) or "unexpected" in str(caught.value)


def test_scale_checks_its_values() -> None:
    for bad in (0.0, math.inf, math.nan, "1"):
        with pytest.raises(SchemaError):
            CoordinateScale(bad)
    with pytest.raises(SchemaError, match="finite"):
        CoordinateScale(1.0, math.nan)
    with pytest.raises(SchemaError, match="overflow"):
        Dimension("i", 0, 10, 5, scale=CoordinateScale(1e308, 1e308))


# -- regrid's scale, against exact rational arithmetic ----------------------------------------------
def _within_ulps(value: float, exact: Fraction, magnitude: float, ulps: int) -> bool:
    return abs(Fraction(value) - exact) <= ulps * Fraction(float(np.spacing(abs(magnitude))))


@settings(max_examples=200, deadline=None)
@given(
    step=steps,
    offset=offsets,
    low=st.integers(-(10**6), 10**6),
    block=st.integers(1, 1000),
    m=st.integers(0, 1000),
)
def test_regrid_labels_each_block_with_its_first_cell(step, offset, low, block, m) -> None:
    scale = CoordinateScale(step, offset)
    coarse = scale.regridded(low, block)
    assert coarse.step == step * block and (block > 1 or coarse == scale)
    first_cell = low + m * block
    exact = Fraction(offset) + first_cell * Fraction(step)
    magnitude = abs(offset) + abs(first_cell * step) + abs(low * step) * (block + 1)
    assert _within_ulps(coarse.coordinate(low + m), exact, magnitude, 4)
    assert coarse.coordinate(low) == scale.coordinate(low) or _within_ulps(
        coarse.coordinate(low), Fraction(offset) + low * Fraction(step), magnitude, 4
    )


# -- from xarray coordinates: inference ---------------------------------------------------------------
def _data_array(coordinates: np.ndarray, dim: str = "x", attrs: dict | None = None):
    values = np.arange(len(coordinates), dtype=np.float64)
    return xr.DataArray(values, dims=(dim,), coords={dim: (dim, coordinates, attrs or {})}, name="v")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 60),
    step=steps,
    offset=offsets,
    how=st.sampled_from(["formula", "linspace", "cumulative", "float32"]),
)
def test_evenly_spaced_coordinates_become_a_scale(n, step, offset, how) -> None:
    cells = np.arange(n)
    if how == "formula":
        x = offset + cells * step
    elif how == "linspace":
        x = np.linspace(offset, offset + (n - 1) * step, n)
    elif how == "cumulative":  # rounding accumulates as it does in a running sum
        x = offset + np.cumsum(np.r_[0.0, np.full(n - 1, step)])
    else:
        x = (offset + cells * step).astype(np.float32)
    dtype_ulp = float(np.spacing(x.dtype.type(np.max(np.abs(x)))))
    assume(np.all(np.isfinite(x)) and (n == 1 or len(np.unique(x)) == n))
    resolved = n == 1 or abs((float(x[-1]) - float(x[0])) / (n - 1)) >= 1024 * dtype_ulp
    deviation_ok = True
    if n > 1:
        fitted = float(x[0]) + cells * ((float(x[-1]) - float(x[0])) / (n - 1))
        deviation_ok = np.max(np.abs(fitted - x.astype(np.float64))) <= ULPS * dtype_ulp
    if not (resolved and deviation_ok):  # the reference itself says: not even within the tolerance
        with pytest.raises(ValidationError, match="coordinate x"):
            xarray_block(_data_array(x), "B")
        return
    schema, values, origin = xarray_block(_data_array(x), "B")
    (dimension,) = schema.dimensions
    assert (dimension.low, dimension.high) == (0, n - 1) and origin == (0,)
    back = dimension.scale.coordinates(np.arange(dimension.low, dimension.high + 1))
    assert np.all(np.abs(back - x.astype(np.float64)) <= ULPS * dtype_ulp)
    assert back[0] == x[0]
    if how == "formula" and offset == 0.0:  # k * step: a step near the quotient reproduces them exactly
        np.testing.assert_array_equal(back, x)
    if n > 1:
        assert (dimension.scale.step > 0) == (x[-1] > x[0])  # descending coordinates: a negative step
    np.testing.assert_array_equal(values["v"], np.arange(n, dtype=np.float64))


@settings(max_examples=200, deadline=None)
@given(
    step=steps,
    offset=offsets,
    unit=units,
    low=st.integers(-(10**9), 10**9),
    extent=st.integers(1, 50),
    cut=st.tuples(st.integers(0, 49), st.integers(0, 49)),
)
def test_coordinates_shown_by_to_xarray_read_back_as_the_same_cells_and_scale(
    step, offset, unit, low, extent, cut
) -> None:
    from arrayviews.operators.reads import _coordinate

    dimension = _dimension_or_refusal(low, low + extent - 1, CoordinateScale(step, offset, unit))
    if dimension is None:
        return
    name, values, attrs = _coordinate(dimension)
    np.testing.assert_array_equal(values, offset + np.arange(low, low + extent).astype(np.float64) * step)
    assert attrs.get("units", "") == unit
    data = _data_array(values, "ra", attrs)
    first, last = sorted(c % extent for c in cut)
    data = data.isel(ra=slice(first, last + 1))  # a piece of it, as a user may take
    (back,) = xarray_block(data, "B")[0].dimensions
    assert back.scale == dimension.scale
    assert (back.low, back.high) == (low + first, low + last)


def test_coordinate_attributes_written_by_to_xarray_are_read_exactly() -> None:
    scale = CoordinateScale(0.1, 3.0, "deg")
    cells = np.arange(40, 50)
    x = scale.coordinates(cells)  # not what any step found from the values alone would give exactly
    attrs = {"arrayviews_step": 0.1, "arrayviews_offset": 3.0, "units": "deg"}
    (dimension,) = xarray_block(_data_array(x, attrs=attrs), "B")[0].dimensions
    assert dimension.scale == scale and (dimension.low, dimension.high) == (40, 49)
    # attributes that do not fit the values are ignored, the values decide
    moved = xarray_block(_data_array(x + 0.05, attrs=attrs), "B")[0].dimensions[0]
    assert (moved.low, moved.scale.offset, moved.scale.unit) == (0, x[0] + 0.05, "deg")


def test_coordinates_that_cannot_be_a_scale_are_refused_by_name() -> None:
    uneven = np.array([0.0, 0.1, 0.2, 0.35, 0.4])
    with pytest.raises(
        ValidationError, match=r"coordinate ra .* not evenly spaced: value 0.35 at position 3"
    ):
        xarray_block(_data_array(uneven, "ra"), "B")
    with pytest.raises(ValidationError, match="coordinate ra .* not evenly spaced"):
        xarray_block(_data_array(np.array([1.0, 1.0, 1.0]), "ra"), "B")
    with pytest.raises(ValidationError, match="coordinate ra .* NaN"):
        xarray_block(_data_array(np.array([1.0, np.nan]), "ra"), "B")
    with pytest.raises(ValidationError, match="coordinate ra .* not consecutive integers"):
        xarray_block(_data_array(np.array([0, 2, 4]), "ra"), "B")
    with pytest.raises(ValidationError, match="coordinate ra .* dtype"):
        xarray_block(_data_array(np.array(["a", "b"]), "ra"), "B")
    with pytest.raises(ValidationError, match="coordinate ra: .*unit"):
        xarray_block(_data_array(np.array([0.0, 1.0]), "ra", {"units": "it's"}), "B")


# -- label selection, against a boolean mask over numpy's coordinate vector ---------------------------
def _label_reference(coordinates: np.ndarray, low: int, start, stop, ascending: bool):
    keep = np.ones(len(coordinates), bool)
    if start is not None:
        keep &= coordinates >= start if ascending else coordinates <= start
    if stop is not None:
        keep &= coordinates <= stop if ascending else coordinates >= stop
    chosen = np.flatnonzero(keep)
    return None if chosen.size == 0 else (low + int(chosen[0]), low + int(chosen[-1]))


@settings(max_examples=300, deadline=None)
@given(
    step=steps,
    offset=offsets,
    low=st.integers(-500, 500),
    extent=st.integers(1, 40),
    data=st.data(),
)
def test_label_slices_select_what_a_mask_over_the_coordinates_selects(
    step, offset, low, extent, data
) -> None:
    scale = CoordinateScale(step, offset, "deg")
    dimension = _dimension_or_refusal(low, low + extent - 1, scale)
    if dimension is None:
        return
    schema = ArraySchema("A", (Attribute("v", "float64"),), (dimension,))
    coordinates = scale.coordinates(np.arange(low, low + extent))
    lowest, highest = float(coordinates.min()), float(coordinates.max())
    span = highest - lowest + abs(step)
    bound = st.one_of(
        st.none(),
        st.sampled_from(coordinates.tolist()),  # exactly a shown coordinate: included
        st.floats(lowest - span, highest + span),
    )
    start, stop = data.draw(bound), data.draw(bound)
    ascending = step > 0
    if start is not None and stop is not None and (start > stop if ascending else start < stop):
        with pytest.raises(ValidationError, match="dimension ra: the coordinates"):
            label_box(schema, {"ra": slice(start, stop)})
        return
    expected = _label_reference(coordinates, low, start, stop, ascending)
    if expected is None:
        with pytest.raises(ValidationError, match="dimension ra: .*holds no coordinate"):
            label_box(schema, {"ra": slice(start, stop)})
        return
    assert label_box(schema, {"ra": slice(start, stop)}) == {"ra": expected}
    picked = data.draw(st.integers(0, extent - 1))
    assert label_box(schema, {"ra": coordinates[picked]}) == {"ra": (low + picked, low + picked)}


def test_single_labels_match_exactly_and_unscaled_dimensions_take_cells() -> None:
    schema = parse_schema("A<v:float64>[ra=0:99:10 SCALE 0.1 UNIT 'deg'; t=5:9:5]")
    with pytest.raises(ValidationError, match=r"no cell has the coordinate 0.25; the nearest is 0.2"):
        label_box(schema, {"ra": 0.25})
    assert label_box(schema, {"t": slice(6, 8), "ra": slice(None, 0.35)}) == {"t": (6, 8), "ra": (0, 3)}
    with pytest.raises(ValidationError, match="labels are integer cells; got 6.5"):
        label_box(schema, {"t": 6.5})
    with pytest.raises(ValidationError, match="no dimension 'x'"):
        label_box(schema, {"x": 1})


# -- through storage (Spark) ----------------------------------------------------------------------------
def test_scaled_arrays_round_trip_through_xarray_and_operators_keep_the_grid(db) -> None:
    reference = np.arange(60, dtype=np.float64).reshape(12, 5) * 1.5
    A = db.create_array("A<v:float64>[ra=-2:9:4 SCALE 0.001 OFFSET 10 UNIT 'deg'; t=0:4:5 SCALE -0.5]")
    A.write_dense(reference, origin=(-2, 0))
    dataset = A.to_xarray()
    ra, t = dataset.coords["ra"], dataset.coords["t"]
    np.testing.assert_array_equal(ra.values, 10.0 + np.arange(-2, 10).astype(np.float64) * 0.001)
    np.testing.assert_array_equal(t.values, np.arange(5) * -0.5)
    assert ra.dtype == np.float64 and ra.attrs["units"] == "deg" and "units" not in t.attrs
    np.testing.assert_array_equal(dataset["v"].values, reference)

    copy = db.from_xarray(dataset, "A2")
    assert [d.scale for d in copy.schema.dimensions] == [d.scale for d in A.schema.dimensions]
    assert [(d.low, d.high) for d in copy.schema.dimensions] == [(-2, 9), (0, 4)]
    assert copy.to_xarray().equals(dataset)

    # operators that keep the grid keep the scale; regrid multiplies the step
    assert A.subarray(ra=(0, 3)).schema.dimensions == (
        A.schema.dimensions[0].__class__("ra", 0, 3, 4, -2, A.schema.dimensions[0].scale),
        A.schema.dimensions[1],
    )
    for derived in (A.filter("v > 3"), A.project("v"), A.window({"ra": (1, 1), "t": (0, 0)}, "avg(v)")):
        assert derived.schema.dimensions == A.schema.dimensions
    assert A.aggregate("sum(v)", by=["t"]).schema.dimensions == (A.schema.dimensions[1],)
    coarse = A.regrid([3, 5], "sum(v)").to_xarray()
    np.testing.assert_array_equal(coarse["v_sum"].values, reference.reshape(4, 3, 1, 5).sum(axis=(1, 3)))
    np.testing.assert_allclose(coarse.coords["ra"].values, ra.values[::3], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(coarse.coords["t"].values, [0.0])
    assert coarse.coords["ra"].attrs["units"] == "deg"

    # sel: label slices include both ends
    picked = A.sel(ra=slice(10.0, 10.0035), t=slice(-0.5, -1.5))
    np.testing.assert_array_equal(np.asarray(picked), reference[2:6, 1:4])
    assert picked.to_xarray().coords["ra"].values[0] == 10.0

    # pictures show the real coordinates: cell centres on them, edges half a step out
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = A.plot()
    left, right, bottom, top = ax.images[0].get_extent()
    np.testing.assert_allclose([left, right], [0.25, -2.25])  # t descends: 0 - (-0.25), -2 + (-0.25)
    np.testing.assert_allclose([top, bottom], [10.0 - 0.002 - 0.0005, 10.009 + 0.0005])
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("t", "ra (deg)")
    plt.close(ax.figure)

    # joins: a side without a scale is in cells; different scales are refused
    plain = db.create_array("P<w:float64>[ra=-2:9:4; t=0:4:5]")
    assert A.join(plain).schema.dimensions == A.schema.dimensions
    other = db.create_array("Q<w:float64>[ra=-2:9:4 SCALE 0.002; t=0:4:5 SCALE -0.5]")
    with pytest.raises(ValidationError, match="dimension ra has the coordinate scale SCALE 0.001"):
        A.join(other)


def test_statements_reprs_and_reopening_show_the_scale(db, spark, tmp_path) -> None:
    import arrayviews

    db.sql("CREATE ARRAY S <v:float64> [ra=0:359:100 SCALE 0.5 OFFSET -90 UNIT 'deg'; t=0:9:10]")
    text = "S<v:float64>[ra=0:359:100 SCALE 0.5 OFFSET -90.0 UNIT 'deg'; t=0:9:10]"
    shown = db.sql("SHOW SCHEMA OF S")
    assert text in str(shown if isinstance(shown, str) else shown.to_pandas().to_string())
    S = db.array("S")
    assert text in repr(S) and "SCALE 0.5 OFFSET -90.0 UNIT &#x27;deg&#x27;" in S._repr_html_().replace(
        "&#39;", "&#x27;"
    )
    again = arrayviews.connect(str(tmp_path / "warehouse"), spark=spark)
    assert again.array("S").schema.to_text() == text

    # views over a scaled array keep its grid, also when rechunked
    S.insert({"ra": [0, 1, 2], "t": [0, 0, 1], "v": [1.0, 2.0, 3.0]})
    db.sql("CREATE ARRAY VIEW W AS SELECT * FROM window(S, 1, 1, 0, 0, sum(v))")
    assert db.view("W").schema.dimensions == S.schema.dimensions
    assert db.view("W").to_xarray()["v_sum"].sel(ra=-89.5, t=0).item() == 3.0
    similarity = "SELECT count(*) AS n FROM S a SIMILARITY JOIN S b WITH SHAPE L1(1) GROUP BY a.ra, a.t"
    db.sql(f"CREATE ARRAY VIEW N WITH CHUNKS (50, 5) AS {similarity}")
    ra, t = db.view("N").schema.dimensions
    assert (ra.scale, ra.chunk_length, t.scale) == (S.schema.dimensions[0].scale, 50, None)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    n=st.integers(2, 30),
    step=st.floats(1e-6, 1e6).flatmap(lambda s: st.sampled_from([s, -s])),
    offset=offsets,
)
@example(n=2, step=1e-06, offset=8388608.0)  # found in CI: a step float64 cannot resolve there
def test_xarray_to_storage_and_back_keeps_coordinates(db, n, step, offset) -> None:
    x = np.linspace(offset, offset + (n - 1) * step, n)
    da = xr.DataArray(
        np.sqrt(np.arange(n * 2, dtype=np.float64)).reshape(n, 2),
        dims=("ra", "k"),
        coords={"ra": ("ra", x, {"units": "deg"}), "k": [7, 8]},
        name="v",
    )
    name = f"X{abs(hash((n, step, offset))) % 10**9}"
    spacing = abs(float((x[-1] - x[0]) / (n - 1)))
    if not spacing >= MIN_STEP_ULPS * float(np.spacing(np.max(np.abs(x)))):
        # a step float64 cannot resolve at this magnitude (1e-6 at 8388608, say: hypothesis found
        # it in CI) is refused loudly, naming the array and the coordinate, and nothing is stored
        with pytest.raises(ValidationError, match=f"array {name}: coordinate ra .* is not evenly spaced"):
            db.from_xarray(da, name)
        assert name.lower() not in [a.lower() for a in db.arrays()]
        return
    back = db.from_xarray(da, name).to_xarray()["v"]
    tolerance = ULPS * float(np.spacing(np.max(np.abs(x))))
    assert np.max(np.abs(back.coords["ra"].values - x)) <= tolerance
    assert back.coords["ra"].attrs["units"] == "deg"
    np.testing.assert_array_equal(back.coords["k"].values, [7, 8])
    np.testing.assert_array_equal(back.values, da.values)
