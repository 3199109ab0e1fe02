"""Writing a data file creates its folder only when it is missing (storage/files.py ``in_folder``):
the rows read back are those written, a missing nested folder is created once, and later files in
it ask for no folder; an error that is not a missing folder is raised as it was."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arrayviews.storage import files


def _rows(tag: int) -> pa.Table:
    return pa.table({"k": pa.array([tag, tag + 1], pa.int64()), "s": pa.array([f"a{tag}", None])})


def test_a_missing_folder_is_created_once_and_files_read_back(tmp_path, monkeypatch) -> None:
    created = []
    original = files.create_folder
    monkeypatch.setattr(
        files, "create_folder", lambda fs, folder: created.append(folder) or original(fs, folder)
    )
    folder = tmp_path / "table" / "data"
    for tag in range(3):
        uri = files.new_data_file_uri("file://" + str(folder))
        size = files.write_parquet(_rows(tag), uri)
        path = uri.removeprefix("file://")
        assert size == os.path.getsize(path)
        assert pq.read_table(path).to_pylist() == _rows(tag).to_pylist()
    assert created == [str(folder)]  # the first file found it missing; the others asked for nothing


def test_a_folder_that_is_a_file_is_an_error(tmp_path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("not a folder")
    with pytest.raises(OSError):
        files.write_parquet(_rows(0), "file://" + str(blocker / "x.parquet"))
    assert blocker.read_text() == "not a folder"


def test_a_write_that_fails_in_an_existing_folder_is_not_retried(tmp_path) -> None:
    calls = []

    def failing() -> None:
        calls.append(1)
        raise FileNotFoundError("something else is missing")

    import pyarrow.fs as pafs

    with pytest.raises(FileNotFoundError, match="something else"):
        files.in_folder(pafs.LocalFileSystem(), str(tmp_path / "f.parquet"), failing)
    assert calls == [1]
