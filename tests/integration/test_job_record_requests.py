"""A job's MLflow record, counted in requests against a real `mlflow server`: 18, each one named, as
a team worker makes it (MLflow's "View run" line suppressed, as the team's hosts set it; printing
it costs a 19th request, a read of the run).

The record was cut from 26 requests to 19 (no run read back before its files are uploaded, no logged
model read back, one log_batch, the run's name and parent given when it is created, model/ as one
archive; docs/team.md). Each request is server CPU on the team's MLflow server for every job: this
test fails when a change adds one, and says which."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from run_support.job_folders import finished_job_folder, make_job
from run_support.mlflow_server import MlflowServer

from tasks.tracking.execution import start_execution
from tasks.tracking.job_run import log_job_dir

# What one finished job's record asks of the server (method and path; ids folded).
EXPECTED = Counter({
    "POST /api/2.0/mlflow/runs/search": 1,  # is the job recorded already (a retry records it once)
    "POST /api/2.0/mlflow/runs/create": 1,
    "POST /api/2.0/mlflow/logged-models": 1,
    "POST /api/2.0/mlflow/runs/outputs": 1,
    "POST /api/2.0/mlflow/runs/log-batch": 1,
    "POST /api/2.0/mlflow/runs/log-inputs": 1,
    "POST /api/2.0/mlflow/runs/update": 1,
    "PATCH /api/2.0/mlflow/logged-models/ID": 1,
    "PUT artifacts of the logged model": 9,
    "PUT artifacts of the run": 1,
})


@pytest.fixture
def server(tmp_path: Path) -> Iterator[MlflowServer]:
    mlflow_server = MlflowServer(tmp_path / "server")
    mlflow_server.start()
    try:
        yield mlflow_server
    finally:
        mlflow_server.stop()


def _named(method: str, url: str) -> str:
    path = url.split("://", 1)[-1].split("/", 1)[-1].split("?")[0]
    if "/mlflow-artifacts/artifacts/" in f"/{path}":
        return "PUT artifacts of the logged model" if "/models/" in path else "PUT artifacts of the run"
    parts = [("ID" if part.startswith("m-") else part) for part in path.split("/")]
    return f"{method} /{'/'.join(parts)}"


def test_a_jobs_record_is_eighteen_requests(server: MlflowServer, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")  # as on the team's hosts
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.url)
    execution = start_execution("count", team="ml", selection={"folds": 1}, budget="test")
    job = make_job()
    job_dir = finished_job_folder(tmp_path / "home" / "runs" / job.key, execution, job)

    seen: list[str] = []
    send = requests.Session.send

    def counted(session: requests.Session, request: requests.PreparedRequest, **kwargs: Any) -> Any:
        seen.append(_named(str(request.method), str(request.url)))  # counted, then sent as it was
        return send(session, request, **kwargs)

    monkeypatch.setattr(requests.Session, "send", counted)
    log_job_dir(job_dir)
    monkeypatch.setattr(requests.Session, "send", send)

    asked = Counter(seen)
    print(f"{len(seen)} requests:", dict(asked))
    more, fewer = asked - EXPECTED, EXPECTED - asked
    assert not more and not fewer, (f"a job's record made {len(seen)} requests: more {dict(more)}, "
                                    f"fewer {dict(fewer)}")
    assert sum(EXPECTED.values()) == 18
