"""Lists inside a sentence stay short at any scale: a count and the first few names, never hundreds.

A message that names files, rows or jobs is read by a person; a folder of 200 images or a suite of
500 jobs must still give one readable line. The whole list belongs in a file or in `--json`.
"""

from __future__ import annotations

from collections.abc import Iterable

SHOWN = 5  # names written out before "and N more"


def few(names: Iterable[object], shown: int = SHOWN) -> str:
    """'a, b, c' for up to `shown` names; 'a, b, c, d, e and 195 more (200 in all)' beyond that."""
    items = [str(name) for name in names]
    if len(items) <= shown:
        return ", ".join(items)
    return f"{', '.join(items[:shown])} and {len(items) - shown} more ({len(items)} in all)"
