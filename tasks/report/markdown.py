"""Markdown tables for report.md (GitHub's table syntax, which Prefect and MLflow render)."""

from __future__ import annotations

import pandas as pd


def _cell(value: object, digits: int) -> str:
    if isinstance(value, float):
        return "" if pd.isna(value) else f"{value:.{digits}g}"
    return str(value).replace("|", "/")


def markdown_table(frame: pd.DataFrame, digits: int = 4) -> str:
    """`frame` as a GitHub markdown table, floats to `digits` significant digits."""
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = ["| " + " | ".join(_cell(v, digits) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows])
