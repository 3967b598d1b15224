"""The MLflow names each post-job evaluation records, as the evaluations declare them.

tasks/vocabulary.py holds the names common to every evaluation; the names of one evaluation are
its own (`PostJobEvaluation.metrics`, `.tags`), so they are read from the registry here, a layer
above the vocabulary (which imports nothing of the evaluations).
"""

from __future__ import annotations

from tasks.evaluations.registry import all_evaluations


def evaluation_metrics() -> dict[str, dict[str, str]]:
    """Evaluation name -> the metric names it records (from the evaluations registry)."""
    return {name: dict(evaluation.metrics) for name, evaluation in all_evaluations().items()}


def evaluation_tags() -> dict[str, dict[str, str]]:
    """Evaluation name -> the job tag names it records (from the evaluations registry)."""
    return {name: dict(evaluation.tags) for name, evaluation in all_evaluations().items()}
