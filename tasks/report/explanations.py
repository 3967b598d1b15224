"""Explanations and deployability across jobs: stability, agreement, importance shifts, ONNX table.

From the per-job importance tables the `explain` evaluation writes (importance.csv: permutation
importance per feature) and the `export` evaluation's metrics:
- stability: rank correlation (Spearman) and top-k agreement of importance between every pair of
  jobs (folds x seeds) of one framework on one dataset;
- agreement: the same figures between frameworks on one dataset, on each framework's mean importance;
- an importance shift between two executions: the top-k set moved further than the baseline's own
  fold/seed spread (compare flags it as a change, with the factors that differ);
- deployability: framework x (ONNX ok, parity, native vs ONNX latency, MOJO size).
"""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from tasks.report import explanation_plots
from tasks.report.compare_attribution import FACTORS
from tasks.tracking import read

DEFAULT_TOP_K = 3
KEYS = ["dataset", "framework", "fold", "seed"]
IMPORTANCE = "importance_mean"  # the harness's permutation importance, the same for every framework


def top_k(importance: pd.Series, k: int) -> set[str]:
    """The k features of largest importance (ties broken by name, so the set is reproducible)."""
    frame = importance.dropna().rename("value").reset_index()
    frame.columns = ["feature", "value"]
    ordered = frame.sort_values(["value", "feature"], ascending=[False, True])
    return set(ordered["feature"].head(k))


def informative(importance: pd.Series) -> bool:
    """An importance that ranks anything: not all equal (the constant baseline's are all 0)."""
    values = importance.dropna()
    return len(values) >= 2 and float(values.max() - values.min()) > 0


def rank_correlation(a: pd.Series, b: pd.Series) -> float:
    """Spearman correlation over the features both rank; NaN when either ranks nothing."""
    common = a.dropna().index.intersection(b.dropna().index)
    if len(common) < 2 or not informative(a[common]) or not informative(b[common]):
        return float("nan")
    return float(stats.spearmanr(a[common], b[common]).statistic)


def top_k_agreement(a: pd.Series, b: pd.Series, k: int) -> float:
    """|top-k(a) & top-k(b)| / k, k capped at the features both have; NaN when either ranks nothing."""
    common = a.dropna().index.intersection(b.dropna().index)
    k = min(k, len(common))
    if k == 0 or not informative(a[common]) or not informative(b[common]):
        return float("nan")
    return len(top_k(a[common], k) & top_k(b[common], k)) / k


def _pairs(vectors: list[pd.Series], k: int) -> tuple[list[float], list[float]]:
    pairs = list(itertools.combinations(vectors, 2))
    return [rank_correlation(a, b) for a, b in pairs], [top_k_agreement(a, b, k) for a, b in pairs]


def _mean(values: list[float]) -> float:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def _vectors(importance: pd.DataFrame,
             column: str = IMPORTANCE) -> dict[tuple[str, str, int, int], pd.Series]:
    """(dataset, framework, fold, seed) -> importance per feature."""
    return {key: group.set_index("feature")[column].astype(float)
            for key, group in importance.groupby(KEYS, sort=True)}


def _ranks_anything(importance: pd.DataFrame, cell: tuple[str, str]) -> bool:
    """Whether any job of (dataset, framework) ranks its features (the constant baseline never does)."""
    rows = importance[(importance["dataset"] == cell[0]) & (importance["framework"] == cell[1])]
    return any(informative(group.set_index("feature")[IMPORTANCE]) for _, group in rows.groupby(KEYS))


def stability(importance: pd.DataFrame, k: int = DEFAULT_TOP_K) -> pd.DataFrame:
    """Per (dataset, framework): mean pairwise rank correlation and top-k agreement over its jobs."""
    rows = []
    vectors = {key: v for key, v in _vectors(importance).items() if _ranks_anything(importance, key[:2])}
    cells = sorted({key[:2] for key in vectors})
    for dataset, framework in cells:
        jobs = [v for key, v in vectors.items() if key[:2] == (dataset, framework)]
        correlations, agreements = _pairs(jobs, k)
        rows.append({"dataset": dataset, "framework": framework, "jobs": len(jobs),
                     "pairs": len(correlations),
                     "rank_correlation": _mean(correlations), f"top{k}_agreement": _mean(agreements),
                     f"top{k}_agreement_min": min((a for a in agreements if np.isfinite(a)), default=np.nan)})
    return pd.DataFrame(rows, columns=["dataset", "framework", "jobs", "pairs", "rank_correlation",
                                       f"top{k}_agreement", f"top{k}_agreement_min"])


