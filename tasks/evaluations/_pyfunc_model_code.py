"""The job's pyfunc model as MLflow loads it: MLflow runs this file ("models from code") and takes
the model it sets.

The model carries the harness's package as one zip archive in its ``code/`` folder (see
``model_code_paths`` in tasks/evaluations/_pyfunc.py): one file to upload per job instead of one
per module of the package, which an MLflow server proxying artifacts to an object store pays for
in requests. Python imports a package from a zip archive on ``sys.path`` (zipimport), so the
archive goes first on the path before the wrapper is imported. Where ``tasks`` is already loaded
(the harness logging or loading a model in process) the loaded package is used.

Never imported by the harness: only run by MLflow, at save (from the package folder, where no
archive sits beside it) and at load (from the model's folder).
"""

import sys
from pathlib import Path

import mlflow.models

HARNESS_ARCHIVE = "automl_eval_harness.zip"  # tasks/evaluations/_pyfunc.py writes it by this name

_archive = Path(__file__).resolve().parent / "code" / HARNESS_ARCHIVE
if _archive.is_file() and str(_archive) not in sys.path:
    sys.path.insert(0, str(_archive))

# After the path is set: the wrapper and the adapters import from the model's own archive.
from tasks.evaluations._pyfunc import AdapterPyfunc  # noqa: E402

mlflow.models.set_model(AdapterPyfunc())
