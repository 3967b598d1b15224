"""The child process of one post-job evaluation: `python -m tasks.evaluations.child FOLDER`.

It reads FOLDER/request.json (written by tasks.evaluations.stage), pins itself to the job's cores,
runs the evaluation and writes FOLDER/result.json. Like the worker it knows nothing of Prefect;
an evaluation that needs MLflow (serving a pyfunc model) goes through tasks.tracking.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import time
import traceback
from pathlib import Path

REQUEST_FILE = "request.json"


def main(argv: list[str]) -> int:
    faulthandler.enable()
    folder = Path(argv[1]).resolve()
    request = json.loads((folder / REQUEST_FILE).read_text())
    from tasks.worker import _die_with_parent, error_tail

    _die_with_parent()
    if request.get("cores"):
        os.sched_setaffinity(0, request["cores"])
    started = time.monotonic()

    from tasks.evaluations.base import EvaluationContext, EvaluationResult
    from tasks.evaluations.registry import get_evaluation
    from tasks.plan import Job
    from tasks.specs import DatasetSpec

    try:
        evaluation = get_evaluation(request["name"])
        context = EvaluationContext(
            job=Job.from_dict(request["job"]),
            spec=DatasetSpec(**request["spec"]),
            job_dir=Path(request["job_dir"]),
            folder=folder,
            settings=evaluation.settings_model(**request["settings"]),
            cores=list(request.get("cores") or []),
            started=started,
        )
        result = evaluation.run(context)
    except Exception as exc:  # noqa: BLE001 - every failure is recorded, none escapes
        first = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
        result = EvaluationResult(status="failed", reason=f"{first}\n{error_tail(traceback.format_exc())}")
    result.wall_s = time.monotonic() - started
    result.save(folder)
    return 0 if result.status in ("ok", "partial", "not applicable") else 1


if __name__ == "__main__":
    from tasks.worker import exit_now

    exit_now(main(sys.argv))
