"""The image CNN on tiny images, on the CPU: a ResNet from scratch through a DataLoader with worker
processes, its per-epoch series, save -> load parity, and the budget's clock stopping it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from jobs_support.tiny_project import make_image_project

from tasks.data.fold_data import load_fold
from tasks.frameworks import cnn
from tasks.frameworks.registry import get_adapter
from tasks.results import CURVE_INFO_KEY
from tasks.specs import Budget

BUDGET = Budget(name="cnn-test", time_s=60, cores=1, memory_mb=4096)


@pytest.fixture
def fold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201 - a FoldData
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path))
    specs = make_image_project(tmp_path, rows=48)
    return load_fold(specs["multiclass"], 0)


def test_resnet_trains_through_loader_workers_and_records_each_epoch(fold, tmp_path: Path) -> None:  # noqa: ANN001
    adapter = get_adapter("cnn")
    params = {"batch_size": 8, "epochs": 2, "_num_workers": 1, "_validation_rows": 6}
    model = adapter.fit(fold.X_train, fold.y_train, task=fold.task, budget=BUDGET, params=params,
                        workdir=tmp_path, seed=0)
    info = model.info()
    assert info["architecture"] == "resnet18" and info["device"] == "cpu" and info["stopped_by"] == "epochs"
    assert info["loader"] == {"num_workers": 1, "pin_memory": False, "persistent_workers": True, "cores": 1}
    curve = info[CURVE_INFO_KEY]
    assert [row["step"] for row in curve] == [1, 2]
    for row in curve:
        assert row["images_per_s"] > 0 and 0 <= row["data_wait_share"] < 1
        assert np.isfinite(row["train_loss"]) and np.isfinite(row["validation_loss"])
    # Sized to the input: the 12x12 images keep a feature map through the last stage.
    assert model.network.conv1.kernel_size == (3, 3) and model.network.conv1.in_channels == 1
    proba = model.predict_proba(fold.X_test)
    assert list(proba.columns) == list(fold.task.classes)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-5)
    model.save(tmp_path / "model")
    reloaded = adapter.load(tmp_path / "model", fold.task)
    np.testing.assert_allclose(reloaded.predict_proba(fold.X_test).to_numpy(), proba.to_numpy(), atol=1e-6)


def test_the_budget_stops_training_mid_epoch(fold, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    ticks = iter(range(0, 10_000, 3))  # each look at the clock: 3 s later
    monkeypatch.setattr(cnn, "_now", lambda: float(next(ticks)))
    budget = Budget(name="short", time_s=20, cores=1, memory_mb=4096)
    model = get_adapter("cnn").fit(fold.X_train, fold.y_train, task=fold.task, budget=budget,
                                   params={"batch_size": 4, "epochs": 50, "_validation_rows": 4},
                                   workdir=tmp_path, seed=0)
    info = model.info()
    assert info["stopped_by"] == "budget" and 1 <= info["steps"] < 10 and info["epochs_completed"] < 1


def test_unknown_params_and_architectures_are_one_sentence(fold, tmp_path: Path) -> None:  # noqa: ANN001
    adapter = get_adapter("cnn")
    with pytest.raises(ValueError, match=r"unknown params \['_workers'\]"):
        adapter.check_params({"_workers": 2})
    with pytest.raises(ValueError, match="'alexnett' is not a torchvision classification architecture"):
        adapter.fit(fold.X_train, fold.y_train, task=fold.task, budget=BUDGET,
                    params={"architecture": "alexnett"}, workdir=tmp_path, seed=0)


def test_the_network_exports_to_onnx_and_answers_as_torch_does(fold, tmp_path: Path) -> None:  # noqa: ANN001
    from tasks.evaluations.export import graph_output

    params = {"batch_size": 8, "epochs": 1, "_max_steps": 2, "_validation_rows": 4}
    model = get_adapter("cnn").fit(fold.X_train, fold.y_train, task=fold.task, budget=BUDGET, params=params,
                                   workdir=tmp_path, seed=0)
    graph = model.to_onnx(tmp_path)  # a capability the fitted model offers; the export evaluation asks it
    assert [i.name for i in graph.model.graph.input] == [cnn.ONNX_INPUT]
    assert graph.classes == list(fold.task.classes)
    path = tmp_path / "model.onnx"
    path.write_bytes(graph.model.SerializeToString())
    onnx_proba = graph_output(graph, path, fold.task, threads=1)(fold.X_test)  # any batch size
    np.testing.assert_allclose(onnx_proba, model.predict_proba(fold.X_test).to_numpy(), atol=1e-5)
    np.testing.assert_allclose(graph_output(graph, path, fold.task, threads=1)(fold.X_test.iloc[:1]),
                               model.predict_proba(fold.X_test.iloc[:1]).to_numpy(), atol=1e-5)
