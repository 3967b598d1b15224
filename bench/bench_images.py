"""`python -m bench.bench_images`: image classification per dataset and framework, as the harness runs it.

Each (dataset, framework) is one job through the real worker and watchdog (tasks.jobs.run_job; no
MLflow, no Prefect) on fold 0 of the project's built data: the networks (the CNN from scratch, the
MobileNetV2 fine-tune) on the image card, a tabular learner (hgb) on the card's pixel table
(`NAME_pixels`), chosen by what each adapter takes (its applies_to), never by its name, with the
params the images suite gives it (batch size, loader workers). It prints,
per job: top-1 accuracy, training images/s, epochs, the share of training spent waiting for data,
and fit seconds. A learner without a training loop of its own records no images/s or epochs; its
images/s is then its training rows over its fit seconds, marked `(fit)`.

Small defaults (digits, the `test` budget); `--datasets fashion_mnist --budget 1m2c` is the issue's
target comparison. Figures, not a test: they depend on the machine and on what else runs on it.
Needs the data built (`make data`).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tasks.errors import UserError
from tasks.frameworks.registry import get_adapter
from tasks.jobs import run_job
from tasks.paths import project_root
from tasks.plan import Job
from tasks.specs import DatasetSpec, FrameworkRef, load_budget, load_dataset_spec

FRAMEWORKS = ("cnn", "mobilenet_finetune", "hgb")
SUITE_FILE = "specs/suites/images.yaml"
PIXELS_SUFFIX = "_pixels"  # the image catalog's pixel tables: NAME_pixels beside NAME
# The smoke run of tests/integration/test_bench_smoke.py: a network on the image card and a tabular
# learner on its pixel table (the two ways a rate is measured), under the shortest budget.
SMOKE_ARGS: tuple[str, ...] = ("--frameworks", "cnn,hgb", "--budget", "smoke")


def suite_params(framework: str) -> dict[str, Any]:
    """The framework's params as the images suite (specs/suites/images.yaml) sets them, so these
    figures match what `automl-eval run images` runs; {} for a framework it does not list."""
    suite = yaml.safe_load((project_root() / SUITE_FILE).read_text())
    for entry in suite.get("frameworks", []):
        ref = FrameworkRef.parse(entry)
        if ref.name == framework and ref.version is None:
            return dict(ref.params)
    return {}


def card_for(framework: str, dataset: str) -> DatasetSpec | None:
    """The card of `dataset` the framework takes: the image card, else its pixel table; None: neither."""
    adapter = get_adapter(framework)
    for name in (dataset, dataset + PIXELS_SUFFIX):
        try:
            spec = load_dataset_spec(name)
        except UserError:
            continue
        if adapter.applies_to(spec) is None:
            return spec
    return None


def row_of(dataset: str, framework: str, spec: DatasetSpec | None, result: Any) -> dict[str, Any]:
    if spec is None or result is None:
        return {"dataset": dataset, "framework": framework, "status": "skipped",
                "error": "takes neither the image card nor its pixel table"}
    figures = {**result.scores, **result.costs}
    images_per_s, measured = figures.get("train_images_per_s"), "loop"
    if images_per_s is None and figures.get("fit_s") and figures.get("train_rows"):
        images_per_s, measured = figures["train_rows"] / figures["fit_s"], "fit"
    row = {"dataset": dataset, "framework": framework, "card": spec.name, "status": result.status,
           "acc": figures.get("acc"), "train_images_per_s": images_per_s, "images_per_s_from": measured,
           "epochs": figures.get("epochs"), "data_wait_share": figures.get("data_wait_share"),
           "fit_s": figures.get("fit_s"), "train_rows": figures.get("train_rows")}
    if result.status != "ok":
        row["error"] = (result.error or "")[-300:]
    return row


def table(rows: list[dict[str, Any]], budget: str) -> str:
    def cell(value: Any, width: int, digits: int = 1) -> str:
        return f"{value:>{width}.{digits}f}" if isinstance(value, (int, float)) else f"{'-':>{width}}"

    lines = [f"budget {budget}, fold 0, load average {os.getloadavg()[0]:.2f}",
             f"{'dataset':<14} {'framework':<20} {'status':<8} {'acc':>6} {'img/s':>9} {'epochs':>7} "
             f"{'wait':>6} {'fit s':>7}"]
    for row in rows:
        marked = "(fit)" if row.get("images_per_s_from") == "fit" else ""
        rate = cell(row.get("train_images_per_s"), 9) + marked
        lines.append(f"{row['dataset']:<14} {row['framework']:<20} {row['status']:<8} "
                     f"{cell(row.get('acc'), 6, 4)} {rate} {cell(row.get('epochs'), 7, 2)} "
                     f"{cell(row.get('data_wait_share'), 6, 3)} {cell(row.get('fit_s'), 7)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="digits", help="image cards, comma-separated")
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS), help="comma-separated")
    parser.add_argument("--budget", default="test", help="a budget of specs/budgets.yaml")
    parser.add_argument("--out", type=Path, default=None, help="job folders here (default: a temporary one)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = parser.parse_args(argv)
    budget = load_budget(args.budget)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch)
        for dataset in [name.strip() for name in args.datasets.split(",") if name.strip()]:
            for framework in [name.strip() for name in args.frameworks.split(",") if name.strip()]:
                spec = card_for(framework, dataset)
                result = None
                if spec is not None:
                    job = Job("bench_images", spec.name, "local", framework, None, 0, 0, budget,
                              suite_params(framework))
                    result = run_job(job, spec, out / dataset / framework)
                rows.append(row_of(dataset, framework, spec, result))
                print(json.dumps(rows[-1]), flush=True)
    print(table(rows, budget.name), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
