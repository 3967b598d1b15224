"""The data gate: validate a dataset with Great Expectations 1.x before any framework sees it.

Expectations come from the card (columns present, numeric columns numeric, no constant feature,
target present and not null, >= 2 classes or a finite regression target, the declared row count)
plus the card's own `expectations`. Checks GE has no expectation for are computed with pandas and
reported the same way: every class at least as large as the number of folds, saved folds that
match the data, and no row shared between a fold's train and test parts (leakage).

Each failure is one sentence (dataset, column, expectation, observed value). The result is saved
as JSON and as GE data docs (HTML) under reports/validation/. Great Expectations is slow to import,
so only this module imports it, inside functions.
"""

from __future__ import annotations

import copy
import fcntl
import hashlib
import inspect
import json
import math
import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks import paths
from tasks.data import folds as folds_module
from tasks.data.load import read_typed
from tasks.data.versions import data_version, file_md5
from tasks.errors import UserError
from tasks.forecasting.card import forecast_card
from tasks.forecasting.checks import series_checks
from tasks.modalities.base import modality_of
from tasks.specs import DatasetSpec, list_dataset_specs, load_dataset_spec

NUMERIC_DTYPES = ["int64", "float64", "int32", "float32"]
# Above this many rows the distinct-value checks run on a seeded sample (labelled so in the report).
SAMPLE_ROWS = 1_000_000
GATE_KEY_FIELD = "gate_key"  # in reports/validation/NAME.json: what the verdict was computed from
_FEATURE_ROLES = ("numeric", "categorical", "text")


@dataclass(frozen=True)
class CheckResult:
    """One benchmark check computed in pandas, reported next to GE's results."""

    check: str
    success: bool
    sentence: str = ""  # the failure sentence; empty when it passed
    observed: Any = None
    accepted: bool = False  # failed, and the card's `gate: allow` accepts it knowingly


@dataclass
class ValidationOutcome:
    dataset: str
    ok: bool
    failures: list[str] = field(default_factory=list)  # one sentence per failed expectation
    json_path: Path | None = None
    html_path: Path | None = None  # GE data docs index for this dataset
    data_version: str | None = None
    expectations: int = 0  # how many expectations and checks were evaluated
    bad_input: bool = False  # the card or the file could not be read at all (exit code 2)
    accepted: list[str] = field(default_factory=list)  # failed checks the card accepts (gate.allow)
    reused: bool = False  # the verdict recorded for the same gate key, not computed again


def validation_dir() -> Path:
    return paths.reports_dir() / "validation"


# ------------------------------------------------------------------------ expectations from the card


def _expectation_class(name: str) -> type | None:
    import great_expectations as gx

    camel = name if name[:1].isupper() else "".join(part.title() for part in name.split("_"))
    candidate = getattr(gx.expectations, camel, None)
    return candidate if isinstance(candidate, type) else None


def card_expectations(spec: DatasetSpec, frame: pd.DataFrame) -> list[Any]:
    """The GE expectations a card implies, then the card's own; card mistakes are UserErrors."""
    import great_expectations as gx

    expect = gx.expectations
    suite: list[Any] = []
    for column, role in spec.columns.items():
        suite.append(expect.ExpectColumnToExist(column=column))
        if column not in frame.columns:
            continue  # the existence failure says it all; other checks on it would only echo it
        if role == "numeric":
            suite.append(expect.ExpectColumnValuesToBeInTypeList(column=column, type_list=NUMERIC_DTYPES))
        if role in _FEATURE_ROLES:
            # A constant feature carries no information and breaks some frameworks' preprocessing.
            suite.append(expect.ExpectColumnUniqueValueCountToBeBetween(column=column, min_value=2))
    suite.append(expect.ExpectColumnValuesToNotBeNull(column=spec.target))
    if spec.numeric_target:
        # Finite: GE counts +/-inf as outside any finite range.
        suite.append(
            expect.ExpectColumnValuesToBeBetween(
                column=spec.target, min_value=-np.finfo(float).max, max_value=np.finfo(float).max
            )
        )
    else:
        suite.append(expect.ExpectColumnUniqueValueCountToBeBetween(column=spec.target, min_value=2))
    if spec.rows is not None:
        suite.append(expect.ExpectTableRowCountToEqual(value=spec.rows))
    for index, user in enumerate(spec.expectations):
        where = f"{spec.card_path}: field 'expectations[{index}]'"
        cls = _expectation_class(user.expectation)
        if cls is None:
            raise UserError(
                f"{where}: '{user.expectation}' is not a Great Expectations expectation; use a class "
                "name from great_expectations.expectations such as ExpectColumnValuesToBeBetween."
            )
        try:
            suite.append(cls(**user.kwargs))
        except Exception as exc:  # GE raises pydantic (v1) errors with a multi-line report
            first = str(exc).strip().splitlines()
            reason = (
                " ".join(first[1:3]).strip()
                if len(first) > 1
                else (first[0] if first else type(exc).__name__)
            )
            raise UserError(
                f"{where}: invalid kwargs for {cls.__name__} ({reason}); fix them in the card."
            ) from None
    return suite


