"""`automl-eval suites import-amlb`: AMLB's benchmark and constraint formats in, a suite and budget out."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import psutil
import pytest
import yaml

from flows.cli_suites import unavailable_adapters
from tasks.data.amlb_import import import_benchmark
from tasks.data.folds import split
from tasks.errors import UserError
from tasks.specs import load_budget, load_dataset_spec, load_suite

REPO_ROOT = Path(__file__).resolve().parents[2]

# As AMLB's resources/benchmarks/test.yaml and resources/constraints.yaml write them.
BENCHMARK = """---
- name: __defaults__
  folds: 2
  cores: 2
  max_runtime_seconds: 60

- name: kc2
  openml_task_id: 3913
  description: "binary test dataset"

- name: iris
  openml_task_id: 59
  description: "multiclass test dataset"

- name: penguins_local
  dataset:
    train: data/penguins_train.csv
    test: data/penguins_test.csv
    target: species
  folds: 1

- name: disabled
  enabled: false
  openml_task_id: 1
"""
CONSTRAINTS = """---

test:
  folds: 2
  max_runtime_seconds: 600
  cores: 1

1h8c:
  folds: 10
  max_runtime_seconds: 3600
  cores: 8
  min_vol_size_mb: 16384
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "project"
    (home / "specs" / "datasets").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "specs" / "budgets.yaml", home / "specs" / "budgets.yaml")
    (home / "pyproject.toml").touch()
    from palmerpenguins import load_penguins

    penguins = load_penguins()[["island", "bill_length_mm", "flipper_length_mm", "species"]].dropna()
    (home / "bench" / "data").mkdir(parents=True)
    penguins.iloc[:200].to_csv(home / "bench" / "data" / "penguins_train.csv", index=False)
    penguins.iloc[200:].to_csv(home / "bench" / "data" / "penguins_test.csv", index=False)
    (home / "bench" / "small.yaml").write_text(BENCHMARK)
    (home / "bench" / "constraints.yaml").write_text(CONSTRAINTS)
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(home))
    return home


def test_an_amlb_benchmark_and_constraint_import_into_a_suite_and_budget(home: Path) -> None:
    result = import_benchmark(
        home / "bench" / "small.yaml",
        constraint=home / "bench" / "constraints.yaml",
        constraint_name="1h8c",
        frameworks=["AutoGluon", "TunedRandomForest", "autosklearn"],
        allow_more_cores=True,  # 8 cores: more than a small CI host has (tested below)
    )
    suite_text = (home / "specs" / "suites" / "small.yaml").read_text()
    suite = yaml.safe_load(suite_text)
    assert suite["datasets"] == ["openml/t/3913", "openml/t/59", "amlb_small_penguins_local"]
    assert suite["frameworks"] == ["autogluon", "rf"] and suite["folds"] == 10
    assert load_budget("amlb_1h8c").model_dump() == {
        "name": "amlb_1h8c",
        "time_s": 3600,
        "cores": 8,
        "memory_mb": result_memory(result),
        "gpus": 0,
    }
    notes = " | ".join(result.notes)
    assert "not available here: autosklearn" in notes and "TunedRandomForest runs as rf" in notes
    assert "min_vol_size_mb is ignored" in notes
    assert "task penguins_local: its own folds are not kept" in notes
    assert "task penguins_local is one train/test pair, so fold 0 only: its jobs for folds 1..9 fail" in notes

    # The local train/test pair is a card whose fold 0 tests exactly the test file's rows.
    spec = load_dataset_spec("amlb_small_penguins_local")
    assert spec.problem_type == "multiclass" and spec.metric == "logloss"
    train, test = split(spec, 0)
    assert (len(train), len(test)) == (200, len(pd.read_csv(home / "bench" / "data" / "penguins_test.csv")))
    assert train.max() < test.min()


