"""Modality combinations: the same aligned table, with only some streams' features offered.

A combination is named `DATASET[STREAM+STREAM]`, e.g. `basic_motions[acc]`, and is a dataset like
any other: same file, same folds, same data version; the features of the other streams get the
role `ignore`, so every framework trains on the chosen streams only. A suite asks for them with
`modality_combinations: all` (every stream alone, every pair, ..., all streams) or by listing names.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from tasks.errors import UserError


# What this module reads of a dataset card and a suite (tasks/specs.py, which imports this module).
class Card(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def modality(self) -> str: ...

    @property
    def card_path(self) -> str | None: ...

    @property
    def columns(self) -> Mapping[str, str]: ...

    @property
    def streams(self) -> dict[str, Any] | None: ...

    def model_dump(self) -> dict[str, Any]: ...


class SuiteDatasets(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def datasets(self) -> list[str]: ...

    @property
    def model_extra(self) -> dict[str, Any] | None: ...


CardT = TypeVar("CardT", bound=Card)

_NAME = re.compile(r"^(?P<base>[^\[\]]+)\[(?P<streams>[^\[\]]+)\]$")
STREAM_JOIN = "+"
COMBINATION_FIELD = "modality_combination"  # the field of a combination's spec: "acc+gyro"
FEATURE_SEPARATOR = "__"  # feature column = STREAM__COLUMN__STAT, so a stream owns a prefix


def split_name(name: str) -> tuple[str, list[str] | None]:
    """`basic_motions[acc+gyro]` -> ("basic_motions", ["acc", "gyro"]); a plain name -> (name, None)."""
    match = _NAME.match(name)
    if not match:
        return name, None
    return match["base"], [s.strip() for s in match["streams"].split(STREAM_JOIN)]


def combination_name(base: str, streams: list[str] | tuple[str, ...]) -> str:
    return f"{base}[{STREAM_JOIN.join(streams)}]"


def stream_names(spec: Card) -> list[str]:
    streams = spec.streams or {}
    return list(streams) if isinstance(streams, dict) else []


def all_combinations(spec: Card) -> list[str]:
    """Each stream alone, then pairs, ..., then all streams, in card order."""
    names = stream_names(spec)
    return [
        combination_name(spec.name, subset)
        for size in range(1, len(names) + 1)
        for subset in itertools.combinations(names, size)
    ]


def restrict(spec: CardT, streams: list[str]) -> CardT:
    """The spec of one combination: other streams' features become `ignore`."""

    where = spec.card_path or spec.name
    known = stream_names(spec)
    if spec.modality != "multimodal" or not known:
        raise UserError(f"dataset '{spec.name}' has no streams, so '{combination_name(spec.name, streams)}' "
                        f"names no modality combination; use '{spec.name}'.")
    unknown = [s for s in streams if s not in known]
    if unknown or not streams or len(set(streams)) != len(streams):
        asked = combination_name(spec.name, streams)
        raise UserError(f"{where}: '{asked}' names streams {unknown or streams} not (or twice) among "
                        f"its streams {', '.join(known)}; pick from those.")
    chosen = [s for s in known if s in streams]  # card order, whatever order the name used
    columns: dict[str, Any] = {}
    for column, role in spec.columns.items():
        stream = column.split(FEATURE_SEPARATOR, 1)[0] if FEATURE_SEPARATOR in column else None
        columns[column] = "ignore" if stream in known and stream not in chosen else role
    fields = spec.model_dump()
    fields.update(name=combination_name(spec.name, chosen), columns=columns)
    fields[COMBINATION_FIELD] = STREAM_JOIN.join(chosen)
    return type(spec)(**fields)  # the card's own class: specs import this module, not the other way


def combination_spec(name: str, load_base: Callable[[str], CardT]) -> CardT:
    """Load `BASE[STREAMS]` through `load_base(BASE)` and restrict it."""
    base, streams = split_name(name)
    if streams is None:
        return load_base(name)
    return restrict(load_base(base), streams)


def base_name(name: str) -> str:
    return split_name(name)[0]


def expand_datasets(suite: SuiteDatasets, load_base: Callable[[str], Card]) -> list[str]:
    """The suite's datasets with `modality_combinations: all` applied to its multimodal datasets."""
    wanted = (suite.model_extra or {}).get("modality_combinations")
    if wanted in (None, False, "none"):
        return list(suite.datasets)
    if wanted != "all":
        raise UserError(f"suite '{suite.name}': field 'modality_combinations' must be 'all' or 'none', "
                        f"not {wanted!r}; or list combinations like 'dataset[stream+stream]' in datasets.")
    expanded: list[str] = []
    for name in suite.datasets:
        spec = load_base(name)
        names = all_combinations(spec) if split_name(name)[1] is None and stream_names(spec) else [name]
        expanded.extend(n for n in names if n not in expanded)
    return expanded
