"""The image part of a dataset card: what every image of the dataset must be.

An image card is an ordinary DatasetSpec (`modality: image`, a classification `target`) whose
`columns` give one column the role `image`, plus one block validated here:

    image:
      height: 28          # pixels; every image is checked against it by the gate
      width: 28
      channels: 1         # 1 grey, 3 RGB
      classes: [a, b, c]  # the labels the target may hold; any other label fails the gate

The image column holds either encoded images (PNG bytes, a Parquet file) or paths of image files
relative to the labels table's folder (`file: NAME/labels.csv` with PNG files under datasets/NAME/).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tasks.errors import UserError
from tasks.specs import DatasetSpec

IMAGE_FIELD = "image"
IMAGE_ROLE = "image"


def pixels_of(spec: DatasetSpec) -> str | None:
    """The image card a pixel table is made from (its `pixels_of`), or None for any other card.

    A tabular card's `pixels_of` names the image card whose pixels it holds, one column per pixel,
    same rows and same folds (tabular learners as baselines on images)."""
    return spec.pixels_of


class ImageSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    height: int = Field(gt=0)
    width: int = Field(gt=0)
    channels: int = Field(gt=0, le=4)
    classes: list[str] = Field(min_length=2)


def image_column(spec: DatasetSpec) -> str:
    """The card's one column of role `image`; one sentence naming the field when there is not one."""
    where = spec.card_path or f"dataset '{spec.name}'"
    columns = [column for column, role in spec.columns.items() if role == IMAGE_ROLE]
    if len(columns) != 1:
        raise UserError(f"{where}: field 'columns': an image card needs exactly one column of role "
                        f"'{IMAGE_ROLE}' (it has {len(columns)}); give the image column that role.")
    return columns[0]


def image_card(spec: DatasetSpec) -> ImageSpec:
    """The card's `image:` block, checked; one sentence naming the field when it is wrong."""
    where = spec.card_path or f"dataset '{spec.name}'"
    block = spec.image
    if spec.modality != "image":
        raise UserError(f"{where}: modality is '{spec.modality}'; set 'modality: image' to use the "
                        f"'{IMAGE_FIELD}' block.")
    if spec.problem_type not in ("binary", "multiclass"):
        raise UserError(f"{where}: field 'problem_type': an image card is a classification "
                        f"(binary or multiclass), not {spec.problem_type}.")
    if not isinstance(block, dict):
        raise UserError(f"{where}: field '{IMAGE_FIELD}' is required for an image card; add "
                        "{height, width, channels, classes}.")
    try:
        card = ImageSpec(**block)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join([IMAGE_FIELD, *(str(p) for p in first["loc"])])
        if first["type"] == "missing":
            raise UserError(f"{where}: field '{field}' is required; add it.") from None
        if first["type"] == "extra_forbidden":
            raise UserError(f"{where}: unknown field '{field}'; remove it or check its spelling.") from None
        raise UserError(f"{where}: field '{field}': {first['msg']}.") from None
    image_column(spec)
    return card
