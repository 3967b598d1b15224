"""The logged model's signature: the columns a client sends and their types, as serving checks them.

The rules live with the pyfunc wrapper (tasks/evaluations/_pyfunc.py), so the model the serving
evaluation serves and the model tracking logs carry the same signature; the names stay here.
"""

from __future__ import annotations

from tasks.evaluations._pyfunc import NOT_NULL_EXPECTATIONS as NOT_NULL_EXPECTATIONS
from tasks.evaluations._pyfunc import never_missing as never_missing
from tasks.evaluations._pyfunc import signature_for as signature_for
from tasks.evaluations._pyfunc import with_room_for_missing as with_room_for_missing
