"""Reports that decide: who wins (ranks, tests, Elo), at what cost (Pareto), how stable, what regressed.

Every module here is a pure function over a runs DataFrame (tasks.tracking.read's columns), except
plots (files), build (the report folder), compare's nightly hook and publish (Prefect artifacts).
"""
