"""What an execution that ran in rounds records on its parent run: the `adaptive:` settings it ran
with (tag `adaptive`, its rounds within the run's folds) and the cells it reopened for a regression
since the previous execution (tag `adaptive_reopened`). Its report and the next execution read
these from the record, whatever the suite file says by then.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from tasks.adaptive import Cell
from tasks.specs import AdaptiveSettings
from tasks.tracking import store

ADAPTIVE_TAG = "adaptive"
REOPENED_TAG = "adaptive_reopened"


def record_adaptive(execution_id: str, settings: AdaptiveSettings, reopened: Iterable[Cell] = ()) -> None:
    """Tag the parent run with the settings and the reopened cells (`[[dataset, framework], ...]`)."""
    client = store.client()
    with store.write_lock:
        client.set_tag(execution_id, ADAPTIVE_TAG, settings.model_dump_json())
        client.set_tag(execution_id, REOPENED_TAG, json.dumps(sorted([list(cell) for cell in reopened])))


def recorded_adaptive(tags: Mapping[str, Any]) -> tuple[AdaptiveSettings | None, set[Cell]]:
    """The settings and reopened cells an execution's tags hold; (None, set()) for an execution that
    did not run in rounds (or recorded before these tags existed, or by hand in a form not read)."""
    try:
        settings = AdaptiveSettings.model_validate_json(str(tags.get(ADAPTIVE_TAG) or ""))
        cells = json.loads(str(tags.get(REOPENED_TAG) or "[]"))
    except (ValidationError, ValueError):
        return None, set()
    return settings, {(str(dataset), str(framework)) for dataset, framework in cells}
