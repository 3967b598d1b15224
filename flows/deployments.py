"""Entrypoints of the team's deployments (prefect.yaml): `nightly` and `manual`.

- nightly: the nightly suite on a cron schedule, always a fresh execution, then recorded for the
  comparison with the previous successful nightly.
- manual: no schedule; typed parameters, so the Prefect UI shows a form (suite and budget are
  choices read from specs/ when the deployment is registered).

Thin wiring: every entrypoint ends in `flows.benchmark.benchmark`; in team mode its jobs go to the
long-lived workers of flows/team_worker.py.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Literal

from prefect import flow, tags
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.states import Failed
from pydantic import Field

from flows.benchmark import benchmark
from flows.explain_regression import Explanation, explain, markdown, regression_table, write
from tasks import paths
from tasks.errors import UserError
from tasks.evaluations.registry import all_evaluations
from tasks.frameworks.registry import all_adapters
from tasks.report.compare_store import compare_with_previous_nightly
from tasks.report.publish import artifact_key, publish_comparison, regression_state
from tasks.specs import check_plain_names, load_budgets, load_suite

logger = logging.getLogger("automl_eval.deployments")

# Set by `automl-eval deploy` for `prefect deploy` only: the GPUs the team has. The form then
# offers GPU budgets only where they can run; at run time (unset) every budget is accepted.
DEPLOY_GPUS_ENV = "AUTOML_EVAL_DEPLOY_GPUS"


def _names(folder_glob: str) -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in paths.specs_dir().glob(folder_glob)))


def _budget_names() -> tuple[str, ...]:
    try:
        budgets = load_budgets()
    except Exception:  # a broken budgets.yaml is reported by the run itself, with the file named
        return ()
    team_gpus = os.environ.get(DEPLOY_GPUS_ENV, "").strip()
    if team_gpus.isdigit():
        return tuple(name for name, budget in budgets.items() if budget.gpus <= int(team_gpus))
    return tuple(budgets)


def _framework_choices() -> tuple[str, ...]:
    """The registry's frameworks, plus the `name:variant` ids the suites use."""
    choices: set[str] = set()
    try:
        choices.update(all_adapters())
    except Exception as exc:  # an extra adapter that fails to load is reported when a run uses it
        logger.warning("framework choices without the registry: %s", exc)
    choices.update(_suite_entries("frameworks"))
    return tuple(sorted(choices))


def _suite_entries(field: str) -> set[str]:
    entries: set[str] = set()
    for name in _names("suites/*.yaml"):
        try:
            suite = load_suite(name, all_evaluations())
        except Exception:  # a broken suite is reported when it runs
            continue
        if field == "frameworks":
            entries.update(ref.id for ref in suite.frameworks)
        else:
            entries.update(suite.datasets)
    return entries


# Literal types built from specs/ and the registry, so the Prefect UI offers choices, not free text.
_SUITES = _names("suites/*.yaml")
_BUDGETS = _budget_names()
_FRAMEWORKS = _framework_choices()
_DATASETS = tuple(sorted(set(_names("datasets/*.yaml")) | _suite_entries("datasets")))
SuiteName = Literal[_SUITES] if _SUITES else str
BudgetName = Literal[_BUDGETS] if _BUDGETS else str
FrameworkName = Literal[_FRAMEWORKS] if _FRAMEWORKS else str
DatasetName = Literal[_DATASETS] if _DATASETS else str
DEFAULT_SUITE = "smoke" if "smoke" in _SUITES or not _SUITES else _SUITES[0]
NIGHTLY_SUITE = "nightly" if "nightly" in _SUITES or not _SUITES else DEFAULT_SUITE

# What the form says under each field (Prefect shows pydantic descriptions).
MANUAL_FIELDS = {
    "suite": "The suite to run (specs/suites/NAME.yaml): its datasets, frameworks, folds, seeds and budget.",
    "frameworks": "Run only these frameworks. None (empty): every framework the suite lists.",
    "datasets": "Run only these datasets (cards in specs/datasets/). None (empty): every dataset of the "
                "suite.",
    "folds": "Use the first N saved folds of each dataset. None (empty): as many as the suite says.",
    "budget": "Time, cores, memory and GPUs per job (specs/budgets.yaml). None (empty): the suite's "
              "budget. Budgets that need GPUs are listed only when the team has GPU workers.",
    "team": "A team tag on every MLflow run, to filter and compare by team. Empty: no team.",
}


