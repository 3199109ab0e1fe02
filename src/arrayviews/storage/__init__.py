"""Storage layer: the Iceberg-backed chunk fragment tables and the SQL catalog."""

from arrayviews.storage import avro_blocks, avro_schemas, manifest_cache, snapshot_index

avro_schemas.install()
avro_blocks.install()  # closes the in-memory files of avro_schemas
manifest_cache.install()
snapshot_index.install()