def mean_importance(importance: pd.DataFrame, column: str = IMPORTANCE) -> pd.DataFrame:
    """dataset, framework, feature -> importance averaged over the framework's jobs."""
    return importance.groupby(["dataset", "framework", "feature"], as_index=False)[column].mean()


def agreement(importance: pd.DataFrame, k: int = DEFAULT_TOP_K) -> pd.DataFrame:
    """Per dataset and pair of frameworks: rank correlation and top-k agreement of mean importance."""
    means = mean_importance(importance)
    means = means[[_ranks_anything(importance, (d, f)) for d, f in zip(means["dataset"], means["framework"],
                                                                       strict=True)]]
    rows = []
    for dataset, group in means.groupby("dataset", sort=True):
        by_framework = {fw: g.set_index("feature")[IMPORTANCE] for fw, g in group.groupby("framework")}
        for (fa, a), (fb, b) in itertools.combinations(sorted(by_framework.items()), 2):
            rows.append({"dataset": dataset, "framework_a": fa, "framework_b": fb,
                         "rank_correlation": rank_correlation(a, b),
                         f"top{k}_agreement": top_k_agreement(a, b, k)})
    return pd.DataFrame(rows, columns=["dataset", "framework_a", "framework_b", "rank_correlation",
                                       f"top{k}_agreement"])


def agreement_matrix(pairs: pd.DataFrame, dataset: str, value: str = "rank_correlation") -> pd.DataFrame:
    """A symmetric framework x framework matrix of one dataset (1 on the diagonal)."""
    rows = pairs[pairs["dataset"] == dataset]
    names = sorted(set(rows["framework_a"]) | set(rows["framework_b"]))
    matrix = pd.DataFrame(np.eye(len(names)), index=names, columns=names)
    for row in rows.itertuples(index=False):
        matrix.loc[row.framework_a, row.framework_b] = getattr(row, value)
        matrix.loc[row.framework_b, row.framework_a] = getattr(row, value)
    return matrix


# ---------------------------------------------------------------- two executions


def importance_shifts(base: pd.DataFrame, cand: pd.DataFrame, k: int = DEFAULT_TOP_K,
                      factors: dict[tuple[str, str], str] | None = None) -> pd.DataFrame:
    """Per (dataset, framework) in both: did the top-k set move beyond the baseline's own spread?

    The baseline's spread is the lowest top-k agreement between two of its own jobs (1 with a single
    job); the change is the mean top-k agreement between baseline and candidate jobs. A shift is a
    cross agreement below that floor with the mean top-k sets differing.
    """
    base_vectors, cand_vectors = _vectors(base), _vectors(cand)
    cells = sorted({key[:2] for key in base_vectors} & {key[:2] for key in cand_vectors})
    rows = []
    for cell in cells:
        b_jobs = [v for key, v in base_vectors.items() if key[:2] == cell]
        c_jobs = [v for key, v in cand_vectors.items() if key[:2] == cell]
        if not any(informative(v) for v in b_jobs + c_jobs):
            continue
        own = [a for a in _pairs(b_jobs, k)[1] if np.isfinite(a)]
        floor = min(own) if own else 1.0
        cross = _mean([top_k_agreement(a, b, k) for a in b_jobs for b in c_jobs])
        b_top = top_k(pd.concat(b_jobs, axis=1).mean(axis=1), k)
        c_top = top_k(pd.concat(c_jobs, axis=1).mean(axis=1), k)
        shifted = bool(np.isfinite(cross) and cross < floor and b_top != c_top)
        rows.append({"dataset": cell[0], "framework": cell[1],
                     "baseline_top_k": ", ".join(sorted(b_top)), "current_top_k": ", ".join(sorted(c_top)),
                     "cross_agreement": cross, "baseline_floor": floor, "shift": shifted,
                     "factor": (factors or {}).get(cell, "") if shifted else ""})
    return pd.DataFrame(rows, columns=["dataset", "framework", "baseline_top_k", "current_top_k",
                                       "cross_agreement", "baseline_floor", "shift", "factor"])


