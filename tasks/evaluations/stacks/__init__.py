"""Serving stacks: the ways the serving evaluation puts the job's model behind an HTTP address.

Each stack is one module of this package with a ``STACK`` object (a ServingStack): its name, the
packages it needs, the tolerance its answers must keep from the model's in process, and how to make
its server for a job (a ScoringServer: started, waited for, always stopped). A new stack is one new
file here; the suite names stacks in ``serving.stacks``.
"""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from tasks.evaluations._scoring_server import ScoringServer
from tasks.plugins import Registry


class ServingStack(ABC):
    """One way to serve a job's model; all answer POST /invocations with MLflow's request format."""

    name: ClassVar[str]
    packages: ClassVar[tuple[str, ...]]  # import names the stack needs
    # Largest |served - in process| probability (or value, relative to the mean |value|) on the
    # test fold before any load: a stack over it reports no figures.
    parity_tolerance: ClassVar[float] = 1e-5

    def missing_packages(self) -> list[str]:
        return [package for package in self.packages if importlib.util.find_spec(package) is None]

    @abstractmethod
    def server(self, context: Any, folder: Path, cores: list[int], healthcheck_s: float) -> ScoringServer:
        """The stack's server for the job's model (not started), its files in `folder`; raises
        tasks.frameworks.capabilities.NotOffered with the reason when the model cannot use it."""


# Found by folder, as frameworks and evaluations are: every module here with a STACK object.
STACKS: Registry[ServingStack] = Registry("serving stack", "serving stacks", base=ServingStack,
                                          package=__name__, attribute="STACK")


def all_stacks() -> dict[str, ServingStack]:
    """Every stack module of this package, by its stack's name."""
    return STACKS.all()


def installed_stacks() -> list[str]:
    return sorted(name for name, stack in all_stacks().items() if not stack.missing_packages())


def unusable_stack_reason(names: list[str]) -> str | None:
    """One sentence for the first name that is no stack, or a stack whose packages are missing."""
    stacks = all_stacks()
    installed = ", ".join(installed_stacks()) or "none"
    for name in names:
        if name not in stacks:
            return (f"serving.stacks names '{name}', which is not a serving stack; the stacks installed "
                    f"here are {installed}")
        missing = stacks[name].missing_packages()
        if missing:
            return (f"serving.stacks names '{name}', but its package{'s' if len(missing) > 1 else ''} "
                    f"{', '.join(missing)} {'are' if len(missing) > 1 else 'is'} not installed; the stacks "
                    f"installed here are {installed}")
    return None
