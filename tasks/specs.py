"""The nouns a user writes in YAML: dataset cards, budgets, suites.

Every loader turns a user mistake (missing file, bad YAML, wrong field, unknown name) into a
``UserError`` that names the file and the field, so the CLI can print one sentence and exit 2.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from tasks import paths
from tasks.adaptive import DEFAULT_DECISIONS, Decision
from tasks.errors import UserError
from tasks.metric_registry import PROBLEM_TYPES, check_metric, default_metric
from tasks.modality import MODALITIES, TABULAR, block_owners, check_modality, suite_fields
from tasks.multimodal.combinations import combination_spec, expand_datasets
from tasks.plugins import did_you_mean

# `forecasting`: many series, each forecast `horizon` steps ahead (its card's `forecast:` block,
# tasks/forecasting/card.py, says which columns are the series id, the time and the value).
ProblemType = Literal["binary", "multiclass", "regression", "forecasting"]
# A column's role in a card: how frameworks should treat it. The target is named by `target`.
# `image`: encoded images (PNG bytes) or paths of image files (tasks/images/card.py).
ColumnRole = Literal["numeric", "categorical", "text", "image", "id", "ignore"]

# Problem types whose target is a number (typed float; no classes, no stratified folds).
NUMERIC_TARGETS = frozenset({"regression", "forecasting"})
# Each problem type's metric when a card names none (the metric registry's `default_for`).
DEFAULT_METRIC: dict[str, str] = {kind: default_metric(kind) for kind in PROBLEM_TYPES}
# A name that becomes part of a path (cards, suites, reports): letters, digits, `_` and `-`,
# optionally a multimodal card's `NAME[stream+stream]`. Nothing like `..` or `/` gets through.
PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*(\[[A-Za-z0-9_+-]+\])?")
# A framework version as a suite names it (`hgb@1.7.2`): it becomes part of a folder name
# (.venvs/NAME-VERSION), so only letters, digits, '.', '+' and '-', starting with a letter or digit.
VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+-]*")
# A suite's OpenML entries (tasks/data/openml_cards.py): a task (`openml/t/31`, or the bare id 31)
# stands for its generated card `openml_31`; an OpenML suite (`openml/s/271`) for every task it lists,
# as resolved once into specs/openml_suites/271.yaml (committed, so a suite loads without OpenML).
OPENML_TASK_ENTRY = re.compile(r"openml/t/([1-9][0-9]*)")
OPENML_SUITE_ENTRY = re.compile(r"openml/s/([1-9][0-9]*)")
# Gate checks a card may accept knowingly (tasks/data/validate.py runs and reports them anyway).
AcceptableCheck = Literal["no_train_test_duplicates", "classes_at_least_folds", "columns_declared"]
ACCEPTABLE_CHECKS: tuple[str, ...] = get_args(AcceptableCheck)


def is_plain_name(value: str) -> bool:
    return isinstance(value, str) and PLAIN_NAME.fullmatch(value) is not None


def _plain_name(value: str) -> str:
    if not is_plain_name(value):
        raise ValueError(
            f"{value!r} is not a plain name; use letters, digits, '_' and '-' only (no '/' or '..')"
        )
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceSpec(_Strict):
    """Where a catalog dataset comes from: a package that ships it (no download at run time)."""

    package: str
    call: str  # the human-readable call, e.g. "sklearn.datasets.load_breast_cancer(as_frame=True)"
    loader: str | None = None  # key in tasks.data sources registry; None for user-provided files
    # An OpenML task id (tasks/data/openml_cards.py): `source: {openml_task: N}` alone is a stub card
    # that `automl-eval datasets build` completes from the task before anything reads it.
    openml_task: int | None = Field(default=None, gt=0)
    licence: str = "unknown"
    citation: str = ""


class ExpectationSpec(_Strict):
    """A user expectation: a Great Expectations 1.x expectation class name plus its kwargs."""

    expectation: str  # e.g. "ExpectColumnValuesToBeBetween" or "expect_column_values_to_be_between"
    kwargs: dict[str, Any] = Field(default_factory=dict)


class FoldsSpec(_Strict):
    """A card's `folds:` mapping: the user's own split, or how the tool computes it.

    - `file: NAME.myfolds.csv`: one fold id per row (a single column), kept as it is;
    - `column: split_col`: the fold ids are a column of the data;
    - `strategy: time, column: date, k: 5`: expanding window, no test row before its training rows;
    - `strategy: group, column: customer_id`: rows sharing a value share a fold;
    - `strategy: random` (the default), with `k` and `seed` from params.yaml unless given here.
    """

    strategy: Literal["random", "time", "group"] | None = None
    file: str | None = None
    column: str | None = None
    k: int | None = Field(default=None, ge=2)
    seed: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _consistent(self) -> FoldsSpec:
        if self.file is not None and (self.strategy or self.column or self.k or self.seed is not None):
            raise ValueError(
                "'file' names the user's own folds; give it alone (no strategy, column, k or seed)"
            )
        if self.strategy in ("time", "group") and not self.column:
            raise ValueError(f"strategy '{self.strategy}' needs 'column' (the {self.strategy} column)")
        if self.file is not None:
            _inside_datasets(self.file)
        return self

    @property
    def user_given(self) -> bool:
        """Folds the user wrote (a file or a column): `build` never computes or overwrites them."""
        return self.file is not None or (self.column is not None and self.strategy is None)


class GateSpec(_Strict):
    """A card's `gate:` block: `allow: [check, ...]` accepts named gate checks knowingly."""

    allow: list[AcceptableCheck] = Field(default_factory=list)


