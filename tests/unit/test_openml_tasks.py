"""OpenML tasks through the real `openml` client, against OpenML-format files served on 127.0.0.1.

The test writes three tasks (binary, multiclass, regression) from real data that packages ship, in
OpenML's formats (task XML, dataset description and features, ARFF data, datasplits ARFF), serves
them, and builds stub cards through `automl-eval datasets build`'s code path. One more task is
OpenML's own recorded answer (tests/fixtures/openml/: task 1882 on anneal, 10 repeats of 10 folds),
served as recorded, so the client's real parsing and the real split layout are what is checked.
"""

from __future__ import annotations

import gzip
import io
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from openml_support.server import RECORDED, OpenMLFiles, OpenMLServer, TaskFiles, split_assignment

from tasks.data import build, openml_tasks
from tasks.data.folds import split
from tasks.data.pinning import push
from tasks.data.validate import validate_all, validate_dataset
from tasks.errors import UserError
from tasks.specs import load_dataset_spec, load_suite, openml_suite_file

REPO_ROOT = Path(__file__).resolve().parents[2]


def _binary() -> pd.DataFrame:
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer(as_frame=True)
    frame = bunch.data.iloc[:, :5].rename(columns=lambda name: name.replace(" ", "_"))
    frame["diagnosis"] = bunch.target.map(dict(enumerate(bunch.target_names)))
    frame = frame.iloc[:120].reset_index(drop=True)
    # A row identifier and an ignored column, as OpenML datasets carry them.
    frame.insert(0, "sample_id", np.arange(len(frame), dtype=float))
    frame["batch"] = np.arange(len(frame)) % 3 * 1.0
    return frame


def _multiclass() -> pd.DataFrame:
    from palmerpenguins import load_penguins

    frame = load_penguins()[["island", "bill_length_mm", "flipper_length_mm", "sex", "species"]]
    return frame.iloc[::3].reset_index(drop=True)  # all three species, with missing values


def _regression() -> pd.DataFrame:
    from sklearn.datasets import load_diabetes

    bunch = load_diabetes(as_frame=True)
    frame = bunch.data.iloc[:100, :4].copy()
    frame["progression"] = bunch.target.iloc[:100]
    return frame


def _with_duplicates() -> pd.DataFrame:
    """A regression table whose first rows appear twice, as AMLB's diamonds has identical rows."""
    frame = _regression().iloc[:60]
    return pd.concat([frame, frame.iloc[:10]], ignore_index=True)


@dataclass
class Served:
    server: OpenMLServer
    files: OpenMLFiles
    tasks: dict[int, TaskFiles]


TASKS = {
    9101: TaskFiles(
        9101,
        801,
        "cancer_small",
        _binary(),
        "diagnosis",
        "Supervised Classification",
        ignore=("batch",),
        row_id="sample_id",
    ),
    9102: TaskFiles(
        9102, 802, "penguins_small", _multiclass(), "species", "Supervised Classification", folds=5, repeats=2
    ),
    9103: TaskFiles(
        9103,
        803,
        "diabetes_small",
        _regression(),
        "progression",
        "Supervised Regression",
        folds=4,
        parquet=True,
    ),
    9104: TaskFiles(9104, 804, "penguins_clusters", _multiclass(), "species", "Clustering"),
    9105: TaskFiles(9105, 805, "penguins_survival", _multiclass(), "species", "Survival Analysis"),
    9106: TaskFiles(
        9106, 806, "diabetes_twice", _with_duplicates(), "progression", "Supervised Regression", folds=5
    ),
}


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    home = tmp_path / "project"
    (home / "specs" / "datasets").mkdir(parents=True)
    (home / "pyproject.toml").touch()
    files = OpenMLFiles(tmp_path / "openml-files")
    server = OpenMLServer(files.root)
    for task in TASKS.values():
        files.add_task(task, server.base_url)
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(home))
    monkeypatch.setenv(openml_tasks.SERVER_ENV, server.url)
    yield Served(server, files, TASKS)
    server.stop()


def _stub(name: str, task_id: int, **extra: object) -> None:
    card = {"source": {"openml_task": task_id}, **extra}
    (openml_tasks.paths.dataset_cards_dir() / f"{name}.yaml").write_text(yaml.safe_dump(card))


def _card(name: str) -> dict:
    return yaml.safe_load((openml_tasks.paths.dataset_cards_dir() / f"{name}.yaml").read_text())


