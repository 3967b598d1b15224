"""The report's Adaptive section, replayed from the recorded per-fold results of a run in rounds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tasks.report.adaptive import section
from tasks.report.markdown import markdown_table as _table
from tasks.specs import AdaptiveSettings


def _jobs() -> pd.DataFrame:
    """As a run in rounds leaves them: constant stopped after 3 folds, hgb and rf ran all 4."""
    rng = np.random.default_rng(0)
    rows = []
    for framework, level, folds in (("constant", 0.5, 3), ("hgb", 0.99, 4), ("rf", 0.99, 4)):
        for fold in range(folds):
            rows.append({"dataset": "breast_cancer", "framework": framework, "fold": fold, "seed": 0,
                         "result": level + rng.normal(0, 0.005) * (framework != "constant"), "ok": True,
                         "fit_s": 1.0, "status": "ok"})
    return pd.DataFrame(rows)


def test_section_names_the_round_each_cell_settled_the_compute_and_what_is_open(tmp_path: Path) -> None:
    settings = AdaptiveSettings(confidence=0.95, min_folds=3, max_folds=4, decide=["pairwise"])
    lines = "\n".join(section(_jobs(), settings, tmp_path, _table))
    cells = pd.read_csv(tmp_path / "adaptive_cells.csv").set_index("framework")
    assert cells.loc["constant", "settled_in_round"] == "1" and cells.loc["constant", "folds"] == 3
    assert cells.loc["hgb", "settled_in_round"] == "open at max" and cells.loc["hgb", "folds"] == 4
    pairs = pd.read_csv(tmp_path / "adaptive_pairs.csv")
    assert set(pairs["verdict"]) == {"worse", "open"}  # constant is worse than both; hgb vs rf open
    assert "11 jobs of the full grid's 12 (92%)" in lines
    assert "Still open at the last round: breast_cancer: hgb vs rf." in lines


def test_no_section_without_the_block(tmp_path: Path) -> None:
    assert section(_jobs(), None, tmp_path, _table) == []
