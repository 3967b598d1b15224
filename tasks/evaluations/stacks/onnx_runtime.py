"""The `onnxruntime` stack: the model's ONNX export (one graph, where its fitted model offers one)
run by ONNX Runtime behind a minimal ASGI app on uvicorn, with MLflow's request and answer format.

POST /invocations takes ``{"dataframe_split": {"columns": [...], "data": [[...], ...]}}`` and
answers ``{"predictions": [{"prediction": ..., "proba_<class>": ...}, ...]}`` as the mlflow stack
does; GET /ping answers 200 once the graph is loaded. The server is `python -m
tasks.evaluations.stacks.onnx_runtime MODEL_DIR HOST PORT THREADS MAX_BATCH_SIZE MAX_BATCH_TIME_MS`:
it loads the job's saved model through its adapter and converts it again (so its cold start includes
the conversion), because the graph's inputs are fed by the model's own feature schema. A model
without one ONNX graph (none, or several its framework runs itself) is skipped with the reason.

With serving.max_batch_size above 1 the app batches: the requests that arrive while a batch is open
(up to max_batch_size, at most max_batch_time_ms after the first) become one frame and one ONNX
Runtime call, run off the event loop so that the next batch gathers meanwhile; each request gets its
own rows back. A batch whose call fails is answered request by request, so one bad request fails
alone.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.evaluations._scoring_server import HOST, ScoringServer
from tasks.evaluations.export import ONNX_FILE, ExportSettings, graph_output
from tasks.evaluations.stacks import ServingStack
from tasks.frameworks.capabilities import NotOffered, OnnxCompiled
from tasks.frameworks.registry import load_saved_model
from tasks.launch import python_environment
from tasks.predictions import PREDICTION, PROBA_PREFIX

Answer = Callable[[pd.DataFrame], list[dict[str, Any]]]
JSON_HEADERS = [(b"content-type", b"application/json")]


class OnnxRuntimeStack(ServingStack):
    name = "onnxruntime"
    packages = ("onnxruntime", "uvicorn")
    # The export evaluation's own parity: float32 inside the graph.
    parity_tolerance = ExportSettings().tolerance

    def server(self, context: Any, folder: Path, cores: list[int], healthcheck_s: float) -> ScoringServer:
        exported = context.model.to_onnx(folder)  # raises NotOffered with the converter's reason
        if isinstance(exported, OnnxCompiled):
            raise NotOffered("its ONNX export is several graphs its framework runs itself, not one graph "
                             "ONNX Runtime can serve alone")
        (folder / ONNX_FILE).write_bytes(exported.model.SerializeToString())
        server = OnnxRuntimeServer(context.model_dir, workers=1, cores=cores, log_dir=folder,
                                   healthcheck_s=healthcheck_s)
        settings = context.settings  # the serving evaluation's own (ServingSettings)
        server.batching = (settings.max_batch_size, settings.max_batch_time_ms)
        server.details = {"covers": exported.covers, "onnx_file": ONNX_FILE,
                          "max_batch_size": settings.max_batch_size,
                          "max_batch_time_ms": settings.max_batch_time_ms}
        return server


class OnnxRuntimeServer(ScoringServer):
    """This module run as a server; the checkout stays on its path (it imports the adapter)."""

    batching: tuple[int, float] = (1, 0.0)  # (max_batch_size, max_batch_time_ms); 1: no batching

    def command(self) -> list[str]:
        size, wait_ms = self.batching
        return [sys.executable, "-m", __name__, str(self.model_folder), HOST, str(self.port),
                str(len(self.cores) or 1), str(size), f"{wait_ms:g}"]

    def environment(self) -> dict[str, str]:
        return python_environment(len(self.cores) or 1) | {"UVICORN_ACCESS_LOG": "false"}


def model_answer(model_dir: Path, threads: int, scratch: Path) -> Answer:
    """The saved model's ONNX graph as a function of a request's frame: one answer row per row."""
    model, task = load_saved_model(model_dir)
    exported = model.to_onnx(scratch)
    if isinstance(exported, OnnxCompiled):
        raise NotOffered("its ONNX export is several graphs, not one")
    path = scratch / ONNX_FILE
    path.write_bytes(exported.model.SerializeToString())
    output = graph_output(exported, path, task, threads)

    def answer(frame: pd.DataFrame) -> list[dict[str, Any]]:
        values = output(frame)
        if not task.is_classification:
            return [{PREDICTION: float(value)} for value in values[:, 0]]
        labels = [task.classes[index] for index in np.argmax(values, axis=1)]
        return [{PREDICTION: label, **{f"{PROBA_PREFIX}{c}": float(p) for c, p in zip(task.classes, row,
                                                                                       strict=True)}}
                for label, row in zip(labels, values, strict=True)]

    return answer


def request_frame(body: bytes) -> pd.DataFrame:
    """The rows of an MLflow-format JSON body; ValueError with the reason for anything else."""
    try:
        split = json.loads(body)["dataframe_split"]
        return pd.DataFrame(split["data"], columns=split["columns"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError('the body must be JSON {"dataframe_split": {"columns": [...], "data": [[...]]}}'
                         f" ({type(exc).__name__}: {exc})") from None


class Batcher:
    """One model call for the requests that arrive within a window: up to `max_size` of them, the
    last at most `max_wait_s` after the first. Started on the first request (the server runs
    without lifespan events)."""

    def __init__(self, answer: Answer, max_size: int, max_wait_s: float) -> None:
        self.answer = answer
        self.max_size = max_size
        self.max_wait_s = max_wait_s
        self.waiting: asyncio.Queue[tuple[pd.DataFrame, asyncio.Future[list[dict[str, Any]]]]] | None = None
        self.runner: asyncio.Task[None] | None = None

    async def submit(self, frame: pd.DataFrame) -> list[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        if self.waiting is None:
            self.waiting = asyncio.Queue()
            self.runner = loop.create_task(self._run(self.waiting))
        future: asyncio.Future[list[dict[str, Any]]] = loop.create_future()
        await self.waiting.put((frame, future))
        return await future

    async def _run(self, waiting: asyncio.Queue[tuple[pd.DataFrame, asyncio.Future[Any]]]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await waiting.get()]
            closes = loop.time() + self.max_wait_s
            while len(batch) < self.max_size and (left := closes - loop.time()) > 0:
                try:
                    batch.append(await asyncio.wait_for(waiting.get(), left))
                except TimeoutError:
                    break
            await loop.run_in_executor(None, self._answer_batch, loop, batch)

    def _answer_batch(self, loop: asyncio.AbstractEventLoop,
                      batch: list[tuple[pd.DataFrame, asyncio.Future[Any]]]) -> None:
        """On the executor's thread: one call for the batch (requests of the same columns), else one
        call per request, so that a bad request fails alone."""
        frames = [frame for frame, _ in batch]
        if len(batch) > 1 and all(list(frame.columns) == list(frames[0].columns) for frame in frames):
            try:
                rows = self.answer(pd.concat(frames, ignore_index=True))
            except (ValueError, TypeError, KeyError):
                pass  # answered one by one below: the failing request gets its own error
            else:
                start = 0
                for frame, future in batch:
                    loop.call_soon_threadsafe(_settle, future, rows[start:start + len(frame)], None)
                    start += len(frame)
                return
        for frame, future in batch:
            try:
                loop.call_soon_threadsafe(_settle, future, self.answer(frame), None)
            except (ValueError, TypeError, KeyError) as exc:
                loop.call_soon_threadsafe(_settle, future, None, exc)


def _settle(future: asyncio.Future[Any], rows: list[dict[str, Any]] | None, error: Exception | None) -> None:
    if future.done():  # its client went away
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(rows)


def asgi_app(answer: Answer, max_batch_size: int = 1, max_batch_time_ms: float = 0.0) -> Callable[..., Any]:
    """GET /ping and POST /invocations; a request the model cannot answer is HTTP 400 with the reason.
    With max_batch_size above 1 the requests within a window share one model call (Batcher)."""
    batcher = Batcher(answer, max_batch_size, max_batch_time_ms / 1000) if max_batch_size > 1 else None

    async def app(scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            return
        route = (scope["method"], scope["path"])
        payload: dict[str, Any] = {"message": f"no route {route[0]} {route[1]}"}
        status = 404
        if route == ("GET", "/ping"):
            status, payload = 200, {}
        elif route == ("POST", "/invocations"):
            body, more = b"", True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
            try:
                frame = request_frame(body)
                rows = await batcher.submit(frame) if batcher is not None else answer(frame)
                status, payload = 200, {"predictions": rows}
            except (ValueError, TypeError, KeyError) as exc:  # the request's fault, said as MLflow says it
                status, payload = 400, {"error_code": "BAD_REQUEST", "message": str(exc)}
        data = json.dumps(payload, default=_plain).encode()
        await send({"type": "http.response.start", "status": status, "headers": JSON_HEADERS})
        await send({"type": "http.response.body", "body": data})

    return app


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else str(value)


def main(argv: list[str]) -> int:
    # uvicorn only in the server's own process.
    import uvicorn

    model_dir, host, port, threads = Path(argv[1]), argv[2], int(argv[3]), int(argv[4])
    max_batch_size, max_batch_time_ms = int(argv[5]), float(argv[6])
    with tempfile.TemporaryDirectory(prefix="onnx-stack-") as scratch:
        app = asgi_app(model_answer(model_dir, threads, Path(scratch)), max_batch_size, max_batch_time_ms)
        uvicorn.run(app, host=host, port=port, lifespan="off", log_level="warning")
    return 0


STACK = OnnxRuntimeStack()

if __name__ == "__main__":
    sys.exit(main(sys.argv))
