"""The `mlflow` stack: the job's model as the self-contained pyfunc model tracking logs
(tasks/evaluations/_pyfunc.py), behind ``mlflow models serve --env-manager local`` with as many
uvicorn workers as the budget's cores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tasks.evaluations._scoring_server import ScoringServer
from tasks.evaluations.stacks import ServingStack
from tasks.frameworks.registry import FRAMEWORK_FILE
from tasks.results import INPUT_EXAMPLE_FILE, PREDICTIONS_FILE

PYFUNC_FOLDER = "pyfunc"  # the served model, inside the stack's folder


class MlflowStack(ServingStack):
    name = "mlflow"
    packages = ("mlflow",)

    def server(self, context: Any, folder: Path, cores: list[int], healthcheck_s: float) -> ScoringServer:
        model, signature = save_job_pyfunc(context, folder / PYFUNC_FOLDER)
        server = ScoringServer(model, workers=context.budget.cores, cores=cores, log_dir=folder,
                               healthcheck_s=healthcheck_s)
        server.details = {"signature": signature}
        return server


def save_job_pyfunc(context: Any, folder: Path) -> tuple[Path, dict[str, Any] | list[Any] | None]:
    """The job's model as the pyfunc model tracking logs, saved in `folder`, with its signature's
    inputs (as MLflow writes them; None without one)."""
    # MLflow takes seconds to import; only the stacks that serve a pyfunc model need it.
    from tasks.evaluations._pyfunc import (  # inside: MLflow, only when a pyfunc stack serves
        never_missing,
        save_pyfunc,
        signature_and_example,
    )

    # The signature the logged model gets (tracking): serving checks requests against it, and a
    # column of images is `binary`, base64 text in the JSON body.
    job_dir = context.job_dir
    signature, _ = signature_and_example(job_dir / INPUT_EXAMPLE_FILE, job_dir / PREDICTIONS_FILE,
                                         never_missing(context.spec.name))
    identity = json.loads((context.model_dir / FRAMEWORK_FILE).read_text())
    model = save_pyfunc(context.model_dir, folder, context.job.framework, str(identity.get("version") or ""),
                        signature=signature)
    return model, signature.inputs.to_dict() if signature is not None else None


STACK = MlflowStack()
