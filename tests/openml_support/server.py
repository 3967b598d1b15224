"""A local server that answers the `openml` client as OpenML's REST API does, from files a test writes.

OpenML's own server is out of reach here, so the real client is pointed (`openml.config.server`)
at this one, bound to 127.0.0.1. It serves what the client requests for a task, in OpenML's formats:

- `api/v1/xml/task/ID`: the task XML (type, dataset, target, estimation procedure, splits URL);
- `api/v1/xml/data/ID` and `api/v1/xml/data/features/ID`: the dataset description and features;
- `api/v1/xml/study/ID`: a suite (its task ids);
- `data/v1/download/FILE_ID/NAME.arff`: the data; `api_splits/get/ID/Task_ID_splits.arff`: the splits;
- `datasets/0000/ID/dataset_ID.pq`: the data as Parquet, the way OpenML's MinIO store serves it to the
  client's `minio` library (HEAD for the object's size and ETag, then GET), when a task asks for it.

A recorded task (`OpenMLFiles.add_recorded_task`) is served from OpenML's own responses as saved in
tests/fixtures/openml/ (see its README), byte for byte but for the two absolute URLs they hold.

An unknown task or dataset is answered as OpenML answers it: HTTP 412 with an `oml:error` body.
Responses are gzip-encoded, as OpenML's are (the client warns about uncompressed content).
"""

from __future__ import annotations

import gzip
import hashlib
import re
import threading
from dataclasses import dataclass
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import arff
import numpy as np
import pandas as pd

XML_NS = 'xmlns:oml="http://openml.org/openml"'
# Where OpenML's recorded responses live (tests/fixtures/openml/README.md names their source).
RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "openml"
# OpenML's error codes for an id it does not know (task/get 151, data/get 111, study/get 601).
UNKNOWN_ERRORS = {
    "task": (151, "Unknown task"),
    "data": (111, "Unknown dataset"),
    "study": (601, "Unknown study"),
}


@dataclass(frozen=True)
class TaskFiles:
    """What a test gives for one OpenML task: the table and how OpenML describes and splits it."""

    task_id: int
    dataset_id: int
    name: str
    frame: pd.DataFrame  # every column, target included, in the dataset's order
    target: str
    task_type: str  # "Supervised Classification" | "Supervised Regression" | "Clustering" ...
    folds: int = 10
    repeats: int = 1
    ignore: tuple[str, ...] = ()
    row_id: str | None = None
    parquet: bool = False  # also serve the data as Parquet (the description's parquet_url)


class OpenMLFiles:
    """A folder laid out as the server's URL paths; each method writes one task's files into it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _write(self, relative: str, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def add_task(self, task: TaskFiles, base_url: str) -> None:
        type_ids = {
            "Supervised Classification": 1,
            "Supervised Regression": 2,
            "Clustering": 5,
            "Survival Analysis": 7,
        }
        measure = (
            "root_mean_squared_error" if task.task_type == "Supervised Regression" else "predictive_accuracy"
        )
        splits_url = f"{base_url}/api_splits/get/{task.task_id}/Task_{task.task_id}_splits.arff"
        self._write(
            f"api/v1/xml/task/{task.task_id}",
            f"""<oml:task {XML_NS}>
  <oml:task_id>{task.task_id}</oml:task_id>
  <oml:task_name>Task {task.task_id}: {task.name} ({task.task_type})</oml:task_name>
  <oml:task_type_id>{type_ids[task.task_type]}</oml:task_type_id>
  <oml:task_type>{task.task_type}</oml:task_type>
  <oml:input name="source_data">
    <oml:data_set>
      <oml:data_set_id>{task.dataset_id}</oml:data_set_id>
      <oml:target_feature>{task.target}</oml:target_feature>
    </oml:data_set>
  </oml:input>
  <oml:input name="estimation_procedure">
    <oml:estimation_procedure>
      <oml:id>1</oml:id>
      <oml:type>crossvalidation</oml:type>
      <oml:data_splits_url>{splits_url}</oml:data_splits_url>
      <oml:parameter name="number_repeats">{task.repeats}</oml:parameter>
      <oml:parameter name="number_folds">{task.folds}</oml:parameter>
      <oml:parameter name="percentage"></oml:parameter>
      <oml:parameter name="stratified_sampling">true</oml:parameter>
    </oml:estimation_procedure>
  </oml:input>
  <oml:input name="evaluation_measures">
    <oml:evaluation_measures>
      <oml:evaluation_measure>{measure}</oml:evaluation_measure>
    </oml:evaluation_measures>
  </oml:input>
  <oml:tag>test</oml:tag>
