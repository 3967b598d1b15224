"""The serving evaluation's canary: a second model version behind the same address (a grey release).

``serving.canary: {share: 0.1, model: hgb@1.5.2}`` serves the job's model (the primary) and the
canary's, each on the first stack of ``serving.stacks``, puts the router of
tasks/evaluations/_canary_router.py in front of both, and runs the closed-loop ladder against the
router's one address. The router sends `share` of the requests to the canary and tells each
version's latency and errors apart. Their prediction agreement is measured besides: a sample of the
test fold is scored by both servers directly, row by row compared.

`model` names the canary: a framework id (``name[:variant][@version]``), meaning that framework's
job in the same suite on the same dataset, fold, seed and budget (with the primary's params when it
is the same framework), or the path of a job folder (one holding ``model/``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from tasks.evaluations._scoring_server import ScoringServer, ServingFailure
from tasks.evaluations.base import EvaluationContext
from tasks.evaluations.stacks import ServingStack
from tasks.frameworks.registry import FRAMEWORK_FILE
from tasks.launch import python_environment
from tasks.predictions import PREDICTION
from tasks.results import MODEL_DIR
from tasks.specs import split_framework_id

CANARY_DIR = "canary"  # the canary's files inside the serving folder: canary/{primary,canary,router}/
ROUTER_SEED = 0
REGRESSION_AGREEMENT = 0.01  # two regression values agree within 1% of the larger one


class CanarySettings(BaseModel):
    """`serving.canary`: the share of requests the second version gets, and which model it is."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    share: float
    model: str = Field(min_length=1)
    sample_rows: int = Field(default=200, ge=1, le=10_000)  # test rows both versions score for agreement

    @field_validator("share")
    @classmethod
    def _a_share(cls, value: float) -> float:
        if not 0 < value < 1:
            raise ValueError(f"serving.canary.share {value:g} is not a share of the requests; give a number "
                             "between 0 and 1, both excluded (0.1 sends one request in ten to the canary)")
        return value


class CanaryNotFound(ServingFailure):
    """The canary model names no saved model; the message says what to give instead."""


class RouterServer(ScoringServer):
    """The router as a server of its own (always stopped), forwarding to the two versions."""

    upstreams: tuple[str, str] = ("", "")
    share: float = 0.0

    def command(self) -> list[str]:
        primary, canary = self.upstreams
        return [sys.executable, "-m", "tasks.evaluations._canary_router", str(self.port), primary, canary,
                f"{self.share!r}", str(ROUTER_SEED)]

    def environment(self) -> dict[str, str]:
        return python_environment(1)


def canary_context(context: EvaluationContext, model: str, folder: Path) -> EvaluationContext:
    """The evaluation's context for the canary's model: its job and job folder; CanaryNotFound
    when `model` names none."""
    job = context.job
    if "/" in model:
        job_dir = Path(model).expanduser().resolve()
        identity = job_dir / MODEL_DIR / FRAMEWORK_FILE
        if not identity.is_file():
            raise CanaryNotFound(f"serving.canary.model {model} is no job folder with a saved model "
                                 f"({identity} is missing); give the folder of a finished job, or a "
                                 "framework id such as hgb@1.5.2 for that framework's job in this suite")
        name = str(_identity_name(identity))
        canary_job = dataclasses.replace(job, framework=name, variant=None, framework_version=None,
                                         params=job.params if name == job.framework else {})
    else:
        parts = split_framework_id(model)
        same = parts["name"] == job.framework
        canary_job = dataclasses.replace(job, framework=parts["name"], variant=parts["variant"],
                                         framework_version=parts["version"],
                                         params=job.params if same else {})
        job_dir = context.job_dir.parent / canary_job.key
        if not (job_dir / MODEL_DIR / FRAMEWORK_FILE).is_file():
            raise CanaryNotFound(f"serving.canary.model {model} names no saved model: its job "
                                 f"({canary_job.label}) has no finished folder at {job_dir}; run that job "
                                 "in this suite first, or give the path of a finished job folder")
    if job_dir == context.job_dir.resolve():
        raise CanaryNotFound(f"serving.canary.model {model} is the primary's own model; name a second "
                             "version")
    return dataclasses.replace(context, job=canary_job, job_dir=job_dir, folder=folder)


def _identity_name(path: Path) -> Any:
    return json.loads(path.read_text())["name"]


def agreement(stack: ServingStack, primary: ScoringServer, canary: ScoringServer, context: EvaluationContext,
              rows: int, body_of: Callable[[Any], bytes]) -> tuple[float, int]:
    """(share of the sampled test rows both versions predict alike, rows compared): each server
    answers the same sample in one request. Labels agree when equal; values within 1% of the larger."""
    X = context.fold.X_test
    sample = X.iloc[: min(rows, len(X))]
    answers = []
    for server in (primary, canary):
        status, text = server.invoke(body_of(sample), timeout_s=120)
        if status != 200:
            raise ServingFailure(f"the {server.details.get('version', 'model')} version answered the "
                                 f"agreement sample with HTTP {status}: {text.strip()[:300]}")
        answers.append(stack.answer_rows(text)[PREDICTION].tolist())
    first, second = answers
    if context.fold.task.is_classification:
        same = [str(a) == str(b) for a, b in zip(first, second, strict=True)]
    else:
        a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
        same = list(np.abs(a - b) <= REGRESSION_AGREEMENT * np.maximum(np.abs(a), np.abs(b)))
    return (float(np.mean(same)) if same else math.nan), len(same)


def version_metrics(stats: dict[str, Any]) -> dict[str, float]:
    """Each version's figures from the router's tallies, and the share the canary got."""
    metrics: dict[str, float] = {}
    total = 0
    for version, tally in stats.items():
        prefix = "serve_canary_primary" if version == "primary" else "serve_canary"
        requests, failures = int(tally["requests"]), int(tally["failures"])
        metrics[f"{prefix}_requests"] = float(requests)
        total += requests
        if requests:
            metrics[f"{prefix}_error_rate"] = failures / requests
        if tally["latencies_ms"]:
            p50, p99 = np.percentile(np.asarray(tally["latencies_ms"], dtype=float), [50, 99])
            metrics[f"{prefix}_p50_ms"], metrics[f"{prefix}_p99_ms"] = float(p50), float(p99)
    if total:
        metrics["serve_canary_share_routed"] = metrics["serve_canary_requests"] / total
    return metrics

