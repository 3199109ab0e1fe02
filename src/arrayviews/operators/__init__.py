"""Operators: array operations built from execution jobs and per-chunk kernels."""
