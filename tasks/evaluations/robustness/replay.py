"""Replay of the cases that broke a model: a regression suite that grows by itself.

An execution saves the cases that broke its model (corrupted copies whose mean result fell past
the breaking threshold, and adversarial rows whose prediction flipped) under
runs/SUITE/robustness_replay/, one file per (dataset, framework, fold). The next execution of the
same job replays them first and says of each whether it still breaks the model. A file written
for another data version is not replayed (its rows are other rows), and the report says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPLAY_DIR = "robustness_replay"
VERSION = 1


@dataclass
class ReplayCase:
    kind: str  # corruption | adversarial
    # corruption: the case as the scorer takes it; adversarial: the row and its changed cells
    corruption: str = ""
    target: str = ""
    severity: float = 0.0
    row: int = -1
    perturbed: dict[str, Any] | None = None
    before: str = ""  # what the model predicted on the clean row when the case was found
    found_by: str = ""  # the run (job key) that found it
    still_breaks: bool | None = None  # filled in by a replay
    result: str = ""  # what the replay saw, in words


def replay_path(job_dir: Path, dataset: str, framework_id: str, fold: int) -> Path:
    safe = framework_id.replace("/", "_").replace(":", "_").replace("@", "_")
    return job_dir.parent / REPLAY_DIR / f"{dataset}__{safe}__fold{fold}.json"


def load(path: Path, data_version: str) -> tuple[list[ReplayCase], str]:
    """(cases to replay, a note when there are none to replay for a reason worth saying)."""
    if not path.is_file():
        return [], ""
    try:
        data = json.loads(path.read_text())
        if data.get("data_version") != data_version:
            return [], (f"{path.name} was saved for data version {data.get('data_version')}, not "
                        f"{data_version}: not replayed")
        known = set(ReplayCase.__dataclass_fields__)
        return [ReplayCase(**{k: v for k, v in c.items() if k in known}) for c in data["cases"]], ""
    except (ValueError, KeyError, TypeError) as exc:
        return [], f"{path} could not be read ({type(exc).__name__}: {exc}); delete it to start afresh"


def save(path: Path, data_version: str, cases: list[ReplayCase]) -> None:
    """Written whole and atomically; cases are kept once each (the newest finding of a case wins)."""
    unique: dict[str, ReplayCase] = {}
    for case in cases:
        key = json.dumps([case.kind, case.corruption, case.target, case.severity, case.row,
                          case.perturbed], sort_keys=True, default=str)
        unique[key] = case
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fields = [{k: v for k, v in asdict(c).items() if k not in ("still_breaks", "result")}
              for c in unique.values()]
    tmp.write_text(json.dumps({"version": VERSION, "data_version": data_version, "cases": fields},
                              indent=1, default=str))
    tmp.replace(path)


def replay_adversarial(case: ReplayCase, predict: Callable[[pd.DataFrame], np.ndarray], X: pd.DataFrame,
                       regression_move: float | None) -> None:
    """Rebuild the perturbed row and ask the model again, the clean row and the perturbed one in one
    call of `predict` (the decisions the search read: for a classifier, predict_proba's argmax).
    Classification: it still breaks when the prediction on it differs from the prediction on the
    clean row now; regression: when it moves the prediction by at least `regression_move`."""
    template = X.iloc[[case.row]].reset_index(drop=True)
    perturbed = template.copy()
    for column, value in (case.perturbed or {}).items():
        if column in perturbed.columns:
            perturbed[column] = pd.Series([value], dtype=object).astype(perturbed[column].dtype)
    answers = np.asarray(predict(pd.concat([template, perturbed], ignore_index=True)))
    clean, moved = answers[:1], answers[1:]
    if regression_move is None:
        case.still_breaks = str(moved[0]) != str(clean[0])
        case.result = f"clean {clean[0]}, perturbed {moved[0]}"
    else:
        shift = abs(float(moved[0]) - float(clean[0]))
        case.still_breaks = shift >= regression_move
        case.result = f"prediction moved by {shift:.4g} (breaks at {regression_move:.4g})"


def replay_all(cases: list[ReplayCase], run_corruption: Callable[[ReplayCase], None],
               run_adversarial: Callable[[ReplayCase], None], rows: int,
               has_time: Callable[[], bool]) -> str:
    """Replays each case while `has_time()`; returns a stop sentence when time ran out."""
    for done, case in enumerate(cases):
        if not has_time():
            return f"time limit reached after replaying {done} of {len(cases)} saved cases"
        try:
            if case.kind == "adversarial":
                if not 0 <= case.row < rows:
                    case.result = f"row {case.row} is not in this test fold ({rows} rows)"
                    continue
                run_adversarial(case)
            else:
                run_corruption(case)
        except Exception as exc:  # noqa: BLE001 - one stale case must not stop the rest
            case.result = f"could not be replayed ({type(exc).__name__}: {exc})".splitlines()[0][:300]
    return ""
