"""XGBoost models as written by ``Booster.save_model`` (``.json``/``.ubj``) or
``Booster.save_raw("json" | "ubj")``: gbtree or dart booster, numerical splits, an objective whose
prediction is the raw margin (:data:`IDENTITY_OBJECTIVES`), a binary classifier's log-odds
(:data:`LOGISTIC_OBJECTIVES`: the ensemble predicts the margin, the log-odds of label 1), a log-link
model's log of its prediction (:data:`LOG_LINK_OBJECTIVES`: the regressions ``count:poisson``,
``reg:gamma``, ``reg:tweedie``, whose prediction is the mean, and the Cox model ``survival:cox``, whose
prediction is the hazard ratio; the ensemble predicts the margin, ``exp`` of it is XGBoost's prediction), or a
multiclass classifier's K margins (:data:`MULTICLASS_OBJECTIVES`, ``num_class`` K: an ensemble of
``n_outputs = K`` outputs whose prediction is ``predict(output_margin=True)``, the softmax logits).
``survival:aft`` is refused: its margin is the location of the log survival time's distribution in an
accelerated failure time model, which FIRE has no loss for.

Several outputs: tree ``i`` adds to output ``tree_info[i]`` (a per-output tree). Multiclass models
(K trees per round) and multi-target regressions (``num_target`` K > 1 with the default
``multi_strategy="one_output_per_tree"``) are read that way; vector-leaf trees
(``multi_strategy="multi_output_tree"``) are refused.

Exactness: XGBoost goes left iff ``float32(x) < float32(split_condition)``. For float32 values
``x < t`` is ``x <= nextafter(t, -inf)``, so the threshold stored is
``float64(nextafter(float32(t), -inf))``: the routing is identical for every input. Leaf values are
XGBoost's float32 values; XGBoost sums them in float32, we sum in float64, so predictions agree to
~1e-6 relative, not bit for bit.

All trees are used, as ``Booster.predict`` does by default (``XGBRegressor.predict`` stops at
``best_iteration`` after early stopping: save ``booster[: best_iteration + 1]`` to get that model).
``base_score`` (``"[5E-1]"`` in 3.x, ``"5E-1"`` before) is the margin for the identity-link
objectives and ``binary:logitraw``, a probability for ``binary:logistic`` (the margin is its logit, in
float32 as XGBoost computes it) and the mean (the hazard ratio for ``survival:cox``) for the log-link
objectives (the margin is its log, in float32). With K outputs it is a list of K values (3.1 and later; one
value, as before, is used for every output), transformed one by one; the multiclass objectives' values are
margins (XGBoost 3.x stores the centered log class priors there and adds them as they are). dart: each
tree's leaves are scaled by its ``weight_drop``. ``num_parallel_tree > 1`` (boosted random forests) is a
plain sum of all trees.
"""

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._validation import node_array
from ..forest import TreeEnsemble
from ..forest_schema import DEFAULT_MAX_OUTPUTS, LEAF, LEAF_FEATURE, Tree
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
LOG_LINK_OBJECTIVES = frozenset({"count:poisson", "reg:gamma", "reg:tweedie", "survival:cox"})
MULTICLASS_OBJECTIVES = frozenset({"multi:softprob", "multi:softmax"})
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
    model_param = get(learner, "learner_model_param", "/learner", dict)
    n_outputs = _output_count(model_param, objective, limits.get("max_outputs", DEFAULT_MAX_OUTPUTS))
    trees_path, trees, weight_drop, groups = _trees(learner, n_outputs)
    feature_types = learner.get("feature_types")
    categorical = [j for j, kind in enumerate(feature_types) if kind == "c"] if isinstance(feature_types, list) else []
    converted = [
        _tree(tree, pointer(trees_path, t), categorical, drop_weight, int(group) if n_outputs > 1 else None)
        for t, (tree, drop_weight, group) in enumerate(zip(trees, weight_drop, groups))
    ]
    kept_nodes = [kept for _, kept in converted]
    tree_info_path = trees_path.removesuffix("/trees") + "/tree_info"

    def tree_field(parts: list[str]) -> str:
        if len(parts) > 1 and parts[1] == "output":
            return pointer(tree_info_path, parts[0])
        field = trees_path
        if parts:
            field = pointer(field, parts[0])
        if len(parts) > 1:
            field += "/" + _SOURCE_ARRAYS.get(parts[1], parts[1])
        if len(parts) > 2:  # a node id of the tree without XGBoost's deleted nodes
            field += f"/{kept_nodes[int(parts[0])][int(parts[2])]}"
        return field

    base_margins = _base_margins(get(model_param, "base_score", _PARAM_PATH), objective, n_outputs)
    return checked_ensemble(
        [tree for tree, _ in converted],
        {
            "n_features": f"{_PARAM_PATH}/num_feature",
            "feature_names": "/learner/feature_names",
            "n_outputs": f"{_PARAM_PATH}/{'num_class' if objective in MULTICLASS_OBJECTIVES else 'num_target'}",
            "base_score": f"{_PARAM_PATH}/base_score",
        },
        tree_field,
        limits,
        n_features=integer(get(model_param, "num_feature", _PARAM_PATH), f"{_PARAM_PATH}/num_feature"),
        feature_names=given_names(learner.get("feature_names")),
        base_score=base_margins[0] if n_outputs == 1 else base_margins,
        tree_weight=1.0,
        kind="xgboost",
        n_outputs=n_outputs,
    )


