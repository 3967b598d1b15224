"""Folders of the project named like libraries (mlflow/, datasets/) must never shadow them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _inside_project(path: str | None) -> bool:
    return (
        path is not None
        and Path(path).resolve().is_relative_to(PROJECT_ROOT)
        and ".venv" not in Path(path).parts
    )


def test_mlflow_is_the_installed_library() -> None:
    import mlflow

    assert "site-packages" in Path(mlflow.__file__).parts
    assert not _inside_project(mlflow.__file__)


def test_datasets_name_never_resolves_to_the_data_folder() -> None:
    spec = importlib.util.find_spec("datasets")
    if spec is None:  # no library of that name installed: importing it must fail, not find our data
        return
    locations = [spec.origin, *(spec.submodule_search_locations or [])]
    assert all(loc is not None and "site-packages" in Path(loc).parts for loc in locations), locations


def test_data_folders_are_not_packages() -> None:
    assert not (PROJECT_ROOT / "datasets" / "__init__.py").exists()
    assert not (PROJECT_ROOT / "mlflow" / "__init__.py").exists()