def test_stub_cards_become_cards_with_openml_roles_and_splits(served: Served) -> None:
    _stub("cancer", 9101, gate={"allow": ["no_train_test_duplicates"]})
    _stub("penguins_oml", 9102)
    _stub("diabetes", 9103)
    report = build.build(use_dvc=False)
    assert not report.errors, report.errors

    cancer = _card("cancer")
    assert (cancer["problem_type"], cancer["metric"], cancer["target"]) == ("binary", "auc", "diagnosis")
    assert cancer["columns"]["sample_id"] == "id" and cancer["columns"]["batch"] == "ignore"
    assert cancer["columns"]["mean_radius"] == "numeric" and "diagnosis" not in cancer["columns"]
    assert cancer["gate"] == {"allow": ["no_train_test_duplicates"]}  # the stub's own choice kept
    penguins = _card("penguins_oml")
    assert (penguins["problem_type"], penguins["metric"]) == ("multiclass", "logloss")
    assert penguins["columns"] == {
        "island": "categorical",
        "bill_length_mm": "numeric",
        "flipper_length_mm": "numeric",
        "sex": "categorical",
    }
    assert penguins["description"] == (
        "OpenML task 9102: dataset penguins_small (id 802, version 1), OpenML's 2x5 split; "
        "OpenML's split has 2 repeats; the folds are its first, as AMLB runs them."
    )
    diabetes = _card("diabetes")
    assert (diabetes["problem_type"], diabetes["metric"], diabetes["rows"]) == ("regression", "rmse", 100)

    datasets = openml_tasks.paths.datasets_dir()
    for name, task_id in (("cancer", 9101), ("penguins_oml", 9102), ("diabetes", 9103)):
        task = served.tasks[task_id]
        saved = pd.read_csv(datasets / f"{name}.folds.csv")["fold"].to_numpy()
        # Row for row OpenML's split: each row's test fold in the first repeat.
        np.testing.assert_array_equal(saved, split_assignment(task)[0])
        data = pd.read_csv(datasets / f"{name}.csv")
        assert len(data) == len(task.frame)
        assert data[task.target].astype(str).tolist() == task.frame[task.target].astype(str).tolist()
    # The regression task's data came as Parquet (its description names one), the others as ARFF.
    assert len(list(openml_tasks.cache_dir().rglob("dataset_803.pq"))) == 1
    assert not list(openml_tasks.cache_dir().rglob("datasets/803/dataset.arff"))

    # Offline: the server is gone, the data files too; the client's cache alone rebuilds them.
    served.server.stop()
    before = {p.name: p.read_bytes() for p in datasets.iterdir()}
    for path in datasets.iterdir():
        path.unlink()
    again = build.build(use_dvc=False)
    assert not again.errors, again.errors
    assert {p.name: p.read_bytes() for p in datasets.iterdir()} == before
    served.server = OpenMLServer(served.files.root)  # the fixture stops one at the end


def _recorded_splits(task_id: int) -> pd.DataFrame:
    """OpenML's datasplits ARFF as recorded: one row per (type, rowid, repeat, fold)."""
    text = gzip.decompress((RECORDED / "tasks" / str(task_id) / "datasplits.arff.gz").read_bytes()).decode()
    body = text.split("@data", 1)[1]  # the header declares exactly these four attributes, in this order
    return pd.read_csv(io.StringIO(body), names=["type", "rowid", "repeat", "fold"], skip_blank_lines=True)


def _test_fold_of_each_row(splits: pd.DataFrame, repeat: int, rows: int) -> np.ndarray:
    tested = splits[(splits["type"] == "TEST") & (splits["repeat"] == repeat)]
    folds = np.full(rows, -1)
    folds[tested["rowid"].to_numpy()] = tested["fold"].to_numpy()
    return folds


