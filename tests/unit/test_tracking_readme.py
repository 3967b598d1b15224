"""The README's vocabulary table is the one generated from tasks/vocabulary.py."""

from __future__ import annotations

from pathlib import Path

from tasks.tracking.docs import BEGIN_MARKER, END_MARKER, vocabulary_markdown
from tasks.vocabulary import COST_METRICS, JOB_TAGS

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_vocabulary_table_matches_the_module() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("<!-- section:tracking -->", 1)[1].split("<!-- /section:tracking -->", 1)[0]
    assert BEGIN_MARKER in section and END_MARKER in section, "regenerate: python -m tasks.tracking.docs"
    table = section.split(BEGIN_MARKER, 1)[1].split(END_MARKER, 1)[0].strip()
    assert table == vocabulary_markdown(), "README vocabulary is stale: python -m tasks.tracking.docs"


def test_table_names_every_tag_and_cost_metric() -> None:
    table = vocabulary_markdown()
    for name in [*JOB_TAGS, *COST_METRICS]:
        assert f"`{name}`" in table
