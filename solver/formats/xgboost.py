"""XGBoost models as written by ``Booster.save_model`` (``.json``/``.ubj``) or
``Booster.save_raw("json" | "ubj")``: gbtree or dart booster, numerical splits, one output, an
objective whose prediction is the raw margin (:data:`IDENTITY_OBJECTIVES`) or a binary classifier's
log-odds (:data:`LOGISTIC_OBJECTIVES`: the ensemble predicts the margin, the log-odds of label 1).

Exactness: XGBoost goes left iff ``float32(x) < float32(split_condition)``. For float32 values
``x < t`` is ``x <= nextafter(t, -inf)``, so the threshold stored is
``float64(nextafter(float32(t), -inf))``: the routing is identical for every input. Leaf values are
XGBoost's float32 values; XGBoost sums them in float32, we sum in float64, so predictions agree to
~1e-6 relative, not bit for bit.

All trees are used, as ``Booster.predict`` does by default (``XGBRegressor.predict`` stops at
``best_iteration`` after early stopping: save ``booster[: best_iteration + 1]`` to get that model).
``base_score`` (``"[5E-1]"`` in 3.x, ``"5E-1"`` before) is the margin for the identity-link
objectives and ``binary:logitraw``, a probability for ``binary:logistic`` (the margin is its logit, in
float32 as XGBoost computes it). dart: each tree's leaves are scaled by its ``weight_drop``.
``num_parallel_tree > 1`` (boosted random forests) is a plain sum of all trees.
"""

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._validation import node_array
from ..forest import LEAF, LEAF_FEATURE, Tree, TreeEnsemble
from . import ubjson
from .errors import ForestFormatError, checked_ensemble, entry_error, pointer
from .fields import get, given_names, integer, type_name

IDENTITY_OBJECTIVES = frozenset(
    {
        "reg:squarederror",
        "reg:linear",
        "reg:absoluteerror",
        "reg:pseudohubererror",
        "reg:quantileerror",
        "reg:squaredlogerror",
    }
)
LOGISTIC_OBJECTIVES = frozenset({"binary:logistic", "binary:logitraw"})
# where TreeEnsemble's per-node arrays come from in an XGBoost tree
_SOURCE_ARRAYS = {
    "children_left": "left_children",
    "children_right": "right_children",
    "feature": "split_indices",
    "threshold": "split_conditions",
    "value": "split_conditions",
    "missing_go_left": "default_left",
}
_PARAM_PATH = "/learner/learner_model_param"
_LARGEST_FLOAT64 = float(np.finfo(np.float64).max)
_CATEGORICAL = (
    "categorical split: only numerical splits are supported. Retrain without enable_categorical "
    "(one-hot or ordinal-encode the categorical features)."
)


def load_ubjson(data: bytes, limits: Mapping[str, int]) -> TreeEnsemble:
    document = ubjson.decode(data)
    if not isinstance(document, dict) or not isinstance(document.get("learner"), dict):
        raise ForestFormatError("file", "a UBJSON document that is not an XGBoost model (no 'learner').", "unsupported")
    return load(document, limits)


def load(document: dict, limits: Mapping[str, int]) -> TreeEnsemble:
    """The TreeEnsemble of a parsed XGBoost model; ``limits`` are TreeEnsemble's size limits."""
    learner = get(document, "learner", "", dict)
    objective = _checked_objective(learner)
    trees_path, trees, weight_drop = _trees(learner)
    model_param = _single_output_param(learner)
    feature_types = learner.get("feature_types")
    categorical = [j for j, kind in enumerate(feature_types) if kind == "c"] if isinstance(feature_types, list) else []
    converted = [
        _tree(tree, pointer(trees_path, t), categorical, drop_weight)
        for t, (tree, drop_weight) in enumerate(zip(trees, weight_drop))
    ]
    kept_nodes = [kept for _, kept in converted]

    def tree_field(parts: list[str]) -> str:
        field = trees_path
        if parts:
            field = pointer(field, parts[0])
        if len(parts) > 1:
            field += "/" + _SOURCE_ARRAYS[parts[1]]
        if len(parts) > 2:  # a node id of the tree without XGBoost's deleted nodes
            field += f"/{kept_nodes[int(parts[0])][int(parts[2])]}"
        return field

    return checked_ensemble(
        [tree for tree, _ in converted],
        {"n_features": f"{_PARAM_PATH}/num_feature", "feature_names": "/learner/feature_names"},
        tree_field,
        limits,
        n_features=integer(get(model_param, "num_feature", _PARAM_PATH), f"{_PARAM_PATH}/num_feature"),
        feature_names=given_names(learner.get("feature_names")),
        base_score=_base_margin(get(model_param, "base_score", _PARAM_PATH), objective),
        tree_weight=1.0,
        kind="xgboost",
    )


