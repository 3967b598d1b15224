"""Cost of the robustness stage: its wall time per job and per case, against the job's own fit time.

Runs real jobs (fold 0, the robustness suite's budget unless --budget) of each --frameworks on each
--datasets, then the robustness stage with the settings of specs/suites/robustness.yaml's
`robustness:` block (--time-s, --draws, --adversarial-rows override them), and prints
one JSON line per job: fit_s, the stage's wall_s, cases, seconds per case, coverage reached, why it
stopped, and whether the stage cost at most the job's search budget (the target); and the adaptive
figures: draws per curve point, HopSkipJump flip distances (median, 10th percentile, share within
the flip budget, rows attacked, seconds spent), anomaly-capture AUROC, boundary density of the
random corruptions and of the steered cases, what stopped generation, and whether the stage kept
within its own time_s; the boundary search's cost per query: model calls, vectors queried, and
seconds per call and per vector (adversarial.csv; the stage asks a classifier through predict_proba
only, one call per batch), with the seconds one call on the test fold costs the scorer.
Run: `python -m bench.bench_robustness [--frameworks hgb,constant] [--datasets credit_data]`; by
default every tabular framework on credit_data (binary) and penguins (multiclass).
Figures, not a test: they depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import pandas as pd

from tasks.evaluations.registry import all_evaluations
from tasks.evaluations.stage import evaluation_folder, run_evaluations
from tasks.jobs import run_job
from tasks.plan import Job
from tasks.specs import load_budget, load_dataset_spec, load_suite

# The smoke run of tests/integration/test_bench_smoke.py: one quick job and a short stage with one
# draw per curve point and one row for the boundary search.
SMOKE_ARGS: tuple[str, ...] = ("--frameworks", "hgb", "--datasets", "penguins", "--budget", "test",
                               "--time-s", "10", "--draws", "1", "--adversarial-rows", "1")


def measure(dataset: str, framework: str, budget_name: str, time_s: int, root: Path,
            extra: dict[str, object] | None = None) -> dict[str, object]:
    """One job and its robustness stage; `extra` is the rest of the robustness block."""
    from tasks.data.versions import data_version

    spec = load_dataset_spec(dataset)
    budget = load_budget(budget_name)
    job = Job("bench_robustness", dataset, data_version(spec), framework, None, 0, 0, budget, {})
    job_dir = root / job.key
    result = run_job(job, spec, job_dir)
    row: dict[str, object] = {"dataset": dataset, "framework": framework, "job": result.status,
                              "fit_s": round(float(result.costs.get("fit_s", float("nan"))), 2),
                              "budget_time_s": budget.time_s}
    if result.status != "ok":
        return {**row, "error": (result.error or "").splitlines()[-1:]}
    block = {"robustness": {**(extra or {}), "enabled": True, "time_s": time_s}}
    evaluated = run_evaluations(job, spec, job_dir, result, block)
    outcome = evaluated.evaluations["robustness"]
    folder = evaluation_folder(job_dir, "robustness")
    info = json.loads((folder / "result.json").read_text()).get("info", {})
    cases = int(outcome["metrics"].get("robust_cases", 0))
    wall_s = float(outcome["wall_s"])
    return {
        **row,
        "stage": outcome["status"],
        "stage_wall_s": round(wall_s, 2),
        "cases": cases,
        "s_per_case": round(wall_s / cases, 3) if cases else None,
        "stage_over_fit": round(wall_s / max(float(result.costs.get("fit_s", 0.0)), 1e-9), 2),
        "within_search_budget": wall_s <= budget.time_s,
        "coverage": round(float(outcome["metrics"].get("robust_coverage", 0.0)), 3),
        "stopped": info.get("stop_reason", outcome["reason"]),
        "clean_result": _round(outcome["metrics"].get("robust_clean_result")),  # the suite metric, re-scored
        "robust_auc": outcome["metrics"].get("robust_auc"),
        "failures": outcome["metrics"].get("robust_failures"),
        "within_time_s": wall_s <= time_s,
        "draws": (extra or {}).get("draws", 3),
        **{name: _round(outcome["metrics"].get(f"robust_{name}")) for name in ADAPTIVE},
        "adv_stopped": info.get("boundary", {}).get("adversarial", {}).get("stop_reason"),
        "features_changed": info.get("boundary", {}).get("adversarial", {}).get("features_changed"),
        "generation_stopped_by": info.get("generation_stopped_by"),
        "pixel_attacks": info.get("boundary", {}).get("pixel", {}).get("attacks"),
        **_query_cost(folder / "adversarial.csv"),
        "test_fold_call_s": _round(info.get("test_fold_call_s")),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def _query_cost(table: Path) -> dict[str, object]:
    """The boundary search's cost per query, from adversarial.csv (one row per attacked row)."""
    if not table.exists():
        return {}
    rows = pd.read_csv(table)
    if rows.empty:
        return {"adv_rows_attacked": 0}
    wall, queries = float(rows["wall_s"].sum()), int(rows["queries"].sum())
    calls = int(rows["calls"].sum()) if "calls" in rows.columns else None
    return {"adv_rows_attacked": len(rows), "adv_cut_short": int(rows["cut_short"].sum()),
            "adv_queries": queries, "adv_calls": calls,
            "adv_s_per_query": round(wall / queries, 5) if queries else None,
            "adv_s_per_call": round(wall / calls, 4) if calls else None}


