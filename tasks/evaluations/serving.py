"""Serving: the job's model behind MLflow's scoring server, under concurrent and open-loop load.

The job's model folder becomes the self-contained pyfunc model tracking logs (tasks/evaluations/
_pyfunc.py), served as a user serves it: ``mlflow models serve --env-manager local`` with as many
workers as the budget's cores, on 127.0.0.1 and a free port, in its own process group, always
stopped. Locust (tasks/evaluations/_serving_load.py, a process of its own) sends real
/invocations bodies built from the test fold's rows: a closed-loop ladder of concurrent users, then
Poisson arrivals searched for the highest rate whose p99 stays within the SLO.

With two or more cores the load runs on the job's last core and the server on the others; with
one core both share it (``info.load_placement`` says which).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, field_validator, model_validator

from tasks.child_process import die_with_parent, error_tail
from tasks.evaluations._scoring_server import SERVER_LOG, ScoringServer, ServingFailure
from tasks.evaluations._serving_load import CSV_DIR, HISTORY_CSV, LOAD_RESULT
from tasks.evaluations.base import EvaluationContext, EvaluationResult, EvaluationSettings, PostJobEvaluation
from tasks.frameworks.registry import FRAMEWORK_FILE
from tasks.launch import PACKAGE_ROOT, python_environment

PYFUNC_FOLDER = "pyfunc"  # the served model, inside the evaluation's folder
BODIES_FILE = "bodies.jsonl"
PLAN_FILE = "load_plan.json"
LOAD_LOG = "load.log"
MAX_BODIES = 500  # distinct test rows the load cycles through
WARMUP_REQUESTS = 20
WARMUP_S = 3.0
LOAD_GRACE_S = 30.0  # the load process's own start-up and write-out
# A request still unanswered after this long is an error. Long enough that a closed-loop step of
# many users on a slow model measures its queueing, not the client's patience.
REQUEST_TIMEOUT_S = 30.0


class ServingSettings(EvaluationSettings):
    """The suite's `serving:` block."""

    time_s: int = Field(default=400, gt=0)  # covers the default plan (planned_s)
    concurrency: list[int] = Field(default_factory=lambda: [1, 4, 16, 64], min_length=1)
    slo_ms: float = Field(default=100.0, gt=0)
    duration_s: float = Field(default=20.0, gt=0, le=600)  # per load step
    max_requests: int = Field(default=20000, gt=0)  # per load step
    search_steps: int = Field(default=6, ge=0, le=20)  # open-loop rates tried by the bisection
    startup_timeout_s: float = Field(default=120.0, gt=0)  # until /ping answers 200

    @field_validator("concurrency")
    @classmethod
    def _positive_users(cls, value: list[int]) -> list[int]:
        if any(users < 1 or users > 1000 for users in value):
            raise ValueError("each concurrency step must be between 1 and 1000 users")
        return sorted(set(value))

    @model_validator(mode="after")
    def _plan_fits(self) -> ServingSettings:
        needed = self.planned_s()
        if needed > self.time_s:
            raise ValueError(
                f"time_s {self.time_s} is too short for the plan: startup_timeout_s "
                f"{self.startup_timeout_s:g} "
                f"+ {len(self.concurrency) + self.search_steps} load steps of duration_s {self.duration_s:g} "
                f"need about {math.ceil(needed)} s; raise time_s or lower duration_s")
        return self

    def planned_s(self) -> float:
        """The longest the plan can take: start-up, warm-up, each step and its drain."""
        drain_s = max(2.0, 10 * self.slo_ms / 1000)
        return (self.startup_timeout_s + WARMUP_S + len(self.concurrency) * self.duration_s
                + self.search_steps * (self.duration_s + drain_s))


def step_metric(users: int, figure: str) -> str:
    return f"serve_c{users}_{figure}"


