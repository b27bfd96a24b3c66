"""numba kernels over flat tree arrays: the canonical leaf walk, routing rows to leaves, leaf
ancestors, products with the implicit mapping matrix, and sums of K-output leaves."""

import numpy as np
from numba import njit


def leaf_index_dtype(n_values: int):
    """The smallest unsigned dtype that holds ``n_values`` distinct indices 0..n_values-1."""
    return next(dtype for dtype in (np.uint8, np.uint16, np.uint32) if n_values - 1 <= np.iinfo(dtype).max)


@njit(cache=True)
def depth_first_leaves(children_left, children_right):
    """Leaves in left-to-right depth-first order, each node's parent and depth (-1: unreached).

    Requires every node but the root to have at most one parent (checked before), so the walk
    visits each node at most once.
    """
    n_nodes = children_left.shape[0]
    parent = np.full(n_nodes, -1, np.int32)
    depth = np.full(n_nodes, -1, np.int32)
    leaves = np.empty(n_nodes, np.int32)
    stack = np.empty(n_nodes, np.int32)
    n_leaves = 0
    stack[0] = 0
    depth[0] = 0
    top = 1
    while top > 0:
        top -= 1
        node = stack[top]
        left = children_left[node]
        if left == -1:
            leaves[n_leaves] = node
            n_leaves += 1
        else:
            right = children_right[node]
            parent[left] = node
            parent[right] = node
            depth[left] = depth[node] + 1
            depth[right] = depth[node] + 1
            stack[top] = right
            stack[top + 1] = left
            top += 2
    return leaves[:n_leaves], parent, depth


@njit(cache=True)
def apply_trees(X, node_offsets, children_left, children_right, feature, threshold, missing_go_left, leaf_index, out):
    """out[i, t] = local leaf index that row i reaches in tree t (sklearn's routing).

    Tree by tree, so one tree's nodes stay in cache while all rows go through it.
    """
    n_rows, n_trees = out.shape
    for t in range(n_trees):
        root = node_offsets[t]
        for i in range(n_rows):
            node = root
            while children_left[node] != -1:
                x = X[i, feature[node]]
                if np.isnan(x):
                    go_left = missing_go_left[node]
                else:
                    go_left = x <= threshold[node]
                node = root + (children_left[node] if go_left else children_right[node])
            out[i, t] = leaf_index[node]


@njit(cache=True)
def fill_leaf_ancestors(leaf_nodes, parent, node_offset, ptr, ids):
    """Write the global ids (node_offset + node) of the internal nodes on each leaf's path,
    root first, into ids[ptr[j]:ptr[j+1]]."""
    for j in range(leaf_nodes.shape[0]):
        node = leaf_nodes[j]
        pos = ptr[j + 1]
        while parent[node] != -1:
            node = parent[node]
            pos -= 1
            ids[pos] = node_offset + node


@njit(cache=True)
def count_distinct_ancestors(leaves, ptr, ids):
    """Distinct ids in ids[ptr[j]:ptr[j+1]] over the given leaves j; O(len(leaves) * depth)."""
    largest = -1
    for leaf in leaves:
        for pos in range(ptr[leaf], ptr[leaf + 1]):
            largest = max(largest, ids[pos])
    seen = np.zeros(largest + 1, np.bool_)
    count = 0
    for leaf in leaves:
        for pos in range(ptr[leaf], ptr[leaf + 1]):
            if not seen[ids[pos]]:
                seen[ids[pos]] = True
                count += 1
    return count


@njit(cache=True)
def leaf_matvec(leaves, offsets, values, w):
    """M @ w for M[i, offsets[t] + leaves[i, t]] = values[...]; an index past its block's size (the no-column mark
    of ``solver.leaf_matrix``) is no column."""
    n_rows, n_trees = leaves.shape
    out = np.empty(n_rows)
    for i in range(n_rows):
        total = 0.0
        for t in range(n_trees):
            k = leaves[i, t]
            if offsets[t] + k < offsets[t + 1]:
                total += values[offsets[t] + k] * w[offsets[t] + k]
        out[i] = total
    return out


@njit(cache=True)
def leaf_rmatvec(leaves, offsets, values, r):
    """M.T @ r."""
    n_rows, n_trees = leaves.shape
    out = np.zeros(values.shape[0])
    for i in range(n_rows):
        for t in range(n_trees):
            j = offsets[t] + leaves[i, t]
            if j < offsets[t + 1]:
                out[j] += r[i]
    return out * values


@njit(cache=True)
def leaf_column_sums(leaves, offsets, n_leaves, row_weight):
    """Total row_weight of the rows reaching each leaf."""
    n_rows, n_trees = leaves.shape
    out = np.zeros(n_leaves)
    for i in range(n_rows):
        for t in range(n_trees):
            j = offsets[t] + leaves[i, t]
            if j < offsets[t + 1]:
                out[j] += row_weight[i]
    return out


@njit(cache=True)
def candidate_columns(leaves, block_trees, lookup_ptr, lookup, out):
    """``out[i, b] = lookup[lookup_ptr[b] + leaves[i, block_trees[b]]]``: each row's column in each candidate block
    (``solver.candidates``) from its forest leaves."""
    for i in range(leaves.shape[0]):
        for b in range(block_trees.shape[0]):
            out[i, b] = lookup[lookup_ptr[b] + leaves[i, block_trees[b]]]


@njit(cache=True)
def leaf_output_sums(leaves, offsets, tree_outputs, leaf_values, vector_rows, leaf_vectors, n_outputs):
    """(n, K) sums over trees of what each row's leaf adds to each output: a per-output tree
    (tree_outputs[t] >= 0) adds leaf_values[j] to its output, a vector tree the row
    leaf_vectors[vector_rows[j]] to all outputs."""
    n_rows, n_trees = leaves.shape
    out = np.zeros((n_rows, n_outputs))
    for i in range(n_rows):
        for t in range(n_trees):
            j = offsets[t] + leaves[i, t]
            k = tree_outputs[t]
            if k >= 0:
                out[i, k] += leaf_values[j]
            else:
                row = vector_rows[j]
                for m in range(n_outputs):
                    out[i, m] += leaf_vectors[row, m]
    return out
