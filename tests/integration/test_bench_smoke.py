"""Every benchmark still runs: each bench/bench_*.py module and bench/gpu_check.py, at the smallest
size it declares beside its code, as `python -m bench.NAME` exits 0 and prints its figures.

No figure and no timing is asserted (they are the machine's); what this proves is that a change to
the project that breaks a benchmark fails CI, and that a new benchmark cannot be added without a
smoke run. A module declares, as literals:

- SMOKE_ARGS: tuple[str, ...], its command-line arguments (required, `()` for none), unless
- SMOKE_ELSEWHERE: str, the test file that already runs its code at a small size, with more asserted
  (gpu_check's CPU mode, the cluster benchmark on the cross-host test's cluster): that file must
  exist and name the module, and the benchmark is not run a second time here;
- SMOKE_ENV: dict[str, str], the settings it reads from the environment (optional);
- SMOKE_SERVICES: tuple[str, ...], what it needs of this machine (optional: "postgresql" on
  127.0.0.1, "netns": root to make network namespaces).

`{tmp}` in an argument or a setting is this case's scratch folder. Every case runs with its own
temporary folder, runs folder and Prefect home in that scratch, so that no benchmark writes into
the project's runs/, mlflow/ or reports/ (the benchmarks read the project's cards and data only).
"""

from __future__ import annotations

import ast
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from run_support.services import missing_service
from team_support.stack import postgres_up

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH_DIR = REPO_ROOT / "bench"
# What `python -m bench` runs (every bench_*.py), and the GPU check, which has a CPU path.
BENCHMARKS = sorted(path.stem for path in BENCH_DIR.glob("bench_*.py")) + ["gpu_check"]
SCRATCH = "{tmp}"
# A safety net against a hung benchmark, far above any smoke run (the team stack's take about a
# minute): a case fails with its output instead of holding CI until pytest's own limit.
TIMEOUT_S = 480
SERVICES: dict[str, tuple[Callable[[], bool], str]] = {
    "postgresql": (postgres_up, "PostgreSQL is not running on 127.0.0.1:5432 (.ci/run starts it)"),
    "netns": (lambda: os.geteuid() == 0 and shutil.which("ip") is not None,
              "the cluster's network namespaces need root and iproute2 (CI runs as root)"),
}
# A user's stores and servers are not the benchmark's: each case runs against its own or embedded ones.
UNSET = ("AUTOML_EVAL_HOME", "AUTOML_EVAL_RUNS_DIR", "MLFLOW_TRACKING_URI", "PREFECT_API_URL", "PREFECT_HOME")


def smoke_declarations(name: str) -> dict[str, object]:
    """The module's SMOKE_* constants, read from its source: importing it would load Prefect, torch
    and MLflow into the test process, and run its top-level code here instead of in the subprocess."""
    source = BENCH_DIR / f"{name}.py"
    found: dict[str, object] = {}
    for node in ast.parse(source.read_text(), filename=str(source)).body:
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        elif isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        else:
            continue
        if len(targets) != 1 or not isinstance(targets[0], ast.Name):
            continue
        target = targets[0].id
        if target.startswith("SMOKE_"):
            found[target] = ast.literal_eval(value)
    return found


def _filled(text: str, scratch: Path) -> str:
    return text.replace(SCRATCH, str(scratch))


# Each case in an xdist group of its own: the cases share nothing (each starts its own servers, on
# free ports), so `make test`'s workers run them side by side rather than one after another.
@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=pytest.mark.xdist_group(f"bench-smoke-{name}")) for name in BENCHMARKS])
def test_benchmark_runs_at_its_smallest_size(name: str, request_cleanup: Callable[[Path], None]) -> None:
    declared = smoke_declarations(name)
    elsewhere = declared.get("SMOKE_ELSEWHERE")
    if elsewhere is not None:
        test_file = REPO_ROOT / str(elsewhere)
        assert test_file.is_file(), f"bench/{name}.py: SMOKE_ELSEWHERE names {elsewhere}, not a file"
        text = test_file.read_text()
        assert f"bench.{name}" in text or f"bench import {name}" in text, \
            f"bench/{name}.py: {elsewhere} does not run bench.{name}"
        return
    if "SMOKE_ARGS" not in declared:
        pytest.fail(f"bench/{name}.py declares no SMOKE_ARGS: give it the arguments of its smallest run "
                    "(a tuple of strings, () for none), so that this test runs it", pytrace=False)
    args, settings = declared["SMOKE_ARGS"], declared.get("SMOKE_ENV", {})
    services = declared.get("SMOKE_SERVICES", ())
    assert isinstance(args, tuple) and all(isinstance(arg, str) for arg in args), \
        f"bench/{name}.py: SMOKE_ARGS must be a tuple of strings"
    assert isinstance(settings, dict) and all(isinstance(v, str) for v in settings.values()), \
        f"bench/{name}.py: SMOKE_ENV must map names to strings"
    unknown = sorted(set(services) - set(SERVICES))  # type: ignore[arg-type]
    assert not unknown, f"bench/{name}.py: SMOKE_SERVICES names unknown services {unknown}"
    for service in services:  # type: ignore[union-attr]
        available, reason = SERVICES[service]
        if not available():
            missing_service(f"bench/{name}.py needs it: {reason}")

    # A short folder, not tmp_path: under pytest-xdist tmp_path is long enough that the socket a
    # DataLoader's worker processes bind under TMPDIR passes the 107-byte AF_UNIX limit (gpu_check's
    # loader sweep then failed and hung until the timeout).
    scratch = Path(tempfile.mkdtemp(prefix="bench-smoke-", dir="/tmp" if Path("/tmp").is_dir() else None))
    request_cleanup(scratch)
    for folder in ("tmp", "runs", "prefect"):
        (scratch / folder).mkdir(parents=True)
    env = {key: value for key, value in os.environ.items() if key not in UNSET}
    # TMPDIR: the benchmarks' own scratch projects (tempfile) land here and go with tmp_path.
    env.update(TMPDIR=str(scratch / "tmp"), AUTOML_EVAL_RUNS_DIR=str(scratch / "runs"),
               PREFECT_HOME=str(scratch / "prefect"))
    env.update({key: _filled(value, scratch) for key, value in settings.items()})  # type: ignore[union-attr]
    command = [sys.executable, "-m", f"bench.{name}", *(_filled(arg, scratch) for arg in args)]
    returncode, stdout, stderr = _run(command, env)
    said = f"{' '.join(command[1:])} (exit {returncode}):\n{stdout[-3000:]}\n{stderr[-3000:]}"
    assert returncode == 0, said
    assert stdout.strip(), f"{said}\nprinted nothing"


@pytest.fixture
def request_cleanup() -> Iterator[Callable[[Path], None]]:
    """Folders to remove when the test ends, passed or failed."""
    folders: list[Path] = []
    yield folders.append
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def _run(command: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the benchmark. In a session of its own, so that a benchmark
    stopped at TIMEOUT_S goes with everything it started (servers, workers, job processes)."""
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"{' '.join(command[1:])} ran past {TIMEOUT_S} s; its last output:\n{stdout[-3000:]}\n"
                    f"{stderr[-3000:]}", pytrace=False)
    return process.returncode, stdout, stderr
