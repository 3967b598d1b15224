"""Executions in the MLflow store compared: a reference (`SUITE@latest`) resolved to an execution,
the previous successful nightly found, and a nightly tagged `regression=true|false` with its baseline."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from tasks.errors import UserError
from tasks.report.compare import Comparison, Thresholds, compare
from tasks.report.compare_markdown import markdown
from tasks.tracking import read

REGRESSION_TAG = "regression"
BASELINE_TAG = "regression_baseline"


def resolve_execution(reference: str, *, uri: str | None = None) -> str:
    """An execution id from an id, `SUITE@latest`, `SUITE@previous` or `SUITE@N` (N = 0 newest)."""
    if "@" not in reference:
        read.execution(reference, uri=uri)  # raises a UserError for an unknown id
        return reference
    suite, _, which = reference.partition("@")
    offsets = {"latest": 0, "previous": 1}
    if which not in offsets and not which.isdigit():
        raise UserError(f"'{reference}': use an execution id, SUITE@latest, SUITE@previous or SUITE@N.")
    offset = offsets.get(which, int(which) if which.isdigit() else 0)
    found = read.executions(suite=suite, uri=uri)
    if len(found) <= offset:
        raise UserError(f"'{reference}': suite '{suite}' has {len(found)} execution(s) in the MLflow store.")
    return str(found["execution_id"].iloc[offset])


def previous_successful(
    execution_id: str, *, uri: str | None = None, same_tags: tuple[str, ...] = ("trigger", "team")
) -> str | None:
    """The newest earlier execution of the same suite that finished and was not itself a regression.

    Executions must also agree on `same_tags` (a nightly compares with nightlies of the same team).
    A regressed night is skipped so the alarm stays on until the change is fixed, not just once.
    """
    current = read.execution(execution_id, uri=uri)
    found = read.executions(suite=current.get("suite") or None, uri=uri)
    if found.empty:
        return None
    mask = (found["execution_id"] != execution_id) & (found["start_time"] < current["start_time"])
    mask &= found.get("execution_state", pd.Series("finished", index=found.index)).fillna("") == "finished"
    mask &= found["run_status"] == "FINISHED"
    if "regression" in found:
        mask &= found["regression"].fillna("") != "true"
    for tag in same_tags:
        column = found[tag].fillna("") if tag in found else pd.Series("", index=found.index)
        mask &= column == (current.get(tag) or "")
    earlier = found[mask]
    return str(earlier["execution_id"].iloc[0]) if len(earlier) else None


def compare_executions(
    base_id: str,
    cand_id: str,
    *,
    also: Iterable[str] = (),
    uri: str | None = None,
    thresholds: Thresholds | None = None,
) -> Comparison:
    """compare() on two executions in the store, with their job runs' series; `also` fills the pool."""
    base_runs = read.job_runs(execution_id=base_id, uri=uri)
    cand_runs = read.job_runs(execution_id=cand_id, uri=uri)
    pool = [read.job_runs(execution_id=other, uri=uri) for other in also]
    run_ids = [
        str(run_id)
        for frame in (base_runs, cand_runs)
        if "run_id" in frame
        for run_id, status in zip(frame["run_id"], frame.get("status", ""), strict=False)
        if status == "ok"
    ]
    return compare(
        base_runs,
        cand_runs,
        pool=pd.concat(pool, ignore_index=True) if pool else None,
        thresholds=thresholds,
        series=read.job_series(run_ids, uri=uri),
    )


@dataclass
class NightlyComparison:
    execution_id: str
    baseline_id: str | None  # None: no earlier successful nightly to compare with
    comparison: Comparison | None
    markdown: str

    @property
    def regressed(self) -> bool:
        return bool(self.comparison is not None and self.comparison.regressed)


def compare_with_previous_nightly(
    execution_id: str, *, uri: str | None = None, thresholds: Thresholds | None = None
) -> NightlyComparison:
    """Compare an execution with the previous successful one; tag it `regression=true|false`.

    The flow publishes `markdown` as an artifact and, when `regressed`, ends in a Failed state.
    """
    baseline_id = previous_successful(execution_id, uri=uri)
    if baseline_id is None:
        text = f"# Regression diagnosis\n\nNo earlier successful execution to compare {execution_id} with.\n"
        return NightlyComparison(execution_id, None, None, text)
    result = compare_executions(baseline_id, execution_id, uri=uri, thresholds=thresholds)
    read.set_tag(execution_id, REGRESSION_TAG, "true" if result.regressed else "false", uri=uri)
    read.set_tag(execution_id, BASELINE_TAG, baseline_id, uri=uri)
    text = markdown(result, baseline_id, execution_id)
    return NightlyComparison(execution_id, baseline_id, result, text)
