"""compare on generated pairs of small executions in a fresh sqlite MLflow store (hypothesis).

Each example writes a baseline and a candidate execution that differ in at most one factor (a
framework param, a tag, a recorded metric, the budget, the data or framework version, the fold or
seed count, a dataset or a framework), present on one side only or on both with other values, and
maybe a planted regression. compare must return its table, name that factor as the main one, and
always report the planted regression.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ holds the synthetic-run helper; it is not an installed package
    sys.path.insert(0, str(ROOT))

from bench.synthetic_runs import SyntheticSuite, synthetic_jobs, write_execution  # noqa: E402
from tasks.report.compare import TABLE_COLUMNS, compare  # noqa: E402
from tasks.tracking import read  # noqa: E402

STRENGTHS = {"hgb": 1.4, "rf": 1.0}
PLANTED = -0.3  # quality points: far past the 2% threshold, and many seed-noise spreads
# factor varied -> the main factor compare must name (None: nothing differs in the common cells)
FACTORS = {
    "none": None,
    "param": "params",
    "tag": "trigger",
    "metric": "recorded metrics",
    "budget": "budget",
    "data_version": "data_version",
    "framework_version": "framework_version",
    "folds": "folds",
    "seeds": "seeds",
    "dataset": None,
    "framework": None,
}
ONE_SIDED = ("baseline", "candidate", "both")  # where the factor is set; both: two different values


@pytest.fixture(scope="module")
def store_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    uri = f"sqlite:///{tmp_path_factory.mktemp('compare-properties') / 'mlflow.db'}"
    read.client(uri).search_experiments()  # create the store (its schema) once for every example
    yield uri


def _set(frame: pd.DataFrame, column: str, value: object, rows: pd.Series | None = None) -> None:
    frame.loc[rows if rows is not None else frame.index, column] = value


def _drop_from_one_side(
    where: str, base: pd.DataFrame, cand: pd.DataFrame, dropped: object
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rows for which `dropped(frame)` is true stay on the side `where` names only (both: baseline)."""
    if where in ("baseline", "both"):
        return base, cand[~dropped(cand)]
    return base[~dropped(base)], cand


def _vary(
    factor: str, where: str, base: pd.DataFrame, cand: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Make the two sides differ in `factor` only, set on `where` (one side, or both differently)."""
    on_base, on_cand = where in ("baseline", "both"), where in ("candidate", "both")
    values = {
        "param": ("params.param.max_iter", "10", "3"),
        "tag": ("trigger", "cli", "nightly"),
        "data_version": ("data_version", "md5-old", "md5-new"),
        "framework_version": ("framework_version", "1.0.0", "2.0.0"),
    }
    if factor in values:
        column, base_value, cand_value = values[factor]
        always_there = factor in ("data_version", "framework_version")  # one-sided: unset (blank)
        for frame, present, value in ((base, on_base, base_value), (cand, on_cand, cand_value)):
            rows = frame["framework"] == "hgb" if factor == "param" else None
            if present or always_there:
                _set(frame, column, value if present else "", rows)
    elif factor == "budget":
        if where == "both":
            _set(cand, "params.budget_time_s", "60")
        else:
            _set(base if on_base else cand, "params.budget_gpus", "1")
    elif factor == "metric":  # a GPU figure on one side; both: each side lacks a different figure
        _set(base if on_base else cand, "gpu_mem_peak_mb", 812.0)
        if where == "both":
            cand = cand.drop(columns=["latency_p99_ms"])
    elif factor == "folds":
        base, cand = _drop_from_one_side(where, base, cand, lambda frame: frame["fold"] != "0")
    elif factor == "seeds":
        last_seed = lambda frame: frame["seed"] == frame["seed"].max()  # noqa: E731
        base, cand = _drop_from_one_side(where, base, cand, last_seed)
    elif factor == "dataset":
        last = sorted(base["dataset"].unique())[-1]
        base, cand = _drop_from_one_side(where, base, cand, lambda frame: frame["dataset"] == last)
    elif factor == "framework":
        base, cand = _drop_from_one_side(where, base, cand, lambda frame: frame["framework"] == "rf")
    return base.reset_index(drop=True), cand.reset_index(drop=True)


@settings(
    max_examples=20,
    deadline=None,  # a loaded CI machine must not fail it: the bound is max_examples
    database=None,  # nothing written into the checkout
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    factor=st.sampled_from(sorted(FACTORS)),
    where=st.sampled_from(ONE_SIDED),
    datasets=st.integers(min_value=2, max_value=3),
    folds=st.integers(min_value=2, max_value=2),
    planted=st.booleans(),
)
def test_compare_names_the_one_differing_factor_and_reports_a_planted_regression(
    store_uri: str, factor: str, where: str, datasets: int, folds: int, planted: bool
) -> None:
    suite = f"prop-{uuid.uuid4().hex[:8]}"
    cell = ("ds00_binary", "hgb")
    spec = {"suite": suite, "datasets": datasets, "strengths": STRENGTHS, "folds": folds}
    base = synthetic_jobs(SyntheticSuite(**spec, seeds=(0, 1)))
    cand = synthetic_jobs(SyntheticSuite(**spec, seeds=(2, 3), shift={cell: PLANTED} if planted else {}))
    base, cand = _vary(factor, where, base, cand)
    base_id = write_execution(store_uri, base, suite=suite, bulk=True)
    cand_id = write_execution(store_uri, cand, suite=suite, bulk=True)

    result = compare(
        read.job_runs(execution_id=base_id, uri=store_uri), read.job_runs(execution_id=cand_id, uri=store_uri)
    )

    assert list(result.table.columns) == TABLE_COLUMNS and not result.table.empty
    expected = FACTORS[factor]
    for row in result.table.to_dict("records"):
        if row["main factor"] == "no change":
            continue
        if expected is not None and (factor != "param" or row["framework"] == "hgb"):
            assert row["main factor"] == expected, row
            assert row["differing factors"].startswith(f"{expected}: "), row
            if where != "both" and factor in ("param", "tag", "data_version", "framework_version"):
                assert "unset" in row["differing factors"], row
        else:
            assert row["main factor"] == "none differ (noise)", row
    if factor in ("dataset", "framework"):
        side = "baseline" if where in ("baseline", "both") else "candidate"
        assert any(f"(only in the {side})" in text for text in result.unmatched)
    if planted:
        flagged = result.regressions
        hit = flagged[(flagged["dataset"] == cell[0]) & (flagged["framework"] == cell[1])]
        assert "result" in set(hit["metric"]), result.table[result.table["dataset"] == cell[0]]
