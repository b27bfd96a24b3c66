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

The trees, their checks and the ``fire-forest`` JSON are :class:`solver.forest_schema.ForestDocument`'s; a
TreeEnsemble is one.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from ._tree_kernels import (
    apply_trees,
    fill_leaf_ancestors,
    leaf_index_dtype,
    leaf_matvec,
    leaf_output_sums,
)
from .forest_schema import ForestDocument
from .rule_types import Condition
from .sklearn_adapters import SKLEARN_FOREST_NAMES, require_sklearn_forest, sklearn_forest_arguments, to_sklearn

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


# ----------------------------------------------------------------------------------------------
# tree ensemble
# ----------------------------------------------------------------------------------------------


class TreeEnsemble(ForestDocument):
    """A validated regression tree ensemble with its leaves (rules) in a fixed global order.

    ``prediction = base_score + tree_weight * sum_t value_t[leaf_t(x)]``; with ``n_outputs`` K > 1
    outputs a K-vector: ``base_score + tree_weight * sum_t leaf_outputs[leaf_t(x)]`` (see the module
    docstring for vector and per-output trees).

    Beside ForestDocument's (the trees, their scalars, ``leaf_nodes``, ``max_depth``), derived attributes
    (computed once): ``leaf_offsets`` (int64 (T+1,)), ``leaf_values``
    (float64 (R,): the scalar that scales column j of the mapping matrix M, the leaf's value, 1.0 for
    a vector tree's leaf, whose column is the leaf's indicator), ``leaf_outputs`` (float64 (R, K),
    computed on first use: what leaf j adds to each output before ``tree_weight``; for a per-output
    tree its value in the tree's output column and 0 elsewhere; for K = 1 ``leaf_values[:, None]``),
    ``tree_outputs`` (int64 (T,): the output each per-output tree adds to, -1 for a vector tree, 0
    for every tree when K = 1), ``leaf_support`` (int64 (R,), training samples per leaf, -1 where unknown),
    ``leaf_ancestors`` (``(ptr, ids)``: ``ids[ptr[j]:ptr[j+1]]`` are the global ids, root first,
    of the internal nodes on leaf ``j``'s path; the global id of node ``k`` of tree ``t`` is
    ``k`` plus the node counts of trees ``0..t-1``), ``n_trees``, ``n_leaves``, ``n_nodes``,
    ``n_internal_nodes``.
    """

    def __init__(self, *args, **kwargs):
        """The checked trees (arguments and checks: ForestDocument's) and their flat arrays for the kernels."""
        super().__init__(*args, **kwargs)
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
        ptr = np.concatenate([[0], np.cumsum(np.concatenate(self.leaf_depths))]).astype(np.int64)
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
        bounds: _Bounds = {}
        for split, went_left in reversed(path):
            feature, threshold = int(tree.feature[split]), float(tree.threshold[split])
            _tighten(bounds, feature, threshold, went_left, bool(tree.missing_go_left[split]))
        return tuple(
            Condition(self.feature_names[feature], feature, operator, threshold, missing)
            for feature, operator, threshold, missing in _simplified(bounds)
        )

    def node_condition_keys(self, t: int, nodes) -> list[tuple]:
        """``rule_types.conditions_key`` of :meth:`node_conditions` of the nodes ``nodes`` of tree ``t``, from one
        walk down the tree (each node's bounds are its parent's tightened by its split): a fraction of the cost of
        asking node by node, for comparing many rules."""
        tree = self.trees[t]
        left, right = tree.children_left.tolist(), tree.children_right.tolist()
        feature, threshold = tree.feature.tolist(), tree.threshold.tolist()
        nan_goes_left = tree.missing_go_left.tolist()
        bounds: list[_Bounds] = [{} for _ in left]
        below = [0]  # nodes whose bounds are known and whose children's are not (ids need not follow the tree)
        while below:
            node = below.pop()
            for child, went_left in ((left[node], True), (right[node], False)):
                if child >= 0:
                    bounds[child] = dict(bounds[node])
                    _tighten(bounds[child], feature[node], threshold[node], went_left, nan_goes_left[node])
                    below.append(child)
        return [_key(bounds[node]) for node in nodes]

    # -- scikit-learn (solver.sklearn_adapters) ----------------------------------------------

    @classmethod
    def from_sklearn(
        cls, estimator, *, max_nodes: int | None = None, max_depth: int | None = None, max_features: int | None = None
    ) -> TreeEnsemble:
        """The TreeEnsemble of a fitted single-output scikit-learn tree regressor or tree classifier
        (``sklearn_adapters.SKLEARN_REGRESSORS``, ``SKLEARN_CLASSIFIERS``; classifiers in the units of that module's
        docstring: one output for two classes, K outputs for K >= 3 classes).

        No size limits unless given (the constructor's keyword limits): give them for an estimator
        unpacked from an untrusted file. Raises ValueError for anything else.
        """
        return cls(
            **sklearn_forest_arguments(estimator),
            max_nodes=max_nodes,
            max_depth=max_depth,
            max_features=max_features,
            max_outputs=None,
        )

    def to_sklearn(self):
        """A fitted scikit-learn estimator predicting like this ensemble; see
        ``sklearn_adapters.to_sklearn``."""
        return to_sklearn(self)


