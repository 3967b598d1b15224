"""The root command lists every command without importing them, and its list is the commands' own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from flows import cli

REPO_ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("mlflow", "prefect", "pandas", "matplotlib", "great_expectations")


def _first_paragraph(text: str | None) -> str:
    return " ".join((text or "").split("\n\n")[0].split())


def test_the_listing_is_each_command_s_own_summary_and_every_command_is_listed() -> None:
    modules = {module for module, _ in cli.COMMANDS.values()}
    registered = {name: module for module in modules for name in cli.commands_of(module)}
    assert registered == {name: module for name, (module, _) in cli.COMMANDS.items()}
    for name, (module, summary) in cli.COMMANDS.items():
        assert _first_paragraph(cli.commands_of(module)[name].help) == _first_paragraph(summary), name


def test_help_lists_the_commands_without_importing_mlflow_prefect_or_pandas() -> None:
    probe = ("import sys; sys.argv = ['automl-eval', '--help']\n"
             "from flows.cli import main\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             f"print('loaded:', sorted(name for name in {HEAVY!r} if name in sys.modules))")
    shown = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True,
                           timeout=120, check=True, env={**os.environ, "COLUMNS": "200"})
    assert "loaded: []" in shown.stdout, shown.stdout[-2000:]
    for name in cli.COMMANDS:
        assert f" {name} " in shown.stdout


def test_a_mistyped_command_is_a_usage_error_with_a_suggestion_not_a_traceback() -> None:
    shown = subprocess.run([sys.executable, "-m", "flows.cli", "runn"], cwd=REPO_ROOT, capture_output=True,
                           text=True, timeout=120, check=False)
    assert shown.returncode == 2
    assert "No such command 'runn'. Did you mean 'run'?" in shown.stderr
    assert "Traceback" not in shown.stderr
