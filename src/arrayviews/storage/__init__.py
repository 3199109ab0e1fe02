"""Storage layer: the Iceberg-backed chunk fragment tables and the SQL catalog."""

from arrayviews.storage import avro_schemas, manifest_cache, snapshot_index

avro_schemas.install()
manifest_cache.install()
snapshot_index.install()
