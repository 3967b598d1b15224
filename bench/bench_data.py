"""Benchmark: the data step a fresh clone runs before any framework trains.

Prints the seconds to materialize every card's dataset and folds from the packages into an empty
scratch project, to hash it the way DVC does (and whether it equals datasets.dvc's pin), and to
validate each dataset with the Great Expectations gate.
Run: `python -m bench.bench_data` from the project root (part of `make bench`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def main() -> dict[str, float]:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-data-") as tmp:
        home = Path(tmp)
        shutil.copytree(PROJECT_ROOT / "specs" / "datasets", home / "specs" / "datasets")
        for name in ("params.yaml", ".dvcignore", "datasets.dvc"):
            if (PROJECT_ROOT / name).is_file():
                shutil.copy(PROJECT_ROOT / name, home / name)
        os.environ["AUTOML_EVAL_HOME"] = str(home)
        from tasks.data.build import build
        from tasks.data.validate import validate_dataset
        from tasks.data.versions import dir_md5, pinned_md5
        from tasks.specs import list_dataset_specs

        started = time.perf_counter()
        report = build(use_dvc=False)
        figures["materialize_s"] = time.perf_counter() - started
        started = time.perf_counter()
        workspace = dir_md5(home / "datasets")
        figures["dvc_hash_s"] = time.perf_counter() - started
        print(
            f"materialized {len(report.built)} datasets in {figures['materialize_s']:.1f} s "
            f"({len(report.errors)} errors); DVC hash {workspace} in {figures['dvc_hash_s']:.2f} s; "
            f"equals datasets.dvc: {workspace == pinned_md5()}"
        )
        total = time.perf_counter()
        for spec in list_dataset_specs():
            started = time.perf_counter()
            outcome = validate_dataset(spec)
            seconds = time.perf_counter() - started
            figures[f"validate_{spec.name}_s"] = seconds
            print(
                f"  validate {spec.name:<14} {seconds:6.2f} s  {outcome.expectations:4d} expectations  "
                f"{'passed' if outcome.ok else 'FAILED'}"
            )
        figures["validate_all_s"] = time.perf_counter() - total
        print(
            f"validated all in {figures['validate_all_s']:.1f} s "
            "(the first includes importing Great Expectations)"
        )
    return figures


if __name__ == "__main__":
    main()
