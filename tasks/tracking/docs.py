"""The MLflow vocabulary as a markdown table, from tasks/vocabulary.py and the metric registry
(tasks/metric_registry.py). `python -m flows.reference_docs` writes it into
docs/reference/vocabulary.md, and a test keeps that page in step.
"""

from __future__ import annotations

from tasks.evaluations.vocabulary import evaluation_metrics, evaluation_tags
from tasks.metric_registry import all_metrics
from tasks.vocabulary import (
    ALIGNMENT_METRICS,
    COST_METRICS,
    EVALUATION_COMMON_METRICS,
    EVALUATION_TAGS,
    EXECUTION_METRICS,
    EXECUTION_TAGS,
    JOB_PARAMS,
    JOB_TAGS,
    RESULT,
    SERIES_METRICS,
)


def _score_rows() -> list[tuple[str, str, str]]:
    rows = []
    for metric in all_metrics():  # one row per entry of the metric registry
        text = f"score on the test fold ({', '.join(metric.problem_types)}); {metric.direction}"
        rows.append(("metric", metric.name, f"{text}; {metric.definition}" if metric.definition else text))
    rows.append(("metric", RESULT, "the suite metric made higher-is-better (negated when lower is better)"))
    return rows


def vocabulary_markdown() -> str:
    rows = _score_rows()
    rows += [("metric", name, text) for name, text in COST_METRICS.items()]
    rows += [("metric", name, f"{text} (multimodal datasets)") for name, text in ALIGNMENT_METRICS.items()]
    rows += [("metric", name, text) for name, text in EVALUATION_COMMON_METRICS.items()]
    for evaluation, metrics in sorted(evaluation_metrics().items()):
        rows += [("metric", name, f"{text} (`{evaluation}` evaluation)") for name, text in metrics.items()]
    rows += [("step metric", name, text) for name, text in SERIES_METRICS.items()]
    rows += [("param", name, text) for name, text in JOB_PARAMS.items()]
    rows += [("job tag", name, text) for name, text in JOB_TAGS.items()]
    rows += [("job tag", name, text) for name, text in EVALUATION_TAGS.items()]
    for evaluation, tags in sorted(evaluation_tags().items()):
        rows += [("job tag", name, f"{text} (`{evaluation}` evaluation)") for name, text in tags.items()]
    rows += [("execution tag", name, text) for name, text in EXECUTION_TAGS.items()]
    rows += [("execution metric", name, text) for name, text in EXECUTION_METRICS.items()]
    lines = ["| kind | name | meaning |", "|---|---|---|"]
    lines += [f"| {kind} | `{name}` | {text.replace('|', '/')} |" for kind, name, text in rows]
    return "\n".join(lines)
