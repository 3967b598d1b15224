"""Serving: the job's model behind MLflow's scoring server, under concurrent and open-loop load.

The job's model folder becomes the self-contained pyfunc model tracking logs (tasks/evaluations/
_pyfunc.py), served as a user serves it: ``mlflow models serve --env-manager local`` with as many
workers as the budget's cores, on 127.0.0.1 and a free port, in its own process group, always
stopped. Locust (tasks/evaluations/_serving_load.py, a process of its own) sends real
/invocations bodies built from the test fold's rows: a closed-loop ladder of concurrent users, then
the open loop. The open loop is MLPerf LoadGen's server scenario by default (``open_loop: loadgen``,
tasks/evaluations/_loadgen_search.py): LoadGen's Poisson queries, minimum duration and query count,
early stopping and VALID/INVALID verdict at the latency percentile; ``open_loop: locust`` keeps the
older Locust-only search (a p99 from whatever one step counted). ``preset: ci`` keeps LoadGen's steps
short enough for CI; ``preset: mlperf`` takes MLPerf's own minimums (10 minutes and 270,336 queries a
step), for real runs. A rate too low for its minimum of queries to fit in max_duration_s gets a longer
step while time_s allows; one that still does not fit is named in the reason, never reported as 0 QPS.
Errors are readings: a step with failed requests is over its SLO and keeps the first error; the
evaluation fails only when the server dies or never answers.

Each stack in ``serving.stacks`` (tasks/evaluations/stacks/) is measured alike, after its answers on
the test fold agree with the model's in process; besides the load figures, each records its cold
start to the first answer and its server tree's CPU seconds per 1,000 requests and peak RSS over the
whole load (psutil, sampled on a thread of this process).

With ``serving.canary`` the model and a second version share one address behind a router, for
a share of the requests each (tasks/evaluations/_canary.py): both versions' latency and errors, and
how often they predict alike.

With two or more cores the load runs on the job's last core and the server on the others; with
one core both share it (``info.load_placement`` says which).
"""

from __future__ import annotations

import base64
import json
import math
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
from pydantic import Field, field_validator, model_validator

from tasks.child_process import die_with_parent, error_tail
from tasks.evaluations._canary import (
    CANARY_DIR,
    CanaryNotFound,
    CanarySettings,
    RouterServer,
    agreement,
    canary_context,
    version_metrics,
)
from tasks.evaluations._loadgen_search import LOADGEN_DIR, LOADGEN_RESULT, SUMMARY_FILE
from tasks.evaluations._scoring_server import SERVER_LOG, ScoringServer, ServingFailure
from tasks.evaluations._serving_load import CSV_DIR, HISTORY_CSV, LOAD_RESULT
from tasks.evaluations.base import (
    EvaluationContext,
    EvaluationResult,
    EvaluationSettings,
    EvaluationStatus,
    PostJobEvaluation,
)
from tasks.evaluations.stacks import ServingStack, StackNotInstalled, all_stacks, unusable_stack_reason
from tasks.figures import Figure
from tasks.frameworks.capabilities import NotOffered
from tasks.launch import PACKAGE_ROOT, python_environment
from tasks.predictions import PREDICTION, PROBA_PREFIX
from tasks.resources import SampledTree

DEFAULT_STACK = "mlflow"  # its figures keep the names serve_*; another stack's are serve_STACK_*
STACKS_DIR = "stacks"  # another stack's files, in a folder of its own: stacks/NAME/
BODIES_FILE = "bodies.jsonl"
PLAN_FILE = "load_plan.json"
LOAD_LOG = "load.log"
LOADGEN_PLAN_FILE = "loadgen_plan.json"
LOADGEN_LOG = "loadgen.log"
MAX_BODIES = 500  # distinct test rows the load cycles through
WARMUP_REQUESTS = 20
WARMUP_S = 3.0
LOAD_GRACE_S = 30.0  # the load process's own start-up and write-out
# A request still unanswered after this long is an error. Long enough that a closed-loop step of
# many users on a slow model measures its queueing, not the client's patience.
REQUEST_TIMEOUT_S = 30.0

# LoadGen's step limits per preset: (min_duration_s, min_query_count, max_duration_s).
# ci: short steps; 500 queries are about what LoadGen's early stopping needs to establish a p99
# when no query is over the bound (fewer are INVALID however fast the server is).
# mlperf: MLPerf Inference's server scenario (mlperf.conf: min_duration 600000 ms; 270,336 queries),
# with room for the queries to come in at low rates.
PRESETS: dict[str, tuple[float, int, float]] = {
    "ci": (2.0, 500, 30.0),
    "mlperf": (600.0, 270_336, 1800.0),
}