def _output_count(model_param: dict, objective: str, max_outputs: int) -> int:
    """K, the model's outputs: ``num_class`` for a multiclass objective, else ``num_target`` (1 unless a
    multi-target regression); at most ``max_outputs``."""
    num_class = integer(model_param.get("num_class", "0"), f"{_PARAM_PATH}/num_class")
    num_target = integer(model_param.get("num_target", "1"), f"{_PARAM_PATH}/num_target")
    for key, count in (("num_class", num_class), ("num_target", num_target)):
        if count > max_outputs:
            raise ForestFormatError(
                f"{_PARAM_PATH}/{key}", f"is {count}, more than the limit of {max_outputs} outputs."
            )
    if objective in MULTICLASS_OBJECTIVES:
        if num_class < 1:
            raise ForestFormatError(
                f"{_PARAM_PATH}/num_class", f"is {num_class} but a {objective} model has num_class >= 1."
            )
        if num_target != 1:
            raise ForestFormatError(
                f"{_PARAM_PATH}/num_target", f"the {objective} model has {num_target} targets; only one is supported."
            )
        return num_class
    if num_class > 1:
        raise ForestFormatError(
            f"{_PARAM_PATH}/num_class",
            f"the model has {num_class} classes but its objective '{objective}' is not multiclass.",
        )
    if num_target < 1:
        raise ForestFormatError(f"{_PARAM_PATH}/num_target", f"is {num_target} but must be at least 1.")
    return num_target


def _trees(learner: dict, n_outputs: int) -> tuple[str, list, np.ndarray, np.ndarray]:
    """(JSON pointer of the trees, the trees, each tree's leaf scale: dart's weight_drop or 1, each tree's
    output group in [0, n_outputs))."""
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
    groups = np.zeros(len(trees), dtype=np.int64)
    if "tree_info" in model or n_outputs > 1:
        groups = _parallel_array(model, "tree_info", model_path, "int", len(trees), "trees")
        outside = (groups < 0) | (groups >= n_outputs)
        if outside.any():
            i = int(np.flatnonzero(outside)[0])
            raise ForestFormatError(
                pointer(f"{model_path}/tree_info", i),
                f"tree {i} is for output group {groups[i]} but the model has {n_outputs} output(s): "
                f"groups lie in [0, {n_outputs}).",
            )
    weight_drop = np.ones(len(trees))
    if name == "dart":
        weight_drop = _parallel_array(booster, "weight_drop", booster_path, "float", len(trees), "trees")
    return f"{model_path}/trees", trees, weight_drop, groups


