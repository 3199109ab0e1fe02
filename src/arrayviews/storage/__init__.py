"""Storage layer: the Iceberg-backed chunk fragment tables and the SQL catalog."""

from arrayviews.storage import avro_schemas, inline_executor, manifest_cache

avro_schemas.install()
inline_executor.install()
manifest_cache.install()
