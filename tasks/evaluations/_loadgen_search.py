"""The serving evaluation's open loop under MLPerf's rules: `python -m tasks.evaluations._loadgen_search P`.

MLPerf LoadGen (``mlcommons-loadgen``, used as a library) runs its server scenario: it issues
Poisson queries at a target rate, times each from its scheduled issue to its completion, applies
its minimum duration and query count and its early stopping, and gives a VALID or INVALID verdict.
The system under test here is a pool of threads that send each query as a real POST /invocations
(one test-fold row) to the scoring server on 127.0.0.1 and report it complete when the answer is
back. A process of its own, started with the evaluation's folder as its working directory: LoadGen
reads an optional ``audit.config`` from the working directory and must never find or write one in
the checkout.

Either the suite names the rates to judge (``target_qps``), or a search finds the highest VALID
rate: it starts at the closed loop's best throughput and doubles the rate while LoadGen judges it
VALID, so that the search holds a rate over the SLO, then bisects between the highest VALID rate and
the lowest INVALID one. An HTTP error is a reading: the query still completes
for LoadGen, the step counts it, and a step with errors is over its SLO whatever LoadGen says.
Each step records the server process tree's CPU % and peak RSS (psutil).

At Q QPS LoadGen needs about min_query_count / Q seconds to issue its minimum of queries; a step
capped below that ends INVALID ("exited early") whatever the model, so a low rate's step is
lengthened past max_duration_s while the time left allows. A rate whose minimum does not fit in
the time left is not judged: the result names it and why (``unjudged``), and reports no highest
VALID rate rather than 0 when no rate was judged VALID.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import queue
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import mlperf_loadgen as lg

from tasks.resources import SampledTree

LOADGEN_RESULT = "loadgen.json"
LOADGEN_DIR = "loadgen"  # one folder of LoadGen logs per step
SUMMARY_FILE = "mlperf_log_summary.txt"
DETAIL_FILE = "mlperf_log_detail.txt"
HEADERS = {"Content-Type": "application/json"}
MAX_SENDERS = 256
SAMPLE_S = 0.25
# LoadGen's verdict when a step's cap came before its minimum of queries: not a reading of the server.
TOO_FEW_QUERIES = "before enough queries were issued"
# Poisson arrivals: n queries take n / Q seconds on average, give or take sqrt(n) / Q; a lengthened
# step allows this many spreads more, and a second, so that chance alone does not end it early.
ARRIVAL_SPREADS = 4.0


@dataclass
class LoadGenStep:
    """One LoadGen server-scenario run at one target rate (plain data in loadgen.json)."""

    target_qps: float
    validity: str = "INVALID"  # LoadGen's verdict
    within_slo: bool = False  # VALID and no HTTP errors
    invalid_reason: str = ""
    early_stopping_met: bool | None = None
    early_stopping_result: str = ""
    queries: int = 0
    overlatency_queries: int = 0
    duration_s: float = 0.0
    scheduled_qps: float = math.nan
    completed_qps: float = math.nan
    percentile_latency_ms: float = math.nan  # at the plan's latency_percentile
    p50_ms: float = math.nan
    p99_ms: float = math.nan
    max_ms: float = math.nan
    errors: int = 0
    error_rate: float = 0.0
    first_error: str = ""
    server_cpu_percent: float = math.nan  # of one core: 250 means two and a half cores busy
    server_peak_rss_mb: float = math.nan
    max_duration_s: float = math.nan  # the cap this step ran under (lengthened for a low rate)
    log_dir: str = ""  # relative to the evaluation folder


def read_detail_log(path: Path) -> dict[str, Any]:
    """LoadGen's detail log as {key: value}: each line `:::MLLOG {json}`; the last value of a key wins."""
    values: dict[str, Any] = {}
    for line in path.read_text(errors="replace").splitlines():
        if not line.startswith(":::MLLOG "):
            continue
        try:
            entry = json.loads(line.removeprefix(":::MLLOG "))
        except json.JSONDecodeError:
            continue
        values[entry.get("key", "")] = entry.get("value")
    return values


def _percentile_key(percentile: float) -> str:
    return f"result_{percentile * 100:.2f}_percentile_latency_ns"