class ServingSettings(EvaluationSettings):
    """The suite's `serving:` block."""

    time_s: int = Field(default=600, gt=0)  # covers the default plan (planned_s)
    concurrency: list[int] = Field(default_factory=lambda: [1, 4, 16, 64, 256], min_length=1)
    slo_ms: float = Field(default=100.0, gt=0)
    duration_s: float = Field(default=20.0, gt=0, le=600)  # per closed-loop (and Locust open-loop) step
    max_requests: int = Field(default=20000, gt=0)  # per Locust step
    search_steps: int = Field(default=6, ge=0, le=20)  # open-loop rates tried by the bisection
    startup_timeout_s: float = Field(default=120.0, gt=0)  # until /ping answers 200
    open_loop: Literal["loadgen", "locust"] = "loadgen"
    preset: Literal["ci", "mlperf"] = "ci"  # LoadGen's step limits, unless set one by one below
    min_duration_s: float | None = Field(default=None, gt=0)
    min_query_count: int | None = Field(default=None, ge=1)
    max_duration_s: float | None = Field(default=None, gt=0)
    latency_percentile: float = Field(default=0.99, gt=0, lt=1)  # LoadGen's bound: this share within slo_ms
    # LoadGen verdicts at these rates instead of the bisection.
    target_qps: list[float] = Field(default_factory=list)
    # The stacks that serve the model, each measured alike (tasks/evaluations/stacks/).
    stacks: list[str] = Field(default_factory=lambda: [DEFAULT_STACK], min_length=1)
    # A batching window, on the stacks that batch (onnxruntime; mlserver's adaptive batching): the
    # requests that arrive while a batch is open (up to max_batch_size of them, at most
    # max_batch_time_ms after its first) are answered by one call of the model. 1: each alone.
    max_batch_size: int = Field(default=1, ge=1, le=1024)
    max_batch_time_ms: float = Field(default=5.0, ge=0)
    # A second model version behind the same address, for a share of the requests (a grey release):
    # both versions' latency and errors, and how often they predict alike (tasks/evaluations/_canary.py).
    canary: CanarySettings | None = None

    @field_validator("stacks")
    @classmethod
    def _installed_stacks(cls, value: list[str]) -> list[str]:
        reason = unusable_stack_reason(value)
        if reason is not None:
            raise ValueError(reason)
        return list(dict.fromkeys(value))

    @field_validator("concurrency")
    @classmethod
    def _positive_users(cls, value: list[int]) -> list[int]:
        if any(users < 1 or users > 1000 for users in value):
            raise ValueError("each concurrency step must be between 1 and 1000 users")
        return sorted(set(value))

    @field_validator("target_qps")
    @classmethod
    def _positive_rates(cls, value: list[float]) -> list[float]:
        if any(rate <= 0 for rate in value):
            raise ValueError("each target_qps must be a rate above 0 queries per second")
        return sorted(set(value))

    @model_validator(mode="after")
    def _window_within_bound(self) -> ServingSettings:
        if self.max_batch_size > 1 and self.max_batch_time_ms > self.slo_ms:
            raise ValueError(f"serving.max_batch_time_ms {self.max_batch_time_ms:g} is larger than "
                             f"serving.slo_ms {self.slo_ms:g}: a request could wait out the whole latency "
                             "bound for its batch; lower max_batch_time_ms below slo_ms")
        return self

    @model_validator(mode="after")
    def _plan_fits(self) -> ServingSettings:
        min_duration_s, _, max_duration_s = self.loadgen_limits()
        if self.open_loop == "loadgen" and max_duration_s < min_duration_s:
            raise ValueError(f"max_duration_s {max_duration_s:g} is below min_duration_s {min_duration_s:g}: "
                             "LoadGen would stop every step before its minimum; raise max_duration_s")
        needed = self.planned_s()
        if needed > self.time_s:
            step_s = max_duration_s if self.open_loop == "loadgen" else self.duration_s
            canary = " and the canary's ladder" if self.canary is not None else ""
            raise ValueError(
                f"time_s {self.time_s} is too short for the plan: {len(self.stacks)} stack(s) x "
                f"(startup_timeout_s {self.startup_timeout_s:g} + {len(self.concurrency)} closed-loop steps "
                f"of duration_s {self.duration_s:g} + {self.open_steps()} open-loop steps of up to "
                f"{step_s:g} s){canary} need about {math.ceil(needed)} s; raise time_s or shorten the steps")
        return self

    def loadgen_limits(self) -> tuple[float, int, float]:
        """(min_duration_s, min_query_count, max_duration_s): the preset's, each overridable."""
        min_duration_s, min_query_count, max_duration_s = PRESETS[self.preset]
        return (self.min_duration_s if self.min_duration_s is not None else min_duration_s,
                self.min_query_count if self.min_query_count is not None else min_query_count,
                self.max_duration_s if self.max_duration_s is not None else max_duration_s)

    def open_steps(self) -> int:
        return len(self.target_qps) if self.open_loop == "loadgen" and self.target_qps else self.search_steps

    def drain_s(self) -> float:
        return max(2.0, 10 * self.slo_ms / 1000)

    def planned_s(self) -> float:
        """The longest the plan can take: start-up, warm-up, each step and its drain."""
        step_s = self.loadgen_limits()[2] if self.open_loop == "loadgen" else self.duration_s
        one_stack = (self.startup_timeout_s + WARMUP_S + len(self.concurrency) * self.duration_s
                     + self.open_steps() * (step_s + self.drain_s()))
        canary_s = (self.startup_timeout_s + WARMUP_S + len(self.concurrency) * self.duration_s
                    if self.canary is not None else 0.0)
        return len(self.stacks) * one_stack + canary_s


