"""A LOAD refused for a field its column cannot read names the file holding the first such field
(in a folder, that file) and its data row there, the same on both readers; a CSV's fields may hold
line ends, so the row is counted by records, never by lines (the reference: Python's csv module)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import arrayviews
from arrayviews.model.errors import ArrayViewsError

TIMES = "t=0:*:8 SCALE 6 HOURS OFFSET '2026-01-01T00:00'"


@pytest.fixture(scope="module")
def dbs(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("bad_field_rows")
    local = arrayviews.connect(str(root / "local"), spark=spark, execution="local")
    on_spark = arrayviews.connect(str(root / "spark"), spark=spark, execution="spark")
    return local, on_spark, root


def _errors(dbs, name: str, schema: str, path: Path, form: str | None = None) -> list[str]:
    messages = []
    for db in dbs[:2]:
        array = db.create_array(f"{name}{schema}")
        with pytest.raises(ArrayViewsError) as caught:
            array.load(str(path), form)
        assert array.versions().empty  # nothing was written
        messages.append(str(caught.value))
    return messages


def _first_bad_record(text: str, column: str, is_bad) -> tuple[object, int]:
    """Plain Python: the first field of ``column`` that ``is_bad`` and its record number (from 1)."""
    for number, record in enumerate(csv.DictReader(io.StringIO(text)), start=1):
        if is_bad(record[column]):
            return record[column], number
    raise AssertionError("no bad field")


def _is_not_a_float(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return field.strip() != ""
    return False


def test_a_bad_field_in_a_folder_names_its_file_and_data_row(dbs) -> None:
    local, on_spark, root = dbs
    folder = root / "readings"
    folder.mkdir()
    rng = np.random.default_rng(3)
    # the larger file is read first by both readers; its fields are all good
    good = "x,y,v,note\n" + "".join(f"{i},{i % 7},{rng.normal():.6f},ok\n" for i in range(40))
    (folder / "a_big.csv").write_text(good)
    # a field holding line ends before the bad record: lines and records differ
    small = 'x,y,v,note\n50,1,2.5,"two\nlines"\n51,2,3.5,ok\n52,3,n/a,ok\n53,4,bad,ok\n'
    (folder / "b_small.csv").write_text(small)
    errors = _errors(dbs, "rows", "<v:float64, note:string>[x=0:99:10; y=0:9:5]", folder, "csv")
    assert errors[0] == errors[1]
    value, record = _first_bad_record(small, "v", _is_not_a_float)
    assert (value, record) == ("n/a", 3)
    assert errors[0] == (
        f"array rows, column v: {value!r} in {folder}/b_small.csv (data row {record}) "
        "is not a float64 value (2 such value(s))"
    )


def test_a_bad_field_in_one_file_names_the_file_as_given(dbs) -> None:
    local, on_spark, root = dbs
    path = root / "one.csv"
    text = "x,y,v\n" + "".join(f"{i},0,{i}.5\n" for i in range(9)) + "9,0,1e999x\n"
    path.write_text(text)
    errors = _errors(dbs, "one", "<v:float64>[x=0:99:10; y=0:9:5]", path)
    assert errors[0] == errors[1]
    assert errors[0].startswith(f"array one, column v: '1e999x' in {path} (data row 10) is not ")


def test_a_bad_text_time_in_parquet_names_its_row(dbs) -> None:
    """Parquet files are read in row groups (Spark may cut a file into pieces): the row is the
    file's own row number."""
    local, on_spark, root = dbs
    path = root / "times.parquet"
    texts = [f"2026-01-0{1 + k % 3}T06:00" for k in range(2_000)]
    texts[1_234] = "not a time"
    pq.write_table(pa.table({"t": texts, "v": np.arange(2_000, dtype=np.float64)}), path, row_group_size=300)
    errors = _errors(dbs, "times", f"<v:float64>[{TIMES}]", path)
    assert errors[0] == errors[1]
    assert errors[0].startswith(f"array times, column t: 'not a time' in {path} (data row 1235) is not ")
