"""Data sets for the demo and the benchmarks: a PTF-like sky catalog and GEO-like point clouds."""
