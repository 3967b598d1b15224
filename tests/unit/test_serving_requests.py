"""Each serving stack's request and answer format, on a frame with the kinds of columns real data has
(integers, floats with missing values, text): MLflow's dataframe_split, MLServer's V2 tensors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from tasks.evaluations.stacks import all_stacks

ROWS = pd.DataFrame({"age": [30, 41], "income": [1200.5, np.nan], "home": ["owner", "rent"]})


def test_the_mlflow_format_is_dataframe_split_with_missing_values_as_null() -> None:
    body = json.loads(all_stacks()["mlflow"].body(ROWS))
    assert body == {"dataframe_split": {"columns": ["age", "income", "home"],
                                        "data": [[30, 1200.5, "owner"], [41, None, "rent"]]}}
    answer = '{"predictions": [{"prediction": "good", "proba_good": 0.75}]}'
    assert all_stacks()["onnxruntime"].answer_rows(answer).to_dict("list") == {"prediction": ["good"],
                                                                               "proba_good": [0.75]}


def test_the_mlserver_format_is_one_v2_tensor_per_column() -> None:
    stack = all_stacks()["mlserver"]
    assert stack.request_path == "/v2/models/model/infer"
    body = json.loads(stack.body(ROWS))
    assert body["parameters"] == {"content_type": "pd"}
    assert body["inputs"] == [
        {"name": "age", "shape": [2], "datatype": "INT64", "data": [30, 41]},
        {"name": "income", "shape": [2], "datatype": "FP64", "data": [1200.5, None]},
        {"name": "home", "shape": [2], "datatype": "BYTES", "data": ["owner", "rent"]}]
    answer = json.dumps({"model_name": "model", "outputs": [
        {"name": "prediction", "shape": [2, 1], "datatype": "BYTES", "data": ["good", "bad"]},
        {"name": "proba_good", "shape": [2, 1], "datatype": "FP64", "data": [0.75, 0.25]}]})
    assert stack.answer_rows(answer).to_dict("list") == {"prediction": ["good", "bad"],
                                                         "proba_good": [0.75, 0.25]}
