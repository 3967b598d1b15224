"""report.html is report.md with its figures inlined; Prefect's copy leaves the figures out."""

from __future__ import annotations

import base64
from pathlib import Path

from PIL import Image

from tasks.report.build import REPORT_HTML, REPORT_MD, without_images, write_report_pages
from tasks.report.publish import prefect_markdown


def _report(folder: Path) -> str:
    Image.new("RGB", (4, 3), "red").save(folder / "elo.png")
    return ("# Report: t\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
            "## Files\n\n- ![elo](elo.png)\n- ![gone](../x.png)\n")


def test_report_html_embeds_its_figures_and_renders_tables(tmp_path: Path) -> None:
    write_report_pages(tmp_path, _report(tmp_path), "t")
    page = (tmp_path / REPORT_HTML).read_text()
    png = base64.b64encode((tmp_path / "elo.png").read_bytes()).decode()
    assert f'src="data:image/png;base64,{png}"' in page
    assert "<table>" in page and "<td>1</td>" in page
    assert 'src="../x.png"' in page  # not one of the report's figures: never read from outside it
    assert (tmp_path / REPORT_MD).read_text() == _report(tmp_path)


def test_prefect_markdown_leaves_figures_out_and_links_the_mlflow_execution(tmp_path: Path) -> None:
    from tasks.report.build import Report

    markdown = _report(tmp_path)
    assert "![" not in without_images(markdown) and "| 1 | 2 |" in without_images(markdown)
    report = Report(folder=tmp_path, markdown=markdown, leaderboard=None, aggregate=None,  # type: ignore[arg-type]
                    elo=None, friedman=None, critical_difference=None, stability_flags=[])
    text = prefect_markdown(report, "http://mlflow:5050/#/experiments/1/runs/abc")
    assert "![" not in text
    assert "[MLflow execution](http://mlflow:5050/#/experiments/1/runs/abc)" in text
