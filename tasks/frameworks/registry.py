"""Find the framework adapters: every module of this package that exposes ``ADAPTER``.

Importing an adapter module is cheap (frameworks are imported inside adapter functions), so
listing never fails because a framework is missing. Extra adapter files (tests use one that
misbehaves on purpose) are added with ``AUTOML_EVAL_EXTRA_ADAPTERS``: file paths separated by
the OS path separator; they are not part of the shipped listing.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import pkgutil
from dataclasses import asdict
from functools import cache
from pathlib import Path
from types import ModuleType

import tasks.frameworks as package
from tasks.errors import UserError
from tasks.frameworks.base import FittedModel, ForecastTask, FrameworkAdapter, TaskInfo

EXTRA_ADAPTERS_ENV = "AUTOML_EVAL_EXTRA_ADAPTERS"
TASK_FILE = "task.json"  # TaskInfo of a saved model, so a loader can rebuild it
FRAMEWORK_FILE = "framework.json"  # which adapter (and version) wrote a saved model


def _adapter_of(module: ModuleType) -> FrameworkAdapter | None:
    adapter = getattr(module, "ADAPTER", None)
    return adapter if isinstance(adapter, FrameworkAdapter) else None


@cache
def _shipped() -> dict[str, FrameworkAdapter]:
    found: dict[str, FrameworkAdapter] = {}
    for module_info in pkgutil.iter_modules(package.__path__):
        if module_info.name.startswith("_") or module_info.name in ("base", "registry", "environments"):
            continue
        adapter = _adapter_of(importlib.import_module(f"{package.__name__}.{module_info.name}"))
        if adapter is not None:
            found[adapter.name] = adapter
    return found


@cache
def _extra(spec: str) -> dict[str, FrameworkAdapter]:
    found: dict[str, FrameworkAdapter] = {}
    for file in filter(None, spec.split(os.pathsep)):
        path = Path(file)
        module_spec = importlib.util.spec_from_file_location(f"automl_eval_extra_{path.stem}", path)
        if module_spec is None or module_spec.loader is None or not path.is_file():
            raise UserError(f"{EXTRA_ADAPTERS_ENV}: no adapter module at {path}; fix the path.")
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        adapter = _adapter_of(module)
        if adapter is None:
            raise UserError(f"{path}: defines no ADAPTER (a FrameworkAdapter instance); add one.")
        found[adapter.name] = adapter
    return found


def all_adapters() -> dict[str, FrameworkAdapter]:
    """Every adapter by name: the shipped ones plus any from AUTOML_EVAL_EXTRA_ADAPTERS."""
    return {**_shipped(), **_extra(os.environ.get(EXTRA_ADAPTERS_ENV, ""))}


def get_adapter(name: str) -> FrameworkAdapter:
    adapters = all_adapters()
    if name not in adapters:
        raise UserError(f"unknown framework '{name}'; known frameworks: {', '.join(sorted(adapters))}.")
    return adapters[name]


# ------------------------------------------------------------ a saved model folder, self-contained


def write_model_identity(model_dir: Path, adapter: FrameworkAdapter, task: TaskInfo) -> None:
    """Write task.json and framework.json next to what FittedModel.save wrote."""
    task_fields = asdict(task)
    task_fields["classes"] = list(task.classes)
    (model_dir / TASK_FILE).write_text(json.dumps(task_fields, indent=2, default=str))
    identity = {"name": adapter.name, "version": adapter.version()}
    (model_dir / FRAMEWORK_FILE).write_text(json.dumps(identity, indent=2))


def read_task_info(model_dir: Path) -> TaskInfo:
    fields = json.loads((model_dir / TASK_FILE).read_text())
    fields["classes"] = tuple(fields.get("classes", ()))
    if fields.get("forecast"):
        forecast = fields["forecast"]
        levels = tuple(forecast["quantile_levels"])
        fields["forecast"] = ForecastTask(**{**forecast, "quantile_levels": levels})
    return TaskInfo(**fields)


class ModelEnvironmentMismatch(RuntimeError):
    """A model made in a framework environment, loaded where its framework is at another version."""


def load_saved_model(model_dir: Path) -> tuple[FittedModel, TaskInfo]:
    """Load a model folder written by the worker: its adapter's load() with its TaskInfo.

    A model made in a framework environment of its own loads only where its framework has the same
    version: another version may unpickle it wrongly or not at all, so it is refused in one sentence.
    """
    from tasks.frameworks.environments import MODEL_REQUIREMENTS_FILE, model_environment

    identity = json.loads((model_dir / FRAMEWORK_FILE).read_text())
    adapter = get_adapter(identity["name"])
    made_in = model_environment(model_dir)
    if made_in is not None and adapter.version() != identity.get("version"):
        raise ModelEnvironmentMismatch(
            f"this model was made by {adapter.package} {identity.get('version')} in the framework "
            f"environment {made_in.get('environment')}, and here {adapter.package} is "
            f"{adapter.version() or 'not installed'}: load it with that environment's Python (install it "
            f"with `{made_in.get('install')}`), or rebuild one from {model_dir / MODEL_REQUIREMENTS_FILE}."
        )
    task = read_task_info(model_dir)
    return adapter.load(model_dir, task), task