def _checked_objective(learner: dict) -> str:
    objective = get(get(learner, "objective", "/learner", dict), "name", "/learner/objective", str)
    if objective in IDENTITY_OBJECTIVES | LOGISTIC_OBJECTIVES | LOG_LINK_OBJECTIVES | MULTICLASS_OBJECTIVES:
        return objective
    if objective.startswith("survival:"):
        raise ForestFormatError(
            "/learner/objective/name",
            f"objective '{objective:.60}' is not supported: of the survival objectives only survival:cox (its "
            "margin is the log hazard ratio) is read. An accelerated failure time model's (survival:aft) margin "
            "is the location of its log survival time's distribution, which FIRE has no loss for: retrain with "
            "objective='survival:cox'.",
        )
    kind = (
        "classification"
        if objective.startswith(("binary:", "multi:", "reg:logistic"))
        else "ranking"
        if objective.startswith("rank:")
        else "unsupported"
    )
    raise ForestFormatError(
        "/learner/objective/name",
        f"objective '{objective:.60}' is {kind}: only regression objectives whose prediction is the raw "
        f"margin ({', '.join(sorted(IDENTITY_OBJECTIVES - {'reg:linear'}))}), the log-link objectives "
        f"({', '.join(sorted(LOG_LINK_OBJECTIVES))}), binary classifiers "
        f"({', '.join(sorted(LOGISTIC_OBJECTIVES))}) and multiclass classifiers "
        f"({', '.join(sorted(MULTICLASS_OBJECTIVES))}) are supported.",
    )


def _base_margins(value: Any, objective: str, n_outputs: int) -> list[float]:
    """The margin each output starts from (``n_outputs`` values): ``base_score``, its logit for
    binary:logistic, its log for the log-link objectives."""
    path = f"{_PARAM_PATH}/base_score"
    scores = _base_scores(value, path, n_outputs)
    if objective == "binary:logistic":
        if not all(0.0 < score < 1.0 for score in scores):
            raise ForestFormatError(
                path, f"base_score {value!r:.60} of a {objective} model must be a probability in (0, 1)."
            )
        return [float(-np.log(np.float32(1.0) / np.float32(score) - np.float32(1.0))) for score in scores]
    if objective in LOG_LINK_OBJECTIVES:
        if not all(score > 0.0 for score in scores):
            what = "hazard ratio" if objective == "survival:cox" else "mean"
            raise ForestFormatError(path, f"base_score {value!r:.60} of a {objective} model must be a positive {what}.")
        return [float(np.log(np.float32(score))) for score in scores]
    return scores


def _base_scores(value: Any, path: str, n_outputs: int) -> list[float]:
    """``n_outputs`` float32 values of base_score: as many as given, or one value for every output."""
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
    if len(values) != n_outputs and len(values) != 1:
        expected = "one base score" if n_outputs == 1 else f"one base score or {n_outputs} (one per output)"
        raise ForestFormatError(path, f"expected {expected}, got {len(values)}.")
    numbers = []
    for entry in values:
        try:
            number = float(entry)
        except (TypeError, ValueError):
            raise ForestFormatError(path, f"base_score {value!r:.40} is not a number.") from None
        if not math.isfinite(number):
            raise ForestFormatError(path, "base_score must be finite.")
        with np.errstate(over="ignore"):
            number32 = np.float32(number)
        if not np.isfinite(number32):
            raise ForestFormatError(path, "base_score must be finite as float32.")
        numbers.append(float(number32))
    return numbers * n_outputs if len(numbers) == 1 else numbers


def _parallel_array(entry: dict, key: str, path: str, kind: str, n: int, of: str) -> np.ndarray:
    """``entry[key]`` as a numpy array of ``n`` entries, one per element of ``of``."""
    array = node_array(get(entry, key, path), f"{path}/{key}", kind, entry_error)
    if array.shape[0] != n:
        raise entry_error(f"{path}/{key}", f"has {array.shape[0]} entries for {n} {of}")
    return array


def _tree(
    tree: Any, path: str, categorical: list[int], drop_weight: float, output: int | None = None
) -> tuple[Tree, np.ndarray]:
    """One XGBoost tree as our Tree (adding to ``output`` when the model has several), and the XGBoost
    node id of each of its nodes.

    Parsing only: TreeEnsemble checks the structure (children, depth, feature range).
    """
    tree_param = get(tree, "tree_param", path, dict, required=False, default={})
    if integer(tree_param.get("size_leaf_vector", 1), f"{path}/tree_param/size_leaf_vector") > 1:
        raise ForestFormatError(
            f"{path}/tree_param/size_leaf_vector",
            "vector-leaf trees (multi_strategy='multi_output_tree') are not supported; retrain with "
            "multi_strategy='one_output_per_tree' (the default).",
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
    tree, kept = _without_deleted_nodes(
        left,
        right,
        feature=np.where(split, split_index, LEAF_FEATURE),
        threshold=threshold,
        value=value,
        missing_go_left=default_left == 1,
    )
    return dataclasses.replace(tree, output=output), kept


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