class ServingEvaluation(PostJobEvaluation):
    name = "serving"
    settings_model = ServingSettings
    metrics: ClassVar[dict[str, str]] = {
        "serve_cN_p50_ms": "median latency of POST /invocations with N concurrent users (closed loop), ms",
        "serve_cN_p95_ms": "95th percentile latency with N concurrent users, ms",
        "serve_cN_p99_ms": "99th percentile latency with N concurrent users, ms",
        "serve_cN_mean_ms": "mean latency with N concurrent users, ms",
        "serve_cN_rps": "successful responses per second with N concurrent users",
        "serve_cN_error_rate": "share of requests that failed with N concurrent users",
        "serve_cN_requests": "requests counted with N concurrent users (warm-up excluded)",
        "serve_max_qps_at_slo": "highest Poisson arrival rate (req/s) whose p99, counted from the scheduled "
                                "send time, stayed within serving.slo_ms with no errors",
        "serve_slo_ms": "the latency bound serve_max_qps_at_slo was searched for, ms",
        "serve_startup_s": "scoring server start until /ping first answered 200, seconds",
        "serve_p99_ms": "p99 latency at the ladder's highest concurrency, ms (the cost figure compare uses)",
    }
    grace_s = LOAD_GRACE_S

    def run(self, context: EvaluationContext) -> EvaluationResult:
        # MLflow takes seconds to import; the registry imports every evaluation module (to plan a run,
        # and in each evaluation's process), and only serving's run needs it.
        from tasks.evaluations._pyfunc import save_pyfunc  # inside: MLflow, only when serving runs

        settings: ServingSettings = context.settings  # type: ignore[assignment]
        folder = context.folder
        server_cores, load_cores = _placement(context.cores)
        info: dict[str, Any] = {
            "server_cores": server_cores, "load_cores": load_cores,
            "load_placement": "separate cores" if set(server_cores).isdisjoint(load_cores) else "shared core",
            "workers": context.budget.cores, "slo_ms": settings.slo_ms,
        }
        started = time.monotonic()
        model = save_pyfunc(context.model_dir, folder / PYFUNC_FOLDER, context.job.framework,
                            _framework_version(context))
        info["pyfunc_build_s"] = time.monotonic() - started
        bodies = _write_bodies(context, folder / BODIES_FILE)
        server = ScoringServer(model, workers=context.budget.cores, cores=server_cores, log_dir=folder,
                               healthcheck_s=settings.startup_timeout_s)
        info["port"] = server.port
        metrics: dict[str, float] = {}
        try:
            with server:
                server.start()
                metrics["serve_startup_s"] = server.wait_until_up(settings.startup_timeout_s)
                status, answer = server.invoke(bodies[0])
                if status != 200:
                    raise ServingFailure(f"the scoring server answered /invocations with HTTP {status}: "
                                         f"{answer.strip()[:300]}")
                info["first_answer"] = answer[:1000]
                load = _run_load(context, settings, server.url, load_cores)
                info["load_s"] = load.pop("wall_s")
                info["worker_restarts"] = server.worker_restarts()
        except ServingFailure as failure:
            info["worker_restarts"] = server.worker_restarts()
            return EvaluationResult(status="failed", reason=f"{failure}.\n{server.log_tail()}".strip(),
                                    metrics=metrics, files=_files(folder), info=info)
        metrics.update(_load_metrics(load, settings))
        info.update(steps=load["steps"], search=load["search"], warmup=load["warmup"])
        failing = [step for step in load["steps"] if step["mode"] == "closed" and step["failures"]]
        if failing or load["warmup"]["failures"]:
            worst = failing[0] if failing else {"name": "warm-up", **load["warmup"],
                                               "requests": load["warmup"]["requests"]}
            reason = (f"{worst['failures']} of {worst['requests']} requests to /invocations failed at "
                      f"{worst['name']}: {worst['first_error']}.\n{server.log_tail()}").strip()
            return EvaluationResult(status="failed", reason=reason, metrics=metrics, files=_files(folder),
                                    info=info)
        if load["stopped_early"]:
            return EvaluationResult(status="partial", reason=load["stopped_early"], metrics=metrics,
                                    files=_files(folder), info=info)
        return EvaluationResult(status="ok", metrics=metrics, files=_files(folder), info=info)


def _placement(cores: list[int]) -> tuple[list[int], list[int]]:
    """(server cores, load cores): the load on the last core when there are two or more."""
    if len(cores) >= 2:
        return cores[:-1], cores[-1:]
    return list(cores), list(cores)


