"""The Prefect UI of a team stack, in a real browser: the `manual` form explains each field and
offers the frameworks as choices, and a manual run carries its artifacts, linked to MLflow."""

from __future__ import annotations

from typing import Any

import pytest
from team_support.stack import SUITE, TYPED_RUN_NAME, Team

pytestmark = [pytest.mark.integration, pytest.mark.services, pytest.mark.ui]

MANUAL = "automl-eval-manual/manual"


def _prefect_settings(team: Team) -> Any:
    """Client settings for the team's Prefect server, which refuses requests without its credential."""
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    from ops.team_stack import PREFECT_AUTH_ENV

    return temporary_settings({PREFECT_API_URL: team.settings.prefect_api_url,
                               PREFECT_API_AUTH_STRING: team.creds[PREFECT_AUTH_ENV]})


def _open(page: Any, team: Team, path: str) -> None:
    """Open a Prefect UI page signed in with the team's credential: the UI keeps what a user types at
    its sign-in prompt, base64-encoded, in local storage, and sends it with every API request."""
    import base64
    import json

    from ops.team_stack import PREFECT_AUTH_ENV

    stored = base64.b64encode(team.creds[PREFECT_AUTH_ENV].encode()).decode()
    page.context.add_init_script(f"window.localStorage.setItem('prefect-password', {json.dumps(stored)});")
    page.goto(f"{team.settings.prefect_ui_url}{path}")


@pytest.fixture
def manual_run(team: Team) -> Any:
    """The manual run the team tests made (named as typed); one of its own when run alone."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
    from prefect.deployments import run_deployment

    with _prefect_settings(team):
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
                name=FlowRunFilterName(any_=[TYPED_RUN_NAME])))
        done = [run for run in runs if run.state is not None and run.state.is_completed()]
        if done:
            return done[0]
        # _sync: Playwright's sync API keeps an event loop, which would make this return a coroutine.
        flow_run = run_deployment(MANUAL, flow_run_name=TYPED_RUN_NAME, timeout=600, poll_interval=3,
                                  parameters={"suite": SUITE, "frameworks": ["constant"],
                                              "datasets": ["breast_cancer"], "folds": 1, "budget": "test"},
                                  _sync=True)
    assert flow_run.state is not None and flow_run.state.is_completed(), flow_run.state
    return flow_run


def test_the_manual_form_explains_each_field_and_offers_the_frameworks(page: Any, team: Team) -> None:
    from flows.deployments import MANUAL_FIELDS

    with _prefect_settings(team):
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            deployment = client.read_deployment_by_name(MANUAL)
    _open(page, team, f"/deployments/deployment/{deployment.id}/run")
    for description in MANUAL_FIELDS.values():
        page.get_by_text(description).first.wait_for()
    # frameworks: switch from None to a list, open it: the registry's frameworks are the choices.
    page.get_by_role("button", name="list").first.click()
    page.locator(".schema-form-property-array .p-select-button__control").first.click()
    page.keyboard.press("ArrowDown")
    for framework in ("constant", "hgb", "autogluon"):
        page.get_by_role("option", name=framework, exact=True).wait_for()


def test_a_manual_runs_artifacts_are_on_it_and_link_to_mlflow(page: Any, team: Team, manual_run: Any) -> None:
    _open(page, team, f"/runs/flow-run/{manual_run.id}")
    page.get_by_text(TYPED_RUN_NAME).first.wait_for()
    page.get_by_text("Artifacts", exact=True).first.click()
    for kind in ("leaderboard", "summary", "report"):
        page.get_by_text(f"{kind}-team-test").first.wait_for()
    page.get_by_text("summary-team-test").first.click()
    page.get_by_text("Job runs in MLflow").wait_for()
    hrefs = page.locator("a").evaluate_all("links => links.map(a => a.href)")
    mlflow_runs = [href for href in hrefs if href.startswith(f"{team.settings.mlflow_url}/#/experiments/")]
    # the execution (title and line) and each job run
    assert len(set(mlflow_runs)) >= 2, hrefs
    assert all("/runs/" in href and "workflowType=machine_learning" in href for href in mlflow_runs)
