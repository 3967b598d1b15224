"""The docs' Extending pages, proven: each test writes a toy plug-in into a package of its own under
tmp_path, names that package in AUTOML_EVAL_PLUGINS, touches no file of the project, and runs it end
to end through the real registries, job runner, tracking, compare and report.

Each toy lives in ONE module of its package (the package's empty __init__.py aside): that is the
count of files a new plug-in touches, the figure docs/extending/index.md gives.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests") not in sys.path:  # jobs_support: the tiny project the job tests share
    sys.path.insert(0, str(ROOT / "tests"))

from jobs_support.tiny_project import make_project  # noqa: E402

from bench.synthetic_runs import SyntheticSuite, synthetic_jobs  # noqa: E402
from tasks.evaluations.stage import evaluation_folder, run_evaluations  # noqa: E402
from tasks.jobs import run_job  # noqa: E402
from tasks.launch import LAUNCHER_ENV  # noqa: E402
from tasks.plan import Job  # noqa: E402
from tasks.plugins import PLUGIN_PACKAGES_ENV  # noqa: E402
from tasks.report.build import build_report  # noqa: E402
from tasks.specs import Budget, DatasetSpec  # noqa: E402

BUDGET = Budget(name="extending", time_s=10, cores=1, memory_mb=2000)


def _plugin_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, package: str,
                     modules: dict[str, str]) -> list[Path]:
    """Write `package` (its modules' sources) under tmp_path, make it importable here and in the
    job's process, and name it in AUTOML_EVAL_PLUGINS; the files written."""
    folder = tmp_path / "plugins" / package
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    written = []
    for name, source in modules.items():
        path = folder / f"{name}.py"
        path.write_text(textwrap.dedent(source))
        written.append(path)
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path / "plugins"),
                                                                   os.environ.get("PYTHONPATH", "")])))
    monkeypatch.setenv(PLUGIN_PACKAGES_ENV, package)
    # A fresh interpreter per job reads the PYTHONPATH set above (a warm fork server started earlier
    # in this process keeps the import path it started with).
    monkeypatch.setenv(LAUNCHER_ENV, "cold")
    return written


def _tree_state() -> str:
    """The checkout's changes as git sees them (ignored files, such as runs and reports, left out)."""
    return subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture(autouse=True)
def touches_no_file_of_the_project() -> Iterator[None]:
    before = _tree_state()
    yield
    assert _tree_state() == before, "a plug-in test changed a file of the project"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, DatasetSpec]:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return make_project(tmp_path / "project", rows=80)


def _job(spec: DatasetSpec, framework: str, fold: int = 0) -> Job:
    return Job("extending", spec.name, "v0", framework, None, fold, 0, BUDGET, {})


# ------------------------------------------------------------------------------ a metric

TOY_METRIC = '''
    """Share of rows predicted right, written again as a plug-in metric."""
    import numpy as np

    from tasks.metric_registry import Metric, Predictions


    def hits(p: Predictions) -> float:
        return float(np.mean(p.y_true == p.y_pred))


    METRIC = Metric("toy_hits", ("binary", "multiclass"), False, hits,
                    definition="share of rows whose predicted class is the true one")
'''


