"""The `manual` deployment's form: every field described (what leaving it empty means), frameworks
and datasets offered as choices, GPU budgets only where the team has GPUs, the typed name kept."""

from __future__ import annotations

import importlib
import inspect

import pytest

from flows import deployments
from tasks.specs import load_budgets


def _schema() -> dict:
    from prefect.utilities.callables import parameter_schema

    return parameter_schema(deployments.manual.fn).model_dump()["properties"]


def _choices(field: dict) -> list[str]:
    for option in field.get("anyOf", [field]):
        items = option.get("items", option)
        if "enum" in items:
            return items["enum"]
    return []


def test_every_parameter_has_a_description_that_says_what_empty_means() -> None:
    fields = _schema()
    assert set(fields) == set(inspect.signature(deployments.manual.fn).parameters)
    for name, field in fields.items():
        assert field.get("description") == deployments.MANUAL_FIELDS[name]
    for name in ("frameworks", "datasets", "folds", "budget"):
        assert "None (empty)" in fields[name]["description"], name


def test_frameworks_and_datasets_are_choices_from_the_registry_and_catalog() -> None:
    from tasks.frameworks.registry import all_adapters
    from tasks.specs import list_dataset_specs

    fields = _schema()
    assert set(all_adapters()) <= set(_choices(fields["frameworks"]))
    assert {spec.name for spec in list_dataset_specs()} <= set(_choices(fields["datasets"]))
    assert set(_choices(fields["suite"])) >= {"smoke"}


def test_gpu_budgets_are_offered_only_to_a_team_with_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu_budgets = {name for name, budget in load_budgets().items() if budget.gpus}
    assert gpu_budgets, "specs/budgets.yaml has GPU budgets to hide"
    try:
        monkeypatch.setenv(deployments.DEPLOY_GPUS_ENV, "0")
        offered = set(_choices(_schema_of(importlib.reload(deployments))["budget"]))
        assert offered and not offered & gpu_budgets
        monkeypatch.setenv(deployments.DEPLOY_GPUS_ENV, "1")
        assert gpu_budgets <= set(_choices(_schema_of(importlib.reload(deployments))["budget"]))
    finally:
        monkeypatch.delenv(deployments.DEPLOY_GPUS_ENV)
        importlib.reload(deployments)  # at run time (unset) every budget is accepted
    assert gpu_budgets <= set(_choices(_schema()["budget"]))


def _schema_of(module: object) -> dict:
    from prefect.utilities.callables import parameter_schema

    return parameter_schema(module.manual.fn).model_dump()["properties"]  # type: ignore[attr-defined]


def test_the_run_name_typed_in_the_form_is_kept() -> None:
    # A flow_run_name template would rename the run when it starts ("manual-smoke").
    assert deployments.manual.flow_run_name is None
