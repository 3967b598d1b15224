"""The image modality's data: cards, files from a labels table or a Parquet of PNGs, the gate's
image checks (each failure one sentence naming the file and the fix), content-hash folds, the
catalog's sources, and top-5 accuracy."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from jobs_support.tiny_project import IMAGE_SIDE, image_pixels, make_image_project
from PIL import Image

from tasks.data import folds, materialize, sources_images
from tasks.data.load import read_typed
from tasks.data.validate import benchmark_checks, validate_dataset
from tasks.errors import UserError
from tasks.images.card import image_card
from tasks.images.codec import content_hash, decode, encode_png
from tasks.metric_registry import Predictions, get_metric
from tasks.specs import load_dataset_spec


@pytest.fixture
def image_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path))
    make_image_project(tmp_path, rows=24, storage="files")
    (tmp_path / "params.yaml").write_text("folds: {k: 2, seed: 0}\n")
    return tmp_path


def _card():  # noqa: ANN202 - the multiclass card of the image project, re-read after each change
    return load_dataset_spec("tiny_image_multiclass")


def _image_file(home: Path, row: int) -> Path:
    return home / "datasets" / "tiny_image_multiclass" / "images" / f"{row}.png"


def _failed(spec) -> dict[str, str]:  # noqa: ANN001 - a DatasetSpec
    frame = read_typed(spec, require_columns=False)
    return {check.check: check.sentence for check in benchmark_checks(spec, frame) if not check.success}


def test_png_round_trip_is_byte_stable_and_hashes_pixels_not_bytes() -> None:
    pixels = image_pixels("top", np.random.default_rng(0))
    assert encode_png(pixels) == encode_png(pixels.copy())
    assert decode(encode_png(pixels)).shape == (IMAGE_SIDE, IMAGE_SIDE, 1)
    other = io.BytesIO()
    Image.fromarray(pixels).save(other, format="PNG", compress_level=1)  # other bytes, same picture
    assert other.getvalue() != encode_png(pixels)
    assert content_hash(decode(other.getvalue())) == content_hash(decode(encode_png(pixels)))


def test_a_labels_table_of_files_passes_the_gate(image_home: Path) -> None:
    materialize.materialize(_card())  # a user's files: folds computed and saved
    outcome = validate_dataset(_card())
    assert outcome.ok, outcome.failures
    assert image_card(_card()).classes == ["top", "middle", "bottom"]


def test_the_same_image_never_sits_on_both_sides_of_a_fold(image_home: Path) -> None:
    table = image_home / "datasets" / "tiny_image_multiclass" / "labels.csv"
    labels = pd.read_csv(table)
    # Row 5 becomes row 0's picture saved with other PNG settings, under another file name.
    copy = io.BytesIO()
    Image.fromarray(decode(_image_file(image_home, 0).read_bytes())[:, :, 0]).save(copy, format="PNG",
                                                                                compress_level=1)
    (table.parent / "images" / "copy.png").write_bytes(copy.getvalue())
    labels.loc[5, "image"] = "images/copy.png"
    labels.to_csv(table, index=False)
    spec = _card()
    frame = read_typed(spec)
    groups = folds.row_groups(frame, spec)
    assert groups[0] == groups[5] and len(set(groups)) == len(frame) - 1
    assignment = folds.assign_folds(frame, spec, folds.fold_settings(spec))
    assert assignment[0] == assignment[5]
    # The saved folds of the test project (row % 2) split them: the gate names the leak.
    assert "no_train_test_duplicates" in _failed(spec)


@pytest.mark.parametrize(("breakage", "check", "words"), [
    ("corrupt", "images_decode", "does not decode as an image"),
    ("empty", "images_not_empty", "0-byte image"),
    ("size", "image_size", f"not the card's {IMAGE_SIDE}x{IMAGE_SIDE}"),
    ("channels", "image_channels", "has 3 channels, not the card's 1"),
])
def test_a_bad_image_file_is_one_sentence_naming_the_file_and_row(
    image_home: Path, breakage: str, check: str, words: str
) -> None:
    target = _image_file(image_home, 3)
    if breakage == "corrupt":
        target.write_bytes(target.read_bytes()[:30])  # a truncated PNG
    elif breakage == "empty":
        target.write_bytes(b"")
    elif breakage == "size":
        target.write_bytes(encode_png(np.zeros((IMAGE_SIDE + 2, IMAGE_SIDE), dtype=np.uint8)))
    else:
        target.write_bytes(encode_png(np.zeros((IMAGE_SIDE, IMAGE_SIDE, 3), dtype=np.uint8)))
    sentence = _failed(_card())[check]
    assert words in sentence and "tiny_image_multiclass/labels.csv data row 4" in sentence
    assert sentence.count(". ") == 0 and sentence.endswith(".")


def test_labels_outside_the_classes_and_small_classes_are_named(image_home: Path) -> None:
    table = image_home / "datasets" / "tiny_image_multiclass" / "labels.csv"
    labels = pd.read_csv(table)
    labels.loc[0, "label"] = "sideways"  # one image of a class nobody declared: fewer than 2 folds
    labels.to_csv(table, index=False)
    failed = _failed(_card())
    assert "'sideways' outside the card's image.classes" in failed["labels_declared"]
    assert "class 'sideways' has 1 rows, fewer than the 2 folds" in failed["classes_at_least_folds"]


@pytest.mark.parametrize(("path", "words"), [
    ("../../../etc/passwd", "a path leaving datasets/"),
    ("/etc/hostname", "a path leaving datasets/"),
    ("images/missing.png", "does not exist; add the file or remove its row"),
])
def test_a_labels_table_naming_a_bad_path_fails_the_gate_in_one_sentence(
    image_home: Path, path: str, words: str
) -> None:
    table = image_home / "datasets" / "tiny_image_multiclass" / "labels.csv"
    labels = pd.read_csv(table)
    labels.loc[2, "image"] = path
    labels.to_csv(table, index=False)
    with pytest.raises(UserError, match="labels.csv: row 3 names") as caught:
        read_typed(_card())
    assert words in str(caught.value) and "\n" not in str(caught.value)
    outcome = validate_dataset(_card())
    assert not outcome.ok and outcome.bad_input and words in outcome.failures[0]


def test_an_image_card_without_its_block_names_the_field(image_home: Path) -> None:
    card = image_home / "specs" / "datasets" / "tiny_image_binary.yaml"
    card.write_text(card.read_text().replace("  channels: 1\n", ""))
    with pytest.raises(UserError, match=r"field 'image.channels' is required; add it\."):
        image_card(load_dataset_spec("tiny_image_binary"))


def test_fashion_mnist_names_the_missing_debian_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sources_images, "FASHION_MNIST_DIR", tmp_path / "absent")
    with pytest.raises(UserError, match=r"apt-get install dataset-fashion-mnist") as caught:
        sources_images.fashion_mnist(load_dataset_spec("fashion_mnist"))
    assert "\n" not in str(caught.value)


def test_digits_source_gives_the_cards_images() -> None:
    spec = load_dataset_spec("digits")
    frame = sources_images.digits(spec)
    card = image_card(spec)
    assert len(frame) == spec.rows and set(frame["label"]) == set(card.classes)
    assert decode(frame["image"].iloc[0]).shape == (card.height, card.width, card.channels)


def test_top5_accuracy_counts_the_truth_among_the_five_most_probable() -> None:
    classes = tuple("abcdefg")
    proba = np.tile(np.linspace(0.2, 0.08, 7), (2, 1))  # a > b > ... > g
    proba /= proba.sum(axis=1, keepdims=True)
    truth = np.array(["e", "g"], dtype=object)  # e is 5th (counted), g is 7th (not)
    folded = Predictions("multiclass", truth, np.array(["a", "a"], dtype=object), proba, classes)
    assert get_metric("top5_acc").score(folded) == pytest.approx(0.5)
    few = Predictions("multiclass", truth[:1], truth[:1], np.full((1, 5), 0.2), tuple("abcde"))
    assert get_metric("top5_acc").score(few) is None  # 5 classes or fewer: every row would count


def test_a_pixel_table_holds_the_image_cards_pixels_and_its_very_folds(image_home: Path) -> None:
    card = {"name": "tiny_pixels", "source": {"package": "automl-eval", "call": "pixels",
                                              "loader": "images.pixels"},
            "file": "tiny_pixels.parquet", "pixels_of": "tiny_image_multiclass", "target": "label",
            "problem_type": "multiclass"}
    (image_home / "specs" / "datasets" / "tiny_pixels.yaml").write_text(yaml.safe_dump(card))
    materialize.materialize(_card())
    materialize.materialize(load_dataset_spec("tiny_pixels"))
    pixels = pd.read_parquet(image_home / "datasets" / "tiny_pixels.parquet")
    assert pixels.shape == (24, IMAGE_SIDE * IMAGE_SIDE + 1)
    first = decode(_image_file(image_home, 0).read_bytes()).reshape(-1)
    np.testing.assert_array_equal(pixels.iloc[0, :-1].to_numpy(dtype=np.uint8), first)
    assert (folds.folds_path(load_dataset_spec("tiny_pixels")).read_bytes()
            == folds.folds_path(_card()).read_bytes())