def result_memory(result: object) -> int:
    """What `max_mem_size_mb: -1` must become (AMLB: the host's memory), computed here from the host,
    not read back from the import's own note; the note must still say it."""
    host_mb = int(psutil.virtual_memory().total // 2**20)
    assert any(note.startswith("max_mem_size_mb") and f"{host_mb} MB" in note
               for note in result.notes)  # type: ignore[attr-defined]
    return host_mb


def test_the_imported_suite_loads_once_its_cards_exist(home: Path) -> None:
    import_benchmark(
        home / "bench" / "small.yaml",
        constraint=home / "bench" / "constraints.yaml",
        constraint_name="test",
        frameworks=["constantpredictor"],
        name="amlb_test_suite",
    )
    with pytest.raises(UserError, match="OpenML task 3913 has no card yet; run `automl-eval datasets build`"):
        load_suite("amlb_test_suite", {})
    local = "amlb_amlb_test_suite_penguins_local"
    for task_id in (3913, 59):  # what `datasets build` writes for them (tests/unit/test_openml_tasks.py)
        card = yaml.safe_load((home / "specs" / "datasets" / f"{local}.yaml").read_text())
        card["name"] = f"openml_{task_id}"
        (home / "specs" / "datasets" / f"openml_{task_id}.yaml").write_text(yaml.safe_dump(card))
    suite = load_suite("amlb_test_suite", {})
    assert suite.datasets == ["openml_3913", "openml_59", local]
    assert load_budget(suite.budget).cores == 1 and suite.frameworks[0].name == "constant"


@pytest.mark.parametrize(
    ("benchmark", "message"),
    [
        (
            "- name: kc2\n  openml_task_id: 3913\n  max_runtime: 60\n",
            r"small\.yaml: task kc2 has unknown key 'max_runtime'; AMLB's task keys are",
        ),
        (
            "- name: kc2\n  dataset:\n    train: '{user}/data/train.csv'\n"
            "    test: data/t.csv\n    target: y\n",
            r"task kc2: field 'dataset.train' uses an AMLB placeholder",
        ),
        (
            "- name: kc2\n  dataset:\n    train: ../../outside.csv\n    test: data/t.csv\n    target: y\n",
            r"field 'dataset.train': .*outside\.csv is outside the project",
        ),
        ("- name: kc2\n  openml_dataset_id: 1067\n", r"names OpenML dataset 1067, which has no fixed split"),
    ],
)
def test_bad_amlb_files_are_one_sentence_and_write_nothing(home: Path, benchmark: str, message: str) -> None:
    (home / "bench" / "small.yaml").write_text(benchmark)
    budgets = (home / "specs" / "budgets.yaml").read_text()
    with pytest.raises(UserError, match=message):
        import_benchmark(home / "bench" / "small.yaml", frameworks=["constantpredictor"])
    assert not (home / "specs" / "suites").exists()
    assert (home / "specs" / "budgets.yaml").read_text() == budgets


def test_the_command_names_the_constraint_to_choose_and_exits_2(home: Path) -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "flows.cli",
            "suites",
            "import-amlb",
            str(home / "bench" / "small.yaml"),
            "--constraint",
            str(home / "bench" / "constraints.yaml"),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "AUTOML_EVAL_HOME": str(home), "COLUMNS": "200"},
    )
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert (
        "holds 2 constraints (test, 1h8c); choose one with --constraint-name"
        in completed.stdout + completed.stderr
    )
    assert not (home / "specs" / "suites").exists()


def _import_cli(home: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", "suites", "import-amlb", str(home / "bench" / "small.yaml"),
         "--constraint", str(home / "bench" / "big.yaml"), "--frameworks", "constantpredictor", *options],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "AUTOML_EVAL_HOME": str(home), "COLUMNS": "300"},
    )


def test_a_constraint_with_more_cores_than_the_host_is_refused_unless_allowed(home: Path) -> None:
    host = len(os.sched_getaffinity(0))
    (home / "bench" / "big.yaml").write_text(f"big:\n  max_runtime_seconds: 60\n  cores: {host + 1}\n")
    budgets = (home / "specs" / "budgets.yaml").read_text()
    refused = _import_cli(home)
    output = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode == 2, output
    assert (
        f"big.yaml: constraint 'big': cores {host + 1} is more than this host's {host}, so its times "
        "would not be the constraint's; import it where the cores exist, or pass --allow-more-cores"
    ) in output
    assert not (home / "specs" / "suites").exists()
    assert (home / "specs" / "budgets.yaml").read_text() == budgets

    allowed = _import_cli(home, "--allow-more-cores")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert load_budget("amlb_big").cores == host + 1
    suite_text = (home / "specs" / "suites" / "small.yaml").read_text()
    assert f"this host has {host} (--allow-more-cores)" in suite_text


