"""Find the framework adapters: every module of this package that exposes ``ADAPTER``.

The adapters are plug-ins of the generic registry (tasks/plugins.py): a new framework is one file
in this folder. Importing an adapter module is cheap (frameworks are imported inside adapter
functions), so listing never fails because a framework is missing. Extra adapter files (tests use
one that misbehaves on purpose) are added with ``AUTOML_EVAL_EXTRA_ADAPTERS``: file paths
separated by the OS path separator; they are not part of the shipped listing.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from tasks.errors import UserError
from tasks.frameworks.base import FittedModel, ForecastTask, FrameworkAdapter, TaskInfo
from tasks.frameworks.environments import (
    MODEL_REQUIREMENTS_FILE,
    FrameworkEnvironment,
    declared,
    model_environment,
    release_environment,
)
from tasks.plugins import Registry

EXTRA_ADAPTERS_ENV = "AUTOML_EVAL_EXTRA_ADAPTERS"
TASK_FILE = "task.json"  # TaskInfo of a saved model, so a loader can rebuild it
FRAMEWORK_FILE = "framework.json"  # which adapter (and version) wrote a saved model

FRAMEWORKS: Registry[FrameworkAdapter] = Registry(
    "framework", "frameworks", base=FrameworkAdapter, package="tasks.frameworks", attribute="ADAPTER",
    skip=frozenset({"base", "registry", "environments"}), extra_env=EXTRA_ADAPTERS_ENV)


def all_adapters() -> dict[str, FrameworkAdapter]:
    """Every adapter by name: the shipped ones plus any from AUTOML_EVAL_EXTRA_ADAPTERS."""
    return FRAMEWORKS.all()


def get_adapter(name: str) -> FrameworkAdapter:
    """The adapter called `name`, or one sentence naming the known ones (and the closest)."""
    return FRAMEWORKS.get(name)


# ------------------------------------------------------------ framework environments by name


def all_environments() -> list[FrameworkEnvironment]:
    """Every environment every adapter declares, by framework then version."""
    return [env for _, adapter in sorted(all_adapters().items()) for env in declared(adapter)]


def find_environment(framework: str, version: str) -> FrameworkEnvironment:
    """The declared environment `framework@version`, or one sentence naming the known versions.

    A release the adapter does not declare is found too once it is installed as one
    (`release_environment`; an attribution's bisection installs those), so its jobs can run."""
    adapter = get_adapter(framework)
    environments = {env.version: env for env in declared(adapter)}
    release = None if version in environments else release_environment(adapter, version)
    if release is not None and (release.marker() or {}).get("release_of"):
        return release
    if version not in environments:
        known = ", ".join(f"{framework}@{v}" for v in environments) or "none"
        raise UserError(f"framework '{framework}' has no environment for version '{version}'; "
                        f"known versions: {known} (or `{framework}` alone for the main environment's "
                        f"{adapter.version() or 'none installed'}).")
    return environments[version]


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
