"""Reopening: a cell the previous execution settled gets folds again when its result regressed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tasks.adaptive import play_rounds
from tasks.report.adaptive import section
from tasks.report.adaptive_reopen import regressed_cells, settled_cells
from tasks.report.markdown import markdown_table
from tasks.specs import AdaptiveSettings
from tasks.tracking.adaptive_record import recorded_adaptive

SETTINGS = AdaptiveSettings(confidence=0.95, min_folds=3, max_folds=6, decide=["pairwise"])


def _grid(hgb_level: float, folds: int = 6, seed: int = 0) -> dict[str, dict[str, dict[int, float]]]:
    """constant at 0.5, hgb near `hgb_level` with a fold-to-fold spread of 0.003."""
    rng = np.random.default_rng(seed)
    return {"wage": {"constant": dict.fromkeys(range(folds), 0.5),
                     "hgb": {fold: hgb_level + float(rng.normal(0, 0.003)) for fold in range(folds)}}}


def test_a_clear_pair_is_settled_in_the_first_round() -> None:
    assert settled_cells(_grid(0.95), SETTINGS) == {("wage", "constant"), ("wage", "hgb")}
    # A cell that execution had reopened itself ran to its last round: not settled.
    assert settled_cells(_grid(0.95), SETTINGS, {("wage", "hgb")}) == {("wage", "constant")}


def test_worse_beyond_the_nightly_threshold_regresses_a_small_change_does_not() -> None:
    previous, settled = _grid(0.95), {("wage", "constant"), ("wage", "hgb")}
    first_round = {dataset: {name: {fold: score for fold, score in by_fold.items() if fold < 3}
                             for name, by_fold in by_framework.items()}
                   for dataset, by_framework in _grid(0.85, seed=1).items()}
    assert regressed_cells(previous, first_round, settled) == {("wage", "hgb")}  # -10%, far out of noise
    assert regressed_cells(previous, _grid(0.945, seed=1), settled) == set()  # -0.5%: under the 2%
    assert regressed_cells(previous, _grid(1.0, seed=1), settled) == set()  # better is no regression
    assert regressed_cells(previous, first_round, {("wage", "constant")}) == set()  # only cells asked about


def test_a_reopened_cell_gets_every_fold_up_to_max_and_is_not_settled() -> None:
    grid = _grid(0.85)
    plain = play_rounds(grid, confidence=0.95, min_folds=3, max_folds=6, decide=["pairwise"])
    assert plain.folds == {("wage", "constant"): 3, ("wage", "hgb"): 3}
    reopened = play_rounds(grid, confidence=0.95, min_folds=3, max_folds=6, decide=["pairwise"],
                           reopened={("wage", "hgb")})
    assert reopened.folds == {("wage", "constant"): 3, ("wage", "hgb"): 6}
    assert reopened.settled_at == {("wage", "constant"): 1, ("wage", "hgb"): None}


def test_the_report_reads_the_record_and_names_the_reopened_cell(tmp_path: Path) -> None:
    settings, reopened = recorded_adaptive({"adaptive": SETTINGS.model_dump_json(),
                                            "adaptive_reopened": '[["wage", "hgb"]]'})
    assert settings == SETTINGS and reopened == {("wage", "hgb")}
    assert recorded_adaptive({"suite": "nightly"}) == (None, set())  # not run in rounds
    rows = [{"dataset": "wage", "framework": name, "fold": fold, "seed": 0, "result": score, "ok": True,
             "fit_s": 1.0, "status": "ok"}
            for name, by_fold in _grid(0.85)["wage"].items() for fold, score in by_fold.items()
            if name == "hgb" or fold < 3]
    lines = "\n".join(section(pd.DataFrame(rows), settings, tmp_path, markdown_table, reopened))
    cells = pd.read_csv(tmp_path / "adaptive_cells.csv").set_index("framework")
    assert cells.loc["hgb", "settled_in_round"] == "reopened (regressed)" and cells.loc["hgb", "folds"] == 6
    assert cells.loc["constant", "folds"] == 3
    assert "Reopened (settled in the previous execution" in lines and "wage / hgb." in lines
