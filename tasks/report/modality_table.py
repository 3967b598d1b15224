"""The modality-combination table of a report: combination | framework | latency | score | on front.

Works on the report's job table (one row per job run, columns dataset, framework, ok, result and
the cost metrics). Rows whose dataset is a combination `BASE[STREAMS]` are grouped per base
dataset; the Pareto front is over (score up, latency down) within each base dataset.
"""

from __future__ import annotations

import pandas as pd

from tasks.multimodal.combinations import split_name
from tasks.report.pareto import on_front
from tasks.vocabulary import RESULT

LATENCY = "latency_p50_ms"


def modality_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """dataset, combination, streams, framework, latency_p50_ms, result (means over folds), on_front."""

    columns = ["dataset", "combination", "streams", "framework", LATENCY, RESULT, "jobs", "on_front"]
    if jobs.empty or "dataset" not in jobs:
        return pd.DataFrame(columns=columns)
    names = jobs["dataset"].astype(str).map(split_name)
    picked = jobs.assign(
        base=[n[0] for n in names], combination=["+".join(n[1]) if n[1] else "" for n in names]
    )
    ok = picked["ok"] if "ok" in picked else picked.get("status", "") == "ok"
    picked = picked[(picked["combination"] != "") & ok]
    if picked.empty:
        return pd.DataFrame(columns=columns)
    latency = LATENCY if LATENCY in picked else "latency_p99_ms"
    points = picked.groupby(["base", "combination", "framework"], as_index=False).agg(
        latency=(latency, "mean"), result=(RESULT, "mean"), jobs=(RESULT, "size")
    )
    points["streams"] = points["combination"].str.count(r"\+") + 1
    points["on_front"] = False
    for _, block in points.groupby("base"):
        points.loc[block.index, "on_front"] = on_front(
            block["result"].to_numpy(), block["latency"].to_numpy()
        )
    points = points.rename(columns={"base": "dataset", "latency": LATENCY, "result": RESULT})
    return points.sort_values(["dataset", "streams", "combination", "framework"])[columns].reset_index(
        drop=True
    )


def modality_markdown(table: pd.DataFrame, digits: int = 4) -> str:
    """The table as markdown, front members starred; empty string when there is no combination."""
    if table.empty:
        return ""
    lines = [
        "| dataset | modality combination | framework | latency p50 (ms) | score (result) | Pareto |",
        "|---|---|---|---|---|---|",
    ]
    for row in table.itertuples(index=False):
        latency, score = getattr(row, LATENCY), getattr(row, RESULT)
        lines.append(
            f"| {row.dataset} | {row.combination} | {row.framework} | {latency:.{digits}g} | "
            f"{score:.{digits}g} | {'*' if row.on_front else ''} |"
        )
    return "\n".join(lines)