# ------------------------------------------------------------------------ benchmark checks (pandas)


def benchmark_checks(spec: DatasetSpec, frame: pd.DataFrame) -> list[CheckResult]:
    """The pandas checks; a failed check the card's `gate: allow` names is marked accepted."""
    results: list[CheckResult] = []
    name = spec.name
    extra = [c for c in frame.columns if c != spec.target and c not in spec.columns]
    if spec.columns:
        results.append(
            CheckResult(
                "columns_declared",
                not extra,
                f"{name}: columns {', '.join(map(str, extra))} are in {spec.file} but not in the card; "
                "give each a role (numeric, categorical, text, id or ignore)."
                if extra
                else "",
                extra,
            )
        )
    try:
        assignment: np.ndarray | UserError = folds_module.load_folds(spec)
    except UserError as exc:
        assignment = exc
    if isinstance(assignment, np.ndarray) and folds_module.is_user_given(spec):
        k = max(len(folds_module.fold_ids(assignment)), 1)
    else:
        k = folds_module.fold_settings(spec).k
    if not spec.numeric_target:
        counts = frame[spec.target].value_counts(dropna=True)
        small = counts[counts < k]
        results.append(
            CheckResult(
                "classes_at_least_folds",
                small.empty,
                f"{name}: target '{spec.target}' class "
                + ", ".join(f"'{label}' has {count} rows" for label, count in small.items())
                + f", fewer than the {k} folds; drop the class or lower `folds` in the card."
                if not small.empty
                else "",
                {str(label): int(count) for label, count in counts.items()},
            )
        )
    if spec.problem_type == "forecasting":
        results.extend(_forecast_checks(spec, frame))
    results.extend(CheckResult(check, passed, sentence, observed)
                   for check, passed, sentence, observed in modality_of(spec).gate_checks(spec, frame))
    results.extend(_fold_checks(spec, frame, k, assignment))
    allowed = set(spec.gate.allow)
    return [
        replace(check, accepted=True) if not check.success and check.check in allowed else check
        for check in results
    ]


def _forecast_checks(spec: DatasetSpec, frame: pd.DataFrame) -> list[CheckResult]:
    """The forecasting card's series checks (tasks/forecasting/checks.py)."""

    return [CheckResult(check, passed, sentence, observed)
            for check, passed, sentence, observed in series_checks(spec.name, frame, forecast_card(spec))]


def _expected_fold_ids(spec: DatasetSpec, k: int, observed: list[int]) -> list[int]:
    if folds_module.is_user_given(spec):
        # The user's ids: 0, 1, ... with none skipped, and -1 for rows that only ever train (a
        # holdout split's training rows, as an OpenML holdout task or an AMLB train/test pair has).
        train_only = [folds_module.TRAIN_ONLY] if folds_module.TRAIN_ONLY in observed else []
        return train_only + list(range(len(observed) - len(train_only)))
    if folds_module.is_forecasting(spec):
        return [folds_module.TRAIN_ONLY, *range(forecast_card(spec).windows)]
    if folds_module.is_time_split(spec):
        return [folds_module.TRAIN_ONLY, *range(k)]
    return list(range(k))


