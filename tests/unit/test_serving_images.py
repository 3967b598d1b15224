"""An image travels to the served model as base64 text in a binary column (MLflow's JSON format for
bytes): the signature says `binary`, MLflow's parser decodes it, and a model served without a
signature decodes the text itself."""

from __future__ import annotations

import base64
import json

import numpy as np
import pandas as pd
from mlflow.utils.proto_json_utils import dataframe_from_raw_json

from tasks.evaluations._pyfunc import signature_for, typed_by_roles
from tasks.images.codec import decode, encode_png
from tasks.task_info import TaskInfo

TASK = TaskInfo(problem_type="multiclass", target="label", metric="acc", column_roles={"image": "image"},
                classes=("0", "1"))


def png() -> bytes:
    return encode_png(np.arange(64, dtype=np.uint8).reshape(8, 8))


def test_the_signature_declares_images_binary_and_mlflow_decodes_the_base64_body() -> None:
    signature, _ = signature_for(pd.DataFrame({"image": [png(), png()]}))
    assert signature.inputs.to_dict() == [{"type": "binary", "name": "image", "required": True}]
    body = json.dumps({"columns": ["image"], "data": [[base64.b64encode(png()).decode("ascii")]]})
    parsed = dataframe_from_raw_json(body, schema=signature.inputs)
    assert parsed["image"].iloc[0] == png()
    assert typed_by_roles(parsed, TASK)["image"].iloc[0] == png()  # bytes stay bytes


def test_a_model_served_without_a_signature_decodes_the_base64_text_itself() -> None:
    frame = pd.DataFrame({"image": [base64.b64encode(png()).decode("ascii")]})
    decoded = typed_by_roles(frame, TASK)["image"].iloc[0]
    assert decoded == png() and decode(decoded).shape == (8, 8, 1)
