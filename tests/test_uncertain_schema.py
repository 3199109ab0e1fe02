"""Uncertain schemas: text form, round trips, errors with positions; possible ranges; cost model
counts against the copy layout. No Spark."""

from __future__ import annotations

import numpy as np
import pytest

from arrayviews.model.copy_layout import copy_counts, scheme_copies
from arrayviews.model.errors import ParseError
from arrayviews.model.uncertain import GAUSSIAN, UNIFORM, possible_range, tail_mass
from arrayviews.model.uncertain_cost import (
    RangeStatistics,
    UnitCosts,
    choose_subarray_steps,
    copies_total,
    subarray_cost,
)
from arrayviews.model.uncertain_schema_parser import parse_uncertain_schema


@pytest.mark.parametrize(
    "text",
    [
        "sky<mag:float64, flux:gaussian, size:uniform, n:int32 NULL>[x=0:999:32; y=-5:99:16; corr(x, y)]",
        "line<>[t=0:99:10]",
        "cube<v:gaussian>[x=0:9:3; y=0:9:3; z=0:9:3; corr(y, z)]",
    ],
)
def test_text_round_trip(text):
    schema = parse_uncertain_schema(text)
    assert parse_uncertain_schema(schema.to_text()) == schema
    assert schema.to_text() == text


def test_parse_details():
    schema = parse_uncertain_schema("S<f:gaussian, w:uniform, n:int NULL>[x=0:99, y=0:49,7, corr(y, x)]")
    assert schema.correlations == (("x", "y"),)  # canonical order follows the dimensions
    assert [a.kind for a in schema.attributes] == [GAUSSIAN, UNIFORM, "exact"]
    assert schema.attribute("n").type == "int64" and schema.attribute("n").nullable
    assert schema.dimension("y").chunk_length == 7
    assert schema.dimension("x").chunk_length == 64  # default: about 4096 cells per 2-D chunk
    assert schema.input_columns() == [
        "id",
        "x",
        "x_sigma",
        "y",
        "y_sigma",
        "x_y_corr",
        "f",
        "f_sigma",
        "w_low",
        "w_high",
        "n",
    ]


@pytest.mark.parametrize(
    "text,column,fragment",
    [
        ("a<>[x=0:9; corr(x, z)]", 12, "names 'z', which is not a dimension"),
        ("a<x_sigma:float64>[x=0:9]", 3, "clashes with dimension x"),
        ("a<v:gaussian NULL>[x=0:9]", 5, "cannot be NULL"),
        ("a<v:blah>[x=0:9]", 5, "gaussian, uniform"),
        ("a<>[x=5:1]", 9, "low 5 is greater than high 1"),
        ("a<>[x=0:9; y=0:9; corr(x,y); corr(y,x)]", 19, "more than one correlated pair"),
        ("a<>[x=0:9; corr(x, x)]", 12, "itself"),
        ("a<>[corr(x,y)]", 4, "at least one dimension"),
        ("a<>[x=0:9", 10, "unexpected end of input"),
        ("a<id:int64>[x=0:9]", 3, "clashes"),
    ],
)
def test_schema_errors_point_at_the_text(text, column, fragment):
    with pytest.raises(ParseError) as caught:
        parse_uncertain_schema(text)
    assert fragment in str(caught.value)
    assert caught.value.line == 1 and caught.value.column == column


def test_possible_range_rounds_out_and_clips():
    first, last = possible_range(
        np.array([5.5, 0.2, 9.9, 3.0]), np.array([0.5, 1.0, 0.0, 1.0 / 3]), 3.0, 0, 9
    )
    # [4, 7] ; [-2.8 -> 0, 3.2] ; [9.9, 9.9] ; [2, 4] (a bound on a boundary includes that cell)
    assert first.tolist() == [4, 0, 9, 2]
    assert last.tolist() == [7, 3, 9, 4]
    assert tail_mass(3.0) == pytest.approx(0.0026997960632601866, rel=1e-12)


def test_cost_model_counts_the_layout_copies():
    rng = np.random.default_rng(4)
    first = rng.integers(0, 100, (500, 2))
    last = np.minimum(first + rng.geometric(0.3, (500, 2)) - 1, 120)
    stats = RangeStatistics.from_ranges(first, last, (121, 121), (16, 16))
    for steps in [(0, 0), (1, 1), (2, 3), (8, 8)]:
        owner, _, _ = scheme_copies("store-multiple", first, last, first, steps)
        assert copies_total(stats, steps) == len(owner) == copy_counts(first, last, steps).sum()
    # the chosen step is the cheapest estimate, and estimates grow with the expansion once copies stop falling
    choice = choose_subarray_steps(stats, [(5, 5)], 0.9, UnitCosts())
    assert choice.estimates[choice.steps] == min(choice.estimates.values())
    wide = subarray_cost(stats, (64, 64), (5, 5), 0.9, UnitCosts())
    assert wide.seconds > subarray_cost(stats, choice.steps, (5, 5), 0.9, UnitCosts()).seconds
