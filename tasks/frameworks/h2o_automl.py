"""H2O AutoML. Its JVM is started per job (fresh port, the budget's threads and memory) and stopped.

H2O overruns ``max_runtime_secs`` (it finishes the running model, then scores the leaderboard),
so it is given a share of the budget and lands inside it; the JVM start is timed apart from fit.

Score over time: every model on H2O's leaderboard is a real model in the cluster, so each is an
anytime candidate as it is. When it was ready comes from H2O's event log ("Adding model ... to
leaderboard", timed from the log's first event, which H2O writes as train begins); how H2O rated it
is its leaderboard score by the sort metric (cross-validated), which is what H2O picks its leader by.
The leaderboard is read with ``extra_columns="ALL"``: each model's training_time_ms and
predict_time_per_row_ms are recorded beside it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._onnx import float_matrix
from tasks.frameworks._sampling import PARAM as ROWS_PARAM
from tasks.frameworks._sampling import RowCap, Sampled
from tasks.frameworks._tabular import FeatureSchema, proba_frame, search_seconds
from tasks.frameworks.base import FittedModel, FrameworkAdapter, NoModelTrained, TaskInfo, split_params
from tasks.frameworks.capabilities import (
    AnytimeCandidate,
    NativeArtifact,
    NativeImportance,
    NotOffered,
    OnnxGraph,
    not_offered,
)
from tasks.metric_registry import H2O, framework_name
from tasks.specs import Budget

LEADER_FILE = "leader"
MOJO_DIR = "mojo"  # where native_artifact writes the MOJO, and to_onnx reads it
# Share of the budget given as max_runtime_secs; measured: 30 s asked took 38.5 s.
RUNTIME_SHARE = 0.7
RUNTIME_RESERVE_S = 6.0
# Share of the job's memory limit given to the JVM heap: the JVM's own overhead and the Python
# worker count against the same process-tree limit.
HEAP_SHARE = 0.6
# Frames above this many rows reach H2O as a Parquet file it imports itself, written a slice at a
# time: h2o.H2OFrame(pandas) makes a full CSV copy in the Python process first (at 9 M rows that
# copy put the job over its memory budget). Smaller frames (single rows) take the quicker upload.
IMPORT_ROWS = 10_000
PARQUET_SLICE_ROWS = 250_000
# H2O AutoML's first models (a GLM, then a GBM, cross-validated) run on every row it is given:
# it is fitted on at most this many cells (rows x columns) per core and minute of time_s (about
# 670,000 rows of 30 columns at 1m2c) ...
CELLS_PER_CORE_MINUTE = 10_000_000
# ... and on as many rows as fit the budget's memory_mb, the job's peak being about this many
# times the in-memory size of the rows it is given (the fold in Python, its compressed copy and
# models in the JVM's heap).
PEAK_MEMORY_PER_DATA = 6
ROW_CAP = RowCap("h2o", CELLS_PER_CORE_MINUTE, PEAK_MEMORY_PER_DATA)
# H2O sorts its leaderboard decreasing by these metrics, increasing by every other (its own rule).
HIGHER_IS_BETTER = frozenset({"auc", "aucpr"})
ADDED = "Adding model "  # the event log's line when a model joins the leaderboard
LEADERBOARD_COSTS = ("model_id", "algo", "training_time_ms", "predict_time_per_row_ms")
TIMING = ("H2O's event log: when the model was added to the leaderboard, from the log's first event "
          "(as train begins), plus the adapter's seconds before train")


@dataclass(frozen=True)
class H2OProgress:
    """The search's record: the leaderboard (with H2O's extra columns) and when each model joined it."""

    board: pd.DataFrame  # model_id, the sort metric first, ..., training_time_ms, predict_time_per_row_ms
    added_s: dict[str, float]  # model id -> seconds from the adapter's fit start


def added_seconds(events: pd.DataFrame, offset_s: float) -> dict[str, float]:
    """Model id -> when the event log added it to the leaderboard, in seconds after its first event
    plus `offset_s`. The log's timestamps are times of day (HH:MM:SS.mmm); a run past midnight wraps."""
    def seconds(stamp: str) -> float:
        hours, minutes, rest = str(stamp).split(":")
        return int(hours) * 3600 + int(minutes) * 60 + float(rest)

    if events.empty:
        return {}
    first = seconds(events["timestamp"].iloc[0])
    added = {}
    for stamp, message in zip(events["timestamp"], events["message"], strict=True):
        if str(message).startswith(ADDED):
            model_id = str(message)[len(ADDED):].split()[0]
            added[model_id] = offset_s + (seconds(stamp) - first) % 86400
    return added


