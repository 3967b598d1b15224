"""Fixed, saved outer folds: every framework in every run sees the same train/test rows.

Classification folds are stratified, regression folds shuffled, both from a fixed seed
(params.yaml `folds`, or the card's own `folds`). Exact duplicate rows are kept together in one
fold, so no row of a test part also sits in its train part (datasets such as randhie repeat rows);
images are duplicates when their pixels are (a content hash), whatever their labels.
A card may name a group column (`fold_groups: COLUMN`; multimodal tables group by their `segment`
column unless the card says otherwise): rows sharing its value also share a fold, so windows cut
from one recording never sit on both sides of a split.
The assignment is saved next to the data, ``datasets/NAME.folds.csv``, and pinned with it by DVC.

A card may bring its own split instead (`folds:` in tasks/specs.py FoldsSpec): a file of fold ids
(`file:`) or a column of them (`column:`) is read as it is and never recomputed; `strategy: time`
cuts the rows, ordered by a time column, into k+1 blocks and tests fold f on block f+1 after
training on every earlier block (an expanding window: no test row precedes a training row), saved
as fold ids -1 (train only) then 0..k-1; `strategy: group` is `fold_groups` spelled as a strategy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from tasks import paths
from tasks.data.load import read_columns
from tasks.errors import UserError
from tasks.forecasting.card import forecast_card
from tasks.forecasting.windows import assign_windows, train_mask
from tasks.modalities.base import modality_of
from tasks.specs import DatasetSpec, read_yaml

FOLD_COLUMN = "fold"


TRAIN_ONLY = -1  # a time split's first block: training rows of every fold, tested in none


@dataclass(frozen=True)
class FoldSettings:
    k: int
    seed: int


def fold_settings(spec: DatasetSpec | None = None) -> FoldSettings:
    """K and seed from params.yaml; a card's `folds: K` (or `folds: {k: K, seed: S}`) overrides them."""
    params_file = paths.project_root() / "params.yaml"
    params = read_yaml(params_file) if params_file.is_file() else {}
    folds = (params or {}).get("folds", {}) or {}
    k, seed = folds.get("k", 10), folds.get("seed", 0)
    card = spec.folds_spec if spec is not None else None
    if card is not None and card.k is not None:
        k = card.k
    if card is not None and card.seed is not None:
        seed = card.seed
    for field, value in (("k", k), ("seed", seed)):
        if not isinstance(value, int) or isinstance(value, bool) or value < (2 if field == "k" else 0):
            raise UserError(
                f"{params_file}: field 'folds.{field}' must be an integer (k >= 2), not {value!r}."
            )
    return FoldSettings(k=k, seed=seed)


def is_user_given(spec: DatasetSpec) -> bool:
    """The card names its folds (a file or a column): they are read, never computed."""
    return spec.folds_spec.user_given


def is_time_split(spec: DatasetSpec) -> bool:
    return spec.folds_spec.strategy == "time"


def is_forecasting(spec: DatasetSpec) -> bool:
    """Forecasting folds are the last horizons of every series (tasks/forecasting/windows.py)."""
    return spec.problem_type == "forecasting"


def _card_column(spec: DatasetSpec, column: str | None, field: str) -> str:
    if not isinstance(column, str) or column not in spec.columns:
        raise UserError(
            f"{spec.card_path or spec.name}: field '{field}' must name one of the card's columns, "
            f"not {column!r}; add it to `columns` (role id or ignore keeps it from the frameworks)."
        )
    return column


def group_column(spec: DatasetSpec) -> str | None:
    """The column whose equal values must share a fold: `folds: {strategy: group, column: C}` or the
    card's `fold_groups`; without either, the modality's own (a multimodal table's `segment` column),
    else none."""
    card = spec.folds_spec
    if card.strategy == "group":
        return _card_column(spec, card.column, "folds.column")
    declared = spec.fold_groups
    if declared is None:
        return modality_of(spec).default_fold_groups(spec)
    return _card_column(spec, declared, "fold_groups")