def step_metric(users: int, figure: str) -> str:
    return f"serve_c{users}_{figure}"


class ServingEvaluation(PostJobEvaluation):
    name = "serving"
    settings_model = ServingSettings
    figures: ClassVar[tuple[Figure, ...]] = (
        Figure("serve_cN_p50_ms", "median latency of POST /invocations with N concurrent users (closed "
                                  "loop), ms", "ms"),
        Figure("serve_cN_p95_ms", "95th percentile latency with N concurrent users, ms", "ms"),
        Figure("serve_cN_p99_ms", "99th percentile latency with N concurrent users, ms", "ms"),
        Figure("serve_cN_mean_ms", "mean latency with N concurrent users, ms", "ms"),
        Figure("serve_cN_rps", "successful responses per second with N concurrent users", "req/s"),
        Figure("serve_cN_error_rate", "share of requests that failed with N concurrent users", "share"),
        Figure("serve_cN_requests", "requests counted with N concurrent users (warm-up excluded)"),
        Figure("serve_cN_server_cpu_percent", "the scoring server's process tree CPU with N concurrent "
                                              "users, % of one core (200 = two cores busy)", "%"),
        Figure("serve_cN_server_peak_rss_mb", "the scoring server's process tree peak RSS with N "
                                              "concurrent users, MB", "MB"),
        Figure("serve_max_qps_at_slo", "highest Poisson arrival rate (req/s) held within serving.slo_ms "
                                       "with no errors: LoadGen's highest VALID rate (open_loop: loadgen) "
                                       "or Locust's search's",
            unit="req/s", higher_is_better=True, compared="cost", attributed=True, reported=True),
        Figure("serve_loadgen_valid_qps", "highest target QPS whose LoadGen server-scenario result was "
                                          "VALID at serving.latency_percentile within serving.slo_ms, with "
                                          "no HTTP errors", "req/s"),
        Figure("serve_loadgen_queries", "queries LoadGen counted in the step behind "
                                        "serve_loadgen_valid_qps"),
        Figure("serve_loadgen_duration_s", "wall time of the step behind serve_loadgen_valid_qps, seconds",
            "s"),
        Figure("serve_loadgen_percentile_ms", "LoadGen's latency at serving.latency_percentile in that "
                                              "step, ms", "ms"),
        Figure("serve_loadgen_p99_ms", "LoadGen's p99 latency in that step, ms", "ms"),
        Figure("serve_loadgen_server_cpu_percent", "the scoring server tree's CPU in that step, % of one "
                                                   "core", "%"),
        Figure("serve_loadgen_server_peak_rss_mb", "the scoring server tree's peak RSS in that step, MB",
            "MB"),
        Figure("serve_loadgen_steps", "LoadGen steps run (rates judged)"),
        Figure("serve_error_rate", "share of failed requests over every counted load step (a reading, not "
                                   "a failure)", "share"),
        Figure("serve_slo_ms", "the latency bound serve_max_qps_at_slo was searched for, ms", "ms"),
        Figure("serve_startup_s", "scoring server start until /ping first answered 200, seconds", "s"),
        Figure("serve_p99_ms", "p99 latency at the ladder's highest concurrency, ms (the cost figure "
                               "compare uses)",
            unit="ms", higher_is_better=False, compared="cost", attributed=True),
        Figure("serve_cold_start_s", "scoring server start until its first answer to a request, seconds",
            unit="s", higher_is_better=False, compared="cost", reported=True),
        Figure("serve_server_cpu_s_per_1k", "CPU seconds the server's process tree used per 1,000 requests "
                                            "over the whole load (closed and open loop, psutil before and "
                                            "after); the report derives the cores 100 QPS need from it",
            unit="s", higher_is_better=False, compared="cost", reported=True),
        Figure("serve_server_peak_rss_mb", "the server process tree's peak RSS over the whole load, MB",
            unit="MB", higher_is_better=False, compared="cost", reported=True),
        Figure("serve_canary_share_routed", "share of the requests to the canary's one address that its "
                                            "router sent to the second version (serving.canary.share asked)",
            "share", reported=True),
        Figure("serve_canary_agreement", "share of a test-fold sample both versions predict alike (labels "
                                         "equal; values within 1%), each scoring it directly",
            unit="share", higher_is_better=True, reported=True),
        Figure("serve_canary_primary_p50_ms", "median latency of the primary version behind the canary's "
                                              "router, as the router saw its answers, ms",
            unit="ms", higher_is_better=False, reported=True),
        Figure("serve_canary_primary_p99_ms", "p99 latency of the primary version behind the router, ms",
            unit="ms", higher_is_better=False, reported=True),
        Figure("serve_canary_primary_error_rate", "share of the primary version's routed requests that "
                                                  "failed",
            unit="share", higher_is_better=False, reported=True),
        Figure("serve_canary_primary_requests", "requests the router sent to the primary version"),
        Figure("serve_canary_p50_ms", "median latency of the canary (second) version behind the router, ms",
            unit="ms", higher_is_better=False, reported=True),
        Figure("serve_canary_p99_ms", "p99 latency of the canary version behind the router, ms",
            unit="ms", higher_is_better=False, reported=True),
        Figure("serve_canary_error_rate", "share of the canary version's routed requests that failed",
            unit="share", higher_is_better=False, reported=True),
        Figure("serve_canary_requests", "requests the router sent to the canary version"),
        Figure("serve_STACK_FIGURE", "a serve_FIGURE above measured on a stack other than mlflow "
                                     "(serving.stacks), e.g. serve_onnxruntime_c1_p99_ms"),
    )
    tags: ClassVar[dict[str, str]] = {
        "serving_stack.STACK": "each stack's outcome: ok | partial | skipped (the model cannot use it) | "
                               "parity failed | failed",
        "serving_stack.STACK.reason": "why a stack was skipped, failed parity (the largest difference) or "
                                      "failed",
        "serving_canary": "the canary's outcome (serving.canary): ok | skipped | failed",
        "serving_canary.reason": "why the canary was skipped or failed (e.g. its model was not found)",
    }
    grace_s = LOAD_GRACE_S

    def run(self, context: EvaluationContext) -> EvaluationResult:
        settings = context.settings
        assert isinstance(settings, ServingSettings)  # the context holds this evaluation's own settings
        folder = context.folder
        server_cores, load_cores = _placement(context.cores)
        info: dict[str, Any] = {
            "server_cores": server_cores, "load_cores": load_cores,
            "load_placement": "separate cores" if set(server_cores).isdisjoint(load_cores) else "shared core",
            "workers": context.budget.cores, "slo_ms": settings.slo_ms, "open_loop": settings.open_loop,
        }
        metrics: dict[str, float] = {}
        tags: dict[str, str] = {}
        files: list[str] = []
        problems: list[tuple[str, str, str]] = []  # (stack, status, reason) of each stack not ok
        stacks = all_stacks()
        for name in settings.stacks:
            # The mlflow stack keeps the evaluation's folder and figure names; another has its own.
            stack_folder = folder if name == DEFAULT_STACK else folder / STACKS_DIR / name
            stack_folder.mkdir(parents=True, exist_ok=True)
            outcome = _serve_stack(context, settings, stacks[name], stack_folder, server_cores, load_cores)
            metrics.update({stack_metric(name, metric): value for metric, value in outcome.metrics.items()})
            if name == DEFAULT_STACK:
                info.update(outcome.info)
            else:
                info.setdefault("stacks", {})[name] = outcome.info
            files += [str((stack_folder / file).relative_to(folder)) for file in _files(stack_folder)]
            tags[f"serving_stack.{name}"] = outcome.status
            if outcome.status != "ok":
                tags[f"serving_stack.{name}.reason"] = outcome.reason.splitlines()[0][:500]
                problems.append((name, outcome.status, outcome.reason))
        status, reason = _overall(settings, problems)
        if settings.canary is not None:
            canary = serve_canary(context, settings, settings.canary, stacks[settings.stacks[0]],
                                   folder / CANARY_DIR, server_cores, load_cores)
            metrics.update(canary.metrics)
            info["canary"] = canary.info
            tags["serving_canary"] = canary.status
            if canary.status != "ok":  # the primary's figures stand; the canary's reason joins theirs
                tags["serving_canary.reason"] = canary.reason.splitlines()[0][:500]
                status = "partial" if status == "ok" else status
                reason = "; ".join(part for part in (reason, f"canary: {canary.status} ({canary.reason})")
                                   if part)
        return EvaluationResult(status=status, reason=reason, metrics=metrics, files=files, info=info,
                                tags=tags)


