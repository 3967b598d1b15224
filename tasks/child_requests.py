"""What the harness hands its supervised children, and what a worker tells its supervisor mid-job.

Typed on both sides of the process boundary; on disk they stay the JSON files they always were,
so a job folder written before still reads:

- ``job.json`` (JobRequest): tasks.jobs writes it, the job's worker (tasks.worker) reads it;
- ``data_load.json`` (DataLoad): the worker writes it once its fold is loaded, the supervisor
  grants that memory on top of the budget's memory_mb;
- ``request.json`` (EvaluationRequest): the post-job stage writes it, the evaluation's child reads it.

Fields a reader does not know are ignored, so a parent and a child of neighbouring versions read
each other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

from tasks.child_process import DATA_LOAD_FILE as DATA_LOAD_FILE
from tasks.child_process import JOB_FILE as JOB_FILE
from tasks.child_process import REQUEST_FILE as REQUEST_FILE
from tasks.plan import Job
from tasks.specs import DatasetSpec


class _ChildFile(BaseModel):
    """A frozen model written as indented JSON and read back, unknown fields ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    def write(self, path: Path) -> Path:
        # A value JSON has no type for (a framework parameter) is written as text, as it always was.
        path.write_text(json.dumps(self.model_dump(mode="json", fallback=str), indent=2))
        return path

    @classmethod
    def read(cls, path: Path) -> Self:
        return cls.model_validate(json.loads(path.read_text()))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        """From the file's parsed JSON (a child parses it once, before it may import this module)."""
        return cls.model_validate(data)


class JobRequest(_ChildFile):
    """job.json: one job as its worker runs it."""

    job_key: str
    job: Job
    spec: DatasetSpec
    params: dict[str, Any] = Field(default_factory=dict)  # the variant's, then the suite's
    cpus: list[int] = Field(default_factory=list)  # the cores it is pinned to
    threads: int = 1  # the size of each thread pool
    gpus: list[int] = Field(default_factory=list)  # NVML indices, also its CUDA_VISIBLE_DEVICES
    hard_limit_s: float = 0.0  # where the supervisor kills it: time_s + grace
    latency_calls: int = 100  # single-row latency: at most this many calls
    latency_max_s: float = 3.0  # ... and no more than this many seconds
    launched_unix: float = 0.0  # when the parent launched it: the job's timeline starts there
    python: str = ""  # a framework environment's interpreter; "" for the harness's own


class DataLoad(_ChildFile):
    """data_load.json: the worker's memory once its fold is loaded, and what loading added."""

    data_load_rss_mb: float
    data_mb: float  # the data's copy in the harness: granted on top of the budget's memory_mb


class EvaluationRequest(_ChildFile):
    """request.json: one post-job evaluation of one job's saved model."""

    name: str
    job: Job
    spec: DatasetSpec
    job_dir: Path
    settings: dict[str, Any] = Field(default_factory=dict)  # checked by the evaluation's settings model
    cores: list[int] = Field(default_factory=list)
