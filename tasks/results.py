"""JobResult: what one job produced, as plain data written to result.json in its job folder.

The child writes it first (worker.py), the watchdog completes it (jobs.py), the harness adds the
scores (metrics.py), and only then does tracking.py log it. Plain JSON so a parent and a child with
different library versions always read each other.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULT_FILE = "result.json"
PREDICTIONS_FILE = "predictions.csv"
# A forecast's predictions.csv also names each point's series and time (long format), next to
# `truth` and `prediction`, then one column per quantile (q0.1, ...) when the framework gives them.
FORECAST_ID, FORECAST_TIME = "series_id", "timestamp"
MODEL_DIR = "model"
# A framework that records a training curve returns it in its model's info() under this key, as
# rows {"step", "elapsed_s", <score>}; the harness saves it as TRAINING_CURVE_FILE.
CURVE_INFO_KEY = "training_curve"
TRAINING_CURVE_FILE = "training_curve.csv"
INPUT_EXAMPLE_FILE = "input_example.parquet"  # the first test rows, as the model's input example


@dataclass
class JobResult:
    job_key: str
    status: str = "failed"  # ok | failed | timeout | memory | skipped
    error: str = ""  # one-line reason, then the last lines of the error
    framework_version: str = ""
    scores: dict[str, float] = field(default_factory=dict)  # every metric + "result"
    costs: dict[str, float] = field(default_factory=dict)  # COST_METRICS names only
    gpu: dict[str, Any] = field(default_factory=dict)  # {"available": bool, "reason"/"model": str, ...}
    info: dict[str, Any] = field(default_factory=dict)  # leaderboard models, params actually used, ...
    host: dict[str, str] = field(default_factory=dict)  # host, cpu_model, gpu_model
    # Post-job evaluations (tasks/evaluations/): name -> {status, reason, metrics, files, wall_s}.
    # Their outcome never changes `status`, the job's own.
    evaluations: dict[str, dict[str, Any]] = field(default_factory=dict)
    started_utc: str = ""
    ended_utc: str = ""

    def save(self, job_dir: Path) -> Path:
        path = job_dir / RESULT_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2, sort_keys=True, default=str))
        tmp.replace(path)  # atomic: a reader never sees half a result
        return path

    @classmethod
    def load(cls, job_dir: Path) -> JobResult:
        data = json.loads((job_dir / RESULT_FILE).read_text())
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})
