"""LightGBM models as the dict of ``Booster.dump_model()`` serialized as JSON: numerical splits, an
identity-link objective (:data:`IDENTITY_OBJECTIVES`), ``binary`` (a binary classifier: the ensemble
predicts the log-odds of label 1, ``sigmoid * raw score``, the objective's ``sigmoid`` folded into
``tree_weight``), a log-link regression (:data:`LOG_LINK_OBJECTIVES`: ``poisson``, ``gamma``,
``tweedie``; the ensemble predicts the raw score, the log of the mean, ``predict(raw_score=True)``), or a
multiclass classifier (:data:`MULTICLASS_OBJECTIVES`, ``num_class`` K, ``num_tree_per_iteration`` K):
an ensemble of ``n_outputs = K`` outputs whose tree ``i`` adds to output ``i % K``; ``multiclass``
predicts the raw scores (softmax logits, ``predict(raw_score=True)``), ``multiclassova`` each class's
one-vs-all log-odds, ``sigmoid * raw score``, as ``binary`` does.

Exactness: LightGBM compares the double value with a double threshold; we compare ``float32(x)``.
The routing is identical whenever the inputs are float32-representable (e.g. the model was trained
and is used on float32 data); for a double input that is not, a value within one float32 ulp of a
threshold may be routed differently than by LightGBM. LightGBM's ``missing_type``: ``"None"`` maps
NaN to 0.0 (so NaN goes left iff ``0.0 <= threshold``), ``"NaN"`` sends NaN to the default child,
``"Zero"`` (``zero_as_missing``) sends NaN and |x| <= 1e-35 to the default child, which is accepted
only where that agrees with the threshold comparison. Leaf values in the dump already include the
shrinkage (and the initial score, in the first tree), so ``base_score`` is 0; ``average_output``
(``boosting="rf"``) gives ``tree_weight = 1/T``, matching ``Booster.predict`` (note
``raw_score=True`` returns the unaveraged sum in that mode). ``internal_count``/``leaf_count``
become the trees' ``n_samples``.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._validation import is_integer, require_finite
from ..forest import TreeEnsemble
from ..forest_schema import LEAF, LEAF_FEATURE, Tree
from .errors import ForestFormatError, checked_ensemble, entry_error, pointer
from .fields import get, given_names, integer, type_name

# first token of the dumped objective string
IDENTITY_OBJECTIVES = frozenset(
    {
        "regression",
        "regression_l2",
        "l2",
        "mean_squared_error",
        "mse",
        "l2_root",
        "root_mean_squared_error",
        "rmse",
        "regression_l1",
        "l1",
        "mean_absolute_error",
        "mae",
        "huber",
        "fair",
        "quantile",
        "mape",
        "mean_absolute_percentage_error",
    }
)
LOG_LINK_OBJECTIVES = frozenset({"poisson", "gamma", "tweedie"})
MULTICLASS_OBJECTIVES = frozenset({"multiclass", "softmax", "multiclassova", "multiclass_ova", "ova", "ovr"})
_SIGMOID_OBJECTIVES = frozenset({"binary", "multiclassova", "multiclass_ova", "ova", "ovr"})
_ZERO_THRESHOLD = float(np.float32(1e-35))  # LightGBM's kZeroThreshold (1e-35f as double)
# the key of a dumped node each of TreeEnsemble's per-node arrays comes from
_SOURCE_KEYS = {
    "feature": "split_feature",
    "threshold": "threshold",
    "value": "leaf_value",
    "missing_go_left": "missing_type",
}


def load(document: dict, limits: Mapping[str, int]) -> TreeEnsemble:
    """The TreeEnsemble of a parsed ``dump_model()``; ``limits`` are TreeEnsemble's size limits."""
    objective, log_odds_per_raw_score = _objective(document.get("objective"))
    n_outputs = _output_count(document, objective)
    info = get(document, "tree_info", "", list)
    if len(info) % n_outputs or len(info) < n_outputs:  # bounds n_outputs by the upload's size
        raise ForestFormatError(
            "/tree_info",
            f"has {len(info)} trees, not a positive multiple of num_tree_per_iteration ({n_outputs}).",
        )
    trees, node_paths = [], []
    for t, entry in enumerate(info):
        path = pointer("/tree_info", t)
        if integer(get(entry, "num_cat", path, required=False, default=0), f"{path}/num_cat") > 0:
            raise ForestFormatError(
                f"{path}/num_cat", "the tree has categorical splits: only numerical splits are supported."
            )
        tree, paths = _tree(get(entry, "tree_structure", path), f"{path}/tree_structure")
        trees.append(dataclasses.replace(tree, output=t % n_outputs) if n_outputs > 1 else tree)
        node_paths.append(paths)

    def tree_field(parts: list[str]) -> str:
        if not parts:
            return "/tree_info"
        if len(parts) < 3:
            return pointer("/tree_info", parts[0]) + "/tree_structure"
        node = node_paths[int(parts[0])][int(parts[2])]
        return f"{node}/{_SOURCE_KEYS[parts[1]]}" if parts[1] in _SOURCE_KEYS else node

    average = get(document, "average_output", "", bool, required=False, default=False)
    rounds = len(trees) // n_outputs
    return checked_ensemble(
        trees,
        {"n_features": "/max_feature_idx", "feature_names": "/feature_names", "n_outputs": "/num_tree_per_iteration"},
        tree_field,
        limits,
        n_features=integer(get(document, "max_feature_idx", ""), "/max_feature_idx") + 1,
        feature_names=given_names(document.get("feature_names")),
        base_score=0.0 if n_outputs == 1 else [0.0] * n_outputs,
        kind="lightgbm",
        tree_weight=log_odds_per_raw_score * (1.0 / rounds if average and rounds else 1.0),
        n_outputs=n_outputs,
    )