def _overall(settings: ServingSettings, problems: list[tuple[str, str, str]]) -> tuple[EvaluationStatus, str]:
    """The evaluation's status and reason from its stacks' outcomes."""
    if len(settings.stacks) == 1 and problems:  # one stack: its outcome is the evaluation's
        _, outcome_status, reason = problems[0]
        only: EvaluationStatus = ("ok" if outcome_status == "skipped" else
                                  "partial" if outcome_status == "partial" else "failed")
        return only, reason
    broken = [name for name, what, _ in problems if what in ("failed", "parity failed")]
    noted = [name for name, what, _ in problems if what != "skipped"]
    every_stack_broke = len(broken) == len(settings.stacks)
    status: EvaluationStatus = "failed" if every_stack_broke else "partial" if noted else "ok"
    return status, "; ".join(f"{name}: {what} ({why.splitlines()[0]})" for name, what, why in problems)


def serve_canary(context: EvaluationContext, settings: ServingSettings, canary: CanarySettings,
                  stack: ServingStack, folder: Path, server_cores: list[int],
                  load_cores: list[int]) -> StackOutcome:
    """Both versions on `stack`, the router in front; the closed-loop ladder against the router, and
    a sample of the test fold scored by each version directly for their agreement."""
    try:
        other = canary_context(context, canary.model, folder / "canary")
        servers = []
        for version, version_context in (("primary", context), ("canary", other)):
            (folder / version).mkdir(parents=True, exist_ok=True)
            server = stack.server(version_context, folder / version, server_cores, settings.startup_timeout_s)
            server.request_path = stack.request_path
            server.details["version"] = version
            servers.append(server)
    except CanaryNotFound as exc:
        return StackOutcome("failed", str(exc))
    except (NotOffered, StackNotInstalled) as exc:
        return StackOutcome("skipped", f"the canary cannot be served on the {stack.name} stack: {exc}")
    primary, second = servers
    (folder / "router").mkdir(parents=True, exist_ok=True)
    router = RouterServer(folder / "router", workers=1, cores=server_cores, log_dir=folder / "router",
                          healthcheck_s=settings.startup_timeout_s)
    router.upstreams, router.share = (primary.url, second.url), canary.share
    router.request_path = stack.request_path
    info: dict[str, Any] = {"model": canary.model, "job": other.job.label, "job_dir": str(other.job_dir),
                            "share": canary.share, "stack": stack.name, "router_port": router.port}
    metrics: dict[str, float] = {}
    try:
        with primary, second, router:
            for server in (primary, second, router):
                server.start()
            for server in (primary, second, router):
                server.wait_until_up(settings.startup_timeout_s)
            body_of = lambda rows: stack.body(_client_rows(rows))  # noqa: E731 - one line, used once
            metrics["serve_canary_agreement"], rows = agreement(stack, primary, second, context,
                                                                canary.sample_rows, body_of)
            info["agreement_rows"] = rows
            _write_bodies(context, stack, folder / "router" / BODIES_FILE)
            ladder = settings.model_copy(update={"search_steps": 0, "open_loop": "locust"})
            load = _run_load(context, ladder, router, load_cores, folder / "router")
            info["steps"] = load["steps"]
            with urllib.request.urlopen(f"{router.url}/stats", timeout=10) as answer:
                metrics.update(version_metrics(json.loads(answer.read())))
    except ServingFailure as failure:
        return StackOutcome("failed", str(failure), metrics, info)
    return StackOutcome("ok", "", {k: v for k, v in metrics.items() if math.isfinite(v)}, info)