def _inside_datasets(file: str) -> str:
    """A card's file names a path inside datasets/: relative, and no `..` out of it."""
    # Lexical, not resolved: a symlink the user placed in datasets/ (a DVC cache link, a big disk)
    # is theirs to make; a card's text alone never leads outside.
    normal = os.path.normpath(file)
    if Path(file).is_absolute() or normal == ".." or normal.startswith(".." + os.sep) or normal == ".":
        raise ValueError(
            f"{file!r} is outside datasets/; give a path relative to datasets/, such as 'NAME.csv'"
        )
    return file


class DatasetSpec(_Strict):
    """A dataset card, specs/datasets/NAME.yaml."""

    name: str
    description: str = ""
    source: SourceSpec
    file: str  # relative to datasets/
    target: str
    problem_type: ProblemType
    metric: str | None = None
    # A modality plug-in's name (tasks/modality.py): the table, text, multimodal, image, or one a
    # plug-in package adds. An unknown one is refused, naming the known ones.
    modality: str = TABULAR
    rows: int | None = None  # declared row count, checked by the gate
    columns: dict[str, ColumnRole] = Field(default_factory=dict)
    expectations: list[ExpectationSpec] = Field(default_factory=list)
    # How the outer folds are made: a number (K random folds) or a FoldsSpec mapping.
    folds: FoldsSpec | None = None
    gate: GateSpec = Field(default_factory=GateSpec)
    # A column whose equal values share a fold (tasks/data/folds.py), when `folds:` does not say it.
    fold_groups: str | None = None
    # The blocks of the modalities. Each is declared here, so that any other key is refused, and
    # checked in detail by its modality's module, a layer above this one:
    forecast: dict[str, Any] | None = None  # problem_type forecasting: tasks/forecasting/card.py
    image: dict[str, Any] | None = None  # modality image: tasks/images/card.py
    pixels_of: str | None = None  # a pixel table's image card: tasks/images/card.py
    # modality multimodal: tasks/multimodal/cards.py
    streams: dict[str, Any] | None = None
    labels: dict[str, Any] | None = None
    alignment: dict[str, Any] | None = None
    # A plug-in modality's own blocks (its `card_blocks`), checked by their models when the card is
    # read and kept as plain data (a card crosses processes as JSON).
    modality_blocks: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # Filled for a combination `NAME[STREAM+STREAM]` (tasks/multimodal/combinations.py): its streams.
    modality_combination: str | None = None
    card_path: str | None = None  # filled by the loader, for error messages

    _name_is_plain = field_validator("name")(_plain_name)
    _file_is_inside = field_validator("file")(_inside_datasets)

    @field_validator("modality")
    @classmethod
    def _known_modality(cls, value: str) -> str:
        try:
            check_modality(value)
        except UserError as exc:
            raise ValueError(str(exc).rstrip(".")) from None  # named with the card's file by pydantic
        return value

    @field_validator("folds", mode="before")
    @classmethod
    def _folds_number(cls, value: Any) -> Any:
        # `folds: 5` is `folds: {k: 5}`; a mapping's mistakes then name their own field (folds.file).
        return {"k": value} if isinstance(value, int) and not isinstance(value, bool) else value

    @model_validator(mode="after")
    def _default_metric(self) -> DatasetSpec:
        if self.metric is None:
            object.__setattr__(self, "metric", DEFAULT_METRIC[self.problem_type])
        try:
            check_metric(self.problem_type, str(self.metric))
        except UserError as exc:
            raise ValueError(str(exc)) from None  # named with the card's file and field by pydantic
        return self

    @property
    def path(self) -> Path:
        return paths.datasets_dir() / self.file

    @property
    def numeric_target(self) -> bool:
        return self.problem_type in NUMERIC_TARGETS

    @property
    def features(self) -> list[str]:
        return [c for c, role in self.columns.items() if role in ("numeric", "categorical", "text", "image")]

    @property
    def folds_spec(self) -> FoldsSpec:
        """`folds:` as a mapping (a bare number is `{k: N}`)."""
        return self.folds if self.folds is not None else FoldsSpec()


