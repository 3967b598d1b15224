"""Shared test set-up: quiet, offline, and never writing into the user's own stores."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
# Under make test's parallel workers the first flow of a process may wait long for its ephemeral API.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")


# ---------------------------------------------------------------- data folders never shadow libraries

import contextlib  # noqa: E402
import inspect  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parent.parent
_DATA_FOLDERS = frozenset({"datasets", "mlflow"})  # hold data, never code


class _DataFoldersAreNotPackages:
    """Path-entry finder for the project root that never offers datasets/ or mlflow/ as packages.

    `python -m pytest` puts the project root on sys.path, and Python would then import a folder
    without __init__.py as an empty namespace package when no library of that name is installed
    (or hide a missing one). Every other name is resolved by the root's usual finder.
    """

    def __init__(self, inner) -> None:  # noqa: ANN001 - importlib's FileFinder
        self._inner = inner

    def find_spec(self, fullname: str, target=None):  # noqa: ANN001, ANN201
        if fullname in _DATA_FOLDERS:
            return None
        return self._inner.find_spec(fullname, target)

    def invalidate_caches(self) -> None:
        self._inner.invalidate_caches()


def _guard_project_root() -> None:
    for entry in {os.getcwd(), *sys.path}:
        if not entry or Path(entry).resolve() != PROJECT_ROOT:
            continue
        for hook in sys.path_hooks:
            try:
                finder = hook(entry)
            except ImportError:
                continue
            sys.path_importer_cache[entry] = _DataFoldersAreNotPackages(finder)
            break


_guard_project_root()


@pytest.fixture(autouse=True)
def _data_folders_stay_guarded() -> None:
    # A library may add the root to sys.path again under another spelling, or drop the importer cache
    # (importlib.invalidate_caches does not, but sys.path_importer_cache.clear() does): guard again.
    if not all(isinstance(sys.path_importer_cache.get(entry), _DataFoldersAreNotPackages)
               for entry in {os.getcwd(), *sys.path} if entry and Path(entry).resolve() == PROJECT_ROOT):
        _guard_project_root()


# ---------------------------------------------------------------- the dataset catalog, built once


@pytest.fixture(scope="session")
def built_catalog() -> Path:
    """datasets/ with every card's file and saved folds; builds what is missing, once per session.

    Materializes from the packages only (no DVC pull, no pin check), writing a file only when its
    bytes change, so a test session never disturbs a pinned or pulled datasets/.
    """
    from tasks.data.build import build
    from tasks.data.folds import folds_path
    from tasks.specs import list_dataset_specs

    missing = [s.name for s in list_dataset_specs() if not (s.path.is_file() and folds_path(s).is_file())]
    if missing:
        report = build(missing, use_dvc=False)
        if report.errors:
            pytest.fail("cannot build the dataset catalog: " + "; ".join(report.errors))
    from tasks import paths

    return paths.datasets_dir()


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, built_catalog: Path):
    """A scratch project (AUTOML_EVAL_HOME) holding copies of chosen cards and their data.

    `data_home("penguins")` copies the card, its file and its saved folds, plus params.yaml and
    .dvcignore; tests then break the copy on purpose without touching the real project.
    """
    import shutil

    from run_support.project import seed_stores

    (tmp_path / "specs" / "datasets").mkdir(parents=True)
    (tmp_path / "datasets").mkdir()
    seed_stores(tmp_path)  # empty MLflow and Prefect stores, migrated once per test process
    for name in ("params.yaml", ".dvcignore"):
        shutil.copy(PROJECT_ROOT / name, tmp_path / name)
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path))

    def copy(*names: str) -> Path:
        for name in names:
            shutil.copy(PROJECT_ROOT / "specs" / "datasets" / f"{name}.yaml", tmp_path / "specs" / "datasets")
            for suffix in (".csv", ".folds.csv"):
                shutil.copy(built_catalog / f"{name}{suffix}", tmp_path / "datasets")
        return tmp_path

    return copy


# ---------------------------------------------------------------- the team stack, started once


class _SharedTeam:
    """The team stack of this test process (Prefect server, two workers, MLflow on PostgreSQL,
    deployed), shared by tests/integration and tests/ui: started by the first test that asks for it,
    stopped after the last one that does. Not kept to the end of the session: idle, its servers,
    workers and one-second heartbeats took about a fifth of a core from every test after them."""

    def __init__(self) -> None:
        self._exits: contextlib.ExitStack | None = None
        self._team: Any = None

    def get(self, built_catalog: Path, home: Callable[[], Path]) -> Any:
        if self._team is None:
            from team_support.stack import running_team

            exits = contextlib.ExitStack()
            self._team = exits.enter_context(running_team(built_catalog, home()))
            self._exits = exits
        return self._team

    def stop(self) -> None:
        if self._exits is not None:
            exits, self._exits, self._team = self._exits, None, None
            exits.close()


_SHARED_TEAM = _SharedTeam()


@pytest.fixture
def team(built_catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The running team stack (a stack started for an earlier test of this process, or a new one)."""
    from run_support.services import missing_service
    from team_support.stack import postgres_up

    if not postgres_up():
        missing_service("PostgreSQL is not running on 127.0.0.1:5432 (.ci/run starts it)")
    return _SHARED_TEAM.get(built_catalog, lambda: tmp_path_factory.mktemp("team-home"))


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the team stack after the last test of this run that uses it (the team tests are one
    xdist group, so they all run in this process, in collection order)."""
    session: Any = item.session
    if not hasattr(session, "last_team_test"):  # found once: the items are final by now
        users = [other for other in session.items if "team" in getattr(other, "fixturenames", ())]
        session.last_team_test = users[-1] if users else None
    if item is session.last_team_test:
        _SHARED_TEAM.stop()


def pytest_sessionfinish(session: pytest.Session) -> None:
    _SHARED_TEAM.stop()


# ---------------------------------------------------------------- parallel workers (pytest-xdist)


# Session fixtures every worker may make for itself: cheap once the catalog is built.
_PER_WORKER_FIXTURES = frozenset({"built_catalog"})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `make test`'s workers (--dist loadgroup) a test goes to whichever worker is free, except:
    every test that uses the team stack goes to one worker, so the session starts one stack; and a
    module whose tests share a module- or session-scoped fixture (a built job, a started server)
    runs whole on one worker, so that fixture is made once. Everything else spreads, so one slow
    parametrized module (every framework explained and exported) no longer holds one worker."""
    grouping = bool(getattr(config.option, "loadgroup", False))  # set by xdist under --dist loadgroup
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        marks = [m.args[0] for m in item.iter_markers("xdist_group") if m.args]
        if "team" in fixtures:
            marks = ["team-stack"]
            item.add_marker(pytest.mark.xdist_group("team-stack"))
        elif not marks and _shares_a_wide_fixture(item):
            marks = [item.nodeid.split("::", 1)[0]]
            item.add_marker(pytest.mark.xdist_group(marks[0]))
        if grouping and marks:
            _name_group_in_node_id(item, marks[0])


def _name_group_in_node_id(item: pytest.Item, group: str) -> None:
    """xdist's loadgroup scheduler groups by an "@group" suffix of the node id, which xdist 3.8's own
    hook writes to `item._nodeid`; pytest 9 derives the node id from `item._id` instead, so that
    write is lost and every test of a group went to any worker (each starting its own team stack and
    UI server). The suffix is written here where pytest 9 reads it."""
    if "@" in item.nodeid:
        return
    try:
        from _pytest.nodeid import NodeId  # pytest >= 9: the structured node id
    except ImportError:  # older pytest reads _nodeid, where xdist's own hook writes the suffix
        return
    item._id = NodeId.parse(f"{item.nodeid}@{group}")  # type: ignore[attr-defined]


def _shares_a_wide_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        definitions and definitions[-1].scope != "function" and name not in _PER_WORKER_FIXTURES
        and _defined_here(definitions[-1].func)  # not pytest's own (tmp_path_factory is session-wide)
        for name, definitions in info.name2fixturedefs.items()
    )


def _defined_here(function: object) -> bool:
    try:
        return Path(inspect.getfile(function)).resolve().is_relative_to(PROJECT_ROOT / "tests")  # type: ignore[arg-type]
    except TypeError:
        return False
