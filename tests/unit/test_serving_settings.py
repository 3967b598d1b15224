"""The suite's `serving:` block: defaults that fit, a plan too long for its time_s refused in one sentence."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tasks.evaluations.registry import all_evaluations, get_evaluation
from tasks.evaluations.serving import ServingSettings, step_metric
from tasks.specs import load_suite
from tasks.vocabulary import name_pattern


def test_the_defaults_fit_their_own_time_limit() -> None:
    settings = ServingSettings(enabled=True)
    assert settings.planned_s() <= settings.time_s
    assert settings.slo_ms == 100 and settings.concurrency == [1, 4, 16, 64, 256]
    assert settings.open_loop == "loadgen" and settings.loadgen_limits() == (2.0, 500, 30.0)
    assert ServingSettings(concurrency=[16, 1, 4, 4]).concurrency == [1, 4, 16]


def test_a_plan_longer_than_time_s_is_refused() -> None:
    with pytest.raises(ValidationError, match="time_s 60 is too short for the plan"):
        ServingSettings(time_s=60)
    with pytest.raises(ValidationError, match="between 1 and 1000 users"):
        ServingSettings(concurrency=[0, 4])


def test_the_mlperf_preset_takes_mlperfs_minimums_and_fields_override_a_preset() -> None:
    mlperf = ServingSettings(preset="mlperf", time_s=20000)
    assert mlperf.loadgen_limits() == (600.0, 270_336, 1800.0)
    with pytest.raises(ValidationError, match="time_s 600 is too short for the plan"):
        ServingSettings(preset="mlperf")
    assert ServingSettings(preset="mlperf", min_duration_s=5, max_duration_s=10,
                           min_query_count=50).loadgen_limits() == (5, 50, 10)
    # a locust open loop does not care for LoadGen's limits
    assert ServingSettings(open_loop="locust", preset="mlperf").planned_s() <= 600


def test_settings_loadgen_would_refuse_are_one_sentence_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="max_duration_s 1 is below min_duration_s 2"):
        ServingSettings(max_duration_s=1)
    with pytest.raises(ValidationError, match="latency_percentile"):
        ServingSettings(latency_percentile=1.5)
    with pytest.raises(ValidationError, match="each target_qps must be a rate above 0"):
        ServingSettings(target_qps=[5, 0])
    with pytest.raises(ValidationError, match="min_query_count"):
        ServingSettings(min_query_count=0)
    with pytest.raises(ValidationError, match="open_loop"):
        ServingSettings(open_loop="wrk")
    assert ServingSettings(target_qps=[20, 5, 5]).target_qps == [5, 20]


def test_its_metric_names_are_in_the_vocabulary() -> None:
    import re

    names = get_evaluation("serving").metrics
    for figure in ("p50_ms", "p95_ms", "p99_ms", "rps", "error_rate"):
        assert any(re.match(name_pattern(name), step_metric(16, figure)) for name in names)
    assert {"serve_max_qps_at_slo", "serve_startup_s", "serve_loadgen_valid_qps",
            "serve_error_rate"} <= set(names)
    assert any(re.match(name_pattern(name), step_metric(256, "server_cpu_percent")) for name in names)


def test_the_serving_suite_turns_it_on_and_smoke_keeps_it_off() -> None:
    assert load_suite("serving", all_evaluations()).evaluation_blocks()["serving"]["slo_ms"] == 100
    assert "serving" not in load_suite("smoke", all_evaluations()).evaluation_blocks()


def test_an_unknown_stack_is_one_sentence_listing_those_installed(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOML_EVAL_VENVS_DIR", str(tmp_path))  # no stack environment installed (mlserver)
    with pytest.raises(ValidationError, match="serving.stacks names 'triton', which is not a serving stack; "
                                              "the stacks installed here are mlflow, onnxruntime"):
        ServingSettings(stacks=["mlflow", "triton"])
    stacks = ServingSettings(stacks=["onnxruntime", "mlflow", "mlflow"], time_s=2000).stacks
    assert stacks == ["onnxruntime", "mlflow"]
    with pytest.raises(ValidationError, match="2 stack\\(s\\) x"):  # each stack runs the whole plan
        ServingSettings(stacks=["mlflow", "onnxruntime"])


def test_a_batching_window_longer_than_the_latency_bound_is_one_sentence_naming_both() -> None:
    with pytest.raises(ValidationError,
                       match="serving.max_batch_time_ms 150 is larger than serving.slo_ms 100"):
        ServingSettings(max_batch_size=8, max_batch_time_ms=150)
    assert ServingSettings(max_batch_size=8, max_batch_time_ms=20).max_batch_size == 8
    assert ServingSettings(max_batch_time_ms=150).max_batch_size == 1  # no batching: no window to hold
    with pytest.raises(ValidationError, match="max_batch_size"):
        ServingSettings(max_batch_size=0)
