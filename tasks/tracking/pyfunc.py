"""The job's pyfunc model in MLflow: its signature and input example, from the job's own rows.

The wrapper itself, its requirements, its signature and ``save_pyfunc`` live in
tasks/evaluations/_pyfunc.py (the serving evaluation, a layer below tracking, serves the same model,
with the same signature, before the job is logged).
"""

from __future__ import annotations

# Models logged before the wrapper moved to tasks/evaluations/_pyfunc.py were pickled as
# tasks.tracking.pyfunc.AdapterPyfunc: the name stays importable here so they still load.
from tasks.evaluations._pyfunc import EXAMPLE_ROWS as EXAMPLE_ROWS
from tasks.evaluations._pyfunc import AdapterPyfunc as AdapterPyfunc
from tasks.evaluations._pyfunc import signature_and_example as signature_and_example
