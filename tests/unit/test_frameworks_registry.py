"""The adapter registry and the resources it relies on: discovery, errors, sampling, cores."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks import resources
from tasks.errors import UserError
from tasks.frameworks.registry import EXTRA_ADAPTERS_ENV, all_adapters, get_adapter

SHIPPED = {"constant", "hgb", "rf", "autogluon", "h2o", "flaml", "xgboost", "lightgbm", "catboost", "ebm"}


def test_registry_discovers_the_shipped_adapters_without_importing_frameworks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(EXTRA_ADAPTERS_ENV, raising=False)
    adapters = all_adapters()
    assert set(adapters) >= SHIPPED
    assert "misbehave" not in adapters  # the test adapter only exists when a test adds it
    probe = "import sys, tasks.frameworks.registry as r; r.all_adapters(); " \
            "print(sorted(m for m in ('autogluon', 'h2o', 'flaml', 'lightgbm', 'catboost', 'interpret') " \
            "if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_unknown_framework_lists_the_known_ones() -> None:
    with pytest.raises(UserError, match=r"unknown framework 'autogloun'; known frameworks: .*autogluon"):
        get_adapter("autogloun")


def test_an_unknown_name_suggests_the_closest_in_one_sentence() -> None:
    from tasks.evaluations.registry import get_evaluation

    with pytest.raises(UserError) as caught:
        get_adapter("autogloun")
    message = str(caught.value)
    assert message.endswith("; did you mean 'autogluon'?") and "\n" not in message
    with pytest.raises(UserError, match=r"unknown post-job evaluation 'explian'; known evaluations: "
                                        r"explain, export, .*; did you mean 'explain'\?$"):
        get_evaluation("explian")
    with pytest.raises(UserError, match=r"unknown framework 'zzz'; known frameworks: [a-z0-9_, ]+\.$"):
        get_adapter("zzz")  # nothing close: no guess


def test_the_framework_environments_module_does_not_import_the_registry() -> None:
    # The registry reads the adapters' declared environments; the other way round was an import cycle.
    import ast
    import inspect

    import tasks.frameworks.environments as environments

    tree = ast.parse(inspect.getsource(environments))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "tasks.frameworks.registry" not in imported


def test_variants_are_autogluon_presets() -> None:
    assert get_adapter("autogluon").variant_params("best_quality") == {"presets": "best_quality"}
    with pytest.raises(ValueError, match="presets are"):
        get_adapter("autogluon").variant_params("fastest_ever")
    with pytest.raises(ValueError, match="no variant"):
        get_adapter("hgb").variant_params("deep")


def test_missing_java_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    reason = get_adapter("h2o").unavailable_reason()
    assert reason is not None and reason.startswith("H2O needs Java") and "JAVA_HOME" in reason
    assert "\n" not in reason and reason.endswith(".")


def test_process_tree_sampler_sees_grandchildren() -> None:
    # A child that starts a grandchild holding ~100 MB: the tree's RSS counts both.
    grandchild = "b = bytearray(100 * 2**20); import time; time.sleep(30)"
    code = (f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {grandchild!r}]); "
            "time.sleep(30)")
    child = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        sampler = resources.ProcessTreeSampler(child.pid)
        deadline = time.monotonic() + 20
        while sampler.sample() < 100 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sampler.peak_rss_mb >= 100
        assert len(resources.tree_processes(child.pid)) == 2
    finally:
        resources.kill_tree(child.pid)
        child.wait(timeout=10)
    assert resources.tree_processes(child.pid) == []


def test_core_pool_spreads_jobs_over_cores() -> None:
    pool = resources.CorePool([0, 1, 2, 3])
    first, second = pool.acquire(2), pool.acquire(2)
    assert set(first).isdisjoint(second)
    pool.release(first)
    assert pool.acquire(2) == first
    assert len(pool.acquire(8)) == 4  # never more cores than the machine has


def test_host_info_and_gpu_inventory_say_what_is_there() -> None:
    info = resources.host_info()
    assert set(info) == {"host", "cpu_model", "gpu_model"} and info["gpu_model"] == "none"
    inventory = resources.gpu_inventory()
    if inventory.available:
        assert inventory.devices and all(d["name"] for d in inventory.devices)
    else:
        assert inventory.reason.startswith(resources.NO_GPU) and inventory.devices == []


def test_frameworks_list_shows_versions_and_install_hints(monkeypatch: pytest.MonkeyPatch) -> None:
    from jobs_support import missing_adapter

    monkeypatch.setenv(EXTRA_ADAPTERS_ENV, missing_adapter.__file__)
    monkeypatch.setenv("COLUMNS", "250")  # one table row per line
    shown = subprocess.run([sys.executable, "-m", "flows.cli", "frameworks", "list"],
                           capture_output=True, text=True, check=True).stdout
    lines = {line.split("│")[1].strip(): line for line in shown.splitlines() if line.count("│") > 2}
    assert set(lines) >= SHIPPED
    assert get_adapter("hgb").version() in lines["hgb"]
    assert "not installed" in lines["missing"] and missing_adapter.INSTALL_HINT in lines["missing"]


def test_a_framework_not_installed_fails_its_job_with_the_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobs_support import missing_adapter
    from jobs_support.tiny_project import make_project

    from tasks.jobs import run_job
    from tasks.plan import Job
    from tasks.specs import Budget

    monkeypatch.setenv(EXTRA_ADAPTERS_ENV, missing_adapter.__file__)
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_project(tmp_path / "project", rows=40)["binary"]
    budget = Budget(name="b", time_s=5, cores=1, memory_mb=1024)
    result = run_job(Job("s", spec.name, "v0", "missing", None, 0, 0, budget), spec, tmp_path / "job")
    assert result.status == "failed"
    hint = missing_adapter.INSTALL_HINT
    assert result.error == f"framework 'missing' is not installed; install it with: {hint}"
    assert not (tmp_path / "job" / "worker.log").exists()  # no process was started for it