def row_groups(frame: pd.DataFrame, spec: DatasetSpec) -> np.ndarray:
    """Group id per row: identical rows share one id, numbered by first appearance.

    Identity and bookkeeping columns (roles id, ignore) are left out: a row number must not make
    two otherwise identical rows look different. With a group column (see `group_column`), rows
    of one group value join one group too, together with every row identical to one of them.
    """
    identity = modality_of(spec).row_identity(spec, frame)  # images: their pixels' content hash
    if identity is not None:
        identical = pd.factorize(identity)[0]
    else:
        compared = [c for c in frame.columns if spec.columns.get(c) not in ("id", "ignore")]
        identical = pd.factorize(_row_hashes(frame, compared))[0]
    column = group_column(spec)
    if column is None:
        return identical
    declared = pd.factorize(frame[column], use_na_sentinel=False)[0]
    # Rows are linked through both ids; the connected parts are the groups.
    n_rows, n_identical = len(frame), int(identical.max()) + 1 if len(frame) else 0
    links = coo_matrix(
        (np.ones(n_rows), (identical, n_identical + declared)),
        shape=(n_identical + int(declared.max()) + 1 if n_rows else 0,) * 2,
    )
    part = connected_components(links, directed=False)[1][identical]
    return pd.factorize(part)[0]