def test_a_recorded_openml_task_keeps_the_first_repeat_of_its_split_row_for_row(served: Served) -> None:
    served.files.add_recorded_task(1882, served.server.base_url)
    _stub("anneal", 1882)
    report = build.build(use_dvc=False)
    assert not report.errors, report.errors

    # The expectation, from the recorded datasplits file itself: 898 rows (anneal's), 10 repeats x
    # 10 folds, each repeat testing every row exactly once.
    splits = _recorded_splits(1882)
    rows = int(splits["rowid"].max()) + 1
    assert rows == 898
    assert sorted(splits["repeat"].unique()) == list(range(10))
    assert sorted(splits["fold"].unique()) == list(range(10))
    tested = splits[splits["type"] == "TEST"]
    assert (tested.groupby("repeat")["rowid"].nunique() == rows).all() and len(tested) == 10 * rows
    first = _test_fold_of_each_row(splits, 0, rows)
    assert (first >= 0).all()
    # The premise that makes "the first repeat" checkable: the second repeat puts rows elsewhere.
    assert (_test_fold_of_each_row(splits, 1, rows) != first).any()

    card = _card("anneal")
    assert (card["problem_type"], card["metric"], card["target"], card["rows"]) == (
        "multiclass",
        "logloss",
        "class",
        rows,
    )
    assert card["description"] == (
        "OpenML task 1882: dataset anneal (id 2, version 1), OpenML's 10x10 split; "
        "OpenML's split has 10 repeats; the folds are its first, as AMLB runs them."
    )
    datasets = openml_tasks.paths.datasets_dir()
    np.testing.assert_array_equal(pd.read_csv(datasets / "anneal.folds.csv")["fold"].to_numpy(), first)
    spec = load_dataset_spec("anneal")
    for fold in range(10):
        train, test = split(spec, fold)
        part = splits[(splits["repeat"] == 0) & (splits["fold"] == fold)]
        np.testing.assert_array_equal(np.sort(test), np.sort(part.loc[part["type"] == "TEST", "rowid"]))
        np.testing.assert_array_equal(np.sort(train), np.sort(part.loc[part["type"] == "TRAIN", "rowid"]))
    data = pd.read_csv(datasets / "anneal.csv")
    assert len(data) == rows and set(data["class"].astype(str)) == {"1", "2", "3", "5", "U"}
    # What the client fetched is the recording itself (the ARFF also passed its md5 check).
    (cached_arff,) = openml_tasks.cache_dir().rglob("datasets/2/dataset.arff")
    assert cached_arff.read_bytes() == (RECORDED / "datasets" / "2" / "dataset.arff").read_bytes()
    (cached_splits,) = openml_tasks.cache_dir().rglob("tasks/1882/datasplits.arff")
    assert cached_splits.read_bytes() == gzip.decompress(
        (RECORDED / "tasks" / "1882" / "datasplits.arff.gz").read_bytes()
    )


def test_unknown_task_is_one_sentence_and_writes_nothing(served: Served) -> None:
    _stub("nothing", 424242)
    with pytest.raises(UserError, match=r"^OpenML task 424242 does not exist on http://127\.0\.0\.1:\d+/api"):
        build.build(use_dvc=False)
    assert "target" not in _card("nothing")
    datasets = openml_tasks.paths.datasets_dir()
    assert not datasets.exists() or not any(datasets.iterdir())


@pytest.mark.parametrize(("task_id", "kind"), [(9104, "Clustering"), (9105, "Survival Analysis")])
def test_task_types_the_project_does_not_run_are_refused(served: Served, task_id: int, kind: str) -> None:
    _stub("other", task_id)
    with pytest.raises(UserError, match=rf"OpenML task {task_id}.*{kind}.*classification and regression"):
        build.build(use_dvc=False)


def test_uncached_task_while_offline_says_what_to_do(served: Served) -> None:
    served.server.stop()
    _stub("cancer", 9101)
    with pytest.raises(UserError) as raised:
        build.build(use_dvc=False)
    assert str(raised.value).startswith("task 9101 is not cached and OpenML cannot be reached")
    assert "run `automl-eval datasets build` where it can, then `dvc push`" in str(raised.value)
    served.server = OpenMLServer(served.files.root)


def _suite(name: str, datasets: list) -> None:
    folder = openml_tasks.paths.suites_dir()
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO_ROOT / "specs" / "budgets.yaml", openml_tasks.paths.budgets_file())
    fields = {"datasets": datasets, "frameworks": ["constant"], "folds": 2, "budget": "test"}
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(fields))


