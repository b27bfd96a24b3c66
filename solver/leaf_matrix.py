"""The mapping matrix M of a forest on rows X (paper, section 2), kept implicit.

Row ``i`` of M holds ``value`` at the one leaf per tree that sample ``i`` reaches; column
``leaf_offsets[t] + k`` is leaf ``k`` of tree ``t`` in the forest's canonical leaf order.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse

from ._tree_kernels import count_distinct_ancestors, leaf_column_sums, leaf_matvec, leaf_rmatvec
from .sklearn_adapters import as_tree_ensemble


@dataclass
class LeafMatrix:
    """The mapping matrix M, implicit: ``M[i, offsets[t] + leaves[i, t]] = values[...]``.

    Never densified; products cost O(n * T).
    """

    leaves: np.ndarray  # (n, T) C-contiguous uint8/uint16/uint32 local leaf indices
    values: np.ndarray  # float64 (R,)
    offsets: np.ndarray  # int64 (T+1,)

    @property
    def shape(self) -> tuple[int, int]:
        return self.leaves.shape[0], self.values.shape[0]

    def matvec(self, w) -> np.ndarray:
        """M @ w, shape (n,)."""
        w = np.ascontiguousarray(w, dtype=np.float64)
        if w.shape != (self.shape[1],):
            raise ValueError(f"w must have shape ({self.shape[1]},), got {w.shape}")
        return leaf_matvec(self.leaves, self.offsets, self.values, w)

    def rmatvec(self, r) -> np.ndarray:
        """M.T @ r, shape (R,)."""
        r = np.ascontiguousarray(r, dtype=np.float64)
        if r.shape != (self.shape[0],):
            raise ValueError(f"r must have shape ({self.shape[0]},), got {r.shape}")
        return leaf_rmatvec(self.leaves, self.offsets, self.values, r)

    def column_counts(self, sample_weight=None) -> np.ndarray:
        """(R,) number of rows (or total sample_weight) reaching each leaf."""
        n_rows = self.shape[0]
        row_weight = np.ones(n_rows) if sample_weight is None else np.ascontiguousarray(sample_weight, dtype=np.float64)
        if row_weight.shape != (n_rows,):
            raise ValueError(f"sample_weight must have shape ({n_rows},), got {row_weight.shape}")
        return leaf_column_sums(self.leaves, self.offsets, self.shape[1], row_weight)

    def without_small_leaves(self, min_rows: int) -> "LeafMatrix":
        """The same matrix with a zero column for every leaf that fewer than ``min_rows`` of its rows reach:
        such leaves cannot become rules (``PathSpec.min_support``; the solver keeps zero columns at zero)."""
        if min_rows <= 1:
            return self
        small = self.column_counts() < min_rows
        return LeafMatrix(self.leaves, np.where(small, 0.0, self.values), self.offsets)

    def unit_columns(self, sample_weight=None) -> tuple["LeafMatrix", np.ndarray]:
        """(the matrix with unit-norm columns on these rows, ``scale``): column j becomes ``1/sqrt(S_j)`` on its
        rows (``S_j`` the weighted row count), so weights ``w'`` of this matrix are ``w = scale * w'`` of this one
        (``scale_j = 1 / (v_j sqrt(S_j))``); a zero column stays zero (scale 0)."""
        counts = self.column_counts(sample_weight)
        usable = (counts > 0) & (self.values != 0)
        root = np.sqrt(np.where(usable, counts, 1.0))
        scale = np.where(usable, 1.0 / (np.where(usable, self.values, 1.0) * root), 0.0)
        return LeafMatrix(self.leaves, np.where(usable, 1.0 / root, 0.0), self.offsets), scale

    def to_csc(self) -> scipy.sparse.csc_matrix:
        """M as an explicit scipy.sparse CSC matrix (n, R)."""
        n_rows, n_trees = self.leaves.shape
        columns = (self.offsets[:-1] + self.leaves).ravel()
        rows = np.repeat(np.arange(n_rows, dtype=np.int64), n_trees)
        coo = scipy.sparse.coo_matrix((self.values[columns], (rows, columns)), shape=self.shape)
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
