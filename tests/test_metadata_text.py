"""Table metadata written with each snapshot's JSON text kept (storage/catalog.py ``metadata_json``)
against pyiceberg's own ``model_dump_json``: parsed JSON equal for tables of 0, 1 and many snapshots,
with and without nulls, after expiry and after a property change; and a table loaded through a fresh
connection equal to the one in memory."""

from __future__ import annotations

import json

import pytest

import arrayviews
from arrayviews.storage import catalog as catalog_module
from arrayviews.storage.catalog import metadata_json
from test_stream_views import SCHEMA, network


def _same(metadata) -> None:
    """``metadata_json`` against pyiceberg's text, both null settings, twice (the second from the
    kept snapshot texts)."""
    for exclude_none in (True, False):
        expected = json.loads(metadata.model_dump_json(exclude_none=exclude_none))
        assert json.loads(metadata_json(metadata, exclude_none)) == expected
        assert json.loads(metadata_json(metadata, exclude_none)) == expected


def _reloaded(path: str, spark, name: str):
    return arrayviews.connect(path, spark=spark).stream(name).table.table.metadata


def test_metadata_text_equals_pyiceberg_over_a_streams_life(spark, tmp_path) -> None:
    path = str(tmp_path / "w")
    db = arrayviews.connect(path, spark=spark)
    stream = db.create_stream("M", SCHEMA, 60, "ts")
    table = stream.table
    _same(table.table.metadata)  # no snapshot
    assert table.table.metadata.snapshots == []
    stream.append(network([0]))
    assert len(table.table.metadata.snapshots) == 1
    _same(table.table.metadata)
    assert _reloaded(path, spark, "M") == table.table.metadata
    for minute in range(1, 12):
        stream.append(network([minute]))
        _same(table.table.metadata)
    assert len(table.table.metadata.snapshots) == 12
    assert _reloaded(path, spark, "M") == table.table.metadata
    stream.expire_versions()
    table.refresh()
    assert len(table.table.metadata.snapshots) < 12
    _same(table.table.metadata)
    assert _reloaded(path, spark, "M") == table.table.metadata
    table.set_properties(note="changed")
    assert table.table.metadata.properties["note"] == "changed"
    _same(table.table.metadata)
    assert _reloaded(path, spark, "M") == table.table.metadata
    stream.append(network([12]))
    _same(table.table.metadata)
    reloaded = _reloaded(path, spark, "M")
    assert reloaded == table.table.metadata
    assert reloaded.properties["note"] == "changed"


def test_metadata_written_by_one_connection_reads_the_same_in_another(spark, tmp_path) -> None:
    """Two connections append in turn: each reloads exactly the metadata the other wrote (its
    snapshot texts were kept from objects the other process never had)."""
    path = str(tmp_path / "w")
    first = arrayviews.connect(path, spark=spark).create_stream("M", SCHEMA, 60, "ts")
    second = arrayviews.connect(path, spark=spark).stream("M")
    for minute in range(6):
        writer, reader = (first, second) if minute % 2 == 0 else (second, first)
        writer.append(network([minute]))
        reader.table.refresh()
        assert reader.table.table.metadata == writer.table.table.metadata
        _same(reader.table.table.metadata)
    assert len(first.table.table.metadata.snapshots) == 6


@pytest.mark.parametrize("kept", [1, 3])
def test_few_kept_texts_still_give_the_same_text(spark, tmp_path, monkeypatch, kept) -> None:
    """With room for only a few snapshot texts (the rest dropped oldest first) every text written
    is still pyiceberg's."""
    monkeypatch.setattr(catalog_module, "SNAPSHOT_TEXTS_KEPT", kept)
    path = str(tmp_path / "w")
    stream = arrayviews.connect(path, spark=spark).create_stream("M", SCHEMA, 60, "ts")
    for minute in range(5):
        stream.append(network([minute]))
        _same(stream.table.table.metadata)
    assert len(catalog_module._snapshot_texts) <= kept
    assert _reloaded(path, spark, "M") == stream.table.table.metadata
