"""The Python API refuses what the statements refuse, with the same checks: stream durations and
counts beyond what fits (partition lengths, gaps, lateness, versions kept), window extents beyond a
dimension cut to it (averages checked against math.fsum over the cells in each window), and shapes
too large to build refused by name before anything is allocated. Each bad value changes nothing."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.window_reference import window_averages

from arrayviews.model import shapes
from arrayviews.model.errors import ParseError, ValidationError
from arrayviews.model.viewdf import viewdf_definition
from arrayviews.views.definition import similarity
from arrayviews.views.definition import window as window_definition

INT64_MAX = 2**63 - 1
HUGE = 99999999999999999999
MAX_SECONDS = INT64_MAX // 1_000_000  # the longest duration whose microseconds fit in int64


def _relations(db) -> list[tuple[str, str]]:
    listing = db.relations()
    return sorted(zip(listing.name, listing.kind, strict=True))


# -- streams ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("seconds", [HUGE, 2**62, MAX_SECONDS + 1])
def test_create_stream_refuses_a_partition_length_beyond_what_fits(db, seconds) -> None:
    """Before, accepted: a stream "every 99999999999999999999 s" whose first append then failed."""
    with pytest.raises(ValidationError) as caught:
        db.create_stream("X", "ts timestamp, v int", seconds, "ts")
    assert str(caught.value) == (
        f"stream X: the partition length in seconds is too large: {seconds} (at most {MAX_SECONDS})"
    )
    assert caught.value.value == seconds and _relations(db) == []
    assert db.create_stream("X", "ts timestamp, v int", MAX_SECONDS, "ts").partition_length == MAX_SECONDS


def test_the_gap_limit_beyond_int64_is_refused(db) -> None:
    with pytest.raises(ValidationError, match=rf"^stream X: max_gap_parts \(MAX GAP\) is too large: {HUGE} "):
        db.create_stream("X", "ts timestamp", 60, "ts", max_gap_parts=HUGE)
    assert _relations(db) == []
    stream = db.create_stream("X", "ts timestamp", 60, "ts", max_gap_parts=INT64_MAX)
    assert stream.max_gap_parts == INT64_MAX
    stream.set_max_gap_parts(5)
    with pytest.raises(ValidationError, match=rf"max_gap_parts \(MAX GAP\) is too large: {2**63}"):
        stream.set_max_gap_parts(2**63)
    assert db.stream("X").max_gap_parts == 5


WINDOW_VIEW = "CREATE VIEW W AS SELECT s, max(x) AS m FROM M [WINDOW 1 MINUTES] GROUP BY s"


def test_stream_view_counts_beyond_int64_are_refused(db) -> None:
    """Before, accepted and stored: a lateness of 99999999999999999999 parts, as many versions kept."""
    db.create_stream("M", "ts timestamp, s string, x int", 60, "ts")
    before = _relations(db)
    with pytest.raises(ValidationError, match=rf"^view W: the lateness allowance is too large: {HUGE} "):
        db.create_stream_view(WINDOW_VIEW, lateness_parts=HUGE)
    assert _relations(db) == before

    view = db.create_stream_view(WINDOW_VIEW, lateness_parts=3)
    with pytest.raises(ValidationError, match=rf"(?i)^view W: the lateness allowance is too large: {2**63} "):
        view.set_lateness(2**63)
    with pytest.raises(
        ValidationError, match=rf"(?i)^view W: the number of versions kept is too large: {HUGE} "
    ):
        view.set_keep_versions(HUGE)
    view.set_keep_versions(INT64_MAX)
    assert db.stream_view("W").lateness_parts == 3
    with pytest.raises(ValidationError, match="lateness allowance is a number of parts >= 0, got -1"):
        view.set_lateness(-1)


def test_a_viewdf_definition_longer_than_fits_is_refused_before_anything_is_created(db) -> None:
    db.create_stream("M", "ts timestamp, s string, x int", 60, "ts")
    before = _relations(db)
    query = "SELECT s, count(*) AS n FROM M[{}] GROUP BY s"
    definition = viewdf_definition("H", ("i", query.format("i")), ("j", query.format("j")), HUGE)
    with pytest.raises(
        ValidationError, match=rf"^view H: the partition length in seconds is too large: {HUGE} "
    ):
        db.create_stream_view(definition)
    assert _relations(db) == before


def test_the_statements_say_the_same_at_the_place_written(db) -> None:
    """The parser calls the API's check (model/bounds.py) and places its message."""
    text = f"CREATE STREAM X (ts timestamp) PARTITION LENGTH {HUGE} TIME COLUMN ts"
    with pytest.raises(ParseError) as caught:
        db.sql(text)
    assert (
        caught.value.reason == f"the partition length in seconds is too large: {HUGE} (at most {MAX_SECONDS})"
    )
    assert (caught.value.line, caught.value.column) == (1, text.index(str(HUGE)) + 1)


# -- windows ---------------------------------------------------------------------------------------
CELLS = [(1, 0, 0.5), (2, 0, 1.5), (5, 7, 2.0), (9, 7, -4.0), (9, 60, 8.0), (100, 99, 0.25)]


def _reference(before: tuple[int, int], after: tuple[int, int], cells=CELLS) -> dict[tuple[int, int], float]:
    return window_averages(cells, before, after)


