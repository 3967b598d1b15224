"""The corruptions a robustness case applies to a test fold: what each hits and how.

The mechanics come from `tab_err` (Jenga's successor): an error *mechanism* picks the cells of a
column (ECAR completely at random, EAR depending on another column), an error *type* changes them
(MissingValue, WrongUnit, Outlier, CategorySwap, Typo). What tab_err does not offer is written
here, as tab_err subclasses so the same mask machinery drives it:

- `HighValueENAR`: missing not at random where the chance grows with the value itself (tab_err's
  ENAR takes a block of neighbouring values at a random place, so it does not favour high values);
- `GaussianNoise`: noise scaled to the column's standard deviation;
- `UnseenCategory`: a category value the model never saw in training;
- the text perturbations of `tasks.evaluations.robustness.text` and the multimodal stream ones.

The image corruptions (`tasks.evaluations.robustness.images`: occlusion, noise, blur,
brightness/contrast, colour shift, JPEG, rotation, pixelation) are albumentations transforms on
the test fold's images, registered here with the rest: this table is the one list of corruptions.
For them a severity is the transform's strength, applied to every image.

Every corruption is applied per target (a column, or a stream's columns) to the share `severity`
of its rows, from a seed; so a case is fully determined by its inputs and two frameworks always
see the same corrupted cells.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pandas.api.types import is_numeric_dtype
from tab_err import ErrorMechanism, ErrorType
from tab_err.api import low_level
from tab_err.error_mechanism import EAR, ECAR
from tab_err.error_type import CategorySwap, MissingValue, Outlier, Typo, WrongUnit

import tasks.evaluations.robustness.images as images  # the modules, not the package that imports this one
import tasks.evaluations.robustness.text as text
from tasks.images.card import IMAGE_ROLE
from tasks.images.layout import ImageLayout
from tasks.multimodal.cards import FEATURE_SEPARATOR

UNSEEN_CATEGORY = "__unseen__"


# ---------------------------------------------------------------- what tab_err does not offer


class HighValueENAR(ErrorMechanism):
    """Erroneous not at random: row i is picked with a weight that grows with its value's rank."""

    def _sample(self, data: pd.DataFrame, column: str | int, error_rate: float,
                error_mask: pd.DataFrame) -> pd.DataFrame:
        values = data[column]
        free = values[~error_mask[column] & values.notna()]
        # Cells already missing cannot go missing again: at a high rate, every present value does.
        n_errors = min(int(len(values) * error_rate), len(free))
        weights = free.rank(method="average").to_numpy(dtype=float) ** 2
        chosen = self._random_generator.choice(free.index.to_numpy(), n_errors, replace=False,
                                               p=weights / weights.sum())
        error_mask.loc[chosen, column] = True
        return error_mask


class GaussianNoise(ErrorType):
    """Adds N(0, scale x the column's standard deviation) to the masked cells."""

    def __init__(self, scale: float = 1.0, seed: int | None = None) -> None:
        super().__init__(seed=seed)
        self.scale = scale

    @staticmethod
    def _check_type(data: pd.DataFrame, column: str | int) -> None:
        if not is_numeric_dtype(data[column]):
            raise TypeError(f"column {column} is not numeric")

    def _get_valid_columns(self, data: pd.DataFrame) -> list[str | int]:
        return data.select_dtypes(include=["number"]).columns.tolist()

    def _apply(self, data: pd.DataFrame, error_mask: pd.DataFrame, column: str | int) -> pd.Series:
        series = data[column].astype(float).copy()
        mask = error_mask[column]
        spread = float(series.std()) if series.notna().sum() > 1 else 0.0
        spread = spread if math.isfinite(spread) and spread > 0 else 1.0
        series[mask] += self._random_generator.normal(0.0, self.scale * spread, int(mask.sum()))
        return series


class UnseenCategory(ErrorType):
    """Replaces the masked cells by a category value that no training row had."""

    @staticmethod
    def _check_type(data: pd.DataFrame, column: str | int) -> None:
        if not isinstance(data[column].dtype, pd.CategoricalDtype):
            raise TypeError(f"column {column} is not categorical")

    def _get_valid_columns(self, data: pd.DataFrame) -> list[str | int]:
        return [c for c in data.columns if isinstance(data[c].dtype, pd.CategoricalDtype)]

    def _apply(self, data: pd.DataFrame, error_mask: pd.DataFrame, column: str | int) -> pd.Series:
        series = data[column]
        if UNSEEN_CATEGORY not in series.cat.categories:
            series = series.cat.add_categories([UNSEEN_CATEGORY])
        series = series.copy()
        series[error_mask[column]] = UNSEEN_CATEGORY
        return series


