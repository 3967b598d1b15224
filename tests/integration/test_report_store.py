"""report and compare against a real MLflow store (sqlite, public client API), through the CLI."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench/ holds the synthetic-run helper; it is not an installed package
    sys.path.insert(0, str(ROOT))

from bench.synthetic_runs import SyntheticSuite, synthetic_jobs, write_execution  # noqa: E402

pytestmark = pytest.mark.integration
STRENGTHS = {"constant": 0.0, "rf": 1.0, "hgb": 1.5}
DROP = ("ds01_multiclass", "rf")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Two executions of suite `mini`: tonight has rf on ds01 five points worse and a new rf version."""
    home = tmp_path_factory.mktemp("report-store")
    uri = f"sqlite:///{home / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        patch.setenv("AUTOML_EVAL_HOME", str(home))
        spec = {"suite": "mini", "datasets": 2, "strengths": STRENGTHS, "folds": 2, "seeds": (0, 1)}
        last_night_jobs = synthetic_jobs(SyntheticSuite(**spec, fail=[("ds00_binary", "hgb")]))
        last_night = write_execution(uri, last_night_jobs, suite="mini", parent_tags={"trigger": "nightly"})
        tonight_jobs = synthetic_jobs(
            SyntheticSuite(
                **{**spec, "seeds": (2, 3)}, shift={DROP: -0.2}, overrides={"framework_version": "9.9"}
            )
        )
        tonight = write_execution(uri, tonight_jobs, suite="mini", parent_tags={"trigger": "nightly"})
        yield {"uri": uri, "home": str(home), "last_night": last_night, "tonight": tonight}


def _cli(
    *args: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str, str]:
    """`automl-eval ARGS` in this process, on the fixture's store: exit code, stdout, stderr."""
    from flows.cli import main

    monkeypatch.setattr(sys, "argv", ["automl-eval", *args])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_report_from_mlflow_writes_the_folder_and_logs_it(
    store: dict[str, str], tmp_path: Path, capsys, monkeypatch
) -> None:  # noqa: ANN001
    from mlflow import MlflowClient

    out = Path(store["home"]) / "reports" / "from-store"  # --out must lie inside the project
    code, stdout, stderr = _cli(
        "report",
        "mini@previous",
        "--out",
        str(out),
        "--bootstrap",
        "20",
        capsys=capsys,
        monkeypatch=monkeypatch,
    )
    assert code == 0, stderr
    assert str(out) in stdout.replace("\n", "")
    for name in (
        "report.md",
        "results.csv",
        "leaderboard.csv",
        "elo.csv",
        "critical_difference.png",
        "pareto_fit_s.png",
        "pareto_latency_p99_ms.png",
        "win_rate.png",
        "stability.png",
    ):
        assert (out / name).is_file(), name
    assert "hgb on ds00_binary" in (out / "report.md").read_text()  # its failures were imputed
    logged = {f.path for f in MlflowClient(store["uri"]).list_artifacts(store["last_night"], "report")}
    assert "report/report.md" in logged and "report/results.csv" in logged


def test_report_rejects_an_unknown_suite_in_one_sentence(store: dict[str, str], capsys, monkeypatch) -> None:  # noqa: ANN001
    code, _, stderr = _cli("report", "nope", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 2
    assert "no results for suite 'nope'" in stderr and "Traceback" not in stderr


def test_compare_prints_the_diagnostic_table(store: dict[str, str], capsys, monkeypatch) -> None:  # noqa: ANN001
    code, text, stderr = _cli(
        "compare",
        "mini@previous",
        "mini@latest",
        "--fail-on-regression",
        capsys=capsys,
        monkeypatch=monkeypatch,
    )
    assert code == 1, stderr
    for column in ("metric", "current", "baseline", "change", "main factor"):
        assert column in text
    assert "ds01_multiclass / rf" in text and "framework_version" in text and "1 regression(s)" in text


def test_nightly_hook_compares_with_the_previous_successful_execution(store: dict[str, str]) -> None:
    from mlflow import MlflowClient

    from tasks.report.compare_store import compare_with_previous_nightly

    nightly = compare_with_previous_nightly(store["tonight"], uri=store["uri"])
    assert nightly.baseline_id == store["last_night"]
    assert nightly.regressed and "ds01_multiclass / rf" in nightly.markdown
    assert MlflowClient(store["uri"]).get_run(store["tonight"]).data.tags["regression"] == "true"
    first = compare_with_previous_nightly(store["last_night"], uri=store["uri"])
    assert first.baseline_id is None and not first.regressed