def _free_port_pair() -> int:
    """A port p with p and p + 1 free (H2O uses both), so parallel jobs never share a cluster."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port >= 65535:
            continue
        with socket.socket() as second:
            try:
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no free pair of local ports for the H2O cluster")


def _to_h2o(X: pd.DataFrame, schema: FeatureSchema, target: pd.Series | None = None) -> Any:
    """An H2OFrame typed as at fit time; a classification target (object labels) becomes an enum."""
    import h2o

    # Every column typed explicitly: H2O guesses from the values, and a single row with a
    # missing number would otherwise arrive as an enum column.
    types = {column: "enum" if column in schema.levels else "numeric" for column in schema.columns}
    if target is not None:
        types[str(target.name)] = "enum" if target.dtype == object else "numeric"
    if len(X) > IMPORT_ROWS:
        return _import_parquet(X, schema, target, types)
    frame = schema.apply(X)
    if target is not None:
        frame[str(target.name)] = target.to_numpy()
    # The upload writes a missing level as the text "nan": read back as missing, as the Parquet
    # import has it, so a model sees the same frame whichever way its rows came.
    missing = {column: ["nan"] for column, kind in types.items() if kind == "enum"}
    return h2o.H2OFrame(frame, column_types=types, na_strings=missing or None)


def _import_parquet(X: pd.DataFrame, schema: FeatureSchema, target: pd.Series | None,
                    types: dict[str, str]) -> Any:
    """X (and target) imported by H2O from a Parquet file written a slice at a time, so the Python
    process never holds a second full copy of the data."""
    import h2o
    import pyarrow as pa
    import pyarrow.parquet as pq

    # Enums as strings (H2O makes its levels from them), numbers as doubles: one schema for every
    # slice, whatever a slice holds (a slice of missing levels would otherwise be typed null).
    arrow_schema = pa.schema([(name, pa.string() if kind == "enum" else pa.float64())
                              for name, kind in types.items()])
    with tempfile.TemporaryDirectory(prefix="h2o-import-") as folder:
        path = Path(folder) / "frame.parquet"
        with pq.ParquetWriter(path, arrow_schema) as writer:
            for start in range(0, len(X), PARQUET_SLICE_ROWS):
                part = schema.apply(X.iloc[start : start + PARQUET_SLICE_ROWS])
                if target is not None:
                    part[str(target.name)] = target.iloc[start : start + PARQUET_SLICE_ROWS].to_numpy()
                arrays = [_strings(part[name]) if kind == "enum"
                          else pa.array(pd.to_numeric(part[name], errors="coerce"), type=pa.float64(),
                                        from_pandas=True)
                          for name, kind in types.items()]
                writer.write_table(pa.Table.from_arrays(arrays, schema=arrow_schema))
        return h2o.import_file(str(path), col_types=types)


def _strings(values: pd.Series) -> Any:
    """A column as an Arrow array of strings (a missing value stays missing), the way H2O names
    the levels of a frame uploaded from pandas."""
    import pyarrow as pa

    if isinstance(values.dtype, pd.CategoricalDtype):
        # Each level turned into text once, not each row.
        named = values.cat.rename_categories([str(level) for level in values.cat.categories])
        return pa.array(named, from_pandas=True).cast(pa.string())
    texts = values.astype(object).where(values.notna(), None).map(lambda v: v if v is None else str(v))
    return pa.array(texts, type=pa.string())


def heap_mb() -> float:
    """The running cluster's maximum heap (MB), as its nodes report it."""
    import h2o

    return sum(float(node["max_mem"]) for node in h2o.cluster().nodes) / 2**20


