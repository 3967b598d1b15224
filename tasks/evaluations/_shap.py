"""SHAP values of a saved model with `shap`: a tree explainer where the fitted model offers a plain
tree ensemble shap reads directly (FittedModel.tree_ensemble), else the permutation explainer on the
model's prediction function.

Values come back as rows x features x outputs (one output per class, or one for regression), for
the model's own input columns; which explainer ran, and why the tree one did not, is recorded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks.capabilities import NotOffered, TreeEnsemble

# Rows explained per call of the permutation explainer: the deadline is checked between calls.
CHUNK_ROWS = 10


_compiled = threading.Event()


def compile_in_background() -> None:
    """Start compiling shap's numba kernels of the permutation explainer on a thread.

    shap compiles them on its first call in a process (it does not cache them): seconds on an idle
    core, over a minute on a loaded one. Done on a tiny problem while permutation importance runs,
    the explainer's first real call does not spend its share of the limit compiling.
    """
    def compile_kernels() -> None:
        try:
            import shap

            data = np.random.default_rng(0).normal(size=(6, 3))
            explainer = shap.explainers.Permutation(lambda a: np.column_stack([a[:, 0], a[:, 1]]),
                                                    shap.maskers.Independent(data[:4], max_samples=4), seed=0)
            explainer(data[4:5], max_evals=7, batch_size=7, silent=True)
        finally:
            _compiled.set()

    threading.Thread(target=compile_kernels, name="shap-compile", daemon=True).start()


def wait_compiled(deadline: float) -> bool:
    """Whether shap's kernels are compiled by the deadline (True at once if they already are)."""
    return _compiled.wait(timeout=max(0.0, deadline - time.monotonic()))


@dataclass
class ShapValues:
    explainer: str  # "tree" | "permutation"
    values: np.ndarray  # rows x features x outputs
    rows: list[int]  # positions in the test fold of the rows explained
    features: list[str]
    notes: list[str] = field(default_factory=list)

    def mean_abs(self) -> pd.Series:
        """Mean |SHAP| per feature over rows and outputs: the SHAP importance of each feature."""
        return pd.Series(np.abs(self.values).mean(axis=(0, 2)), index=self.features)


def tree_route(model: Any) -> tuple[TreeEnsemble | None, str]:
    """The tree ensemble the saved model offers shap's tree explainer, or None with the reason."""
    try:
        return model.tree_ensemble(), ""
    except NotOffered as exc:
        return None, str(exc)


def _as_rows_features_outputs(values: Any, rows: int) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim == 2:
        array = array[:, :, None]
    if array.shape[0] != rows:  # shap < 0.45 gave a list per class
        array = np.stack(list(values), axis=-1)
    return array


def tree_values(route: TreeEnsemble, X: pd.DataFrame, features: list[str]) -> np.ndarray:
    """SHAP values from the tree explainer, columns reordered to `features`."""
    import shap

    explainer = shap.TreeExplainer(route.estimator)
    matrix = route.transform(X)
    values = _as_rows_features_outputs(explainer.shap_values(matrix, check_additivity=False), len(X))
    order = [route.columns.index(feature) for feature in features]
    return values[:, order, :]


def _is_number(column: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(column.dtype) and not isinstance(column.dtype, pd.CategoricalDtype)


def _levels(*columns: pd.Series) -> list[Any]:
    seen = pd.concat([c.astype(object) for c in columns]).dropna().unique()
    return sorted(seen, key=str)


def row_cost_s(output: Callable[[pd.DataFrame], np.ndarray], background: pd.DataFrame,
               features: int) -> float:
    """Seconds the permutation explainer needs per row, about: one model call on as many rows as
    it masks for a row (2 x features + 1 evaluations x the background)."""
    rows = pd.concat([background] * (2 * features + 1), ignore_index=True)
    started = time.monotonic()
    output(rows)
    return time.monotonic() - started


def permutation_values(output: Callable[[pd.DataFrame], np.ndarray], X: pd.DataFrame,
                       background: pd.DataFrame, *, seed: int, deadline: float) -> tuple[np.ndarray, int]:
    """SHAP values from the permutation explainer, chunk by chunk until the deadline.

    Returns (values of the rows done, rows done): rows past the deadline are left out and counted.
    """
    import shap

    columns = list(X.columns)
    # shap's masker compares numbers: non-numeric columns travel as codes of their levels.
    levels = {c: _levels(X[c], background[c]) for c in columns if not _is_number(X[c])}

    def encode(frame: pd.DataFrame) -> np.ndarray:
        encoded = frame.copy()
        for column, known in levels.items():
            codes = pd.Categorical(frame[column].astype(object), categories=known).codes
            encoded[column] = np.where(codes >= 0, codes, np.nan)
        return encoded.astype(float).to_numpy()

    def on_array(matrix: np.ndarray) -> np.ndarray:
        frame = pd.DataFrame(matrix, columns=columns)
        for column, known in levels.items():
            codes = frame[column].to_numpy()
            present = ~np.isnan(codes)
            decoded = np.full(len(codes), None, dtype=object)
            decoded[present] = np.asarray(known, dtype=object)[codes[present].astype(int)]
            frame[column] = decoded
        return output(frame)

    masker = shap.maskers.Independent(encode(background), max_samples=len(background))
    explainer = shap.explainers.Permutation(on_array, masker, seed=seed)
    max_evals = 2 * len(columns) + 1  # one forward and one backward pass of one permutation
    done: list[np.ndarray] = []
    rows, chunk_rows = 0, 1  # the first row is timed alone: it says how many fit before the deadline
    while rows < len(X) and time.monotonic() < deadline:
        started = time.monotonic()
        chunk = encode(X.iloc[rows:rows + chunk_rows])
        # All of a row's masks in one model call: per-call overhead (AutoGluon's feature
        # generation, H2O's REST round trip) is paid once per row, as row_cost_s timed it.
        explanation = explainer(chunk, max_evals=max_evals, batch_size=max_evals, silent=True)
        done.append(_as_rows_features_outputs(explanation.values, len(chunk)))
        rows += len(chunk)
        per_row = (time.monotonic() - started) / len(chunk)
        chunk_rows = int(max(1, min(CHUNK_ROWS, (deadline - time.monotonic()) / max(per_row, 1e-6) / 2)))
    empty = np.zeros((0, len(columns), 1))
    return (np.concatenate(done) if done else empty), rows
