"""The team's scheduling-storage block is read from the Prefect server once per process, not per job
(flows/scheduling_storage.py), and a process without one keeps Prefect's local folder."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import prefect.task_worker
import prefect.tasks
from prefect.filesystems import LocalFileSystem
from prefect.settings import (
    PREFECT_RESULTS_LOCAL_STORAGE_PATH,
    PREFECT_TASKS_SCHEDULING_DEFAULT_STORAGE_BLOCK,
    temporary_settings,
)

from flows.scheduling_storage import cache_scheduling_storage


def _call(load: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """The coroutine run to its end on a thread of its own, in this context (Prefect's settings): under
    pytest-xdist an earlier test may leave this thread's event loop running, where asyncio.run refuses."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(contextvars.copy_context().run, asyncio.run, load()).result()


def test_the_named_block_is_loaded_once_and_no_name_means_the_local_folder(tmp_path: Path) -> None:
    LocalFileSystem(basepath=str(tmp_path / "shared")).save("automl-eval-test-storage", overwrite=True)
    cache_scheduling_storage()
    load = prefect.tasks.get_or_create_default_task_scheduling_storage
    assert prefect.task_worker.get_or_create_default_task_scheduling_storage is load

    with temporary_settings({PREFECT_TASKS_SCHEDULING_DEFAULT_STORAGE_BLOCK:
                             "local-file-system/automl-eval-test-storage"}):
        first, second = _call(load), _call(load)
    assert isinstance(first, LocalFileSystem) and first.basepath == str(tmp_path / "shared")
    assert second is first  # Prefect's own function loads a new block from the server each call

    with temporary_settings({PREFECT_TASKS_SCHEDULING_DEFAULT_STORAGE_BLOCK: None,
                             PREFECT_RESULTS_LOCAL_STORAGE_PATH: tmp_path / "local"}):
        local = _call(load)
    assert isinstance(local, LocalFileSystem) and local.basepath == str(tmp_path / "local")