def _as_pandas(frame: Any) -> pd.DataFrame:
    # H2O warns on every conversion that polars would be faster; the frames here are small.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return frame.as_data_frame(use_pandas=True)


class H2OModel(FittedModel):
    native_importance_kind = "h2o varimp"
    native_artifact_kind = "mojo"

    def __init__(self, leader: Any, schema: FeatureSchema, task: TaskInfo, leaderboard: list[str],
                 sampled: Sampled | None = None, heap_mb: float | None = None,
                 progress: H2OProgress | None = None) -> None:
        self.leader = leader
        self.schema = schema
        self.task = task
        self.leaderboard = leaderboard
        self.sampled = sampled  # when fitted on a sample
        self.heap_mb = heap_mb  # the JVM's maximum heap during the fit
        self.progress = progress  # only on a model just fitted

    def anytime_candidates(self) -> list[AnytimeCandidate]:
        """Each leaderboard model, ready when the event log added it; the leader is the job's model."""
        import h2o

        progress = self.progress
        if progress is None:
            raise NotOffered("an H2O model loaded from its folder has no leaderboard; the curve is "
                             "recorded when the job fits it")
        board = progress.board
        metric = str(board.columns[1])
        sign = 1.0 if metric in HIGHER_IS_BETTER else -1.0
        leader_id = str(self.leader.model_id)
        classification = self.task.is_classification
        candidates = []
        for model_id, value in zip(board["model_id"], board[metric], strict=True):
            model_id = str(model_id)
            ready_s = progress.added_s.get(model_id)
            if ready_s is None:  # not in the event log: when it was ready is unknown, so no point
                continue
            if model_id == leader_id:
                model: H2OModel = self
            else:
                model = H2OModel(h2o.get_model(model_id), self.schema, self.task, [model_id])
            candidates.append(AnytimeCandidate(
                name=model_id, ready_s=ready_s,
                validation=sign * float(value) if pd.notna(value) else None,
                predict=model.predict, predict_proba=model.predict_proba if classification else None,
                final=model_id == leader_id, timing=TIMING,
                source="the job's model (H2O's leader)" if model_id == leader_id
                else "kept by H2O (a leaderboard model in the cluster)"))
        if not any(candidate.final for candidate in candidates):
            raise NotOffered(f"H2O's event log does not say when its leader {leader_id} joined the "
                             "leaderboard")
        return candidates

    def _raw(self, X: pd.DataFrame) -> pd.DataFrame:
        return _as_pandas(self.leader.predict(_to_h2o(X, self.schema)))

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        raw = self._raw(X)["predict"]
        if not self.task.is_classification:
            return raw.to_numpy(dtype=float)
        by_text = {str(label): label for label in self.task.classes}
        return np.asarray([by_text.get(str(v), v) for v in raw], dtype=object)

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if not self.task.is_classification:
            raise NotImplementedError("regression models have no class probabilities")
        raw = self._raw(X).drop(columns=["predict"])
        # H2O names probability columns by level, prefixing numeric-looking levels with "p".
        names = [c[1:] if c.startswith("p") and c[1:] in {str(k) for k in self.task.classes} else c
                 for c in raw.columns]
        return proba_frame(raw.to_numpy(dtype=float), names, self.task)

    def native_importance(self, X: pd.DataFrame, y: pd.Series, time_limit_s: float) -> NativeImportance:
        varimp = self.leader.varimp(use_pandas=True)
        if varimp is None:
            raise NotOffered(f"H2O's leader ({getattr(self.leader, 'algo', 'its leader')}) has no variable "
                             "importance")
        # GLM names one-hot levels `color.red`: fold them back onto their feature.
        features = list(self.schema.columns)
        owner = {f: f for f in features}
        rows = [(owner.get(v) or next((f for f in features if str(v).startswith(f"{f}.")), str(v)), imp)
                for v, imp in zip(varimp["variable"], varimp["scaled_importance"], strict=True)]
        table = pd.DataFrame(rows, columns=["feature", "importance"]).groupby("feature", as_index=False).sum()
        return NativeImportance(self.native_importance_kind or "", table)

    def native_artifact(self, folder: Path) -> NativeArtifact:
        """H2O's MOJO. Some H2O-3 OSS clients (3.46.0.12 here) refuse MOJO export ("requires H2O-3
        Secure"): that is the NotOffered reason, as it is said."""
        target = folder / MOJO_DIR
        target.mkdir(parents=True, exist_ok=True)
        try:
            path = Path(self.leader.download_mojo(path=str(target)))
        except Exception as exc:  # noqa: BLE001 - the client's verdict, recorded
            raise not_offered(exc) from None
        return NativeArtifact("mojo", path)

    def to_onnx(self, folder: Path) -> OnnxGraph:
        """onnxmltools' route for a GBM leader, through its MOJO (written by native_artifact)."""
        leader, schema, task = self.leader, self.schema, self.task
        algo = str(getattr(leader, "algo", ""))
        if algo != "gbm":
            raise NotOffered(f"onnxmltools converts H2O GBM MOJOs only; the leader is {algo} "
                             f"({leader.model_id}); ship its MOJO instead")
        if schema.levels:
            raise NotOffered("onnxmltools' H2O converter takes numeric features only; this GBM has "
                             f"categorical ones ({', '.join(schema.levels)})")
        mojo = next((folder / MOJO_DIR).glob("*.zip"), None)
        if mojo is None:
            mojo = self.native_artifact(folder).path
        import onnxmltools

        try:
            graph = onnxmltools.convert_h2o(str(mojo))
        except Exception as exc:  # noqa: BLE001 - the converter's verdict
            raise not_offered(exc) from None
        input_name = graph.graph.input[0].name

        def feed(X: pd.DataFrame) -> dict[str, np.ndarray]:
            return {input_name: float_matrix(schema.apply(X))}

        classes = list(task.classes) if task.is_classification else []
        return OnnxGraph(graph, feed, 1 if task.is_classification else 0, classes,
                         "H2O's GBM leader through its MOJO")

    def save(self, model_dir: Path) -> None:
        import h2o

        model_dir.mkdir(parents=True, exist_ok=True)
        h2o.save_model(self.leader, path=str(model_dir), filename=LEADER_FILE, force=True)
        self.schema.save(model_dir)

    @property
    def models_count(self) -> int:
        return max(1, len(self.leaderboard))

    @property
    def fit_rows(self) -> int | None:
        return self.sampled.rows if self.sampled else None

    def info(self) -> dict[str, Any]:
        recorded: dict[str, Any] = {"leader": self.leader.model_id, "leaderboard": self.leaderboard[:50]}
        if self.progress is not None:
            board = self.progress.board
            columns = [c for c in (*LEADERBOARD_COSTS[:1], str(board.columns[1]), *LEADERBOARD_COSTS[1:])
                       if c in board]
            recorded["leaderboard_costs"] = board[columns].head(50).to_dict(orient="records")
        if self.heap_mb is not None:
            recorded["jvm_max_mem_mb"] = round(self.heap_mb)
        if self.sampled:
            recorded["sampled"] = self.sampled.sentence()
        return recorded


