"""Image catalog sources: real labelled images that installed packages ship (nothing downloads).

Each returns the table the card describes: one PNG per row in the `image` column (encoded the
same way every time, so the Parquet file's bytes and DVC hash are reproducible) and the class
name in `label`. The gate then checks the images against the card's `image:` block.

- digits: scikit-learn's 1,797 8x8 digits (values 0..16, scaled to 0..255);
- fashion_mnist: Debian's `dataset-fashion-mnist` (IDX files under /usr/share/datasets); the card
  takes its 10,000 test images, 1,000 per class, which keeps a CPU benchmark to minutes;
- animal_mnist: the `animal-mnist` wheel's 10,000 28x28 silhouettes (pickles read directly: the
  package's module imports tensorflow).

A pixel table (`loader: images.pixels`, `pixels_of: NAME`) is the image card NAME's images decoded,
one column per pixel (p0, p1, ... row by row, channel last), in the same row order: tabular learners
run on it as baselines, with the image card's very folds (tasks/data/materialize.py).
"""

from __future__ import annotations

import gzip
import importlib.util
import pickle
from pathlib import Path

import numpy as np
import pandas as pd

from tasks.data.load import read_typed
from tasks.data.sources import source
from tasks.errors import UserError
from tasks.images.card import image_card, image_column, pixels_of
from tasks.images.codec import decode, encode_png
from tasks.specs import DatasetSpec, load_dataset_spec

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_PACKAGE = "dataset-fashion-mnist"
# Fashion-MNIST's class names, by label id (Xiao, Rasul and Vollgraf 2017).
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                         "Sneaker", "Bag", "Ankle boot")
ANIMAL_MNIST_FILES = ("data/Animal_MNIST/animal_data_version_3.gz",
                      "data/Animal_MNIST/animal_label_version_3.gz")
IDX_IMAGE_HEADER, IDX_LABEL_HEADER = 16, 8  # bytes before the data of an IDX image / label file


def image_table(images: np.ndarray, labels: list[str] | np.ndarray, spec: DatasetSpec) -> pd.DataFrame:
    """Rows of (PNG bytes, label) under the card's image and target column names."""
    column = next(c for c, role in spec.columns.items() if role == "image")
    return pd.DataFrame({column: [encode_png(pixels) for pixels in images],
                         spec.target: [str(label) for label in labels]})


@source("sklearn.digits")
def digits(spec: DatasetSpec) -> pd.DataFrame:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    pixels = np.rint(bunch.images * (255.0 / 16.0)).astype(np.uint8)
    return image_table(pixels, bunch.target, spec)


def _idx(path: Path, header: int) -> np.ndarray:
    with gzip.open(path, "rb") as handle:
        return np.frombuffer(handle.read()[header:], dtype=np.uint8)


@source("debian.fashion_mnist")
def fashion_mnist(spec: DatasetSpec) -> pd.DataFrame:
    images_file = FASHION_MNIST_DIR / "t10k-images-idx3-ubyte.gz"
    labels_file = FASHION_MNIST_DIR / "t10k-labels-idx1-ubyte.gz"
    if not (images_file.is_file() and labels_file.is_file()):
        raise UserError(f"{spec.card_path}: Fashion-MNIST comes from the Debian package "
                        f"'{FASHION_MNIST_PACKAGE}', which is not installed ({images_file} is missing); "
                        f"run `apt-get install {FASHION_MNIST_PACKAGE}` (make data does).")
    labels = _idx(labels_file, IDX_LABEL_HEADER)
    images = _idx(images_file, IDX_IMAGE_HEADER).reshape(len(labels), 28, 28)
    return image_table(images, [FASHION_MNIST_CLASSES[label] for label in labels], spec)


@source("pypi.animal_mnist")
def animal_mnist(spec: DatasetSpec) -> pd.DataFrame:
    found = importlib.util.find_spec("animal_mnist")
    if found is None or found.origin is None:
        raise UserError(f"{spec.card_path}: Animal-MNIST comes from the PyPI package 'animal-mnist', which "
                        "is not installed; run `pip install --no-deps animal-mnist==0.4` (make setup does).")
    folder = Path(found.origin).parent
    loaded = []
    for relative in ANIMAL_MNIST_FILES:
        # The package's own pickles of numpy arrays (uint8 images, int64 labels): trusted install files.
        with gzip.open(folder / relative, "rb") as handle:
            loaded.append(pickle.load(handle))  # noqa: S301
    images, labels = np.asarray(loaded[0], dtype=np.uint8), np.asarray(loaded[1])
    return image_table(images, [f"animal_{int(label)}" for label in labels], spec)


@source("images.pixels")
def pixel_table(spec: DatasetSpec) -> pd.DataFrame:
    name = pixels_of(spec)
    if name is None:
        raise UserError(f"{spec.card_path}: field 'pixels_of' is required for the 'images.pixels' source; "
                        "name the image card whose pixels this table holds.")
    images = load_dataset_spec(name)
    card = image_card(images)
    frame = read_typed(images)
    width = card.height * card.width * card.channels
    pixels = np.zeros((len(frame), width), dtype=np.uint8)
    for row, data in enumerate(frame[image_column(images)].tolist()):
        pixels[row] = decode(data).reshape(-1)[:width]  # the gate checks every image's size
    table = pd.DataFrame(pixels, columns=[f"p{index}" for index in range(width)])
    table[spec.target] = frame[images.target].astype(str).to_numpy()
    return table

