"""The report's Anytime section: t95/t99 per framework, and frameworks without a curve named."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tasks.report import anytime


def _markdown(frame: pd.DataFrame, digits: int = 4) -> str:
    return frame.to_string(index=False)


def test_t95_and_t99_are_averaged_and_frameworks_without_a_curve_are_listed() -> None:
    jobs = pd.DataFrame([
        {"dataset": "d", "framework": "autogluon", "status": "ok", "anytime_t95_s": 2.0, "anytime_t99_s": 6.0,
         "fit_s": 10.0},
        {"dataset": "d", "framework": "autogluon", "status": "ok", "anytime_t95_s": 4.0, "anytime_t99_s": 8.0,
         "fit_s": 10.0},
        {"dataset": "d", "framework": "hgb", "status": "ok", "anytime_t95_s": None, "fit_s": 1.0,
         "anytime_reason": "the framework exposes no record of its search's progress"},
        {"dataset": "d", "framework": "flaml", "status": "failed", "anytime_t95_s": None, "fit_s": None},
    ])
    summary = anytime.table(jobs)
    row = summary.to_dict("records")[0]
    assert len(summary) == 1 and row["framework"] == "autogluon" and row["jobs"] == 2
    assert row["anytime_t95_s"] == 3.0 and row["anytime_t99_s"] == 7.0
    assert row["t95_share_of_fit"] == pytest.approx(0.3)
    lines = "\n".join(anytime.section(jobs, _markdown))
    assert "## Anytime (score over time)" in lines
    assert ("No curve (the framework exposes no record of its search's progress here, or says why): "
            "hgb (the framework exposes no record of its search's progress).") in lines


def test_no_section_without_any_curve_or_reason() -> None:
    jobs = pd.DataFrame([{"dataset": "d", "framework": "hgb", "status": "ok", "fit_s": 1.0}])
    assert anytime.section(jobs, _markdown) == []


def test_frameworks_without_a_curve_are_listed_with_their_reason_even_when_none_has_one() -> None:
    jobs = pd.DataFrame([{"dataset": "d", "framework": "hgb", "status": "ok", "fit_s": 1.0,
                          "anytime_reason": "the framework exposes no record of its search's progress"},
                         {"dataset": "d", "framework": "rf", "status": "ok", "fit_s": 1.0,
                          "anytime_reason": ""}])
    lines = "\n".join(anytime.section(jobs, _markdown))
    assert "## Anytime (score over time)" in lines and "Fit seconds until" not in lines
    assert "hgb (the framework exposes no record of its search's progress), rf." in lines


def test_a_figure_per_dataset_draws_each_job_s_curve(tmp_path: Path) -> None:
    curves = pd.DataFrame([
        {"dataset": "d/1", "framework": "flaml", "fold": 0, "seed": 0, "elapsed_s": 1.0, "result": 0.7},
        {"dataset": "d/1", "framework": "flaml", "fold": 0, "seed": 0, "elapsed_s": 4.0, "result": 0.9},
        {"dataset": "d/1", "framework": "autogluon", "fold": 1, "seed": 0, "elapsed_s": 2.0, "result": 0.8},
        {"dataset": "e", "framework": "cnn", "fold": 0, "seed": 0, "elapsed_s": 3.0, "result": 0.5},
    ])
    drawn = anytime.figures(curves, tmp_path)
    assert [path.name for path in drawn] == ["anytime_d_1.png", "anytime_e.png"]
    assert all(path.stat().st_size > 1000 for path in drawn)
    assert anytime.figures(None, tmp_path) == [] and anytime.figures(pd.DataFrame(), tmp_path) == []
