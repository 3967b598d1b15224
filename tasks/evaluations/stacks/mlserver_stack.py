"""The `mlserver` stack: the job's pyfunc model (as the mlflow stack serves it) behind Seldon's MLServer
with the `mlserver-mlflow` runtime, its adaptive batching and its parallel workers.

MLServer cannot live in the main environment (its pins conflict with the project's), so it runs from
an environment of its own, made as framework environments are (tasks/environment_install.py):
``.venvs/mlserver-VERSION``, installed by ``python -m tasks.evaluations.stacks.mlserver_stack
install``, with this project's MLflow and the worker's libraries at the main environment's versions
(the pyfunc model loads there as it does here). Without it the stack is skipped with that command.

The load goes to MLServer's V2 inference protocol, ``POST /v2/models/model/infer`` with one tensor
per column (``content_type: pd``): the runtime's MLflow-style ``/invocations`` calls the model
directly and so never batches. Adaptive batching takes serving.max_batch_size and
serving.max_batch_time_ms (MLServer's max_batch_size and max_batch_time); the budget's cores are its
parallel_workers. uvloop is pinned below 0.22: with 0.22 and later MLServer 1.7.1's inference workers
die at start ("There is no current event loop in thread 'MainThread'").
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from tasks.environment_install import install
from tasks.evaluations._scoring_server import HOST, ScoringServer, free_port
from tasks.evaluations.stacks import ServingStack, StackNotInstalled
from tasks.evaluations.stacks.mlflow_pyfunc import PYFUNC_FOLDER, save_job_pyfunc
from tasks.frameworks.environments import EnvironmentSpec, FrameworkEnvironment

VERSION = "1.7.1"
MODEL_NAME = "model"
SETTINGS_FILE = "settings.json"
MODEL_SETTINGS_FILE = "model-settings.json"


@dataclass(frozen=True)
class StackEnvironment(FrameworkEnvironment):
    """A serving stack's own environment: a framework environment's folder and install, its own command."""

    @property
    def install_command(self) -> str:
        return f"python -m {__name__} install"


ENVIRONMENT = StackEnvironment("mlserver", "mlserver", EnvironmentSpec(
    version=VERSION,
    requirements=(f"mlserver=={VERSION}", f"mlserver-mlflow=={VERSION}",
                  f"mlflow=={metadata.version('mlflow')}", "uvloop==0.21.0"),
    imports=("mlserver", "mlserver_mlflow")))


class MlserverStack(ServingStack):
    name = "mlserver"
    packages = ()  # none in the main environment: it runs from ENVIRONMENT
    request_path = f"/v2/models/{MODEL_NAME}/infer"

    def installed(self) -> bool:
        return ENVIRONMENT.state().status == "installed"

    def server(self, context: Any, folder: Path, cores: list[int], healthcheck_s: float) -> ScoringServer:
        state = ENVIRONMENT.state()
        if state.status == "not installed":
            raise StackNotInstalled(f"the mlserver stack's environment {ENVIRONMENT.folder} is not "
                                    f"installed; install it with `{ENVIRONMENT.install_command}`")
        if state.status == "broken":
            raise StackNotInstalled(f"the mlserver stack's environment is broken: {state.reason}")
        _, signature = save_job_pyfunc(context, folder / PYFUNC_FOLDER)
        settings = context.settings  # the serving evaluation's own (ServingSettings)
        server = MlserverServer(folder, workers=context.budget.cores, cores=cores, log_dir=folder,
                                healthcheck_s=healthcheck_s)
        batching = {"max_batch_size": settings.max_batch_size,
                    "max_batch_time": settings.max_batch_time_ms / 1000}
        (folder / SETTINGS_FILE).write_text(json.dumps({
            "host": HOST, "http_port": server.port, "grpc_port": free_port(), "metrics_port": free_port(),
            "parallel_workers": server.workers, "debug": False}, indent=2))
        (folder / MODEL_SETTINGS_FILE).write_text(json.dumps({
            "name": MODEL_NAME, "implementation": "mlserver_mlflow.MLflowRuntime",
            "parameters": {"uri": f"./{PYFUNC_FOLDER}"}, **batching}, indent=2))
        server.details = {"signature": signature, "parallel_workers": server.workers,
                          "max_batch_size": settings.max_batch_size,
                          "max_batch_time_ms": settings.max_batch_time_ms, "mlserver": VERSION}
        return server

    def body(self, rows: pd.DataFrame) -> bytes:
        """V2 inference: one tensor per column, missing values as null."""
        inputs = []
        for column in rows.columns:
            values = rows[column]
            kind = ("BOOL" if pd.api.types.is_bool_dtype(values) else
                    "INT64" if pd.api.types.is_integer_dtype(values) else
                    "FP64" if pd.api.types.is_numeric_dtype(values) else "BYTES")
            data = [None if pd.isna(value) else (str(value) if kind == "BYTES" else value.item()
                                                 if hasattr(value, "item") else value)
                    for value in values]
            inputs.append({"name": str(column), "shape": [len(rows)], "datatype": kind, "data": data})
        return json.dumps({"parameters": {"content_type": "pd"}, "inputs": inputs}).encode()

    def answer_rows(self, text: str) -> pd.DataFrame:
        """V2 outputs, one per column of the pyfunc model's answer."""
        return pd.DataFrame({output["name"]: output["data"] for output in json.loads(text)["outputs"]})


class MlserverServer(ScoringServer):
    """``mlserver start FOLDER`` from the stack's environment; FOLDER holds its settings and the model."""

    def command(self) -> list[str]:
        return [str(ENVIRONMENT.folder / "bin" / "mlserver"), "start", str(self.model_folder)]

    def environment(self) -> dict[str, str]:
        environment = super().environment()
        environment["PATH"] = f"{ENVIRONMENT.folder / 'bin'}:{environment.get('PATH', '')}"
        return environment


STACK = MlserverStack()


def main(argv: list[str]) -> int:
    if argv[1:2] != ["install"]:
        print(f"usage: python -m {__name__} install [--reinstall]", file=sys.stderr)
        return 2
    install(ENVIRONMENT, print, reinstall="--reinstall" in argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
