"""The mapping matrix M of a forest on rows X (paper, section 2), kept implicit.

Row ``i`` of M holds ``value`` at the one leaf per tree that sample ``i`` reaches; column
``leaf_offsets[t] + k`` is leaf ``k`` of tree ``t`` in the forest's canonical leaf order.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse

from ._tree_kernels import count_distinct_ancestors, group_rows, leaf_column_sums, leaf_matvec, leaf_rmatvec
from .forest import as_tree_ensemble


@dataclass
class LeafMatrix:
    """The matrix of candidate terms, implicit: rule columns ``M[i, offsets[t] + leaves[i, t]] = values[...]``, then
    the dense linear-term columns ``linear`` (n, p), if any.

    ``leaves[i, t]`` is row i's column within block t; an index at least the block's size (the dtype's largest
    value: the *no-column mark*) means the row is in no column of that block (``solver.candidates``: a level of a
    tree the row's leaf is above). Never densified; products cost O(n * T + n * p).
    """

    leaves: np.ndarray  # (n, T) C-contiguous uint8/uint16/uint32 local column indices
    values: np.ndarray  # float64 (R,)
    offsets: np.ndarray  # int64 (T+1,)
    linear: np.ndarray | None = None  # float64 (n, p) linear-term columns, after the R rule columns

    @property
    def n_rules(self) -> int:
        return self.values.shape[0]

    @property
    def n_linear(self) -> int:
        return 0 if self.linear is None else self.linear.shape[1]

    @property
    def shape(self) -> tuple[int, int]:
        return self.leaves.shape[0], self.n_rules + self.n_linear

    def matvec(self, w) -> np.ndarray:
        """M @ w, shape (n,)."""
        w = np.ascontiguousarray(w, dtype=np.float64)
        if w.shape != (self.shape[1],):
            raise ValueError(f"w must have shape ({self.shape[1]},), got {w.shape}")
        out = leaf_matvec(self.leaves, self.offsets, self.values, w[: self.n_rules])
        if self.n_linear:
            out += self.linear @ w[self.n_rules :]
        return out

    def rmatvec(self, r) -> np.ndarray:
        """M.T @ r, shape (R + p,)."""
        r = np.ascontiguousarray(r, dtype=np.float64)
        if r.shape != (self.shape[0],):
            raise ValueError(f"r must have shape ({self.shape[0]},), got {r.shape}")
        out = leaf_rmatvec(self.leaves, self.offsets, self.values, r)
        return np.concatenate([out, self.linear.T @ r]) if self.n_linear else out

    def column_counts(self, sample_weight=None) -> np.ndarray:
        """(R,) number of rows (or total sample_weight) in each rule column."""
        n_rows = self.shape[0]
        row_weight = np.ones(n_rows) if sample_weight is None else np.ascontiguousarray(sample_weight, dtype=np.float64)
        if row_weight.shape != (n_rows,):
            raise ValueError(f"sample_weight must have shape ({n_rows},), got {row_weight.shape}")
        return leaf_column_sums(self.leaves, self.offsets, self.n_rules, row_weight)

    def without_small_leaves(self, min_rows: int) -> "LeafMatrix":
        """The same matrix with a zero column for every rule that fewer than ``min_rows`` of its rows reach:
        such rules cannot be selected (``PathSpec.min_support``; the solver keeps zero columns at zero)."""
        if min_rows <= 1:
            return self
        small = self.column_counts() < min_rows
        return LeafMatrix(self.leaves, np.where(small, 0.0, self.values), self.offsets, self.linear)

    def unit_columns(self, sample_weight=None) -> tuple["LeafMatrix", np.ndarray]:
        """(the matrix with unit-norm columns on these rows, ``scale``): rule column j becomes ``1/sqrt(S_j)`` on its
        rows (``S_j`` the weighted row count), a linear column is divided by its weighted norm, so weights ``w'`` of
        this matrix are ``w = scale * w'`` of this one (``scale_j = 1 / (v_j sqrt(S_j))``); a zero column stays
        zero (scale 0)."""
        counts = self.column_counts(sample_weight)
        usable = (counts > 0) & (self.values != 0)
        root = np.sqrt(np.where(usable, counts, 1.0))
        scale = np.where(usable, 1.0 / (np.where(usable, self.values, 1.0) * root), 0.0)
        linear = self.linear
        if self.n_linear:
            weight = np.ones(self.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
            norms = np.sqrt(weight @ self.linear**2)
            linear_scale = np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)
            linear = np.ascontiguousarray(self.linear * linear_scale)
            scale = np.concatenate([scale, linear_scale])
        return LeafMatrix(self.leaves, np.where(usable, 1.0 / root, 0.0), self.offsets, linear), scale

    def columns(self, selected, grouped=None) -> scipy.sparse.csc_matrix:
        """The columns ``selected`` (distinct indices into the R + p columns) as a sparse (n, k) matrix: one pass over
        the rows of the blocks they are in (``group_rows``), O(n k) for linear ones. ``grouped``: every rule column's
        rows, (rows, ptr) as ``group_rows`` gives them (a solver Problem's ``leaf_rows``, ``leaf_ptr``), copied
        instead of that pass (O(rows of the selected rules))."""
        selected = np.asarray(selected, dtype=np.int64)
        n_rows = self.shape[0]
        is_rule = selected < self.n_rules
        rules = selected[is_rule]
        if grouped is None:
            group = np.full(self.n_rules, -1, dtype=np.int64)
            group[rules] = np.arange(len(rules))
            rows, ptr = group_rows(self.leaves, self.offsets, group, len(rules))
        else:
            all_rows, all_ptr = grouped
            ptr = np.concatenate([[0], np.cumsum(all_ptr[rules + 1] - all_ptr[rules])])
            rows = np.concatenate([all_rows[all_ptr[j] : all_ptr[j + 1]] for j in rules] or [np.zeros(0, np.int32)])
        data = np.repeat(self.values[rules], np.diff(ptr))
        matrix = scipy.sparse.csc_matrix((data, rows, ptr), shape=(n_rows, len(rules)))
        if is_rule.all():
            return matrix
        linear = scipy.sparse.csc_matrix(self.linear[:, selected[~is_rule] - self.n_rules])
        stacked = scipy.sparse.hstack([matrix, linear], format="csc")
        return stacked[:, np.argsort(np.concatenate([np.flatnonzero(is_rule), np.flatnonzero(~is_rule)]))]

    def to_csc(self) -> scipy.sparse.csc_matrix:
        """M as an explicit scipy.sparse CSC matrix (n, R + p)."""
        n_rows = self.leaves.shape[0]
        local = self.leaves.astype(np.int64)
        present = local < np.diff(self.offsets)
        columns = (self.offsets[:-1] + local)[present]
        rows = np.broadcast_to(np.arange(n_rows, dtype=np.int64)[:, None], local.shape)[present]
        coo = scipy.sparse.coo_matrix((self.values[columns], (rows, columns)), shape=(n_rows, self.n_rules))
        if self.n_linear:
            return scipy.sparse.hstack([coo, scipy.sparse.csc_matrix(self.linear)], format="csc")
        return scipy.sparse.csc_matrix(coo)


def leaf_matrix(forest, X) -> LeafMatrix:
    """The implicit mapping matrix of ``forest`` on rows ``X``.

    ``forest``: a TreeEnsemble or a fitted scikit-learn tree regressor (see ``as_tree_ensemble``).
    """
    forest = as_tree_ensemble(forest)
    return LeafMatrix(forest.apply(X), forest.leaf_values, forest.leaf_offsets)


def mapping_matrix(forest, X) -> scipy.sparse.csc_matrix:
    """The mapping matrix of ``forest`` (as for :func:`leaf_matrix`) on rows ``X`` as scipy.sparse CSC."""
    return leaf_matrix(forest, X).to_csc()


def count_antecedents(leaves, ptr: np.ndarray, ids: np.ndarray) -> int:
    """Number of distinct internal nodes (antecedents) on the paths of a set of leaves.

    The paper's interpretability count. ``leaves`` is a boolean mask over the R global leaves
    (e.g. ``w != 0``) or an array of global leaf indices; ``(ptr, ids)`` is
    ``TreeEnsemble.leaf_ancestors``. Cost O(selected leaves * depth) in a numba kernel (plus
    O(R) to read a mask).
    """
    n_leaves = len(ptr) - 1
    leaves = np.asarray(leaves)
    if leaves.dtype == np.bool_:
        if leaves.shape != (n_leaves,):
            raise ValueError(f"a leaf mask must have shape ({n_leaves},), got {leaves.shape}")
        leaves = np.flatnonzero(leaves)
    elif leaves.size and (leaves.dtype.kind not in "iu" or leaves.min() < 0 or leaves.max() >= n_leaves):
        raise ValueError(f"leaves must be a boolean mask or integer indices in [0, {n_leaves})")
    return int(count_distinct_ancestors(leaves.astype(np.int64).ravel(), ptr, ids))