def _output_count(document: dict, objective: str) -> int:
    """K, the model's outputs: ``num_tree_per_iteration`` (= ``num_class``) for a multiclass objective, else 1."""
    num_class = integer(document.get("num_class", 1), "/num_class")
    per_iteration = integer(document.get("num_tree_per_iteration", 1), "/num_tree_per_iteration")
    if objective not in MULTICLASS_OBJECTIVES:
        for key, count, what in (
            ("num_class", num_class, "classes"),
            ("num_tree_per_iteration", per_iteration, "trees per iteration"),
        ):
            if count != 1:
                raise ForestFormatError(
                    f"/{key}", f"the model has {count} {what} but its objective '{objective}' is not multiclass."
                )
        return 1
    if per_iteration < 1 or per_iteration != num_class:
        raise ForestFormatError(
            "/num_tree_per_iteration",
            f"is {per_iteration} but a {objective} model has one tree per class and round (num_class {num_class}).",
        )
    return per_iteration


def _objective(objective: Any) -> tuple[str, float]:
    """(the objective's name, what the ensemble predicts per unit of LightGBM's raw score: 1, or ``sigmoid``
    for ``binary`` and ``multiclassova``, whose probabilities are ``1 / (1 + exp(-sigmoid * raw score))``)."""
    if not isinstance(objective, str) or not objective.strip():
        raise ForestFormatError(
            "/objective",
            "the dump has no objective (custom objective?): only the "
            f"regression objectives {sorted(IDENTITY_OBJECTIVES)[:6]}..., poisson, gamma, tweedie, binary, "
            "multiclass and multiclassova are supported.",
        )
    name, *options = objective.split()
    if name in _SIGMOID_OBJECTIVES:
        sigmoids = [option.partition(":")[2] for option in options if option.startswith("sigmoid:")]
        try:
            sigmoid = float(sigmoids[0]) if sigmoids else 1.0
        except ValueError:
            sigmoid = float("nan")
        if not 0.0 < sigmoid < float("inf"):
            raise ForestFormatError("/objective", f"objective '{objective:.60}': sigmoid must be a positive number.")
        return name, sigmoid
    if name in MULTICLASS_OBJECTIVES | LOG_LINK_OBJECTIVES:
        return name, 1.0
    if name not in IDENTITY_OBJECTIVES:
        kind = (
            "classification"
            if name in ("cross_entropy", "xentropy", "cross_entropy_lambda", "xentlambda")
            else "ranking"
            if name in ("lambdarank", "rank_xendcg", "xendcg")
            else "unsupported"
        )
        raise ForestFormatError(
            "/objective",
            f"objective '{objective:.60}' is {kind}: only regression objectives whose "
            "prediction is the raw score (regression, regression_l1, huber, fair, quantile, mape), the "
            "log-link regressions (poisson, gamma, tweedie), binary, multiclass and multiclassova are supported.",
        )
    if "sqrt" in options:
        raise ForestFormatError(
            "/objective",
            "objective with reg_sqrt=True: predictions are squared raw "
            "scores, which is not a sum of trees. Retrain with reg_sqrt=False.",
        )
    return name, 1.0


