"""A recorded figure as the plug-in that records it declares it: name, meaning, unit, direction,
and whether `compare`, regression attribution and the report read it.

A post-job evaluation lists its figures (`PostJobEvaluation.figures`); the vocabulary page, the
figures' directions, compare's quantities and the figures the report types as numbers are all read
from those declarations (tasks/evaluations/vocabulary.py), so no central list names them.

Layer 1 (nouns): it imports nothing of the project's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Threshold = Literal["result", "cost"]  # which of compare's relative thresholds holds the figure


@dataclass(frozen=True)
class Figure:
    """One MLflow metric a plug-in records. An upper-case part of `name` stands for a value
    (`serve_cN_p99_ms`: one figure per N)."""

    name: str
    meaning: str
    unit: str = ""  # "ms", "s", "MB", "share", "count", "req/s", "" for a plain number
    higher_is_better: bool | None = None  # the direction a change is judged by; None: none declared
    compared: Threshold | None = None  # compared per cell by `automl-eval compare`, under that threshold
    attributed: bool = False  # split over its causes by `automl-eval explain-regression`
    reported: bool = False  # read by the report (typed as a number in its job table)

    def __post_init__(self) -> None:
        if (self.compared or self.attributed) and self.higher_is_better is None:
            raise ValueError(f"figure {self.name}: a compared or attributed figure declares its direction "
                             "(higher_is_better)")
