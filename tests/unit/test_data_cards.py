"""Dataset cards and the typed loader: the catalog's promises, and one-sentence errors for bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tasks.data.load import load_frame
from tasks.data.sources import registered_sources
from tasks.errors import UserError
from tasks.specs import DEFAULT_METRIC, list_dataset_specs, load_dataset_spec

TABULAR_SOURCES = {
    key for key, fn in registered_sources().items() if fn.__module__.endswith("sources_tabular")
}


def _tabular_cards():
    return [s for s in list_dataset_specs() if s.source.loader in TABULAR_SOURCES]


def test_tabular_catalog_covers_types_sizes_and_column_kinds(built_catalog: Path) -> None:
    cards = _tabular_cards()
    assert len(cards) >= 8
    assert {s.problem_type for s in cards} == {"binary", "multiclass", "regression"}
    frames = {s.name: load_frame(s) for s in cards}
    sizes = [len(frame) for frame in frames.values()]
    assert min(sizes) < 1000 and max(sizes) >= 10_000
    assert any(frame.isna().any().any() for frame in frames.values()), "no dataset with missing values"
    assert any("categorical" in s.columns.values() for s in cards)
    assert any("numeric" in s.columns.values() for s in cards)


@pytest.mark.parametrize("spec", _tabular_cards(), ids=lambda s: s.name)
def test_card_documents_source_licence_metric_and_rows(spec, built_catalog: Path) -> None:
    assert spec.source.package and spec.source.call and spec.source.citation
    assert spec.source.licence != "unknown"
    assert spec.metric == DEFAULT_METRIC[spec.problem_type]
    assert spec.target not in spec.columns, "the target must not also be a feature"
    frame = load_frame(spec)
    assert len(frame) == spec.rows, "the loader must keep every row the card declares"
    assert list(frame.columns) == [*spec.columns, spec.target]


def test_load_frame_types_columns_by_role(built_catalog: Path) -> None:
    spec = load_dataset_spec("penguins")
    frame = load_frame(spec)
    assert isinstance(frame["island"].dtype, pd.CategoricalDtype)
    assert pd.api.types.is_float_dtype(frame["body_mass_g"])
    assert isinstance(frame["species"].dtype, pd.CategoricalDtype)
    assert list(frame["species"].cat.categories) == ["Adelie", "Chinstrap", "Gentoo"]
    assert frame["sex"].isna().sum() == 11  # missing values stay missing, rows stay
    assert pd.api.types.is_float_dtype(load_frame(load_dataset_spec("wage"))["wage"])


# ------------------------------------------------------------------------ bad input: one sentence


def _rewrite_card(home: Path, name: str, old: str, new: str) -> None:
    card = home / "specs" / "datasets" / f"{name}.yaml"
    text = card.read_text()
    assert old in text
    card.write_text(text.replace(old, new))


def test_card_naming_a_missing_file(data_home) -> None:
    home = data_home("penguins")
    _rewrite_card(home, "penguins", "file: penguins.csv", "file: pengiuns.csv")
    with pytest.raises(UserError, match=r"penguins\.yaml: field 'file': .*pengiuns\.csv does not exist"):
        load_frame(load_dataset_spec("penguins"))


def test_card_naming_a_missing_target(data_home) -> None:
    home = data_home("penguins")
    _rewrite_card(home, "penguins", "target: species", "target: specie")
    with pytest.raises(UserError, match=r"penguins\.yaml: field 'target': column 'specie' is not in"):
        load_frame(load_dataset_spec("penguins"))


def test_malformed_card(data_home) -> None:
    home = data_home("penguins")
    _rewrite_card(home, "penguins", "target: species", "target: [species")
    with pytest.raises(UserError, match=r"penguins\.yaml: line \d+: malformed YAML"):
        load_dataset_spec("penguins")


def test_misspelt_card_block_is_refused_naming_card_key_and_fix(data_home) -> None:
    home = data_home("penguins")
    _rewrite_card(home, "penguins", "expectations:", "expectation:")
    with pytest.raises(UserError, match=r"penguins\.yaml: unknown field 'expectation'; did you mean "
                                         r"'expectations'\? Rename it, or remove it\.$"):
        load_dataset_spec("penguins")


def test_unknown_card_key_is_refused(data_home) -> None:
    home = data_home("penguins")
    _rewrite_card(home, "penguins", "target: species", "target: species\nowner: team-a")
    with pytest.raises(UserError, match=r"penguins\.yaml: unknown field 'owner'; remove it or check its "
                                         r"spelling\.$"):
        load_dataset_spec("penguins")


def test_unknown_dataset_lists_known(data_home) -> None:
    data_home("penguins")
    with pytest.raises(UserError, match="unknown dataset 'pinguins'.*known datasets: penguins"):
        load_dataset_spec("pinguins")


def test_non_numeric_value_in_numeric_column(data_home) -> None:
    home = data_home("penguins")
    csv = home / "datasets" / "penguins.csv"
    frame = pd.read_csv(csv)
    frame["body_mass_g"] = frame["body_mass_g"].astype(object)
    frame.loc[3, "body_mass_g"] = "heavy"
    frame.to_csv(csv, index=False)
    with pytest.raises(
        UserError, match=r"penguins\.csv: column 'body_mass_g' is declared numeric .* row 4 holds 'heavy'"
    ):
        load_frame(load_dataset_spec("penguins"))


@pytest.mark.parametrize("case", ["non-numeric", "unknown name", "malformed card"])
def test_cli_bad_input_is_one_line_exit_2(data_home, case: str) -> None:
    home = data_home("penguins")
    name = "penguins"
    if case == "non-numeric":
        csv = home / "datasets" / "penguins.csv"
        csv.write_text(csv.read_text().replace(",3750.0,", ",3750 g,", 1))
    elif case == "unknown name":
        name = "pinguins"
    else:
        _rewrite_card(home, "penguins", "problem_type: multiclass", "problem_type: multiclass: x")
    done = subprocess.run(
        [str(Path(sys.executable).with_name("automl-eval")), "datasets", "validate", name],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "COLUMNS": "500"},
    )
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "Traceback" not in output
    expected = {
        "non-numeric": "column 'body_mass_g'",
        "unknown name": "unknown dataset 'pinguins'",
        "malformed card": "penguins.yaml",
    }[case]
    assert expected in output
