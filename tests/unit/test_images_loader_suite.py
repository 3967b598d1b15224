"""The loader-sweep suite (specs/suites/images_loader.yaml): the CNN on one dataset at every loader
setting, num_workers 0/2/4/8 x pin_memory off/on, each a variant the CNN adapter turns into its loader
params, so the report's Images section can draw and name the best-fed setting."""

from __future__ import annotations

from tasks.evaluations.registry import all_evaluations
from tasks.frameworks.registry import get_adapter
from tasks.specs import load_suite


def test_the_loader_suite_sweeps_workers_and_pinned_memory_for_one_cnn_on_one_dataset() -> None:
    suite = load_suite("images_loader", all_evaluations())
    assert suite.datasets == ["fashion_mnist"]
    assert [ref.id for ref in suite.frameworks] == [
        f"cnn:w{workers}{pin}" for workers in (0, 2, 4, 8) for pin in ("", "_pin")]
    assert len({str(ref.params) for ref in suite.frameworks}) == 1  # only the loader setting differs
    cnn = get_adapter("cnn")
    settings = [cnn.variant_params(ref.variant) for ref in suite.frameworks]
    assert settings[0] == {"_num_workers": 0, "_pin_memory": False}
    assert settings[-1] == {"_num_workers": 8, "_pin_memory": True}