</oml:task>
""",
        )
        self._add_dataset(task, base_url)
        self._write(f"api_splits/get/{task.task_id}/Task_{task.task_id}_splits.arff", split_arff(task))

    def _add_dataset(self, task: TaskFiles, base_url: str) -> None:
        data_arff = dataset_arff(task)
        file_id = 100_000 + task.dataset_id
        md5 = hashlib.md5(data_arff.encode("utf-8")).hexdigest()
        parquet_object = f"datasets/0000/{task.dataset_id:04d}/dataset_{task.dataset_id}.pq"
        optional = "".join(
            f"  <oml:{field}>{value}</oml:{field}>\n"
            for field, value in (
                ("row_id_attribute", task.row_id),
                *(("ignore_attribute", column) for column in task.ignore),
                ("parquet_url", f"{base_url}/{parquet_object}" if task.parquet else None),
            )
            if value
        )
        if task.parquet:
            # OpenML's Parquet files keep nominal columns as categories; the client reads them so.
            frame = task.frame.copy()
            for column in frame.columns:
                if _is_nominal(frame[column]):
                    frame[column] = frame[column].astype("category")
            target = self.root / parquet_object
            target.parent.mkdir(parents=True, exist_ok=True)
            frame.to_parquet(target, index=False)
        self._write(
            f"api/v1/xml/data/{task.dataset_id}",
            f"""<oml:data_set_description {XML_NS}>
  <oml:id>{task.dataset_id}</oml:id>
  <oml:name>{task.name}</oml:name>
  <oml:version>1</oml:version>
  <oml:description>{task.name}, served by the test's OpenML server.</oml:description>
  <oml:format>ARFF</oml:format>
  <oml:upload_date>2014-04-06T23:19:24</oml:upload_date>
  <oml:licence>Public</oml:licence>
  <oml:url>{base_url}/data/v1/download/{file_id}/{task.name}.arff</oml:url>
  <oml:file_id>{file_id}</oml:file_id>
  <oml:default_target_attribute>{task.target}</oml:default_target_attribute>
{optional}  <oml:citation>Test data for {task.name}.</oml:citation>
  <oml:visibility>public</oml:visibility>
  <oml:status>active</oml:status>
  <oml:md5_checksum>{md5}</oml:md5_checksum>
</oml:data_set_description>
""",
        )
        features = []
        for index, column in enumerate(task.frame.columns):
            values = task.frame[column]
            if _is_nominal(values):
                kind = "nominal"
                nominal = "".join(
                    f"<oml:nominal_value>{v}</oml:nominal_value>"
                    for v in sorted(values.dropna().astype(str).unique())
                )
            else:
                kind, nominal = "numeric", ""
            features.append(f"""  <oml:feature>
    <oml:index>{index}</oml:index>
    <oml:name>{column}</oml:name>
    <oml:data_type>{kind}</oml:data_type>{nominal}
    <oml:is_target>{str(column == task.target).lower()}</oml:is_target>
    <oml:is_ignore>{str(column in task.ignore).lower()}</oml:is_ignore>
    <oml:is_row_identifier>{str(column == task.row_id).lower()}</oml:is_row_identifier>
    <oml:number_of_missing_values>{int(values.isna().sum())}</oml:number_of_missing_values>
  </oml:feature>
""")
        self._write(
            f"api/v1/xml/data/features/{task.dataset_id}",
            f"<oml:data_features {XML_NS}>\n{''.join(features)}</oml:data_features>\n",
        )
        self._write(f"data/v1/download/{file_id}/{task.name}.arff", data_arff)

    def add_recorded_task(self, task_id: int, base_url: str, recorded: Path = RECORDED) -> None:
        """Serve a task as OpenML answered for it: recorded/tasks/ID/{task.xml, datasplits.arff.gz} and
        its dataset's recorded/datasets/DID/{description.xml, features.xml, dataset.arff}.

        The task and the description name absolute URLs on OpenML's hosts (the splits, the ARFF); the
        client follows them as given, so each is pointed at this server, at the same path, and the
        file is put there. Nothing else is changed: the ARFF still matches the description's md5,
        which the client checks.
        """
        task_xml = (recorded / "tasks" / str(task_id) / "task.xml").read_text(encoding="utf-8")
        task_xml, splits_path = _served_url(task_xml, "data_splits_url", base_url)
        dataset_id = re.search(r"<oml:data_set_id>(\d+)</oml:data_set_id>", task_xml)
        assert dataset_id is not None, f"recorded task {task_id} names no dataset"
        dataset = recorded / "datasets" / dataset_id.group(1)
        description, data_path = _served_url(
            (dataset / "description.xml").read_text(encoding="utf-8"), "url", base_url
        )
        self._write(f"api/v1/xml/task/{task_id}", task_xml)
        splits = gzip.decompress((recorded / "tasks" / str(task_id) / "datasplits.arff.gz").read_bytes())
        self._write(splits_path, splits.decode("utf-8"))
        self._write(f"api/v1/xml/data/{dataset_id.group(1)}", description)
        self._write(
            f"api/v1/xml/data/features/{dataset_id.group(1)}",
            (dataset / "features.xml").read_text(encoding="utf-8"),
        )
        # Bytes, not text: the ARFF's md5 must stay the one the description records.
        target = self.root / data_path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((dataset / "dataset.arff").read_bytes())

    def add_suite(self, suite_id: int, alias: str, task_ids: list[int]) -> None:
        tasks = "".join(f"    <oml:task_id>{task_id}</oml:task_id>\n" for task_id in task_ids)
        self._write(
            f"api/v1/xml/study/{suite_id}",
            f"""<oml:study {XML_NS}>
  <oml:id>{suite_id}</oml:id>
  <oml:alias>{alias}</oml:alias>
  <oml:main_entity_type>task</oml:main_entity_type>
  <oml:name>{alias}</oml:name>
  <oml:description>A suite served by the test's OpenML server.</oml:description>
  <oml:status>active</oml:status>
  <oml:creation_date>2019-02-21T19:55:30</oml:creation_date>
  <oml:creator>1</oml:creator>
  <oml:tasks>
{tasks}  </oml:tasks>
</oml:study>
""",
        )


def _served_url(xml: str, element: str, base_url: str) -> tuple[str, str]:
    """`xml` with the absolute URL of <oml:ELEMENT> moved onto `base_url`, and that URL's path."""
    found = re.search(rf"<oml:{element}>([^<]+)</oml:{element}>", xml)
    assert found is not None, f"no <oml:{element}> in the recorded response"
    path = urlsplit(found.group(1)).path.lstrip("/")
    return xml[: found.start(1)] + f"{base_url}/{path}" + xml[found.end(1) :], path


