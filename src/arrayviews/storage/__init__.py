"""Storage layer: the Iceberg-backed chunk fragment tables and the SQL catalog."""