@dataclass
class StackOutcome:
    """One stack's part of the evaluation: ok, partial, skipped, parity failed or failed."""

    status: str
    reason: str = ""
    metrics: dict[str, float] = field(default_factory=dict)  # the mlflow stack's names
    info: dict[str, Any] = field(default_factory=dict)


def stack_metric(stack: str, metric: str) -> str:
    """A figure's name for a stack: the mlflow stack's as they are, another's with the stack's name."""
    return metric if stack == DEFAULT_STACK else metric.replace("serve_", f"serve_{stack}_", 1)


def _serve_stack(context: EvaluationContext, settings: ServingSettings, stack: ServingStack, folder: Path,
                 server_cores: list[int], load_cores: list[int]) -> StackOutcome:
    """Parity on the test fold first; then the closed loop and the open loop on a stack that agrees."""
    started = time.monotonic()
    try:
        server = stack.server(context, folder, server_cores, settings.startup_timeout_s)
    except NotOffered as exc:
        return StackOutcome("skipped", f"the model cannot use the {stack.name} stack: {exc}")
    except StackNotInstalled as exc:
        return StackOutcome("skipped", str(exc))
    server.request_path = stack.request_path
    bodies = _write_bodies(context, stack, folder / BODIES_FILE)
    info: dict[str, Any] = {"port": server.port, "build_s": time.monotonic() - started, **server.details}
    if stack.name == DEFAULT_STACK:
        info["pyfunc_build_s"] = info["build_s"]
    metrics: dict[str, float] = {}
    try:
        with server:
            server.start()
            metrics["serve_startup_s"] = server.wait_until_up(settings.startup_timeout_s)
            status, answer = server.invoke(bodies[0])
            if status != 200:
                raise ServingFailure(f"the {stack.name} server answered {stack.request_path} with HTTP "
                                     f"{status}: {answer.strip()[:300]}")
            metrics["serve_cold_start_s"] = time.monotonic() - server.started
            info["first_answer"] = answer[:1000]
            gap, limit = parity_gap(server, context, stack)
            info.update(parity_max_abs=gap, parity_tolerance=limit)
            if gap > limit:
                return StackOutcome("parity failed", info=info, reason=(
                    f"the {stack.name} stack's answers on the test fold differ from the model's in "
                    f"process by up to {gap:.3g}, over its tolerance {limit:.3g}, so none of its figures "
                    "is reported"))
            # The server tree's CPU and memory over all the load, for its cost per request.
            with SampledTree(server.process.pid if server.process is not None else 0) as tree:
                load = _run_load(context, settings, server, load_cores, folder)
                info["load_s"] = load.pop("wall_s")
                _check_alive(server, "the closed loop")
                loadgen: dict[str, Any] | None = None
                if settings.open_loop == "loadgen" and settings.open_steps():
                    loadgen = _run_loadgen(context, settings, server, load_cores, _closed_best_rps(load),
                                           folder)
                    info["loadgen_s"] = loadgen.pop("wall_s")
                    _check_alive(server, "LoadGen's open loop")
            info["worker_restarts"] = server.worker_restarts()
            metrics.update(_cost_metrics(tree, load, loadgen))
    except ServingFailure as failure:
        info["worker_restarts"] = server.worker_restarts()
        return StackOutcome("failed", f"{failure}.\n{server.log_tail()}".strip(), metrics, info)
    metrics.update(_load_metrics(load, settings))
    info.update(steps=load["steps"], search=load["search"], warmup=load["warmup"])
    if loadgen is not None:
        metrics.update(_loadgen_metrics(loadgen))
        info["loadgen"] = loadgen
        info["loadgen_settings"] = dict(zip(("min_duration_s", "min_query_count", "max_duration_s"),
                                            settings.loadgen_limits(), strict=True)) | {
            "preset": settings.preset, "latency_percentile": settings.latency_percentile}
    counted = [step for step in load["steps"] if step["requests"]]
    answered = sum(step["requests"] - step["failures"] for step in counted)
    if counted and answered == 0:  # it never answered under load: no figure here is a reading
        first = next(step for step in counted if step["first_error"])
        reason = (f"every request to /invocations under load failed, the first at {first['name']}: "
                  f"{first['first_error']}.\n{server.log_tail()}")
        return StackOutcome("failed", reason.strip(), metrics, info)
    # A rate LoadGen could not judge leaves the figures partial: the reason says which and why.
    loadgen_notes = [(loadgen or {}).get(key, "") for key in ("stopped_early", "unjudged")]
    partial = [load["stopped_early"], *loadgen_notes]
    if any(partial):
        return StackOutcome("partial", "; ".join(part for part in partial if part), metrics, info)
    return StackOutcome("ok", "", metrics, info)


