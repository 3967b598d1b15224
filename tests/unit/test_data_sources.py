"""The sources registry: cards name a loader key, a `@source` function provides the data."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from tasks.data import sources
from tasks.data.load import load_frame
from tasks.data.materialize import materialize
from tasks.errors import UserError
from tasks.specs import list_dataset_specs, load_dataset_spec

TOY_CARD = """\
name: toy
source: {package: tests, call: "a test's own frame", loader: tests.toy}
file: toy.csv
target: label
problem_type: binary
columns: {size: numeric, colour: categorical}
"""


def test_every_sources_module_is_discovered() -> None:
    registered = sources.registered_sources()
    assert "tasks.data.sources_tabular" in sys.modules
    for spec in list_dataset_specs():
        if spec.source.loader is not None:
            assert spec.source.loader in registered, f"{spec.name}: no source '{spec.source.loader}'"


def test_a_registered_source_materializes_a_card(data_home) -> None:
    home: Path = data_home()
    (home / "specs" / "datasets" / "toy.yaml").write_text(TOY_CARD)

    @sources.source("tests.toy")
    def toy(spec) -> pd.DataFrame:  # noqa: ANN001
        rows = 40
        # Columns in another order than the card's: the written file follows the card.
        return pd.DataFrame(
            {
                "label": ["yes", "no"] * (rows // 2),
                "colour": ["red", "blue", "green", "red"] * (rows // 4),
                "size": [float(i) for i in range(rows)],
            }
        )

    try:
        result = materialize(load_dataset_spec("toy"))
        assert result.rows == 40 and result.written
        assert (home / "datasets" / "toy.csv").read_text().splitlines()[0] == "size,colour,label"
        assert (home / "datasets" / "toy.folds.csv").is_file()
        assert isinstance(load_frame(load_dataset_spec("toy"))["colour"].dtype, pd.CategoricalDtype)
        assert materialize(load_dataset_spec("toy")).written is False  # same bytes: nothing rewritten
    finally:
        sources._REGISTRY.pop("tests.toy", None)


def test_unknown_loader_names_the_card_field(data_home) -> None:
    home: Path = data_home()
    (home / "specs" / "datasets" / "toy.yaml").write_text(TOY_CARD.replace("tests.toy", "tests.nowhere"))
    with pytest.raises(UserError, match=r"toy\.yaml: field 'source.loader': unknown source 'tests.nowhere'"):
        materialize(load_dataset_spec("toy"))


def test_a_key_cannot_be_registered_twice() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        sources.source("sklearn.breast_cancer")(lambda spec: None)