def _row_hashes(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """One 64-bit hash per row over `columns`, a column at a time: selecting the columns first
    would copy the whole table, which at millions of rows is gigabytes."""
    combined = np.zeros(len(frame), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in columns:
            hashed = pd.util.hash_pandas_object(frame[column], index=False).to_numpy()
            combined = combined * np.uint64(1_000_003) ^ hashed
    return combined


def assign_folds(frame: pd.DataFrame, spec: DatasetSpec, settings: FoldSettings) -> np.ndarray:
    """Fold index (0..k-1) per row: shuffled groups dealt round-robin, class by class when classifying.

    A time split (`folds: {strategy: time}`) gives block ids instead; see `assign_time_blocks`.
    """
    if is_time_split(spec):
        return assign_time_blocks(frame, spec, settings.k)
    if is_forecasting(spec):
        return assign_windows(frame, forecast_card(spec))
    groups = row_groups(frame, spec)
    n_groups = int(groups.max()) + 1 if len(groups) else 0
    order = np.random.default_rng(settings.seed).permutation(n_groups)
    if not spec.numeric_target:
        first_row = np.unique(groups, return_index=True)[1]
        label_codes = pd.factorize(frame[spec.target].iloc[first_row].astype(str), sort=True)[0]
        # Within each class the order stays random; dealing class after class round-robin gives
        # every fold the class proportions of the whole (stratification).
        order = order[np.argsort(label_codes[order], kind="stable")]
    fold_of_group = np.empty(n_groups, dtype=np.int64)
    fold_of_group[order] = np.arange(n_groups) % settings.k
    return fold_of_group[groups]


def assign_time_blocks(frame: pd.DataFrame, spec: DatasetSpec, k: int) -> np.ndarray:
    """Expanding-window time split: rows ordered by the time column, cut into k+1 blocks of about
    equal size on distinct time values (rows of one instant share a block). The first block is
    training only (TRAIN_ONLY); fold f tests block f+1 and trains on every block before it."""
    column = _card_column(spec, spec.folds_spec.column, "folds.column")
    times = time_values(frame, spec)
    if times.isna().any():
        raise UserError(
            f"{spec.card_path or spec.name}: field 'folds.column': time column '{column}' has "
            f"{int(times.isna().sum())} missing values; a time split needs a time for every row."
        )
    instants, instant_of_row = np.unique(times.to_numpy(), return_inverse=True)
    if len(instants) < k + 1:
        raise UserError(
            f"{spec.card_path or spec.name}: field 'folds.k': {k} time folds need at least {k + 1} "
            f"distinct values in '{column}', which has {len(instants)}; lower k."
        )
    # Cut where the cumulative row count crosses each (block / (k+1)) share.
    rows_up_to = np.cumsum(np.bincount(instant_of_row, minlength=len(instants)))
    block_of_instant = np.minimum((rows_up_to - 1) * (k + 1) // len(frame), k)
    return block_of_instant[instant_of_row].astype(np.int64) - 1  # -1 = TRAIN_ONLY, then 0..k-1


def time_values(frame: pd.DataFrame, spec: DatasetSpec) -> pd.Series:
    """The time split's column, ordered as time: numbers and datetimes as they are, text that
    parses as dates as dates (ISO strings also sort as text)."""
    times = frame[_card_column(spec, spec.folds_spec.column, "folds.column")]
    if isinstance(times.dtype, pd.CategoricalDtype):
        times = times.astype(object)
    if not (pd.api.types.is_numeric_dtype(times) or pd.api.types.is_datetime64_any_dtype(times)):
        parsed = pd.to_datetime(times, errors="coerce", utc=True)
        times = parsed if parsed.notna().sum() == times.notna().sum() else times.astype(str)
    return times


def folds_path(spec: DatasetSpec) -> Path:
    """Where the fold ids live: datasets/NAME.folds.csv, or the card's own `folds: {file: ...}`."""
    if spec.folds_spec.file is not None:
        return paths.datasets_dir() / spec.folds_spec.file
    return spec.path.with_name(f"{spec.name}.folds.csv")


def folds_csv_bytes(assignment: np.ndarray) -> bytes:
    return (FOLD_COLUMN + "\n" + "".join(f"{int(f)}\n" for f in assignment)).encode("ascii")


def _fold_column_of_data(spec: DatasetSpec) -> pd.Series:
    """`folds: {column: C}`: the fold ids are column C of the data file."""

    column = _card_column(spec, spec.folds_spec.column, "folds.column")
    return read_columns(spec, [column])[column]


def load_folds(spec: DatasetSpec) -> np.ndarray:
    """The fold id of every row: the saved or user-given file, or the card's fold column."""
    if spec.folds_spec.user_given and spec.folds_spec.file is None:
        assignment, where = _fold_column_of_data(spec), f"{spec.path} column '{spec.folds_spec.column}'"
        fix = "give every row an integer fold id"
    else:
        path = folds_path(spec)
        where = str(path)
        user_file = spec.folds_spec.file is not None
        fix = "give every row an integer fold id" if user_file else "rebuild it"
        if not path.is_file():
            raise UserError(
                f"{spec.card_path}: field 'folds.file': {path} does not exist; put the folds file there."
                if user_file
                else f"{path}: saved folds of dataset '{spec.name}' are missing; "
                "run `automl-eval datasets build`."
            )
        try:
            table = pd.read_csv(path)
            # A user's file may name its one column as it likes (an AMLB/OpenML export, say).
            assignment = table[FOLD_COLUMN] if FOLD_COLUMN in table or not user_file else table.iloc[:, 0]
            if user_file and len(table.columns) != 1 and FOLD_COLUMN not in table:
                raise KeyError(FOLD_COLUMN)
        except (KeyError, IndexError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
            raise UserError(
                f"{path}: not a folds file (one column '{FOLD_COLUMN}', one fold id per data row); "
                + ("fix the file." if user_file else "rebuild it with `automl-eval datasets build`.")
            ) from None
    if assignment.isna().any() or not (
        pd.api.types.is_integer_dtype(assignment)
        or (pd.api.types.is_float_dtype(assignment) and (assignment == assignment.round()).all())
    ):
        raise UserError(f"{where}: fold ids must be integers, one per row; {fix}.")
    return assignment.to_numpy().astype(np.int64)


def fold_ids(assignment: np.ndarray) -> list[int]:
    """The folds a job may run: every id but the train-only block (a time split's, a forecast's history)."""
    return [int(f) for f in np.unique(assignment) if f != TRAIN_ONLY]


def split_rows(spec: DatasetSpec, assignment: np.ndarray, fold: int) -> tuple[np.ndarray, np.ndarray]:
    """Row positions (train, test) of `fold` in an assignment: the rest of the rows, or, for a
    time split, only the rows of earlier blocks."""
    in_test = assignment == fold
    if is_forecasting(spec):
        in_train = train_mask(assignment, fold)
    else:
        in_train = assignment < fold if is_time_split(spec) else ~in_test
    return np.flatnonzero(in_train), np.flatnonzero(in_test)


def split(spec: DatasetSpec, fold: int) -> tuple[np.ndarray, np.ndarray]:
    """Row positions (train, test) of outer fold `fold`."""
    assignment = load_folds(spec)
    if fold not in fold_ids(assignment):
        ids = fold_ids(assignment)
        raise UserError(
            f"dataset '{spec.name}' has folds {ids[0] if ids else '-'}..{ids[-1] if ids else '-'} in "
            f"{folds_path(spec)}; fold {fold} does not exist."
        )
    return split_rows(spec, assignment, fold)
