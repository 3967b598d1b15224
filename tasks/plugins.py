"""One small plug-in registry, for the framework adapters and the post-job evaluations alike.

An entry is a name and where its object lives, ``"package.module:OBJECT"`` (or
``"/path/to/file.py:OBJECT"`` for a file outside the package); the object is imported when it is
first asked for. Entries are found by folder: every module of a package that defines the registry's
attribute (``ADAPTER``, ``EVALUATION``) is one, named by that object's ``name``, so a new plug-in
is one new file and nothing else. Plug-ins that live outside the project are found the same way in
the packages named by AUTOML_EVAL_PLUGINS (importable package names, comma-separated): every
module of such a package is looked into by every registry, so one package may add a framework, a
metric, an evaluation and a report section at once. Extra single files (tests use ones that
misbehave on purpose) are added with a registry's own environment variable holding file paths
separated by the OS path separator.

An unknown name is one sentence that lists the known ones and suggests the closest (difflib).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
import pkgutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, Generic, Protocol, TypeVar, cast

from tasks.errors import UserError


class Named(Protocol):
    """What every plug-in object has: the name it is registered and asked for by."""

    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)

PLUGIN_PACKAGES_ENV = "AUTOML_EVAL_PLUGINS"


def plugin_packages() -> tuple[str, ...]:
    """The packages named in AUTOML_EVAL_PLUGINS, in the order given."""
    return tuple(filter(None, (name.strip() for name in os.environ.get(PLUGIN_PACKAGES_ENV, "").split(","))))


@dataclass(frozen=True)
class Entry:
    """A plug-in by name: `target` is "module:OBJECT" or "/path/file.py:OBJECT"."""

    name: str
    target: str


def load_target(target: str, *, module_prefix: str = "automl_eval_plugin") -> object:
    """The object a "module:OBJECT" (or "file.py:OBJECT") target names, importing its module;
    None when the module has no such object."""
    where, _, attribute = target.rpartition(":")
    return getattr(_module(where, module_prefix), attribute, None)


@cache
def _module(where: str, module_prefix: str) -> ModuleType:
    if not where.endswith(".py"):
        return importlib.import_module(where)
    path = Path(where)
    name = f"{module_prefix}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise FileNotFoundError(path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # pydantic resolves a settings model's hints through it
    spec.loader.exec_module(module)
    return module


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """"; did you mean 'X'?" for the closest known name, or '' when none is close."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


class Registry(Generic[T]):
    """Plug-ins of one kind: the modules of `package` that define `attribute`, plus extra files.

    `kind` names one plug-in in messages ("framework"), `plural` several ("frameworks"); `base` is
    the type every plug-in object must have; modules named in `skip` (and private ones, `_x`) are
    not looked into. `package` may be "" for a kind whose shipped entries are not modules (the
    metrics, one tuple): then only the plug-in packages and extra files are looked into.
    """

    # `base` is typed loosely because it is usually an abstract class, which mypy does not accept as
    # type[T]; the annotation `Registry[Base]` fixes T, and `_object` checks instances against `base`.
    def __init__(self, kind: str, plural: str, *, base: type[Any], package: str, attribute: str,
                 skip: frozenset[str] = frozenset(), extra_env: str = "") -> None:
        self.kind, self.plural, self.base = kind, plural, base
        self.package, self.attribute, self.skip, self.extra_env = package, attribute, skip, extra_env

    # ------------------------------------------------------------ entries

    def entries(self) -> dict[str, Entry]:
        """Every entry by name: the package's, then the plug-in packages', then those of the extra
        files (later ones win)."""
        found = dict(self._scanned(self.package, self.skip)) if self.package else {}
        for package in plugin_packages():
            found.update(self._scanned(package, frozenset(), named_by=PLUGIN_PACKAGES_ENV))
        extra = os.environ.get(self.extra_env, "") if self.extra_env else ""
        found.update(self._extra(extra))
        return found

    @cache  # noqa: B019 - one registry object per kind, alive for the whole process
    def _scanned(self, package_name: str, skip: frozenset[str], named_by: str = "") -> dict[str, Entry]:
        try:
            package = importlib.import_module(package_name)
        except ImportError as error:
            if not named_by:
                raise
            raise UserError(f"{named_by}: cannot import the plug-in package '{package_name}' ({error}); "
                            "fix the name or put its folder on PYTHONPATH.") from error
        found: dict[str, Entry] = {}
        for module_info in pkgutil.iter_modules(getattr(package, "__path__", [])):
            if module_info.name.startswith("_") or module_info.name in skip:
                continue
            target = f"{package_name}.{module_info.name}:{self.attribute}"
            try:
                plugin = self._object(target, must=False)
            except Exception as error:  # a plug-in's own defect: named, not a traceback
                if not named_by:
                    raise
                raise UserError(f"{named_by}: the plug-in module {package_name}.{module_info.name} failed to "
                                f"import ({type(error).__name__}: {error}); fix that module.") from error
            if plugin is not None:
                found[str(plugin.name)] = Entry(str(plugin.name), target)
        return found

    @cache  # noqa: B019
    def _extra(self, spec: str) -> dict[str, Entry]:
        found: dict[str, Entry] = {}
        for file in filter(None, spec.split(os.pathsep)):
            path = Path(file)
            if not path.is_file():
                raise UserError(f"{self.extra_env}: no {self.kind} module at {path}; fix the path.")
            target = f"{path}:{self.attribute}"
            plugin = self._loaded(target)
            found[str(plugin.name)] = Entry(str(plugin.name), target)
        return found

    def _object(self, target: str, *, must: bool) -> T | None:
        plugin = load_target(target, module_prefix=f"automl_eval_extra_{self.kind.replace(' ', '_')}")
        if isinstance(plugin, self.base):
            return cast(T, plugin)
        if must:
            where = target.rpartition(":")[0]
            raise UserError(f"{where}: defines no {self.attribute} (a {self.base.__name__} instance); "
                            "add one.")
        return None

    # ------------------------------------------------------------ objects

    def names(self) -> list[str]:
        return sorted(self.entries())

    def all(self) -> dict[str, T]:
        """Every plug-in object by name."""
        return {name: self._loaded(entry.target) for name, entry in self.entries().items()}

    def get(self, name: str) -> T:
        """The plug-in called `name`, or one sentence naming the known ones and the closest."""
        entries = self.entries()
        if name not in entries:
            known = ", ".join(sorted(entries)) or "none"
            raise UserError(f"unknown {self.kind} '{name}'; known {self.plural}: {known}"
                            f"{did_you_mean(name, entries) or '.'}")
        return self._loaded(entries[name].target)

    def _loaded(self, target: str) -> T:
        plugin = self._object(target, must=True)
        assert plugin is not None  # must=True raised otherwise
        return plugin