class H2OAdapter(FrameworkAdapter):
    name = "h2o"
    metric_names = H2O  # the suite metric in its own names, from tasks/metric_registry.py
    package = "h2o"
    install_hint = "pip install h2o (and a Java 17 runtime)"
    # The JVM start (about 9 s idle, 15-25 s on a loaded 2-core machine) and single-row scoring
    # through the REST client (about 0.5 s a row, so ~50 s for the 100 latency calls).
    startup_grace_s = 90.0

    def unavailable_reason(self) -> str | None:
        reason = super().unavailable_reason()
        if reason is None and shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            return ("H2O needs Java, which was not found; install a Java 17 runtime "
                    "(e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME.")
        return reason

    def check_params(self, params: dict[str, Any]) -> None:
        adapter_params, _ = split_params(params)
        ROW_CAP.check(adapter_params.get(ROWS_PARAM))

    def start(self, budget: Budget, workdir: Path) -> None:
        # The heap follows the budget, leaving the rest of memory_mb to the JVM's own overhead and
        # the Python worker.
        self._start_cluster(budget.cores, int(budget.memory_mb * HEAP_SHARE), workdir)

    def _start_cluster(self, threads: int, heap_mb: int, workdir: Path) -> None:
        import h2o

        h2o.no_progress()
        port = _free_port_pair()
        for folder in ("h2o-ice", "h2o-logs"):
            (workdir / folder).mkdir(parents=True, exist_ok=True)
        h2o.init(
            ip="127.0.0.1",
            port=port,
            name=f"automl-eval-{os.getpid()}-{port}",
            nthreads=threads,
            max_mem_size=f"{max(256, heap_mb)}M",
            ice_root=str(workdir / "h2o-ice"),
            log_dir=str(workdir / "h2o-logs"),
            strict_version_check=False,
            verbose=False,
        )

    @staticmethod
    def _cluster_running() -> bool:
        import h2o

        try:
            return h2o.connection() is not None and h2o.cluster() is not None and h2o.cluster().is_running()
        except Exception:  # noqa: BLE001 - a closed or half-gone connection means no cluster
            return False

    def _ensure_cluster(self) -> None:
        if not self._cluster_running():
            # A model loaded outside a job (MLflow's pyfunc) starts its own small cluster; H2O
            # stops it when this Python process exits.
            threads = int(os.environ.get("OMP_NUM_THREADS", "-1"))
            self._start_cluster(threads, 1024, Path(os.environ.get("TMPDIR", "/tmp")) / "automl-eval-h2o")

    def stop(self) -> None:
        import h2o

        if self._cluster_running():
            with contextlib.suppress(Exception):  # a cluster already gone is what we want
                h2o.cluster().shutdown()

    def fit(
        self,
        X: pd.DataFrame,
        y: pd.Series,
        *,
        task: TaskInfo,
        budget: Budget,
        params: dict[str, Any],
        workdir: Path,
        seed: int,
    ) -> H2OModel:
        from h2o.automl import H2OAutoML, get_leaderboard

        fit_started = time.perf_counter()
        self._ensure_cluster()
        adapter_params, automl_params = split_params(params)
        schema = FeatureSchema.learn(X, task)
        X, y, sampled = ROW_CAP.sample(X, y, budget, adapter_params, seed, stratify=task.is_classification)
        target = y.astype(str).astype(object) if task.is_classification else pd.to_numeric(y).astype(float)
        train = _to_h2o(X, schema, target.rename(task.target))
        options: dict[str, Any] = {
            "max_runtime_secs": int(search_seconds(budget.time_s, RUNTIME_SHARE, RUNTIME_RESERVE_S)),
            "seed": seed,
            "sort_metric": framework_name(task.metric, H2O),
            "verbosity": None,
        }
        automl = H2OAutoML(**{**options, **automl_params})
        train_started_s = time.perf_counter() - fit_started
        automl.train(x=schema.columns, y=task.target, training_frame=train)
        if automl.leader is None:
            raise NoModelTrained(self.name, budget.time_s, len(X))
        board = _as_pandas(get_leaderboard(automl, extra_columns="ALL"))
        progress = H2OProgress(board, added_seconds(_as_pandas(automl.event_log), train_started_s))
        return H2OModel(automl.leader, schema, task, [str(m) for m in board["model_id"]], sampled, heap_mb(),
                        progress)

    def load(self, model_dir: Path, task: TaskInfo) -> H2OModel:
        import h2o

        self._ensure_cluster()
        leader = h2o.load_model(str(model_dir / LEADER_FILE))
        return H2OModel(leader, FeatureSchema.load(model_dir), task, [leader.model_id])

    def test_params(self) -> dict[str, Any]:
        return {"max_models": 2, "include_algos": ["GLM", "DRF"], "nfolds": 2}


ADAPTER = H2OAdapter()
