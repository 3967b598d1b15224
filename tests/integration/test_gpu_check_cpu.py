"""bench/gpu_check.py in its CPU mode, as CI runs it: the CNN adapter's jobs through the real worker
and watchdog, each job's folder written, the table printed, and the missing GPU said plainly.
Each job gets 20 s: its loader workers start within that time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.resources import gpu_inventory

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_gpu_check_runs_the_cnn_jobs_on_the_cpu(tmp_path: Path) -> None:
    if gpu_inventory().available:
        pytest.skip("a GPU is here: the check's GPU mode is for the GPU machine, not this test")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("AUTOML_EVAL_HOME", None)
    ran = subprocess.run(
        [sys.executable, "-m", "bench.gpu_check", "--no-probe", "--out", str(tmp_path / "out"),
         "--job-seconds", "20", "--json", str(tmp_path / "figures.json")],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "no GPU here: the CNN jobs ran on the CPU only (GPU figures pending)" in ran.stdout
    jobs = json.loads((tmp_path / "figures.json").read_text())["cnn_jobs"]
    assert [(job["device"], job["setting"], job["status"]) for job in jobs] == [("cpu", "w0", "ok"),
                                                                                ("cpu", "w2", "ok")]
    assert all(job["train_images_per_s"] > 0 and job["epochs"] > 0 for job in jobs)
    for setting in ("w0", "w2"):
        folder = tmp_path / "out" / "cpu" / setting
        assert {"result.json", "resources.csv", "training_curve.csv"} <= {p.name for p in folder.iterdir()}
