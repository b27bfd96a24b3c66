"""Candidate terms: which nodes of a forest FIRE may select as rules, and the linear terms beside them.

The paper's candidates are the leaves: a depth-5 forest gives rules of five antecedents. Two more kinds, as
RuleFit (Friedman & Popescu 2008), R ``pre`` and H2O's RuleFit offer them:

* **Rules from every node** (``kind="nodes"``). A node at depth d is the rule of the d conditions on its path
  (the root, depth 0, is the intercept and never a candidate). Each level of a tree partitions the rows that
  reach it as the leaves partition all rows, so each (tree, level) is a *block* whose Gram matrix is diagonal and
  GBCD (``solver.gbcd``) keeps its structure: a block's columns are its level's nodes in left-to-right order,
  fusion runs between neighbours along the level, and a row that ended in a shallower leaf is in no column of
  that level's block (its entry of ``LeafMatrix.leaves`` is the block's *no column* mark, see
  :data:`solver.leaf_matrix`). With ``kind="leaves"`` (the paper's) each tree is one block of its leaves.
* ``max_rule_length`` k keeps only candidates of depth <= k (at most k antecedents each): with ``"nodes"`` the
  levels 1..k, with ``"leaves"`` the leaves no deeper than k.
* **Linear terms** (:class:`LinearTerms`): numeric columns winsorized at the ``quantile`` and ``1 - quantile``
  quantiles of the training rows, then centred and scaled to standard deviation 0.4 (RuleFit's and ``pre``'s
  convention: the spread of a typical rule), a missing value at the centre (adding nothing). Each is its own block
  of one column, after the rules' columns; a linear term counts as a term in the rule budget and has no
  antecedent.

Columns of node candidates are indicators (value 1: internal nodes of imported forests need not carry a value);
leaf candidates keep the leaf values of the paper's M (``TreeEnsemble.leaf_values``), so ``kind="leaves"``
without a cap is the mapping matrix of earlier releases, but for rules said twice:

* **A rule said twice is one rule.** Trees that split alike give the same rule more than once: the same cut of a
  one-hot or integer column, and far more often forests split only at quantile bins (``ForestSpec.threshold_bins``),
  where 54-80% of the rules of at most two conditions repeat another (five shared tables, 500 trees of depth 3).
  ``rule_ids`` names each column's rule by the first column with its conditions
  (``TreeEnsemble.node_condition_keys``), so that a step counts it once however many of its columns it selects, as
  its RuleEnsemble shows it once (``RuleEnsemble.from_weights`` merges them), and ``multiplicity`` keeps how many
  columns say each rule (how many of the forest's trees or tree levels hold it). The columns themselves stay as the
  forest gives them: zeroing the repeats would change each tree's fused block (its neighbours then fuse to a zero),
  which moved one table's test log loss 3.9% on bench/ebm.py's protocol while no default step counted a rule twice.

Antecedents are counted as before: distinct internal nodes over the selected rules (``ancestors``), so nodes of one
path share theirs.
"""

import itertools
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ._tree_kernels import candidate_columns, leaf_index_dtype
from .forest import TreeEnsemble
from .leaf_matrix import LeafMatrix
from .spec import CANDIDATE_KINDS, DEFAULT_LINEAR_QUANTILE, CandidateKind

LINEAR_SPREAD = 0.4  # the standard deviation linear terms are scaled to: a typical rule's (RuleFit, pre)