class Budget(_Strict):
    """The same enforced limits for every framework in a suite (AMLB's "constraint")."""

    name: str
    time_s: int = Field(gt=0)
    cores: int = Field(gt=0)
    memory_mb: int = Field(gt=0)
    gpus: int = Field(default=0, ge=0)


class FrameworkRef(_Strict):
    """A framework as a suite names it: `name`, `name:variant`, `name@version`, `name:variant@version`,
    or a mapping with params.

    Params whose name starts with `_` are for the adapter; the rest pass to the framework. A version
    runs the job in that framework's own environment (tasks/frameworks/environments.py); without one
    the job runs in the main environment, as before.
    """

    name: str
    variant: str | None = None
    version: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    # Run it where it can run: where its framework (or its environment) is missing or does not import,
    # its jobs are recorded as skipped with the sentence why, and the suite's other frameworks run.
    # Off (the default): such a framework refuses the whole suite before any job, in one sentence.
    where_available: bool = False

    @field_validator("version")
    @classmethod
    def _plain_version(cls, value: str | None) -> str | None:
        if value is not None and not is_plain_version(value):
            raise ValueError(f"{value!r} is not a version; use letters, digits, '.', '+' and '-' only, "
                             "e.g. hgb@1.7.2")
        return value

    @property
    def id(self) -> str:
        return framework_id(self.name, self.variant, self.version)

    @classmethod
    def parse(cls, entry: str | dict[str, Any]) -> FrameworkRef:
        return cls(**cls.fields_of(entry))

    @staticmethod
    def fields_of(entry: str | dict[str, Any]) -> dict[str, Any]:
        """A suite entry as the model's fields: `name:variant@version` split into its parts."""
        if isinstance(entry, str):
            return {key: value for key, value in split_framework_id(entry).items() if value is not None}
        if isinstance(entry, dict) and any(mark in str(entry.get("name", "")) for mark in ":@"):
            parts = split_framework_id(str(entry["name"]))
            given = {key: value for key, value in parts.items() if value is not None and key not in entry}
            return {**entry, **given, "name": parts["name"]}
        return entry


def is_plain_version(value: str) -> bool:
    return isinstance(value, str) and VERSION.fullmatch(value) is not None