def _averages(frame: pd.DataFrame) -> dict[tuple[int, int], float]:
    return {(int(i), int(j)): float(v) for i, j, v in zip(frame.i, frame.j, frame.v_avg, strict=True)}


@pytest.fixture
def cells(db):
    array = db.create_array("A<v:double>[i=1:100:10; j=0:99:50]")
    array.insert(pd.DataFrame(CELLS, columns=["i", "j", "v"]))
    return array


@pytest.mark.parametrize(
    "extents",
    [(INT64_MAX, 0, 0, 0), (0, 0, INT64_MAX, 0), (0, INT64_MAX, 3, INT64_MAX), (2**62, 2**62, 2**62, 2**62)],
)
def test_array_window_extents_past_the_dimension_cover_it_whole(cells, extents) -> None:
    """Before, the int64 arithmetic of the window overflowed: wrong averages or an internal error."""
    want = _reference((extents[0], extents[2]), (extents[1], extents[3]))
    flat = cells.window(list(extents), "avg(v)").to_pandas()
    assert _averages(flat) == pytest.approx(want)
    named = cells.window({"i": extents[:2], "j": extents[2:]}, "avg(v)").to_pandas()
    assert _averages(named) == pytest.approx(want)


def test_a_window_view_defined_through_the_api_is_cut_too(db, cells) -> None:
    extents = [0, INT64_MAX, INT64_MAX, 1]
    view = db.create_view("W", window_definition("A", extents, ["avg(v)"]))
    assert _averages(view.to_pandas()) == pytest.approx(_reference((0, INT64_MAX), (INT64_MAX, 1)))
    cells.insert(pd.DataFrame({"i": [50], "j": [50], "v": [3.0]}))
    view.refresh()
    want = _reference((0, INT64_MAX), (INT64_MAX, 1), [*CELLS, (50, 50, 3.0)])
    assert _averages(db.view("W").to_pandas()) == pytest.approx(want)
    assert view.verify()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.lists(
        st.one_of(st.integers(0, 120), st.integers(INT64_MAX - 5, INT64_MAX), st.integers(2**40, 2**62)),
        min_size=4,
        max_size=4,
    )
)
def test_any_window_extent_gives_the_brute_force_average(cells, data) -> None:
    got = _averages(cells.window(data, "avg(v)").to_pandas())
    assert got == pytest.approx(_reference((data[0], data[2]), (data[1], data[3])))


# -- shapes ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda: shapes.L1(INT64_MAX, 2), "L1(9223372036854775807, 2)"),
        (lambda: shapes.Linf(5000, 2), "Linf(5000, 2)"),
        (lambda: shapes.box([(0, 99999999999), (0, 0)]), "BOX(0:99999999999, 0:0)"),
        (
            lambda: shapes.box([(-7, -7), (0, 0)]) | shapes.box([(10**11, 10**11), (0, 0)]),
            "BOX(100000000000:",
        ),
        (
            lambda: shapes.product(shapes.box([(-5000, 5000)]), shapes.L1(5000, 1)),
            "box([(-5000, 5000)]) x L1(5000, 1)",
        ),
        (lambda: shapes.box([(-4000, 0), (0, 0)]) | shapes.box([(0, 0), (0, 4000)]), "combining box("),
    ],
)
def test_shapes_too_large_to_build_are_refused_by_name(build, name) -> None:
    """Before: an internal ValueError from numpy (L1 of INT64_MAX), an attempt to allocate 93 GiB
    (the far BOX) or a 10^8-cell stencil built for nothing."""
    with pytest.raises(ValidationError) as caught:
        build()
    message = str(caught.value)
    assert message.startswith(f"shape {name}")
    cells = int(message.split("would hold ")[1].split(" cells")[0])
    assert cells > shapes.MAX_STENCIL_CELLS and message.endswith(f"(at most {shapes.MAX_STENCIL_CELLS})")


def test_the_stencil_count_is_exact() -> None:
    """The count in the message is the product of the bounding box's sides (Python integers)."""
    with pytest.raises(ValidationError, match=rf"would hold {(2 * INT64_MAX + 1) ** 3} cells"):
        shapes.Linf(INT64_MAX, 3)
    with pytest.raises(ValidationError, match=rf"would hold {16001 * 8001} cells"):
        shapes.box([(-16000, 0), (0, 0)]) | shapes.box([(0, 0), (0, 8000)])
    shapes.check_stencil_size("at the limit", (10_000, 1_000))  # exactly MAX_STENCIL_CELLS: allowed
    with pytest.raises(ValidationError, match=rf"^shape one more is too large: .* {10_000 * 1_001} cells"):
        shapes.check_stencil_size("one more", (10_000, 1_001))
    assert len(shapes.box([(-3, 3), (0, 2)])) == 21 and len(shapes.L1(2, 2)) == 13  # small ones still built


def test_similarity_views_over_such_shapes_change_nothing(db, cells) -> None:
    before = _relations(db)
    with pytest.raises(ValidationError, match="is too large: its stencil would hold"):
        db.create_view("V", similarity("A", "A", shapes.L1(10**6, 2), ["count(*) as n"]))
    with pytest.raises(ValidationError, match=r"WITH SHAPE: shape BOX\(0:99999999999, 0:0\) is too large"):
        db.create_view(
            "V",
            "SELECT count(*) AS n FROM A a SIMILARITY JOIN A b WITH SHAPE BOX(0:99999999999, 0:0) GROUP BY a.i, a.j",
        )
    assert _relations(db) == before
