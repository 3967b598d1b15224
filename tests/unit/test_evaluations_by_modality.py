"""What the post-job evaluations do per modality (tasks/evaluations/by_modality.py): each of the
project's modalities gets the explainer, corruptions and robustness figures it got when explain and
robustness tested the modality's name themselves; a modality with no entry is treated as a table.
(A plug-in's own entry is proven in test_extending.py; the image layouts in test_robustness_images.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.align import alignment_metrics
from tasks.errors import UserError
from tasks.evaluations.base import EvaluationContext, EvaluationResult, EvaluationSettings
from tasks.evaluations.by_modality import MODALITY_EVALUATIONS, ModalityEvaluations, evaluations_of
from tasks.evaluations.explain import EVALUATION as EXPLAIN
from tasks.evaluations.explain import ExplainSettings, explain_text
from tasks.evaluations.robustness import EVALUATION as ROBUSTNESS
from tasks.evaluations.robustness import RobustnessSettings, given_families
from tasks.evaluations.robustness.corruptions import CORRUPTIONS, FrameFacts
from tasks.frameworks.registry import get_adapter
from tasks.images.layout import card_layout, pixel_table_layout
from tasks.modality import MODALITIES
from tasks.plan import Job
from tasks.specs import Budget, DatasetSpec, load_dataset_spec

BUDGET = Budget(name="by_modality", time_s=10, cores=1, memory_mb=2000)


def test_the_project_modalities_with_an_entry_are_known_modalities() -> None:
    assert MODALITY_EVALUATIONS.names() == ["image", "multimodal", "text"]
    assert set(MODALITY_EVALUATIONS.names()) < set(MODALITIES.names())  # spelt as the cards spell them


@pytest.mark.parametrize("modality", ["tabular", "no_entry_modality"])
def test_a_modality_without_an_entry_is_evaluated_as_a_table(modality: str) -> None:
    entry = evaluations_of(modality)
    assert entry == ModalityEvaluations(modality)
    assert entry.explainer is None and entry.corruption_families is None and not entry.not_applicable
    assert not entry.sensor_streams and entry.images is pixel_table_layout
    assert entry.robustness_info(load_dataset_spec("penguins")) == {}


def test_each_project_modality_changes_only_what_it_changed_before() -> None:
    assert evaluations_of("text") == ModalityEvaluations("text", explainer=explain_text)
    assert evaluations_of("image") == ModalityEvaluations("image", images=card_layout)
    multimodal = evaluations_of("multimodal")
    assert multimodal.sensor_streams and multimodal.explainer is None
    assert multimodal.images is pixel_table_layout and multimodal.corruption_families is None
    assert not multimodal.not_applicable


def test_a_misspelt_corruption_family_is_one_sentence() -> None:
    noise = ModalityEvaluations("signal", corruption_families=frozenset({"noise"}))
    assert given_families(noise) == {"noise"}
    with pytest.raises(UserError, match=r"^the signal modality's MODALITY_EVALUATIONS: unknown corruption "
                                        r"family 'noisy' in corruption_families; known families: category, "):
        given_families(ModalityEvaluations("signal", corruption_families=frozenset({"noise", "noisy"})))


def _context(spec: DatasetSpec, folder: Path, settings: EvaluationSettings) -> EvaluationContext:
    """A context holding the constant baseline fitted on fold 0 (no job folder: the model is set)."""
    folder.mkdir(parents=True)
    job = Job("by_modality", spec.name, "v0", "constant", None, 0, 0, BUDGET, {})
    context = EvaluationContext(job=job, spec=spec, job_dir=folder, folder=folder, settings=settings,
                                cores=[])
    fold = context.fold
    context.__dict__["model"] = get_adapter("constant").fit(
        fold.X_train, fold.y_train, task=fold.task, budget=BUDGET, params={}, workdir=folder, seed=0)
    return context


def test_a_text_dataset_goes_to_the_token_explainer(built_catalog: Path, tmp_path: Path) -> None:
    spec = load_dataset_spec("food_reviews")
    outcome: EvaluationResult = EXPLAIN.run(_context(spec, tmp_path / "explain",
                                                      ExplainSettings(enabled=True, time_s=30)))
    # The text explainer asks the model for its tokens; the baseline offers none.
    assert outcome.status == "not applicable"
    assert outcome.reason.startswith("not explained: constant on text: "), outcome.reason


def test_a_multimodal_dataset_is_corrupted_stream_by_stream_beside_its_alignment(built_catalog: Path,
                                                                                 tmp_path: Path) -> None:
    spec = load_dataset_spec("basic_motions")
    settings = RobustnessSettings(enabled=True, time_s=60, corruptions=["stream_drop", "clock_offset"],
                                  severities=[1.0], draws=1, adversarial_rows=0, boundary_rounds=0,
                                  anomaly_rounds=0, replay=False)
    context = _context(spec, tmp_path / "robustness", settings)
    outcome = ROBUSTNESS.run(context)
    assert outcome.status == "ok", outcome.reason
    assert "robust_stream_drop_auc" in outcome.metrics
    streams = FrameFacts(roles=dict(context.fold.task.column_roles), sensor_streams=True).streams(
        context.fold.X_test)
    assert outcome.info["curves"]["stream_drop"]["cases"] == 1 and len(streams) > 1
    assert outcome.info["not_applicable"]["clock_offset"] == CORRUPTIONS["clock_offset"].unavailable
    assert outcome.info["alignment"] == alignment_metrics(spec.name) != {}
