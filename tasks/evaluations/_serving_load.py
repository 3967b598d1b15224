"""The serving evaluation's load generator: `python -m tasks.evaluations._serving_load PLAN.json`.

A process of its own because Locust (used here as a library, headless) runs on gevent, which
monkey-patches the process it is imported in. It reads the plan written by serving.py, sends real
POST /invocations bodies (one test-fold row each) to the scoring server on 127.0.0.1, and writes
load.json (one record per step, plus the search) and Locust's stats CSVs per step.

- Warm-up: a few requests first, never counted.
- Closed loop: for each concurrency N, N users each send a request as soon as the last one came
  back, for `duration_s` or `max_requests`, whichever comes first.
- Open loop: Poisson arrivals at a rate; each request is sent at its scheduled time (or as soon as
  a user is free) and its latency counts from that scheduled time, so queueing counts (MLPerf's
  server scenario). A request still unanswered when the step's drain time ends counts as an error.
  A bisection finds the highest rate whose p99 stays within the SLO with no errors.
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tasks.resources import ProcessTreeSampler

LOAD_RESULT = "load.json"
CSV_DIR = "locust"
HISTORY_CSV = "history.csv"
HEADERS = {"Content-Type": "application/json"}
MAX_OPEN_USERS = 400  # greenlets that carry an open-loop step's arrivals
WARMUP_USERS = 2
SAMPLE_S = 0.25
MIN_ARRIVALS = 5  # the search stops at rates that expect fewer requests per step


@dataclass
class StepRecord:
    """One counted load step (plain data in load.json)."""

    name: str
    mode: str  # closed | open
    users: int
    target_rate: float = 0.0  # open loop: arrivals per second asked for
    requests: int = 0  # answered or failed; for the open loop also those never answered
    failures: int = 0
    duration_s: float = 0.0
    rps: float = 0.0  # successful responses per second
    p50_ms: float = math.nan
    p95_ms: float = math.nan
    p99_ms: float = math.nan
    mean_ms: float = math.nan
    max_ms: float = math.nan
    first_error: str = ""
    within_slo: bool | None = None  # open loop: p99 <= slo_ms and no errors
    server_cpu_percent: float = math.nan  # the server tree's CPU over the step, % of one core
    server_peak_rss_mb: float = math.nan

    @property
    def error_rate(self) -> float:
        return self.failures / self.requests if self.requests else math.nan


@dataclass
class _Live:
    """The step now running, shared by the users (greenlets) and the controller."""

    name: str
    mode: str
    measuring: bool = False
    t0: float = 0.0
    arrivals: list[float] = field(default_factory=list)  # open loop: offsets from t0, seconds
    next_arrival: int = 0
    limit: int = 0  # closed loop: requests the users may send while measuring
    sent: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    failures: int = 0
    first_error: str = ""
    last_done: float = 0.0

    @property
    def recorded(self) -> int:
        return len(self.latencies_ms) + self.failures

    def take_arrival(self) -> int | None:
        if self.next_arrival >= len(self.arrivals):
            return None
        self.next_arrival += 1
        return self.next_arrival - 1


def _percentiles(record: StepRecord, latencies: list[float]) -> None:
    import numpy as np

    if latencies:
        values = np.asarray(latencies, dtype=float)
        record.p50_ms, record.p95_ms, record.p99_ms = (float(v) for v in np.percentile(values, [50, 95, 99]))
        record.mean_ms, record.max_ms = float(values.mean()), float(values.max())


def poisson_arrivals(rate: float, duration_s: float, limit: int, seed: int) -> list[float]:
    """Arrival offsets (s) of a Poisson process at `rate` per second within `duration_s`, at most `limit`."""
    import numpy as np

    rng = np.random.default_rng(seed)
    expected = int(rate * duration_s * 1.5) + 20
    offsets = np.cumsum(rng.exponential(1.0 / rate, size=expected))
    return [float(t) for t in offsets[offsets < duration_s][:limit]]


def main(argv: list[str]) -> int:
    plan = json.loads(Path(argv[1]).read_text())
    if plan.get("cores"):
        os.sched_setaffinity(0, plan["cores"])
    out = Path(plan["out_dir"])
    (out / CSV_DIR).mkdir(parents=True, exist_ok=True)
    import itertools

    import gevent
    from locust import FastHttpUser, constant, task
    from locust.env import Environment
    from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

    bodies = [line for line in Path(plan["bodies_file"]).read_text().splitlines() if line]
    body_index = itertools.count()
    live: dict[str, _Live | None] = {"step": None}
    timeout_s = float(plan["request_timeout_s"])
    request_path = plan.get("path", "/invocations")  # the stack's

    class ScoringUser(FastHttpUser):
        host = plan["url"]
        wait_time = constant(0)
        network_timeout = timeout_s
        connection_timeout = timeout_s

        @task
        def invoke(self) -> None:
            step = live["step"]
            if step is None or (step.mode == "open" and not step.measuring):
                gevent.sleep(0.01)
                return
            if step.mode == "closed" and step.measuring:
                if step.sent >= step.limit:  # the step's request budget is spent: wait for the stop
                    gevent.sleep(0.01)
                    return
                step.sent += 1
            body = bodies[next(body_index) % len(bodies)]
            scheduled = None
            if step.mode == "open":
                index = step.take_arrival()
                if index is None:  # this step's arrivals are all out: wait for the stop
                    gevent.sleep(0.05)
                    return
                scheduled = step.t0 + step.arrivals[index]
                gevent.sleep(max(0.0, scheduled - time.perf_counter()))
            with self.client.post(request_path, data=body, headers=HEADERS, name=step.name,
                                  catch_response=True) as response:
                if scheduled is not None:  # the open loop counts from the scheduled send time
                    response.request_meta["response_time"] = (time.perf_counter() - scheduled) * 1000
                if response.status_code == 0:  # no HTTP answer: refused, reset or timed out
                    response.failure(f"no answer: {response.error!r}"[:300])
                elif response.status_code != 200:
                    response.failure(f"HTTP {response.status_code}: {(response.text or '')[:300]}")

    environment = Environment(user_classes=[ScoringUser], host=plan["url"], stop_timeout=None)
    runner = environment.create_local_runner()

    def on_request(name: str, response_time: float, exception: Any = None, **_: Any) -> None:
        step = live["step"]
        if step is None or name != step.name or not step.measuring:
            return
        if exception is None:
            step.latencies_ms.append(float(response_time))
        else:
            step.failures += 1
            step.first_error = step.first_error or str(exception)[:500]
        step.last_done = time.perf_counter()

    environment.events.request.add_listener(on_request)
    history_file = open(out / HISTORY_CSV, "w", newline="")  # noqa: SIM115 - closed at the end
    history = csv.writer(history_file)
    history.writerow(["step", "elapsed_s", "users", "requests", "failures"])
    deadline = time.monotonic() + float(plan["time_s"])

    server = ProcessTreeSampler(int(plan["server_pid"])) if plan.get("server_pid") else None

    def sample(step: _Live) -> None:
        if server is not None:
            server.sample()
        history.writerow([step.name, round(time.perf_counter() - step.t0, 3), runner.user_count,
                          step.recorded, step.failures])

    def write_csvs(name: str) -> None:
        stats_csv = StatsCSV(environment, PERCENTILES_TO_REPORT)
        stem = name.replace(" ", "_").replace("/s", "_per_s")
        with open(out / CSV_DIR / f"{stem}_stats.csv", "w", newline="") as handle:
            stats_csv.requests_csv(csv.writer(handle))
        with open(out / CSV_DIR / f"{stem}_failures.csv", "w", newline="") as handle:
            stats_csv.failures_csv(csv.writer(handle))

    def spawn(users: int) -> None:
        runner.start(users, spawn_rate=min(100, users))
        while runner.user_count < users:
            gevent.sleep(0.02)

    def closed_step(name: str, users: int, duration_s: float, limit: int) -> StepRecord:
        step = _Live(name, "closed", limit=limit)
        live["step"] = step
        spawn(users)
        environment.stats.reset_all()  # what the users sent while they were spawned is not counted
        if server is not None:  # the step's own peak and CPU, not the run's so far
            server.peak_rss_mb = 0.0
            server.sample()
        cpu_start = server.cpu_s if server is not None else 0.0
        step.t0, step.measuring = time.perf_counter(), True
        # Until the time is up or every request the budget allows has come back (at most `users`
        # sent before the count started may land on top).
        while time.perf_counter() - step.t0 < duration_s and step.recorded < limit:
            gevent.sleep(SAMPLE_S if limit - step.recorded > users * 4 else 0.005)
            sample(step)
            if step.sent >= limit and step.recorded >= step.sent:
                break
        step.measuring = False
        elapsed = time.perf_counter() - step.t0
        runner.stop()
        write_csvs(name)
        record = StepRecord(name, "closed", users, requests=step.recorded, failures=step.failures,
                            duration_s=elapsed, rps=len(step.latencies_ms) / max(elapsed, 1e-9),
                            first_error=step.first_error)
        _percentiles(record, step.latencies_ms)
        if server is not None:
            server.sample()
            record.server_cpu_percent = 100 * (server.cpu_s - cpu_start) / max(elapsed, 1e-9)
            record.server_peak_rss_mb = server.peak_rss_mb or math.nan
        return record

    def open_step(rate: float, seed: int) -> StepRecord:
        name = f"open {rate:.4g}/s"
        step = _Live(name, "open")
        step.arrivals = poisson_arrivals(rate, float(plan["duration_s"]), int(plan["max_requests"]), seed)
        users = min(MAX_OPEN_USERS, max(4, math.ceil(rate * (plan["slo_ms"] / 1000 * 2 + 0.05)) + 2))
        live["step"] = step
        spawn(users)
        environment.stats.reset_all()
        if server is not None:  # the step's own peak and CPU, as in the closed loop
            server.peak_rss_mb = 0.0
            server.sample()
        cpu_start = server.cpu_s if server is not None else 0.0
        step.t0 = time.perf_counter() + 0.05
        step.measuring = True
        window_s = (step.arrivals[-1] if step.arrivals else 0.0) + drain_s
        while step.recorded < len(step.arrivals) and time.perf_counter() - step.t0 < window_s:
            gevent.sleep(SAMPLE_S)
            sample(step)
        step.measuring = False
        unanswered = len(step.arrivals) - step.recorded
        runner.stop()
        write_csvs(name)
        elapsed = max((step.last_done or time.perf_counter()) - step.t0, 1e-9)
        record = StepRecord(name, "open", users, target_rate=rate, requests=len(step.arrivals),
                            failures=step.failures + unanswered, duration_s=elapsed,
                            rps=len(step.latencies_ms) / elapsed, first_error=step.first_error or (
                                f"{unanswered} requests unanswered {drain_s:.1f} s after the last arrival"
                                if unanswered else ""))
        _percentiles(record, step.latencies_ms)
        record.within_slo = record.failures == 0 and bool(step.latencies_ms) and (
            record.p99_ms <= plan["slo_ms"])
        if server is not None:
            server.sample()
            record.server_cpu_percent = 100 * (server.cpu_s - cpu_start) / elapsed
            record.server_peak_rss_mb = server.peak_rss_mb or math.nan
        return record

    slo_s = float(plan["slo_ms"]) / 1000
    drain_s = max(2.0, 10 * slo_s)
    steps: list[StepRecord] = []
    stopped_early = ""
    try:
        warmup = closed_step("warm-up", WARMUP_USERS, float(plan["warmup_s"]), int(plan["warmup_requests"]))
        for users in plan["concurrency"]:
            if time.monotonic() + plan["duration_s"] > deadline:
                stopped_early = f"the time limit came before the closed-loop step c{users}"
                break
            steps.append(closed_step(f"c{users}", int(users), float(plan["duration_s"]),
                                     int(plan["max_requests"])))
        search = search_rate(steps, plan, open_step, deadline, drain_s)
        stopped_early = stopped_early or search.pop("stopped_early", "")
    finally:
        runner.quit()
        history_file.close()
    result = {
        "warmup": {"requests": warmup.requests, "failures": warmup.failures,
                   "first_error": warmup.first_error},
        "steps": [asdict(step) | {"error_rate": step.error_rate} for step in steps],
        "search": search,
        "stopped_early": stopped_early,
    }
    (out / LOAD_RESULT).write_text(json.dumps(result, indent=2, default=float))
    return 0


def search_rate(steps: list[StepRecord], plan: dict[str, Any], open_step: Any, deadline: float,
                drain_s: float) -> dict[str, Any]:
    """Bisection on the Poisson rate: the highest one held within the SLO (0 when none is).

    The bracket's top is the best closed-loop throughput, where the server was saturated: no
    arrival rate above it can be held for long, however little backlog a short step builds up
    (a step of D seconds at a rate 5% too high queues only 5% of D's requests), so the search
    never returns one.
    """
    closed_ok = [step.rps for step in steps if step.failures == 0 and step.rps > 0]
    search: dict[str, Any] = {"max_qps_at_slo": 0.0, "rates": []}
    if not closed_ok:
        search["reason"] = "no closed-loop step ran without errors, so no rate was tried"
        return search
    high = max(closed_ok)
    low = 0.0
    for index in range(int(plan["search_steps"])):
        rate = (low + high) / 2 if low > 0 else high / 2
        if rate * plan["duration_s"] < MIN_ARRIVALS:  # too few requests in a step to judge a p99
            search["below_measurable"] = rate
            break
        if time.monotonic() + plan["duration_s"] + drain_s > deadline:
            search["stopped_early"] = f"the time limit came after {index} open-loop steps of the search"
            break
        record = open_step(rate, seed=index)
        steps.append(record)
        search["rates"].append({"rate": rate, "within_slo": record.within_slo, "p99_ms": record.p99_ms,
                                "error_rate": record.error_rate})
        if record.within_slo:
            low = rate
        else:
            high = rate
    search["max_qps_at_slo"] = low
    search["bracket"] = [low, high]
    return search


if __name__ == "__main__":
    sys.exit(main(sys.argv))
