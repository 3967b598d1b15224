"""The data gate's image checks: every image decodes, has the card's size and channels, and every
label is one of the card's classes.

Each check is (name, passed, sentence, observed), as the gate reports it (tasks/data/validate.py);
a failure is one sentence naming the file (the dataset's file and the image's row) and the fix.
The duplicate check across folds is the gate's own (no_train_test_duplicates), on content hashes.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from tasks.images.card import ImageSpec
from tasks.images.codec import DECODE_ERRORS, decode

ImageCheck = tuple[str, bool, str, Any]
# How many bad rows a sentence lists before "and N more".
SHOWN = 3


def _rows(rows: list[int]) -> str:
    shown = ", ".join(str(row) for row in rows[:SHOWN])
    return shown + (f" and {len(rows) - SHOWN} more" if len(rows) > SHOWN else "")


def image_checks(
    name: str, file: str, images: pd.Series, labels: pd.Series, card: ImageSpec
) -> list[ImageCheck]:
    """The checks of one dataset's images (`images`: encoded bytes, one per data row)."""
    undecodable: list[int] = []
    empty: list[int] = []
    wrong_size: list[int] = []
    wrong_channels: list[int] = []
    seen_size: tuple[int, int] | None = None
    seen_channels: int | None = None
    first_error = ""
    for row, data in enumerate(images.tolist(), start=1):
        if not data:
            empty.append(row)
            continue
        try:
            pixels = decode(data)
        except DECODE_ERRORS as exc:
            undecodable.append(row)
            first_error = first_error or (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            continue
        height, width, channels = pixels.shape
        if (height, width) != (card.height, card.width):
            wrong_size.append(row)
            seen_size = seen_size or (height, width)
        if channels != card.channels:
            wrong_channels.append(row)
            seen_channels = seen_channels if seen_channels is not None else channels
    checks: list[ImageCheck] = [
        ("images_not_empty", not empty,
         f"{name}: {file} data row {_rows(empty)} holds a 0-byte image; replace the file or remove its row."
         if empty else "", len(empty)),
        ("images_decode", not undecodable,
         f"{name}: {file} data row {_rows(undecodable)} does not decode as an image ({first_error}); "
         "replace the corrupt file or remove its row." if undecodable else "", len(undecodable)),
        ("image_size", not wrong_size,
         f"{name}: {file} data row {_rows(wrong_size)} is {seen_size[0]}x{seen_size[1]} pixels, not the "
         f"card's {card.height}x{card.width}; resize the image or fix image.height/width in the card."
         if wrong_size and seen_size else "", len(wrong_size)),
        ("image_channels", not wrong_channels,
         f"{name}: {file} data row {_rows(wrong_channels)} has {seen_channels} channels, not the card's "
         f"{card.channels}; convert the image or fix image.channels in the card." if wrong_channels else "",
         len(wrong_channels)),
    ]
    declared = set(card.classes)
    text = labels.astype(object).where(labels.notna(), None).map(str, na_action="ignore")
    unknown = sorted({label for label in text.dropna() if label not in declared})
    checks.append((
        "labels_declared", not unknown,
        f"{name}: {file} holds labels {', '.join(repr(u) for u in unknown[:SHOWN])} outside the card's "
        "image.classes; fix the labels or add the classes to the card." if unknown else "", unknown))
    return checks
