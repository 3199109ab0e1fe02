"""Round 20 trial of maintenance plans, refresh-time limits and answers through views, as an
adversary: every answer and every refreshed view is checked against an independent reference
(plain Python brute force, numpy recomputation), and bad input is refused by name with nothing
changed."""

from __future__ import annotations

import pytest

import arrayviews
from arrayviews import L1, Linf, NotFoundError, RangeError, ValidationError, similarity


@pytest.fixture
def local_db(spark, tmp_path):
    """A database whose work runs in-process (Spark is not the point of most of these tests)."""
    return arrayviews.connect(str(tmp_path / "warehouse"), spark=spark, execution="local")


def _versions(relation) -> list[int]:
    return relation.versions().version.tolist()


# -- errors name the view, and a query's overflow is the query's -----------------------------------
def test_a_view_s_missing_version_is_named_as_a_view(local_db):
    """Failed before: ``V.at_version(99)`` said "array V has no version 99"; a version of the wrong
    type reached the catalog unchecked."""
    A = local_db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    A.insert({"i": [0, 1], "j": [0, 1], "v": [1, 2]})
    V = local_db.create_view("V", similarity("A", "A", L1(1), ["count(*) as n"]))
    with pytest.raises(NotFoundError, match=r"^view V has no version 99 \(versions held: 1\)"):
        V.at_version(99)
    for bad in ("1", 1.5, True):
        with pytest.raises(ValidationError, match=r"view V: a version is an integer"):
            V.at_version(bad)
    assert V.at_version(1).to_pandas().n.tolist() == [1, 1]


def test_an_overflow_answering_through_a_view_names_the_query(local_db):
    """Failed before: an int64 sum beyond int64 in the answer through view V was reported as
    "view V: ..." though V (a smaller shape, whose sums fit) is fine; now the query is named with
    its arrays, the column and the value, and V is said to be unchanged (and is)."""
    db = local_db
    A = db.create_array("A<v:int64>[i=0:9:5; j=0:9:5]")
    A.insert({"i": [0, 1, 5], "j": [0, 1, 5], "v": [2**62, 2**62, 2**62]})
    V = db.create_view("V", similarity("A", "A", L1(1), ["count(*) as n", "sum(right.v) as s"]))
    before = _versions(V)
    join = db.similarity_join("A", "A", Linf(1))
    with pytest.raises(RangeError) as caught:
        join.aggregate("sum(right.v) as s", through="V").to_pandas()
    text = str(caught.value)
    assert text.startswith("similarity join of A and A answered through view V: sum(right.v) (s) at cell")
    assert str(2**63) in text and "view V is unchanged" in text
    assert (caught.value.array, caught.value.column, caught.value.value) == ("A", "s", 2**63)
    assert _versions(V) == before
    assert V.to_pandas().s.tolist() == [2**62, 2**62, 2**62]  # L1(1): only the cell itself