# Every tabular framework, the default of --frameworks.
TABULAR = ["constant", "hgb", "rf", "xgboost", "flaml", "h2o", "autogluon"]
# The adaptive figures (robust_NAME metrics) printed per job.
ADAPTIVE = ["adv_flip_median", "adv_flip_p10", "adv_flip_share", "adv_rows", "adv_s", "anomaly_auroc",
            "anomaly_auroc_random", "anomaly_auroc_steered", "anomaly_cases",
            "boundary_density_random", "boundary_density_steered", "boundary_density", "replayed",
            "replay_still_breaking",
            # torch networks (the image CNN): pixel-space attacks and activation coverage
            "pixel_rows", "fgsm_flip_share", "fgsm_linf_median", "fgsm_l2_median", "pgd_flip_share",
            "pgd_linf_median", "pgd_l2_median", "pixel_hsj_flip_share", "pixel_hsj_linf_median",
            "pixel_errors",
            "activation_coverage_before", "activation_coverage", "activation_cases"]


def _round(value: object) -> object:
    return round(float(value), 3) if isinstance(value, int | float) else value


def suite_block(suite: str) -> tuple[dict[str, object], str]:
    """The suite's robustness block (every field, defaults filled in) and its budget: the bench's
    defaults, so it measures what the suite runs."""
    loaded = load_suite(suite, all_evaluations())
    block = loaded.evaluation_blocks().get("robustness")
    if block is None:
        raise SystemExit(f"suite '{suite}' has no enabled robustness: block")
    return block, loaded.budget


def main(argv: list[str] | None = None) -> int:
    block, suite_budget = suite_block("robustness")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default=",".join(TABULAR),
                        help="comma-separated; every tabular framework by default (h2o and autogluon take "
                             "the whole 1m1c search each, about 2.5 min a job with the stage)")
    parser.add_argument("--datasets", default="credit_data,penguins")
    parser.add_argument("--budget", default=suite_budget, help="the robustness suite's budget by default")
    parser.add_argument("--time-s", type=int, default=block["time_s"],
                        help="the stage's time_s (the robustness suite's by default)")
    parser.add_argument("--draws", type=int, default=block["draws"], help="robustness.draws")
    parser.add_argument("--adversarial-rows", type=int, default=block["adversarial_rows"],
                        help="robustness.adversarial_rows")
    args = parser.parse_args(argv)
    settings = {**block, "draws": args.draws, "adversarial_rows": args.adversarial_rows}
    with tempfile.TemporaryDirectory() as scratch:
        for dataset in args.datasets.split(","):
            for framework in args.frameworks.split(","):
                row = measure(dataset, framework, args.budget, args.time_s, Path(scratch), settings)
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