def _fold_checks(
    spec: DatasetSpec, frame: pd.DataFrame, k: int, assignment: np.ndarray | UserError
) -> list[CheckResult]:
    name, path = spec.name, folds_module.folds_path(spec)
    user_given = folds_module.is_user_given(spec)
    fix = (
        "fix the folds in the card's `folds`"
        if user_given
        else "rebuild the folds with `automl-eval datasets build`"
    )
    if isinstance(assignment, UserError):
        return [CheckResult("folds_match_data", False, f"{name}: {assignment}")]
    if len(assignment) != len(frame):
        return [
            CheckResult(
                "folds_match_data",
                False,
                f"{name}: {path.name} assigns {len(assignment)} rows but {spec.file} has {len(frame)}; "
                f"every row needs one fold id: {fix}.",
                len(assignment),
            )
        ]
    observed_folds = sorted(set(np.unique(assignment).tolist()))
    expected = _expected_fold_ids(spec, k, observed_folds)
    folds_ok = observed_folds == expected
    shown = f"ids {expected[0]}..{expected[-1]}" if expected else "ids from 0"
    results = [
        CheckResult(
            "folds_match_data",
            folds_ok,
            ""
            if folds_ok
            else f"{name}: the folds hold ids {observed_folds}, expected contiguous {shown}; {fix}.",
            observed_folds,
        )
    ]
    test_folds = folds_module.fold_ids(assignment)
    if folds_module.is_time_split(spec):
        results.append(_time_order_check(spec, frame, assignment, test_folds))
    if folds_module.is_forecasting(spec):
        # A series' later values repeating earlier ones is no leak: its rows differ in time, and
        # the windows are cut per series by time (tasks/forecasting/windows.py).
        return results
    groups = folds_module.row_groups(frame, spec)
    leaks: dict[int, int] = {}
    example: int | None = None
    for fold in test_folds:
        train_rows, test_rows = folds_module.split_rows(spec, assignment, fold)
        shared = np.isin(groups[test_rows], groups[train_rows], kind="table")
        if shared.any():
            leaks[fold] = int(shared.sum())
            if example is None:
                example = int(test_rows[shared][0])
    sentence = ""
    if leaks:
        assert example is not None  # set with the first leak
        listed = ", ".join(f"fold {fold}: {count}" for fold, count in leaks.items())
        card = spec.card_path or "the card"
        allow = f"`gate: {{allow: [no_train_test_duplicates]}}` in {card}"
        task = spec.source.openml_task
        sentence = (
            # OpenML's split is the benchmark's own (AMLB's diamonds has such rows): changing it
            # would no longer be that task, so the only fix offered is to accept it knowingly.
            f"{name}: OpenML task {task}'s split puts identical rows on both sides of a fold ({listed} "
            f"test rows; first at data row {example + 1}), which leaks the answer; to run the task as "
            f"OpenML splits it, accept this knowingly with {allow}."
            if task is not None
            else f"{name}: duplicate rows shared between a fold's train and test part ({listed} test "
            f"rows; first at data row {example + 1}) leak the answer; {fix}, drop the duplicates, or "
            f"accept it knowingly with {allow}."
        )
    results.append(CheckResult("no_train_test_duplicates", not leaks, sentence, leaks))
    return results


def _time_order_check(
    spec: DatasetSpec, frame: pd.DataFrame, assignment: np.ndarray, test_folds: list[int]
) -> CheckResult:
    """A time split: no test row of a fold is earlier than one of its training rows."""
    times = folds_module.time_values(frame, spec)
    early: dict[int, int] = {}
    for fold in test_folds:
        train_rows, test_rows = folds_module.split_rows(spec, assignment, fold)
        if len(train_rows) and len(test_rows):
            latest_train = times.iloc[train_rows].max()
            before = int((times.iloc[test_rows] < latest_train).sum())
            if before:
                early[fold] = before
    listed = ", ".join(f"fold {fold}: {count}" for fold, count in early.items())
    return CheckResult(
        "time_order",
        not early,
        f"{spec.name}: test rows earlier than their fold's latest training row ({listed}); rebuild the "
        "folds with `automl-eval datasets build`."
        if early
        else "",
        early,
    )