def test_suites_name_an_openml_suite_or_task_ids(served: Served) -> None:
    served.files.add_suite(9900, "tiny-amlb", [9101, 9102])
    _suite("amlb_like", ["openml/s/9900", 9103, "openml/t/9101"])
    with pytest.raises(
        UserError,
        match=r"amlb_like\.yaml: field 'datasets': OpenML suite openml/s/9900 is "
        r"not resolved yet; run `automl-eval datasets build`",
    ):
        load_suite("amlb_like", {})
    report = build.build(use_dvc=False)
    assert not report.errors, report.errors
    resolved = yaml.safe_load(openml_suite_file(9900).read_text())
    assert resolved == {"suite": 9900, "tasks": [9101, 9102]}
    served.server.stop()  # the suite now loads, and its data builds, without OpenML
    suite = load_suite("amlb_like", {})
    assert suite.datasets == ["openml_9101", "openml_9102", "openml_9103"]
    assert load_dataset_spec("openml_9103").problem_type == "regression"
    served.server = OpenMLServer(served.files.root)


def test_an_unknown_openml_suite_is_one_sentence(served: Served) -> None:
    _suite("missing", ["openml/s/777"])
    with pytest.raises(UserError, match=r"^OpenML suite 777 does not exist on http://127\.0\.0\.1"):
        build.build(use_dvc=False)
    _suite("typo", ["openml/x/31"])
    with pytest.raises(UserError, match=r"'openml/x/31' is not an OpenML entry; write openml/t/ID"):
        load_suite("typo", {})


def test_duplicates_across_openml_splits_are_reported_and_accepted_knowingly(served: Served) -> None:
    task = served.tasks[9106]
    assignment = split_assignment(task)[0]
    # The premise: OpenML's split tests some copy of a row in another fold than the original.
    assert (assignment[60:] != assignment[:10]).any()
    _stub("twice", 9106)
    report = build.build(use_dvc=False)
    assert not report.errors, report.errors

    outcome = validate_dataset("twice")
    card = openml_tasks.paths.dataset_cards_dir() / "twice.yaml"
    assert not outcome.ok and not outcome.bad_input
    assert len(outcome.failures) == 1, outcome.failures
    sentence = outcome.failures[0]
    assert sentence.startswith("twice: OpenML task 9106's split puts identical rows on both sides of a fold")
    allow = "`gate: {allow: [no_train_test_duplicates]}`"
    assert sentence.endswith(f"accept this knowingly with {allow} in {card}.")
    assert sentence.count(". ") == 0  # one sentence

    # The generated card's gate is the user's to edit: allowing the check makes it pass, noted.
    fields = _card("twice")
    fields["gate"] = {"allow": ["no_train_test_duplicates"]}
    card.write_text(yaml.safe_dump(fields, sort_keys=False))
    accepted = validate_dataset("twice")
    assert accepted.ok, accepted.failures
    note = "(check 'no_train_test_duplicates' accepted by the card: gate.allow)"
    assert accepted.accepted == [f"{sentence} {note}"]


def test_an_openml_dataset_is_pinned_by_dvc_and_later_builds_need_no_openml(served: Served) -> None:
    home = openml_tasks.paths.project_root()
    dvc = str(Path(sys.executable).with_name("dvc"))
    subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=home, check=True)
    subprocess.run([dvc, "remote", "add", "-d", "local", str(home / "remote")], cwd=home, check=True)
    _stub("diabetes", 9103)
    first = build.build()
    assert not first.errors and first.pin_status == "pinned now", (first.errors, first.pin_status)
    pinned = yaml.safe_load((home / "datasets.dvc").read_text())["outs"][0]
    assert pinned["path"] == "datasets" and pinned["nfiles"] == 2  # diabetes.csv and its folds
    assert push() is None

    # Another clone: no OpenML (server gone, client cache gone), no data, no DVC cache; only the remote.
    served.server.stop()
    for folder in (openml_tasks.cache_dir(), home / "datasets", home / ".dvc" / "cache"):
        shutil.rmtree(folder)
    again = build.build()
    assert again.route == "pulled from the DVC remote", again.pull_skipped
    assert not again.errors and again.pin_status == "clean", (again.errors, again.pin_status)
    assert not openml_tasks.cache_dir().exists()  # the client never ran
    (outcome,) = validate_all(["diabetes"])
    assert outcome.ok, outcome.failures
    expected = split_assignment(served.tasks[9103])[0]
    for fold in range(4):
        train, test = split(load_dataset_spec("diabetes"), fold)
        np.testing.assert_array_equal(np.sort(test), np.flatnonzero(expected == fold))
        np.testing.assert_array_equal(np.sort(train), np.flatnonzero(expected != fold))
    served.server = OpenMLServer(served.files.root)