def framework_id(name: str, variant: str | None, version: str | None) -> str:
    """`name[:variant][@version]`: how suites, job labels and the `framework` tag name a framework."""
    return name + (f":{variant}" if variant else "") + (f"@{version}" if version else "")


def split_framework_id(text: str) -> dict[str, str | None]:
    """`name[:variant][@version]` -> its parts (None where absent)."""
    head, at, version = text.partition("@")
    name, _, variant = head.partition(":")
    # `hgb@` keeps its empty version, which the version check then refuses.
    return {"name": name, "variant": variant or None, "version": version if at else None}


class AttributionSettings(_Strict):
    """`attribution:` of a suite: when the nightly regresses, how many jobs may go to naming the
    cause by experiment (flows/explain_regression.py; docs/attribution.md)."""

    enabled: bool = True
    max_jobs: int = Field(default=40, gt=0)  # jobs over all the mixes together
    max_factors: int = Field(default=4, gt=0)  # every mix (2^k) up to k factors, else one at a time


class ScalingSettings(_Strict):
    """`scaling:` of a suite: resource steps for the same budget time (tasks/plan.py expands every
    job into one job per step; the report's Scaling section compares them). Each list names the
    cores or GPUs of a step; a missing list keeps the budget's. Steps above the host are capped at
    planning, with a note, not refused."""

    cores: list[int] | None = Field(default=None, min_length=1)
    gpus: list[int] | None = Field(default=None, min_length=1)

    @field_validator("cores")
    @classmethod
    def _whole_cores(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and any(count < 1 for count in value):
            raise ValueError(f"a step of {min(value)} cores cannot run; give steps of 1 core or more, "
                             "e.g. [1, 2, 4, 8]")
        return value

    @field_validator("gpus")
    @classmethod
    def _no_negative_gpus(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and any(count < 0 for count in value):
            raise ValueError(f"a step of {min(value)} GPUs is negative; give steps of 0 GPUs or more, "
                             "e.g. [0, 1]")
        return value

    @model_validator(mode="after")
    def _some_steps(self) -> ScalingSettings:
        if self.cores is None and self.gpus is None:
            raise ValueError("name the steps: cores, gpus or both, e.g. `scaling: {cores: [1, 2, 4]}`")
        return self


class AdaptiveSettings(_Strict):
    """`adaptive:` of a suite: run the folds in rounds and stop each comparison once it is settled at
    `confidence` (tasks/adaptive.py, the procedure; docs/suites.md, "Adaptive benchmarking")."""

    confidence: float = 0.95  # each decision is wrong with probability at most 1 - confidence
    min_folds: int = Field(default=2, ge=2)  # the first round: every cell runs these folds
    max_folds: int | None = Field(default=None, ge=2)  # the last round; None: the suite's `folds`
    rope: float = Field(default=0.0, ge=0)  # differences of `result` within +-rope count as equal
    futility: bool = False  # also stop pairs that max_folds could not settle (they end open)
    decide: list[Decision] = Field(default_factory=lambda: list(DEFAULT_DECISIONS), min_length=1)
    # decide `top_k`: how many frameworks the top across datasets holds (checked even when left out)
    top_k: int | None = Field(default=None, validate_default=True)

    @field_validator("confidence")
    @classmethod
    def _between_half_and_one(cls, value: float) -> float:
        if not 0.5 < value < 1.0:
            raise ValueError(f"{value} is outside (0.5, 1); give e.g. 0.95")
        return value

    @field_validator("top_k")
    @classmethod
    def _k_with_top_k(cls, value: int | None, info: ValidationInfo) -> int | None:
        if ("top_k" in info.data.get("decide", ())) != (value is not None):
            raise ValueError("a k here and `top_k` in `decide` go together, e.g. "
                             "`decide: [pairwise, top_k]` with `top_k: 3`; give both or neither")
        return value


class Suite(_Strict):
    """specs/suites/NAME.yaml: datasets x frameworks x folds x seeds under one budget.

    A block named after a post-job evaluation (`serving:`, `robustness:`, ...) is that
    evaluation's settings, validated by its own model (tasks/evaluations/); `evaluations` holds them.
    """

    model_config = ConfigDict(extra="allow", frozen=True)  # modalities may add their own fields

    name: str
    description: str = ""
    datasets: list[str] = Field(min_length=1)
    frameworks: list[FrameworkRef] = Field(min_length=1)
    folds: int = Field(default=1, gt=0)  # the first N of each dataset's saved folds
    seeds: list[int] = Field(default_factory=lambda: [0])
    budget: str = "test"
    evaluations: dict[str, Any] = Field(default_factory=dict)  # name -> its EvaluationSettings
    attribution: AttributionSettings = Field(default_factory=AttributionSettings)
    scaling: ScalingSettings | None = None  # resource steps for the same budget time (tasks/plan.py)
    adaptive: AdaptiveSettings | None = None  # folds in rounds, only where a decision is open

    def evaluation_blocks(self) -> dict[str, dict[str, Any]]:
        """The enabled evaluations' settings as plain data (what crosses to the job's process)."""
        return {name: block.model_dump() for name, block in self.evaluations.items() if block.enabled}

    _name_is_plain = field_validator("name")(_plain_name)

    @field_validator("frameworks", mode="before")
    @classmethod
    def _parse_frameworks(cls, value: Any) -> Any:
        if isinstance(value, list):
            # Fields, not models: a bad part is then reported at its place (frameworks.0.version).
            return [FrameworkRef.fields_of(v) if isinstance(v, (str, dict)) else v for v in value]
        return value

    @field_validator("datasets", mode="before")
    @classmethod
    def _task_ids(cls, value: Any) -> Any:
        # A bare integer is an OpenML task id: `datasets: [31, 3917]` is `[openml/t/31, openml/t/3917]`.
        if isinstance(value, list):
            return [f"openml/t/{v}" if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
        return value

    @field_validator("seeds", mode="before")
    @classmethod
    def _seed_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, int) else value


# ---------------------------------------------------------------- loading, with clear errors


def read_yaml(path: Path) -> Any:
    """Parse a YAML file or raise one sentence naming the file (and the line, when known)."""
    if not path.is_file():
        raise UserError(f"{path}: file not found.")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise UserError(f"{path}:{where}: malformed YAML ({problem}); fix the syntax there.") from None


def describe_validation_error(path: Path, exc: ValidationError, within: str = "",
                              known: Iterable[str] = ()) -> str:
    """One sentence for the first pydantic error: file, field (under the block `within`), what is wrong.
    `known`: the top-level field names, to suggest the closest for a misspelt one."""
    first = exc.errors()[0]
    field = ".".join([within] * bool(within) + [str(p) for p in first["loc"]]) or "(top level)"
    kind = first["type"]
    if kind == "extra_forbidden":
        closest = did_you_mean(str(first["loc"][-1]), known) if len(first["loc"]) == 1 else ""
        if closest:
            return f"{path}: unknown field '{field}'{closest} Rename it, or remove it."
        return f"{path}: unknown field '{field}'; remove it or check its spelling."
    if kind == "missing":
        return f"{path}: field '{field}' is required; add it."
    message = first["msg"]
    return f"{path}: field '{field}': {message}{'' if message.endswith('?') else '.'}"


def _mapping(path: Path) -> dict[str, Any]:
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a YAML mapping of fields at the top level.")
    return data


def _available(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.yaml"))


def openml_card_name(task_id: int) -> str:
    """The card an OpenML task stands for in a suite (written by `automl-eval datasets build`)."""
    return f"openml_{task_id}"


def openml_suite_file(suite_id: int) -> Path:
    """The task ids of OpenML suite `suite_id`, as `automl-eval datasets build` resolved them."""
    return paths.specs_dir() / "openml_suites" / f"{suite_id}.yaml"


def openml_suite_tasks(suite_id: int) -> list[int] | None:
    """The resolved task ids of an OpenML suite, or None before `automl-eval datasets build` resolved it."""
    path = openml_suite_file(suite_id)
    if not path.is_file():
        return None
    data = _mapping(path)
    tasks = data.get("tasks")
    if not isinstance(tasks, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tasks):
        raise UserError(f"{path}: field 'tasks' must be a list of OpenML task ids; rebuild it with "
                        "`automl-eval datasets build`.")
    return tasks


def openml_entries(datasets: list[str]) -> tuple[list[int], list[int]]:
    """(task ids, OpenML suite ids) a suite's `datasets` name, in order, without repeats."""
    tasks: list[int] = []
    suites: list[int] = []
    for entry in datasets:
        for pattern, found in ((OPENML_TASK_ENTRY, tasks), (OPENML_SUITE_ENTRY, suites)):
            match = pattern.fullmatch(entry)
            if match and int(match.group(1)) not in found:
                found.append(int(match.group(1)))
    return tasks, suites


def _expand_openml(path: Path, datasets: list[str]) -> list[str]:
    """A suite's datasets with each OpenML entry replaced by the card(s) it stands for."""
    expanded: list[str] = []
    for entry in datasets:
        task, suite = OPENML_TASK_ENTRY.fullmatch(entry), OPENML_SUITE_ENTRY.fullmatch(entry)
        if suite:
            tasks = openml_suite_tasks(int(suite.group(1)))
            if tasks is None:
                raise UserError(f"{path}: field 'datasets': OpenML suite {entry} is not resolved yet; run "
                                "`automl-eval datasets build` where OpenML can be reached, then commit "
                                f"{openml_suite_file(int(suite.group(1))).relative_to(paths.project_root())}.")
            names = [openml_card_name(task_id) for task_id in tasks]
        elif entry.startswith("openml/") and not task:
            raise UserError(f"{path}: field 'datasets': {entry!r} is not an OpenML entry; write openml/t/ID "
                            "for a task or openml/s/ID for a suite.")
        else:
            names = [openml_card_name(int(task.group(1)))] if task else [entry]
        expanded.extend(name for name in names if name not in expanded)
    return expanded


def is_plain_framework(text: str) -> bool:
    """`name[:variant][@version]` with a plain name and variant and a plain version."""
    parts = split_framework_id(text)
    names = [part for part in (parts["name"], parts["variant"]) if part is not None]
    version = parts["version"]
    return (all(is_plain_name(part) for part in names) and text.count("@") <= 1
            and (version is None or is_plain_version(version)))


def check_plain_names(where: str, **fields: str | list[str] | None) -> None:
    """Form or CLI values that name files (suite, budget, datasets, frameworks) must be plain names.

    A framework may carry a variant and a version (`autogluon:best_quality@1.5.0`): its name and
    variant must be plain names, its version a plain version. Raises one sentence naming the field
    before anything is read or written.
    """
    for field, value in fields.items():
        for item in [value] if isinstance(value, str) else list(value or []):
            framework = field == "frameworks"
            if not (is_plain_framework(str(item)) if framework else is_plain_name(str(item))):
                versions = ", and a version of letters, digits, '.', '+' and '-' (hgb@1.7.2)"
                raise UserError(
                    f"{where}: field '{field}': {item!r} is not a plain name; use letters, digits, "
                    f"'_' and '-' only (no '/' or '..'){versions if framework else ''}."
                )


def _refuse_unplain(kind: str, name: str) -> None:
    if not is_plain_name(name):
        raise UserError(
            f"{kind} name {name!r} is not a plain name; use letters, digits, '_' and '-' only "
            f"(the {kind}'s file is specs/{kind}s/NAME.yaml)."
        )


def load_dataset_spec(name_or_path: str | Path) -> DatasetSpec:
    """Load a card by name (specs/datasets/NAME.yaml) or by path; `NAME[STREAM+...]` is a modality
    combination of a multimodal card (tasks/multimodal/combinations.py)."""
    if "[" in str(name_or_path) and Path(name_or_path).suffix not in (".yaml", ".yml"):
        return combination_spec(str(name_or_path), load_dataset_spec)
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        _refuse_unplain("dataset", str(name_or_path))
        path = paths.dataset_cards_dir() / f"{name_or_path}.yaml"
        if not path.is_file():
            known = ", ".join(_available(paths.dataset_cards_dir())) or "none"
            raise UserError(
                f"unknown dataset '{name_or_path}': no card {path}; known datasets: {known}."
            )
    data = _mapping(path)
    data.setdefault("name", path.stem)
    blocks = _modality_blocks(path, data)  # first: it takes the plug-in's blocks out of `data`
    try:
        return DatasetSpec(**data, modality_blocks=blocks, card_path=str(path))
    except ValidationError as exc:
        raise UserError(describe_validation_error(path, exc, known=DatasetSpec.model_fields)) from None


def _modality_blocks(path: Path, data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Take a plug-in modality's blocks out of a card's fields, each checked by its model (a block
    left out is checked as empty, so a model with required fields makes its block required)."""
    if "modality_blocks" in data:
        raise UserError(f"{path}: unknown field 'modality_blocks'; give each block of the card's "
                        "modality as a top-level field instead.")
    modality = data.get("modality", TABULAR)
    unknown = set(data) - set(DatasetSpec.model_fields)
    if (modality == TABULAR and not unknown) or not isinstance(modality, str):
        return {}  # a plain table reads no plug-in module
    known = MODALITIES.entries()
    blocks = {}
    for name, model in (MODALITIES.get(modality).card_blocks if modality in known else {}).items():
        block = data.pop(name, None)
        if not isinstance(block, dict | None):
            raise UserError(f"{path}: field '{name}' must be a mapping, the {modality} modality's block.")
        try:
            blocks[name] = model(**(block or {})).model_dump()
        except ValidationError as exc:
            raise UserError(describe_validation_error(path, exc, within=name)) from None
    other = sorted(unknown & set(block_owners()) - set(blocks))
    if other:
        owner = block_owners()[other[0]]
        raise UserError(f"{path}: field '{other[0]}' is the {owner} modality's block; set "
                        f"`modality: {owner}` or remove it.")
    return blocks


def list_dataset_specs() -> list[DatasetSpec]:
    return [load_dataset_spec(p) for p in sorted(paths.dataset_cards_dir().glob("*.yaml"))]


def load_budgets() -> dict[str, Budget]:
    path = paths.budgets_file()
    data = _mapping(path)
    budgets: dict[str, Budget] = {}
    for name, fields in data.items():
        if not isinstance(fields, dict):
            raise UserError(f"{path}: budget '{name}' must be a mapping of time_s, cores, memory_mb, gpus.")
        try:
            budgets[name] = Budget(name=name, **fields)
        except ValidationError as exc:
            sentence = describe_validation_error(path, exc)
            raise UserError(sentence.replace(": field '", f": budget '{name}' field '", 1)) from None
    return budgets


def load_budget(name: str) -> Budget:
    budgets = load_budgets()
    if name not in budgets:
        raise UserError(
            f"unknown budget '{name}'; known budgets in {paths.budgets_file()}: {', '.join(budgets)}."
        )
    return budgets[name]


class SuiteBlock(Protocol):
    """What a post-job evaluation offers a suite: the pydantic model of its block (`serving:`)."""

    @property
    def settings_model(self) -> type[BaseModel]: ...


def _evaluation_settings(path: Path, data: dict[str, Any],
                         evaluations: Mapping[str, SuiteBlock]) -> dict[str, Any]:
    """Take each post-job evaluation's block out of a suite's fields, validated by its own model."""
    if "evaluations" in data:
        raise UserError(f"{path}: unknown field 'evaluations'; give each evaluation its own top-level "
                        "block instead (e.g. `serving: {enabled: true}`).")
    settings = {}
    for name, evaluation in evaluations.items():
        if name not in data:
            continue
        block = data.pop(name)
        if block is None:
            block = {}
        if not isinstance(block, dict):
            raise UserError(f"{path}: field '{name}' must be a mapping of settings, "
                            f"e.g. `{name}: {{enabled: true}}`.")
        try:
            settings[name] = evaluation.settings_model(**block)
        except ValidationError as exc:
            raise UserError(describe_validation_error(path, exc, within=name)) from None
    return settings


def _check_adaptive_rounds(path: Path, suite: Suite) -> None:
    """`adaptive:`'s rounds fit in the suite's folds: min_folds <= max_folds <= folds."""
    if suite.adaptive is None:
        return
    max_folds = suite.adaptive.max_folds or suite.folds
    if max_folds > suite.folds:
        raise UserError(f"{path}: field 'adaptive.max_folds': {max_folds} is above the suite's folds "
                        f"({suite.folds}); lower it or raise `folds`.")
    if suite.adaptive.min_folds > max_folds:
        raise UserError(f"{path}: field 'adaptive.min_folds': {suite.adaptive.min_folds} is above "
                        f"max_folds ({max_folds}); lower min_folds or raise max_folds.")
    k, frameworks = suite.adaptive.top_k, len(suite.frameworks)
    if k is not None and frameworks > 1 and not 1 <= k <= frameworks - 1:  # one framework: no rounds
        raise UserError(f"{path}: field 'adaptive.top_k': {k} is outside 1 to {frameworks - 1} (the "
                        f"suite has {frameworks} frameworks and the top k leaves one out at least); "
                        "give a k in it.")


def load_suite(name_or_path: str | Path, evaluations: Mapping[str, SuiteBlock]) -> Suite:
    """Load a suite by name (specs/suites/NAME.yaml) or path; check its budget and datasets exist.

    `evaluations` are the post-job evaluations by name whose blocks a suite may hold
    (tasks.evaluations.registry.all_evaluations()): passed in, as the evaluations sit layers above.
    """
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        _refuse_unplain("suite", str(name_or_path))
        path = paths.suites_dir() / f"{name_or_path}.yaml"
        if not path.is_file():
            known = ", ".join(_available(paths.suites_dir())) or "none"
            raise UserError(f"unknown suite '{name_or_path}': no file {path}; known suites: {known}.")
    data = _mapping(path)
    data.setdefault("name", path.stem)
    data["evaluations"] = _evaluation_settings(path, data, evaluations)
    try:
        suite = Suite(**data)
    except ValidationError as exc:
        raise UserError(describe_validation_error(path, exc)) from None
    # Top-level fields the modalities read (their plug-ins' `suite_fields`); any other is refused.
    unknown = sorted(set(suite.model_extra or {}) - suite_fields()) if suite.model_extra else []
    if unknown:
        raise UserError(f"{path}: unknown field '{unknown[0]}'; remove it or check its spelling.")
    load_budget(suite.budget)
    _check_adaptive_rounds(path, suite)
    suite = suite.model_copy(update={"datasets": _expand_openml(path, suite.datasets)})
    for dataset in suite.datasets:
        card_name = dataset.split("[", 1)[0]  # `NAME[STREAMS]`: a modality combination of NAME
        if not (paths.dataset_cards_dir() / f"{card_name}.yaml").is_file():
            task_id = card_name.removeprefix("openml_")
            if card_name.startswith("openml_") and task_id.isdigit():
                raise UserError(f"{path}: field 'datasets': OpenML task {task_id} has no card yet; run "
                                "`automl-eval datasets build` where OpenML can be reached, then commit "
                                "its card.")
            known = ", ".join(_available(paths.dataset_cards_dir()))
            raise UserError(f"{path}: field 'datasets': unknown dataset '{dataset}'; known: {known}.")
    if (suite.model_extra or {}).get("modality_combinations") is not None:
        suite = suite.model_copy(update={"datasets": expand_datasets(suite, load_dataset_spec)})
    return suite
