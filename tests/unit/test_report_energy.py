"""The report's Energy section: figures with their source, and the reason where none was measured."""

from __future__ import annotations

import pandas as pd

from tasks.report import energy


def _markdown(frame: pd.DataFrame, digits: int = 4) -> str:
    return frame.to_string(index=False)


def test_measured_jobs_are_averaged_per_source_and_the_rest_say_why() -> None:
    jobs = pd.DataFrame([
        {"dataset": "d", "framework": "hgb", "status": "ok", "energy_source": "nvml_counter",
         "energy_fit_j": 10.0, "energy_predict_per_1k_j": 0.5},
        {"dataset": "d", "framework": "hgb", "status": "ok", "energy_source": "nvml_counter",
         "energy_fit_j": 20.0, "energy_predict_per_1k_j": 1.5},
        {"dataset": "d", "framework": "constant", "status": "ok", "energy_source": "none",
         "energy_fit_j": None, "energy_reason": "no RAPL powercap domains under /sys/class/powercap"},
    ])
    summary = energy.table(jobs)
    assert summary.to_dict("records") == [{"dataset": "d", "framework": "hgb", "source": "nvml_counter",
                                           "energy_fit_j": 15.0, "energy_predict_per_1k_j": 1.0, "jobs": 2}]
    lines = "\n".join(energy.section(jobs, None, _markdown))
    assert "## Energy" in lines and "nvml_counter" in lines
    assert "Not measured for the other jobs (no figure is estimated): no RAPL powercap domains" in lines


def test_a_machine_without_a_source_says_so_and_shows_no_figure() -> None:
    jobs = pd.DataFrame([{"dataset": "d", "framework": "hgb", "status": "ok", "energy_source": "none",
                          "energy_reason": "no RAPL powercap domains; the job has no GPU"}])
    lines = energy.section(jobs, None, _markdown)
    assert energy.table(jobs).empty
    assert lines[0] == "## Energy"
    assert any(line.startswith("Not measured (no figure is estimated): no RAPL") for line in lines)
    assert energy.section(pd.DataFrame([{"dataset": "d", "framework": "hgb", "status": "ok"}]), None,
                          _markdown) == []  # runs from before energy was recorded: no section