def _single_output_param(learner: dict) -> dict:
    """learner_model_param, checked to describe one output."""
    model_param = get(learner, "learner_model_param", "/learner", dict)
    num_class = integer(model_param.get("num_class", "0"), f"{_PARAM_PATH}/num_class")
    if num_class > 1:
        raise ForestFormatError(
            f"{_PARAM_PATH}/num_class",
            f"the model has {num_class} classes; only single-output regression is supported.",
        )
    num_target = integer(model_param.get("num_target", "1"), f"{_PARAM_PATH}/num_target")
    if num_target != 1:
        raise ForestFormatError(
            f"{_PARAM_PATH}/num_target",
            f"the model has {num_target} targets; only single-output regression is supported.",
        )
    return model_param


def _trees(learner: dict) -> tuple[str, list, np.ndarray]:
    """(JSON pointer of the trees, the trees, each tree's leaf scale: dart's weight_drop or 1)."""
    booster_path = "/learner/gradient_booster"
    booster = get(learner, "gradient_booster", "/learner", dict)
    name = get(booster, "name", booster_path, str)
    if name == "gblinear":
        raise ForestFormatError(
            f"{booster_path}/name", "this is a linear booster (gblinear): it has no trees. Train with booster='gbtree'."
        )
    if name not in ("gbtree", "dart"):
        raise ForestFormatError(
            f"{booster_path}/name", f"unsupported booster '{name:.40}'; only gbtree and dart are supported."
        )
    gbtree_path, gbtree = booster_path, booster
    if name == "dart":
        gbtree_path, gbtree = f"{booster_path}/gbtree", get(booster, "gbtree", booster_path, dict)
    model_path = f"{gbtree_path}/model"
    model = get(gbtree, "model", gbtree_path, dict)
    trees = get(model, "trees", model_path, list)
    if "tree_info" in model:
        groups = _parallel_array(model, "tree_info", model_path, "int", len(trees), "trees")
        if (groups != 0).any():
            raise ForestFormatError(
                pointer(f"{model_path}/tree_info", int(np.flatnonzero(groups)[0])),
                "trees for more than one output group: only single-output regression is supported.",
            )
    weight_drop = np.ones(len(trees))
    if name == "dart":
        weight_drop = _parallel_array(booster, "weight_drop", booster_path, "float", len(trees), "trees")
    return f"{model_path}/trees", trees, weight_drop


def _checked_objective(learner: dict) -> str:
    objective = get(get(learner, "objective", "/learner", dict), "name", "/learner/objective", str)
    if objective in IDENTITY_OBJECTIVES | LOGISTIC_OBJECTIVES:
        return objective
    kind = (
        "classification"
        if objective.startswith(("binary:", "multi:", "reg:logistic"))
        else "ranking"
        if objective.startswith("rank:")
        else "survival"
        if objective.startswith("survival:")
        else "log-link regression"
        if objective in ("reg:gamma", "reg:tweedie", "count:poisson")
        else "unsupported"
    )
    raise ForestFormatError(
        "/learner/objective/name",
        f"objective '{objective:.60}' is {kind}: only regression objectives whose prediction is the raw "
        f"margin ({', '.join(sorted(IDENTITY_OBJECTIVES - {'reg:linear'}))}) and binary classifiers "
        f"({', '.join(sorted(LOGISTIC_OBJECTIVES))}) are supported.",
    )


def _base_margin(value: Any, objective: str) -> float:
    """The margin every prediction starts from: ``base_score``, or its logit for binary:logistic."""
    path = f"{_PARAM_PATH}/base_score"
    base_score = _base_score(value, path)
    if objective != "binary:logistic":
        return base_score
    if not 0.0 < base_score < 1.0:
        raise ForestFormatError(
            path, f"base_score {base_score} of a {objective} model must be a probability in (0, 1)."
        )
    probability = np.float32(base_score)
    return float(-np.log(np.float32(1.0) / probability - np.float32(1.0)))


def _base_score(value: Any, path: str) -> float:
    if isinstance(value, (list, np.ndarray)):
        values = list(np.asarray(value).reshape(-1))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        values = [value]
    elif isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        values = [part for part in text.split(",") if part.strip()]
    else:
        raise ForestFormatError(path, f"expected a number or a string, got {type_name(value)}.")
    if len(values) != 1:
        raise ForestFormatError(
            path, f"expected one base score, got {len(values)} (multi-output models are not supported)."
        )
    try:
        number = float(values[0])
    except (TypeError, ValueError):
        raise ForestFormatError(path, f"base_score {value!r:.40} is not a number.") from None
    if not math.isfinite(number):
        raise ForestFormatError(path, "base_score must be finite.")
    return float(np.float32(number))