@flow(name="automl-eval-manual", log_prints=True)
def manual(
    # Descriptions as Field defaults: that is where Prefect reads them for the form. The choices are
    # Literals made at import from specs/ (above), which a static checker cannot read: hence the ignores.
    suite: SuiteName = Field(DEFAULT_SUITE, description=MANUAL_FIELDS["suite"]),  # type: ignore[valid-type]
    frameworks: list[FrameworkName] | None = Field(None, description=MANUAL_FIELDS["frameworks"]),  # type: ignore[valid-type]
    datasets: list[DatasetName] | None = Field(None, description=MANUAL_FIELDS["datasets"]),  # type: ignore[valid-type]
    folds: int | None = Field(None, description=MANUAL_FIELDS["folds"]),
    budget: BudgetName | None = Field(None, description=MANUAL_FIELDS["budget"]),  # type: ignore[valid-type]
    team: str = Field("", description=MANUAL_FIELDS["team"]),
) -> dict[str, Any]:
    """Run a suite by hand. Empty frameworks/datasets/folds/budget mean: as the suite says.

    No flow_run_name: the name typed in the form (or Prefect's own) is kept. The suite runs in
    this flow run, not a subflow, so its artifacts (leaderboard, summary, report) are on the run
    the user started.
    """

    check_plain_names("manual form", suite=suite, frameworks=frameworks, datasets=datasets, budget=budget)

    return benchmark.fn(suite=suite, frameworks=frameworks or None, datasets=datasets or None,
                        folds=folds, budget=budget, team=team or None, execution="new", trigger="manual")


@flow(name="automl-eval-nightly", flow_run_name="nightly-{suite}", log_prints=True)
def nightly(suite: str = NIGHTLY_SUITE, team: str = "nightly") -> Any:
    """The nightly suite, always a fresh execution, then compared with the previous successful one.

    Ends Failed when the night regressed (the regression artifact and MLflow tags say where), or
    when jobs ran and none ended ok."""

    with tags("nightly"):
        # In this flow run (not a subflow): the nightly's artifacts are on the run Prefect shows.
        outcome = benchmark.fn(suite=suite, team=team, execution="new", trigger="nightly")
    regressed = _compare_with_previous_nightly(outcome)
    if regressed is not None:
        return regressed
    return nothing_succeeded(outcome) or outcome


def nothing_succeeded(outcome: dict[str, Any]) -> Any | None:
    """A Failed state when jobs ran and none ended ok (a night whose every job failed is no success,
    whatever the comparison finds), else None."""
    counts: dict[str, int] = outcome.get("counts") or {}
    if not sum(counts.values()) or counts.get("ok"):
        return None
    suite = outcome.get("suite", "the suite")
    said = ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
    return Failed(message=f"no job of {suite} ended ok ({said}); the leaderboard and each job's MLflow run "
                          f"say why; once fixed, `automl-eval run {suite} --retry-failed` reruns them.")


def _compare_with_previous_nightly(outcome: dict[str, Any]) -> Any | None:
    """The nightly comparison with the previous successful nightly, published as artifacts, and
    for a regression the attribution by experiment (the suite's `attribution:` block).
    Returns a Failed state when the night regressed, else None."""
    comparison = compare_with_previous_nightly(outcome["execution_id"])
    publish_comparison(comparison, outcome["suite"])
    baseline = comparison.baseline_id or "nothing yet"
    print(f"nightly execution {outcome['execution_id']} compared with {baseline}.")
    if comparison.regressed and comparison.baseline_id:
        attribute_regression(outcome["suite"], comparison.baseline_id, outcome["execution_id"])
    return regression_state(comparison)


def attribute_regression(suite: str, baseline_id: str, execution_id: str) -> Explanation | None:
    """Run the attribution within the suite's job cap; its page goes to the flow run (markdown and
    table artifacts) and to the execution's MLflow run (attribution/). None when it did not run
    (off in the suite, nothing runnable differs, or the cap stops it: the artifact says which)."""
    settings = load_suite(suite, all_evaluations()).attribution
    if not settings.enabled:
        return None
    try:
        # A host kind not available here is a factor not varied, not a reason to explain nothing.
        explanation = explain(baseline_id, execution_id, max_jobs=settings.max_jobs,
                              max_factors=settings.max_factors, refuse_unavailable_host=False)
    except UserError as exc:  # said on the flow run, not raised: the comparison stands without it
        page = f"# Why {execution_id} regressed\n\nNo attribution was run: {exc}\n"
        print(page)
        create_markdown_artifact(key=artifact_key("attribution", suite), markdown=page,
                                 description="Attribution of the regression (not run)")
        return None
    write(explanation, paths.reports_dir() / f"attribution-{baseline_id[:8]}-vs-{execution_id[:8]}")
    # The regression table again, its "main factor" now the measured culprit (replaces the guess).
    table = regression_table(explanation)
    create_table_artifact(key=artifact_key("regression-table", suite),
                          table=json.loads(table.to_json(orient="records")),
                          description="metric | current | baseline | change | main factor (measured)")
    create_markdown_artifact(key=artifact_key("attribution", suite), markdown=markdown(explanation),
                             description="Attribution of the regression, measured by re-running its mixes")
    print(explanation.attribution.sentence())
    return explanation
