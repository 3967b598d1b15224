"""The documentation: a README that fits on a screen, reference pages in step with the code, a site
that builds strictly (a broken link, anchor or snippet fails it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from flows.reference_docs import COMMAND, REFERENCE_DIR, begin_marker, end_marker, stale_pages
from tasks.tracking.docs import vocabulary_markdown
from tasks.vocabulary import COST_METRICS, JOB_TAGS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def test_vocabulary_page_is_the_table_generated_from_the_module() -> None:
    text = (REFERENCE_DIR / "vocabulary.md").read_text(encoding="utf-8")
    begin, end = begin_marker("vocabulary"), end_marker("vocabulary")
    assert begin in text and end in text, f"docs/reference/vocabulary.md lost its markers: {COMMAND}"
    table = text.split(begin, 1)[1].split(end, 1)[0].strip()
    assert table == vocabulary_markdown(), f"the vocabulary page is stale: {COMMAND}"


def test_table_names_every_tag_and_cost_metric() -> None:
    table = vocabulary_markdown()
    for name in [*JOB_TAGS, *COST_METRICS]:
        assert f"`{name}`" in table


def test_reference_pages_are_in_step_with_the_code() -> None:
    """The CLI page (typer app), the vocabulary (tasks/vocabulary.py), budgets and suites (specs/)."""
    stale = sorted(str(path.relative_to(ROOT)) for path in stale_pages())
    assert not stale, f"stale: {', '.join(stale)}; run {COMMAND}"


def test_cli_page_lists_every_command() -> None:
    text = (REFERENCE_DIR / "cli.md").read_text(encoding="utf-8")
    for command in ("run", "sync", "report", "compare", "deploy", "datasets validate",
                    "frameworks install", "team status"):
        assert f"## `automl-eval {command}`" in text


def test_readme_fits_on_a_screen_with_exactly_two_setup_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    setup = text.split("## Set up (fresh machine)", 1)[1].split("\n## ", 1)[0]
    block = setup.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]


def test_readme_links_point_at_files_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [target for target in targets if "://" not in target]
    assert local, "the README links no page of the manual"
    missing = [target for target in local if not (ROOT / target).is_file()]
    assert not missing, f"README links to missing files: {missing}"


def test_site_builds_strictly_and_offline(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # the theme's notice about its successor
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "Which AutoML framework" in home  # the README's sections reached the home page
    assert "fonts.googleapis.com" not in home  # no web font: the site renders offline