class TextPerturbation(ErrorType):
    """One of the local text perturbations (tasks.evaluations.robustness.text) on the masked cells."""

    def __init__(self, perturb: Callable[[str, np.random.Generator], str], seed: int | None = None) -> None:
        super().__init__(seed=seed)
        self.perturb = perturb

    @staticmethod
    def _check_type(data: pd.DataFrame, column: str | int) -> None:
        pass

    def _get_valid_columns(self, data: pd.DataFrame) -> list[str | int]:
        return data.select_dtypes(include=["object", "string"]).columns.tolist()

    def _apply(self, data: pd.DataFrame, error_mask: pd.DataFrame, column: str | int) -> pd.Series:
        series = data[column].copy()
        rng = self._random_generator
        for index in series.index[error_mask[column].to_numpy()]:
            value = series.at[index]
            if isinstance(value, str):
                series.at[index] = self.perturb(value, rng)
        return series


# ---------------------------------------------------------------- the frame a case sees


@dataclass(frozen=True)
class FrameFacts:
    """What the corruptions need to know of a test fold beyond its values."""

    roles: dict[str, str]  # column -> card role (numeric, categorical, text, ...)
    importance: list[str] = field(default_factory=list)  # columns, most important first (the model's)
    # The numeric columns STREAM__FEATURE are a sensor stream's features (the modality's entry says).
    sensor_streams: bool = False
    conditions: dict[str, str] = field(default_factory=dict)  # column -> its MAR condition column
    # Where the fold holds its images (an image card's column, a pixel table's pixels); None: no images.
    image: ImageLayout | None = None

    def columns(self, frame: pd.DataFrame, role: str) -> list[str]:
        return [c for c in frame.columns if self.roles.get(c) == role]

    def numeric(self, frame: pd.DataFrame) -> list[str]:
        return [c for c in frame.columns if self.roles.get(c, "numeric") == "numeric"
                and is_numeric_dtype(frame[c]) and frame[c].notna().sum() > 1]

    def categorical(self, frame: pd.DataFrame) -> list[str]:
        return [c for c in self.columns(frame, "categorical") if frame[c].nunique(dropna=True) >= 2]

    def streams(self, frame: pd.DataFrame) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        if self.sensor_streams:
            for column in self.numeric(frame):
                if FEATURE_SEPARATOR in column:
                    found.setdefault(column.split(FEATURE_SEPARATOR, 1)[0], []).append(column)
        return found


Apply = Callable[[pd.DataFrame, str, float, int, FrameFacts], tuple[pd.DataFrame, pd.DataFrame]]
Targets = Callable[[pd.DataFrame, FrameFacts], list[str]]


@dataclass(frozen=True)
class Corruption:
    name: str
    family: str  # the `robust_FAMILY_auc` it counts towards
    description: str
    targets: Targets  # what it can hit in a frame: columns, or streams for the stream corruptions
    apply: Apply  # (frame, target, severity, seed, facts) -> (corrupted frame, mask of changed cells)
    # Set when the corruption can never be applied faithfully to a job's test fold, with the reason.
    unavailable: str = ""
    # What `apply` reads: its target column alone (plus the MAR condition column), or the whole frame.
    reads: str = "column"  # column | column+condition | frame


def _as_category(series: pd.Series) -> pd.Series:
    return series if isinstance(series.dtype, pd.CategoricalDtype) else series.astype("category")


