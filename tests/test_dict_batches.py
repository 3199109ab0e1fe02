"""Columns of a dict batch given as Python integer lists or pandas nullable arrays are stored
exactly: checked against the Python integers and nulls that were given."""

from __future__ import annotations

import datetime as dt
import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arrayviews import ValidationError

_NAMES = itertools.count()


@pytest.fixture(scope="module")
def batches_db(spark, tmp_path_factory):
    import arrayviews

    return arrayviews.connect(str(tmp_path_factory.mktemp("dicts") / "wh"), spark=spark, execution="local")


def _stored(array) -> list:
    frame = array.to_pandas().sort_values("i")
    return [None if pd.isna(v) else int(v) for v in frame["u"]]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(st.none() | st.integers(0, 2**64 - 1), min_size=1, max_size=6),
    form=st.sampled_from(["list", "tuple", "UInt64"]),
)
def test_uint64_values_of_a_list_or_a_pandas_array_are_stored_exactly(batches_db, values, form):
    """Before: [2**63 + 5, None] raised a raw OverflowError, [2**63 + 5, 3] became floats, and a
    pandas UInt64/Int64 array with NA was refused as "values of type double"."""
    A = batches_db.create_array(f"unsigned_{next(_NAMES)}<u:uint64 NULL>[i=0:9:5]")
    column = {"list": list, "tuple": tuple, "UInt64": lambda v: pd.array(v, dtype="UInt64")}[form](values)
    A.insert({"i": list(range(len(values))), "u": column})
    assert _stored(A) == values


def test_int64_lists_and_nullable_int64_arrays(batches_db):
    A = batches_db.create_array("signed<u:int64 NULL>[i=0:9:5]")
    A.insert({"i": [0, 1, 2], "u": [-(2**63), None, 2**63 - 1]})
    A.insert({"i": pd.Series([3, 4]), "u": pd.array([None, -7], dtype="Int64")})
    assert _stored(A) == [-(2**63), None, 2**63 - 1, None, -7]
    for values, message in [([2**64, None], r"18446744073709551616 \(row 0\) fits no 64-bit"), ([2**63, -1], r"-1 \(row 1\)")]:
        with pytest.raises(ValidationError, match=message):
            A.insert({"i": [5, 6], "u": values})
    assert A.version == 2


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    moments=st.lists(
        st.none() | st.datetimes(dt.datetime(1700, 1, 1), dt.datetime(2200, 1, 1)), min_size=1, max_size=5
    ),
    unit=st.sampled_from(["D", "m", "s", "us", "ns"]),
)
def test_numpy_times_beside_none_are_times_and_nulls(batches_db, moments, unit):
    """Before: a list of day or minute numpy times with None raised a raw TypeError or Arrow's
    'Unsupported datetime64 time unit' (reported by the windows helper). Checked against the
    datetime64 values given, each truncated to its unit by numpy."""
    name = f"T{next(_NAMES)}"
    array = batches_db.create_array(f"{name}<d:datetime64 null>[i=0:9:10]")
    given_times = [None if m is None else np.datetime64(m, unit) for m in moments]
    array.insert({"i": list(range(len(moments))), "d": given_times})
    frame = array.to_pandas().sort_values("i")
    stored = [None if pd.isna(v) else np.datetime64(v, "ns") for v in frame["d"]]
    assert stored == [None if t is None else t.astype("datetime64[ns]") for t in given_times]
