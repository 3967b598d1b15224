"""The team's Prefect server: Prefect's own app, whose task-run queues wake their waiters on arrival.

Prefect (3.9) hands background task runs to the team's workers over one websocket each. Each
websocket waits for its next run in `MultiQueue.get`, which looks at its queues and, finding them
empty, sleeps 10 ms and looks again. Every connected worker thus wakes the server 100 times a second,
with or without work: with two idle workers, most of the server's idle CPU under py-spy; with 50, the
largest part of its CPU per job (docs/benchmarks.md).

`create_app` applies one change before building Prefect's app: a waiter sleeps until a run is put on
(or returned to) one of its queues, then looks as Prefect does. Which run goes to which worker, in
which order, and what happens on a disconnect are Prefect's own code, untouched. A Prefect release
that renamed what this relies on stops the server at start with one sentence, rather than silently
polling again.

Run by the cluster (ops/cluster.py) and the team stack (ops/team_stack.py) as
`python -m uvicorn --factory ops.prefect_server:create_app ...`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from fastapi import FastAPI
from prefect.server import task_queue
from prefect.server.api.server import create_app as create_prefect_app
from prefect.server.schemas.core import TaskRun

# What this module relies on in prefect.server.task_queue (Prefect 3.9).
_WAITS = "get"  # MultiQueue's wait for the next run
_RELIED_ON = {task_queue.TaskQueue: ("put", "retry", "get_nowait"), task_queue.MultiQueue: (_WAITS,)}

# task key -> the future its waiters sleep on, set (and replaced) by the next arrival
_arrivals: dict[str, asyncio.Future[None]] = {}


def _next_arrival(task_key: str) -> asyncio.Future[None]:
    loop = asyncio.get_running_loop()
    future = _arrivals.get(task_key)
    if future is None or future.done() or future.get_loop() is not loop:
        future = loop.create_future()
        _arrivals[task_key] = future
    return future


def _announce(task_key: str) -> None:
    """Wake every waiter on this key; each looks again, and one takes the run."""
    future = _arrivals.pop(task_key, None)
    if future is not None and not future.done() and not future.get_loop().is_closed():
        future.set_result(None)


Put = Callable[[task_queue.TaskQueue, TaskRun], Awaitable[None]]


def _announcing(put: Put) -> Put:
    async def put_and_announce(queue: task_queue.TaskQueue, task_run: TaskRun) -> None:
        await put(queue, task_run)
        _announce(queue.task_key)
    return put_and_announce


async def _get_on_arrival(multi_queue: task_queue.MultiQueue) -> TaskRun:
    """Prefect's MultiQueue.get (the first run of its queues, retries first), without the 10-ms poll.

    Nothing is awaited between finding the queues empty and taking the arrival futures, so no
    arrival can slip in between (one event loop). A waiter cancelled by Prefect's 1-s timeout leaves
    the futures as they were: asyncio.wait does not cancel what it waits on."""
    while True:
        for queue in multi_queue._queues:
            try:
                return queue.get_nowait()
            except asyncio.QueueEmpty:
                continue
        arrivals = {_next_arrival(queue.task_key) for queue in multi_queue._queues}
        await asyncio.wait(arrivals, return_when=asyncio.FIRST_COMPLETED)


_patched = False


def wake_on_arrival() -> None:
    """Replace the 10-ms poll of Prefect's task-run queues by a wake-up on arrival (once per process)."""
    global _patched
    if _patched:
        return
    for cls, names in _RELIED_ON.items():
        missing = [name for name in names if not callable(getattr(cls, name, None))]
        if missing:
            raise RuntimeError(f"prefect.server.task_queue.{cls.__name__} no longer has "
                               f"{', '.join(missing)}; update ops/prefect_server.py for this release.")
    # setattr: the replacements are coroutine functions of the same signatures as Prefect's.
    for name in ("put", "retry"):
        setattr(task_queue.TaskQueue, name, _announcing(getattr(task_queue.TaskQueue, name)))
    setattr(task_queue.MultiQueue, _WAITS, _get_on_arrival)
    _patched = True


def create_app() -> FastAPI:
    """Prefect's server app (API, UI, services), its task-run queues waking on arrival."""
    wake_on_arrival()
    return create_prefect_app()

