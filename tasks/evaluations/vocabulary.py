"""The MLflow names each post-job evaluation records, as the evaluations declare them.

tasks/vocabulary.py holds the names common to every evaluation; the figures of one evaluation are
its own (`PostJobEvaluation.figures`, `.tags`), so they are read from the registry here, a layer
above the vocabulary (which imports nothing of the evaluations): the vocabulary page, compare's
quantities, regression attribution's figures and the report's typed columns all come from here.
"""

from __future__ import annotations

from tasks.evaluations.registry import all_evaluations
from tasks.figures import Figure


def evaluation_metrics() -> dict[str, dict[str, str]]:
    """Evaluation name -> the metric names it records (from the evaluations registry)."""
    return {name: dict(evaluation.metrics) for name, evaluation in all_evaluations().items()}


def evaluation_tags() -> dict[str, dict[str, str]]:
    """Evaluation name -> the job tag names it records (from the evaluations registry)."""
    return {name: dict(evaluation.tags) for name, evaluation in all_evaluations().items()}


def evaluation_figures() -> dict[str, Figure]:
    """Every evaluation's declared figures by name (an evaluation's name order, then its own)."""
    return {figure.name: figure for _, evaluation in sorted(all_evaluations().items())
            for figure in evaluation.figures}


def compared_figures() -> tuple[Figure, ...]:
    """The figures `automl-eval compare` judges per cell (declared `compared`)."""
    return tuple(figure for figure in evaluation_figures().values() if figure.compared)


def attributed_figures() -> tuple[str, ...]:
    """The figures `automl-eval explain-regression` splits over their causes (declared `attributed`)."""
    return tuple(figure.name for figure in evaluation_figures().values() if figure.attributed)


def reported_figures() -> tuple[str, ...]:
    """The figures the report reads (declared `reported`), typed as numbers in its job table."""
    return tuple(figure.name for figure in evaluation_figures().values() if figure.reported)
