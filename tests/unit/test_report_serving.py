"""The report's serving part and compare's serving cost figures, on hand-made job runs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tasks.report import jobs as job_table
from tasks.report.compare import compare
from tasks.report.serving import canary_table, load_table, qps_front, section, stack_table


def _runs(qps: dict[str, float], p99_scale: float = 1.0, seeds: tuple[int, ...] = (0, 1, 2)) -> pd.DataFrame:
    rows = []
    for framework, result in (("constant", 0.5), ("hgb", 0.9), ("slow", 0.95)):
        for seed in seeds:
            row = {"dataset": "d", "framework": framework, "fold": 0, "seed": seed, "status": "ok",
                   "metric": "auc", "auc": result, "result": result + 0.001 * seed,
                   "serve_max_qps_at_slo": qps[framework] * (1 + 0.01 * seed), "serve_slo_ms": 100.0}
            for users, p99 in ((1, 5.0), (4, 9.0)):
                base = p99 * (40 if framework == "slow" else 1) * p99_scale * (1 + 0.01 * seed)
                row |= {f"serve_c{users}_p99_ms": base, f"serve_c{users}_p95_ms": base * 0.8,
                        f"serve_c{users}_p50_ms": base * 0.5, f"serve_c{users}_mean_ms": base * 0.6,
                        f"serve_c{users}_rps": 100.0 / base, f"serve_c{users}_error_rate": 0.0}
            row["serve_p99_ms"] = row["serve_c4_p99_ms"]
            rows.append(row)
    return pd.DataFrame(rows)


QPS = {"constant": 900.0, "hgb": 400.0, "slow": 2.0}


def test_the_load_table_and_the_front(tmp_path: Path) -> None:
    jobs = job_table.prepare(_runs(QPS))
    table = load_table(jobs)
    assert table[["framework", "concurrency"]].values.tolist() == [
        ["constant", 1], ["constant", 4], ["hgb", 1], ["hgb", 4], ["slow", 1], ["slow", 4]]
    assert (table["p95_ms"] <= table["p99_ms"]).all() and (table["jobs"] == 3).all()
    front = qps_front(jobs).set_index("framework")["on_front"]
    assert front.to_dict() == {"constant": True, "hgb": True, "slow": True}  # each best at something
    lines, figures = section(jobs, tmp_path, lambda frame: frame.to_string())
    assert lines[0].startswith("## Serving") and [f.name for f in figures] == [
        "serving_latency_throughput.png", "serving_pareto_max_qps.png"]
    assert all(f.stat().st_size > 0 for f in figures) and (tmp_path / "serving_load.csv").is_file()


def test_a_report_without_serving_figures_has_no_serving_section(tmp_path: Path) -> None:
    runs = _runs(QPS).loc[:, lambda f: [c for c in f.columns if not c.startswith("serve_")]]
    assert section(job_table.prepare(runs), tmp_path, str) == ([], [])


def test_compare_flags_a_serving_regression_as_a_cost() -> None:
    slower = compare(_runs(QPS), _runs({**QPS, "hgb": 200.0}, p99_scale=1.0, seeds=(3, 4, 5)))
    flagged = slower.regressions[["framework", "metric"]].values.tolist()
    assert flagged == [["hgb", "serve_max_qps_at_slo"]]  # a lower rate held is worse
    higher_p99 = compare(_runs(QPS), _runs(QPS, p99_scale=2.0, seeds=(3, 4, 5)))
    assert sorted(higher_p99.regressions["metric"].unique()) == ["serve_p99_ms"]
    faster = compare(_runs(QPS), _runs({name: q * 2 for name, q in QPS.items()}, seeds=(3, 4, 5)))
    assert not faster.regressed


def test_an_open_loop_loadgen_could_not_judge_is_named_with_its_reason_not_as_zero(tmp_path: Path) -> None:
    runs = _runs(QPS)
    reason = ("LoadGen could not judge 5 QPS: its min_query_count of 500 queries takes about 106 s at 5 "
              "QPS, more than the 40 s left of serving.time_s; raise serving.time_s or lower "
              "serving.min_query_count")
    unjudged = runs["framework"] == "slow"
    runs.loc[unjudged, "serve_max_qps_at_slo"] = float("nan")
    runs["evaluation.serving.reason"] = ""
    runs.loc[unjudged, "evaluation.serving.reason"] = reason
    jobs = job_table.prepare(runs)
    assert "slow" not in set(qps_front(jobs)["framework"])
    lines, _ = section(jobs, tmp_path, lambda frame: frame.to_string())
    assert f"- d x slow: {reason}" in lines
    assert not any("d x hgb" in line for line in lines)


def test_the_stack_table_names_the_best_stack_per_model() -> None:
    runs = _runs(QPS)
    runs["serve_onnxruntime_max_qps_at_slo"] = runs["serve_max_qps_at_slo"] * 3  # faster on every model
    runs["serve_onnxruntime_c1_p50_ms"] = runs["serve_c1_p50_ms"] / 2
    runs.loc[runs["framework"] == "constant", "serve_onnxruntime_max_qps_at_slo"] = 1.0  # but this one
    # The same rate on both stacks for slow: the one that needs fewer cores per 100 QPS is best.
    slow = runs["framework"] == "slow"
    runs.loc[slow, "serve_onnxruntime_max_qps_at_slo"] = runs.loc[slow, "serve_max_qps_at_slo"]
    runs["serve_server_cpu_s_per_1k"] = 20.0
    runs["serve_onnxruntime_server_cpu_s_per_1k"] = 4.0
    runs.loc[slow, "serve_onnxruntime_server_cpu_s_per_1k"] = 40.0
    runs["serve_cold_start_s"], runs["serve_onnxruntime_cold_start_s"] = 6.0, 2.0
    table = stack_table(job_table.prepare(runs))
    best = table[table["best"]].set_index("framework")["stack"].to_dict()
    assert best == {"constant": "mlflow", "hgb": "onnxruntime", "slow": "mlflow"}
    assert set(table["stack"]) == {"mlflow", "onnxruntime"} and len(table) == 6
    # 20 CPU seconds per 1,000 requests: 100 QPS keep 2 cores busy.
    cores = table.set_index(["framework", "stack"])["cores_per_100_qps"]
    assert cores[("hgb", "mlflow")] == 2.0 and cores[("hgb", "onnxruntime")] == 0.4
    assert table.set_index(["framework", "stack"])["cold_start_s"][("hgb", "onnxruntime")] == 2.0
    assert stack_table(job_table.prepare(_runs(QPS))).empty  # one stack: nothing to compare


def test_the_canary_table_gives_both_versions_and_their_agreement(tmp_path: Path) -> None:
    runs = _runs(QPS)
    hgb = runs["framework"] == "hgb"
    runs.loc[hgb, "serve_canary_share_routed"] = [0.08, 0.1, 0.12]
    runs.loc[hgb, "serve_canary_agreement"] = 0.9
    runs.loc[hgb, "serve_canary_p99_ms"], runs.loc[hgb, "serve_canary_primary_p99_ms"] = 30.0, 10.0
    jobs = job_table.prepare(runs)
    table = canary_table(jobs)
    assert table["framework"].tolist() == ["hgb"]  # only the model that had a canary
    row = table.iloc[0]
    assert row["share_routed"] == pytest.approx(0.1) and row["agreement"] == 0.9
    assert (row["canary_p99_ms"], row["primary_p99_ms"]) == (30.0, 10.0)
    lines, _ = section(jobs, tmp_path, lambda frame: frame.to_string())
    assert any(line.startswith("Canary: ") for line in lines) and (tmp_path / "serving_canary.csv").is_file()
    assert canary_table(job_table.prepare(_runs(QPS))).empty
