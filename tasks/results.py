"""JobResult: what one job produced, as plain data written to result.json in its job folder.

The child writes it first (worker.py), the supervisor's side completes it (jobs.py), the harness
adds the scores (metrics.py), and only then does tracking.py log it. Plain JSON so a parent and a
child with different library versions always read each other. Its `info` is typed by JobInfo: the
harness's own fields, declared, next to the framework's (its model's info(), open-ended).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

# The prediction table's file, beside the other files of a job folder (defined in tasks/predictions.py).
from tasks.predictions import PREDICTIONS_FILE as PREDICTIONS_FILE

RESULT_FILE = "result.json"
MODEL_DIR = "model"
# A framework that records a training curve returns it in its model's info() under this key, as
# rows {"step", "elapsed_s", <score>}; the harness saves it as TRAINING_CURVE_FILE.
CURVE_INFO_KEY = "training_curve"
TRAINING_CURVE_FILE = "training_curve.csv"
INPUT_EXAMPLE_FILE = "input_example.parquet"  # the first test rows, as the model's input example


class WorkerUsage(BaseModel):
    """The worker's own CPU seconds and peak RSS (with its reaped children's), from the kernel."""

    model_config = ConfigDict(frozen=True)

    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0


class JobInfo(BaseModel):
    """JobResult.info: the harness's own fields, each set only when known (an unset one is not
    written), and any other key a framework's model.info() gives (leaderboard, best model, ...)."""

    model_config = ConfigDict(extra="allow")

    # Written by the worker.
    classes: list[Any] | None = None  # the class labels, in the order of the proba columns
    params: dict[str, Any] | None = None  # the parameters the framework was given
    affinity: list[int] | None = None  # the cores the worker really ran on
    environment: dict[str, str] | None = None  # its thread variables and CUDA_VISIBLE_DEVICES
    thread_pools: list[dict[str, Any]] | None = None  # the BLAS/OpenMP pools and their sizes
    python: str | None = None  # the interpreter it ran
    startup_s: float | None = None
    predict_proba_s: float | None = None
    predict_quantiles_s: float | None = None
    latency_measure_s: float | None = None
    stop_error: str | None = None  # the framework's stop() raised this
    worker_usage: WorkerUsage | None = None
    stage_started_unix: dict[str, float] | None = None  # the parent turns it into timeline_s
    # tasks/energy.py: {"source": nvml_counter | nvml_power | rapl | none (joined by + when several),
    # "reason": why a part is missing, "fit_parts_j": joules of the fit per source}
    energy: dict[str, Any] | None = None
    # tasks/anytime.py: {"offered": bool, "reason": why not, "candidates": models seen, "timing": how
    # each model's time was derived}
    anytime: dict[str, Any] | None = None
    # FrameworkAdapter.fixed_work, and whether the budget's time stopped the fit before that work was
    # done (FittedModel.stopped_by_time): the Scaling section compares fit_s only where it was not.
    fixed_work: bool | None = None
    fit_stopped_by_time: bool | None = None
    # Added by the parent from what it saw.
    cores: list[int] | None = None  # the cores it was granted
    launcher: str | None = None  # warm or cold (tasks/launch.py)
    timeline_s: dict[str, float] | None = None  # seconds from the launch to each stage

    def to_json(self) -> dict[str, Any]:
        """As result.json keeps it: the fields that were set, then the framework's."""
        # The framework's values as they are: JobResult.save writes what JSON cannot hold as text.
        return self.model_dump(exclude_unset=True)


@dataclass
class JobResult:
    job_key: str
    status: str = "failed"  # ok | failed | timeout | memory | skipped
    error: str = ""  # one-line reason, then the last lines of the error
    framework_version: str = ""
    scores: dict[str, float] = field(default_factory=dict)  # every metric + "result"
    costs: dict[str, float] = field(default_factory=dict)  # COST_METRICS names only
    gpu: dict[str, Any] = field(default_factory=dict)  # {"available": bool, "reason"/"model": str, ...}
    info: dict[str, Any] = field(default_factory=dict)  # JobInfo.to_json(); read it with typed_info()
    host: dict[str, str] = field(default_factory=dict)  # host, cpu_model, gpu_model
    # Post-job evaluations (tasks/evaluations/): name -> {status, reason, metrics, files, wall_s}.
    # Their outcome never changes `status`, the job's own.
    evaluations: dict[str, dict[str, Any]] = field(default_factory=dict)
    started_utc: str = ""
    ended_utc: str = ""

    def typed_info(self) -> JobInfo:
        return JobInfo.model_validate(self.info)

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
