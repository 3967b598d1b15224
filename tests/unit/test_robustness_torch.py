"""The robustness stage on a real tiny CNN fit: activation coverage through the model's torch
network (forward hooks) steered towards its target, FGSM/PGD/HopSkipJump in pixel space through
ART reported apart from the black-box figures; a model without a network, or with discrete
inputs, is "not applicable" with the reason; an attack that raises is recorded and the rest goes on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from jobs_support.tiny_project import make_image_project

from tasks.data.fold_data import load_fold
from tasks.errors import UserError
from tasks.evaluations.registry import all_evaluations
from tasks.evaluations.robustness import torch_network_of
from tasks.evaluations.robustness.gradient import GradientSettings, pixel_attacks
from tasks.evaluations.robustness.signals import activation_coverage
from tasks.evaluations.stage import run_evaluations
from tasks.frameworks.base import TaskInfo
from tasks.frameworks.capabilities import TorchNetwork
from tasks.frameworks.registry import get_adapter
from tasks.jobs import run_job
from tasks.plan import Job
from tasks.report import robustness
from tasks.report.jobs import prepare
from tasks.specs import Budget, DatasetSpec, load_suite

BUDGET = Budget(name="robust-cnn", time_s=30, cores=1, memory_mb=4096)
CNN_PARAMS = {"batch_size": 8, "epochs": 2, "_validation_rows": 4}


@pytest.fixture
def images(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, DatasetSpec]:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    return make_image_project(tmp_path / "project", rows=48)


def test_the_cnn_stage_reports_activation_coverage_and_pixel_attacks(images: dict[str, DatasetSpec],
                                                                      tmp_path: Path) -> None:
    spec = images["multiclass"]
    job = Job("robust", spec.name, "v0", "cnn", None, 0, 0, BUDGET, dict(CNN_PARAMS))
    job_dir = tmp_path / "runs" / "robust" / job.key
    result = run_job(job, spec, job_dir)
    assert result.status == "ok", result.error
    # Six attacked rows, two iterations, at most eight noise rounds: the work is bounded; time_s is a
    # ceiling (at 40 s a loaded machine left the noise rounds no time at all).
    block = {"enabled": True, "time_s": 300, "pixel_rows": 6, "pixel_eps": 0.3, "attack_iterations": 2,
             "coverage_rows": 8, "activation_target": 0.99, "replay": False}
    outcome = run_evaluations(job, spec, job_dir, result, {"robustness": block}).evaluations["robustness"]
    metrics = outcome["metrics"]
    info = json.loads((job_dir / "evaluations" / "robustness" / "result.json").read_text())["info"]
    assert metrics["robust_pixel_rows"] == 6 and metrics["robust_pixel_errors"] == 0, info["boundary"]
    for attack in ("fgsm", "pgd"):
        assert 0 <= metrics[f"robust_{attack}_flip_share"] <= 1
    # FGSM in minimal mode: a flipped row's L-inf perturbation is a multiple of its step, within eps.
    if metrics["robust_fgsm_flip_share"] > 0:
        assert 0 < metrics["robust_fgsm_linf_median"] <= 0.3 + 1e-6
    # The tabular black-box search has no feature to move on an image: its own figures stay apart.
    assert "robust_adv_flip_median" not in metrics
    # The attacked images join the generated cases the signals read.
    assert 0 <= metrics["robust_boundary_density"] <= 1
    coverage = metrics["robust_activation_coverage"]
    assert 0 < metrics["robust_activation_coverage_before"] <= coverage <= 1
    # Target 0.99 on a ResNet is out of reach: the noise rounds ran until their cap or the time.
    assert metrics["robust_activation_cases"] > 0
    activation = info["boundary"]["activation"]
    assert activation["target"] == 0.99 and activation["stop_reason"] in info["generation_stopped_by"]


def test_coverage_through_the_capability_matches_hooks_by_hand(images: dict[str, DatasetSpec],
                                                               tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    fold = load_fold(images["multiclass"], 0)
    model = get_adapter("cnn").fit(fold.X_train, fold.y_train, task=fold.task, budget=BUDGET,
                                   params={"batch_size": 8, "epochs": 1, "_max_steps": 2}, workdir=tmp_path,
                                   seed=0)
    network, reason = torch_network_of(model)
    assert network is not None and reason == "" and network.clip_values == (0.0, 1.0)
    x = network.inputs(fold.X_test.iloc[:5])
    assert tuple(x.shape[1:]) == network.input_shape
    # By hand: the final linear layer's units above 0 for any of the five images.
    with torch.no_grad():
        fc_out = []
        handle = network.module.fc.register_forward_hook(lambda _m, _i, out: fc_out.append(out))
        network.module(x)
        handle.remove()
    fc_fired = int((fc_out[0] > 0).any(dim=0).sum())
    only_fc = torch.nn.Sequential()  # coverage of fc alone, through the signal's own hooks
    only_fc.add_module("fc", network.module.fc)
    features = torch.nn.Sequential(*list(network.module.children())[:-1])
    with torch.no_grad():
        pooled = torch.flatten(features(x), 1)
    by_hand = fc_fired / network.module.fc.out_features
    assert activation_coverage(only_fc, pooled, 0.0) == pytest.approx(by_hand)
    # Batches count as one set of cases: the union of what fired in each.
    whole = activation_coverage(network.module, [x[:2], x[2:]], 0.0)
    assert whole == pytest.approx(activation_coverage(network.module, x, 0.0))
    # A tabular model offers no network: the reason is its own line.
    constant = get_adapter("constant").fit(fold.X_train, fold.y_train, task=fold.task, budget=BUDGET,
                                           params={}, workdir=tmp_path, seed=0)
    assert torch_network_of(constant) == (None, "its model is not a torch network")


def test_an_attack_that_raises_is_recorded_and_discrete_inputs_are_not_applicable() -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 2))
    network = TorchNetwork(module=net, inputs=lambda frame: torch.zeros(len(frame), 1, 2, 2),
                           classes=["a", "b"], clip_values=(0.0, 1.0), input_shape=(1, 2, 2))
    x = np.random.default_rng(0).uniform(size=(5, 1, 2, 2)).astype(np.float32)
    # pgd_iter -1 makes ART's ProjectedGradientDescent refuse its settings: that attack alone fails.
    outcome = pixel_attacks(network, x, GradientSettings(eps=0.5, eps_step=0.05, pgd_iter=-1, hsj_iter=1,
                                                         hsj_evals=5), lambda _s: True)
    by_name = {a.name: a for a in outcome.attacks}
    assert by_name["pgd"].error and not by_name["fgsm"].error and not by_name["pixel_hsj"].error
    metrics = outcome.metrics()
    assert metrics["robust_pixel_errors"] == 1 and "robust_pgd_flip_share" not in metrics
    assert "robust_fgsm_flip_share" in metrics and "robust_pixel_hsj_flip_share" in metrics
    # The time is checked between chunks of rows: a clock that allows only the first chunk stops
    # each attack there, says so, and the figures are over the rows attacked.
    short = pixel_attacks(network, x, GradientSettings(eps=0.5, chunk=2), lambda next_s: next_s == 0.0)
    fgsm = short.attacks[0]
    assert len(fgsm.flipped) == 2 and fgsm.skipped == "time limit reached after 2 of 5 rows"
    assert all(a.skipped == "time limit reached after 0 of 5 rows" for a in short.attacks[1:])
    discrete = TorchNetwork(module=net, inputs=network.inputs, classes=["a", "b"])
    with pytest.raises(ValueError, match="discrete"):
        pixel_attacks(discrete, x, GradientSettings(), lambda _s: True)


def test_an_activation_target_outside_0_1_is_one_sentence(images: dict[str, DatasetSpec],
                                                          tmp_path: Path) -> None:
    path = tmp_path / "project" / "specs" / "suites" / "s.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("datasets: [tiny_image_multiclass]\nframeworks: [cnn]\nbudget: smoke\n"
                    "robustness: {enabled: true, activation_target: 1.5}\n")
    with pytest.raises(UserError, match=r"s\.yaml: field 'robustness\.activation_target'"):
        load_suite(path, all_evaluations())


def test_the_report_shows_pixel_attacks_apart_from_the_black_box_table(tmp_path: Path) -> None:
    rows = [{"dataset": "digits", "framework": f, "status": "ok", "metric": "acc", "acc": 0.9, "result": 0.9,
             "robust_auc": 0.8, "fold": fold, "seed": 0, "robust_pixel_rows": 32.0,
             "robust_fgsm_flip_share": share + fold / 10, "robust_pgd_flip_share": 1.0,
             "robust_fgsm_linf_median": 0.05, "robust_activation_coverage": 0.6}
            for f, share in (("cnn", 0.2),) for fold in (0, 1)]
    pixel_names = ("fgsm_flip_share", "pgd_flip_share", "pixel_rows", "fgsm_linf_median",
                   "activation_coverage")
    rows.append({**rows[0], "framework": "hgb", "robust_adv_flip_median": 1.5,
                 **{f"robust_{name}": None for name in pixel_names}})
    report = robustness.build(prepare(pd.DataFrame(rows)), None, tmp_path)
    assert report is not None
    pixel = report.pixel.set_index("framework")
    assert list(pixel.index) == ["cnn"]  # hgb has no network: no row of its own
    assert pixel.loc["cnn", "fgsm_flip_share"] == pytest.approx(0.25)  # mean over the folds
    assert pixel.loc["cnn", "coverage"] == pytest.approx(0.6)
    assert list(report.adaptive["framework"]) == ["hgb"]
    text = "\n".join(robustness.markdown(report, lambda frame: frame.to_string()))
    assert "Pixel-space attacks and activation coverage" in text
    assert (tmp_path / "robust_pixel.csv").is_file()


def test_hf_finetune_offers_its_network_for_coverage_but_not_for_gradient_attacks(tmp_path: Path) -> None:
    texts = ["great taste, love it", "delicious and fresh", "stale and awful", "worst tea I ever had"] * 3
    X = pd.DataFrame({"review": texts})
    y = pd.Series(["great", "great", "other", "other"] * 3, dtype=object)
    task = TaskInfo("binary", "score", "auc", {"review": "text"}, ("great", "other"))
    adapter = get_adapter("hf_finetune")
    model = adapter.fit(X, y, task=task, budget=Budget(name="tiny", time_s=120, cores=1, memory_mb=2048),
                        params=adapter.test_params(), workdir=tmp_path, seed=0)
    network, reason = torch_network_of(model)
    assert network is not None and reason == "" and network.classes == ["great", "other"]
    assert network.clip_values is None  # token ids: nothing gradients may move
    # Two padded batches of different lengths count as one set of cases.
    short, long = network.inputs(X.iloc[:2]), network.inputs(pd.DataFrame({"review": [texts[3] * 3]}))
    assert short["input_ids"].shape[1] != long["input_ids"].shape[1]
    assert network.units == "last_axis"
    coverage = activation_coverage(network.module, [short, long], 0.0, network.units)
    assert 0 < coverage < 1
    assert coverage >= activation_coverage(network.module, short, 0.0, network.units)
    with pytest.raises(ValueError, match="units='last_axis'"):
        activation_coverage(network.module, [short, long], 0.0)
    with pytest.raises(ValueError, match="discrete"):
        pixel_attacks(network, np.zeros((1, 1)), GradientSettings(), lambda _s: True)
