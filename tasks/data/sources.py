"""The sources registry: how a card's ``source.loader`` key becomes data on disk.

A source is a function registered with ``@source("key")``. It takes the card and returns a
DataFrame (the materializer writes it, byte-reproducibly) or ``None`` when it wrote its own
files under ``datasets/`` (images, token files). Every module named ``tasks/data/sources_*.py``
is imported on first use, so adding a source file is all it takes to add sources.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from tasks.errors import UserError
from tasks.specs import DatasetSpec

SourceFunction = Callable[[DatasetSpec], pd.DataFrame | None]

_REGISTRY: dict[str, SourceFunction] = {}
_import_failures: dict[str, str] = {}  # module name -> why it could not be imported
_discovered = False


def source(key: str) -> Callable[[SourceFunction], SourceFunction]:
    """Register ``function`` as the source for cards whose ``source.loader`` is ``key``."""

    def register(function: SourceFunction) -> SourceFunction:
        if key in _REGISTRY and _REGISTRY[key] is not function:
            raise ValueError(
                f"source '{key}' is registered twice ({_REGISTRY[key].__module__}, {function.__module__})"
            )
        _REGISTRY[key] = function
        return function

    return register


def _discover() -> None:
    """Import every sources_* module next to this one (tabular, text, streams, ...)."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    package_dir = Path(__file__).resolve().parent
    for module in sorted(pkgutil.iter_modules([str(package_dir)]), key=lambda m: m.name):
        if module.name.startswith("sources_"):
            # A broken optional module must not hide the others: its sources are simply absent,
            # and a card that needs one gets a clear error from get_source().
            try:
                importlib.import_module(f"{__package__}.{module.name}")
            except ImportError as exc:
                _import_failures[module.name] = str(exc)


def registered_sources() -> dict[str, SourceFunction]:
    _discover()
    return dict(_REGISTRY)


def get_source(spec: DatasetSpec) -> SourceFunction | None:
    """The source function for a card, ``None`` for a user-provided file (no loader)."""
    key = spec.source.loader
    if key is None:
        return None
    _discover()
    if key not in _REGISTRY:
        broken = "; ".join(f"{name}: {why}" for name, why in _import_failures.items())
        hint = f" (modules that failed to import: {broken})" if broken else ""
        raise UserError(
            f"{spec.card_path}: field 'source.loader': unknown source '{key}'{hint}; "
            f"known sources: {', '.join(sorted(_REGISTRY)) or 'none'}."
        )
    return _REGISTRY[key]
