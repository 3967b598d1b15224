"""The generated parts of the documentation's reference pages, kept in step with the code.

    python -m flows.reference_docs           # rewrite them in docs/reference/
    python -m flows.reference_docs --check   # exit 1 naming each stale page (what the tests assert)

Each generated part sits between a begin and an end marker inside a hand-written page:
the CLI from the typer app, the MLflow vocabulary from tasks/vocabulary.py, the budgets and
suites from specs/. Only the text between the markers is rewritten.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import typer
from typer.cli import get_docs_for_click

from flows import cli
from tasks import paths
from tasks.evaluations.registry import all_evaluations
from tasks.specs import load_budgets, load_suite
from tasks.tracking.docs import vocabulary_markdown

COMMAND = "python -m flows.reference_docs"
ROOT = Path(__file__).resolve().parents[1]  # the checkout, wherever the command runs from
REFERENCE_DIR = ROOT / "docs" / "reference"


def begin_marker(part: str) -> str:
    return f"<!-- generated:{part} begin ({COMMAND}) -->"


def end_marker(part: str) -> str:
    return f"<!-- generated:{part} end -->"


def cli_markdown() -> str:
    """Every command, argument and option of `automl-eval`, from the typer app's own help texts."""
    command = typer.main.get_command(cli.app)
    context = typer.Context(command, info_name="automl-eval")
    # indent=1: the page's own title is the only first-level heading.
    return get_docs_for_click(obj=command, ctx=context, name="automl-eval", indent=1).strip()


def budgets_markdown() -> str:
    """specs/budgets.yaml as a table."""
    lines = ["| budget | time_s | cores | memory_mb | gpus |", "|---|---|---|---|---|"]
    for budget in load_budgets().values():
        cells = (f"`{budget.name}`", budget.time_s, budget.cores, budget.memory_mb, budget.gpus)
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)


def suites_markdown() -> str:
    """Every suite of specs/suites/ as a table: what it runs, on which budget, with which evaluations."""
    lines = [
        "| suite | what | datasets | frameworks | folds x seeds | budget | evaluations |",
        "|---|---|---|---|---|---|---|",
    ]
    for path in sorted(paths.suites_dir().glob("*.yaml")):
        suite = load_suite(path.stem, all_evaluations())
        datasets = ", ".join(f"`{name}`" for name in suite.datasets)
        frameworks = ", ".join(f"`{ref.id}`" for ref in suite.frameworks)
        evaluations = ", ".join(f"`{name}`" for name in suite.evaluation_blocks()) or "none"
        description = suite.description.replace("|", "/")
        budget = f"`{suite.budget}`"
        if suite.scaling is not None:  # its steps: the same budget time at other cores and GPUs
            steps = [f"{name} {', '.join(map(str, counts))}" for name, counts in
                     (("cores", suite.scaling.cores), ("gpus", suite.scaling.gpus)) if counts is not None]
            budget += f", scaled to {'; '.join(steps)}"
        lines.append(f"| `{suite.name}` | {description} | {datasets} | {frameworks} | "
                     f"{suite.folds} x {len(suite.seeds)} | {budget} | {evaluations} |")
    return "\n".join(lines)


# page -> the parts generated into it, in the order they appear there
PARTS: dict[str, dict[str, Callable[[], str]]] = {
    "cli.md": {"cli": cli_markdown},
    "vocabulary.md": {"vocabulary": vocabulary_markdown},
    "budgets.md": {"budgets": budgets_markdown, "suites": suites_markdown},
}


def generated_block(part: str, text: str) -> str:
    return f"{begin_marker(part)}\n{text}\n{end_marker(part)}"


def render(page_text: str, page: str, parts: dict[str, Callable[[], str]]) -> str:
    """The page with each generated part rewritten between its markers."""
    for part, make in parts.items():
        begin, end = begin_marker(part), end_marker(part)
        if begin not in page_text or end not in page_text:
            raise SystemExit(f"docs/reference/{page}: the markers of the generated part '{part}' are "
                             f"missing; put `{begin}` and `{end}` where the table belongs.")
        head, rest = page_text.split(begin, 1)
        _, tail = rest.split(end, 1)
        page_text = head + generated_block(part, make()) + tail
    return page_text


def stale_pages() -> dict[Path, str]:
    """Each reference page whose generated parts differ from the code, with its up-to-date text."""
    stale = {}
    for page, parts in PARTS.items():
        path = REFERENCE_DIR / page
        current = path.read_text(encoding="utf-8")
        wanted = render(current, page, parts)
        if wanted != current:
            stale[path] = wanted
    return stale


def main(argv: list[str]) -> int:
    stale = stale_pages()
    if "--check" in argv:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run {COMMAND}")
        return 1 if stale else 0
    for path, text in stale.items():
        path.write_text(text, encoding="utf-8")
        print(f"rewrote {path.relative_to(ROOT)}")
    if not stale:
        print("docs/reference is up to date.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
