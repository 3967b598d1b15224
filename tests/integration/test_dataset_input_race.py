"""Two team workers recording jobs of one dataset at the same moment, against MLflow on PostgreSQL.

MLflow's store creates a run's dataset input by looking the dataset up, then inserting it when
absent; two requests at once both find nothing, and the second insert breaks the dataset's unique
key. The job whose request lost had its whole record dropped (seen in the team stack's test under
load). The harness asks once more, and then MLflow finds the dataset and only links it. Here eight
runs log one new dataset at once, on a real PostgreSQL store, three times over.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from run_support.services import missing_service
from team_support.stack import postgres_up

from tasks.tracking.job_run import _log_input

pytestmark = pytest.mark.integration
SERVER = "postgresql://postgres@127.0.0.1:5432"
RUNS_AT_ONCE = 8


@pytest.fixture()
def store_uri() -> Iterator[str]:
    if not postgres_up():
        missing_service("PostgreSQL is not running on 127.0.0.1:5432 (.ci/run starts it)")
    import psycopg2

    database = f"automl_eval_race_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(f"{SERVER}/postgres")
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {database}")
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:5432/{database}"
    finally:
        from mlflow.tracking._tracking_service.utils import _tracking_store_registry

        _tracking_store_registry._get_store_with_resolved_uri.cache_clear()  # its engine holds connections
        admin.cursor().execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        admin.close()


def _record_at_once(client: object, runs: list[str], dataset: object) -> list[str]:
    """Each run's dataset input, all released at one barrier; what each failed with."""
    start = threading.Barrier(len(runs))
    failures: list[str] = []

    def record(run_id: str) -> None:
        start.wait()
        try:
            _log_input(client, run_id, dataset)
        except Exception as exc:  # noqa: BLE001 - what the job would have lost
            failures.append(f"{type(exc).__name__}: {str(exc)[:200]}")

    threads = [threading.Thread(target=record, args=(run_id,)) for run_id in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return failures


def test_runs_logging_one_new_dataset_at_once_all_get_it(store_uri: str) -> None:
    from mlflow import MlflowClient
    from mlflow.entities import Dataset, DatasetInput

    client = MlflowClient(store_uri)
    experiment = client.create_experiment("race")
    for attempt in range(3):
        digest = f"{attempt:08d}"
        dataset = DatasetInput(Dataset(name="breast_cancer", digest=digest, source_type="local",
                                       source='{"uri": "datasets/breast_cancer.parquet"}'))
        runs = [client.create_run(experiment).info.run_id for _ in range(RUNS_AT_ONCE)]
        assert _record_at_once(client, runs, dataset) == []
        for run_id in runs:
            inputs = client.get_run(run_id).inputs.dataset_inputs
            assert [(i.dataset.name, i.dataset.digest) for i in inputs] == [("breast_cancer", digest)]
