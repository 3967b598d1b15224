"""The image corruptions of a robustness case: albumentations transforms on the test fold's images.

Each image corruption is one albumentations transform whose strength grows with the case's
severity (0: the clean image, 1: the strongest form, see SEVERITY); every image of the test fold is
corrupted, so for these families a severity is an intensity, not a share of cells. The transforms
are albumentations' own (ImageNet-C's families, as image robustness studies use them); nothing here
touches a pixel except through them, and through OpenCV/Pillow to decode and encode.

The same corrupted images reach every framework: an image dataset's encoded images (the CNN) and
its pixel table's rows (`pixels_of`, tabular learners on the flattened image) are read through an
`ImageLayout` (tasks/images/layout.py, chosen by the modality's evaluations entry) as the same
uint8 arrays, corrupted from the same seeds (keyed by the image card's name, not by the
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

from tasks.images.layout import ImageLayout

IMAGE_FAMILY = "image"
# albumentations asks PyPI for a newer release at import unless told not to: nothing here may reach
# a hub at run time (set before its first import, in _albumentations).
NO_UPDATE_CHECK = "NO_ALBUMENTATIONS_UPDATE"


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
