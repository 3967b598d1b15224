"""The harness's scores agree with scikit-learn, and `result` is higher-is-better."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn import metrics as skm

from tasks.errors import UserError
from tasks.metrics import score
from tasks.vocabulary import LOWER_IS_BETTER, RESULT, SCORE_METRICS

RNG = np.random.default_rng(7)


def _classification(classes: list[str], rows: int = 200) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    truth = RNG.choice(classes, size=rows)
    raw = RNG.random((rows, len(classes))) + 2.0 * (truth[:, None] == np.array(classes)[None, :])
    proba = pd.DataFrame(raw / raw.sum(axis=1, keepdims=True), columns=classes)
    predicted = np.array(classes)[proba.to_numpy().argmax(axis=1)]
    return truth, predicted, proba


def test_binary_matches_sklearn() -> None:
    classes = ["no", "yes"]
    truth, predicted, proba = _classification(classes)
    scores = score("binary", "auc", truth, predicted, proba, classes)
    assert set(scores) == {*SCORE_METRICS["binary"], RESULT}
    assert scores["auc"] == pytest.approx(skm.roc_auc_score(truth == "yes", proba["yes"]))
    assert scores["logloss"] == pytest.approx(skm.log_loss(truth, proba[classes], labels=classes))
    assert scores["acc"] == pytest.approx(skm.accuracy_score(truth, predicted))
    assert scores["balacc"] == pytest.approx(skm.balanced_accuracy_score(truth, predicted))
    assert scores["f1"] == pytest.approx(skm.f1_score(truth, predicted, pos_label="yes"))
    assert scores[RESULT] == scores["auc"]


def test_multiclass_matches_sklearn_and_negates_logloss() -> None:
    classes = ["a", "b", "c"]
    truth, predicted, proba = _classification(classes)
    scores = score("multiclass", "logloss", truth, predicted, proba, classes)
    assert set(scores) == {*SCORE_METRICS["multiclass"], RESULT} - {"top5_acc"}  # 3 classes: no top-5
    assert scores["logloss"] == pytest.approx(skm.log_loss(truth, proba[classes], labels=classes))
    assert scores["macro_f1"] == pytest.approx(skm.f1_score(truth, predicted, average="macro"))
    assert scores["balacc"] == pytest.approx(skm.balanced_accuracy_score(truth, predicted))
    assert "logloss" in LOWER_IS_BETTER and scores[RESULT] == -scores["logloss"]


def test_regression_matches_sklearn() -> None:
    truth = RNG.normal(size=150)
    predicted = truth + RNG.normal(scale=0.3, size=150)
    scores = score("regression", "rmse", truth, predicted, None, ())
    assert set(scores) == {*SCORE_METRICS["regression"], RESULT}
    assert scores["rmse"] == pytest.approx(np.sqrt(skm.mean_squared_error(truth, predicted)))
    assert scores["mae"] == pytest.approx(skm.mean_absolute_error(truth, predicted))
    assert scores["r2"] == pytest.approx(skm.r2_score(truth, predicted))
    assert scores[RESULT] == -scores["rmse"]
    assert score("regression", "r2", truth, predicted, None, ())[RESULT] == scores["r2"]


def test_labels_compare_as_text_across_a_csv_round_trip() -> None:
    # Integer classes in the task, strings read back from predictions.csv: the same labels.
    classes = [0, 1]
    truth, predicted, proba = _classification(["0", "1"])
    as_ints = score("binary", "acc", truth.astype(int), predicted.astype(int), proba, classes)
    as_text = score("binary", "acc", truth, predicted, proba.rename(columns=int), classes)
    assert as_ints == pytest.approx(as_text)


def test_a_class_missing_from_the_fold_and_overconfident_rows_stay_finite() -> None:
    classes = ["a", "b", "c"]
    truth = np.array(["a", "b", "a", "b"])  # no "c" in this fold
    proba = pd.DataFrame({"a": [1.0, 0.0, 0.5, 0.2], "b": [0.0, 1.0, 0.5, 0.8], "c": [0.0] * 4})
    predicted = np.array(["a", "b", "a", "a"])
    scores = score("multiclass", "logloss", truth, predicted, proba, classes)
    assert all(np.isfinite(v) for v in scores.values())


@pytest.mark.parametrize(
    ("problem_type", "metric", "message"),
    [("binary", "rmse", "does not apply to binary"), ("regression", "auc", "use one of rmse, mae, r2"),
     ("ranking", "auc", "unknown problem type")],
)
def test_wrong_metric_is_one_sentence(problem_type: str, metric: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        score(problem_type, metric, [1.0], [1.0], None, ())


def test_classification_without_probabilities_is_refused() -> None:
    with pytest.raises(ValueError, match="probabilities"):
        score("binary", "auc", ["a", "b"], ["a", "b"], None, ["a", "b"])


# Brier score and expected calibration error, worked out by hand on tiny folds (the values in the
# comments are the arithmetic, not calls to the code under test).


def _binary_fold(truth: list[str], p_yes: list[float], metric: str = "brier") -> dict[str, float]:
    proba = pd.DataFrame({"no": [1 - p for p in p_yes], "yes": p_yes})
    predicted = np.where(np.asarray(p_yes) > 0.5, "yes", "no")
    return score("binary", metric, np.asarray(truth), predicted, proba, ["no", "yes"])


def test_binary_brier_and_ece_by_hand() -> None:
    scores = _binary_fold(["yes", "no", "yes", "yes"], [0.9, 0.3, 0.35, 0.65])
    # Brier: ((1-.9)^2 + (0-.3)^2 + (1-.35)^2 + (1-.65)^2) / 4 = (.01 + .09 + .4225 + .1225) / 4
    assert scores["brier"] == pytest.approx(0.16125, rel=1e-12)
    # top class and its probability: yes .9 (right), no .7 (right), no .65 (wrong), yes .65 (right);
    # bins of width 1/15: .9 -> (13/15, 14/15], .7 -> (10/15, 11/15], both .65 -> (9/15, 10/15].
    # ECE = 1/4 |1 - .9| + 1/4 |1 - .7| + 2/4 |1/2 - .65| = .025 + .075 + .075
    assert scores["ece"] == pytest.approx(0.175, rel=1e-12)
    # both lower-is-better: as the suite metric, `result` is the negated score
    assert scores[RESULT] == -scores["brier"]
    as_ece = _binary_fold(["yes", "no", "yes", "yes"], [0.9, 0.3, 0.35, 0.65], "ece")
    assert as_ece[RESULT] == pytest.approx(-0.175, rel=1e-12)


def test_ece_uses_fifteen_bins() -> None:
    # Top-class probabilities .68 (right) and .72 (wrong) share the bin (10/15, 11/15] = (.667, .733]:
    # ECE = |1/2 - .70| = .20. Ten or twenty bins would split them: 1/2 (.32) + 1/2 (.72) = .52.
    scores = _binary_fold(["yes", "yes"], [0.68, 0.28])
    assert scores["ece"] == pytest.approx(0.20, rel=1e-12)


def test_multiclass_brier_sums_over_classes_and_ece_by_hand() -> None:
    classes = ["a", "b", "c"]
    proba = pd.DataFrame([[0.7, 0.2, 0.1], [0.5, 0.3, 0.2], [0.05, 0.1, 0.85]], columns=classes)
    truth = np.array(["a", "b", "c"])
    scores = score("multiclass", "logloss", truth, np.array(["a", "a", "c"]), proba, classes)
    # row sums of squared errors: .3^2+.2^2+.1^2 = .14; .5^2+.7^2+.2^2 = .78; .05^2+.1^2+.15^2 = .035
    assert scores["brier"] == pytest.approx((0.14 + 0.78 + 0.035) / 3, rel=1e-12)
    # top classes a .7 (right), a .5 (wrong), c .85 (right), each alone in its bin:
    # ECE = (|1 - .7| + |0 - .5| + |1 - .85|) / 3 = .95 / 3
    assert scores["ece"] == pytest.approx(0.95 / 3, rel=1e-12)


def test_perfect_confident_predictions_have_zero_brier_and_ece() -> None:
    scores = _binary_fold(["yes", "no"], [1.0, 0.0])
    assert scores["brier"] == pytest.approx(0.0, abs=1e-12) and scores["ece"] == pytest.approx(0.0, abs=1e-12)
