"""What `explain-regression` costs and finds on a planted two-factor regression (docs/attribution.md).

A scratch project with breast_cancer (3 folds x 1 seed, test budget, hgb): the baseline with
max_iter 100; the candidate with max_iter 3 AND a new data version, 30% of the labels flipped
(the first version kept in the scratch DVC cache). Then the attribution twice: reusing the two
executions as the ends (2 mixes run) and with --rerun-ends (4 mixes run). Prints each factor's
share of the AUC change with its 95% interval, the jobs run and the wall time.
Run: `python -m bench.bench_attribution [--folds 3]` (part of `make bench`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bench.scratch_project import scratch_project

DATASET, TARGET = "breast_cancer", "diagnosis"
FOLDS = 3
SUITE_YAML = (
    f"datasets: [{DATASET}]\nframeworks: [{{name: hgb, params: {{max_iter: 100}}}}]\n"
    "folds: {folds}\nseeds: [0]\nbudget: test\n"
)
# The smoke run of tests/integration/test_bench_smoke.py: two folds, the fewest a share's interval
# is drawn from.
SMOKE_ARGS: tuple[str, ...] = ("--folds", "2")


def _flip_labels(csv: Path, share: float) -> None:
    frame = pd.read_csv(csv, dtype={TARGET: str})
    rows = np.random.default_rng(0).choice(len(frame), size=int(share * len(frame)), replace=False)
    classes = sorted(frame[TARGET].unique())
    frame.loc[frame.index[rows], TARGET] = [
        classes[1] if v == classes[0] else classes[0] for v in frame[TARGET].iloc[rows]
    ]
    frame.to_csv(csv, index=False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_attribution",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=FOLDS,
                        help=f"folds of the planted suite (default {FOLDS}; at least 2 for an interval)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    suite_yaml = SUITE_YAML.replace("{folds}", str(args.folds))
    home = Path(tempfile.mkdtemp(prefix="bench-attribution-"))
    scratch_project(home, [DATASET])
    os.environ["AUTOML_EVAL_HOME"] = str(home)
    os.chdir(home)
    from flows.cli_run import configure_embedded_prefect

    configure_embedded_prefect()
    from flows.benchmark import benchmark
    from flows.explain_regression import explain, markdown
    from tasks.data.restore import keep_in_cache

    suite_file = home / "specs" / "suites" / "planted.yaml"
    suite_file.write_text(suite_yaml)
    started = time.perf_counter()
    base_id = benchmark("planted", execution="new")["execution_id"]
    keep_in_cache(home / "datasets" / f"{DATASET}.csv", home)
    _flip_labels(home / "datasets" / f"{DATASET}.csv", 0.3)
    suite_file.write_text(suite_yaml.replace("max_iter: 100", "max_iter: 3"))
    cand_id = benchmark("planted", execution="new")["execution_id"]
    print(f"baseline and candidate executions: {time.perf_counter() - started:.1f} s")
    for rerun_ends in (False, True):
        explanation = explain(base_id, cand_id, max_jobs=20, rerun_ends=rerun_ends)
        print(markdown(explanation))
        print(
            f"rerun_ends={rerun_ends}: {explanation.jobs_run} jobs in "
            f"{sum(1 for m in explanation.mixes if m.jobs)} mixes, {explanation.seconds:.1f} s wall"
        )
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