def _tree(root: Any, path: str) -> tuple[Tree, list[str]]:
    """One dumped tree (nested node objects) as our Tree in depth-first order, and the JSON pointer
    of each node. Parsing only: TreeEnsemble checks depth and feature range."""
    left: list[int] = []
    right: list[int] = []
    feature: list[int] = []
    threshold: list[float] = []
    value: list[float] = []
    missing_go_left: list[bool] = []
    counts: list[Any] = []
    paths: list[str] = []
    stack = [(root, path, -1, False)]  # (node, its pointer, parent id, is the parent's left child)
    while stack:
        node, node_path, parent, is_left = stack.pop()
        if not isinstance(node, dict):
            raise ForestFormatError(node_path, f"expected a tree node object, got {type_name(node)}.")
        node_id = len(left)
        if parent >= 0:
            (left if is_left else right)[parent] = node_id
        paths.append(node_path)
        left.append(LEAF)
        right.append(LEAF)
        if "leaf_value" in node and "split_feature" not in node:
            for key in ("leaf_coeff", "leaf_const", "leaf_features"):
                if key in node:
                    raise ForestFormatError(
                        pointer(node_path, key), "linear trees (linear_tree=True) are not supported."
                    )
            feature.append(LEAF_FEATURE)
            threshold.append(0.0)
            value.append(
                require_finite(get(node, "leaf_value", node_path), pointer(node_path, "leaf_value"), entry_error)
            )
            missing_go_left.append(False)
            counts.append(node.get("leaf_count"))
            continue
        decision_type = get(node, "decision_type", node_path, str)
        if decision_type != "<=":
            raise ForestFormatError(
                pointer(node_path, "decision_type"),
                "categorical split: only numerical splits are supported. Retrain with the categorical "
                "features encoded as numbers (categorical_feature=[])."
                if decision_type == "=="
                else f"unsupported decision_type '{decision_type:.20}'.",
            )
        feature.append(integer(get(node, "split_feature", node_path), pointer(node_path, "split_feature")))
        threshold.append(
            require_finite(get(node, "threshold", node_path), pointer(node_path, "threshold"), entry_error)
        )
        value.append(0.0)
        missing_go_left.append(_nan_goes_left(node, node_path, threshold[-1]))
        counts.append(node.get("internal_count"))
        stack.append((get(node, "right_child", node_path), f"{node_path}/right_child", node_id, False))
        stack.append((get(node, "left_child", node_path), f"{node_path}/left_child", node_id, True))
    known_counts = all(is_integer(c) and 0 <= c < 2**62 for c in counts)  # optional in the dump
    return Tree(
        children_left=left,
        children_right=right,
        feature=feature,
        threshold=threshold,
        value=value,
        missing_go_left=missing_go_left,
        n_samples=counts if known_counts else None,
    ), paths


def _nan_goes_left(node: dict, path: str, threshold: float) -> bool:
    default_left = get(node, "default_left", path, bool)
    missing_type = get(node, "missing_type", path, str)
    if missing_type == "None":  # NaN is read as 0.0
        return threshold >= 0.0
    if missing_type == "NaN":
        return default_left
    if missing_type == "Zero":
        if default_left and threshold >= _ZERO_THRESHOLD:
            return True
        if not default_left and threshold < -_ZERO_THRESHOLD:
            return False
        raise ForestFormatError(
            pointer(path, "missing_type"),
            "missing_type 'Zero' (zero_as_missing=True) "
            "with a split whose threshold separates zero from its default direction "
            "cannot be expressed as one threshold. Retrain with zero_as_missing=False.",
        )
    raise ForestFormatError(
        pointer(path, "missing_type"), f"unknown missing_type '{missing_type:.20}' (expected None, NaN or Zero)."
    )
