"""Serving stacks: the ways the serving evaluation puts the job's model behind an HTTP address.

Each stack is one module of this package with a ``STACK`` object (a ServingStack): its name, the
packages it needs, the tolerance its answers must keep from the model's in process, how to make
its server for a job (a ScoringServer: started, waited for, always stopped), and its request: the
path the load posts to and how rows become a body and an answer becomes rows (MLflow's
``dataframe_split`` and ``predictions`` unless the stack says otherwise). A new stack is one new
file here; the suite names stacks in ``serving.stacks``.
"""

from __future__ import annotations

import importlib.util
import json
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from tasks.evaluations._scoring_server import ScoringServer
from tasks.plugins import Registry


class StackNotInstalled(Exception):
    """The stack's own environment is not there; the message names the command that installs it."""


class ServingStack(ABC):
    """One way to serve a job's model; by default it takes POST /invocations in MLflow's format."""

    name: ClassVar[str]
    packages: ClassVar[tuple[str, ...]]  # import names the stack needs (in the main environment)
    # Largest |served - in process| probability (or value, relative to the mean |value|) on the
    # test fold before any load: a stack over it reports no figures.
    parity_tolerance: ClassVar[float] = 1e-5
    request_path: ClassVar[str] = "/invocations"

    def missing_packages(self) -> list[str]:
        return [package for package in self.packages if importlib.util.find_spec(package) is None]

    def installed(self) -> bool:
        """Whether it can serve here (a stack with an environment of its own: whether that is
        installed; without it the stack is skipped, saying how to install it)."""
        return not self.missing_packages()

    def body(self, rows: pd.DataFrame) -> bytes:
        """One request of these rows (as a client sends them): MLflow's dataframe_split."""
        split = json.loads(rows.to_json(orient="split", index=False, date_format="iso"))
        return json.dumps({"dataframe_split": {"columns": split["columns"], "data": split["data"]}}).encode()

    def answer_rows(self, text: str) -> pd.DataFrame:
        """An answer's rows: `prediction` and `proba_CLASS` columns, one row per row asked."""
        return pd.DataFrame(json.loads(text)["predictions"])

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
    return sorted(name for name, stack in all_stacks().items() if stack.installed())


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
