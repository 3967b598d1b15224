"""Find the post-job evaluations: every module of this package that exposes ``EVALUATION``.

As for framework adapters, test-only evaluations are added from files named in
``AUTOML_EVAL_EXTRA_EVALUATIONS`` (paths separated by the OS path separator).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import tasks.evaluations as package
from tasks.errors import UserError
from tasks.evaluations.base import PostJobEvaluation

EXTRA_EVALUATIONS_ENV = "AUTOML_EVAL_EXTRA_EVALUATIONS"
_NOT_EVALUATIONS = frozenset({"base", "registry", "stage", "child"})


def _evaluation_of(module: ModuleType) -> PostJobEvaluation | None:
    evaluation = getattr(module, "EVALUATION", None)
    return evaluation if isinstance(evaluation, PostJobEvaluation) else None


@cache
def _shipped() -> dict[str, PostJobEvaluation]:
    found: dict[str, PostJobEvaluation] = {}
    for module_info in pkgutil.iter_modules(package.__path__):
        if module_info.name.startswith("_") or module_info.name in _NOT_EVALUATIONS:
            continue
        evaluation = _evaluation_of(importlib.import_module(f"{package.__name__}.{module_info.name}"))
        if evaluation is not None:
            found[evaluation.name] = evaluation
    return found


@cache
def _extra(spec: str) -> dict[str, PostJobEvaluation]:
    found: dict[str, PostJobEvaluation] = {}
    for file in filter(None, spec.split(os.pathsep)):
        path = Path(file)
        module_spec = importlib.util.spec_from_file_location(f"automl_eval_extra_eval_{path.stem}", path)
        if module_spec is None or module_spec.loader is None or not path.is_file():
            raise UserError(f"{EXTRA_EVALUATIONS_ENV}: no evaluation module at {path}; fix the path.")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_spec.name] = module  # pydantic resolves a settings model's hints through it
        module_spec.loader.exec_module(module)
        evaluation = _evaluation_of(module)
        if evaluation is None:
            raise UserError(f"{path}: defines no EVALUATION (a PostJobEvaluation instance); add one.")
        found[evaluation.name] = evaluation
    return found


def all_evaluations() -> dict[str, PostJobEvaluation]:
    """Every evaluation by name: the shipped ones plus any from AUTOML_EVAL_EXTRA_EVALUATIONS."""
    return {**_shipped(), **_extra(os.environ.get(EXTRA_EVALUATIONS_ENV, ""))}


def get_evaluation(name: str) -> PostJobEvaluation:
    evaluations = all_evaluations()
    if name not in evaluations:
        known = ", ".join(sorted(evaluations)) or "none"
        raise UserError(f"unknown post-job evaluation '{name}'; known evaluations: {known}.")
    return evaluations[name]