def differing_factors(base_runs: pd.DataFrame, cand_runs: pd.DataFrame) -> dict[tuple[str, str], str]:
    """Per (dataset, framework): the factors (compare's) whose values differ between the two sides."""
    found: dict[tuple[str, str], str] = {}
    both = set(base_runs) | set(cand_runs)
    columns = {factor.name: [*factor.columns, *sorted(c for c in both if factor.prefix and
                                                      str(c).startswith(factor.prefix))]
               for factor in FACTORS}
    for (dataset, framework), b_cell in base_runs.groupby(["dataset", "framework"]):
        c_cell = cand_runs[(cand_runs["dataset"] == dataset) & (cand_runs["framework"] == framework)]
        if c_cell.empty:
            continue
        names = []
        for name, cols in columns.items():
            present = [c for c in cols if c in b_cell and c in c_cell]
            if not present:
                continue
            b_value = b_cell[present].fillna("").astype(str).agg("|".join, axis=1).mode()
            c_value = c_cell[present].fillna("").astype(str).agg("|".join, axis=1).mode()
            if len(b_value) and len(c_value) and b_value.iloc[0] != c_value.iloc[0]:
                names.append(f"{name}: {b_value.iloc[0]} -> {c_value.iloc[0]}")
        found[(dataset, framework)] = "; ".join(names) or "none differ (noise)"
    return found


# ---------------------------------------------------------------- deployability


def deployability(runs: pd.DataFrame) -> pd.DataFrame:
    """framework x (jobs exported ok / tried, worst parity, native vs ONNX p50 latency, MOJO MB)."""
    if "onnx_export_ok" not in runs:
        return pd.DataFrame()
    table = runs[runs["onnx_export_ok"].notna()].copy()
    numeric = ["onnx_export_ok", "onnx_parity_max_abs", "native_latency_p50_ms", "onnx_latency_p50_ms",
               "onnx_speedup_p50", "native_throughput_rows_s", "onnx_throughput_rows_s", "mojo_mb"]
    for column in numeric:
        table[column] = pd.to_numeric(table[column], errors="coerce") if column in table else np.nan
    outcome = table["export_onnx"].fillna("") if "export_onnx" in table else pd.Series("", index=table.index)
    grouped = table.assign(outcome=outcome).groupby("framework")
    result = pd.DataFrame({
        "onnx_ok": grouped["onnx_export_ok"].sum().astype(int).astype(str) + "/" + grouped.size().astype(str),
        "outcomes": grouped["outcome"].agg(
            lambda s: ", ".join(f"{k} {n}" for k, n in s.value_counts().items())),
        "parity_max_abs": grouped["onnx_parity_max_abs"].max(),
        "native_p50_ms": grouped["native_latency_p50_ms"].median(),
        "onnx_p50_ms": grouped["onnx_latency_p50_ms"].median(),
        "speedup_p50": grouped["onnx_speedup_p50"].median(),
        "native_rows_s": grouped["native_throughput_rows_s"].median(),
        "onnx_rows_s": grouped["onnx_throughput_rows_s"].median(),
        "mojo_mb": grouped["mojo_mb"].median(),
    })
    return result.reset_index()


# ---------------------------------------------------------------- the report's section


@dataclass
class ExplanationInputs:
    """What the report downloads for its explanation section (tasks.tracking.read fetches them)."""

    importance: pd.DataFrame  # KEYS + run_id, feature, importance_mean[, shap_mean_abs]
    shap_files: dict[str, Path]  # run_id -> shap_values.npz


