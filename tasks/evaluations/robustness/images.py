"""The image corruptions of a robustness case: albumentations transforms on the test fold's images.

Each image corruption is one albumentations transform whose strength grows with the case's
severity (0: the clean image, 1: the strongest form, see SEVERITY); every image of the test fold is
corrupted, so for these families a severity is an intensity, not a share of cells. The transforms
are albumentations' own (ImageNet-C's families, as image robustness studies use them); nothing here
touches a pixel except through them, and through OpenCV/Pillow to decode and encode.

The same corrupted images reach every framework: an image dataset's encoded images (the CNN) and
its pixel table's rows (`pixels_of`, tabular learners on the flattened image) are decoded to the
same uint8 arrays, corrupted from the same seeds (keyed by the image card's name, not by the
table's data version) in the same row order, and written back as PNG bytes or flattened pixels.
Their degradation curves and breaking points are therefore comparable.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tasks.images.card import image_card, image_column, pixels_of
from tasks.images.codec import decode, encode_png
from tasks.specs import DatasetSpec, load_dataset_spec

IMAGE_FAMILY = "image"
# albumentations asks PyPI for a newer release at import unless told not to: nothing here may reach
# a hub at run time (set before its first import, in _albumentations).
NO_UPDATE_CHECK = "NO_ALBUMENTATIONS_UPDATE"


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


def image_layout(spec: DatasetSpec, columns: list[str]) -> ImageLayout | None:
    """The test fold's images: those of an image card, or of the image card a pixel table is made
    from; None for any other dataset (the image corruptions then have nothing to hit)."""
    if spec.modality == "image":
        card = image_card(spec)
        return ImageLayout(image_column(spec), (card.height, card.width, card.channels), spec.name,
                           column=image_column(spec))
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


def _albumentations() -> tuple[Any, Any]:
    """albumentations and OpenCV, imported on first use: they take seconds to import (albumentations
    imports torch), and only a case with an image corruption needs them."""
    os.environ.setdefault(NO_UPDATE_CHECK, "1")
    import albumentations
    import cv2

    return albumentations, cv2


def preload() -> None:
    """Import albumentations before the first case, so its seconds of import are the stage's set-up,
    not the first case's cost (from which the draws of later cases are planned)."""
    _albumentations()


# How each corruption's strength follows the severity s in (0, 1], for images of `height` x `width`
# pixels: the parameters of its albumentations transform.
def _occlusion(s: float, height: int, width: int) -> Any:
    A, _ = _albumentations()
    # One hole covering the share s of the image, filled black; its sides in whole pixels (CoarseDropout
    # reads a range reaching 1 as pixels, so a share of 1.0 would be one pixel).
    edge = float(np.sqrt(s))
    rows, columns = max(1, round(edge * height)), max(1, round(edge * width))
    return A.CoarseDropout(num_holes_range=(1, 1), hole_height_range=(rows, rows),
                           hole_width_range=(columns, columns), fill=0, p=1.0)


def _noise(s: float, height: int, width: int) -> Any:
    A, _ = _albumentations()
    return A.GaussNoise(std_range=(0.5 * s, 0.5 * s), mean_range=(0.0, 0.0), per_channel=True, p=1.0)


def _blur(s: float, height: int, width: int) -> Any:
    A, _ = _albumentations()
    sigma = max(0.05, s * min(height, width) / 4)
    return A.GaussianBlur(blur_limit=0, sigma_limit=(sigma, sigma), p=1.0)


def _brightness_contrast(s: float, height: int, width: int) -> Any:
    A, _ = _albumentations()
    return A.RandomBrightnessContrast(brightness_limit=(0.5 * s, 0.5 * s), contrast_limit=(-s, -s), p=1.0)


def _colour_shift(s: float, height: int, width: int) -> Any:
    A, _ = _albumentations()
    shift = (-255.0 * s, 255.0 * s)
    return A.RGBShift(r_shift_limit=shift, g_shift_limit=shift, b_shift_limit=shift, p=1.0)


def _jpeg(s: float, height: int, width: int) -> Any:
    A, _ = _albumentations()
    quality = int(np.clip(round(100 - 99 * s), 1, 100))
    return A.ImageCompression(quality_range=(quality, quality), compression_type="jpeg", p=1.0)


def _rotation(s: float, height: int, width: int) -> Any:
    A, cv2 = _albumentations()
    angle = 180.0 * s
    return A.Rotate(limit=(angle, angle), border_mode=cv2.BORDER_CONSTANT, fill=0, p=1.0)


def _pixelation(s: float, height: int, width: int) -> Any:
    A, cv2 = _albumentations()
    scale = float(np.clip(1.0 - s, 1.0 / min(height, width), 0.99))
    return A.Downscale(scale_range=(scale, scale),
                       interpolation_pair={"downscale": cv2.INTER_AREA, "upscale": cv2.INTER_NEAREST}, p=1.0)


@dataclass(frozen=True)
class ImageCorruption:
    name: str
    description: str  # what it is, with the albumentations transform behind it
    severity: str  # what a severity of s means
    transform: Callable[[float, int, int], Any]  # (severity, height, width) -> an albumentations transform


IMAGE_CORRUPTIONS: list[ImageCorruption] = [
    ImageCorruption("image_occlusion", "occlusion (cut-out): one black rectangle (albumentations "
                    "CoarseDropout)",
                    "the rectangle covers the share s of the image, at a random place", _occlusion),
    ImageCorruption("image_noise", "Gaussian pixel noise (albumentations GaussNoise)",
                    "standard deviation 0.5 s of the pixel range, per channel", _noise),
    ImageCorruption("image_blur", "Gaussian blur (albumentations GaussianBlur)",
                    "sigma s x (the smaller side) / 4 pixels", _blur),
    ImageCorruption("image_brightness_contrast", "brighter and flatter (albumentations "
                    "RandomBrightnessContrast)", "brightness +0.5 s, contrast -s (flat at 1)",
                    _brightness_contrast),
    ImageCorruption("image_colour_shift", "colour shift: each channel shifted by its own random amount "
                    "(albumentations RGBShift; on a grey image, its one channel's intensity)",
                    "shifts drawn from +-255 s", _colour_shift),
    ImageCorruption("image_jpeg", "JPEG compression artefacts (albumentations ImageCompression)",
                    "JPEG quality 100 - 99 s", _jpeg),
    ImageCorruption("image_rotation", "rotation about the centre, black corners (albumentations Rotate)",
                    "180 s degrees", _rotation),
    ImageCorruption("image_pixelation", "pixelation: shrunk, then enlarged by nearest neighbour "
                    "(albumentations Downscale)", "the side scaled to 1 - s (one block at 1)", _pixelation),
]


def corrupt_images(layout: ImageLayout, frame: pd.DataFrame, corruption: ImageCorruption, severity: float,
                   seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every image of `frame` through the corruption at `severity`, from `seed` (one albumentations
    pipeline, its random state seeded once, the images in the frame's order)."""
    A, _ = _albumentations()
    images = layout.images(frame)
    if severity <= 0 or not images:
        return frame.copy(), pd.DataFrame(False, index=frame.index, columns=frame.columns)
    height, width, _ = layout.shape
    pipeline = A.Compose([corruption.transform(min(1.0, severity), height, width)], seed=seed)
    corrupted = []
    for image in images:
        out = np.asarray(pipeline(image=image)["image"], dtype=np.uint8)
        corrupted.append(out.reshape(image.shape))
    return layout.written(frame, corrupted)
