"""Install a framework environment: `python -m venv`, then pip, then a record of what pip installed.

The environment gets the framework at its declared version, the libraries the worker itself
imports (WORKER_LIBRARIES), and a .pth file that makes this project's `tasks` package importable,
so `python -m tasks.worker` runs there as it does in the main environment. pip, not uv: the CPU
torch wheel this machine keeps on disk is found by pip's configured links; uv would download a
CUDA build of several GB. A framework that pulls torch gets `torch==2.13.0` (a constraint: it
pins torch without installing it where nothing needs it).

The marker file is written last, so an install that stopped half way is seen as broken, and the
pip freeze next to it is the environment's requirements (copied into each model it makes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from packaging.version import InvalidVersion, Version

from tasks import paths
from tasks.errors import UserError
from tasks.frameworks.environments import (
    FREEZE_FILE,
    INSTALL_LOG,
    MARKER_FILE,
    FrameworkEnvironment,
)
from tasks.launch import PACKAGE_ROOT

# What `python -m tasks.worker` imports besides the framework (tasks.data, tasks.specs, the
# thread-pool limits); never mlflow or prefect, which stay in the main environment.
WORKER_LIBRARIES = ("numpy", "pandas", "pyarrow", "scipy", "pydantic", "PyYAML", "threadpoolctl")
TORCH_PIN = "torch==2.13.0"
CONSTRAINTS_FILE = "constraints.txt"
HARNESS_PTH = "automl_eval_harness.pth"
PIP_INDEX_TIMEOUT_S = 120.0  # one listing from the configured indexes

Progress = Callable[[str], None]


def _tool_environment() -> dict[str, str]:
    """This process's environment minus what would make the new environment's pip see another
    environment's packages (a PYTHONPATH into the main one would have pip skip them as present)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def base_python(environment: FrameworkEnvironment) -> Path:
    """An interpreter of the environment's declared Python version, or one sentence saying there is none."""
    wanted = environment.spec.python
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if wanted == here:
        return Path(sys.executable)
    found = shutil.which(f"python{wanted}")
    if found:
        return Path(found)
    raise UserError(f"framework environment '{environment.id}' needs Python {wanted}, which is not "
                    f"installed here (no python{wanted} on PATH; this is Python {here}); install Python "
                    f"{wanted}, or declare python=\"{here}\" in its adapter's environments.")


def constraints(environment: FrameworkEnvironment) -> list[str]:
    """torch pinned to the CPU wheel on disk; the worker's libraries at the main environment's
    versions unless the framework needs others."""
    pins = [TORCH_PIN]
    if environment.spec.match_main_libraries:
        for library in WORKER_LIBRARIES:
            try:
                pins.append(f"{library}=={metadata.version(library)}")
            except metadata.PackageNotFoundError:
                continue
    return pins


def resolver_reason(log: str) -> str:
    """pip's reason for a failed install in one line: the conflict it names, else its first error."""
    lines = [line.rstrip() for line in log.splitlines()]
    if "The conflict is caused by:" in lines:
        start = lines.index("The conflict is caused by:") + 1
        causes = []
        for line in lines[start:]:
            if not line.strip():
                break
            causes.append(line.strip())
        if causes:
            return "conflict: " + "; ".join(causes)
    # "Ignored the following versions ..." is a note about other Pythons, never the reason.
    errors = [line.removeprefix("ERROR: ") for line in lines
              if line.startswith("ERROR: ") and not line.startswith("ERROR: Ignored the following")]
    missing = [error for error in errors if error.startswith("No matching distribution")]
    if missing or errors:
        return (missing or errors)[0]
    meaningful = [line for line in lines if line.strip() and not line.startswith("WARNING:")]
    return meaningful[-1].strip() if meaningful else "pip gave no reason"


def _run(command: list[str], log_path: Path) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(command, env=_tool_environment(), capture_output=True, text=True, check=False)
    with log_path.open("a") as log:
        log.write(f"$ {' '.join(command)}\n{completed.stdout}{completed.stderr}\n")
    return completed