class HttpSut:
    """LoadGen's system under test: threads that send each query to the scoring server."""

    def __init__(self, url: str, path: str, bodies: list[bytes], senders: int, timeout_s: float) -> None:
        parts = urlsplit(url)
        self.path = path
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.bodies = bodies
        self.timeout_s = timeout_s
        self.queries: queue.Queue[Any] = queue.Queue()
        self.lock = threading.Lock()
        self.errors = 0
        self.first_error = ""
        self.threads = [threading.Thread(target=self._send_loop, daemon=True) for _ in range(senders)]
        for thread in self.threads:
            thread.start()

    def issue(self, samples: list[Any]) -> None:
        for sample in samples:
            self.queries.put(sample)

    def flush(self) -> None:
        """LoadGen's end-of-test call: nothing is batched here."""

    def reset_counts(self) -> None:
        with self.lock:
            self.errors, self.first_error = 0, ""

    def close(self) -> None:
        for _ in self.threads:
            self.queries.put(None)
        for thread in self.threads:
            thread.join(timeout=self.timeout_s + 1)

    def _send_loop(self) -> None:
        connection: http.client.HTTPConnection | None = None
        while (sample := self.queries.get()) is not None:
            error = ""
            try:
                if connection is None:
                    connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
                connection.request("POST", self.path, body=self.bodies[sample.index % len(self.bodies)],
                                   headers=HEADERS)
                response = connection.getresponse()
                text = response.read()
                if response.status != 200:
                    error = f"HTTP {response.status}: {text[:300].decode(errors='replace')}"
            except (OSError, http.client.HTTPException) as failure:
                error = f"no answer: {failure!r}"[:300]
                if connection is not None:
                    connection.close()
                connection = None  # a broken keep-alive connection is not reused
            if error:
                with self.lock:
                    self.errors += 1
                    self.first_error = self.first_error or error
            # Completed either way: LoadGen has no notion of a failed query, the step counts it.
            lg.QuerySamplesComplete([lg.QuerySampleResponse(sample.id, 0, 0)])


def step_cap_s(plan: dict[str, Any], rate: float) -> float:
    """The step's duration cap at `rate`: max_duration_s, or longer where LoadGen needs longer to issue
    min_query_count Poisson queries at that rate."""
    queries = int(plan["min_query_count"])
    needed_s = (queries + ARRIVAL_SPREADS * math.sqrt(queries)) / rate + 1.0
    return max(float(plan["max_duration_s"]), needed_s)


def test_settings(plan: dict[str, Any], rate: float) -> lg.TestSettings:
    settings = lg.TestSettings()
    settings.scenario = lg.TestScenario.Server
    settings.mode = lg.TestMode.PerformanceOnly
    settings.server_target_qps = rate
    settings.server_target_latency_ns = int(plan["slo_ms"] * 1e6)
    settings.server_target_latency_percentile = float(plan["latency_percentile"])
    settings.min_duration_ms = int(plan["min_duration_s"] * 1000)
    settings.min_query_count = int(plan["min_query_count"])
    settings.max_duration_ms = int(step_cap_s(plan, rate) * 1000)
    return settings


def run_step(plan: dict[str, Any], rate: float, index: int, bodies: list[bytes]) -> LoadGenStep:
    out = Path(plan["out_dir"])
    log_dir = out / LOADGEN_DIR / f"step{index}_{rate:.4g}qps"
    log_dir.mkdir(parents=True, exist_ok=True)
    slo_s = plan["slo_ms"] / 1000
    # Enough senders that a query waits for the server, not for a free client thread.
    senders = min(MAX_SENDERS, max(4, math.ceil(rate * (slo_s * 2 + 0.05)) + 4))
    sut_object = HttpSut(plan["url"], plan.get("path", "/invocations"), bodies, senders,
                         float(plan["request_timeout_s"]))
    sut = lg.ConstructSUT(sut_object.issue, sut_object.flush)
    qsl = lg.ConstructQSL(len(bodies), len(bodies), lambda _: None, lambda _: None)
    output = lg.LogOutputSettings()
    output.outdir = str(log_dir)
    output.copy_summary_to_stdout = False
    log_settings = lg.LogSettings()
    log_settings.log_output = output
    started = time.monotonic()
    try:
        with SampledTree(int(plan.get("server_pid") or 0), SAMPLE_S) as server:
            lg.StartTestWithLogSettings(sut, qsl, test_settings(plan, rate), log_settings)
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
        sut_object.close()
    detail = read_detail_log(log_dir / DETAIL_FILE) if (log_dir / DETAIL_FILE).is_file() else {}
    step = LoadGenStep(target_qps=rate, log_dir=str(log_dir.relative_to(out)),
                       duration_s=time.monotonic() - started, max_duration_s=step_cap_s(plan, rate))
    step.validity = str(detail.get("result_validity", "INVALID"))
    step.invalid_reason = str(detail.get("result_invalid_reason") or "")
    step.early_stopping_met = detail.get("early_stopping_met")
    step.early_stopping_result = " ".join(str(detail.get("early_stopping_result", "")).split())
    step.queries = int(detail.get("result_query_count") or 0)
    step.overlatency_queries = int(detail.get("result_overlatency_query_count") or 0)
    step.scheduled_qps = float(detail.get("result_scheduled_samples_per_sec", math.nan))
    step.completed_qps = float(detail.get("result_completed_samples_per_sec", math.nan))
    for attribute, key in (("percentile_latency_ms", _percentile_key(plan["latency_percentile"])),
                           ("p50_ms", _percentile_key(0.5)), ("p99_ms", _percentile_key(0.99)),
                           ("max_ms", "result_max_latency_ns")):
        if key in detail:
            setattr(step, attribute, float(detail[key]) / 1e6)
    step.errors, step.first_error = sut_object.errors, sut_object.first_error
    step.error_rate = step.errors / step.queries if step.queries else 0.0
    step.within_slo = step.validity == "VALID" and step.errors == 0
    step.server_cpu_percent, step.server_peak_rss_mb = server.figures()
    return step


