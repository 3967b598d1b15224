"""The image corruption families of the robustness evaluation (albumentations transforms).

They are registered with the other corruptions, hit only folds that hold images, grow with the
severity, repeat from a seed, and give an image card and its pixel table the very same images.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tasks.data.fold_data import load_fold
from tasks.evaluations.by_modality import evaluations_of
from tasks.evaluations.robustness import RobustnessSettings, case_seed
from tasks.evaluations.robustness.corruptions import CORRUPTIONS, FrameFacts, corrupt
from tasks.evaluations.robustness.images import IMAGE_CORRUPTIONS, IMAGE_FAMILY, corrupt_images
from tasks.images.codec import decode, encode_png
from tasks.images.layout import ImageLayout
from tasks.specs import DatasetSpec, load_dataset_spec

NAMES = [corruption.name for corruption in IMAGE_CORRUPTIONS]
FAMILIES = {"image_occlusion", "image_noise", "image_blur", "image_brightness_contrast", "image_colour_shift",
            "image_jpeg", "image_rotation", "image_pixelation"}


def image_layout(spec: DatasetSpec, columns: list[str]) -> ImageLayout | None:
    """Where robustness finds the fold's images: the dataset's modality's entry says."""
    return evaluations_of(spec.modality).images(spec, columns)


def picture(channels: int, seed: int = 0, side: int = 16) -> np.ndarray:
    """A smooth gradient with a bright square: blur, rotation and pixelation all change it."""
    ramp = np.linspace(30, 220, side, dtype=float)
    image = np.add.outer(ramp, ramp[::-1]) / 2
    image[side // 4: side // 2, side // 4: side // 2] = 250
    image = image + np.random.default_rng(seed).integers(0, 5, image.shape)
    stacked = np.stack([image * (0.6 + 0.2 * c) for c in range(channels)], axis=2)
    return np.clip(stacked, 0, 255).astype(np.uint8)


def frame_of(images: list[np.ndarray]) -> tuple[pd.DataFrame, ImageLayout]:
    height, width, channels = images[0].shape
    frame = pd.DataFrame({"image": [encode_png(image) for image in images]})
    return frame, ImageLayout("image", (height, width, channels), "tiny", column="image")


def test_the_eight_families_are_registered_with_the_other_corruptions() -> None:
    assert set(NAMES) == FAMILIES
    for name in NAMES:
        assert CORRUPTIONS[name].family == IMAGE_FAMILY and not CORRUPTIONS[name].unavailable
    assert set(NAMES) <= set(RobustnessSettings().corruptions)  # on by default, like the others
    # A table without images gives them nothing to hit (not applicable, never a failure).
    table = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [0.5, 0.1, 0.2]})
    facts = FrameFacts(roles={"a": "numeric", "b": "numeric"})
    assert all(CORRUPTIONS[name].targets(table, facts) == [] for name in NAMES)


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_family_grows_with_severity_and_repeats_from_its_seed(name: str, channels: int) -> None:
    images = [picture(channels, seed) for seed in range(6)]
    frame, layout = frame_of(images)
    corruption = next(c for c in IMAGE_CORRUPTIONS if c.name == name)

    def distance(severity: float, seed: int = 3) -> float:
        corrupted, mask = corrupt_images(layout, frame, corruption, severity, seed)
        after = np.stack([decode(data) for data in corrupted["image"]]).astype(float)
        changed = [a != b for a, b in zip(corrupted["image"], frame["image"], strict=True)]
        assert mask["image"].tolist() == changed
        return float(np.abs(after - np.stack(images)).mean())

    assert distance(0.0) == 0.0
    weak, strong = distance(0.25), distance(1.0)
    assert strong > 5 and strong > weak, (weak, strong)  # the strongest form really damages the image
    again, _ = corrupt_images(layout, frame, corruption, 0.5, 3)
    first, _ = corrupt_images(layout, frame, corruption, 0.5, 3)
    assert again["image"].tolist() == first["image"].tolist()  # the same seed: the same bytes


def test_a_corruption_keeps_the_images_shape_and_the_frames_other_columns() -> None:
    frame, layout = frame_of([picture(3, seed) for seed in range(3)])
    frame["note"] = ["a", "b", "c"]
    corrupted, mask = corrupt(frame, CORRUPTIONS["image_rotation"], ["image"], 0.5, lambda _: 11,
                              FrameFacts(roles={"image": "image", "note": "text"}, image=layout))
    assert corrupted["note"].tolist() == ["a", "b", "c"] and not mask["note"].any() and mask["image"].all()
    assert all(decode(data).shape == (16, 16, 3) for data in corrupted["image"])


def test_an_image_card_and_its_pixel_table_get_the_same_corrupted_images(built_catalog: Path) -> None:
    images, pixels = load_dataset_spec("digits"), load_dataset_spec("digits_pixels")
    on_images, on_pixels = load_fold(images, 0), load_fold(pixels, 0)
    layouts = [image_layout(images, list(on_images.X_test.columns)),
               image_layout(pixels, list(on_pixels.X_test.columns))]
    assert layouts[0].target == layouts[1].target == "image" and layouts[0].seed_key == layouts[1].seed_key
    assert layouts[1].pixel_columns[:2] == ("p0", "p1") and layouts[1].shape == (8, 8, 1)
    assert image_layout(load_dataset_spec("penguins"), ["bill_length_mm"]) is None
    # The seed a case gets depends on the image card, not on the table holding it.
    seed = case_seed(layouts[0].seed_key, 0, "image_noise", "image", 0.5, 0)
    for name in NAMES:
        corruption = next(c for c in IMAGE_CORRUPTIONS if c.name == name)
        out_images, _ = corrupt_images(layouts[0], on_images.X_test, corruption, 0.5, seed)
        out_pixels, mask = corrupt_images(layouts[1], on_pixels.X_test, corruption, 0.5, seed)
        decoded = np.stack([decode(data) for data in out_images["image"]]).reshape(len(out_images), -1)
        np.testing.assert_array_equal(decoded, out_pixels[list(layouts[1].pixel_columns)].to_numpy(), name)
        assert mask.to_numpy().any()
        # The pixel table keeps its column types: a tabular learner reads it as it was trained on it.
        assert out_pixels.dtypes.equals(on_pixels.X_test.dtypes)


def test_the_report_puts_a_pixel_tables_robustness_under_its_image_dataset() -> None:
    from tasks.report.images import image_datasets
    from tasks.report.robustness import images_together

    table = pd.DataFrame({"dataset": ["digits", "digits_pixels", "digits_pixels", "penguins"],
                          "framework": ["cnn", "hgb", "constant", "hgb"], "robust_auc": [0.4, 0.6, 1.0, 0.9]})
    together = images_together(table, image_datasets(table))
    assert together["dataset"].tolist() == ["digits", "digits", "digits", "penguins"]
    # The baseline keeps its name: it reads no pixel, and the robust ranking leaves it out by name.
    assert together["framework"].tolist() == ["cnn", "hgb (pixels)", "constant", "hgb"]
