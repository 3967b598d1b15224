"""Text baseline: TF-IDF word and character n-grams per text column, then a linear model.

Logistic regression for classification, ridge for regression. Numeric and categorical columns,
if a text dataset has any, are scaled and one-hot encoded next to the n-grams.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from tasks.frameworks._sklearn import SklearnModel
from tasks.frameworks._tabular import FeatureSchema
from tasks.frameworks.base import FrameworkAdapter, TaskInfo, split_params
from tasks.specs import Budget, DatasetSpec

# Settings the adapter chooses, each overridable from the suite by the same `_name` param.
DEFAULTS: dict[str, Any] = {"max_features": 50_000, "ngram_max": 2, "min_df": 2, "char_ngrams": False}


def text_columns(X: pd.DataFrame, task: TaskInfo) -> list[str]:
    return [c for c in X.columns if task.column_roles.get(c) == "text"]


# shap's text masker splits on this; the vectorizer's words are runs of word characters too.
WORD_SPLIT = r"\W+"
NO_TEXT_COLUMN = "tfidf_logreg needs at least one column with role 'text' in the dataset card."


class TfidfLogregModel(SklearnModel):
    def text_tokens(self) -> str:
        return WORD_SPLIT  # one predict call on many masked texts is cheap: a sparse dot product


class TfidfLogregAdapter(FrameworkAdapter):
    name = "tfidf_logreg"
    package = "scikit-learn"
    install_hint = "pip install scikit-learn"
    modalities = frozenset({"text"})

    def applies_to(self, spec: DatasetSpec) -> str | None:
        reason = super().applies_to(spec)
        if reason is None and "text" not in spec.columns.values():
            return NO_TEXT_COLUMN
        return reason

    def fit(
        self,
        X: pd.DataFrame,
        y: pd.Series,
        *,
        task: TaskInfo,
        budget: Budget,
        params: dict[str, Any],
        workdir: Path,
        seed: int,
    ) -> SklearnModel:
        from sklearn.compose import ColumnTransformer
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.impute import SimpleImputer
        from sklearn.linear_model import LogisticRegression, Ridge
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import OneHotEncoder, StandardScaler

        adapter_params, model_params = split_params(params)
        unknown = set(adapter_params) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"tfidf_logreg: unknown params {sorted('_' + k for k in unknown)}; "
                             f"known: {sorted('_' + k for k in DEFAULTS)}.")
        settings = {**DEFAULTS, **adapter_params}
        schema = FeatureSchema.learn(X, task, keep_text=True)
        texts = text_columns(X[schema.columns], task)
        if not texts:
            raise ValueError(NO_TEXT_COLUMN)
        # A column with few rows may have no word in min_df rows: fall back to every word.
        min_df = settings["min_df"] if len(X) >= 20 * settings["min_df"] else 1
        parts: list[tuple[str, Any, Any]] = [
            (f"text_{column}", Pipeline([
                ("strings", _StringColumn(column)),
                ("tfidf", TfidfVectorizer(
                    analyzer="char_wb" if settings["char_ngrams"] else "word",
                    ngram_range=(1, settings["ngram_max"]) if not settings["char_ngrams"] else (2, 5),
                    min_df=min_df, max_features=settings["max_features"], sublinear_tf=True,
                )),
            ]), [column])
            for column in texts
        ]
        numeric = [c for c in schema.columns if c not in texts and c not in schema.levels]
        if numeric:
            scaled = Pipeline([("impute", SimpleImputer()), ("scale", StandardScaler())])
            parts.append(("numeric", scaled, numeric))
        if schema.levels:
            parts.append(("categories", OneHotEncoder(handle_unknown="ignore"), list(schema.levels)))
        if task.is_classification:
            options: dict[str, Any] = {"C": 4.0, "max_iter": 2000, "random_state": seed}
            model = LogisticRegression(**{**options, **model_params})
        else:
            model = Ridge(**{"alpha": 1.0, **model_params})
        estimator = Pipeline([("features", ColumnTransformer(parts)), ("model", model)])
        estimator.fit(schema.apply(X), y)
        return TfidfLogregModel(estimator, schema, task)

    def load(self, model_dir: Path, task: TaskInfo) -> SklearnModel:
        return TfidfLogregModel.load(model_dir, task)

    def test_params(self) -> dict[str, Any]:
        return {"_max_features": 500}


class _StringColumn:
    """Select one column of a frame as a list of strings (missing text -> ''); picklable."""

    def __init__(self, column: str) -> None:
        self.column = column

    def fit(self, X: pd.DataFrame, y: Any = None) -> _StringColumn:
        return self

    def transform(self, X: pd.DataFrame) -> list[str]:
        return X[self.column].fillna("").astype(str).tolist()


ADAPTER = TfidfLogregAdapter()