def _prepared(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """The frame with `column` in a type tab_err can write any value into (ints -> floats)."""
    frame = frame.copy()
    if pd.api.types.is_integer_dtype(frame[column]) or pd.api.types.is_bool_dtype(frame[column]):
        frame[column] = frame[column].astype(float)
    return frame


def _tab_err(mechanism: Callable[[int, pd.DataFrame, str, FrameFacts], ErrorMechanism],
             error_type: Callable[[int, pd.Series], ErrorType]) -> Apply:
    """A corruption made of a tab_err mechanism and error type, applied to one column."""

    def apply(frame: pd.DataFrame, column: str, severity: float, seed: int,
              facts: FrameFacts) -> tuple[pd.DataFrame, pd.DataFrame]:
        data = _prepared(frame, column)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tab_err warns when it picks defaults we set on purpose
            corrupted, mask = low_level.create_errors(
                data, column, severity, mechanism(seed, data, column, facts),
                error_type(seed + 1, data[column]))
        return corrupted, mask

    return apply


def _missing(mechanism: Callable[[int, pd.DataFrame, str, FrameFacts], ErrorMechanism]) -> Apply:
    """Missing values through a tab_err mechanism. tab_err's MissingValue turns a text or category
    column into strings ('<NA>'), so those columns get NaN through the mask here instead."""
    numeric = _tab_err(mechanism, lambda seed, _: MissingValue(seed=seed))

    def apply(frame: pd.DataFrame, column: str, severity: float, seed: int,
              facts: FrameFacts) -> tuple[pd.DataFrame, pd.DataFrame]:
        if is_numeric_dtype(frame[column]):
            return numeric(frame, column, severity, seed, facts)
        data = frame.copy()
        mask = mechanism(seed, data, column, facts).sample(data, column, severity)
        data[column] = data[column].mask(mask[column])
        return data, mask

    return apply


def condition_column(frame: pd.DataFrame, column: str, facts: FrameFacts) -> str:
    """The column MAR missingness depends on: the numeric one most correlated with `column`
    (the next column in the frame when there is none). Model-independent, so every framework
    sees the same cells."""
    others = [c for c in facts.numeric(frame) if c != column]
    if others and is_numeric_dtype(frame[column]):
        # Spearman as Pearson on ranks: one vectorised pass instead of scipy per column pair.
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a constant column has no correlation: NaN, skipped
            correlation = frame[others].rank().corrwith(frame[column].astype(float).rank()).abs()
        if correlation.notna().any():
            return str(correlation.fillna(-1).idxmax())
    columns = list(frame.columns)
    return str(others[0]) if others else str(columns[(columns.index(column) + 1) % len(columns)])


def _typo_in_category(seed: int, _: pd.Series) -> ErrorType:
    return Typo(config={"typo_error_period": 1}, seed=seed)


def _category_apply(inner: Apply) -> Apply:
    """Category corruptions: tab_err's category types need the category dtype, Typo plain strings."""

    def apply(frame: pd.DataFrame, column: str, severity: float, seed: int,
              facts: FrameFacts) -> tuple[pd.DataFrame, pd.DataFrame]:
        data = frame.copy()
        data[column] = _as_category(data[column])
        corrupted, mask = inner(data, column, severity, seed, facts)
        corrupted[column] = _as_category(corrupted[column])
        return corrupted, mask

    return apply


def _typo_apply(frame: pd.DataFrame, column: str, severity: float, seed: int,
                facts: FrameFacts) -> tuple[pd.DataFrame, pd.DataFrame]:
    data = frame.copy()
    data[column] = data[column].astype(object).where(data[column].notna(), "")
    corrupted, mask = _tab_err(_ecar, _typo_in_category)(data, column, severity, seed, facts)
    restored = corrupted[column].where(frame[column].notna() | mask[column], np.nan)
    corrupted[column] = restored.astype("category") if isinstance(frame[column].dtype,
                                                                   pd.CategoricalDtype) else restored
    return corrupted, mask


def _ecar(seed: int, *_: object) -> ErrorMechanism:
    return ECAR(seed=seed)


def _ear(seed: int, frame: pd.DataFrame, column: str, facts: FrameFacts) -> ErrorMechanism:
    condition = facts.conditions.get(column) or condition_column(frame, column, facts)
    return EAR(condition_to_column=condition, seed=seed)


def _enar_high(seed: int, *_: object) -> ErrorMechanism:
    return HighValueENAR(seed=seed)


def _feature_drop(frame: pd.DataFrame, column: str, severity: float, seed: int,
                  facts: FrameFacts) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The whole column missing (severity is the share of features dropped in a frame-wide case)."""
    data = frame.copy()
    mask = pd.DataFrame(False, index=frame.index, columns=frame.columns)
    data[column] = data[column].mask(pd.Series(True, index=frame.index))
    mask[column] = True
    return data, mask


def _stream_rows(frame: pd.DataFrame, columns: list[str], severity: float, seed: int) -> pd.Series:
    """The rows a stream corruption hits (the same rows for every column of the stream), by ECAR."""
    return ECAR(seed=seed).sample(frame, columns[0], severity)[columns[0]]


def _stream_drop(frame: pd.DataFrame, stream: str, severity: float, seed: int,
                 facts: FrameFacts) -> tuple[pd.DataFrame, pd.DataFrame]:
    columns = facts.streams(frame)[stream]
    rows = _stream_rows(frame, columns, severity, seed)
    data = frame.copy()
    mask = pd.DataFrame(False, index=frame.index, columns=frame.columns)
    for column in columns:
        data[column] = data[column].astype(float).mask(rows)
        mask[column] = rows
    return data, mask


def _stream_noise(frame: pd.DataFrame, stream: str, severity: float, seed: int,
                  facts: FrameFacts) -> tuple[pd.DataFrame, pd.DataFrame]:
    columns = facts.streams(frame)[stream]
    rows = _stream_rows(frame, columns, severity, seed)
    data = frame.astype({column: float for column in columns})
    mask = pd.DataFrame(False, index=frame.index, columns=frame.columns)
    for offset, column in enumerate(columns):
        mask[column] = rows
        data[column] = GaussianNoise(seed=seed + 1 + offset).apply(data, mask, column)
    return data, mask


def _text(perturb: Callable[[str, np.random.Generator], str]) -> Apply:
    return _tab_err(_ecar, lambda seed, _: TextPerturbation(perturb, seed=seed))


def _text_typo(seed: int, _: pd.Series) -> ErrorType:
    return Typo(config={"typo_error_period": 5}, seed=seed)  # one word in five, keyboard neighbours


def _numeric(frame: pd.DataFrame, facts: FrameFacts) -> list[str]:
    return facts.numeric(frame)


def _categorical(frame: pd.DataFrame, facts: FrameFacts) -> list[str]:
    return facts.categorical(frame)


def _numeric_or_categorical(frame: pd.DataFrame, facts: FrameFacts) -> list[str]:
    return [c for c in frame.columns if c in set(facts.numeric(frame)) | set(facts.categorical(frame))]


def _text_columns(frame: pd.DataFrame, facts: FrameFacts) -> list[str]:
    return facts.columns(frame, "text")


def _features(frame: pd.DataFrame, facts: FrameFacts) -> list[str]:
    # An image column is one feature of its own kind: the image corruptions take it, not a drop.
    return [c for c in (facts.importance or list(frame.columns))
            if c in frame.columns and facts.roles.get(c) != IMAGE_ROLE]


def _stream_names(frame: pd.DataFrame, facts: FrameFacts) -> list[str]:
    return sorted(facts.streams(frame))


def _image_targets(frame: pd.DataFrame, facts: FrameFacts) -> list[str]:
    return [facts.image.target] if facts.image is not None else []


def _image(corruption: images.ImageCorruption) -> Apply:
    """An image corruption on the fold's images (the whole frame: its one image, or its pixels)."""

    def apply(frame: pd.DataFrame, target: str, severity: float, seed: int,
              facts: FrameFacts) -> tuple[pd.DataFrame, pd.DataFrame]:
        if facts.image is None:
            raise ValueError("the fold holds no images")
        return images.corrupt_images(facts.image, frame, corruption, severity, seed)

    return apply


_CLOCK = ("needs re-aligning and re-windowing from the raw streams, and the saved test fold holds "
          "windowed features only; the alignment gate's own figures (align_*) record clock skew")

CORRUPTIONS: dict[str, Corruption] = {c.name: c for c in [
    Corruption("missing_mcar", "missing", "missing values completely at random (tab_err ECAR)",
               _numeric_or_categorical, _missing(_ecar)),
    Corruption("missing_mar", "missing", "missing values at random: a block of rows ordered by the most "
               "correlated other column (tab_err EAR)", _numeric_or_categorical, _missing(_ear),
               reads="column+condition"),
    Corruption("missing_mnar", "missing", "missing not at random: the higher the value, the likelier it is "
               "missing (hand-written mechanism)", _numeric, _missing(_enar_high)),
    Corruption("gaussian_noise", "noise", "Gaussian noise of one standard deviation of the column "
               "(hand-written error type)", _numeric, _tab_err(_ecar, lambda s, _: GaussianNoise(seed=s))),
    Corruption("outliers", "noise", "values pushed past the column's 1.5 IQR fences (tab_err Outlier)",
               _numeric, _tab_err(_ecar, lambda s, _: Outlier(config={"outlier_coefficient": 2.0}, seed=s))),
    Corruption("unit_x10", "unit", "values x10, a unit error (tab_err WrongUnit)", _numeric,
               _tab_err(_ecar, lambda s, _: WrongUnit(config={"wrong_unit_scaling": _times(10.0)}, seed=s))),
    Corruption("unit_x1000", "unit", "values x1000, a unit error (tab_err WrongUnit)", _numeric,
               _tab_err(_ecar, lambda s, _: WrongUnit(config={"wrong_unit_scaling": _times(1e3)}, seed=s))),
    Corruption("category_swap", "category", "a category swapped for another seen one (tab_err CategorySwap)",
               _categorical, _category_apply(_tab_err(_ecar, lambda s, _: CategorySwap(seed=s)))),
    Corruption("unseen_category", "category", "a category value never seen in training (hand-written error "
               "type)", _categorical, _category_apply(_tab_err(_ecar, lambda s, _: UnseenCategory(seed=s)))),
    Corruption("category_typo", "category", "a keyboard typo in the category's text (tab_err Typo)",
               _categorical, _typo_apply),
    Corruption("feature_drop", "feature_drop", "whole features missing, the model's most important first "
               "(permutation check); severity = share of features", _features, _feature_drop, reads="frame"),
    Corruption("text_typo", "text", "keyboard typos, one word in five (tab_err Typo)", _text_columns,
               _tab_err(_ecar, _text_typo)),
    Corruption("text_char_swap", "text", "adjacent characters swapped", _text_columns,
               _text(text.swap_chars)),
    Corruption("text_char_delete", "text", "characters deleted", _text_columns, _text(text.delete_chars)),
    Corruption("text_word_drop", "text", "words dropped", _text_columns, _text(text.drop_words)),
    Corruption("text_casing", "text", "casing changed (upper, lower or random per word)", _text_columns,
               _text(text.change_case)),
    Corruption("stream_drop", "stream", "a sensor stream missing: all its features empty", _stream_names,
               _stream_drop, reads="frame"),
    Corruption("stream_noise", "stream", "sensor noise on a stream: its features with Gaussian noise",
               _stream_names, _stream_noise, reads="frame"),
    Corruption("clock_offset", "stream", "a stream's clock offset beyond the alignment tolerance",
               _stream_names, _feature_drop, unavailable=_CLOCK),
    Corruption("clock_jitter", "stream", "a stream's clock jittered beyond the alignment tolerance",
               _stream_names, _feature_drop, unavailable=_CLOCK),
    *(Corruption(c.name, images.IMAGE_FAMILY, f"{c.description}; severity s: {c.severity}", _image_targets,
                 _image(c), reads="frame") for c in images.IMAGE_CORRUPTIONS),
]}


def _times(factor: float) -> Callable[[float], float]:
    return lambda value: value * factor


def features_to_drop(facts: FrameFacts, targets: list[str], severity: float) -> list[str]:
    """A frame-wide feature drop at `severity`: the ceil(severity x n) most important features (>= 1)."""
    count = max(1, math.ceil(severity * len(targets) - 1e-9))
    return targets[:count]


def corrupt(frame: pd.DataFrame, corruption: Corruption, targets: list[str], severity: float,
            seed_of: Callable[[str], int], facts: FrameFacts) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`corruption` applied to each of `targets` (each from its own seed); with the mask of every
    changed cell. A frame-wide feature drop takes the share `severity` of the targets.

    Each target is corrupted from the clean frame and only its own cells are kept, so a frame-wide
    case holds exactly the cells of the single-target cases at the same severity.
    """
    data = frame.copy()
    hits = np.zeros(frame.shape, dtype=bool)
    position = {column: index for index, column in enumerate(frame.columns)}
    if severity <= 0:
        return data, pd.DataFrame(hits, index=frame.index, columns=frame.columns)
    if corruption.name == "feature_drop":
        targets, severity = features_to_drop(facts, targets, severity), 1.0
    # tab_err hits int(rows x rate) cells; the nudge keeps 0.29 x 100 from flooring to 28.
    rate = min(1.0, severity + 1e-9)
    for target in targets:
        # Only what the corruption reads goes to tab_err, which copies its input per call: on a
        # 73-column table that is most of a case's cost.
        read = list(frame.columns) if corruption.reads == "frame" else [target]
        if corruption.reads == "column+condition":
            read.append(facts.conditions.get(target) or condition_column(frame, target, facts))
        part = frame[list(dict.fromkeys(read))]
        corrupted, hit = corruption.apply(part, target, rate, seed_of(target), facts)
        for column in hit.columns[hit.to_numpy().any(axis=0)]:
            data[column] = corrupted[column]
            hits[:, position[column]] |= hit[column].to_numpy(dtype=bool)
    return data, pd.DataFrame(hits, index=frame.index, columns=frame.columns)
