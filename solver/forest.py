"""Tree ensembles as validated flat node arrays, their leaves (rules) in a fixed order.

A :class:`TreeEnsemble` is a list of binary regression trees plus two scalars::

    prediction(x) = base_score + tree_weight * sum_t value_t[leaf_t(x)]

An ensemble may have ``K = n_outputs > 1`` outputs (a K-class classifier's class probabilities or raw
scores, one per class; multi-target regression); then ``base_score`` is a K-vector, the prediction is a
K-vector, and each tree is one of two kinds:

* a *vector tree* (random forest / extra trees / decision tree classifiers): every node value is a
  K-vector, added to all outputs;
* a *per-output tree* (gradient boosting, XGBoost and LightGBM multiclass: K trees per round): a
  scalar-valued tree whose value is added to output ``output`` only.

For ``K = 1`` every tree is scalar-valued and adds to the one output (no ``output`` needed).

Every leaf is a decision rule (the conjunction of the splits on its path). Leaves are numbered
per tree in explicit left-to-right depth-first order (never node-id order, which differs for trees
grown best-first), and globally by concatenating the trees: the leaves of tree ``t`` are the
columns ``leaf_offsets[t]:leaf_offsets[t + 1]`` of the mapping matrix ``M`` (``solver.leaf_matrix``).

Splits follow scikit-learn exactly: ``x`` goes left iff ``float32(x[feature]) <= threshold``
(threshold compared in float64), and a NaN goes left iff the split's ``missing_go_left`` is true.

JSON schema ``fire-forest`` version 1 (what :meth:`TreeEnsemble.to_dict` writes and
:meth:`TreeEnsemble.from_dict` validates; also documented in ``docs/forest-schema.md``)::

    {
      "format": "fire-forest",            required, exactly this string
      "version": 1,                       required, exactly 1
      "kind": "random_forest",            optional string (default "custom"): random_forest,
                                          extra_trees, gradient_boosting, decision_tree or custom;
                                          only used by to_sklearn() to pick the estimator class
      "n_outputs": 1,                     optional integer >= 1 (default 1): K, the outputs of
                                          the prediction (e.g. classes), at most max_outputs
      "n_features": 8,                    required integer >= 1: columns of X
      "feature_names": ["MedInc", ...],   optional: n_features unique non-empty strings
                                          (default "x0", "x1", ...)
      "base_score": 0.0,                  required finite number added to every prediction;
                                          for n_outputs K > 1 a list of K finite numbers
      "tree_weight": 0.01,                required finite number multiplying every leaf value
                                          (random forest: 1/T; boosting: 1, learning rate is
                                          already folded into the values)
      "trees": [                          required non-empty list, one object per tree
        {
          "output": 2,                    optional integer in [0, n_outputs): the output a
                                          scalar-valued (per-output) tree adds to; required for
                                          such a tree when n_outputs > 1, and only 0 allowed
                                          when n_outputs is 1; absent for a vector tree
          "children_left":  [1, -1, -1],  required, one entry per node; node 0 is the root;
          "children_right": [2, -1, -1],  a leaf has both children -1, a split node has two
                                          valid child ids; every node but the root has exactly
                                          one parent and is reachable from the root
          "feature":   [0, -2, -2],       required integers; at split nodes in [0, n_features),
                                          ignored at leaves (write -2)
          "threshold": [2.5, -2.0, -2.0], required finite numbers; x goes left iff
                                          float32(x[feature]) <= threshold
          "value":     [0.0, 1.5, 3.0],   required finite numbers: node outputs (leaves matter);
                                          a vector tree (n_outputs K > 1, no "output") has a
                                          list of K finite numbers per node instead
          "missing_go_left": [true, false, false],
                                          optional booleans (default all false): where NaN goes
          "n_samples": [100, 60, 40]      optional integers >= 0: training samples per node
        }
      ]
    }

Limits on untrusted input (keyword arguments of ``from_dict``/``TreeEnsemble``): at most
``max_nodes`` nodes in total (default 5,000,000), tree depth at most ``max_depth`` (default 64),
``n_features`` at most ``max_features`` (default 1,000,000), ``n_outputs`` at most ``max_outputs``
(default 10,000). Violations raise
:class:`ForestSchemaError` whose ``field`` is a path such as ``trees/3/children_left/17``.
Python's ``json`` writes floats with ``repr``, so float64 thresholds and values round-trip
exactly through ``json.dumps``/``json.loads``. A one-output ensemble's document has neither
``n_outputs`` nor ``output`` keys: it is exactly what earlier versions wrote.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from numbers import Real
from typing import Any

import numpy as np

from ._tree_kernels import (
    apply_trees,
    depth_first_leaves,
    fill_leaf_ancestors,
    leaf_index_dtype,
    leaf_matvec,
    leaf_output_sums,
)
from ._validation import SchemaError, check_feature_names, check_keys, is_integer, node_array, require_finite
from .rule_types import Condition

FOREST_FORMAT = "fire-forest"
FOREST_FORMAT_VERSION = 1
DEFAULT_MAX_NODES = 5_000_000
DEFAULT_MAX_DEPTH = 64
DEFAULT_MAX_FEATURES = 1_000_000
DEFAULT_MAX_OUTPUTS = 10_000
KINDS = ("random_forest", "extra_trees", "gradient_boosting", "decision_tree", "custom")

LEAF = -1
LEAF_FEATURE = -2
_INT32_MAX = int(np.iinfo(np.int32).max)

_TOP_LEVEL_KEYS = {
    "format",
    "version",
    "kind",
    "n_outputs",
    "n_features",
    "feature_names",
    "base_score",
    "tree_weight",
    "trees",
}
_REQUIRED_TOP_LEVEL_KEYS = ("format", "version", "n_features", "base_score", "tree_weight", "trees")
_REQUIRED_TREE_KEYS = ("children_left", "children_right", "feature", "threshold", "value")
_OPTIONAL_TREE_KEYS = ("missing_go_left", "n_samples", "output")


class ForestSchemaError(SchemaError):
    """An invalid tree ensemble; ``field`` is the JSON path of the offending entry."""


@dataclass(frozen=True, eq=False)
class Tree:
    """One binary regression tree as parallel per-node arrays (scikit-learn's layout).

    ``TreeEnsemble`` validates the arrays and stores canonical copies (int32, float64, bool).
    In an ensemble with ``n_outputs`` K > 1 a tree is either a *vector tree* (``value`` of shape
    (n_nodes, K), ``output`` None: it adds to every output) or a *per-output tree* (``value`` of
    shape (n_nodes,), ``output`` = k: it adds to output k only). In a one-output ensemble ``value``
    is (n_nodes,) and ``output`` is None (0 is accepted and stored as None).
    """

    children_left: np.ndarray  # int32 (n_nodes,), -1 at leaves
    children_right: np.ndarray  # int32 (n_nodes,), -1 at leaves
    feature: np.ndarray  # int32 (n_nodes,), -2 at leaves
    threshold: np.ndarray  # float64 (n_nodes,): go left iff float32(x[feature]) <= threshold
    value: np.ndarray  # float64 (n_nodes,) or, for a vector tree, (n_nodes, K): node output before tree_weight
    missing_go_left: np.ndarray | None = None  # bool (n_nodes,): where NaN goes (None: right)
    n_samples: np.ndarray | None = None  # int64 (n_nodes,): training samples per node
    output: int | None = None  # per-output tree of a K > 1 ensemble: the output it adds to

    @property
    def is_vector(self) -> bool:
        """Whether every node holds a vector of values (one per output), not one number."""
        return np.ndim(self.value) == 2

    @property
    def n_nodes(self) -> int:
        return len(self.children_left)


# ----------------------------------------------------------------------------------------------
# input checks
# ----------------------------------------------------------------------------------------------


def as_float32_rows(X, n_features: int) -> np.ndarray:
    """X as a C-contiguous float32 (n, n_features) array, cast exactly like scikit-learn.

    NaN is allowed (it follows each split's missing-value direction); infinity and finite values
    too large for float32 are rejected, as scikit-learn does.
    """
    array = np.asarray(X)
    if array.dtype.kind not in "biuf":
        raise ValueError(
            f"X must be numeric, got dtype {array.dtype}; encode categorical and text columns as numbers first"
        )
    if array.ndim != 2:
        raise ValueError(
            f"X must be a 2-D array (n_samples, n_features), got {array.ndim}-D; "
            "use X.reshape(1, -1) for a single sample"
        )
    if array.shape[1] != n_features:
        raise ValueError(f"X has {array.shape[1]} columns but the forest expects {n_features}")
    with np.errstate(over="ignore"):
        X32 = np.ascontiguousarray(array, dtype=np.float32)
    if np.isinf(X32).any():
        raise ValueError(
            "X contains infinity or a value too large for float32 (|x| > 3.4e38); "
            "replace it by a finite value, or by NaN to treat it as missing"
        )
    return X32


def _require_integer(value, field: str, minimum: int, maximum: int | None = None) -> int:
    if not is_integer(value):
        raise ForestSchemaError(field, f"must be an integer, got {type(value).__name__}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ForestSchemaError(field, f"is {value} but must be {bound}")
    return int(value)


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _check_children(prefix: str, left: np.ndarray, right: np.ndarray) -> None:
    """Leaves have both children -1, splits two in-range children, non-root nodes one parent."""
    n_nodes = left.shape[0]
    half_leaf = (left == LEAF) != (right == LEAF)
    if half_leaf.any():
        i = _first(half_leaf)
        raise ForestSchemaError(
            f"{prefix}/children_left/{i}",
            f"node {i} has children ({left[i]}, {right[i]}): a leaf has both children -1 and a "
            "split node has two valid child ids",
        )
    for name, children in (("children_left", left), ("children_right", right)):
        out_of_range = (children != LEAF) & ((children < 0) | (children >= n_nodes))
        if out_of_range.any():
            i = _first(out_of_range)
            raise ForestSchemaError(
                f"{prefix}/{name}/{i}", f"is {children[i]} but must be -1 (leaf) or a node id in [1, {n_nodes})"
            )
        points_to_root = children == 0
        if points_to_root.any():
            i = _first(points_to_root)
            raise ForestSchemaError(
                f"{prefix}/{name}/{i}",
                "is 0 but node 0 is the root and cannot be a child; renumber so the root is node 0",
            )
    split = left != LEAF
    parent_count = np.bincount(np.concatenate([left[split], right[split]]), minlength=n_nodes)
    if (parent_count > 1).any():
        node = _first(parent_count > 1)
        references = sorted(
            [(int(i), "children_left") for i in np.flatnonzero(left == node)]
            + [(int(i), "children_right") for i in np.flatnonzero(right == node)]
        )
        second, name = references[1]
        raise ForestSchemaError(
            f"{prefix}/{name}/{second}",
            f"node {node} is referenced {len(references)} times (as a child of nodes "
            f"{[i for i, _ in references]}): in a tree every node except the root has exactly "
            "one parent",
        )
    orphan = parent_count[1:] == 0
    if orphan.any():
        node = _first(orphan) + 1
        raise ForestSchemaError(
            f"{prefix}/children_left",
            f"node {node} is nobody's child, so it is unreachable from the root (node 0); remove it or link it",
        )


@dataclass(frozen=True)
class _TreeLayout:
    """Structure derived from a validated tree."""

    leaf_nodes: np.ndarray  # int32, leaves in left-to-right DFS order
    leaf_depth: np.ndarray  # int32, number of splits above each of those leaves
    parent: np.ndarray  # int32 (n_nodes,), -1 at the root


def _is_number(value) -> bool:
    """A JSON number (not a boolean) that numpy holds as float64 (integers of at most 64 bits)."""
    if is_integer(value):
        return -(2**63) <= value < 2**63
    return isinstance(value, Real) and not isinstance(value, bool)


def _vector_values(values, field: str, n_outputs: int) -> np.ndarray:
    """A vector tree's per-node values, one list of ``n_outputs`` finite numbers per node, as float64 (n_nodes, K)."""
    K = n_outputs
    shape_hint = (
        f"n_outputs is {K}: give each node a list of {K} numbers (a vector tree), or give the tree an "
        "'output' index and one number per node (a per-output tree)"
    )
    if not isinstance(values, (list, tuple, np.ndarray)):
        raise ForestSchemaError(field, f"must be a list of {K}-number lists, got {type(values).__name__}")
    try:
        array = np.asarray(values)
    except (ValueError, TypeError, OverflowError):
        array = np.asarray([], dtype=object)  # ragged: found below
    if not (array.ndim == 2 and array.shape[1] == K and (array.dtype.kind in "iuf" or array.size == 0)):
        if isinstance(values, np.ndarray):
            raise ForestSchemaError(
                field, f"has shape {values.shape} and dtype {values.dtype} but must be numbers of shape (n_nodes, {K})"
            )
        for i, row in enumerate(values):
            if not isinstance(row, (list, tuple, np.ndarray)):
                raise ForestSchemaError(f"{field}/{i}", f"is {row!r:.40} but {shape_hint}")
            if len(row) != K:
                raise ForestSchemaError(f"{field}/{i}", f"has {len(row)} numbers but {shape_hint}")
            for k, number in enumerate(row):
                if not _is_number(number):
                    raise ForestSchemaError(f"{field}/{i}/{k}", f"is {number!r:.40} but this list must hold numbers")
        raise ForestSchemaError(field, f"must be a non-empty list of {K}-number lists")
    array = np.ascontiguousarray(array, dtype=np.float64)
    nonfinite = np.argwhere(~np.isfinite(array))
    if nonfinite.size:
        i, k = (int(v) for v in nonfinite[0])
        raise ForestSchemaError(f"{field}/{i}/{k}", f"is {array[i, k]} but must be a finite number")
    return array


def _tree_output(tree: Tree, prefix: str, n_outputs: int) -> int | None:
    """The checked ``output`` of a tree (None for a vector tree and in a one-output ensemble)."""
    output = tree.output
    field = f"{prefix}/output"
    if n_outputs == 1:
        if output is not None:
            _require_integer(output, field, 0, 0)
        return None
    if output is None:
        return None  # a vector tree: its values are checked as K-vectors
    return _require_integer(output, field, 0, n_outputs - 1)


def _canonical_tree(
    index: int, tree: Tree, n_features: int, max_depth: int | None, n_outputs: int = 1
) -> tuple[Tree, _TreeLayout]:
    """Validate one tree; return a canonical copy (int32/float64/bool arrays) and its layout."""
    prefix = f"trees/{index}"
    output = _tree_output(tree, prefix, n_outputs)
    vector = n_outputs > 1 and output is None

    def checked_array(name: str, kind: str) -> np.ndarray:
        if name == "value" and vector:
            return _vector_values(tree.value, f"{prefix}/value", n_outputs)
        return node_array(getattr(tree, name), f"{prefix}/{name}", kind, ForestSchemaError)

    left = checked_array("children_left", "int")
    n_nodes = left.shape[0]
    if n_nodes == 0:
        raise ForestSchemaError(
            f"{prefix}/children_left",
            "is empty: a tree needs at least one node (a single leaf is children_left = children_right = [-1])",
        )
    if n_nodes > _INT32_MAX:
        raise ForestSchemaError(prefix, f"has {n_nodes} nodes; at most {_INT32_MAX} are supported")
    arrays = {
        "children_right": checked_array("children_right", "int"),
        "feature": checked_array("feature", "int"),
        "threshold": checked_array("threshold", "float"),
        "value": checked_array("value", "float"),
        "missing_go_left": (
            np.zeros(n_nodes, np.bool_) if tree.missing_go_left is None else checked_array("missing_go_left", "bool")
        ),
    }
    if tree.n_samples is not None:
        arrays["n_samples"] = checked_array("n_samples", "int")
    for name, array in arrays.items():
        if array.shape[0] != n_nodes:
            raise ForestSchemaError(
                f"{prefix}/{name}",
                f"has {array.shape[0]} entries but children_left has {n_nodes}: give exactly one per node",
            )
    right = arrays["children_right"]
    _check_children(prefix, left, right)
    is_split = left != LEAF
    feature = arrays["feature"]
    bad_feature = is_split & ((feature < 0) | (feature >= n_features))
    if bad_feature.any():
        i = _first(bad_feature)
        raise ForestSchemaError(
            f"{prefix}/feature/{i}",
            f"is {feature[i]} at split node {i} but must be a column index in [0, {n_features})",
        )
    if "n_samples" in arrays and (arrays["n_samples"] < 0).any():
        i = _first(arrays["n_samples"] < 0)
        raise ForestSchemaError(f"{prefix}/n_samples/{i}", "must be a sample count >= 0")

    left = left.astype(np.int32)
    right = right.astype(np.int32)
    leaf_nodes, parent, depth = depth_first_leaves(left, right)
    if (depth < 0).any():
        node = _first(depth < 0)
        raise ForestSchemaError(
            f"{prefix}/children_left",
            f"node {node} is unreachable from the root (node 0): its parent links form a cycle",
        )
    tree_depth = int(depth.max())
    if max_depth is not None and tree_depth > max_depth:
        raise ForestSchemaError(
            prefix,
            f"has depth {tree_depth}, above the limit of {max_depth}; "
            "grow shallower trees (max_depth) or raise the limit",
        )
    canonical = Tree(
        children_left=left,
        children_right=right,
        feature=np.where(is_split, feature, LEAF_FEATURE).astype(np.int32),
        threshold=arrays["threshold"],
        value=arrays["value"],
        missing_go_left=arrays["missing_go_left"],
        n_samples=arrays.get("n_samples"),
        output=output,
    )
    return canonical, _TreeLayout(leaf_nodes, depth[leaf_nodes], parent)


def _check_base_score(base_score, n_outputs: int) -> float | np.ndarray:
    """A finite number for one output; a float64 (K,) array of K finite numbers for K > 1 outputs."""
    if n_outputs == 1:
        return require_finite(base_score, "base_score", ForestSchemaError)
    if not isinstance(base_score, (list, tuple, np.ndarray)) or getattr(base_score, "ndim", 1) != 1:
        raise ForestSchemaError(
            "base_score", f"must be a list of {n_outputs} numbers (one per output) since n_outputs is {n_outputs}"
        )
    if len(base_score) != n_outputs:
        raise ForestSchemaError(
            "base_score", f"has {len(base_score)} numbers but n_outputs is {n_outputs}: give one per output"
        )
    scores = np.array(
        [require_finite(score, f"base_score/{k}", ForestSchemaError) for k, score in enumerate(base_score)],
        dtype=np.float64,
    )
    scores.flags.writeable = False
    return scores


def _check_feature_names(feature_names, n_features: int) -> list[str]:
    if feature_names is None:
        return [f"x{j}" for j in range(n_features)]
    if not isinstance(feature_names, (list, tuple, np.ndarray)):
        raise ForestSchemaError("feature_names", "must be a list of strings")
    names = list(feature_names)
    if len(names) != n_features:
        raise ForestSchemaError(
            "feature_names", f"has {len(names)} names but n_features is {n_features}; give one name per column"
        )
    check_feature_names(names, "feature_names", ForestSchemaError)
    return [str(name) for name in names]


# ----------------------------------------------------------------------------------------------
# tree ensemble
# ----------------------------------------------------------------------------------------------


class TreeEnsemble:
    """A validated regression tree ensemble with its leaves (rules) in a fixed global order.

    ``prediction = base_score + tree_weight * sum_t value_t[leaf_t(x)]``; with ``n_outputs`` K > 1
    outputs a K-vector: ``base_score + tree_weight * sum_t leaf_outputs[leaf_t(x)]`` (see the module
    docstring for vector and per-output trees).

    ``n_outputs`` (K, default 1); ``base_score`` (a float for K = 1, float64 (K,) for K > 1).
    Derived attributes (computed once): ``leaf_offsets`` (int64 (T+1,)), ``leaf_values``
    (float64 (R,): the scalar that scales column j of the mapping matrix M, the leaf's value, 1.0 for
    a vector tree's leaf, whose column is the leaf's indicator), ``leaf_outputs`` (float64 (R, K),
    computed on first use: what leaf j adds to each output before ``tree_weight``; for a per-output
    tree its value in the tree's output column and 0 elsewhere; for K = 1 ``leaf_values[:, None]``),
    ``tree_outputs`` (int64 (T,): the output each per-output tree adds to, -1 for a vector tree, 0
    for every tree when K = 1), ``leaf_nodes`` (per tree, node ids of its leaves in left-to-right DFS order),
    ``leaf_support`` (int64 (R,), training samples per leaf, -1 where unknown),
    ``leaf_ancestors`` (``(ptr, ids)``: ``ids[ptr[j]:ptr[j+1]]`` are the global ids, root first,
    of the internal nodes on leaf ``j``'s path; the global id of node ``k`` of tree ``t`` is
    ``k`` plus the node counts of trees ``0..t-1``), ``n_trees``, ``n_leaves``, ``n_nodes``,
    ``n_internal_nodes``, ``max_depth``.

    The arrays are validated (see the module docstring); errors raise ``ForestSchemaError``.
    """

    def __init__(
        self,
        trees: Sequence[Tree],
        n_features: int,
        feature_names=None,
        base_score: float = 0.0,
        tree_weight: float = 1.0,
        kind: str = "custom",
        *,
        n_outputs: int = 1,
        max_nodes: int | None = DEFAULT_MAX_NODES,
        max_depth: int | None = DEFAULT_MAX_DEPTH,
        max_features: int | None = DEFAULT_MAX_FEATURES,
        max_outputs: int | None = DEFAULT_MAX_OUTPUTS,
    ):
        self.n_outputs = _require_integer(n_outputs, "n_outputs", 1, max_outputs)
        self.n_features = _require_integer(n_features, "n_features", 1, max_features)
        self.feature_names = _check_feature_names(feature_names, self.n_features)
        self.base_score = _check_base_score(base_score, self.n_outputs)
        self.tree_weight = require_finite(tree_weight, "tree_weight", ForestSchemaError)
        if not isinstance(kind, str) or not kind or len(kind) > 64:
            raise ForestSchemaError("kind", f"must be a short string such as {', '.join(KINDS)}")
        self.kind = kind
        if len(trees) == 0:
            raise ForestSchemaError("trees", "is empty: an ensemble needs at least one tree")
        # counted before any array is converted
        total_nodes = sum(
            len(tree.children_left) for tree in trees if isinstance(tree.children_left, (list, tuple, np.ndarray))
        )
        if max_nodes is not None and total_nodes > max_nodes:
            raise ForestSchemaError(
                "trees",
                f"have {total_nodes} nodes in total, more than the limit of {max_nodes}; use fewer or smaller trees",
            )
        checked = [_canonical_tree(t, tree, self.n_features, max_depth, self.n_outputs) for t, tree in enumerate(trees)]
        self.trees: tuple[Tree, ...] = tuple(tree for tree, _ in checked)
        self._parents = [layout.parent for _, layout in checked]
        self.leaf_nodes: list[np.ndarray] = [layout.leaf_nodes for _, layout in checked]
        self._leaf_depths = [layout.leaf_depth for _, layout in checked]
        self.max_depth = int(max(depths.max() for depths in self._leaf_depths))
        self._build_flat_arrays()

    def _build_flat_arrays(self) -> None:
        """Concatenate the trees for the kernels and number leaves and internal nodes globally."""
        trees = self.trees
        node_counts = np.array([tree.n_nodes for tree in trees], dtype=np.int64)
        leaf_counts = np.array([len(nodes) for nodes in self.leaf_nodes], dtype=np.int64)
        self._node_offsets = np.concatenate([[0], np.cumsum(node_counts)])
        self.leaf_offsets = np.concatenate([[0], np.cumsum(leaf_counts)])
        self.n_trees = len(trees)
        self.n_nodes = int(self._node_offsets[-1])
        self.n_leaves = int(self.leaf_offsets[-1])
        self.n_internal_nodes = self.n_nodes - self.n_leaves
        self._children_left = np.concatenate([tree.children_left for tree in trees])
        self._children_right = np.concatenate([tree.children_right for tree in trees])
        self._feature = np.concatenate([tree.feature for tree in trees])
        self._threshold = np.concatenate([tree.threshold for tree in trees])
        self._missing_go_left = np.concatenate([tree.missing_go_left for tree in trees])
        self._leaf_index = np.full(self.n_nodes, -1, dtype=np.int32)
        for t, nodes in enumerate(self.leaf_nodes):
            self._leaf_index[self._node_offsets[t] + nodes] = np.arange(len(nodes), dtype=np.int32)
        self.leaf_values = np.concatenate(
            [
                np.ones(len(nodes)) if tree.is_vector else tree.value[nodes]
                for tree, nodes in zip(trees, self.leaf_nodes)
            ]
        )
        self.tree_outputs = np.array([-1 if tree.is_vector else (tree.output or 0) for tree in trees], dtype=np.int64)
        # vector leaves' values, (R_vector, K), and each leaf's row there (-1: a per-output tree's leaf)
        vector_counts = np.where(self.tree_outputs < 0, leaf_counts, 0)
        self._vector_rows = np.full(self.n_leaves, -1, dtype=np.int64)
        self._vector_rows[np.repeat(self.tree_outputs < 0, leaf_counts)] = np.arange(int(vector_counts.sum()))
        self._leaf_vectors = np.concatenate(
            [tree.value[nodes] for tree, nodes in zip(trees, self.leaf_nodes) if tree.is_vector]
            or [np.empty((0, self.n_outputs))]
        )
        self.leaf_support = np.concatenate(
            [
                np.full(len(nodes), -1, np.int64) if tree.n_samples is None else tree.n_samples[nodes]
                for tree, nodes in zip(trees, self.leaf_nodes)
            ]
        )
        self.leaf_ancestors = self._compute_leaf_ancestors()
        max_leaves = int(leaf_counts.max())
        self._leaf_dtype = leaf_index_dtype(max_leaves)

    def _compute_leaf_ancestors(self) -> tuple[np.ndarray, np.ndarray]:
        ptr = np.concatenate([[0], np.cumsum(np.concatenate(self._leaf_depths))]).astype(np.int64)
        ids = np.empty(ptr[-1], dtype=np.int64)
        for t in range(self.n_trees):
            start, stop = self.leaf_offsets[t], self.leaf_offsets[t + 1]
            fill_leaf_ancestors(self.leaf_nodes[t], self._parents[t], self._node_offsets[t], ptr[start : stop + 1], ids)
        return ptr, ids

    # -- prediction ------------------------------------------------------------------------

    def apply(self, X) -> np.ndarray:
        """(n, T) C-contiguous local leaf index reached in each tree (uint8/16/32, smallest fit)."""
        X32 = as_float32_rows(X, self.n_features)
        out = np.empty((X32.shape[0], self.n_trees), dtype=self._leaf_dtype)
        apply_trees(
            X32,
            self._node_offsets,
            self._children_left,
            self._children_right,
            self._feature,
            self._threshold,
            self._missing_go_left,
            self._leaf_index,
            out,
        )
        return out

    @cached_property
    def leaf_outputs(self) -> np.ndarray:
        """float64 (R, K): what each leaf adds to each output, before ``tree_weight`` (dense; built on first use)."""
        outputs = np.zeros((self.n_leaves, self.n_outputs))
        per_output = self._vector_rows < 0
        leaf_tree = np.repeat(np.arange(self.n_trees), np.diff(self.leaf_offsets))
        rows = np.flatnonzero(per_output)
        outputs[rows, self.tree_outputs[leaf_tree[rows]]] = self.leaf_values[rows]
        outputs[~per_output] = self._leaf_vectors[self._vector_rows[~per_output]]
        outputs.flags.writeable = False
        return outputs

    def predict(self, X) -> np.ndarray:
        """The ensemble's own prediction ``base_score + tree_weight * sum_t value_t[leaf_t]``: shape (n,),
        or (n, K) for ``n_outputs`` K > 1."""
        if self.n_outputs == 1:
            leaf_sums = leaf_matvec(self.apply(X), self.leaf_offsets, self.leaf_values, np.ones(self.n_leaves))
            return self.base_score + self.tree_weight * leaf_sums
        output_sums = leaf_output_sums(
            self.apply(X),
            self.leaf_offsets,
            self.tree_outputs,
            self.leaf_values,
            self._vector_rows,
            self._leaf_vectors,
            self.n_outputs,
        )
        return self.base_score + self.tree_weight * output_sums

    # -- rules -----------------------------------------------------------------------------

    def leaf_tree(self, leaves) -> np.ndarray:
        """Tree index of each global leaf index."""
        return np.searchsorted(self.leaf_offsets, leaves, side="right") - 1

    def leaf_conditions(self, leaves=None) -> list[tuple[Condition, ...]]:
        """Simplified conjunction (a tuple of :class:`solver.rule_types.Condition`) of each global leaf
        (default: all).

        Per feature at most one ``<=`` bound (the smallest threshold) and one ``>`` bound (the
        largest); a kept bound's ``missing`` flag is the AND of the flags it replaces (and both
        bounds of a feature share one flag), so the conjunction is exactly equivalent to the
        path, NaN routing included. Conditions are ordered by first use of their feature on the
        path, ``>`` before ``<=``.
        """
        if leaves is None:
            leaves = np.arange(self.n_leaves)
        leaves = np.asarray(leaves, dtype=np.int64).ravel()
        if leaves.size and (leaves.min() < 0 or leaves.max() >= self.n_leaves):
            raise ValueError(f"leaf indices must lie in [0, {self.n_leaves})")
        trees = self.leaf_tree(leaves)
        return [
            self._path_conditions(int(t), int(self.leaf_nodes[t][j - self.leaf_offsets[t]]))
            for j, t in zip(leaves, trees)
        ]

    def node_parents(self, t: int) -> np.ndarray:
        """int32 (n_nodes,) parent of each node of tree ``t``, -1 at the root."""
        return self._parents[t]

    def global_node_id(self, t: int, node: int) -> int:
        """The global id of node ``node`` of tree ``t`` (as in ``leaf_ancestors``)."""
        return int(self._node_offsets[t] + node)

    def node_conditions(self, t: int, node: int) -> tuple[Condition, ...]:
        """The simplified conjunction of the path to node ``node`` of tree ``t`` (as :meth:`leaf_conditions`)."""
        return self._path_conditions(t, node)

    def _path_conditions(self, t: int, node: int) -> tuple[Condition, ...]:
        tree, parent = self.trees[t], self._parents[t]
        path = []
        while parent[node] != -1:
            split = int(parent[node])
            path.append((split, bool(tree.children_left[split] == node)))
            node = split
        bounds: dict[tuple[int, str], tuple[float, bool]] = {}
        for split, went_left in reversed(path):
            feature = int(tree.feature[split])
            threshold = float(tree.threshold[split])
            nan_goes_left = bool(tree.missing_go_left[split])
            key = (feature, "<=" if went_left else ">")
            missing = nan_goes_left if went_left else not nan_goes_left
            if key in bounds:
                kept, kept_missing = bounds[key]
                tighter = min(kept, threshold) if went_left else max(kept, threshold)
                bounds[key] = (tighter, kept_missing and missing)
            else:
                bounds[key] = (threshold, missing)
        first_seen: dict[int, int] = {}
        for feature, _ in bounds:
            first_seen.setdefault(feature, len(first_seen))
        for feature in first_seen:
            if (feature, "<=") in bounds and (feature, ">") in bounds:
                # NaN satisfies the pair iff it satisfies both: give both the same flag
                both = bounds[feature, "<="][1] and bounds[feature, ">"][1]
                bounds[feature, "<="] = (bounds[feature, "<="][0], both)
                bounds[feature, ">"] = (bounds[feature, ">"][0], both)
        ordered = sorted(bounds.items(), key=lambda item: (first_seen[item[0][0]], item[0][1] != ">"))
        return tuple(
            Condition(self.feature_names[feature], feature, operator, threshold, missing)
            for (feature, operator), (threshold, missing) in ordered
        )

    def with_feature_names(self, feature_names: Sequence[str]) -> TreeEnsemble:
        """The same trees with other feature names (a shallow copy; checked as the constructor does)."""
        renamed = copy.copy(self)
        renamed.feature_names = _check_feature_names(list(feature_names), self.n_features)
        return renamed

    # -- scikit-learn (solver.sklearn_adapters) ----------------------------------------------

    @classmethod
    def from_sklearn(cls, estimator) -> TreeEnsemble:
        """Import a fitted scikit-learn tree regressor (single output) or tree classifier (two classes: one
        output; K >= 3 classes: K outputs); see ``sklearn_adapters``."""
        from .sklearn_adapters import from_sklearn  # it imports this module

        return from_sklearn(estimator)

    def to_sklearn(self):
        """A fitted scikit-learn estimator predicting like this ensemble; see
        ``sklearn_adapters.to_sklearn``."""
        from .sklearn_adapters import to_sklearn  # it imports this module

        return to_sklearn(self)

    # -- JSON --------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """The ``fire-forest`` JSON document (plain lists, ints, floats, bools)."""
        multi = self.n_outputs > 1
        trees = []
        for tree in self.trees:
            entry = {"output": tree.output} if multi and not tree.is_vector else {}
            entry |= {
                "children_left": tree.children_left.tolist(),
                "children_right": tree.children_right.tolist(),
                "feature": tree.feature.tolist(),
                "threshold": tree.threshold.tolist(),
                "value": tree.value.tolist(),
                "missing_go_left": tree.missing_go_left.tolist(),
            }
            if tree.n_samples is not None:
                entry["n_samples"] = tree.n_samples.tolist()
            trees.append(entry)
        document = {
            "format": FOREST_FORMAT,
            "version": FOREST_FORMAT_VERSION,
            "kind": self.kind,
            "n_outputs": self.n_outputs,
            "n_features": self.n_features,
            "feature_names": list(self.feature_names),
            "base_score": self.base_score.tolist() if multi else self.base_score,
            "tree_weight": self.tree_weight,
            "trees": trees,
        }
        if not multi:  # one output: the document earlier versions wrote
            del document["n_outputs"]
        return document

    @classmethod
    def from_dict(
        cls,
        document: Mapping[str, Any],
        *,
        max_nodes: int = DEFAULT_MAX_NODES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_features: int = DEFAULT_MAX_FEATURES,
        max_outputs: int = DEFAULT_MAX_OUTPUTS,
    ) -> TreeEnsemble:
        """Validate an untrusted ``fire-forest`` document and build the ensemble.

        Raises ``ForestSchemaError`` (a ValueError) naming the offending field.
        """
        if not isinstance(document, Mapping):
            raise ForestSchemaError("", "a fire-forest document must be a JSON object")
        check_keys("", document, _TOP_LEVEL_KEYS, _REQUIRED_TOP_LEVEL_KEYS, ForestSchemaError)
        if document["format"] != FOREST_FORMAT:
            raise ForestSchemaError("format", f"must be {FOREST_FORMAT!r}, got {document['format']!r}")
        version = document["version"]
        if not is_integer(version) or version != FOREST_FORMAT_VERSION:
            raise ForestSchemaError("version", f"is {version!r}; only version {FOREST_FORMAT_VERSION} is supported")
        trees = document["trees"]
        if not isinstance(trees, list):
            raise ForestSchemaError("trees", "must be a list of tree objects")
        for t, tree in enumerate(trees):
            if not isinstance(tree, Mapping):
                raise ForestSchemaError(f"trees/{t}", "must be an object with the node arrays")
            check_keys(
                f"trees/{t}",
                tree,
                set(_REQUIRED_TREE_KEYS + _OPTIONAL_TREE_KEYS),
                _REQUIRED_TREE_KEYS,
                ForestSchemaError,
            )
        return cls(
            [Tree(**{key: tree.get(key) for key in _REQUIRED_TREE_KEYS + _OPTIONAL_TREE_KEYS}) for tree in trees],
            n_features=document["n_features"],
            feature_names=document.get("feature_names"),
            base_score=document["base_score"],
            tree_weight=document["tree_weight"],
            kind=document.get("kind", "custom"),
            n_outputs=document.get("n_outputs", 1),
            max_nodes=max_nodes,
            max_depth=max_depth,
            max_features=max_features,
            max_outputs=max_outputs,
        )