def search(plan: dict[str, Any], bodies: list[bytes], deadline: float) -> dict[str, Any]:
    """LoadGen verdicts at the suite's rates, or a bisection for the highest VALID rate.

    `max_valid_qps` is None when no rate was VALID and some rate could not be judged (`unjudged`
    says which and why): 0 would read as "this model cannot be served at any rate".
    """
    steps: list[LoadGenStep] = []
    unjudged: dict[float, str] = {}  # rate: why LoadGen could not judge it
    found: dict[str, Any] = {"max_valid_qps": 0.0, "stopped_early": "", "unjudged": ""}
    drain_s = float(plan["drain_s"])

    def judge(rate: float) -> LoadGenStep | None:
        cap_s, left_s = step_cap_s(plan, rate), deadline - time.monotonic()
        queries = int(plan["min_query_count"])
        if cap_s + drain_s <= left_s:
            steps.append(run_step(plan, rate, len(steps), bodies))
            if TOO_FEW_QUERIES not in steps[-1].invalid_reason:
                return steps[-1]
            unjudged[rate] = (f"its step ended after {steps[-1].queries} of the min_query_count of "
                              f"{queries} queries")
        elif cap_s <= float(plan["max_duration_s"]):  # an ordinary step: the time is simply spent
            found["stopped_early"] = f"the time limit came after {len(steps)} LoadGen steps"
            return None
        else:
            unjudged[rate] = (f"its min_query_count of {queries} queries takes about {cap_s:.0f} s at "
                              f"{rate:.4g} QPS, more than the {max(left_s, 0.0):.0f} s left of "
                              "serving.time_s; raise serving.time_s or lower serving.min_query_count")
        found["unjudged"] = (f"LoadGen could not judge {', '.join(f'{r:.4g}' for r in sorted(unjudged))} "
                             f"QPS: {unjudged[min(unjudged)]}")
        return None

    if plan.get("target_qps"):
        for rate in plan["target_qps"]:
            # Ascending: a higher rate issues its minimum sooner, so it may still fit.
            if judge(float(rate)) is None and found["stopped_early"]:
                break
    else:
        # The closed loop's best throughput is a first guess at capacity, not a bound: an open loop
        # may hold it (or more), so the search doubles until a rate is over the SLO, then bisects.
        low, over = 0.0, None
        rate = float(plan.get("high_qps") or 0.0)
        for _ in range(int(plan["search_steps"])):
            if rate <= 0:
                break
            step = judge(rate)
            if step is None:  # out of time, or a rate too low to judge in the time left
                break
            if step.within_slo:
                low = rate
            else:
                over = rate
            found["bracket"] = [low, over]
            rate = rate * 2 if over is None else (low + over) / 2
    valid = [step for step in steps if step.within_slo]
    if valid:
        best = max(valid, key=lambda step: step.target_qps)
        found.update(max_valid_qps=best.target_qps, best=asdict(best))
    elif unjudged:
        found["max_valid_qps"] = None
    found["steps"] = [asdict(step) for step in steps]
    return found


def main(argv: list[str]) -> int:
    plan = json.loads(Path(argv[1]).read_text())
    if plan.get("cores"):
        os.sched_setaffinity(0, plan["cores"])
    deadline = time.monotonic() + float(plan["time_s"])
    bodies = [line.encode() for line in Path(plan["bodies_file"]).read_text().splitlines() if line]
    result = search(plan, bodies, deadline)
    result["loadgen_version"] = _loadgen_version(Path(plan["out_dir"]) / LOADGEN_DIR)
    (Path(plan["out_dir"]) / LOADGEN_RESULT).write_text(json.dumps(result, indent=2, default=float))
    return 0


def _loadgen_version(folder: Path) -> str:
    for detail in sorted(folder.glob(f"*/{DETAIL_FILE}")):
        return str(read_detail_log(detail).get("loadgen_version", ""))
    return ""


if __name__ == "__main__":
    sys.exit(main(sys.argv))
