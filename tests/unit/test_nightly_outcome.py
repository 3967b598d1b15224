"""A nightly whose jobs ran and none ended ok ends Failed, with the counts and the way out; one with a
job ok, or none run, is left to the regression comparison."""

from __future__ import annotations

from flows.deployments import nothing_succeeded


def test_a_night_without_one_ok_job_fails_with_its_counts() -> None:
    state = nothing_succeeded({"suite": "nightly", "counts": {"failed": 3, "timeout": 1}})
    assert state is not None and state.is_failed()
    assert "no job of nightly ended ok (3 failed, 1 timeout)" in str(state.message)
    assert "automl-eval run nightly --retry-failed" in str(state.message)


def test_a_night_with_one_ok_job_or_no_job_run_is_not_failed_here() -> None:
    assert nothing_succeeded({"suite": "nightly", "counts": {"failed": 3, "ok": 1}}) is None
    assert nothing_succeeded({"suite": "nightly", "counts": {}}) is None
