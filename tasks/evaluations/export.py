"""Can the model ship outside Python? Export a job's saved model to ONNX, check parity, time both.

The model says how (FittedModel.to_onnx, tasks/frameworks/capabilities.py): one graph (skl2onnx
for the scikit-learn baselines, onnxmltools for LightGBM/XGBoost boosters and H2O's GBM MOJOs, a
hand-built graph for the constant baseline), or a compiled copy its framework runs (AutoGluon's
compile(), ONNX for RF, XT and NN only). A model with a deployable file of its own (H2O's MOJO,
FittedModel.native_artifact) writes it first; its size is recorded. Parity is the largest
absolute difference of probabilities (or values) against the native model on the test fold;
latency at batch 1 and throughput at a large batch, ONNX Runtime against
the native model, in the same process on the same cores.

The outcome is the tag `export_onnx`: ok | unsupported (with the converter's message in
`export_onnx.reason`) | parity failed | failed. A converter that crashes or hangs is bounded by the
stage (this runs in its own watched process), never touches the job, and is recorded as failed
with the reason it stopped.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from pydantic import Field

from tasks.evaluations.base import EvaluationContext, EvaluationResult, EvaluationSettings, PostJobEvaluation
from tasks.figures import Figure
from tasks.frameworks.capabilities import NotOffered, OnnxCompiled, OnnxGraph

ONNX_FILE = "model.onnx"


class ExportSettings(EvaluationSettings):
    time_s: int = Field(default=120, gt=0)
    # Largest |native - ONNX| allowed: probabilities as they are, regression values relative to
    # the mean |value| (float32 inside ONNX graphs rounds large values).
    tolerance: float = Field(default=1e-4, gt=0)
    latency_calls: int = Field(default=100, gt=0)  # single-row calls timed, each side
    batch_rows: int = Field(default=10_000, gt=0)  # rows of the throughput batch (test rows repeated)


class ExportEvaluation(PostJobEvaluation):
    name = "export"
    settings_model = ExportSettings
    grace_s = 60.0
    figures: ClassVar[tuple[Figure, ...]] = (
        Figure("onnx_export_ok", "1 if the model exported to ONNX within the parity tolerance, else 0"),
        Figure("onnx_parity_max_abs", "largest |native - ONNX| probability (or value) on the test fold"),
        Figure("onnx_latency_p50_ms", "ONNX Runtime latency at batch 1, median, ms", "ms"),
        Figure("onnx_throughput_rows_s", "ONNX Runtime rows per second at export.batch_rows rows per call",
            "s"),
        Figure("native_latency_p50_ms", "the native model's latency at batch 1 in the same process, "
                                        "median, ms", "ms"),
        Figure("native_throughput_rows_s", "the native model's rows per second at export.batch_rows rows "
                                           "per call", "s"),
        Figure("onnx_speedup_p50", "native latency p50 / ONNX latency p50 (above 1: ONNX is faster)"),
        Figure("onnx_model_mb", "size of the ONNX model, MB", "MB"),
        Figure("onnx_export_s", "wall time of the conversion, seconds", "s"),
        Figure("mojo_mb", "size of H2O's MOJO (its deployable artifact), MB", "MB"),
    )
    tags: ClassVar[dict[str, str]] = {
        "export_onnx": "ONNX export outcome: ok | unsupported | parity failed | failed (the export "
                       "crashed, or was killed at its time or memory limit)",
        "export_onnx.reason": "the converter's message (unsupported), the parity found (parity failed), "
                              "or why the export stopped (failed)",
        "export_mojo": "H2O only: its MOJO export: ok | unsupported",
        "export_mojo.reason": "why H2O wrote no MOJO (this client's own message)",
    }

    def on_failure(self, outcome: EvaluationResult) -> None:
        outcome.metrics.setdefault("onnx_export_ok", 0.0)  # counted as tried in the deployability table
        outcome.tags.setdefault("export_onnx", "failed")
        outcome.tags.setdefault("export_onnx.reason", f"{outcome.status}: {outcome.reason.splitlines()[0]}"
                                if outcome.reason else outcome.status)

    def run(self, context: EvaluationContext) -> EvaluationResult:
        settings = context.settings
        assert isinstance(settings, ExportSettings)  # the context holds this evaluation's own settings
        metrics: dict[str, float] = {}
        files: list[str] = []
        info: dict[str, Any] = {}
        artifact_tags: dict[str, str] = {}
        kind = context.model.native_artifact_kind
        if kind is not None:  # its own deployable file first (H2O's ONNX route reads its MOJO)
            try:
                artifact = context.model.native_artifact(context.folder)
                metrics[f"{kind}_mb"] = artifact.path.stat().st_size / 1e6
                artifact_tags[f"export_{kind}"] = "ok"
            except NotOffered as exc:
                artifact_tags.update({f"export_{kind}": "unsupported", f"export_{kind}.reason": str(exc)})
        started = time.monotonic()
        try:
            route = _route(context)
        except NotOffered as exc:
            metrics["onnx_export_ok"] = 0.0
            return EvaluationResult(status="ok", metrics=metrics, info=info, tags={
                "export_onnx": "unsupported", "export_onnx.reason": str(exc), **artifact_tags})
        metrics["onnx_export_s"] = time.monotonic() - started
        info["covers"] = route.covers
        if route.onnx_file is not None:
            metrics["onnx_model_mb"] = route.onnx_file.stat().st_size / 1e6
            if route.onnx_file.parent == context.folder:
                files.append(route.onnx_file.name)
        fold = context.fold
        native = _native_output(context)
        X_test = fold.X_test
        gap = float(np.max(np.abs(native(X_test) - route.output(X_test)))) if len(X_test) else 0.0
        scale = 1.0 if fold.task.is_classification else max(1.0, float(np.mean(np.abs(native(X_test)))))
        metrics["onnx_parity_max_abs"] = gap
        batch = _batch(X_test, settings.batch_rows)
        for prefix, output in (("onnx", route.output), ("native", native)):
            p50, throughput = _speed(output, X_test, batch, settings.latency_calls)
            metrics[f"{prefix}_latency_p50_ms"], metrics[f"{prefix}_throughput_rows_s"] = p50, throughput
        if metrics["onnx_latency_p50_ms"] > 0:
            metrics["onnx_speedup_p50"] = metrics["native_latency_p50_ms"] / metrics["onnx_latency_p50_ms"]
        within = gap <= settings.tolerance * scale
        metrics["onnx_export_ok"] = 1.0 if within else 0.0
        tags = {"export_onnx": "ok" if within else "parity failed", **artifact_tags}
        if not within:
            limit = settings.tolerance * scale
            tags["export_onnx.reason"] = (f"largest |native - ONNX| on the test fold is {gap:.3g}, over the "
                                          f"tolerance {limit:.3g}{_missing_hint(X_test)}")
            files = [f for f in files if f != ONNX_FILE]  # a graph that answers differently is not shipped
        # A compiled copy (AutoGluon's) has served its purpose; the job folder keeps only model.onnx.
        if route.scratch is not None:
            shutil.rmtree(route.scratch, ignore_errors=True)
        return EvaluationResult(status="ok", metrics=metrics, files=files, info=info, tags=tags)


EVALUATION = ExportEvaluation()


class _Route:
    """An exported model as the evaluation times it: its output on a frame, and its file."""

    def __init__(self, output: Callable[[pd.DataFrame], np.ndarray], onnx_file: Path | None, covers: str,
                 scratch: Path | None = None):
        self.output, self.onnx_file, self.covers, self.scratch = output, onnx_file, covers, scratch


def _missing_hint(X: pd.DataFrame) -> str:
    rows = int(X.isna().any(axis=1).sum())
    if not rows:
        return ""
    return (f" ({rows} test rows have missing values, which ONNX tree ensembles route differently from "
            "scikit-learn's trees)")


def _native_output(context: EvaluationContext) -> Callable[[pd.DataFrame], np.ndarray]:
    model, task = context.model, context.fold.task
    if task.is_classification:
        return lambda X: model.predict_proba(X).to_numpy(dtype=float)
    return lambda X: np.asarray(model.predict(X), dtype=float).reshape(-1, 1)


def _route(context: EvaluationContext) -> _Route:
    """The model's ONNX export as the evaluation runs it (raises NotOffered)."""
    exported = context.model.to_onnx(context.folder)
    if isinstance(exported, OnnxCompiled):
        return _compiled(context, exported)
    return _graph(context, exported)