def _parallel_array(entry: dict, key: str, path: str, kind: str, n: int, of: str) -> np.ndarray:
    """``entry[key]`` as a numpy array of ``n`` entries, one per element of ``of``."""
    array = node_array(get(entry, key, path), f"{path}/{key}", kind, entry_error)
    if array.shape[0] != n:
        raise entry_error(f"{path}/{key}", f"has {array.shape[0]} entries for {n} {of}")
    return array


def _tree(tree: Any, path: str, categorical: list[int], drop_weight: float) -> tuple[Tree, np.ndarray]:
    """One XGBoost tree as our Tree, and the XGBoost node id of each of its nodes.

    Parsing only: TreeEnsemble checks the structure (children, depth, feature range).
    """
    tree_param = get(tree, "tree_param", path, dict, required=False, default={})
    if integer(tree_param.get("size_leaf_vector", 1), f"{path}/tree_param/size_leaf_vector") > 1:
        raise ForestFormatError(
            f"{path}/tree_param/size_leaf_vector", "vector-leaf (multi-target) trees are not supported."
        )
    left = node_array(get(tree, "left_children", path), f"{path}/left_children", "int", entry_error)
    n = left.shape[0]
    right, split_index, default_left = (
        _parallel_array(tree, key, path, "int", n, "nodes")
        for key in ("right_children", "split_indices", "default_left")
    )
    condition = _parallel_array(tree, "split_conditions", path, "float", n, "nodes")
    if "num_nodes" in tree_param and integer(tree_param["num_nodes"], f"{path}/tree_param/num_nodes") != n:
        raise ForestFormatError(
            f"{path}/tree_param/num_nodes", f"num_nodes is {tree_param['num_nodes']} but the arrays have {n} entries."
        )
    _check_flags(default_left, f"{path}/default_left")
    split = left != LEAF
    if "split_type" in tree:
        split_type = _parallel_array(tree, "split_type", path, "int", n, "nodes")
        _refuse_categorical(split & (split_type != 0), f"{path}/split_type")
    _refuse_categorical(split & np.isin(split_index, categorical), f"{path}/split_indices")
    categories_nodes = tree.get("categories_nodes")
    if isinstance(categories_nodes, (list, np.ndarray)) and len(categories_nodes) > 0:
        raise ForestFormatError(f"{path}/categories_nodes", _CATEGORICAL)
    with np.errstate(over="ignore"):
        condition32 = condition.astype(np.float32)
    beyond = np.flatnonzero(~np.isfinite(condition32))
    if beyond.size:
        raise ForestFormatError(
            pointer(f"{path}/split_conditions", int(beyond[0])),
            "split conditions and leaf values must be finite as float32.",
        )
    threshold = np.where(split, np.nextafter(condition32, np.float32(-np.inf)).astype(np.float64), 0.0)
    # x < -FLT_MAX holds for no finite float32: a finite stand-in for -inf routes identically
    threshold[np.isneginf(threshold)] = -_LARGEST_FLOAT64
    value = np.where(split, 0.0, condition32.astype(np.float64) * float(np.float32(drop_weight)))
    return _without_deleted_nodes(
        left,
        right,
        feature=np.where(split, split_index, LEAF_FEATURE),
        threshold=threshold,
        value=value,
        missing_go_left=default_left == 1,
    )


def _without_deleted_nodes(left: np.ndarray, right: np.ndarray, **arrays: np.ndarray) -> tuple[Tree, np.ndarray]:
    """Our Tree without XGBoost's deleted nodes (pruning leaves them in the arrays as leaves no node
    points to), and the XGBoost id of each node kept; children ids out of range stay as they are."""
    n = left.shape[0]
    has_parent = np.zeros(n, dtype=bool)
    for children in (left, right):
        has_parent[children[(children >= 0) & (children < n)]] = True
    deleted = ~has_parent & (left == LEAF) & (right == LEAF)
    deleted[:1] = False  # the root
    kept = np.flatnonzero(~deleted)
    new_id = np.cumsum(~deleted) - 1

    def renumbered(children: np.ndarray) -> np.ndarray:
        children = children[kept]
        inside = (children >= 0) & (children < n)
        return np.where(inside, new_id[np.clip(children, 0, n - 1)], children)

    return Tree(
        children_left=renumbered(left),
        children_right=renumbered(right),
        **{name: array[kept] for name, array in arrays.items()},
    ), kept


def _refuse_categorical(categorical_split: np.ndarray, path: str) -> None:
    if categorical_split.any():
        raise ForestFormatError(pointer(path, int(np.flatnonzero(categorical_split)[0])), _CATEGORICAL)


def _check_flags(flags: np.ndarray, path: str) -> None:
    bad = np.flatnonzero((flags != 0) & (flags != 1))
    if bad.size:
        raise entry_error(pointer(path, int(bad[0])), f"is {flags[bad[0]]} but must be 0 or 1")