def parity_gap(server: ScoringServer, context: EvaluationContext, stack: ServingStack) -> tuple[float, float]:
    """(largest |served - in process| on the test fold, the limit it is held to): probabilities as
    they are; regression values relative to their mean |value|, as the export evaluation holds them."""
    X_test = context.fold.X_test
    tolerance = stack.parity_tolerance
    status, answer = server.invoke(stack.body(_client_rows(X_test)), timeout_s=REQUEST_TIMEOUT_S * 4)
    if status != 200:
        raise ServingFailure(f"the server answered the test fold with HTTP {status}: {answer.strip()[:300]}")
    served = stack.answer_rows(answer)
    model, task = context.model, context.fold.task
    if task.is_classification:
        expected = model.predict_proba(X_test)
        columns = [f"{PROBA_PREFIX}{label}" for label in expected.columns]
        if not set(columns) <= set(served.columns):
            raise ServingFailure(f"the server's answer has the columns {list(served.columns)}, not {columns}")
        gap = np.abs(served[columns].to_numpy(dtype=float) - expected.to_numpy(dtype=float))
        return float(np.max(gap)) if gap.size else 0.0, tolerance
    values = np.asarray(model.predict(X_test), dtype=float)
    gap = np.abs(served[PREDICTION].to_numpy(dtype=float) - values)
    return float(np.max(gap)) if gap.size else 0.0, tolerance * max(1.0, float(np.mean(np.abs(values))))


def _check_alive(server: ScoringServer, phase: str) -> None:
    """The one load outcome that fails the evaluation: the server is gone."""
    code = server.process.poll() if server.process is not None else None
    if code is not None:
        raise ServingFailure(f"the scoring server exited with code {code} during {phase}")


def _closed_best_rps(load: dict[str, Any]) -> float:
    """The bisection's top: the best closed-loop throughput of a step without errors (the server
    was saturated there; no open-loop rate above it can be held)."""
    return max((step["rps"] for step in load["steps"]
                if step["mode"] == "closed" and not step["failures"] and step["rps"] > 0), default=0.0)


