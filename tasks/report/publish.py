"""Prefect artifacts for the benchmark flow: the report and the regression diagnosis in the Prefect UI.

The nightly's choice, documented in docs/reports.md: a regression publishes the diagnosis as a
markdown artifact (key `regression-<suite>`), tags the MLflow execution `regression=true`, and
the flow run ends Failed, so the Prefect UI shows the night in red with the table one click away.
"""

from __future__ import annotations

import math
from typing import Any

from tasks.report.build import REPORT_HTML, Report, report_execution, without_images
from tasks.report.compare_markdown import diagnostic_rows
from tasks.report.compare_store import NightlyComparison, compare_with_previous_nightly
from tasks.tracking import read
from tasks.tracking.store import run_url


def artifact_key(kind: str, suite: str) -> str:
    """Prefect keys allow lowercase letters, digits and dashes only."""
    cleaned = "".join(ch if ch.isalnum() else "-" for ch in f"{kind}-{suite}".lower())
    return "-".join(part for part in cleaned.split("-") if part)


def _records(frame: Any) -> list[dict[str, Any]]:
    """JSON-safe rows: Prefect stores the table as JSON, which has no NaN."""
    rows = []
    for record in frame.to_dict("records"):
        rows.append(
            {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
        )
    return rows


def prefect_markdown(report: Report, execution_url: str = "") -> str:
    """The report for Prefect: its figures' relative links would not load there (Prefect serves no
    files), so they are left out and the MLflow run's report.html, which embeds them, is linked."""
    markdown = without_images(report.markdown)
    if execution_url:
        header = (f"Figures: `report/{REPORT_HTML}` in the artifacts of the "
                  f"[MLflow execution]({execution_url}) (all plots embedded).")
        markdown = f"{header}\n\n{markdown}"
    return markdown


def publish_report(report: Report, suite: str, execution_url: str = "") -> None:
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    create_markdown_artifact(
        key=artifact_key("report", suite),
        markdown=prefect_markdown(report, execution_url),
        description=f"Report of {suite}; files in {report.folder} and on the MLflow run",
    )
    create_table_artifact(
        key=artifact_key("ranking", suite),
        table=_records(report.aggregate.round(4)),
        description=f"{suite}: average rank and normalized score across datasets",
    )


def execution_url(execution_id: str) -> str:
    """The execution's parent run in the MLflow UI."""
    return run_url(read.execution(execution_id)["experiment_id"], execution_id)


def regression_run_links(regressions: Any, sides: dict[str, Any], url_of: Any) -> list[str]:
    """Markdown lines linking, for each regressed (dataset, framework) cell, its job runs on each
    side (`sides`: label -> that execution's job runs; `url_of(experiment_id, run_id)` -> URL)."""
    cells = list(dict.fromkeys(zip(regressions["dataset"], regressions["framework"], strict=True)))
    if not cells:
        return []
    lines = ["", "## Job runs of the regressed cells", ""]
    for dataset, framework in cells:
        links = []
        for label, runs in sides.items():
            if runs is None or runs.empty or "run_id" not in runs:
                continue
            mine = runs[(runs["dataset"] == dataset) & (runs["framework"] == framework)]
            for row in mine.sort_values(["fold", "seed"]).itertuples(index=False):
                links.append(f"[{label} f{row.fold} s{row.seed}]({url_of(row.experiment_id, row.run_id)})")
        if links:
            lines.append(f"- **{dataset} / {framework}**: " + ", ".join(links))
    return lines if len(lines) > 3 else []


def _regression_links(nightly: NightlyComparison) -> str:
    if nightly.comparison is None or nightly.comparison.regressions.empty:
        return ""
    sides = {"current": read.job_runs(execution_id=nightly.execution_id)}
    if nightly.baseline_id:
        sides["baseline"] = read.job_runs(execution_id=nightly.baseline_id)
    lines = regression_run_links(nightly.comparison.regressions, sides, run_url)
    return "\n".join(lines) + "\n" if lines else ""


def publish_comparison(nightly: NightlyComparison, suite: str) -> None:
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    link = f"[MLflow execution]({execution_url(nightly.execution_id)})\n\n" if nightly.execution_id else ""
    create_markdown_artifact(
        key=artifact_key("regression", suite),
        markdown=link + nightly.markdown + _regression_links(nightly),
        description="Changes against the previous successful execution",
    )
    if nightly.comparison is not None:
        rows = diagnostic_rows(nightly.comparison)
        if not rows.empty:
            create_table_artifact(
                key=artifact_key("regression-table", suite),
                table=_records(rows),
                description="metric | current | baseline | change | main factor",
            )


def regression_state(nightly: NightlyComparison) -> Any | None:
    """A Failed state for the flow to return when the night regressed, else None."""
    if not nightly.regressed:
        return None
    from prefect.states import Failed

    count = len(nightly.comparison.regressions) if nightly.comparison is not None else 0
    return Failed(
        message=f"{count} regression(s) against execution {nightly.baseline_id}; "
        f"see the regression artifact and MLflow tag regression=true on {nightly.execution_id}"
    )


def after_execution(execution_id: str, suite: str, *, compare_previous: bool) -> Any | None:
    """The flow's closing step: report (folder, MLflow artifacts, Prefect artifacts), then for a
    nightly the regression diagnosis. Returns the Failed state the flow should end in, or None."""
    publish_report(report_execution(execution_id), suite, execution_url(execution_id))
    if not compare_previous:
        return None
    nightly = compare_with_previous_nightly(execution_id)
    publish_comparison(nightly, suite)
    return regression_state(nightly)
