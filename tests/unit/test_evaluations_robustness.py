"""Robustness by mutation testing: corruptions hit exactly what their severity asks, reproducibly;
the breaking-point search finds a known break; a model that fails on corrupted input is a counted
robustness failure; the stage records its cases; bad suite blocks are one sentence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from jobs_support.tiny_project import make_project

from tasks.errors import UserError
from tasks.evaluations.base import EvaluationContext
from tasks.evaluations.registry import all_evaluations
from tasks.evaluations.robustness import (
    CASES_FILE,
    RobustnessSettings,
    Scorer,
    case_seed,
    frame_md5,
)
from tasks.evaluations.robustness.corruptions import CORRUPTIONS, FrameFacts, corrupt
from tasks.evaluations.robustness.images import IMAGE_FAMILY
from tasks.evaluations.robustness.search import FRAME, SearchSettings, search
from tasks.evaluations.stage import evaluation_folder, run_evaluations
from tasks.frameworks.base import FittedModel
from tasks.jobs import run_job
from tasks.plan import Job
from tasks.specs import Budget, DatasetSpec, load_suite

ROWS = 200
# The corruptions whose severity is a share of cells; the image families (an intensity on every
# image) have tests of their own (test_robustness_images.py).
AVAILABLE = [name for name, c in CORRUPTIONS.items() if not c.unavailable and c.family != IMAGE_FAMILY]
BUDGET = Budget(name="robust", time_s=5, cores=1, memory_mb=2000)


def _tiny_frame() -> tuple[pd.DataFrame, FrameFacts]:
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({
        "a": rng.normal(10, 2, ROWS),  # no zeros: x10 changes every hit cell
        "b": rng.integers(1, 90, ROWS),
        "c": pd.Categorical(rng.choice(["red", "green", "blue"], ROWS)),
        "note": [f"the quick brown fox number {i} jumps over the lazy dog" for i in range(ROWS)],
        "acc__x__mean": rng.normal(size=ROWS),
        "acc__x__std": rng.uniform(1, 2, ROWS),
    })
    roles = {"a": "numeric", "b": "numeric", "c": "categorical", "note": "text",
             "acc__x__mean": "numeric", "acc__x__std": "numeric"}
    return frame, FrameFacts(roles=roles, importance=["b", "a", "c", "note", "acc__x__mean", "acc__x__std"],
                             sensor_streams=True)


def _changed(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    left, right = before.astype(object), after.astype(object)
    return left.ne(right) & ~(left.isna() & right.isna())


@pytest.mark.parametrize("name", AVAILABLE)
@pytest.mark.parametrize("severity", [0.1, 0.37, 1.0])
def test_each_corruption_changes_the_share_its_severity_asks(name: str, severity: float) -> None:
    frame, facts = _tiny_frame()
    corruption = CORRUPTIONS[name]
    targets = corruption.targets(frame, facts)
    assert targets, f"{name} finds nothing to hit in the tiny frame"
    seeds = {t: case_seed("v1", 0, name, t, severity, 0) for t in targets}
    corrupted, mask = corrupt(frame, corruption, targets, severity, seeds.__getitem__, facts)
    changed = _changed(frame, corrupted)
    if name == "feature_drop":
        dropped = int(np.ceil(severity * len(targets) - 1e-9))
        assert list(mask.columns[mask.all()]) == sorted(targets[:dropped], key=list(frame.columns).index)
    else:
        per_column = mask.sum()
        hit = per_column[per_column > 0]
        assert (hit == int(ROWS * severity)).all(), hit.to_dict()
        expected_columns = {c for t in targets for c in (facts.streams(frame).get(t) or [t])}
        assert set(hit.index) == expected_columns
    # Only masked cells change, and every masked cell does (casing can repeat a text only by chance).
    assert not (changed & ~mask).to_numpy().any()
    assert (changed == mask).to_numpy().mean() > 0.99
    # Regeneration gives the same bytes; another seed, other rows.
    again, _ = corrupt(frame, corruption, targets, severity, seeds.__getitem__, facts)
    assert frame_md5(again) == frame_md5(corrupted)
    if severity < 1.0 and name != "feature_drop":
        other, _ = corrupt(frame, corruption, targets, severity, lambda t: seeds[t] + 1, facts)
        assert frame_md5(other) != frame_md5(corrupted)


def test_missing_mechanisms_honour_their_dependence() -> None:
    frame, facts = _tiny_frame()
    share_high = {}
    for name in ("missing_mcar", "missing_mnar"):
        high = []
        for seed in range(20):
            _, mask = corrupt(frame, CORRUPTIONS[name], ["a"], 0.2, lambda t, s=seed: s, facts)
            high.append((frame.loc[mask["a"], "a"] > frame["a"].median()).mean())
        share_high[name] = float(np.mean(high))
    # MNAR: the higher the value, the likelier it goes missing; MCAR: no preference.
    assert share_high["missing_mnar"] > 0.7
    assert 0.35 < share_high["missing_mcar"] < 0.65
    # MAR: the hit rows are a block of neighbouring values of the condition column, not of `a` itself.
    from tasks.evaluations.robustness.corruptions import condition_column

    condition = condition_column(frame, "a", facts)
    assert condition != "a"
    _, mask = corrupt(frame, CORRUPTIONS["missing_mar"], ["a"], 0.2, lambda t: 5, facts)
    hit = frame.loc[mask["a"], condition]
    between = frame[condition].gt(hit.min()) & frame[condition].lt(hit.max())
    assert mask["a"].sum() == 40 and not (between & ~mask["a"]).any()


# ---------------------------------------------------------------- the scorer on a test-only model


class KnownBreakModel(FittedModel):
    """Test-only: knows the test labels, and answers with the class prior once the share of missing
    values in column x2 reaches `breaks_at` (so its breaking severity is known)."""

    def __init__(self, truth: pd.Series, classes: tuple, breaks_at: float) -> None:
        self.truth, self.classes, self.breaks_at = truth.astype(str).to_numpy(), classes, breaks_at

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        positive = np.asarray(self.truth == str(self.classes[1]), dtype=float)
        if X["x2"].isna().mean() >= self.breaks_at:
            positive = np.full(len(X), positive.mean())
        return pd.DataFrame({self.classes[0]: 1 - positive, self.classes[1]: positive})

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        proba = self.predict_proba(X)
        return np.where(proba.iloc[:, 1] > 0.5, self.classes[1], self.classes[0])

    def save(self, model_dir: Path) -> None:
        pass


class RaisesOnMissing(FittedModel):
    """Test-only: a model without missing-value handling, as many are."""

    def __init__(self, classes: tuple) -> None:
        self.classes = classes

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if X[["x2"]].isna().any().any():
            raise ValueError("Input X contains NaN.")
        score = 1 / (1 + np.exp(-X["x2"].to_numpy(dtype=float)))
        return pd.DataFrame({self.classes[0]: 1 - score, self.classes[1]: score})

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return np.where(self.predict_proba(X).iloc[:, 1] > 0.5, self.classes[1], self.classes[0])

    def save(self, model_dir: Path) -> None:
        pass


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, DatasetSpec]:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    return make_project(tmp_path / "project", rows=200)


def _context(spec: DatasetSpec, tmp_path: Path, model_of, **settings) -> tuple[EvaluationContext, Scorer]:  # noqa: ANN001
    job = Job("robust", spec.name, "v1", "constant", None, 0, 0, BUDGET, {})
    folder = tmp_path / "eval"
    folder.mkdir(exist_ok=True)
    context = EvaluationContext(job=job, spec=spec, job_dir=tmp_path, folder=folder,
                                settings=RobustnessSettings(enabled=True, **settings), cores=[])
    context.__dict__["model"] = model_of(context.fold)  # the cached property, without a saved model
    facts = FrameFacts(roles=dict(context.fold.task.column_roles))
    return context, Scorer(context, context.model, facts, {}, 0.5, 0)


def test_breaking_point_search_finds_a_known_break(project: dict[str, DatasetSpec], tmp_path: Path) -> None:
    breaks_at, resolution = 0.37, 0.02
    context, scorer = _context(project["binary"], tmp_path,
                               lambda fold: KnownBreakModel(fold.y_test, fold.task.classes, breaks_at))
    assert scorer.clean == pytest.approx(1.0)
    scorer.targets = {"missing_mcar": ["x1", "x2", "color"]}
    outcome = search({"missing_mcar": ("missing", scorer.targets["missing_mcar"])}, scorer,
                     SearchSettings(presets=[0.1, 0.25, 0.5, 1.0], resolution=resolution, max_bisections=10,
                                    coverage_min=0.0, probe_severity=0.5), has_time=lambda: True)
    curve = outcome.curves["missing_mcar"]
    low, high = curve.bracket()
    # Rows are whole: the break is at the first share of rows >= breaks_at.
    rows = len(context.fold.X_test)
    assert high - low <= resolution and low < breaks_at <= high + 1 / rows
    assert curve.breaking_point == high and 0 < curve.bisections <= 10
    assert [c.broken for c in sorted(curve.cases, key=lambda c: c.severity)] == sorted(
        c.broken for c in curve.cases)
    # Two runs of the same case see the same bytes.
    assert scorer("missing_mcar", FRAME, 0.25, "preset").md5 == curve.cases[1].md5


def test_a_model_that_raises_on_missing_values_is_a_counted_failure(project: dict[str, DatasetSpec],
                                                                    tmp_path: Path) -> None:
    _, scorer = _context(project["binary"], tmp_path, lambda fold: RaisesOnMissing(fold.task.classes))
    corruptions = {"missing_mcar": ("missing", ["x2"]), "gaussian_noise": ("noise", ["x2", "x1"])}
    scorer.targets = {name: targets for name, (_, targets) in corruptions.items()}
    outcome = search(corruptions, scorer, SearchSettings(
        presets=[0.25, 1.0], resolution=0.1, max_bisections=0, coverage_min=1.0, probe_severity=0.25),
        has_time=lambda: True)
    failures = [c for c in outcome.all_cases() if c.status == "failure"]
    assert failures and all(c.corruption == "missing_mcar" for c in failures)
    assert all("contains NaN" in c.error and c.result == scorer.constant for c in failures)
    noisy = [c for c in outcome.all_cases() if c.corruption == "gaussian_noise"]
    assert noisy and all(c.status == "ok" for c in noisy)  # the suite went on
    assert outcome.coverage == 1.0 and "coverage 100%" in outcome.stop_reason


def test_the_stage_records_cases_and_metrics(project: dict[str, DatasetSpec], tmp_path: Path) -> None:
    spec = project["binary"]
    job = Job("robust", spec.name, "v0", "constant", None, 0, 0, BUDGET, {})
    job_dir = tmp_path / "runs" / job.key
    result = run_job(job, spec, job_dir)
    assert result.status == "ok", result.error
    block = {"enabled": True, "time_s": 60, "corruptions": ["missing_mcar", "category_swap", "text_casing",
                                                             "stream_drop"],
             "severities": [0.5, 1.0], "coverage_min": 1.0}
    evaluated = run_evaluations(job, spec, job_dir, result, {"robustness": block})
    outcome = evaluated.evaluations["robustness"]
    assert outcome["status"] == "ok", outcome["reason"]
    metrics = outcome["metrics"]
    # The constant predictor reads no feature: nothing degrades, nothing breaks.
    assert metrics["robust_missing_mcar_auc"] == pytest.approx(1.0)
    assert metrics["robust_missing_mcar_breaking"] == 1.0 and metrics["robust_failures"] == 0
    assert metrics["robust_coverage"] == 1.0 and "robust_stream_auc" not in metrics
    folder = evaluation_folder(job_dir, "robustness")
    cases = pd.read_csv(folder / CASES_FILE)
    assert set(cases["corruption"]) == {"missing_mcar", "category_swap", "text_casing"}
    assert cases["md5"].str.len().eq(32).all() and (cases["cells_changed"] > 0).all()
    info = (folder / "result.json").read_text()
    assert "stream_drop" not in info or "nothing in tiny_binary" in info


@pytest.mark.parametrize(("block", "message"), [
    ("{enabled: true, corruptions: [missing, noise]}", r"s\.yaml: field 'robustness\.corruptions'.*unknown "
                                                       r"corruption 'missing'"),
    ("{enabled: true, severities: [0.5, 1.5]}", r"s\.yaml: field 'robustness\.severities'.*outside \(0, 1\]"),
    ("{enabled: true, coverage_min: 2}", r"s\.yaml: field 'robustness\.coverage_min'"),
])
def test_bad_robustness_blocks_are_one_sentence(project: dict[str, DatasetSpec], tmp_path: Path, block: str,
                                                message: str) -> None:
    path = tmp_path / "project" / "specs" / "suites" / "s.yaml"
    path.write_text(f"datasets: [tiny_binary]\nframeworks: [constant]\nbudget: smoke\nrobustness: {block}\n")
    with pytest.raises(UserError, match=message):
        load_suite(path, all_evaluations())


# ---------------------------------------------------------------- the report's robust ranking


def _job_table() -> pd.DataFrame:
    from tasks.report.jobs import prepare

    # robust_auc per (dataset, framework), and the clean result: b wins on clean data, c when corrupted.
    robust = {"d1": {"a": 0.60, "b": 0.50, "c": 0.90}, "d2": {"a": 0.70, "b": 0.40, "c": 0.80},
              "d3": {"a": 0.30, "b": 0.60, "c": 0.90}}
    clean = {"d1": {"a": 0.80, "b": 0.90, "c": 0.70}, "d2": {"a": 0.85, "b": 0.95, "c": 0.75},
             "d3": {"a": 0.70, "b": 0.80, "c": 0.60}}
    rows = [{"dataset": d, "framework": f, "status": "ok", "metric": "auc", "auc": clean[d][f],
             "result": clean[d][f], "robust_auc": robust[d][f], "robust_missing_auc": robust[d][f],
             "robust_missing_mcar_breaking": 0.5 if f == "b" else 1.0, "fold": 0, "seed": 0}
            for d in robust for f in robust[d]]
    rows += [{"dataset": d, "framework": "constant", "status": "ok", "metric": "auc", "auc": 0.5,
              "result": 0.5, "robust_auc": 1.0, "fold": 0, "seed": 0} for d in robust]
    return prepare(pd.DataFrame(rows))


def test_robust_ranking_agrees_with_a_hand_computed_one(tmp_path: Path) -> None:
    from tasks.report import robustness

    report = robustness.build(_job_table(), None, tmp_path)
    board = report.leaderboard.set_index("framework")
    # Ranks per dataset (1 = best AUC): d1 c1 a2 b3; d2 c1 a2 b3; d3 c1 b2 a3. Clean: b1 a2 c3 everywhere.
    assert board["robust_rank"].to_dict() == pytest.approx({"c": 1.0, "a": 7 / 3, "b": 8 / 3})
    assert board["clean_rank"].to_dict() == pytest.approx({"a": 2.0, "b": 1.0, "c": 3.0})
    assert board.loc["c", "rank_change"] == pytest.approx(-2.0)  # loses on clean data, wins corrupted
    assert "constant" not in board.index  # it reads no feature: robust by construction
    assert list(board.index) == ["c", "a", "b"]
    assert report.friedman is not None and report.friedman.frameworks == 3
    families = report.families.set_index("family")
    assert families.loc["missing", "degrades_least"] == "c"
    breaking = report.breaking.set_index(["dataset", "corruption"])
    assert breaking.loc[("d1", "missing_mcar"), "b"] == 0.5


def test_compare_flags_a_robustness_regression() -> None:
    from tasks.report.compare import compare

    base = pd.DataFrame([{"dataset": "d", "framework": "hgb", "status": "ok", "metric": "auc", "result": 0.9,
                          "robust_auc": 0.8 + 0.01 * s, "robust_breaking_mean": 0.7, "fold": 0, "seed": s}
                         for s in range(3)])
    worse = base.assign(robust_auc=base["robust_auc"] - 0.2, robust_breaking_mean=0.4)
    table = compare(base, worse).table.set_index("metric")
    assert bool(table.loc["robust_auc", "regression"])
    assert bool(table.loc["robust_breaking_mean", "regression"])
    assert not bool(table.loc["result", "regression"])
    assert not compare(base, base).regressed


def test_report_draws_curves_and_names_the_worst_cells(tmp_path: Path) -> None:
    from tasks.report import robustness

    rows = []
    for framework, slope in (("a", 0.4), ("b", 0.9)):
        for severity in (0.25, 0.5, 1.0):
            rows.append({"dataset": "d1", "framework": framework, "corruption": "missing_mcar", "target": "*",
                         "severity": severity, "degradation": slope * severity, "status": "ok"})
        for column, damage in (("x1", 0.1), ("x2", 0.7), ("x3", 0.3), ("x4", 0.2), ("x5", 0.05), ("x6", 0.6)):
            rows.append({"dataset": "d1", "framework": framework, "corruption": "unit_x10", "target": column,
                         "severity": 0.5, "degradation": damage * slope, "status": "ok"})
    report = robustness.build(_job_table(), pd.DataFrame(rows), tmp_path)
    assert (tmp_path / "robust_curves_d1.png").is_file()
    worst = report.worst_cells[report.worst_cells["framework"] == "b"]
    assert list(worst["target"]) == ["x2", "x6", "x3", "x4", "x1"]
    assert len(report.curves) == 6


@pytest.mark.parametrize("name", ["missing_mar", "gaussian_noise", "stream_noise"])
def test_a_frame_wide_case_is_the_union_of_its_single_target_cases(name: str) -> None:
    frame, facts = _tiny_frame()
    corruption = CORRUPTIONS[name]
    targets = corruption.targets(frame, facts)
    seeds = {t: case_seed("v1", 1, name, t, 0.3, 0) for t in targets}
    whole, _ = corrupt(frame, corruption, targets, 0.3, seeds.__getitem__, facts)
    for target in targets:
        single, mask = corrupt(frame, corruption, [target], 0.3, seeds.__getitem__, facts)
        hit = list(mask.columns[mask.any()])
        pd.testing.assert_frame_equal(whole[hit], single[hit])


def test_report_constants_match_the_evaluation() -> None:
    """The report names these without importing the evaluation (which imports tab_err)."""
    from tasks.evaluations.robustness.search import BUILD_ERROR
    from tasks.report import robustness as report

    assert (report.FRAME_TARGET, report.BUILD_ERROR) == (FRAME, BUILD_ERROR)


def test_a_copy_that_cannot_be_built_is_a_build_error_not_a_point(project: dict[str, DatasetSpec],
                                                                 tmp_path: Path) -> None:
    """Applicability is settled before any case, so a corruption that then raises is a defect: it
    is recorded as one, counted, and never drawn as a point of the curve or hidden as not applicable."""
    from tasks.evaluations.robustness import summarize
    from tasks.evaluations.robustness.search import BUILD_ERROR

    _, scorer = _context(project["binary"], tmp_path,
                         lambda fold: KnownBreakModel(fold.y_test, fold.task.classes, 2.0))
    scorer.targets = {"gaussian_noise": ["color", "x1"]}  # noise on a categorical column cannot be built
    outcome = search({"gaussian_noise": ("noise", ["color", "x1"])}, scorer, SearchSettings(
        presets=[0.5, 1.0], resolution=0.1, max_bisections=0, coverage_min=1.0, probe_severity=0.5),
        has_time=lambda: True)
    unbuilt = [c for c in outcome.all_cases() if c.status == BUILD_ERROR]
    assert unbuilt and all("not numeric" in c.error and c.target in ("color", "*") for c in unbuilt)
    assert all(c.status != BUILD_ERROR for c in outcome.curves["gaussian_noise"].scored)
    metrics = summarize(outcome, scorer, [0.5, 1.0])
    assert metrics["robust_build_errors"] == len(unbuilt)
    assert metrics["robust_cases"] == len(outcome.all_cases()) - len(unbuilt)
