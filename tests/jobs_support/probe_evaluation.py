"""A test-only post-job evaluation (added through AUTOML_EVAL_EXTRA_EVALUATIONS).

`mode: score` re-scores the saved model on its test fold through the harness and writes a file;
`raise` fails; `sleep` overruns its limit; `nan` hands the harness a bad prediction to score.
"""

from __future__ import annotations

import time
from typing import ClassVar, Literal

from tasks.evaluations.base import EvaluationContext, EvaluationResult, EvaluationSettings, PostJobEvaluation
from tasks.figures import Figure


class ProbeSettings(EvaluationSettings):
    mode: Literal["score", "raise", "sleep"] = "score"


class ProbeEvaluation(PostJobEvaluation):
    name = "probe"
    settings_model = ProbeSettings
    figures: ClassVar[tuple[Figure, ...]] = (
        Figure("probe_result", "the job's result, scored again on the saved model"),)
    tags: ClassVar[dict[str, str]] = {"probe_outcome": "how a probe that failed stopped"}
    grace_s = 3.0

    def applies_to(self, spec, framework):  # noqa: ANN001, ANN201
        return "the probe does not take regression" if spec.problem_type == "regression" else None

    def on_failure(self, outcome: EvaluationResult) -> None:
        outcome.tags["probe_outcome"] = f"stopped: {outcome.status}"

    def run(self, context: EvaluationContext) -> EvaluationResult:
        mode = context.settings.mode  # type: ignore[attr-defined]
        if mode == "raise":
            raise RuntimeError("the probe was told to fail")
        if mode == "sleep":
            time.sleep(context.settings.time_s + 30)
        X_test = context.fold.X_test
        proba = context.model.predict_proba(X_test) if context.fold.task.is_classification else None
        scores = context.score(context.model.predict(X_test), proba)
        (context.folder / "rows.txt").write_text(f"{len(X_test)}\n")
        return EvaluationResult(status="ok", metrics={"probe_result": scores["result"]}, files=["rows.txt"],
                                info={"cores": context.cores})


EVALUATION = ProbeEvaluation()
