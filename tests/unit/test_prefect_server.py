"""ops/prefect_server.py: Prefect's own task-run queues, whose waiters sleep until a run arrives
instead of looking every 10 ms, and still get every run, retries first, each run once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
from prefect.server import task_queue
from prefect.server.schemas.core import TaskRun

from ops import prefect_server

T = TypeVar("T")


def _run(key: str) -> TaskRun:
    return TaskRun(task_key=key, dynamic_key=uuid.uuid4().hex)


def _apart(scenario: Coroutine[Any, Any, T]) -> T:
    """asyncio.run on a thread of its own: an earlier test in this pytest worker may have left an
    event loop running on the main thread."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, scenario).result(timeout=120)


@pytest.fixture
def queues() -> object:
    prefect_server.wake_on_arrival()
    task_queue.TaskQueue.reset()
    yield task_queue.TaskQueue
    task_queue.TaskQueue.reset()


def test_a_waiter_sleeps_until_a_run_arrives_and_then_gets_it(queues: object) -> None:
    looks = 0
    original = task_queue.TaskQueue.get_nowait

    def counted(self: task_queue.TaskQueue) -> TaskRun:
        nonlocal looks
        looks += 1
        return original(self)

    async def scenario() -> TaskRun:
        waiter = asyncio.create_task(task_queue.MultiQueue(["team-job"]).get())
        await asyncio.sleep(0.3)  # Prefect's own wait would have looked some 30 times by now
        assert not waiter.done()
        run = _run("team-job")
        await task_queue.TaskQueue.enqueue(run)
        return await asyncio.wait_for(waiter, timeout=5)

    task_queue.TaskQueue.get_nowait = counted  # type: ignore[method-assign]
    try:
        run = _apart(scenario())
    finally:
        task_queue.TaskQueue.get_nowait = original  # type: ignore[method-assign]
    assert run.task_key == "team-job"
    assert looks <= 2  # once before sleeping, once on the arrival


def test_a_waiter_cancelled_by_its_timeout_loses_no_run_and_retries_come_first(queues: object) -> None:
    async def scenario() -> list[str]:
        with pytest.raises(TimeoutError):  # Prefect's websocket waits one second at a time
            await asyncio.wait_for(task_queue.MultiQueue(["team-job"]).get(), timeout=0.05)
        first, returned = _run("team-job"), _run("team-job")
        await task_queue.TaskQueue.enqueue(first)
        await task_queue.TaskQueue.for_key("team-job").retry(returned)
        multi = task_queue.MultiQueue(["team-job"])
        got = [await asyncio.wait_for(multi.get(), timeout=5) for _ in range(2)]
        return [str(run.id) for run in got] + [str(returned.id), str(first.id)]

    got_first, got_second, returned, first = _apart(scenario())
    assert (got_first, got_second) == (returned, first)


def test_two_waiters_and_two_keys_each_run_goes_to_one_waiter_of_its_key(queues: object) -> None:
    async def scenario() -> tuple[set[str], set[str], bool]:
        cpu = [asyncio.create_task(task_queue.MultiQueue(["team-job"]).get()) for _ in range(2)]
        gpu = asyncio.create_task(task_queue.MultiQueue(["team-gpu-job", "other"]).get())
        await asyncio.sleep(0.05)
        runs = [_run("team-job"), _run("team-job"), _run("team-gpu-job")]
        for run in runs:
            await task_queue.TaskQueue.enqueue(run)
        cpu_got = await asyncio.wait_for(asyncio.gather(*cpu), timeout=5)
        gpu_got = await asyncio.wait_for(gpu, timeout=5)
        return {str(r.id) for r in cpu_got}, {str(r.id) for r in runs[:2]}, gpu_got.id == runs[2].id

    cpu_got, cpu_sent, gpu_got_its_run = _apart(scenario())
    assert cpu_got == cpu_sent
    assert gpu_got_its_run
