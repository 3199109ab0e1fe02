"""One contract for every SQL catalog arrayviews runs on: SQLite (embedded) and PostgreSQL (shared).

The PostgreSQL case runs when ``ARRAYVIEWS_TEST_POSTGRES_URL`` names a database (``.ci/run`` starts
a local server and sets it when the machine has PostgreSQL); otherwise it is skipped, saying why.
"""

from __future__ import annotations

import os
import uuid

import numpy as np
import pytest
import sqlalchemy

import arrayviews
from arrayviews.model.errors import AlreadyExistsError, NotFoundError

POSTGRES = os.environ.get("ARRAYVIEWS_TEST_POSTGRES_URL")


def _fresh_postgres_schema_url() -> str:
    """A PostgreSQL URL whose catalog tables live in a new, empty schema (tests stay independent)."""
    schema = "av_" + uuid.uuid4().hex[:12]
    engine = sqlalchemy.create_engine(POSTGRES)
    with engine.begin() as connection:
        connection.execute(sqlalchemy.text(f'CREATE SCHEMA "{schema}"'))
    engine.dispose()
    separator = "&" if "?" in POSTGRES else "?"
    return f"{POSTGRES}{separator}options=-csearch_path%3D{schema}"


@pytest.fixture(params=["sqlite", "postgresql"])
def catalog_db(request, spark, tmp_path):
    if request.param == "sqlite":
        return arrayviews.connect(str(tmp_path / "warehouse"), spark=spark)
    if not POSTGRES:
        pytest.skip("set ARRAYVIEWS_TEST_POSTGRES_URL to test the PostgreSQL catalog")
    return arrayviews.connect(
        str(tmp_path / "warehouse"), spark=spark, catalog_uri=_fresh_postgres_schema_url()
    )


def test_catalog_contract(catalog_db) -> None:
    db = catalog_db
    assert db.arrays() == []
    array = db.create_array("A<v:float64>[i=0:9:4; j=0:9:4]")
    with pytest.raises(AlreadyExistsError):
        db.create_array("A<w:int64>[i=0:1:1]")
    data = np.arange(100.0).reshape(10, 10)
    array.write_dense(data[:5], origin=(0, 0))
    array.write_dense(data[5:], origin=(5, 0))
    assert db.arrays() == ["A"]
    assert array.versions()["version"].tolist() == [1, 2]
    np.testing.assert_array_equal(array.to_numpy(), data)
    np.testing.assert_array_equal(array.at_version(1).to_numpy(masked=True).mask[5:], True)
    reopened = db.array("a")  # names are case-insensitive
    np.testing.assert_array_equal(
        reopened.regrid([5, 5], "sum(v)").to_numpy(), data.reshape(2, 5, 2, 5).sum(axis=(1, 3))
    )
    db.drop_array("A")
    assert db.arrays() == []
    with pytest.raises(NotFoundError):
        db.array("A")
