"""Entrypoints of the team's deployments (prefect.yaml): `nightly` and `manual`.

- nightly: the nightly suite on a cron schedule, always a fresh execution, then recorded for the
  comparison with the previous successful nightly.
- manual: no schedule; typed parameters, so the Prefect UI shows a form (suite and budget are
  choices read from specs/ when the deployment is registered).

Thin wiring: every entrypoint ends in `flows.benchmark.benchmark`; in team mode its jobs go to the
long-lived workers of flows/team_worker.py.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any, Literal

from prefect import flow, tags

from tasks import paths

logger = logging.getLogger("automl_eval.deployments")


def _names(folder_glob: str) -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in paths.specs_dir().glob(folder_glob)))


def _budget_names() -> tuple[str, ...]:
    try:
        from tasks.specs import load_budgets

        return tuple(load_budgets())
    except Exception:  # a broken budgets.yaml is reported by the run itself, with the file named
        return ()


# Literal types built from specs/ so the Prefect UI offers the suites and budgets as choices.
_SUITES = _names("suites/*.yaml")
_BUDGETS = _budget_names()
SuiteName = Literal[_SUITES] if _SUITES else str  # type: ignore[valid-type]
BudgetName = Literal[_BUDGETS] if _BUDGETS else str  # type: ignore[valid-type]
DEFAULT_SUITE = "smoke" if "smoke" in _SUITES or not _SUITES else _SUITES[0]
NIGHTLY_SUITE = "nightly" if "nightly" in _SUITES or not _SUITES else DEFAULT_SUITE


@flow(name="automl-eval-manual", flow_run_name="manual-{suite}", log_prints=True)
def manual(
    suite: SuiteName = DEFAULT_SUITE,  # type: ignore[valid-type]
    frameworks: list[str] | None = None,
    datasets: list[str] | None = None,
    folds: int | None = None,
    budget: BudgetName | None = None,  # type: ignore[valid-type]
    team: str = "",
) -> dict[str, Any]:
    """Run a suite by hand. Empty frameworks/datasets/folds/budget mean: as the suite says."""
    from flows.benchmark import benchmark
    from tasks.specs import check_plain_names

    check_plain_names("manual form", suite=suite, frameworks=frameworks, datasets=datasets, budget=budget)

    return benchmark(suite=suite, frameworks=frameworks or None, datasets=datasets or None,
                     folds=folds, budget=budget, team=team or None, execution="new", trigger="manual")


@flow(name="automl-eval-nightly", flow_run_name="nightly-{suite}", log_prints=True)
def nightly(suite: str = NIGHTLY_SUITE, team: str = "nightly") -> Any:
    """The nightly suite, always a fresh execution, then compared with the previous successful one.

    Ends Failed when the night regressed (the regression artifact and MLflow tags say where)."""
    from flows.benchmark import benchmark

    with tags("nightly"):
        outcome = benchmark(suite=suite, team=team, execution="new", trigger="nightly")
    regressed = _compare_with_previous_nightly(outcome)
    return regressed if regressed is not None else outcome


def _compare_with_previous_nightly(outcome: dict[str, Any]) -> Any | None:
    """The reports' nightly comparison where it is installed; else the `nightly` tags on this flow
    run and the execution's team tag are what a later comparison finds. Returns a Failed state
    when the night regressed, else None."""
    if importlib.util.find_spec("tasks.report.compare") is None:
        print(f"nightly execution {outcome.get('execution_id')} recorded (tagged 'nightly').")
        return None
    from tasks.report.compare import compare_with_previous_nightly
    from tasks.report.publish import publish_comparison, regression_state

    comparison = compare_with_previous_nightly(outcome["execution_id"])
    publish_comparison(comparison, outcome["suite"])
    baseline = comparison.baseline_id or "nothing yet"
    print(f"nightly execution {outcome['execution_id']} compared with {baseline}.")
    return regression_state(comparison)
