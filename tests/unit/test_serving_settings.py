"""The suite's `serving:` block: defaults that fit, a plan too long for its time_s refused in one sentence."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tasks.evaluations.registry import all_evaluations, get_evaluation
from tasks.evaluations.serving import ServingSettings, step_metric
from tasks.specs import load_suite
from tasks.vocabulary import name_pattern


def test_the_defaults_fit_their_own_time_limit() -> None:
    settings = ServingSettings(enabled=True)
    assert settings.planned_s() <= settings.time_s
    assert settings.slo_ms == 100 and settings.concurrency == [1, 4, 16, 64]
    assert ServingSettings(concurrency=[16, 1, 4, 4]).concurrency == [1, 4, 16]


def test_a_plan_longer_than_time_s_is_refused() -> None:
    with pytest.raises(ValidationError, match="time_s 60 is too short for the plan"):
        ServingSettings(time_s=60)
    with pytest.raises(ValidationError, match="between 1 and 1000 users"):
        ServingSettings(concurrency=[0, 4])


def test_its_metric_names_are_in_the_vocabulary() -> None:
    import re

    names = get_evaluation("serving").metrics
    for figure in ("p50_ms", "p95_ms", "p99_ms", "rps", "error_rate"):
        assert any(re.match(name_pattern(name), step_metric(16, figure)) for name in names)
    assert {"serve_max_qps_at_slo", "serve_startup_s"} <= set(names)


def test_the_serving_suite_turns_it_on_and_smoke_keeps_it_off() -> None:
    assert load_suite("serving", all_evaluations()).evaluation_blocks()["serving"]["slo_ms"] == 100
    assert "serving" not in load_suite("smoke", all_evaluations()).evaluation_blocks()
