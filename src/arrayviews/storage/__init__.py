"""Storage layer: the Iceberg-backed chunk fragment tables and the SQL catalog."""

from arrayviews.storage import inline_executor, manifest_cache

inline_executor.install()
manifest_cache.install()
