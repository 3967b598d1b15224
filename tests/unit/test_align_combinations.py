"""Modality combinations: names, restricted features, suite expansion, and the report's table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from tasks.errors import UserError
from tasks.evaluations.registry import all_evaluations
from tasks.multimodal.combinations import all_combinations, split_name
from tasks.report.modality_table import modality_markdown, modality_table
from tasks.specs import load_dataset_spec, load_suite

STREAMS = {"acc": ["x", "y"], "gyro": ["x"], "mic": ["rms"]}


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path))
    (tmp_path / "specs" / "datasets").mkdir(parents=True)
    (tmp_path / "specs" / "suites").mkdir()
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "specs" / "budgets.yaml").write_text("test: {time_s: 5, cores: 1, memory_mb: 1024}\n")
    columns = {"window_start_s": "id"}
    columns.update({f"{s}__{c}__mean": "numeric" for s, cs in STREAMS.items() for c in cs})
    card = {
        "name": "rig",
        "source": {"package": "none", "call": "none"},
        "modality": "multimodal",
        "file": "rig.csv",
        "target": "label",
        "problem_type": "binary",
        "columns": columns,
        "streams": {
            s: {"file": f"rig/{s}.csv", "modality": s, "clock": {"rate_hz": 10}, "columns": cs}
            for s, cs in STREAMS.items()
        },
        "labels": {"file": "rig/labels.csv"},
        "alignment": {"reference": "acc", "window_s": 1.0, "features": ["mean"]},
    }
    (tmp_path / "specs" / "datasets" / "rig.yaml").write_text(yaml.safe_dump(card))
    return tmp_path


def test_a_combination_offers_only_its_streams_features(home: Path) -> None:
    spec = load_dataset_spec("rig[mic+acc]")
    assert spec.name == "rig[acc+mic]"  # card order, whatever order the name used
    assert spec.features == ["acc__x__mean", "acc__y__mean", "mic__rms__mean"]
    assert spec.columns["gyro__x__mean"] == "ignore"  # still declared: same file, same data gate
    assert spec.file == load_dataset_spec("rig").file
    assert spec.modality_combination == "acc+mic"


def test_unknown_streams_are_one_sentence(home: Path) -> None:
    with pytest.raises(UserError, match=r"rig\.yaml: 'rig\[acc\+lidar\]' names streams \['lidar'\]"):
        load_dataset_spec("rig[acc+lidar]")


def test_a_suite_asking_for_all_combinations_gets_each_alone_pairs_and_all(home: Path) -> None:
    suite = {"datasets": ["rig"], "frameworks": ["constant"], "modality_combinations": "all"}
    (home / "specs" / "suites" / "mm.yaml").write_text(yaml.safe_dump(suite))
    assert load_suite("mm", all_evaluations()).datasets == [
        "rig[acc]",
        "rig[gyro]",
        "rig[mic]",
        "rig[acc+gyro]",
        "rig[acc+mic]",
        "rig[gyro+mic]",
        "rig[acc+gyro+mic]",
    ]
    assert all_combinations(load_dataset_spec("rig"))[-1] == "rig[acc+gyro+mic]"
    assert split_name("rig[acc+gyro]") == ("rig", ["acc", "gyro"]) and split_name("rig") == ("rig", None)
    suite["modality_combinations"] = "some"
    (home / "specs" / "suites" / "mm.yaml").write_text(yaml.safe_dump(suite))
    with pytest.raises(UserError, match="modality_combinations' must be 'all' or 'none'"):
        load_suite("mm", all_evaluations())


def test_the_modality_table_has_one_row_per_combination_and_its_pareto_front() -> None:
    jobs = pd.DataFrame(
        [
            {"dataset": "rig[acc]", "framework": "rf", "ok": True, "result": 0.80, "latency_p50_ms": 2.0},
            {"dataset": "rig[acc]", "framework": "rf", "ok": True, "result": 0.90, "latency_p50_ms": 4.0},
            {"dataset": "rig[gyro]", "framework": "rf", "ok": True, "result": 0.70, "latency_p50_ms": 5.0},
            {
                "dataset": "rig[acc+gyro]",
                "framework": "rf",
                "ok": True,
                "result": 0.95,
                "latency_p50_ms": 6.0,
            },
            {
                "dataset": "rig[acc+gyro]",
                "framework": "rf",
                "ok": False,
                "result": None,
                "latency_p50_ms": None,
            },
            {"dataset": "other", "framework": "rf", "ok": True, "result": 0.5, "latency_p50_ms": 1.0},
        ]
    )
    table = modality_table(jobs).set_index("combination")

    assert list(table.index) == ["acc", "gyro", "acc+gyro"]
    assert table.loc["acc", "result"] == pytest.approx(0.85) and table.loc["acc", "latency_p50_ms"] == 3.0
    assert table.loc["acc+gyro", "jobs"] == 1  # the failed job has no score to average
    # gyro is slower and worse than acc: off the front; acc (fastest) and acc+gyro (best) are on it.
    assert table["on_front"].to_dict() == {"acc": True, "gyro": False, "acc+gyro": True}
    assert "| rig | acc+gyro | rf |" in modality_markdown(modality_table(jobs))