# ------------------------------------------------------------------------ running GE


def _describe(dataset: str, result: Any) -> str:
    """One sentence for a failed GE expectation result: column, expectation, observed value."""
    config = result.expectation_config
    kwargs = {k: v for k, v in config.kwargs.items() if k not in ("batch_id", "column", "result_format")}
    column = config.kwargs.get("column")
    subject = f"column '{column}'" if column is not None else "table"
    info = result.result or {}
    if result.exception_info and result.exception_info.get("raised_exception"):
        observed = f"error: {str(result.exception_info.get('exception_message')).splitlines()[0]}"
    elif "observed_value" in info:
        observed = f"observed {info['observed_value']!r}"
    elif "unexpected_count" in info:
        sample = ", ".join(repr(v) for v in (info.get("partial_unexpected_list") or [])[:3])
        total = info.get("element_count")
        observed = f"observed {info['unexpected_count']} unexpected of {total} values" + (
            f", e.g. {sample}" if sample else ""
        )
    else:
        observed = (
            "observed: column missing" if config.type == "expect_column_to_exist" else "observed: failed"
        )
    wanted = ", ".join(f"{k}={_short(v)}" for k, v in kwargs.items())
    return f"{dataset}: {subject} failed {config.type}{f' ({wanted})' if wanted else ''}: {observed}."


def _short(value: Any) -> str:
    if isinstance(value, float) and (math.isinf(value) or abs(value) > 1e300):
        return "finite"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass
class GateRun:
    """What Great Expectations said: every result, and which were computed on a sample."""

    results: list[Any]
    count: int
    documents: dict[str, Any]  # the JSON of each GE validation run, by name
    sampled: list[str] = field(default_factory=list)  # "column 'x': expectation (on N of M rows)"


def _is_sampled_check(expectation: Any) -> bool:
    """"At least 2 distinct values" (a constant feature, a single class): any sample that shows
    two values proves it for the whole column; only a sample that shows one needs every row."""
    import great_expectations as gx

    return (
        isinstance(expectation, gx.expectations.ExpectColumnUniqueValueCountToBeBetween)
        and expectation.max_value is None
    )