def section(runs: pd.DataFrame, inputs: ExplanationInputs | None, folder: Path,
            k: int = DEFAULT_TOP_K) -> tuple[list[str], list[Path]]:
    """The report's markdown lines and figures for explanations and deployability (empty if none)."""
    lines: list[str] = []
    figures: list[Path] = []
    if inputs is not None and not inputs.importance.empty:
        steady = stability(inputs.importance, k)
        pairs = agreement(inputs.importance, k)
        steady.to_csv(folder / "explain_stability.csv", index=False)
        pairs.to_csv(folder / "explain_agreement.csv", index=False)
        mean_importance(inputs.importance).to_csv(folder / "explain_importance.csv", index=False)
        for dataset in sorted(pairs["dataset"].unique()):
            figures.append(explanation_plots.agreement_heatmap(
                agreement_matrix(pairs, dataset), dataset, folder / f"explain_agreement_{dataset}.png"))
        figures += explanation_plots.shap_summaries(runs, inputs.shap_files, folder)
        lines += [
            "## Explanations",
            "",
            f"Permutation importance on the test fold (drop of `result`), the same for every framework. "
            f"Stability: Spearman rank correlation and top-{k} agreement between the jobs (folds x seeds) "
            "of one framework; agreement: the same between frameworks' mean importance on one dataset. "
            "Frameworks whose importance ranks nothing (the constant baseline) are left out.",
            "",
            _table(steady),
            "",
            _table(pairs),
            "",
        ]
    deploy = deployability(runs)
    if not deploy.empty:
        deploy.to_csv(folder / "deployability.csv", index=False)
        lines += ["## Deployability (ONNX export)", "",
                  "ONNX ok = exported and within the parity tolerance on the test fold; latency at batch 1 "
                  "and throughput at a large batch, ONNX Runtime vs the native model, same process and "
                  "cores.",
                  "", _table(deploy), ""]
    return lines, figures


def _table(frame: pd.DataFrame) -> str:
    def cell(value: object) -> str:
        if isinstance(value, float):
            return "" if pd.isna(value) else f"{value:.3g}"
        return str(value).replace("|", "/")

    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, "|" + "---|" * len(frame.columns), *rows])


def load_inputs(runs: pd.DataFrame, folder: Path, *, uri: str | None = None) -> ExplanationInputs | None:
    """Fetch the importance tables and SHAP files of runs whose `explain` evaluation produced them."""
    if "evaluation.explain" not in runs:
        return None
    explained = runs[runs["evaluation.explain"].isin(["ok", "partial"])]
    if explained.empty:
        return None
    ids = [str(r) for r in explained["run_id"]]
    tables = read.evaluation_artifacts(ids, "explain", "importance.csv", folder, uri=uri)
    shap_files = read.evaluation_artifacts(ids, "explain", "shap_values.npz", folder, uri=uri)
    frames = []
    for fields in explained.to_dict("records"):
        path = tables.get(str(fields["run_id"]))
        if path is None:
            continue
        fold = fields.get("fold") or fields.get("params.fold") or 0
        seed = fields.get("seed") or fields.get("params.seed") or 0
        frames.append(pd.read_csv(path).assign(run_id=fields["run_id"], dataset=fields["dataset"],
                                               framework=fields["framework"], fold=int(float(fold)),
                                               seed=int(float(seed))))
    importance = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*KEYS, "feature"])
    return ExplanationInputs(importance, shap_files)


def compare_importance(base_runs: pd.DataFrame, cand_runs: pd.DataFrame, folder: Path, *,
                       k: int = DEFAULT_TOP_K, uri: str | None = None) -> pd.DataFrame | None:
    """Importance shifts between two executions: importance_shift.csv and a section of compare.md.

    None when either side has no explanations (suites without an `explain` block).
    """
    if base_runs.empty or cand_runs.empty:
        return None
    with tempfile.TemporaryDirectory() as downloads:
        base = load_inputs(base_runs, Path(downloads) / "base", uri=uri)
        cand = load_inputs(cand_runs, Path(downloads) / "cand", uri=uri)
    if base is None or cand is None or base.importance.empty or cand.importance.empty:
        return None
    shifts = importance_shifts(base.importance, cand.importance, k, differing_factors(base_runs, cand_runs))
    shifts.to_csv(folder / "importance_shift.csv", index=False)
    flagged = shifts[shifts["shift"]]
    lines = ["", f"## Importance shifts (top-{k} features)", "",
             f"{len(flagged)} change(s): the candidate's top-{k} set moved further from the baseline's than "
             "the baseline's own folds and seeds move from each other (its lowest pairwise agreement).", ""]
    if len(shifts):
        lines += [_table(shifts), ""]
    with open(folder / "compare.md", "a", encoding="utf-8") as handle:
        handle.write("\n".join(lines))
    return shifts
