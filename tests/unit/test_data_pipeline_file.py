"""dvc.yaml names files that exist, and every data source module is a dependency of `materialize`,
so a new modality's data (images, OpenML downloads) is pinned by the same stages as the rest."""

from __future__ import annotations

from pathlib import Path

import yaml

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _stages() -> dict[str, dict]:
    return yaml.safe_load((PROJECT_ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]


def test_every_dependency_of_the_pipeline_exists() -> None:
    built_by_the_pipeline = {"datasets"}  # made by `automl-eval datasets build`, git-ignored
    missing = [
        f"dvc.yaml: stage '{name}' depends on {dep}, which does not exist; update the path or drop it."
        for name, stage in _stages().items()
        for dep in stage.get("deps", [])
        if dep not in built_by_the_pipeline and not (PROJECT_ROOT / dep).exists()
    ]
    assert not missing, "\n".join(missing)


def test_every_data_source_module_is_a_dependency_of_materialize() -> None:
    deps = set(_stages()["materialize"]["deps"])
    sources = sorted(p.relative_to(PROJECT_ROOT).as_posix()
                     for p in (PROJECT_ROOT / "tasks" / "data").glob("sources*.py"))
    assert "tasks/data/sources_tabular.py" in sources
    missing = [
        f"dvc.yaml: {source} writes datasets/ but is not a dependency of stage 'materialize'; "
        "add it to its deps."
        for source in sources
        if source not in deps
    ]
    assert not missing, "\n".join(missing)
