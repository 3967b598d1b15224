"""What the UI tests share: the browser's settings, the embedded suite they look at, its record."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
# Debian's chromium, headless, talking to nothing but the servers under test.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
UI_SUITE = "ui_compare"
UI_DATASET = "breast_cancer"
UI_FRAMEWORKS = ["constant", "hgb"]
TIMEOUT_MS = 90_000  # a loaded CI machine renders slowly; the tests assert what shows, not when


@dataclass
class EmbeddedUi:
    url: str  # the MLflow UI on the embedded store
    home: Path
    experiment_id: str
    execution_id: str
    job_runs: dict[str, str]  # framework -> its job run id
    data_version: str
