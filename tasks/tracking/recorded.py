"""What the store already holds of an execution's jobs: what a resume or a retry skips, and the
results a leaderboard reads wherever the jobs ran."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tasks.evaluations.vocabulary import evaluation_metrics, evaluation_tags
from tasks.results import JobResult
from tasks.tracking import store
from tasks.vocabulary import (
    COST_METRICS,
    FINISHED_STATUSES,
    RESULT,
    RETRYABLE_STATUSES,
    SCORE_METRICS,
    evaluation_wall_metric,
    name_pattern,
)


@dataclass(frozen=True)
class RecordedJob:
    run_id: str
    status: str


def _job_runs(execution_id: str) -> Iterator[Any]:
    """Every job run of an execution, page by page (a job run is one with a job_key tag)."""
    client = store.client()
    experiment_id = client.get_run(execution_id).info.experiment_id
    page_token = None
    while True:
        page = client.search_runs([experiment_id], filter_string=f"tags.execution_id = '{execution_id}' "
                                  "and tags.job_key LIKE '%'", max_results=1000, page_token=page_token)
        yield from page
        page_token = page.token
        if not page_token:
            return


def recorded_jobs(execution_id: str) -> dict[str, RecordedJob]:
    """job_key -> its run and status, for every job run of an execution."""
    recorded: dict[str, RecordedJob] = {}
    for run in _job_runs(execution_id):
        tags = run.data.tags
        recorded[tags["job_key"]] = RecordedJob(run.info.run_id, tags.get("status", ""))
    return recorded


def recorded_results(execution_id: str) -> dict[str, JobResult]:
    """job_key -> the JobResult its run holds (status, error, scores, costs), from the record alone.

    What a leaderboard needs wherever the jobs ran: in team mode their folders are on the workers.
    """
    scores = {name for names in SCORE_METRICS.values() for name in names} | {RESULT}
    results: dict[str, JobResult] = {}
    for run in _job_runs(execution_id):
        tags, metrics = run.data.tags, run.data.metrics
        results[tags["job_key"]] = JobResult(
            job_key=tags["job_key"],
            status=tags.get("status", ""),
            error=tags.get("error", ""),
            framework_version=tags.get("framework_version", ""),
            scores={k: v for k, v in metrics.items() if k in scores},
            costs={k: v for k, v in metrics.items() if k in COST_METRICS},
            evaluations=_recorded_evaluations(tags, metrics),
        )
    return results


def _recorded_evaluations(tags: dict[str, str], metrics: dict[str, float]) -> dict[str, dict[str, Any]]:
    """The evaluations a job run records: status and reason from its tags, figures from its metrics."""
    evaluations: dict[str, dict[str, Any]] = {}
    for name, names in evaluation_metrics().items():
        status = tags.get(f"evaluation.{name}")
        if status is None:
            continue
        patterns = [re.compile(name_pattern(metric)) for metric in names]
        evaluations[name] = {
            "status": status,
            "reason": tags.get(f"evaluation.{name}.reason", ""),
            "metrics": {k: v for k, v in metrics.items() if any(p.match(k) for p in patterns)},
            "wall_s": metrics.get(evaluation_wall_metric(name), 0.0),
        }
        recorded = {key: tags[key] for key in evaluation_tags().get(name, {}) if key in tags}
        if recorded:
            evaluations[name]["tags"] = recorded
    return evaluations


def finished_job_keys(execution_id: str) -> set[str]:
    return {key for key, job in recorded_jobs(execution_id).items() if job.status in FINISHED_STATUSES}


def retryable_job_keys(execution_id: str) -> set[str]:
    return {key for key, job in recorded_jobs(execution_id).items() if job.status in RETRYABLE_STATUSES}


def runs_of_job(execution_id: str, experiment_id: str, job_key: str) -> list[Any]:
    """Every run recording one job of an execution (more than one only before a retry replaced them)."""
    return list(store.client().search_runs(
        [experiment_id],
        filter_string=f"tags.execution_id = '{execution_id}' and tags.job_key = '{job_key}'",
        max_results=100,
    ))