def _is_nominal(values: pd.Series) -> bool:
    return not pd.api.types.is_numeric_dtype(values)


def dataset_arff(task: TaskFiles) -> str:
    attributes = [
        (
            str(column),
            sorted(task.frame[column].dropna().astype(str).unique().tolist())
            if _is_nominal(task.frame[column])
            else "REAL",
        )
        for column in task.frame.columns
    ]
    rows = [
        [
            None if pd.isna(value) else (str(value) if isinstance(value, str) else float(value))
            for value in row
        ]
        for row in task.frame.itertuples(index=False)
    ]
    return arff.dumps({"relation": task.name, "attributes": attributes, "data": rows})


def split_assignment(task: TaskFiles) -> np.ndarray:
    """The test fold of each row in each repeat (repeats x rows): stratified by class for classification,
    as OpenML's own `crossvalidation` procedure splits."""
    assignment = np.empty((task.repeats, len(task.frame)), dtype=np.int64)
    for repeat in range(task.repeats):
        rng = np.random.default_rng(1000 + repeat)
        order = rng.permutation(len(task.frame))
        if task.task_type == "Supervised Classification":
            labels = task.frame[task.target].astype(str).to_numpy()
            order = order[np.argsort(labels[order], kind="stable")]
        assignment[repeat, order] = np.arange(len(order)) % task.folds
    return assignment


def split_arff(task: TaskFiles) -> str:
    assignment = split_assignment(task)
    rows = [
        ["TEST" if assignment[repeat, row] == fold else "TRAIN", row, repeat, fold]
        for repeat in range(task.repeats)
        for fold in range(task.folds)
        for row in range(len(task.frame))
    ]
    return arff.dumps(
        {
            "relation": f"{task.name}_splits",
            "attributes": [
                ("type", ["TRAIN", "TEST"]),
                ("rowid", "INTEGER"),
                ("repeat", "INTEGER"),
                ("fold", "INTEGER"),
            ],
            "data": rows,
        }
    )


class _Handler(BaseHTTPRequestHandler):
    root: Path

    def _file(self) -> tuple[str, Path | None]:
        relative = self.path.split("?", 1)[0].lstrip("/")
        path = (self.root / relative).resolve()
        inside = path.is_relative_to(self.root.resolve()) and path.is_file()
        return relative, path if inside else None

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's name; MinIO's stat_object
        _, path = self._file()
        if path is None:
            self.send_response(404)
            self.end_headers()
            return
        self._object_headers(path)
        self.end_headers()

    def _object_headers(self, path: Path) -> None:
        body = path.read_bytes()
        self.send_response(200)
        self.send_header("ETag", f'"{hashlib.md5(body).hexdigest()}"')
        self.send_header("Last-Modified", formatdate(path.stat().st_mtime, usegmt=True))
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/octet-stream")

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        relative, path = self._file()
        if path is not None and relative.startswith("datasets/"):  # an object of the MinIO store
            self._object_headers(path)
            self.end_headers()
            self.wfile.write(path.read_bytes())
            return
        if path is not None:
            self._send(200, path.read_bytes())
            return
        parts = relative.split("/")  # api/v1/xml/KIND/ID
        kind = parts[3] if len(parts) > 3 and parts[:3] == ["api", "v1", "xml"] else ""
        code, message = UNKNOWN_ERRORS.get(kind, (0, "Not found"))
        body = (
            f"<oml:error {XML_NS}><oml:code>{code}</oml:code><oml:message>{message}</oml:message></oml:error>"
        )
        self._send(412 if code else 404, body.encode("utf-8"))

    def _send(self, status: int, body: bytes) -> None:
        compressed = gzip.compress(body)
        self.send_response(status)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(compressed)))
        self.end_headers()
        self.wfile.write(compressed)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
        return  # quiet: the test reports what matters


class OpenMLServer:
    """Serves `root` on 127.0.0.1 (a free port) until `stop()`; `url` is what `openml.config.server` takes."""

    def __init__(self, root: Path, port: int = 0) -> None:
        handler = type("Handler", (_Handler,), {"root": root})
        self._server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/api/v1/xml"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
