"""Pensive benchmarks: one runnable module per benchmark (``python -m benchmarks.NAME``)."""
