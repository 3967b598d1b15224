"""Fixed, saved outer folds: every framework in every run sees the same train/test rows.

Classification folds are stratified, regression folds shuffled, both from a fixed seed
(params.yaml `folds`, or the card's own `folds`). Exact duplicate rows are kept together in one
fold, so no row of a test part also sits in its train part (datasets such as randhie repeat rows).
A card may name a group column (`fold_groups: COLUMN`; multimodal tables group by their `segment`
column unless the card says otherwise): rows sharing its value also share a fold, so windows cut
from one recording never sit on both sides of a split.
The assignment is saved next to the data, ``datasets/NAME.folds.csv``, and pinned with it by DVC.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from tasks import paths
from tasks.errors import UserError
from tasks.specs import DatasetSpec, read_yaml

FOLD_COLUMN = "fold"
# The aligned table of a multimodal dataset (tasks/multimodal/windows.py SEGMENT): windows of one
# label segment come from one recording, so they are near copies of one another.
MULTIMODAL_GROUP_COLUMN = "segment"


@dataclass(frozen=True)
class FoldSettings:
    k: int
    seed: int


def fold_settings(spec: DatasetSpec | None = None) -> FoldSettings:
    """K and seed from params.yaml; a card's `folds: K` overrides K for that dataset."""
    params_file = paths.project_root() / "params.yaml"
    params = read_yaml(params_file) if params_file.is_file() else {}
    folds = (params or {}).get("folds", {}) or {}
    k, seed = folds.get("k", 10), folds.get("seed", 0)
    card_k = (spec.model_extra or {}).get("folds") if spec is not None else None
    if card_k is not None:
        k = card_k
    for field, value in (("k", k), ("seed", seed)):
        if not isinstance(value, int) or isinstance(value, bool) or value < (2 if field == "k" else 0):
            where = spec.card_path if card_k is not None and field == "k" and spec else params_file
            raise UserError(f"{where}: field 'folds.{field}' must be an integer (k >= 2), not {value!r}.")
    return FoldSettings(k=k, seed=seed)


def group_column(spec: DatasetSpec) -> str | None:
    """The column whose equal values must share a fold: the card's `fold_groups`; without it, a
    multimodal table's `segment` column, and no column for any other dataset."""
    declared = (spec.model_extra or {}).get("fold_groups")
    if declared is None and spec.modality == "multimodal" and MULTIMODAL_GROUP_COLUMN in spec.columns:
        return MULTIMODAL_GROUP_COLUMN
    if declared is not None and (not isinstance(declared, str) or declared not in spec.columns):
        raise UserError(
            f"{spec.card_path or spec.name}: field 'fold_groups' must name one of the card's "
            f"columns, not {declared!r}."
        )
    return declared


def row_groups(frame: pd.DataFrame, spec: DatasetSpec) -> np.ndarray:
    """Group id per row: identical rows share one id, numbered by first appearance.

    Identity and bookkeeping columns (roles id, ignore) are left out: a row number must not make
    two otherwise identical rows look different. With a group column (see `group_column`), rows
    of one group value join one group too, together with every row identical to one of them.
    """
    compared = [c for c in frame.columns if spec.columns.get(c) not in ("id", "ignore")]
    hashed = pd.util.hash_pandas_object(frame[compared], index=False)
    identical = pd.factorize(hashed)[0]
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


def assign_folds(frame: pd.DataFrame, spec: DatasetSpec, settings: FoldSettings) -> np.ndarray:
    """Fold index (0..k-1) per row: shuffled groups dealt round-robin, class by class when classifying."""
    groups = row_groups(frame, spec)
    n_groups = int(groups.max()) + 1 if len(groups) else 0
    order = np.random.default_rng(settings.seed).permutation(n_groups)
    if spec.problem_type != "regression":
        first_row = np.unique(groups, return_index=True)[1]
        label_codes = pd.factorize(frame[spec.target].iloc[first_row].astype(str), sort=True)[0]
        # Within each class the order stays random; dealing class after class round-robin gives
        # every fold the class proportions of the whole (stratification).
        order = order[np.argsort(label_codes[order], kind="stable")]
    fold_of_group = np.empty(n_groups, dtype=np.int64)
    fold_of_group[order] = np.arange(n_groups) % settings.k
    return fold_of_group[groups]


def folds_path(spec: DatasetSpec) -> Path:
    """Saved next to the data: datasets/NAME.folds.csv (one fold index per row)."""
    return spec.path.with_name(f"{spec.name}.folds.csv")


def folds_csv_bytes(assignment: np.ndarray) -> bytes:
    return (FOLD_COLUMN + "\n" + "".join(f"{int(f)}\n" for f in assignment)).encode("ascii")


def load_folds(spec: DatasetSpec) -> np.ndarray:
    path = folds_path(spec)
    if not path.is_file():
        raise UserError(
            f"{path}: saved folds of dataset '{spec.name}' are missing; run `automl-eval datasets build`."
        )
    try:
        assignment = pd.read_csv(path)[FOLD_COLUMN]
    except (KeyError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
        raise UserError(
            f"{path}: not a folds file (one column '{FOLD_COLUMN}'); rebuild it with "
            "`automl-eval datasets build`."
        ) from None
    if not pd.api.types.is_integer_dtype(assignment):
        raise UserError(f"{path}: column '{FOLD_COLUMN}' must hold integers; rebuild it.")
    return assignment.to_numpy()


def split(spec: DatasetSpec, fold: int) -> tuple[np.ndarray, np.ndarray]:
    """Row positions (train, test) of outer fold `fold`."""
    assignment = load_folds(spec)
    if fold not in set(np.unique(assignment).tolist()):
        raise UserError(
            f"dataset '{spec.name}' has folds 0..{int(assignment.max())} in {folds_path(spec)}; "
            f"fold {fold} does not exist."
        )
    return np.flatnonzero(assignment != fold), np.flatnonzero(assignment == fold)
