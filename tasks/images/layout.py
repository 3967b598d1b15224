"""Where a frame holds a dataset's images: one column of encoded images, or one column per pixel.

An image card's frame holds its images encoded (PNG bytes) in its image column; a pixel table (a
tabular card whose `pixels_of` names an image card) holds the same images flattened, one numeric
column per pixel. Both read as the same uint8 arrays and are written back the same way, so what
is done to the images (robustness's image corruptions) reaches both alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tasks.images.card import image_card, image_column, pixels_of
from tasks.images.codec import decode, encode_png
from tasks.specs import DatasetSpec, load_dataset_spec


@dataclass(frozen=True)
class ImageLayout:
    """Where a test fold holds its images: one column of encoded images (an image card), or one
    numeric column per pixel, row by row and channel last (a pixel table)."""

    target: str  # the name a case gives the image: the image card's image column
    shape: tuple[int, int, int]  # height, width, channels (the image card's)
    seed_key: str  # the image card's name: the card and its pixel table draw the same corruptions
    column: str | None = None  # encoded images (PNG bytes), for an image card
    pixel_columns: tuple[str, ...] = ()  # for a pixel table

    def images(self, frame: pd.DataFrame) -> list[np.ndarray]:
        """The frame's images as uint8 arrays (height, width, channels)."""
        if self.column is not None:
            return [decode(data) for data in frame[self.column].tolist()]
        values = frame[list(self.pixel_columns)].to_numpy(dtype=float)
        pixels = np.clip(np.rint(np.nan_to_num(values, nan=0.0)), 0, 255).astype(np.uint8)
        return list(pixels.reshape(len(frame), *self.shape))

    def written(self, frame: pd.DataFrame, images: list[np.ndarray]) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The frame with `images` in place of its own, and the mask of the cells that changed."""
        data = frame.copy()
        mask = pd.DataFrame(False, index=frame.index, columns=frame.columns)
        if self.column is not None:
            encoded = [encode_png(image) for image in images]
            original = frame[self.column].tolist()
            mask[self.column] = [new != old for new, old in zip(encoded, original, strict=True)]
            data[self.column] = pd.Series(encoded, index=frame.index, dtype=object)
            return data, mask
        columns = list(self.pixel_columns)
        flat = np.stack(images).reshape(len(frame), -1) if images else np.zeros((0, len(columns)))
        before = frame[columns].to_numpy(dtype=float)
        mask[columns] = flat != before
        for position, column in enumerate(columns):
            kind = frame[column].dtype
            data[column] = flat[:, position].astype(kind if pd.api.types.is_numeric_dtype(kind) else float)
        return data, mask


def card_layout(spec: DatasetSpec, columns: list[str]) -> ImageLayout:
    """The images of an image card: its image column, encoded."""
    card = image_card(spec)
    return ImageLayout(image_column(spec), (card.height, card.width, card.channels), spec.name,
                       column=image_column(spec))


def pixel_table_layout(spec: DatasetSpec, columns: list[str]) -> ImageLayout | None:
    """The images of the image card a pixel table is made from; None for any other table (and for a
    pixel table whose `columns` are not the image's pixels)."""
    source = pixels_of(spec)
    if source is None:
        return None
    images = load_dataset_spec(source)
    card = image_card(images)
    pixels = tuple(f"p{index}" for index in range(card.height * card.width * card.channels))
    if not set(pixels) <= set(columns):
        return None  # a pixel table whose columns are not the image's pixels: nothing to corrupt
    return ImageLayout(image_column(images), (card.height, card.width, card.channels), images.name,
                       pixel_columns=pixels)