def _run_great_expectations(spec: DatasetSpec, frame: pd.DataFrame, docs_dir: Path) -> GateRun:
    """Every expectation on every row, except on a table of more than SAMPLE_ROWS rows: there the
    distinct-value checks (a hash table of every value per column: minutes at 10 M rows) run on a
    seeded sample first, and on every row only where the sample shows a single value."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    expectations = card_expectations(spec, frame)
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    context.add_data_docs_site(
        site_name="validation",
        site_config={
            "class_name": "SiteBuilder",
            "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir)},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
        },
    )
    asset = context.data_sources.add_pandas(name="datasets").add_dataframe_asset(name=spec.name)
    batch_definition = asset.add_batch_definition_whole_dataframe("whole")

    def run(name: str, suite_expectations: list[Any], data: pd.DataFrame) -> Any:
        suite = context.suites.add(gx.ExpectationSuite(name=name, expectations=suite_expectations))
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=name, data=batch_definition, suite=suite)
        )
        checkpoint = context.checkpoints.add(
            gx.Checkpoint(
                name=f"{name}-gate",
                validation_definitions=[definition],
                actions=[gx.checkpoint.UpdateDataDocsAction(name="data_docs")],
                result_format={"result_format": "SUMMARY"},
            )
        )
        (validation_result,) = checkpoint.run(batch_parameters={"dataframe": data}).run_results.values()
        return validation_result

    if len(frame) <= SAMPLE_ROWS:
        whole = run(spec.name, expectations, frame)
        return GateRun(list(whole.results), len(expectations), {"whole": whole.to_json_dict()})
    on_sample = [e for e in expectations if _is_sampled_check(e)]
    whole = run(spec.name, [e for e in expectations if not _is_sampled_check(e)], frame)
    sample = frame.sample(n=SAMPLE_ROWS, random_state=0)
    sampled = run(f"{spec.name}-sampled", on_sample, sample)
    del sample
    documents = {"whole": whole.to_json_dict(), "sampled": sampled.to_json_dict()}
    results, labels = list(whole.results), []
    unproven = [r for r in sampled.results if not r.success]
    for result in sampled.results:
        if result.success:
            results.append(result)
            column = result.expectation_config.kwargs.get("column")
            labels.append(
                f"column '{column}': {result.expectation_config.type} "
                f"(on a seeded sample of {SAMPLE_ROWS:,} of {len(frame):,} rows)"
            )
    if unproven:
        rerun = []
        for result in unproven:
            expectation = copy.copy(result.expectation_config.to_domain_obj())
            expectation.id = None  # a fresh copy: GE refuses one that belongs to another suite
            rerun.append(expectation)
        again = run(f"{spec.name}-every-row", rerun, frame)
        results.extend(again.results)
        documents["every_row"] = again.to_json_dict()
    return GateRun(results, len(expectations), documents, labels)


def _write_json(outcome: ValidationOutcome, payload: dict[str, Any]) -> Path:
    path = validation_dir() / f"{outcome.dataset}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    summary = {
        k: (str(v) if isinstance(v, Path) else v)
        for k, v in asdict(outcome).items()
        if k not in ("json_path", "reused")
    }
    document = {**summary, "validated_at": datetime.now(UTC).isoformat(timespec="seconds"), **payload}
    path.write_text(json.dumps(document, indent=2, default=str) + "\n", encoding="utf-8")
    return path


@contextmanager
def _held(name: str) -> Iterator[None]:
    """One writer at a time of reports/validation/NAME*: two suites that start at once on the same
    dataset would otherwise delete and rewrite each other's data docs mid-build."""
    lock_path = validation_dir() / f".{name}.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def validate_dataset(spec: DatasetSpec | str) -> ValidationOutcome:
    """Validate one dataset; never raises for a bad file or card (ok=False, bad_input=True instead).

    A verdict is reused when nothing it depends on has changed since it was written (see
    `gate_key`): the gate runs once per data version, not once per command that asks for it.
    """
    if isinstance(spec, str):
        spec = load_dataset_spec(spec)
    with _held(spec.name):
        key = gate_key(spec)
        reused = _recorded_verdict(spec, key) if key else None
        return reused if reused is not None else _validate(spec, key)


# The modules whose code decides a verdict: a change to any of them is a new gate.
_GATE_MODULES = (__file__, folds_module.__file__, read_typed.__code__.co_filename,
                 data_version.__code__.co_filename, series_checks.__code__.co_filename,
                 forecast_card.__code__.co_filename)


def gate_key(spec: DatasetSpec) -> str | None:
    """A digest of everything the dataset's verdict depends on: the data file, its saved folds, the
    card, params.yaml (the fold parameters), the gate's own code, the module of the card's modality
    plug-in and Great Expectations' version.
    None when the verdict cannot be keyed (files missing, or a modality whose gate reads files of its
    own: an image or a multimodal card's verdict is always computed afresh)."""
    modality = modality_of(spec)
    if not modality.verdict_reusable or not spec.card_path:
        return None
    # The modality's plug-in decides checks and fold identity too (it may live outside the project).
    inputs = [spec.path, folds_module.folds_path(spec), Path(spec.card_path),
              paths.project_root() / "params.yaml", *map(Path, _GATE_MODULES),
              Path(inspect.getfile(type(modality)))]
    if not all(path.is_file() for path in inputs):
        return None
    digest = hashlib.sha256(metadata.version("great-expectations").encode())
    for path in inputs:
        digest.update(file_md5(path).encode())
    return digest.hexdigest()


