"""Sensor streams as a modality plug-in: a multimodal card's streams are aligned onto one clock
before the gate (tasks/align.py), its windows group by their label segment in the folds, its
modality combinations share its saved folds, and its alignment report goes with the execution."""

from __future__ import annotations

from pathlib import Path

from tasks.align import align_dataset, report_path
from tasks.modalities.base import ModalityPlugin
from tasks.multimodal.combinations import all_combinations
from tasks.specs import DatasetSpec

# The aligned table's label segment (tasks/multimodal/windows.py SEGMENT): windows of one segment
# come from one recording, so they are near copies of one another and must share a fold.
SEGMENT_COLUMN = "segment"


class MultimodalModality(ModalityPlugin):
    name = "multimodal"
    suite_fields = frozenset({"modality_combinations"})  # read by tasks/multimodal/combinations.py
    verdict_reusable = False  # the gate reads the streams' files under the dataset's folder
    prepares = True

    def default_fold_groups(self, spec: DatasetSpec) -> str | None:
        return SEGMENT_COLUMN if SEGMENT_COLUMN in spec.columns else None

    def shared_folds(self, spec: DatasetSpec) -> list[str]:
        # Every combination is scored on exactly the same rows and folds as the whole.
        return all_combinations(spec)

    def before_gate(self, spec: DatasetSpec) -> list[str]:
        """The streams aligned onto one clock; a failed alignment is one reason, "alignment: ..."."""
        failures = align_dataset(spec).failures
        return [f"alignment: {'; '.join(failures)}"] if failures else []

    def run_artifacts(self, spec: DatasetSpec) -> list[Path]:
        report = report_path(spec)
        return [report] if report.is_file() else []


MODALITY = MultimodalModality()
