"""A fitted HistGradientBoosting model as one ONNX graph that answers as scikit-learn does,
categorical splits included.

skl2onnx's HistGradientBoosting converter (1.20) writes every split as `x <= num_threshold`: a
categorical split (a set of categories going left) would come out as a threshold that means
nothing, and its predictions would be wrong without an error. This graph instead uses ONNX-ML's
TreeEnsemble (opset 5), whose BRANCH_MEMBER node is a set test, in double precision as scikit-learn
predicts, so the trees route every row as the fitted model does:

- a missing value (or a category the model did not see) goes the node's missing side;
- a category goes left when it is in the node's left set, else right; a category the encoder knows
  but the trees' binning did not see (it fell in early stopping's validation split) goes the
  missing side, as scikit-learn's predictor sends unknown categories;
- a number goes left when it is <= the node's threshold.

The graph then adds the baseline and applies the loss's inverse link (sigmoid, softmax, identity).
The feed turns a frame into the model's own column order, each category as its encoder's code.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks.base import TaskInfo
from tasks.frameworks.capabilities import NotOffered, OnnxGraph

OPSET = {"": 17, "ai.onnx.ml": 5}
BRANCH_LEQ, BRANCH_MEMBER = 0, 6  # TreeEnsemble's nodes_modes
BITS = 32  # scikit-learn's category bitsets are rows of uint32


def hgb_graph(estimator: Any, schema: Any, task: TaskInfo) -> OnnxGraph:
    """`estimator`: the fitted HistGradientBoosting model, or a Pipeline whose last step is one (its
    earlier steps, frame to frame, run in the feed). Raises NotOffered for a loss it cannot mirror."""
    steps = estimator.steps if hasattr(estimator, "steps") else [("boost", estimator)]
    model = steps[-1][1]
    before = [step for _, step in steps[:-1]]
    link = type(model._loss.link).__name__
    if not task.is_classification and link != "IdentityLink":
        raise NotOffered(f"hgb regression with loss {model.loss!r} (link {link}): its ONNX graph mirrors "
                         "the squared, absolute and quantile losses only")
    columns, codes = _input_columns(model)

    def feed(X: pd.DataFrame) -> dict[str, np.ndarray]:
        frame = schema.apply(X)
        for step in before:
            frame = step.transform(frame)
        matrix = np.empty((len(frame), len(columns)), dtype=np.float64)
        for j, column in enumerate(columns):
            if column in codes:  # the encoder's code, NaN for a missing or unknown category
                found = codes[column].get_indexer(frame[column].astype(object))
                matrix[:, j] = np.where(found < 0, np.nan, found)
            else:
                matrix[:, j] = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)
        return {"X": matrix}

    n_codes = {j: len(codes[c]) for j, c in enumerate(columns) if c in codes}
    graph = _graph(model, n_codes, len(columns), task)
    classes = list(getattr(model, "classes_", []))
    return OnnxGraph(graph, feed, 0, classes,
                     "the whole fitted model: its trees with their categorical splits, baseline and link "
                     "(category codes computed in the feed from its encoder's categories)")


def _input_columns(model: Any) -> tuple[list[str], dict[str, pd.Index]]:
    """The columns in the order the trees index them, and each categorical one's encoder categories
    (missing values, which the encoder codes as NaN, left out)."""
    preprocessor = getattr(model, "_preprocessor", None)
    names = [str(c) for c in model.feature_names_in_]
    if preprocessor is None:  # no categorical column: the frame's columns as they are
        return names, {}
    columns: list[str] = []
    codes: dict[str, pd.Index] = {}
    for name, transformer, selected in preprocessor.transformers_:
        if isinstance(transformer, str):  # "drop": the remainder, empty
            continue
        picked = np.asarray(preprocessor.feature_names_in_)[selected].tolist()
        columns.extend(picked)
        if name == "encoder":
            for column, categories in zip(picked, transformer.categories_, strict=True):
                codes[column] = pd.Index([c for c in categories if not pd.isna(c)], dtype=object)
    return columns, codes


def _graph(model: Any, n_codes: dict[int, int], n_features: int, task: TaskInfo) -> Any:
    from onnx import TensorProto, helper, numpy_helper

    known, known_row = model._bin_mapper.make_known_categories_bitsets()
    trees = _Trees()
    for iteration in model._predictors:
        for target, predictor in enumerate(iteration):
            trees.add(predictor, target, n_codes, known, known_row)
    targets = int(model.n_trees_per_iteration_)
    ensemble = helper.make_node(
        "TreeEnsemble", ["X"], ["raw_trees"], domain="ai.onnx.ml", n_targets=targets, aggregate_function=1,
        post_transform=0, tree_roots=trees.roots,
        nodes_featureids=trees.features, nodes_modes=_tensor(trees.modes, np.uint8, "modes"),
        nodes_splits=_tensor(trees.splits, np.float64, "splits"),
        nodes_truenodeids=trees.true_ids, nodes_trueleafs=trees.true_leaf,
        nodes_falsenodeids=trees.false_ids, nodes_falseleafs=trees.false_leaf,
        nodes_missing_value_tracks_true=trees.missing_true,
        membership_values=_tensor(trees.members or [np.nan], np.float64, "members"),
        leaf_targetids=trees.leaf_targets, leaf_weights=_tensor(trees.leaf_weights, np.float64, "weights"))
    baseline = numpy_helper.from_array(
        np.asarray(model._baseline_prediction, dtype=np.float64).reshape(1, targets), "baseline")
    nodes = [ensemble, helper.make_node("Add", ["raw_trees", "baseline"], ["raw"])]
    initializers = [baseline]
    if not task.is_classification:
        nodes.append(helper.make_node("Identity", ["raw"], ["output"]))
        width: int | str = 1
    elif targets == 1:  # binary: the positive class's probability is sigmoid(raw)
        initializers.append(numpy_helper.from_array(np.ones((1, 1)), "one"))
        nodes += [helper.make_node("Sigmoid", ["raw"], ["positive"]),
                  helper.make_node("Sub", ["one", "positive"], ["negative"]),
                  helper.make_node("Concat", ["negative", "positive"], ["output"], axis=1)]
        width = 2
    else:
        nodes.append(helper.make_node("Softmax", ["raw"], ["output"], axis=1))
        width = targets
    body = helper.make_graph(
        nodes, "hgb", [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [None, n_features])],
        [helper.make_tensor_value_info("output", TensorProto.DOUBLE, [None, width])], initializers)
    graph = helper.make_model(body, opset_imports=[helper.make_opsetid(d, v) for d, v in OPSET.items()])
    # TreeEnsemble (ai.onnx.ml 5) needs IR 10; onnxruntime reads up to its own maximum.
    graph.ir_version = 10
    return graph


def _tensor(values: list[Any], dtype: Any, name: str) -> Any:
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def _in_bitset(bitset: np.ndarray, value: int) -> bool:
    return bool((int(bitset[value // BITS]) >> (value % BITS)) & 1)


class _Trees:
    """TreeEnsemble's parallel arrays: interior nodes and leaves, numbered apart."""

    def __init__(self) -> None:
        self.roots: list[int] = []
        self.features: list[int] = []
        self.modes: list[int] = []
        self.splits: list[float] = []
        self.true_ids: list[int] = []
        self.true_leaf: list[int] = []
        self.false_ids: list[int] = []
        self.false_leaf: list[int] = []
        self.missing_true: list[int] = []
        self.members: list[float] = []
        self.leaf_targets: list[int] = []
        self.leaf_weights: list[float] = []

    def add(self, predictor: Any, target: int, n_codes: dict[int, int], known: np.ndarray,
            known_row: np.ndarray) -> None:
        nodes = predictor.nodes
        if nodes[0]["is_leaf"]:
            # A tree that is one leaf: a node both of whose sides are that leaf (TreeEnsemble's
            # roots are nodes).
            self.roots.append(self._node(0, BRANCH_LEQ, 0.0, True))
            leaf = self._leaf(target, float(nodes[0]["value"]))
            self._link(self.roots[-1], (leaf, True), (leaf, True))
            return
        # Interior nodes and leaves each numbered in their own array, then linked.
        index: dict[int, tuple[int, bool]] = {}
        for i, node in enumerate(nodes):
            if node["is_leaf"]:
                index[i] = (self._leaf(target, float(node["value"])), True)
                continue
            feature = int(node["feature_idx"])
            go_left_missing = bool(node["missing_go_to_left"])
            if not node["is_categorical"]:
                index[i] = (self._node(feature, BRANCH_LEQ, float(node["num_threshold"]), go_left_missing),
                            False)
                continue
            left = predictor.raw_left_cat_bitsets[node["bitset_idx"]]
            seen = known[known_row[feature]]
            # A code goes left when in the left set, or when the trees never saw it and missing goes left.
            lefts = [code for code in range(n_codes.get(feature, 0))
                     if (_in_bitset(left, code) if _in_bitset(seen, code) else go_left_missing)]
            if lefts:
                index[i] = (self._node(feature, BRANCH_MEMBER, 0.0, go_left_missing), False)
                self.members += [float(code) for code in lefts] + [np.nan]
            else:  # no code goes left (codes are >= 0): a threshold below them all
                index[i] = (self._node(feature, BRANCH_LEQ, -1.0, go_left_missing), False)
        self.roots.append(index[0][0])
        for i, node in enumerate(nodes):
            if not node["is_leaf"]:
                self._link(index[i][0], index[int(node["left"])], index[int(node["right"])])

    def _node(self, feature: int, mode: int, split: float, missing_true: bool) -> int:
        self.features.append(feature)
        self.modes.append(mode)
        self.splits.append(split)
        self.missing_true.append(int(missing_true))
        for side in (self.true_ids, self.true_leaf, self.false_ids, self.false_leaf):
            side.append(0)
        return len(self.features) - 1

    def _leaf(self, target: int, weight: float) -> int:
        self.leaf_targets.append(target)
        self.leaf_weights.append(weight)
        return len(self.leaf_weights) - 1

    def _link(self, node: int, true: tuple[int, bool], false: tuple[int, bool]) -> None:
        self.true_ids[node], self.true_leaf[node] = true[0], int(true[1])
        self.false_ids[node], self.false_leaf[node] = false[0], int(false[1])
