"""Find the post-job evaluations: every module of this package that exposes ``EVALUATION``.

They are plug-ins of the generic registry (tasks/plugins.py), as the framework adapters are;
test-only evaluations are added from files named in ``AUTOML_EVAL_EXTRA_EVALUATIONS`` (paths
separated by the OS path separator).
"""

from __future__ import annotations

from tasks.evaluations.base import PostJobEvaluation
from tasks.plugins import Registry

EXTRA_EVALUATIONS_ENV = "AUTOML_EVAL_EXTRA_EVALUATIONS"

EVALUATIONS: Registry[PostJobEvaluation] = Registry(
    "post-job evaluation", "evaluations", base=PostJobEvaluation, package="tasks.evaluations",
    attribute="EVALUATION",
    skip=frozenset({"base", "registry", "stage", "child", "by_modality", "modalities"}),
    extra_env=EXTRA_EVALUATIONS_ENV)


def all_evaluations() -> dict[str, PostJobEvaluation]:
    """Every evaluation by name: the shipped ones plus any from AUTOML_EVAL_EXTRA_EVALUATIONS."""
    return EVALUATIONS.all()


def get_evaluation(name: str) -> PostJobEvaluation:
    """The evaluation called `name`, or one sentence naming the known ones (and the closest)."""
    return EVALUATIONS.get(name)