def test_gbdt_names_map_to_their_adapters_and_one_that_cannot_run_here_is_left_out(home: Path) -> None:
    no_java = {"h2o": "H2O needs Java 17 or newer; install it or set JAVA_HOME."}
    names = ["lightgbm", "H2OAutoML", "catboost", "xgboost"]
    result = import_benchmark(home / "bench" / "small.yaml", constraint=home / "bench" / "constraints.yaml",
                              constraint_name="test", frameworks=names, unavailable=no_java)
    adapters = ["lightgbm", "catboost", "xgboost"]
    assert result.frameworks == adapters
    assert yaml.safe_load(result.suite_path.read_text())["frameworks"] == adapters
    assert ("H2OAutoML is left out: it runs here as 'h2o', which cannot run on this machine (H2O needs "
            "Java 17 or newer; install it or set JAVA_HOME)") in result.notes
    with pytest.raises(UserError) as refused:
        import_benchmark(home / "bench" / "small.yaml", frameworks=["H2OAutoML"], unavailable=no_java)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("--framework: none of H2OAutoML is available here; "
                                                      "H2OAutoML is left out: it runs here as 'h2o'")


def test_the_command_asks_the_registry_which_adapters_cannot_run_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")  # no Java: H2O cannot start its JVM
    monkeypatch.delenv("JAVA_HOME", raising=False)
    reasons = unavailable_adapters()
    assert reasons["h2o"].startswith("H2O needs Java") and "lightgbm" not in reasons and "rf" not in reasons


def test_amlb_automl_names_map_to_their_framework_environments(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TPOT, mljarsupervised and lightautoml run here in environments of their own: the suite names the
    environment, and one not installed is left out with its install command."""
    names = ["TPOT", "mljarsupervised", "lightautoml", "flaml"]
    result = import_benchmark(home / "bench" / "small.yaml", constraint=home / "bench" / "constraints.yaml",
                              constraint_name="test", frameworks=names, unavailable={})
    environments = ["tpot@1.1.0", "mljar@1.3.2", "lightautoml@0.4.2", "flaml"]
    assert result.frameworks == environments
    assert yaml.safe_load(result.suite_path.read_text())["frameworks"] == environments

    monkeypatch.setenv("AUTOML_EVAL_VENVS_DIR", str(tmp_path / "no-venvs"))
    reasons = unavailable_adapters()
    assert "tpot@1.1.0" in reasons and "`automl-eval frameworks install tpot@1.1.0`" in reasons["tpot@1.1.0"]
    left = import_benchmark(home / "bench" / "small.yaml", constraint=home / "bench" / "constraints.yaml",
                            constraint_name="test", frameworks=["TPOT", "flaml"], unavailable=reasons,
                            name="small_here")
    assert left.frameworks == ["flaml"]
    assert any(note.startswith("TPOT is left out: it runs here as 'tpot@1.1.0'") for note in left.notes)


def test_amlb_names_are_found_whatever_their_case_and_tabpfn_runs_in_its_environment(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As AMLB's `runbenchmark.py randomforest`: the name is found whatever its case; TabPFN maps to its
    environment, left out with the install command where that is not installed; an unknown name is one
    note naming the names this project runs."""
    monkeypatch.setenv("AUTOML_EVAL_VENVS_DIR", str(tmp_path / "no-venvs"))
    result = import_benchmark(home / "bench" / "small.yaml", constraint=home / "bench" / "constraints.yaml",
                              constraint_name="test", frameworks=["randomforest", "TABPFN", "gama"],
                              unavailable=unavailable_adapters())
    assert result.frameworks == ["rf"]
    assert any(note.startswith("TabPFN is left out: it runs here as 'tabpfn@2.2.1'")
               and "automl-eval frameworks install tabpfn@2.2.1" in note for note in result.notes)
    (unknown,) = [note for note in result.notes if note.startswith("not available here")]
    assert unknown.startswith("not available here: gama (AMLB frameworks this project runs: AutoGluon, ")
    assert "TabPFN" in unknown
