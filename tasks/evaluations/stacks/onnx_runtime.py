"""The `onnxruntime` stack: the model's ONNX export (one graph, where its fitted model offers one)
run by ONNX Runtime behind a minimal ASGI app on uvicorn, with MLflow's request and answer format.

POST /invocations takes ``{"dataframe_split": {"columns": [...], "data": [[...], ...]}}`` and
answers ``{"predictions": [{"prediction": ..., "proba_<class>": ...}, ...]}`` as the mlflow stack
does; GET /ping answers 200 once the graph is loaded. The server is `python -m
tasks.evaluations.stacks.onnx_runtime MODEL_DIR HOST PORT THREADS`: it loads the job's saved model
through its adapter and converts it again (so its cold start includes the conversion), because the
graph's inputs are fed by the model's own feature schema. A model without one ONNX graph (none, or
several its framework runs itself) is skipped with the reason.
"""

from __future__ import annotations

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
        server.details = {"covers": exported.covers, "onnx_file": ONNX_FILE}
        return server


class OnnxRuntimeServer(ScoringServer):
    """This module run as a server; the checkout stays on its path (it imports the adapter)."""

    def command(self) -> list[str]:
        return [sys.executable, "-m", __name__, str(self.model_folder), HOST, str(self.port),
                str(len(self.cores) or 1)]

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


def asgi_app(answer: Answer) -> Callable[..., Any]:
    """GET /ping and POST /invocations; a request the model cannot answer is HTTP 400 with the reason."""

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
                status, payload = 200, {"predictions": answer(request_frame(body))}
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
    with tempfile.TemporaryDirectory(prefix="onnx-stack-") as scratch:
        app = asgi_app(model_answer(model_dir, threads, Path(scratch)))
        uvicorn.run(app, host=host, port=port, lifespan="off", log_level="warning")
    return 0


STACK = OnnxRuntimeStack()

if __name__ == "__main__":
    sys.exit(main(sys.argv))