def _graph(context: EvaluationContext, converted: OnnxGraph) -> _Route:
    path = context.folder / ONNX_FILE
    path.write_bytes(converted.model.SerializeToString())
    return _Route(graph_output(converted, path, context.fold.task, len(context.cores) or 1), path,
                  converted.covers)


def graph_output(converted: OnnxGraph, path: Path, task: Any, threads: int) -> Callable[[pd.DataFrame],
                                                                                          np.ndarray]:
    """The graph saved at `path`, run by ONNX Runtime: probabilities in the task's class order
    (classification) or values as one column, as the native model's are compared."""
    session = _session(path, threads)
    classes = [str(c) for c in converted.classes]

    def output(X: pd.DataFrame) -> np.ndarray:
        values = np.asarray(session.run(None, converted.feed(X))[converted.output], dtype=float)
        if not task.is_classification:
            return values.reshape(-1, 1)
        if values.ndim == 1 or values.shape[1] == 1:  # one score column: the positive class
            values = np.column_stack([1 - values.ravel(), values.ravel()])
        by_text = {c: i for i, c in enumerate(classes)} if classes else {}
        picked = [values[:, by_text[str(label)]] if str(label) in by_text else np.zeros(len(values))
                  for label in task.classes] if classes else list(values.T)
        return np.column_stack(picked)

    return output


def _compiled(context: EvaluationContext, compiled: OnnxCompiled) -> _Route:
    graphs = list(compiled.graphs)
    if len(graphs) == 1:  # one compiled graph: it is the graph to ship
        shutil.copy(graphs[0], context.folder / ONNX_FILE)
        graphs = [context.folder / ONNX_FILE]
    return _Route(compiled.output, graphs[0] if graphs else None, compiled.covers, compiled.scratch)


def _session(path: Path, threads: int) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads  # the job's cores, as the native model had
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _batch(X: pd.DataFrame, rows: int) -> pd.DataFrame:
    repeats = -(-rows // max(1, len(X)))
    return pd.concat([X] * repeats, ignore_index=True).iloc[:rows]


def _speed(output: Callable[[pd.DataFrame], np.ndarray], X: pd.DataFrame, batch: pd.DataFrame,
           calls: int) -> tuple[float, float]:
    """(median ms of one single-row call, rows per second on the batch), after one warm-up call each."""
    output(X.iloc[:1])
    times = []
    for index in range(calls):
        row = X.iloc[[index % len(X)]]
        started = time.perf_counter()
        output(row)
        times.append(time.perf_counter() - started)
    output(batch.iloc[:10])
    started = time.perf_counter()
    output(batch)
    return 1000 * float(np.median(times)), len(batch) / max(time.perf_counter() - started, 1e-9)