def _recorded_verdict(spec: DatasetSpec, key: str) -> ValidationOutcome | None:
    """The verdict recorded in reports/validation/NAME.json under the same gate key, if any."""
    path = validation_dir() / f"{spec.name}.json"
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict) or recorded.get(GATE_KEY_FIELD) != key:
        return None
    html = recorded.get("html_path")
    return ValidationOutcome(
        dataset=spec.name, ok=bool(recorded.get("ok")), failures=list(recorded.get("failures", [])),
        json_path=path, html_path=Path(html) if html and Path(html).is_file() else None,
        data_version=recorded.get("data_version"), expectations=int(recorded.get("expectations", 0)),
        bad_input=bool(recorded.get("bad_input")), accepted=list(recorded.get("accepted", [])),
        reused=True,
    )


def _validate(spec: DatasetSpec, key: str | None = None) -> ValidationOutcome:
    outcome = ValidationOutcome(dataset=spec.name, ok=False)
    docs_dir = validation_dir() / spec.name
    shutil.rmtree(docs_dir, ignore_errors=True)  # data docs of this run only
    try:
        frame = read_typed(spec, require_columns=False)
        outcome.data_version = data_version(spec)
        # What Great Expectations sees is the modality's to say (an image column: its content hashes).
        gate = _run_great_expectations(spec, modality_of(spec).for_expectations(spec, frame), docs_dir)
        checks = benchmark_checks(spec, frame)
    except UserError as exc:
        outcome.failures, outcome.bad_input = [f"{spec.name}: {exc}"], True
        outcome.json_path = _write_json(outcome, {})  # unkeyed: a bad input is checked again next time
        return outcome
    outcome.failures = [_describe(spec.name, r) for r in gate.results if not r.success]
    outcome.failures += [check.sentence for check in checks if not check.success and not check.accepted]
    outcome.accepted = [
        f"{check.sentence} (check '{check.check}' accepted by the card: gate.allow)"
        for check in checks
        if check.accepted
    ]
    outcome.expectations = gate.count + len(checks)
    outcome.ok = not outcome.failures
    index = docs_dir / "index.html"
    outcome.html_path = index if index.is_file() else None
    outcome.json_path = _write_json(
        outcome,
        {
            **({GATE_KEY_FIELD: key} if key else {}),
            "benchmark_checks": [asdict(check) for check in checks],
            **(
                {"great_expectations": gate.documents["whole"]}
                if len(gate.documents) == 1
                else {"great_expectations": gate.documents, "sampled_checks": gate.sampled}
            ),
        },
    )
    return outcome


def summary_path() -> Path:
    return validation_dir() / "summary.json"


def write_summary(outcomes: list[ValidationOutcome]) -> Path:
    """reports/validation/summary.json: verdict per dataset, deterministic (no times, no paths).

    It is the output of dvc.yaml's validate stage: the same data and cards give the same bytes,
    so `dvc status` stays clean after a re-run. Datasets not validated this time keep their entry;
    entries whose card is gone are dropped.
    """
    with _held("summary.json"):
        return _merge_summary(outcomes)


def _merge_summary(outcomes: list[ValidationOutcome]) -> Path:
    path = summary_path()
    summary: dict[str, Any] = {}
    if path.is_file():
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            summary = {}
    known = {p.stem for p in paths.dataset_cards_dir().glob("*.yaml")}
    summary = {name: entry for name, entry in summary.items() if name in known}
    for outcome in outcomes:
        summary[outcome.dataset] = {
            "ok": outcome.ok,
            "data_version": outcome.data_version,
            "failures": outcome.failures,
            **({"accepted": outcome.accepted} if outcome.accepted else {}),
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def validate_all(names: Iterable[str] | None = None) -> list[ValidationOutcome]:
    """Validate the named datasets (all cards when none): one failure never stops the others."""
    names = list(names or [])
    specs = [load_dataset_spec(name) for name in names] if names else list_dataset_specs()
    outcomes = [validate_dataset(spec) for spec in specs]
    write_summary(outcomes)
    return outcomes