def install(environment: FrameworkEnvironment, progress: Progress, *, reinstall: bool = False) -> float:
    """Create (or replace) the environment's folder and install it; returns the seconds it took.

    An environment already installed and working is left as it is unless `reinstall`. Any failure
    is one sentence (UserError) with pip's reason and the log's path.
    """
    state = environment.state()
    if state.status == "installed" and not reinstall:
        progress(f"{environment.id}: already installed in {environment.folder}.")
        return 0.0
    interpreter = base_python(environment)
    started = time.perf_counter()
    folder = environment.folder
    if folder.exists():
        shutil.rmtree(folder)
    paths.venvs_dir().mkdir(parents=True, exist_ok=True)
    progress(f"{environment.id}: creating {folder} with Python {environment.spec.python} ...")
    log_path = folder.with_name(folder.name + ".log")  # the venv folder does not exist yet
    log_path.unlink(missing_ok=True)
    created = _run([str(interpreter), "-m", "venv", str(folder)], log_path)
    if created.returncode != 0:
        raise UserError(f"creating framework environment '{environment.id}' failed: "
                        f"{resolver_reason(created.stdout + created.stderr)} (log: {log_path}).")
    log_path = log_path.replace(folder / INSTALL_LOG)
    python = str(environment.python)
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], log_path)
    # The project's own code, importable from the environment as from the main one (no copy: a
    # worker always runs the harness's current code).
    (Path(site.stdout.strip()) / HARNESS_PTH).write_text(f"{PACKAGE_ROOT}\n")
    pins = constraints(environment)
    (folder / CONSTRAINTS_FILE).write_text("\n".join(pins) + "\n")
    requirements = [*WORKER_LIBRARIES, *environment.spec.requirements]
    progress(f"{environment.id}: installing {', '.join(environment.spec.requirements)} and the worker's "
             f"libraries with pip (log: {log_path}) ...")
    installed = _run([python, "-m", "pip", "install", "--disable-pip-version-check", "-c",
                      str(folder / CONSTRAINTS_FILE), *requirements], log_path)
    if installed.returncode != 0:
        raise UserError(f"installing framework environment '{environment.id}' failed: "
                        f"{resolver_reason(installed.stdout + installed.stderr)} (full log: {log_path}).")
    if environment.spec.no_deps:
        extra = _run([python, "-m", "pip", "install", "--disable-pip-version-check", "--no-deps", "-c",
                      str(folder / CONSTRAINTS_FILE), *environment.spec.no_deps], log_path)
        if extra.returncode != 0:
            raise UserError(f"installing framework environment '{environment.id}' failed at "
                            f"{', '.join(environment.spec.no_deps)} (--no-deps): "
                            f"{resolver_reason(extra.stdout + extra.stderr)} (full log: {log_path}).")
    frozen = _run([python, "-m", "pip", "freeze", "--disable-pip-version-check"], log_path)
    if frozen.returncode != 0:
        raise UserError(f"framework environment '{environment.id}': pip freeze failed "
                        f"({resolver_reason(frozen.stderr)}); see {log_path}.")
    (folder / FREEZE_FILE).write_text(frozen.stdout)
    seconds = time.perf_counter() - started
    marker = {
        "framework": environment.framework,
        "version": environment.version,
        "python": environment.spec.python,
        "requirements": list(environment.spec.requirements),
        "no_deps": list(environment.spec.no_deps),
        "constraints": pins,
        "installed_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "install_s": round(seconds, 1),
    }
    if environment.spec.release_of:  # a release derived from a declared one (find_environment finds it)
        marker["release_of"] = environment.spec.release_of
    (folder / MARKER_FILE).write_text(json.dumps(marker, indent=2))
    probed = environment.probe()  # the framework imports there, at its version
    if probed.status != "installed":
        # pip finished but the framework does not import: the marker keeps why, so `frameworks
        # list` says broken (not installed-looking) without starting its Python.
        marker["unusable"] = probed.reason
        (folder / MARKER_FILE).write_text(json.dumps(marker, indent=2))
        raise UserError(f"framework environment '{environment.id}' is broken: {probed.reason}")
    progress(f"{environment.id}: installed in {seconds:.0f} s; its requirements (pip freeze) are in "
             f"{folder / FREEZE_FILE}.")
    return seconds


def releases_between(package: str, old: str, new: str) -> tuple[list[str], str]:
    """The releases of `package` strictly between `old` and `new` that pip can install here
    (`pip index versions`, through the machine's configured indexes), oldest first; with the
    reason when there are none to try (pip could not list them, or a version is not PEP 440)."""
    try:
        low, high = sorted((Version(old), Version(new)))
    except InvalidVersion as exc:
        return [], f"{exc}: not a version pip orders"
    command = [sys.executable, "-m", "pip", "index", "versions", package, "--disable-pip-version-check"]
    try:
        listed = subprocess.run(command, env=_tool_environment(), capture_output=True, text=True,
                                timeout=PIP_INDEX_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return [], f"`pip index versions {package}` did not answer ({exc})"
    line = next((x for x in listed.stdout.splitlines() if x.startswith("Available versions:")), "")
    if listed.returncode != 0 or not line:
        return [], f"`pip index versions {package}` failed: {resolver_reason(listed.stdout + listed.stderr)}"
    found = []
    for text in line.partition(":")[2].split(","):
        try:
            version = Version(text.strip())
        except InvalidVersion:
            continue
        if low < version < high and not version.is_prerelease:
            found.append(version)
    why = "" if found else f"no release of {package} between {low} and {high}"
    return [str(v) for v in sorted(found)], why