def _framework_version(context: EvaluationContext) -> str:
    identity = json.loads((context.model_dir / FRAMEWORK_FILE).read_text())
    return str(identity.get("version") or "")


def _write_bodies(context: EvaluationContext, path: Path) -> list[bytes]:
    """One /invocations JSON body per test-fold row (dataframe_split, the way a client sends it)."""
    X_test = context.fold.X_test
    rows = X_test.iloc[: min(MAX_BODIES, len(X_test))]
    lines = []
    for position in range(len(rows)):
        split = json.loads(rows.iloc[[position]].to_json(orient="split", index=False, date_format="iso"))
        lines.append(json.dumps({"dataframe_split": {"columns": split["columns"], "data": split["data"]}}))
    path.write_text("\n".join(lines) + "\n")
    return [line.encode() for line in lines]


def _run_load(context: EvaluationContext, settings: ServingSettings, url: str,
              cores: list[int]) -> dict[str, Any]:
    folder = context.folder
    time_s = max(1.0, context.time_left_s() - 5.0)
    plan = {
        "url": url, "bodies_file": str(folder / BODIES_FILE), "out_dir": str(folder),
        "concurrency": settings.concurrency, "duration_s": settings.duration_s,
        "max_requests": settings.max_requests, "slo_ms": settings.slo_ms,
        "search_steps": settings.search_steps, "warmup_requests": WARMUP_REQUESTS, "warmup_s": WARMUP_S,
        "time_s": time_s, "request_timeout_s": REQUEST_TIMEOUT_S, "cores": cores,
    }
    (folder / PLAN_FILE).write_text(json.dumps(plan, indent=2))
    command = [sys.executable, "-m", "tasks.evaluations._serving_load", str(folder / PLAN_FILE)]
    started = time.monotonic()
    with open(folder / LOAD_LOG, "ab") as log:
        try:
            completed = subprocess.run(command, cwd=PACKAGE_ROOT, env=python_environment(1),
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       timeout=time_s + LOAD_GRACE_S, check=False,
                                       preexec_fn=die_with_parent)
        except subprocess.TimeoutExpired:
            raise ServingFailure(f"the load generator overran its limit of {time_s + LOAD_GRACE_S:.0f} "
                                 "s") from None
    result_path = folder / LOAD_RESULT
    if completed.returncode != 0 or not result_path.is_file():
        tail = error_tail((folder / LOAD_LOG).read_text(errors="replace"))
        raise ServingFailure(f"the load generator exited with code {completed.returncode}:\n{tail}")
    load = json.loads(result_path.read_text())
    load["wall_s"] = time.monotonic() - started
    return load


def _load_metrics(load: dict[str, Any], settings: ServingSettings) -> dict[str, float]:
    metrics: dict[str, float] = {}
    closed = [step for step in load["steps"] if step["mode"] == "closed"]
    for step in closed:
        for figure in ("p50_ms", "p95_ms", "p99_ms", "mean_ms", "rps", "error_rate", "requests"):
            metrics[step_metric(step["users"], figure)] = float(step[figure])
    if closed:
        metrics["serve_p99_ms"] = float(closed[-1]["p99_ms"])
    if "max_qps_at_slo" in load["search"] and settings.search_steps:
        metrics["serve_max_qps_at_slo"] = float(load["search"]["max_qps_at_slo"])
        metrics["serve_slo_ms"] = float(settings.slo_ms)
    return {name: value for name, value in metrics.items() if math.isfinite(value)}


def _files(folder: Path) -> list[str]:
    """Locust's stats CSVs and the logs, relative to the evaluation folder (the served model is not
    attached here: tracking logs the same model with the job)."""
    names = [HISTORY_CSV, LOAD_RESULT, SERVER_LOG, LOAD_LOG, PLAN_FILE]
    files = [name for name in names if (folder / name).is_file()]
    files += sorted(str(path.relative_to(folder)) for path in (folder / CSV_DIR).glob("*.csv"))
    return files


EVALUATION = ServingEvaluation()
