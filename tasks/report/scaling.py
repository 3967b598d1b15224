"""The report's Scaling part: what more cores and GPUs buy, for the jobs of a suite's `scaling:` block
(tasks/plan.py expands each job into one per step, at the same budget time).

- Frameworks whose params fix their work (`scaling_work` = fixed, FrameworkAdapter.fixed_work):
  the references' table, per dataset and framework: resources, fit_s, fit throughput (training rows
  per second of fit), speed-up (fit_s at the fewest resources / fit_s) and parallel efficiency
  (speed-up / the core ratio, at the base step's GPUs; a GPU is no multiple of cores, so a step with
  other GPUs has a speed-up and no efficiency);
- frameworks that search until their time is spent (`fills_time`): the result at each step and its
  gain over the fewest resources;
- what this machine could not measure: the steps capped at the planning host (`scaling_capped`),
  steps with a GPU where none ran, fixed work the budget's time cut short (`cut_short`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt  # the Agg backend: tasks/report/plots.py sets it
import numpy as np
import pandas as pd

from tasks.report.plots import _colors, _save
from tasks.vocabulary import RESULT

CORES = "params.scaling_cores"
GPUS = "params.scaling_gpus"
WORK = "scaling_work"
CAPPED = "scaling_capped"
STEP = ["cores", "gpus"]
FIXED_COLUMNS = ["dataset", "framework", "cores", "gpus", "jobs", "fit_s", "fit_rows_per_s", "speedup",
                 "efficiency"]
GAIN_COLUMNS = ["dataset", "framework", "cores", "gpus", "jobs", RESULT, "gain", "fit_s"]


def scaling_jobs(jobs: pd.DataFrame) -> pd.DataFrame:
    """The jobs of a scaling block, with their step as integer `cores` and `gpus` columns."""
    if CORES not in jobs:
        return pd.DataFrame()
    frame = jobs.copy()
    frame["cores"] = pd.to_numeric(frame[CORES], errors="coerce")
    frame["gpus"] = pd.to_numeric(frame[GPUS], errors="coerce") if GPUS in frame else 0
    frame = frame[frame["cores"].notna()].copy()
    frame[STEP] = frame[STEP].fillna(0).astype(int)
    frame[WORK] = frame[WORK].fillna("").astype(str) if WORK in frame else ""
    for column in ("fit_s", RESULT, "fit_rows", "train_rows"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce") if column in frame else np.nan
    return frame


def _ok(frame: pd.DataFrame, work: str) -> pd.DataFrame:
    return frame[(frame["status"] == "ok") & (frame[WORK] == work) & frame["fit_s"].notna()]


def speedup_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """Fixed-work frameworks: per dataset, framework and step (fewest resources first), the mean
    fit_s over folds and seeds, training rows per second of fit, speed-up and parallel efficiency
    against the step with the fewest resources (fewest GPUs, then fewest cores)."""
    frame = _ok(scaling_jobs(jobs), "fixed")
    if frame.empty:
        return pd.DataFrame(columns=FIXED_COLUMNS)
    rows = frame["fit_rows"].fillna(frame["train_rows"])
    frame = frame.assign(fit_rows_per_s=rows / frame["fit_s"])
    grouped = frame.groupby(["dataset", "framework", *STEP])
    table = grouped[["fit_s", "fit_rows_per_s"]].mean().join(grouped.size().rename("jobs")).reset_index()
    table = table.sort_values(["dataset", "framework", "gpus", "cores"], ignore_index=True)
    base = table.groupby(["dataset", "framework"])[[*STEP, "fit_s"]].transform("first")
    table["speedup"] = base["fit_s"] / table["fit_s"]
    same_gpus = table["gpus"] == base["gpus"]
    table["efficiency"] = (table["speedup"] / (table["cores"] / base["cores"])).where(same_gpus)
    return table[FIXED_COLUMNS]


def gain_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """Frameworks that fill their time: per dataset, framework and step, the mean result and its
    gain over the step with the fewest resources (higher is better), with the mean fit_s."""
    frame = _ok(scaling_jobs(jobs), "fills_time")
    frame = frame[frame[RESULT].notna()]
    if frame.empty:
        return pd.DataFrame(columns=GAIN_COLUMNS)
    grouped = frame.groupby(["dataset", "framework", *STEP])
    table = grouped[[RESULT, "fit_s"]].mean().join(grouped.size().rename("jobs")).reset_index()
    table = table.sort_values(["dataset", "framework", "gpus", "cores"], ignore_index=True)
    table["gain"] = table[RESULT] - table.groupby(["dataset", "framework"])[RESULT].transform("first")
    return table[GAIN_COLUMNS]


def measured(jobs: pd.DataFrame) -> str:
    """Where the steps ran and which ran: the hosts (CPU model, GPU model) and the steps with a
    finished job."""
    frame = scaling_jobs(jobs)
    ran = frame[frame["status"] == "ok"]
    if ran.empty:
        return "No job of the scaling block finished."
    hosts = sorted({", ".join(part for part in (str(row.get("host") or ""), str(row.get("cpu_model") or ""),
                                                 f"GPU {row.get('gpu_model')}" if row.get("gpu_model")
                                                 not in (None, "", "none") else "") if part)
                    for row in ran.to_dict("records")} - {""})
    steps = ", ".join(f"{cores} cores/{gpus} GPUs" for cores, gpus in
                      sorted(set(map(tuple, ran[STEP].to_numpy().tolist())), key=lambda s: (s[1], s[0])))
    return f"Measured steps: {steps}" + (f", on {'; '.join(hosts)}" if hosts else "") + "."


def limits(jobs: pd.DataFrame) -> list[str]:
    """What the runs could not measure, each once: capped steps, no GPU step, work cut short,
    steps without a finished job, a framework with a single step."""
    frame = scaling_jobs(jobs)
    notes = []
    capped = sorted({str(note) for note in frame.get(CAPPED, pd.Series(dtype=str)).dropna() if str(note)})
    if capped:
        notes.append("Capped at the planning host, so not measured as asked: " + "; ".join(capped) + ".")
    ran = frame[frame["status"] == "ok"]
    if not ran.empty and not (ran["gpus"] > 0).any():
        notes.append("No step with a GPU ran: these figures are CPU cores only.")
    cut = frame[(frame["status"] == "ok") & (frame[WORK] == "cut_short")]
    if not cut.empty:
        where = sorted({f"{row.framework} on {row.dataset} at {row.cores} cores, {row.gpus} GPUs"
                        for row in cut.itertuples()})
        notes.append("The budget's time stopped the fit before its work was done (cut_short), so its fit_s "
                     "is the budget's and not compared; give the suite a larger time_s: " + "; ".join(where)
                     + ".")
    finished = set(map(tuple, ran[["dataset", "framework", *STEP]].to_numpy().tolist()))
    unfinished = sorted({f"{row.framework} on {row.dataset} at {row.cores} cores, {row.gpus} GPUs "
                         f"({row.status})" for row in frame.itertuples()
                         if (row.dataset, row.framework, row.cores, row.gpus) not in finished})
    if unfinished:
        notes.append("Steps without a finished job: " + "; ".join(unfinished) + ".")
    steps = ran.groupby(["dataset", "framework"])[STEP].apply(lambda s: len(s.drop_duplicates()))
    single = sorted(f"{framework} on {dataset}" for (dataset, framework), count in steps.items() if count < 2)
    if single:
        notes.append("One step only, so no speed-up or gain: " + "; ".join(single) + ".")
    return notes


def figure(speedups: pd.DataFrame, gains: pd.DataFrame, path: Path) -> Path:
    """Speed-up against cores for fixed work (the ideal line dashed) and result against cores for
    frameworks that fill their time; a line per framework and dataset, each at its GPU count."""
    panels = [(table, kind) for table, kind in ((speedups, "speedup"), (gains, RESULT)) if not table.empty]
    plot, axes_row = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    labels = sorted({f"{row.framework} · {row.dataset} · {row.gpus} GPU" for table, _ in panels
                     for row in table.itertuples()})
    colors = _colors(labels)
    for axes, (table, kind) in zip(axes_row[0], panels, strict=True):
        for (framework, dataset, gpus), line in table.groupby(["framework", "dataset", "gpus"]):
            line = line.sort_values("cores")
            label = f"{framework} · {dataset} · {gpus} GPU"
            axes.plot(line["cores"], line[kind], marker="o", color=colors[label], label=label)
        cores = sorted(table["cores"].unique())
        if kind == "speedup":
            axes.plot(cores, [count / cores[0] for count in cores], color="grey", linestyle="--",
                      linewidth=1, label="ideal (efficiency 1)")
            axes.set_ylabel("fit-time speed-up (x)")
            axes.set_title("fixed work: fit-time speed-up")
        else:
            axes.set_ylabel(f"{RESULT} (higher is better)")
            axes.set_title("fills its time: result at each step")
        axes.set_xticks(cores)
        axes.set_xlabel("cores")
        axes.legend(fontsize=8)
    return _save(plot, path)


def section(jobs: pd.DataFrame, folder: Path,
            table_markdown: Callable[..., str]) -> tuple[list[str], list[Path]]:
    """The Scaling section of report.md, its CSVs and its figure. A suite without a `scaling:`
    block gets the section too, saying that it measured no scaling and what would."""
    if scaling_jobs(jobs).empty:
        if jobs.empty:
            return [], []
        return ["## Scaling", "",
                "This suite has no `scaling:` block, so it measured nothing of what more cores or GPUs "
                "buy: each job ran once, at its budget. `automl-eval run scaling` "
                "(specs/suites/scaling.yaml) runs its jobs at 1 and 2 cores, and with a GPU where the host "
                "has one; "
                "`python -m bench.bench_scaling` prints the speed-up table.", ""], []
    speedups, gains = speedup_table(jobs), gain_table(jobs)
    lines = ["## Scaling (more cores and GPUs, the same budget time)", "",
             "Each job of the suite's `scaling:` block ran once per step, one at a time; means over folds "
             "and seeds. Elsewhere in this report a framework's steps are pooled like its folds.", ""]
    figures: list[Path] = []
    if not speedups.empty:
        speedups.to_csv(folder / "scaling_speedup.csv", index=False)
        lines += ["Frameworks whose params fix their work: speed-up = fit_s at the fewest resources / "
                  "fit_s; efficiency = speed-up / core ratio (at the base step's GPUs); fit_rows_per_s = "
                  "training rows per second of fit.", "", table_markdown(speedups), ""]
    if not gains.empty:
        gains.to_csv(folder / "scaling_gain.csv", index=False)
        lines += [f"Frameworks that search until their time is spent: {RESULT} at each step and its gain "
                  "over the fewest resources.", "", table_markdown(gains), ""]
    if not speedups.empty or not gains.empty:
        figures.append(figure(speedups, gains, folder / "scaling.png"))
        lines += [f"![scaling]({figures[0].name})", ""]
    lines += [f"- {note}" for note in [measured(jobs), *limits(jobs)]] + [""]
    return lines, figures
