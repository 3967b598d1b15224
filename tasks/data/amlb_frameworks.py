"""AMLB's framework names and the adapters this project runs for them: the one table that both
`suites import-amlb` (a benchmark's frameworks in) and `report --reference` (AMLB's published results
beside this project's) read.

AMLB's results.csv writes each name as its frameworks file does (`RandomForest`); its command line
finds a framework whatever the case (`runbenchmark.py randomforest`), and so does this table. A name
not in it is refused by the import and left out of a reference, each in one sentence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class AmlbFramework:
    adapter: str  # as a suite names it: `name[@version]` (the version: its framework environment)
    # False where the adapter stands in for AMLB's framework without being it: imported (with `note`),
    # never set beside AMLB's published results as if it were the same framework.
    same: bool = True
    note: str = ""


AMLB_FRAMEWORKS: dict[str, AmlbFramework] = {
    "AutoGluon": AmlbFramework("autogluon"),
    "H2OAutoML": AmlbFramework("h2o"),
    "flaml": AmlbFramework("flaml"),
    "RandomForest": AmlbFramework("rf"),
    "TunedRandomForest": AmlbFramework(
        "rf", same=False,
        note="TunedRandomForest runs as rf (this project's random forest has no tuning of max_features)",
    ),
    "constantpredictor": AmlbFramework("constant"),
    # The name of AMLB's 2019 runs (its published 8c4h results): the constant predictor after encoding
    # the categoricals, which a constant prediction never reads.
    "constantpredictor_enc": AmlbFramework("constant"),
    # AMLB ships no entry for these libraries; its users declare them in a frameworks file of their
    # own under these names, and this project runs them as one adapter each.
    "lightgbm": AmlbFramework("lightgbm"),
    "catboost": AmlbFramework("catboost"),
    "xgboost": AmlbFramework("xgboost"),
    # Each in a framework environment of its own (its pins clash with the main one's, or it is not
    # in it): the suite names that environment's version, installed with `automl-eval frameworks install`.
    "TPOT": AmlbFramework("tpot@1.1.0"),
    "mljarsupervised": AmlbFramework("mljar@1.3.2"),
    "lightautoml": AmlbFramework("lightautoml@0.4.2"),
    "TabPFN": AmlbFramework("tabpfn@2.2.1"),
}
FRAMEWORKS: dict[str, str] = {name: entry.adapter for name, entry in AMLB_FRAMEWORKS.items()}
FRAMEWORK_NOTES: dict[str, str] = {name: entry.note for name, entry in AMLB_FRAMEWORKS.items() if entry.note}


def amlb_name(name: str) -> str | None:
    """AMLB's own spelling of `name` (the table's key), whatever its case; None for a name not in it."""
    if name in AMLB_FRAMEWORKS:
        return name
    return next((known for known in AMLB_FRAMEWORKS if known.lower() == name.lower()), None)


def adapter_name(framework_id: str) -> str:
    """`name[:variant]` of a framework id, without its environment's version: results of `tpot@1.1.0`
    sit beside AMLB's `TPOT` whatever version AMLB ran."""
    return framework_id.partition("@")[0]


def compared_adapter(name: str) -> str | None:
    """The adapter (without version) whose results sit beside AMLB's framework `name`; None where no
    adapter here is that framework."""
    spelled = amlb_name(name)
    entry = AMLB_FRAMEWORKS[spelled] if spelled is not None else None
    return adapter_name(entry.adapter) if entry is not None and entry.same else None


def not_compared(names: Iterable[str]) -> str:
    """One sentence for the AMLB names a reference leaves out, with why, or '' for none."""
    left_out = sorted({name for name in names if compared_adapter(name) is None})
    if not left_out:
        return ""
    reasons = [FRAMEWORK_NOTES.get(amlb_name(name) or name, "") for name in left_out]
    named = [f"{name} ({reason}, so not the same framework)" if reason else name
             for name, reason in zip(left_out, reasons, strict=True)]
    return (f"published frameworks left out, no adapter here is the same framework: {', '.join(named)} "
            f"(AMLB names this project runs: {', '.join(n for n in AMLB_FRAMEWORKS if compared_adapter(n))})")
