"""How the CLI prints: rich tables at full width even when piped, and `--json` for scripts.

Rich lays a table out to the console's width, 80 columns when stdout is not a terminal, and cuts
cells to fit ("daphn…"). Piped output (CI logs, files, grep) gets each table at its natural width.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

_UNBOUNDED = 100_000  # columns: as wide as the table wants


def print_table(console: Console, table: Table) -> None:
    """A table on a terminal as rich lays it out; elsewhere at its full natural width."""
    if console.is_terminal:
        console.print(table)
        return
    natural = console.measure(table, options=console.options.update_width(_UNBOUNDED)).maximum
    shown_width = console.width
    console.width = max(natural, shown_width)  # print(width=) is capped at the console's width
    try:
        console.print(table, crop=False)
    finally:
        console.width = shown_width


def print_json(payload: Any) -> None:
    """One JSON document on stdout (no colours, no wrapping), for `--json`; NaN becomes null."""
    sys.stdout.write(json.dumps(_json_safe(payload), indent=2, default=str, allow_nan=False) + "\n")
    sys.stdout.flush()


def _json_safe(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalars
        return _json_safe(value.item())
    return value


def frame_records(frame: Any) -> list[dict[str, Any]]:
    """A pandas DataFrame as a list of row mappings (the rows its table shows)."""
    return [dict(zip(map(str, frame.columns), row, strict=True)) for row in frame.itertuples(index=False)]


def table_rows(table: Table) -> list[dict[str, str]]:
    """The rows of a rich table as {header: cell text}: what `--json` prints for a table."""
    headers = [str(column.header) for column in table.columns]
    cells = [list(column.cells) for column in table.columns]
    return [
        {header: _plain_text(column[row]) for header, column in zip(headers, cells, strict=True)}
        for row in range(table.row_count)
    ]


def _plain_text(cell: Any) -> str:
    from rich.text import Text

    return Text.from_markup(cell).plain if isinstance(cell, str) else str(cell)
