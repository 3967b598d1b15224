"""The child process of one post-job evaluation: `python -m tasks.evaluations.child FOLDER`.

It reads FOLDER/request.json (an EvaluationRequest, written by tasks.evaluations.stage), begins as
every supervised child does (tasks/child_process.py: pinned to the job's cores, dies with its
supervisor), runs the evaluation and writes FOLDER/result.json. Like the worker it knows nothing of
Prefect; an evaluation that needs MLflow (serving a pyfunc model) goes through tasks.tracking.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

# Only the standard library and the child's start-up before the pin, as in tasks/worker.py.
from tasks.child_process import REQUEST_FILE, begin, exit_now, failure_text


def main(argv: list[str]) -> int:
    folder = Path(argv[1]).resolve()
    raw_request = json.loads((folder / REQUEST_FILE).read_text())
    begin(raw_request.get("cores"))
    started = time.monotonic()

    # After the pin: the evaluations import numpy, pandas and their frameworks.
    from tasks.child_requests import EvaluationRequest  # inside: after the core pin (numpy's pools)
    from tasks.evaluations.base import (  # inside: after the core pin (numpy's pools)
        EvaluationContext,
        EvaluationResult,
    )
    from tasks.evaluations.registry import get_evaluation  # inside: after the core pin (numpy's pools)

    try:
        request = EvaluationRequest.from_json(raw_request)
        evaluation = get_evaluation(request.name)
        context = EvaluationContext(
            job=request.job,
            spec=request.spec,
            job_dir=request.job_dir,
            folder=folder,
            settings=evaluation.settings_model(**request.settings),
            cores=list(request.cores),
            started=started,
        )
        result = evaluation.run(context)
    except Exception as exc:  # noqa: BLE001 - every failure is recorded, none escapes
        result = EvaluationResult(status="failed", reason=failure_text(exc, traceback.format_exc()))
    result.wall_s = time.monotonic() - started
    result.save(folder)
    return 0 if result.status in ("ok", "partial", "not applicable") else 1


if __name__ == "__main__":
    exit_now(main(sys.argv))
