"""The team's result-storage block read once per process, where Prefect reads it once per job.

Prefect keeps a background task's parameters in the block that
PREFECT_TASKS_SCHEDULING_DEFAULT_STORAGE_BLOCK names (the object store's bucket across hosts), and
`get_or_create_default_task_scheduling_storage` loads that block from the server by name on every
call: once when a suite submits a job (`Task.delay`) and once when a worker takes it. Each load is a
block-document read with its schema and type, some 20 % of the Prefect server's CPU per job on the
cluster (docs/benchmarks.md); Prefect caches its default *result* storage per process, not this one.

`cache_scheduling_storage()` puts a cache in front of that one function, in the two Prefect modules
that call it, keyed by the block's name. A block changed on the server reaches processes started after
the change (restart the workers), as Prefect's own default result storage does; the cache is kept
per server, as blocks are. Without a block
named (one host, a shared folder), nothing is read from the server and nothing is cached.

The suite reads each job's result the same way: Prefect's `State.result` reads the block that
holds it from the server by its id, once per job; `job_result` reads it once per process.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import prefect.task_worker
import prefect.tasks
from prefect.filesystems import WritableFileSystem
from prefect.results import (
    ResultStorage,
    ResultStore,
    aresolve_result_storage,
    get_or_create_default_task_scheduling_storage,
)
from prefect.settings import PREFECT_API_URL, PREFECT_TASKS_SCHEDULING_DEFAULT_STORAGE_BLOCK
from prefect.utilities.asyncutils import run_coro_as_sync

_loaded: dict[tuple[str, str], ResultStorage] = {}  # (the server, the block's name) -> the block
_by_id: dict[tuple[str, UUID], WritableFileSystem] = {}  # (the server, the block's id) -> the block


async def _scheduling_storage() -> ResultStorage:
    name = PREFECT_TASKS_SCHEDULING_DEFAULT_STORAGE_BLOCK.value()
    if not name:
        return await get_or_create_default_task_scheduling_storage()
    key = (str(PREFECT_API_URL.value()), name)
    if key not in _loaded:
        storage = await get_or_create_default_task_scheduling_storage()
        if not isinstance(storage, WritableFileSystem):  # as Prefect asserts: parameters are written
            return storage
        _loaded[key] = storage
    return _loaded[key]


_PATCHED = "get_or_create_default_task_scheduling_storage"
_CALLERS = (prefect.tasks, prefect.task_worker)  # the modules that load it per job (Prefect 3.9)


def cache_scheduling_storage() -> None:
    """From now on, this process reads each named scheduling-storage block from the server once."""
    for module in _CALLERS:
        # A Prefect that moved the function would silently load the block per job again: say so.
        if not hasattr(module, _PATCHED):
            raise RuntimeError(f"{module.__name__} no longer has {_PATCHED}; update "
                               "flows/scheduling_storage.py for this Prefect release.")
        setattr(module, _PATCHED, _scheduling_storage)


def job_result(state: Any) -> Any:
    """What a finished task run returned, as `state.result(raise_on_failure=False)` gives it, with the
    block that stores it read from the server once per process instead of once per job."""
    # A persisted result's metadata (Prefect's ResultRecordMetadata, of a private module) names them.
    block_id = getattr(state.data, "storage_block_id", None)
    storage_key = getattr(state.data, "storage_key", None)
    if not (isinstance(block_id, UUID) and storage_key):
        return state.result(raise_on_failure=False)
    key = (str(PREFECT_API_URL.value()), block_id)
    if key not in _by_id:
        _by_id[key] = run_coro_as_sync(aresolve_result_storage(block_id))
    store = ResultStore(result_storage=_by_id[key], serializer=state.data.serializer)
    return store.read(storage_key).result