@dataclass(frozen=True)
class LinearTerms:
    """Linear terms of encoded features: term k is ``(clip(x[:, features[k]], lower[k], upper[k]) - center[k]) *
    scale[k]`` (0 where the value is missing). ``fit`` finds the bounds on training rows."""

    features: np.ndarray  # (p,) int64 encoded feature indices
    lower: np.ndarray  # (p,) winsorization bounds
    upper: np.ndarray
    center: np.ndarray  # (p,) weighted mean of the clipped column on the training rows
    scale: np.ndarray  # (p,) LINEAR_SPREAD / its weighted standard deviation
    quantile: float = DEFAULT_LINEAR_QUANTILE

    @property
    def n_terms(self) -> int:
        return len(self.features)

    @classmethod
    def fit(cls, X, features, quantile=DEFAULT_LINEAR_QUANTILE, sample_weight=None) -> "LinearTerms":
        """The terms of ``features`` (indices into ``X``'s columns) on training rows ``X``; a column constant
        after winsorizing (or all missing) is left out."""
        X = np.asarray(X, dtype=np.float64)
        weight = np.ones(len(X)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        kept, lower, upper, center, scale = [], [], [], [], []
        for feature in np.asarray(features, dtype=np.int64):
            column = X[:, feature]
            present = ~np.isnan(column)
            if not present.any() or weight[present].sum() <= 0:
                continue
            lo, hi = np.quantile(column[present], [quantile, 1.0 - quantile])
            clipped = np.clip(column[present], lo, hi)
            mean = np.average(clipped, weights=weight[present])
            spread = np.sqrt(np.average((clipped - mean) ** 2, weights=weight[present]))
            if not spread > 1e-12 * max(abs(mean), 1.0):
                continue
            kept.append(feature)
            lower.append(lo)
            upper.append(hi)
            center.append(mean)
            scale.append(LINEAR_SPREAD / spread)
        return cls(
            *(np.array(a, dtype=dtype) for a, dtype in zip((kept, lower, upper, center, scale), _DTYPES)),
            quantile=float(quantile),
        )

    def transform(self, X) -> np.ndarray:
        """(n, p) float64 terms of rows ``X`` (encoded, all features)."""
        X = np.asarray(X, dtype=np.float64)
        terms = (np.clip(X[:, self.features], self.lower, self.upper) - self.center) * self.scale
        return np.ascontiguousarray(np.where(np.isnan(terms), 0.0, terms))


_DTYPES = (np.int64, np.float64, np.float64, np.float64, np.float64)


def numeric_features(encoding, n_features: int) -> np.ndarray:
    """Indices of the encoded features that are numeric columns (not one-hot levels of a text column): the
    candidates for linear terms. Without an encoding every feature is numeric."""
    if encoding is None:
        return np.arange(n_features)
    return np.array([j for j in range(n_features) if encoding.feature_column(j)[1] is None], dtype=np.int64)


@dataclass(frozen=True)
class Candidates:
    """The candidate terms of a forest: rule columns (nodes, in blocks) then linear terms.

    Column ``c < n_rules`` is node ``nodes[c]`` of tree ``trees[c]`` (depth ``depths[c]``, its column scaled by
    ``values[c]``); block b owns the columns ``offsets[b]:offsets[b + 1]``. Columns ``n_rules + k`` are the linear
    terms ``linear`` (each its own block in the solver).
    """

    forest: TreeEnsemble
    kind: CandidateKind
    max_rule_length: int | None
    trees: np.ndarray  # (C,) int64
    nodes: np.ndarray  # (C,) int64 local node ids
    depths: np.ndarray  # (C,) int64
    values: np.ndarray  # (C,) float64
    offsets: np.ndarray  # (B+1,) int64
    block_trees: np.ndarray  # (B,) int64
    ancestors: tuple[np.ndarray, np.ndarray]  # (ptr, ids): global ids of the internal nodes above each candidate
    linear: LinearTerms | None = None
    # per block, each of its tree's leaves' column within the block (or the no-column mark): lookup[ptr[b]:ptr[b+1]]
    _lookup: np.ndarray | None = None
    _lookup_ptr: np.ndarray | None = None

    @property
    def n_rules(self) -> int:
        return len(self.nodes)

    @property
    def n_linear(self) -> int:
        return 0 if self.linear is None else self.linear.n_terms

    @property
    def n_terms(self) -> int:
        return self.n_rules + self.n_linear

    @property
    def is_forest_leaves(self) -> bool:
        """Whether the rule columns are exactly the forest's leaves, in order (the paper's M)."""
        return self._lookup is None

    @classmethod
    def of(
        cls,
        forest: TreeEnsemble,
        kind: CandidateKind = "leaves",
        max_rule_length: int | None = None,
        linear: LinearTerms | None = None,
    ) -> "Candidates":
        """The candidates of ``forest``: its leaves or every node (below the root), at most ``max_rule_length``
        deep, and the linear terms ``linear``."""
        if kind not in CANDIDATE_KINDS:
            raise ValueError(f"kind must be one of {list(CANDIDATE_KINDS)}, got {kind!r}")
        cap = forest.max_depth if max_rule_length is None else min(int(max_rule_length), forest.max_depth)
        if kind == "leaves" and cap >= forest.max_depth:
            leaf_trees = forest.leaf_tree(np.arange(forest.n_leaves))
            return cls(
                forest,
                kind,
                max_rule_length,
                leaf_trees.astype(np.int64),
                np.concatenate(forest.leaf_nodes).astype(np.int64),
                np.diff(forest.leaf_ancestors[0]),
                forest.leaf_values,
                forest.leaf_offsets,
                np.arange(forest.n_trees, dtype=np.int64),
                forest.leaf_ancestors,
                linear,
            )
        columns: dict[str, list] = {"trees": [], "nodes": [], "depths": [], "values": []}
        sizes, block_trees, lookups, ancestor_ids, ancestor_counts = [], [], [], [], []
        for t, tree in enumerate(forest.trees):
            parent = forest.node_parents(t)
            order, depth = _preorder(tree.children_left, tree.children_right)
            is_leaf = tree.children_left < 0
            leaf_nodes = forest.leaf_nodes[t]
            leaf_position = {int(node): k for k, node in enumerate(leaf_nodes)}
            levels = [[d] for d in range(1, cap + 1)] if kind == "nodes" else [list(range(1, cap + 1))]
            for level in levels:
                chosen = [node for node in order if depth[node] in level and (kind == "nodes" or is_leaf[node])]
                if not chosen:
                    continue
                position = {node: k for k, node in enumerate(chosen)}
                # each leaf's candidate in this block: itself (leaves) or its ancestor at this level (nodes)
                lookup = np.full(len(leaf_nodes), -1, dtype=np.int64)
                for k, leaf in enumerate(leaf_nodes):
                    node = leaf
                    if kind == "nodes":
                        while depth[node] > level[0]:
                            node = parent[node]
                    lookup[k] = position.get(int(node), -1)
                lookups.append(lookup)
                sizes.append(len(chosen))
                block_trees.append(t)
                for node in chosen:
                    columns["trees"].append(t)
                    columns["nodes"].append(node)
                    columns["depths"].append(depth[node])
                    if kind == "nodes":
                        columns["values"].append(1.0)
                    else:
                        columns["values"].append(
                            float(forest.leaf_values[forest.leaf_offsets[t] + leaf_position[node]])
                        )
                    path = []
                    above = parent[node]
                    while above != -1:
                        path.append(forest.global_node_id(t, int(above)))
                        above = parent[above]
                    ancestor_ids.extend(reversed(path))
                    ancestor_counts.append(len(path))
        if not sizes:
            raise ValueError(
                f"max_rule_length={max_rule_length} leaves no candidate rule in this forest: every {kind[:-1]} is "
                "deeper; rules from every node (candidates='nodes', or candidates left out) cut them to the cap"
            )
        dtype = leaf_index_dtype(max(sizes) + 1)
        no_column = np.iinfo(dtype).max
        lookup_ptr = np.concatenate([[0], np.cumsum([len(lookup) for lookup in lookups])]).astype(np.int64)
        lookup = np.concatenate([np.where(part < 0, no_column, part) for part in lookups]).astype(dtype)
        return cls(
            forest,
            kind,
            max_rule_length,
            np.array(columns["trees"], dtype=np.int64),
            np.array(columns["nodes"], dtype=np.int64),
            np.array(columns["depths"], dtype=np.int64),
            np.array(columns["values"], dtype=np.float64),
            np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
            np.array(block_trees, dtype=np.int64),
            (
                np.concatenate([[0], np.cumsum(ancestor_counts)]).astype(np.int64),
                np.array(ancestor_ids, dtype=np.int64),
            ),
            linear,
            lookup,
            lookup_ptr,
        )

    @cached_property
    def rule_ids(self) -> np.ndarray:
        """(C,) int64: each rule column's rule, the first column with its conditions (module docstring; computed on
        first use)."""
        # the columns of a tree are consecutive (its blocks')
        starts = [*np.flatnonzero(np.diff(self.trees, prepend=-1)).tolist(), self.n_rules]
        first: dict[tuple, int] = {}
        rule_ids = np.empty(self.n_rules, dtype=np.int64)
        for start, stop in itertools.pairwise(starts):
            keys = self.forest.node_condition_keys(int(self.trees[start]), self.nodes[start:stop].tolist())
            for column, key in enumerate(keys, start):
                rule_ids[column] = first.setdefault(key, column)
        return rule_ids

    @property
    def multiplicity(self) -> np.ndarray:
        """(C,) int64: how many rule columns say each column's rule, on its first column; 0 on the others."""
        return np.bincount(self.rule_ids, minlength=self.n_rules)

    def matrix(self, leaves, X=None) -> LeafMatrix:
        """The candidates' matrix on rows whose forest leaf indices are ``leaves`` ((n, T), ``TreeEnsemble.apply``);
        ``X`` (the encoded rows) gives the linear terms' columns and is needed where there are any."""
        leaves = np.ascontiguousarray(leaves)
        if self.is_forest_leaves:
            columns = leaves
        else:
            columns = np.empty((leaves.shape[0], len(self.block_trees)), dtype=self._lookup.dtype)
            candidate_columns(leaves, self.block_trees, self._lookup_ptr, self._lookup, columns)
        linear = None
        if self.n_linear:
            if X is None:
                raise ValueError("linear terms need the rows X")
            linear = self.linear.transform(X)
        return LeafMatrix(columns, self.values, self.offsets, linear)

    def conditions(self, columns):
        """The simplified conditions (``TreeEnsemble.node_conditions``) of rule columns ``columns``."""
        return [self.forest.node_conditions(int(self.trees[c]), int(self.nodes[c])) for c in columns]


def _preorder(children_left, children_right):
    """(nodes in depth-first, left-first order; depth of each node): each level's nodes appear left to right."""
    depth = np.zeros(len(children_left), dtype=np.int64)
    order = []
    stack = [0]
    while stack:
        node = stack.pop()
        order.append(node)
        for child in (children_right[node], children_left[node]):
            if child >= 0:
                depth[child] = depth[node] + 1
                stack.append(int(child))
    return order, depth
