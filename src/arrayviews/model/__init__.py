"""Model layer: array schemas, attribute types, chunk geometry and errors (no I/O, no Spark)."""
