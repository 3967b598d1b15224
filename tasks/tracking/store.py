"""Where runs are recorded: the embedded SQLite store by default, a tracking server when configured.

Embedded default: ``sqlite:///<root>/mlflow/mlflow.db`` with artifacts under ``<root>/mlflow/artifacts``.
``MLFLOW_TRACKING_URI`` (a server such as ``http://127.0.0.1:5000`` or another database) overrides it;
a server then decides where artifacts go.

Against a server, the harness bounds MLflow's HTTP client (``HTTP_SETTINGS``): MLflow's own defaults
retry with back-off for minutes per request, which held suites for the whole night when a server
went away. A variable the user set explicitly still wins.
"""

from __future__ import annotations

import fcntl
import os
import sys
import threading
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from mlflow.tracking import MlflowClient

from tasks import paths

DB_FILE = "mlflow.db"
ARTIFACTS_DIR = "artifacts"
# MLflow 3 opens an experiment on its GenAI traces page unless told it is a model-training one.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING_KIND = "custom_model_development"
# SQLite allows one writer at a time; jobs finish on several threads, so their logging takes turns.
# It is short next to a job, and it keeps the thread-local active run of the pyfunc logging simple.
write_lock = threading.Lock()
UI_URL_ENV = "AUTOML_EVAL_MLFLOW_UI"
EMBEDDED_UI_URL = "http://127.0.0.1:5000"  # where `make ui` serves the embedded store

# Per request: at most 3 attempts (the second at once, the third 1 s later), each attempt's
# connect (and each read) cut at 10 s. A refused connection fails in about 1 s, a hung server in 30 s.
HTTP_SETTINGS = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.2",
}


def embedded_db_path() -> Path:
    return paths.mlflow_dir() / DB_FILE


def embedded_artifacts_dir() -> Path:
    return paths.mlflow_dir() / ARTIFACTS_DIR


def is_embedded() -> bool:
    return not os.environ.get("MLFLOW_TRACKING_URI")


def is_server(uri: str | None = None) -> bool:
    """Whether the store is a tracking server (reached over HTTP) rather than a database or files."""
    return (uri or tracking_uri()).startswith(("http://", "https://"))


def bound_http_requests() -> None:
    """The harness's HTTP timeouts and retries for recording (before any request is made)."""
    for name, value in HTTP_SETTINGS.items():
        os.environ.setdefault(name, value)


def tracking_uri() -> str:
    """The store every run goes to; the environment wins over the embedded default."""
    configured = os.environ.get("MLFLOW_TRACKING_URI")
    if configured:
        return configured
    return f"sqlite:///{embedded_db_path()}"


def artifact_location(experiment_name: str) -> str | None:
    """Where a new experiment keeps its artifacts; None lets a tracking server decide."""
    if not is_embedded():
        return None
    return (embedded_artifacts_dir() / experiment_name).as_uri()


@lru_cache(maxsize=8)
def _client_for(uri: str) -> MlflowClient:
    bound_http_requests()
    client = MlflowClient(tracking_uri=uri)
    if uri.startswith("sqlite:///"):
        database = Path(uri.removeprefix("sqlite:///"))
        database.parent.mkdir(parents=True, exist_ok=True)
        embedded_artifacts_dir().mkdir(parents=True, exist_ok=True)
        # Two runs starting at once would both create (migrate) a new store's schema and one fails:
        # the first request, which creates it, is made by one process at a time.
        with database.with_name(database.name + ".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            client.search_experiments(max_results=1)
    return client


def client() -> MlflowClient:
    """One client per store and process: creating the SQLite schema is the slow part."""
    return _client_for(tracking_uri())


def experiment_id(experiment_name: str) -> str:
    """The experiment's id, created on first use (one experiment per suite)."""
    mlflow_client = client()
    experiment = mlflow_client.get_experiment_by_name(experiment_name)
    if experiment is not None:
        if experiment.lifecycle_stage == "deleted":
            mlflow_client.restore_experiment(experiment.experiment_id)
        if experiment.tags.get(EXPERIMENT_KIND_TAG) != MODEL_TRAINING_KIND:  # made by an older version
            mlflow_client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG,
                                             MODEL_TRAINING_KIND)
        return experiment.experiment_id
    try:
        return mlflow_client.create_experiment(
            experiment_name, artifact_location=artifact_location(experiment_name),
            tags={EXPERIMENT_KIND_TAG: MODEL_TRAINING_KIND},
        )
    except Exception:
        # Two processes may create it at once; the other one won, so use its experiment.
        experiment = mlflow_client.get_experiment_by_name(experiment_name)
        if experiment is None:
            raise
        return experiment.experiment_id


# ---------------------------------------------------------------- links into the MLflow UI


def ui_url() -> str:
    """The MLflow UI's address as a user's browser reaches it.

    AUTOML_EVAL_MLFLOW_UI where set; else the tracking server itself (credentials stripped); else,
    for the embedded store, the address `make ui` serves on.
    """
    configured = os.environ.get(UI_URL_ENV, "").strip()
    if configured:
        return configured.rstrip("/")
    uri = tracking_uri()
    if uri.startswith(("http://", "https://")):
        parts = urlsplit(uri)
        netloc = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    return EMBEDDED_UI_URL


# MLflow 3's UI picks its GenAI or model-training pages by this query (or the user's last toggle),
# whatever the experiment's kind tag says; links into it ask for the model-training pages.
MODEL_TRAINING_VIEW = "workflowType=machine_learning"


def experiment_url(experiment_id: str) -> str:
    """The experiment's runs table (not its traces page)."""
    return f"{ui_url()}/#/experiments/{experiment_id}/runs?{MODEL_TRAINING_VIEW}"


def run_url(experiment_id: str, run_id: str) -> str:
    return f"{ui_url()}/#/experiments/{experiment_id}/runs/{run_id}?{MODEL_TRAINING_VIEW}"


def artifact_url(run_id: str, path: str) -> str:
    """A run's artifact as the tracking server serves it (what a browser can load as an image)."""
    return f"{ui_url()}/get-artifact?path={path}&run_uuid={run_id}"


def suite_runs_url(suite: str) -> str | None:
    """The runs table of a suite's experiment, or None if the store has no run of it yet."""
    experiment = client().get_experiment_by_name(suite)
    return experiment_url(experiment.experiment_id) if experiment is not None else None


if __name__ == "__main__":  # `make ui` prints where to click first
    suite_name = sys.argv[1] if len(sys.argv) > 1 else "smoke"
    link = suite_runs_url(suite_name)
    if link is None:
        print(f"MLflow UI on {ui_url()}: no runs of suite '{suite_name}' yet "
              f"(`automl-eval run {suite_name}`).")
    else:
        print(f"MLflow UI: the runs of suite '{suite_name}' are at {link}")
    print("Opening experiments from the list instead: switch the sidebar to 'Model training' once "
          "(MLflow 3.17 keeps that choice in the browser and otherwise opens a GenAI overview).")
