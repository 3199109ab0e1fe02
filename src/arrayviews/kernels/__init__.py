"""Kernels: per-chunk numpy code (no Spark, no I/O); the only place with tight loops."""