# a path's bounds: (feature, "<=" or ">") -> (the tightest threshold, whether a missing value satisfies it), in the
# order the path first uses them
_Bounds = dict[tuple[int, str], tuple[float, bool]]


def _tighten(bounds: _Bounds, feature: int, threshold: float, went_left: bool, nan_goes_left: bool) -> None:
    """Add a split the path takes to its bounds: per feature at most one ``<=`` bound (the smallest threshold) and
    one ``>`` bound (the largest), a kept bound's missing flag the AND of the flags it replaces."""
    key = (feature, "<=" if went_left else ">")
    missing = nan_goes_left if went_left else not nan_goes_left
    if key in bounds:
        kept, kept_missing = bounds[key]
        tighter = min(kept, threshold) if went_left else max(kept, threshold)
        bounds[key] = (tighter, kept_missing and missing)
    else:
        bounds[key] = (threshold, missing)


def _missing_flags(bounds: _Bounds) -> dict[tuple[int, str], bool]:
    """Each bound's missing flag, where both bounds of a feature share one (NaN satisfies the pair iff it satisfies
    both)."""
    flags = {key: missing for key, (_, missing) in bounds.items()}
    for feature, operator in bounds:
        if operator == ">" and (feature, "<=") in bounds:
            flags[feature, "<="] = flags[feature, ">"] = flags[feature, "<="] and flags[feature, ">"]
    return flags


def _simplified(bounds: _Bounds) -> list[tuple[int, str, float, bool]]:
    """The conditions (feature, operator, threshold, missing) of a path's bounds, ordered by first use of their
    feature, ``>`` before ``<=``."""
    first_seen: dict[int, int] = {}
    for feature, _ in bounds:
        first_seen.setdefault(feature, len(first_seen))
    flags = _missing_flags(bounds)
    ordered = sorted(bounds.items(), key=lambda item: (first_seen[item[0][0]], item[0][1] != ">"))
    return [(feature, operator, threshold, flags[feature, operator]) for (feature, operator), (threshold, _) in ordered]


def _key(bounds: _Bounds) -> tuple:
    """``rule_types.conditions_key`` of a path's conditions, from its bounds."""
    flags = _missing_flags(bounds)
    return tuple(sorted((key[0], key[1], threshold, flags[key]) for key, (threshold, _) in bounds.items()))


def as_tree_ensemble(forest) -> TreeEnsemble:
    """``forest`` itself if it is a TreeEnsemble, else the TreeEnsemble of a fitted scikit-learn
    tree regressor or tree classifier (``sklearn_adapters.SKLEARN_REGRESSORS``, ``SKLEARN_CLASSIFIERS``;
    converted on every call: convert once with ``TreeEnsemble.from_sklearn`` to reuse it).

    Raises TypeError for any other object and sklearn's NotFittedError for an unfitted estimator.
    """
    if isinstance(forest, TreeEnsemble):
        return forest
    require_sklearn_forest(forest, TypeError, f"a TreeEnsemble or a fitted {SKLEARN_FOREST_NAMES}")
    return TreeEnsemble.from_sklearn(forest)