def test_a_metric_reaches_the_jobs_results_and_the_vocabulary(project: dict[str, DatasetSpec], tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.tracking.docs import vocabulary_markdown

    written = _plugin_package(tmp_path, monkeypatch, "toy_metric_plugins", {"hits": TOY_METRIC})
    spec = project["binary"]
    result = run_job(_job(spec, "constant"), spec, tmp_path / "runs" / "metric")
    assert result.status == "ok", result.error
    assert result.scores["toy_hits"] == pytest.approx(result.scores["acc"])  # the same figure, scored anew
    assert "| metric | `toy_hits` | score on the test fold (binary, multiclass); higher is better" \
        in vocabulary_markdown()
    assert len(written) == 1


# ------------------------------------------------------------------------------ a framework

TOY_FRAMEWORK = '''
    """Nearest class mean on the numeric features: a framework adapter in one file."""
    import json
    from pathlib import Path
    from typing import Any

    import numpy as np
    import pandas as pd

    from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo
    from tasks.specs import Budget


    def numeric(X: pd.DataFrame) -> np.ndarray:
        return X.select_dtypes("number").fillna(0.0).to_numpy(dtype=float)


    class CentroidModel(FittedModel):
        def __init__(self, task: TaskInfo, centroids: dict[str, list[float]]) -> None:
            self.task, self.centroids = task, centroids

        def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
            rows = numeric(X)
            closeness = np.stack([-np.linalg.norm(rows - np.asarray(self.centroids.get(str(label), 0.0)),
                                                  axis=1) for label in self.task.classes], axis=1)
            weights = np.exp(closeness - closeness.max(axis=1, keepdims=True))
            return pd.DataFrame(weights / weights.sum(axis=1, keepdims=True), columns=list(self.task.classes))

        def predict(self, X: pd.DataFrame) -> np.ndarray:
            proba = self.predict_proba(X)
            return np.asarray(proba.columns)[proba.to_numpy().argmax(axis=1)]

        def save(self, model_dir: Path) -> None:
            model_dir.mkdir(parents=True, exist_ok=True)
            (model_dir / "centroids.json").write_text(json.dumps(self.centroids))


    class CentroidAdapter(FrameworkAdapter):
        name = "toy_centroid"
        package = "numpy"
        install_hint = "pip install numpy"

        def applies_to(self, spec: Any) -> str | None:
            return None if spec.problem_type in ("binary", "multiclass") else "classification only"

        def fit(self, X: pd.DataFrame, y: pd.Series, *, task: TaskInfo, budget: Budget,
                params: dict[str, Any], workdir: Path, seed: int) -> CentroidModel:
            rows, labels = numeric(X), y.astype(str).to_numpy()
            return CentroidModel(task, {label: rows[labels == label].mean(axis=0).tolist()
                                        for label in np.unique(labels)})

        def load(self, model_dir: Path, task: TaskInfo) -> CentroidModel:
            return CentroidModel(task, json.loads((model_dir / "centroids.json").read_text()))


    ADAPTER = CentroidAdapter()
'''


def test_a_framework_runs_a_tiny_job(project: dict[str, DatasetSpec], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.frameworks.registry import all_adapters

    written = _plugin_package(tmp_path, monkeypatch, "toy_framework_plugins", {"centroid": TOY_FRAMEWORK})
    assert "toy_centroid" in all_adapters()
    spec = project["binary"]
    result = run_job(_job(spec, "toy_centroid"), spec, tmp_path / "runs" / "framework")
    assert result.status == "ok", result.error
    assert 0.0 <= result.scores["auc"] <= 1.0 and result.costs["fit_s"] >= 0
    assert len(written) == 1


# ------------------------------------------------------------------------------ a report section

TOY_SECTION = '''
    """Jobs per framework, as a report section placed between the images and serving sections."""
    from tasks.report.section import ReportContext, ReportSection, Section


    def build(context: ReportContext) -> Section:
        counts = context.table.groupby("framework").size().rename("jobs").reset_index()
        counts.to_csv(context.folder / "toy_counts.csv", index=False)
        return Section(lines=["## Jobs per framework", "", context.markdown_table(counts), ""],
                       files=["- toy_counts.csv: jobs per framework"])


    SECTION = ReportSection("toy counts", 650, build)
'''


def test_a_report_section_appears_in_the_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = _plugin_package(tmp_path, monkeypatch, "toy_section_plugins", {"counts": TOY_SECTION})
    runs = synthetic_jobs(SyntheticSuite(datasets=2, folds=2, seeds=(0, 1)))
    report = build_report(runs, tmp_path / "report", title="toy", bootstrap_rounds=20)
    markdown = report.markdown
    assert "## Jobs per framework" in markdown and "| constant | 8 |" in markdown
    # its place: after the leaderboard (300), before the notes (900) and the file list
    assert markdown.index("## Leaderboard per dataset") < markdown.index("## Jobs per framework") \
        < markdown.index("## Files") < markdown.index("- toy_counts.csv: jobs per framework")
    assert (tmp_path / "report" / "toy_counts.csv").is_file()
    assert len(written) == 1


# ------------------------------------------------------------------------------ an evaluation

TOY_EVALUATION = '''
    """Rows predicted per second on the test fold, as a post-job evaluation with its own figure and
    report section, in one file."""
    import time
    from typing import ClassVar

    from tasks.evaluations.base import EvaluationContext, EvaluationResult, PostJobEvaluation
    from tasks.figures import Figure
    from tasks.report.section import ReportContext, ReportSection, Section


    class RowRate(PostJobEvaluation):
        name = "toy_rate"
        figures: ClassVar[tuple[Figure, ...]] = (
            Figure("toy_rows", "test rows predicted", "count"),
            Figure("toy_rows_per_s", "test rows predicted per second, one batch", "rows/s",
                   higher_is_better=True, compared="cost", reported=True),
        )

        def run(self, context: EvaluationContext) -> EvaluationResult:
            X = context.fold.X_test
            started = time.perf_counter()
            context.model.predict(X)
            seconds = max(time.perf_counter() - started, 1e-6)
            return EvaluationResult(status="ok", metrics={"toy_rows": float(len(X)),
                                                          "toy_rows_per_s": len(X) / seconds})


    EVALUATION = RowRate()


    def build(context: ReportContext) -> Section:
        if "toy_rows_per_s" not in context.table:
            return Section()
        rates = context.table.groupby("framework")["toy_rows_per_s"].mean().reset_index()
        return Section(lines=["## Prediction rate", "", context.markdown_table(rates), ""])


    SECTION = ReportSection("toy rate", 720, build)
'''


def test_an_evaluations_figures_reach_compare_and_the_report(project: dict[str, DatasetSpec], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.report.compare import Thresholds, compare, quantities
    from tasks.tracking import read
    from tasks.tracking.execution import start_execution
    from tasks.tracking.job_folder import mark_result_final, write_pending
    from tasks.tracking.job_run import log_job_dir

    written = _plugin_package(tmp_path, monkeypatch, "toy_evaluation_plugins", {"rate": TOY_EVALUATION})
    spec = project["binary"]
    execution = start_execution("extending")
    for fold in (0, 1):
        job = _job(spec, "constant", fold)
        job_dir = tmp_path / "runs" / job.key
        result = run_job(job, spec, job_dir)
        evaluated = run_evaluations(job, spec, job_dir, result, {"toy_rate": {"enabled": True, "time_s": 60}})
        outcome = evaluated.evaluations["toy_rate"]
        assert outcome["status"] == "ok", outcome["reason"]
        write_pending(job_dir, execution, job, problem_type="binary", metric="auc")
        mark_result_final(job_dir)
        log_job_dir(job_dir)
    runs = read.job_runs(execution_id=execution.execution_id)
    assert runs["toy_rows"].tolist() == [40.0, 40.0]

    # compare: the declared figure is a quantity, judged by its declared direction
    assert {q.name: q.higher_is_better for q in quantities()}["toy_rows_per_s"] is True
    no_noise_test = Thresholds(z=0.0)  # two jobs a side: judge the change by its size and direction
    slower = compare(runs, runs.assign(toy_rows_per_s=runs["toy_rows_per_s"] / 10), thresholds=no_noise_test)
    row = slower.table.set_index("metric").loc["toy_rows_per_s"]
    assert row["change_pct"] == pytest.approx(-90.0) and bool(row["regression"])
    faster = compare(runs, runs.assign(toy_rows_per_s=runs["toy_rows_per_s"] * 10), thresholds=no_noise_test)
    assert not faster.table.set_index("metric").loc["toy_rows_per_s", "regression"]
    assert "toy_rows" not in set(slower.table["metric"])  # not declared `compared`

    # the report: its section reads the figure, typed as a number because it is declared `reported`
    report = build_report(runs, tmp_path / "report", title="toy", bootstrap_rounds=20)
    assert "## Prediction rate" in report.markdown
    assert report.markdown.index("## Prediction rate") < report.markdown.index("## Files")
    assert len(written) == 1


# ------------------------------------------------------------------------------ a modality

TOY_MODALITY = '''
    """1-D signals as a modality: each row's signal is a text column of space-separated samples."""
    import numpy as np
    import pandas as pd
    from pydantic import BaseModel, ConfigDict

    from tasks.evaluations.base import EvaluationContext, EvaluationResult
    from tasks.evaluations.by_modality import ModalityEvaluations
    from tasks.modalities.base import GateCheck, ModalityPlugin
    from tasks.specs import DatasetSpec


    class SignalBlock(BaseModel):
        """The card's `signal:` block."""

        model_config = ConfigDict(extra="forbid")
        column: str  # the column holding the signals
        length: int  # samples per signal


    def samples(text: object) -> list[float]:
        return [float(value) for value in str(text).split()]


    class SignalModality(ModalityPlugin):
        name = "signal"
        card_blocks = {"signal": SignalBlock}
        suite_fields = frozenset({"signal_windows"})

        def block(self, spec: DatasetSpec) -> SignalBlock:
            return SignalBlock(**spec.modality_blocks["signal"])

        def row_identity(self, spec: DatasetSpec, frame: pd.DataFrame) -> np.ndarray:
            # The same samples are the same signal, however the file spaces or pads them.
            column = self.block(spec).column
            return np.asarray([" ".join(f"{value:g}" for value in samples(text)) for text in frame[column]])

        def gate_checks(self, spec: DatasetSpec, frame: pd.DataFrame) -> list[GateCheck]:
            block = self.block(spec)
            wrong = int((frame[block.column].map(lambda text: len(samples(text))) != block.length).sum())
            sentence = (f"{spec.name}: {wrong} signal(s) of '{block.column}' do not have {block.length} "
                        "samples; fix the data or the card's `signal.length`.") if wrong else ""
            return [("signal_length", wrong == 0, sentence, wrong)]


    MODALITY = SignalModality()


    def explain_signals(context: EvaluationContext) -> EvaluationResult:
        """A signal is one feature: how much `result` drops when the signals are shuffled between rows."""
        X, model = context.fold.X_test, context.model

        def result(frame: pd.DataFrame) -> float:
            proba = model.predict_proba(frame)
            return context.score(proba.columns.to_numpy()[proba.to_numpy().argmax(axis=1)], proba)["result"]

        shuffled = X.sample(frac=1.0, random_state=0).set_axis(X.index)
        return EvaluationResult("ok", metrics={"explain_features": 1.0,
                                               "explain_top_importance": result(X) - result(shuffled)},
                                tags={"explain_shap_explainer": "none",
                                      "explain_framework_importance": "none"})


    # What the evaluations do with it (a level above the modality): its own explainer, no text
    # corruptions of its samples' text, and no serving.
    MODALITY_EVALUATIONS = ModalityEvaluations(
        "signal", explainer=explain_signals, corruption_families=frozenset({"missing", "feature_drop"}),
        not_applicable={"serving": "signals are not served yet: no request codec reads them."})
'''


def _signal_card(root: Path, **fields: object) -> Path:
    card = {"name": "toy_signals", "source": {"package": "numpy", "call": "tests/unit/test_extending.py"},
            "file": "toy_signals.csv", "target": "label", "problem_type": "binary", "rows": 40,
            "columns": {"signal": "text"}, "folds": 2, **fields}
    path = root / "specs" / "datasets" / "toy_signals.yaml"
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    return path


def test_a_modality_reads_its_block_groups_its_folds_and_gates_its_data(
        project: dict[str, DatasetSpec], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.data.folds import load_folds
    from tasks.data.load import load_frame
    from tasks.data.materialize import save_folds
    from tasks.data.validate import validate_dataset
    from tasks.errors import UserError
    from tasks.modality import MODALITIES
    from tasks.specs import load_dataset_spec, load_suite

    written = _plugin_package(tmp_path, monkeypatch, "toy_modality_plugins", {"signals": TOY_MODALITY})
    assert "signal" in MODALITIES.names()
    root = tmp_path / "project"
    (root / "params.yaml").write_text((ROOT / "params.yaml").read_text())  # the gate keys its verdict by it
    rng = np.random.default_rng(0)
    waves = [rng.normal(loc=0.5 * (row % 2), size=8).round(3) for row in range(40)]
    texts = [" ".join(f"{value:g}" for value in wave) for wave in waves]
    pairs = [(0, 1), (2, 3), (10, 11), (20, 21), (30, 31)]
    for first, copy in pairs:  # the first row's signal, written otherwise (and labelled otherwise)
        texts[copy] = "  ".join(f"{value:.4f}" for value in waves[first])
    frame = pd.DataFrame({"signal": texts, "label": ["high" if row % 2 else "low" for row in range(40)]})
    frame.to_csv(root / "datasets" / "toy_signals.csv", index=False)

    card = _signal_card(root, modality="signal", signal={"column": "signal", "length": 8})
    spec = load_dataset_spec(card)
    assert spec.modality_blocks == {"signal": {"column": "signal", "length": 8}}
    save_folds(spec, load_frame(spec))
    folds = load_folds(spec)
    # One signal, one fold: the plug-in's identity, not the text's (by chance: 1 in 32).
    assert all(folds[first] == folds[copy] for first, copy in pairs)
    outcome = validate_dataset(spec)
    assert outcome.ok, outcome.failures
    assert validate_dataset(spec).reused  # nothing changed: the verdict is read back
    written[0].write_text(written[0].read_text() + "# an edit of the plug-in\n")
    assert not validate_dataset(spec).reused  # the plug-in decides the verdict too
    # The baseline reads no feature, so it takes the new modality: a job in a process of its own,
    # which reads the card (and so finds the plug-in) again.
    job, job_dir = _job(spec, "constant"), tmp_path / "runs" / "modality"
    result = run_job(job, spec, job_dir)
    assert result.status == "ok", result.error
    assert {"acc", "auc", "result"} <= set(result.scores)  # scored by the harness like any job

    # The post-job evaluations, each in a process of its own, as the plug-in's entry says.
    evaluated = run_evaluations(job, spec, job_dir, result, {
        "explain": {"enabled": True, "time_s": 60},
        "robustness": {"enabled": True, "time_s": 60, "corruptions": ["feature_drop", "text_casing"],
                       "severities": [1.0], "draws": 1, "adversarial_rows": 0, "replay": False},
        "serving": {"enabled": True}}).evaluations
    explain = evaluated["explain"]
    assert explain["status"] == "ok", explain["reason"]
    # The baseline reads no feature: shuffling the signals changes nothing.
    assert explain["metrics"] == {"explain_features": 1.0, "explain_top_importance": 0.0}
    robustness = evaluated["robustness"]
    assert robustness["status"] == "ok", robustness["reason"]
    assert robustness["metrics"]["robust_feature_drop_auc"] == 1.0  # nothing to lose for the baseline
    assert "robust_text_casing_auc" not in robustness["metrics"]
    info = json.loads((evaluation_folder(job_dir, "robustness") / "result.json").read_text())["info"]
    assert info["not_applicable"]["text_casing"] == ("text corruptions are not given to signal datasets (its "
                                                     "corruption_families: feature_drop, missing)")
    assert evaluated["serving"] == {"status": "not applicable", "reason": "signals are not served yet: no "
                                    "request codec reads them.", "metrics": {}, "files": [], "wall_s": 0.0}

    frame.loc[5, "signal"] = "1 2 3"  # a signal three samples long
    frame.to_csv(root / "datasets" / "toy_signals.csv", index=False)
    failed = validate_dataset(spec)
    assert not failed.ok
    assert "toy_signals: 1 signal(s) of 'signal' do not have 8 samples" in " ".join(failed.failures)

    # The card's mistakes, each one sentence naming the field.
    for fields, sentence in [
        ({"modality": "sigal"}, "field 'modality': Value error, unknown modality 'sigal'; known modalities: "
                                "image, multimodal, signal, tabular, text; did you mean 'signal'?"),
        ({"modality": "signal", "signal": {"column": "signal"}},
         "field 'signal.length' is required; add it."),
        ({"modality": "signal", "signal": {"column": "signal", "length": 8, "rate": 1}},
         "unknown field 'signal.rate'"),
        ({"signal": {"column": "signal", "length": 8}},
         "field 'signal' is the signal modality's block; set `modality: signal` or remove it."),
    ]:
        with pytest.raises(UserError, match=re.escape(sentence)):
            load_dataset_spec(_signal_card(root, **fields))

    suite = root / "specs" / "suites" / "toy_signals.yaml"
    suite.write_text(yaml.safe_dump({"datasets": ["tiny_binary"], "frameworks": ["constant"],
                                     "budget": "test", "signal_windows": 3}))
    assert load_suite(suite, {}).model_extra == {"signal_windows": 3}  # the modality's suite field
    assert len(written) == 1


def test_a_broken_plugin_package_is_one_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.errors import UserError
    from tasks.frameworks.registry import all_adapters

    _plugin_package(tmp_path, monkeypatch, "toy_broken_plugins", {"broken": "import no_such_module\n"})
    with pytest.raises(UserError, match=r"AUTOML_EVAL_PLUGINS: the plug-in module toy_broken_plugins\.broken "
                                        r"failed to import \(ModuleNotFoundError"):
        all_adapters()
    monkeypatch.setenv(PLUGIN_PACKAGES_ENV, "toy_missing_plugins")
    with pytest.raises(UserError, match="AUTOML_EVAL_PLUGINS: cannot import the plug-in package "
                                        "'toy_missing_plugins'"):
        all_adapters()


def test_the_shipped_sections_are_found_in_report_order() -> None:
    from tasks.report.section import ordered_sections

    assert [section.name for section in ordered_sections()] == [
        "across datasets", "pareto fronts", "stability", "leaderboard", "modality combinations", "robustness",
        "reference", "adaptive", "forecasting", "images", "serving", "energy", "anytime", "scaling", "notes",
        "explanations"]