def _placement(cores: list[int]) -> tuple[list[int], list[int]]:
    """(server cores, load cores): the load on the last core when there are two or more."""
    if len(cores) >= 2:
        return cores[:-1], cores[-1:]
    return list(cores), list(cores)


def _write_bodies(context: EvaluationContext, stack: ServingStack, path: Path) -> list[bytes]:
    """One request body per test-fold row in the stack's format, written to `path` for the load
    processes."""
    X_test = context.fold.X_test
    rows = _client_rows(X_test.iloc[: min(MAX_BODIES, len(X_test))])
    lines = [stack.body(rows.iloc[[position]]).decode() for position in range(len(rows))]
    path.write_text("\n".join(lines) + "\n")
    return [line.encode() for line in lines]


def _client_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows as a client sends them: encoded images (bytes) as base64 text, as MLflow's JSON
    format has a binary column."""
    rows = rows.copy()
    for column in rows.columns:
        if rows[column].map(lambda value: isinstance(value, (bytes, bytearray))).any():
            rows[column] = rows[column].map(
                lambda value: base64.b64encode(value).decode("ascii") if isinstance(value, (bytes, bytearray))
                else value)
    return rows


def _run_load(context: EvaluationContext, settings: ServingSettings, server: ScoringServer,
              cores: list[int], folder: Path) -> dict[str, Any]:
    """Locust: warm-up, the closed-loop ladder, and (open_loop: locust) its own open-loop search."""
    loadgen_s = settings.open_steps() * (settings.loadgen_limits()[2] + settings.drain_s())
    time_s = max(1.0, context.time_left_s() - 5.0 - (loadgen_s if settings.open_loop == "loadgen" else 0))
    plan = {
        "url": server.url, "path": server.request_path, "bodies_file": str(folder / BODIES_FILE),
        "out_dir": str(folder),
        "concurrency": settings.concurrency, "duration_s": settings.duration_s,
        "max_requests": settings.max_requests, "slo_ms": settings.slo_ms,
        "search_steps": settings.search_steps if settings.open_loop == "locust" else 0,
        "warmup_requests": WARMUP_REQUESTS, "warmup_s": WARMUP_S,
        "time_s": time_s, "request_timeout_s": REQUEST_TIMEOUT_S, "cores": cores,
        "server_pid": server.process.pid if server.process is not None else 0,
    }
    return _run_child(folder, "tasks.evaluations._serving_load", plan, PLAN_FILE, LOAD_LOG, LOAD_RESULT,
                      time_s, "the load generator")


def _run_loadgen(context: EvaluationContext, settings: ServingSettings, server: ScoringServer,
                 cores: list[int], high_qps: float, folder: Path) -> dict[str, Any]:
    """LoadGen's server scenario: verdicts at target_qps, or the bisection below the closed loop's best."""
    min_duration_s, min_query_count, max_duration_s = settings.loadgen_limits()
    time_s = max(1.0, context.time_left_s() - 5.0)
    plan = {
        "url": server.url, "path": server.request_path, "bodies_file": str(folder / BODIES_FILE),
        "out_dir": str(folder),
        "slo_ms": settings.slo_ms, "latency_percentile": settings.latency_percentile,
        "min_duration_s": min_duration_s, "min_query_count": min_query_count,
        "max_duration_s": max_duration_s, "drain_s": settings.drain_s(),
        "search_steps": settings.search_steps, "target_qps": settings.target_qps,
        "high_qps": high_qps, "time_s": time_s, "request_timeout_s": REQUEST_TIMEOUT_S, "cores": cores,
        "server_pid": server.process.pid if server.process is not None else 0,
    }
    loadgen = _run_child(folder, "tasks.evaluations._loadgen_search", plan, LOADGEN_PLAN_FILE, LOADGEN_LOG,
                         LOADGEN_RESULT, time_s, "LoadGen")
    if not settings.target_qps and high_qps <= 0:
        loadgen["reason"] = "no closed-loop step ran without errors, so no rate was searched"
    return loadgen


def _run_child(folder: Path, module: str, plan: dict[str, Any], plan_file: str, log_file: str,
               result_file: str, time_s: float, what: str) -> dict[str, Any]:
    """One load process (its own: Locust's gevent patches its process; LoadGen runs threads in C++),
    its working directory the evaluation's folder so nothing it writes lands in the checkout."""
    (folder / plan_file).write_text(json.dumps(plan, indent=2))
    command = [sys.executable, "-m", module, str(folder / plan_file)]
    environment = python_environment(1)
    # The working directory is the evaluation's folder, so the checkout must be on the path.
    environment["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(PACKAGE_ROOT), environment.get("PYTHONPATH", "")) if part)
    started = time.monotonic()
    with open(folder / log_file, "ab") as log:
        try:
            completed = subprocess.run(command, cwd=folder, env=environment,
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       timeout=time_s + LOAD_GRACE_S, check=False,
                                       preexec_fn=die_with_parent)
        except subprocess.TimeoutExpired:
            raise ServingFailure(f"{what} overran its limit of {time_s + LOAD_GRACE_S:.0f} s") from None
    result_path = folder / result_file
    if completed.returncode != 0 or not result_path.is_file():
        tail = error_tail((folder / log_file).read_text(errors="replace"))
        raise ServingFailure(f"{what} exited with code {completed.returncode}:\n{tail}")
    result = json.loads(result_path.read_text())
    result["wall_s"] = time.monotonic() - started
    return result


def _load_metrics(load: dict[str, Any], settings: ServingSettings) -> dict[str, float]:
    metrics: dict[str, float] = {}
    closed = [step for step in load["steps"] if step["mode"] == "closed"]
    for step in closed:
        for figure in ("p50_ms", "p95_ms", "p99_ms", "mean_ms", "rps", "error_rate", "requests",
                       "server_cpu_percent", "server_peak_rss_mb"):
            if figure in step:
                metrics[step_metric(step["users"], figure)] = float(step[figure])
    if closed:
        metrics["serve_p99_ms"] = float(closed[-1]["p99_ms"])
    requests = sum(step["requests"] for step in load["steps"])
    if requests:
        metrics["serve_error_rate"] = sum(step["failures"] for step in load["steps"]) / requests
    if settings.open_loop == "locust" and "max_qps_at_slo" in load["search"] and settings.search_steps:
        metrics["serve_max_qps_at_slo"] = float(load["search"]["max_qps_at_slo"])
        metrics["serve_slo_ms"] = float(settings.slo_ms)
    if settings.open_loop == "loadgen":
        metrics["serve_slo_ms"] = float(settings.slo_ms)
    return {name: value for name, value in metrics.items() if math.isfinite(value)}


def _cost_metrics(tree: SampledTree, load: dict[str, Any],
                  loadgen: dict[str, Any] | None) -> dict[str, float]:
    """The server tree's CPU seconds per 1,000 requests sent under load (warm-up, every Locust step,
    every LoadGen query) and its peak RSS over the load."""
    requests = load["warmup"]["requests"] + sum(step["requests"] for step in load["steps"])
    requests += sum(step["queries"] for step in (loadgen or {}).get("steps", []))
    metrics = {"serve_server_peak_rss_mb": tree.peak_rss_mb}
    if requests:
        metrics["serve_server_cpu_s_per_1k"] = 1000 * tree.cpu_s / requests
    return {name: value for name, value in metrics.items() if math.isfinite(value)}


def _loadgen_metrics(loadgen: dict[str, Any]) -> dict[str, float]:
    """The highest VALID rate and the step behind it: 0 QPS when every rate judged was over the SLO,
    none when no rate was VALID and some could not be judged (loadgen["unjudged"] says why)."""
    metrics = {"serve_loadgen_steps": float(len(loadgen["steps"]))}
    if not loadgen["steps"] or loadgen["max_valid_qps"] is None:
        return metrics
    metrics["serve_loadgen_valid_qps"] = metrics["serve_max_qps_at_slo"] = float(loadgen["max_valid_qps"])
    best = loadgen.get("best") or {}
    for metric, key in (("serve_loadgen_queries", "queries"), ("serve_loadgen_duration_s", "duration_s"),
                        ("serve_loadgen_percentile_ms", "percentile_latency_ms"),
                        ("serve_loadgen_p99_ms", "p99_ms"),
                        ("serve_loadgen_server_cpu_percent", "server_cpu_percent"),
                        ("serve_loadgen_server_peak_rss_mb", "server_peak_rss_mb")):
        if key in best:
            metrics[metric] = float(best[key])
    return {name: value for name, value in metrics.items() if math.isfinite(value)}


def _files(folder: Path) -> list[str]:
    """Locust's stats CSVs and the logs, relative to the evaluation folder (the served model is not
    attached here: tracking logs the same model with the job)."""
    names = [HISTORY_CSV, LOAD_RESULT, SERVER_LOG, LOAD_LOG, PLAN_FILE, LOADGEN_RESULT, LOADGEN_LOG,
             LOADGEN_PLAN_FILE]
    files = [name for name in names if (folder / name).is_file()]
    files += sorted(str(path.relative_to(folder)) for path in (folder / CSV_DIR).glob("*.csv"))
    # LoadGen's summary of each step is the artifact MLPerf readers know; the detail logs stay in the folder.
    summaries = (folder / LOADGEN_DIR).glob(f"*/{SUMMARY_FILE}")
    files += sorted(str(path.relative_to(folder)) for path in summaries)
    return files


EVALUATION = ServingEvaluation()
