"""The metric registry is the one source of metric knowledge, and a suite metric a framework cannot
optimise is refused when the run is planned."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from flows.benchmark import resolve_plan
from tasks import metric_registry
from tasks.errors import UserError
from tasks.figures import Figure
from tasks.frameworks.registry import all_adapters
from tasks.metric_registry import (
    METRIC_FRAMEWORKS,
    METRICS,
    PROBLEM_TYPES,
    can_optimise,
    default_metric,
    framework_name,
    higher_is_better,
)
from tasks.plan import check_suite_metrics
from tasks.report.compare import Quantity, quantities
from tasks.specs import DEFAULT_METRIC, load_dataset_spec
from tasks.vocabulary import LOWER_IS_BETTER, SCORE_METRICS

ROOT = Path(__file__).resolve().parents[2]

# What the vocabulary, the adapters and specs held before the registry: existing stores must still
# read, and every framework must still be told the same metric.
NAMES_BEFORE = {
    "binary": ("auc", "logloss", "acc", "balacc", "f1"),
    "multiclass": ("logloss", "acc", "balacc", "macro_f1"),
    "regression": ("rmse", "mae", "r2"),
    "forecasting": ("owa", "smape", "mase", "smape_naive2", "mase_naive2", "quantile_loss", "coverage"),
}
LOWER_BEFORE = {"logloss", "rmse", "mae", "owa", "smape", "mase", "smape_naive2", "mase_naive2",
                "quantile_loss"}
FRAMEWORK_NAMES_BEFORE = {
    "autogluon": {"auc": "roc_auc", "logloss": "log_loss", "acc": "accuracy", "balacc": "balanced_accuracy",
                  "f1": "f1", "macro_f1": "f1_macro", "rmse": "root_mean_squared_error",
                  "mae": "mean_absolute_error", "r2": "r2"},
    "flaml": {"auc": "roc_auc", "logloss": "log_loss", "acc": "accuracy", "balacc": "accuracy", "f1": "f1",
              "macro_f1": "macro_f1", "rmse": "rmse", "mae": "mae", "r2": "r2"},
    "h2o": {"auc": "AUC", "logloss": "logloss", "acc": "logloss", "balacc": "mean_per_class_error",
            "f1": "logloss", "macro_f1": "logloss", "rmse": "RMSE", "mae": "MAE", "r2": "RMSE"},
}


def test_the_vocabulary_keeps_every_name_and_direction_and_adds_brier_ece_and_top5() -> None:
    for problem_type, names in NAMES_BEFORE.items():
        assert SCORE_METRICS[problem_type][: len(names)] == names
    assert SCORE_METRICS["binary"][len(NAMES_BEFORE["binary"]):] == ("brier", "ece")
    assert SCORE_METRICS["multiclass"][len(NAMES_BEFORE["multiclass"]):] == ("brier", "ece", "top5_acc")
    assert LOWER_BEFORE | {"brier", "ece"} == LOWER_IS_BETTER


def test_defaults_and_framework_names_are_what_they_were() -> None:
    assert DEFAULT_METRIC == {"binary": "auc", "multiclass": "logloss", "regression": "rmse",
                              "forecasting": "owa"}
    for framework, names in FRAMEWORK_NAMES_BEFORE.items():
        assert {entry.name: framework_name(entry.name, framework) for entry in METRICS
                if can_optimise(entry.name, framework)} == names


def test_every_entry_is_complete() -> None:
    assert len({entry.name for entry in METRICS}) == len(METRICS)
    for entry in METRICS:
        assert entry.problem_types and set(entry.problem_types) <= set(PROBLEM_TYPES)
        assert set(entry.framework_names) <= set(METRIC_FRAMEWORKS)
        assert callable(entry.score)
    assert all(default_metric(problem_type) for problem_type in PROBLEM_TYPES)


def test_the_registry_is_layer_one() -> None:
    # it imports nothing of the project's above the nouns (specs, data, frameworks, ... report, flows)
    tree = ast.parse((ROOT / "tasks" / "metric_registry.py").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names}
    assert {name for name in imported if name.startswith(("tasks", "flows", "bench"))} == {"tasks.errors",
                                                                                  "tasks.plugins"}


def test_a_framework_without_the_metric_is_one_sentence() -> None:
    assert not any(can_optimise(metric, framework)
                   for metric in ("brier", "ece") for framework in METRIC_FRAMEWORKS)
    with pytest.raises(UserError, match="h2o cannot optimise the metric 'ece'"):
        framework_name("ece", "h2o")
    with pytest.raises(UserError, match="unknown metric 'no_such'"):
        framework_name("no_such", "flaml")


def test_compare_takes_its_directions_from_the_registry() -> None:
    # the evaluations' figures come from their declarations, in the order compare always listed them
    directions = [(quantity.name, quantity.higher_is_better) for quantity in quantities()]
    assert directions == [("result", True), ("fit_s", False), ("duration_s", False),
                          ("latency_p99_ms", False), ("peak_rss_mb", False), ("gpu_mem_peak_mb", False),
                          ("robust_auc", True), ("robust_breaking_mean", True), ("serve_p99_ms", False),
                          ("serve_cold_start_s", False), ("serve_server_cpu_s_per_1k", False),
                          ("serve_server_peak_rss_mb", False), ("serve_max_qps_at_slo", True)]
    assert Quantity("fit: duration_s").higher_is_better is False  # a per-stage figure: its figure's
    assert higher_is_better("auc") and not higher_is_better("brier") and not higher_is_better("ece")


def test_planning_refuses_a_metric_a_framework_cannot_optimise() -> None:
    penguins = load_dataset_spec("penguins").model_copy(update={"metric": "brier"})
    adapters = all_adapters()
    check_suite_metrics("s", [penguins], {"constant": adapters["constant"], "hgb": adapters["hgb"]})
    with pytest.raises(UserError) as refused:
        check_suite_metrics("s", [penguins], {"hgb": adapters["hgb"], "flaml": adapters["flaml"]})
    assert str(refused.value) == ("suite 's': framework 'flaml' cannot optimise the metric 'brier' of "
                                  "dataset 'penguins'; give its card another metric or run without 'flaml'.")
    # a dataset the framework does not handle is skipped by its jobs, not refused here
    owa = load_dataset_spec("m1_yearly")
    check_suite_metrics("s", [owa], {"autogluon": adapters["autogluon"]})


def test_a_suite_with_such_a_card_is_refused_before_any_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs = tmp_path / "specs"
    (specs / "datasets").mkdir(parents=True)
    (specs / "suites").mkdir()
    (specs / "budgets.yaml").write_text((ROOT / "specs" / "budgets.yaml").read_text())
    card = (ROOT / "specs" / "datasets" / "penguins.yaml").read_text()
    card = card.replace("metric: logloss", "metric: ece")
    (specs / "datasets" / "penguins.yaml").write_text(card)
    (specs / "suites" / "calibration.yaml").write_text(
        "datasets: [penguins]\nframeworks: [constant, autogluon]\nfolds: 2\nbudget: smoke\n")
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path))
    refusal = "suite 'calibration': framework 'autogluon' cannot optimise the metric 'ece' of dataset"
    with pytest.raises(UserError, match=refusal):
        resolve_plan("calibration")
    assert [ref.name for ref in resolve_plan("calibration", ["constant"]).frameworks] == ["constant"]


def test_a_card_metric_of_another_problem_type_names_the_card(tmp_path: Path) -> None:
    card = tmp_path / "penguins.yaml"
    card.write_text((ROOT / "specs" / "datasets" / "penguins.yaml").read_text().replace("metric: logloss",
                                                                                       "metric: rmse"))
    with pytest.raises(UserError, match="metric 'rmse' does not apply to multiclass problems"):
        load_dataset_spec(card)


def test_quantile_levels_live_in_the_registry() -> None:
    assert metric_registry.QUANTILE_LEVELS == (0.1, 0.5, 0.9)
    assert [metric_registry.quantile_column(level) for level in metric_registry.QUANTILE_LEVELS] == [
        "q0.1", "q0.5", "q0.9"]


def test_a_compared_figure_declares_its_direction() -> None:
    with pytest.raises(ValueError, match="figure serve_x_ms: a compared or attributed figure declares"):
        Figure("serve_x_ms", "a latency", "ms", compared="cost")
    assert Figure("serve_x_ms", "a latency", "ms", higher_is_better=False, compared="cost").compared == "cost"
