"""Execution layer: Spark jobs that move whole chunk fragments between files and Python workers."""
