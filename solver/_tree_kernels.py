"""numba kernels over flat tree arrays: the canonical leaf walk, routing rows to leaves, leaf
ancestors, products with the implicit mapping matrix, and sums of K-output leaves.

The kernels that touch every row run in parallel over chunks of rows (numba's ``prange``, as many threads as
``solver.threads`` allows). A sum over rows is summed within each chunk, then over the chunks in their order: the
chunks depend on the number of rows only, never on the number of threads, so every thread count gives the same
bits. Row loops read the (n, T) leaf array row by row, which is how it lies in memory: memory traffic linear in the
rows, where a loop over one tree's rows would read a cache line per row per tree.
"""

import numpy as np
from numba import njit, prange

# rows per chunk of the parallel row loops, at least; at most MAX_CHUNKS chunks, so that the per-chunk partial sums
# (chunks x columns) stay a few MiB and each thread gets a few chunks to balance its load
ROW_CHUNK = 8192
MAX_CHUNKS = 64
TREES_PER_TASK = 8  # blocks per task of group_rows' walks (_walk_rows)


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
def row_chunks(n_rows):
    """(number of chunks, rows per chunk) of the parallel row loops over ``n_rows`` rows."""
    size = max(ROW_CHUNK, -(-n_rows // MAX_CHUNKS))
    return max(1, -(-n_rows // size)), size


@njit(cache=True, parallel=True)
def apply_trees(X, node_offsets, children_left, children_right, feature, threshold, missing_go_left, leaf_index, out):
    """out[i, t] = local leaf index that row i reaches in tree t (sklearn's routing).

    Chunk by chunk of rows in parallel, and within a chunk tree by tree, so one tree's nodes stay in cache while
    the chunk's rows go through it.
    """
    n_rows, n_trees = out.shape
    n_chunks, size = row_chunks(n_rows)
    for chunk in prange(n_chunks):
        stop = min(n_rows, (chunk + 1) * size)
        for t in range(n_trees):
            root = node_offsets[t]
            for i in range(chunk * size, stop):
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


@njit(cache=True, parallel=True)
def leaf_matvec(leaves, offsets, values, w):
    """M @ w for M[i, offsets[t] + leaves[i, t]] = values[...]; an index past its block's size (the no-column mark
    of ``solver.leaf_matrix``) is no column. Blocks whose weights are all zero are skipped: a sparse ``w`` (a path
    step's few rules) costs O(n) per block it touches."""
    n_rows = leaves.shape[0]
    used = np.zeros(leaves.shape[1], dtype=np.bool_)
    for t in range(leaves.shape[1]):
        for j in range(offsets[t], offsets[t + 1]):
            used[t] = used[t] or (w[j] != 0.0 and values[j] != 0.0)
    blocks = np.flatnonzero(used)
    out = np.zeros(n_rows)
    for i in prange(n_rows):
        total = 0.0
        for t in blocks:
            k = leaves[i, t]
            if offsets[t] + k < offsets[t + 1]:
                total += values[offsets[t] + k] * w[offsets[t] + k]
        out[i] = total
    return out


@njit(cache=True, parallel=True)
def column_sums(leaves, offsets, row_values, out):
    """``out[j] = sum_{i in column j} row_values[i]`` (rows (n,) to columns (R,)): M.T @ row_values for unit column
    values. Chunks of rows in parallel, then each column's chunk sums in chunk order (module docstring)."""
    n_rows, n_trees = leaves.shape
    n_chunks, size = row_chunks(n_rows)
    partial = np.zeros((n_chunks, out.shape[0]))
    for chunk in prange(n_chunks):
        sums = partial[chunk]
        for i in range(chunk * size, min(n_rows, (chunk + 1) * size)):
            value = row_values[i]
            row = leaves[i]
            for t in range(n_trees):
                j = offsets[t] + row[t]
                if j < offsets[t + 1]:
                    sums[j] += value
    for j in prange(out.shape[0]):
        total = partial[0, j]
        for chunk in range(1, n_chunks):
            total += partial[chunk, j]
        out[j] = total


@njit(cache=True)
def group_rows(leaves, offsets, group, n_groups):
    """The rows of some columns, each column's in row order (a counting sort, stable): ``group[j]`` is column j's
    place in the output (distinct; -1: not wanted). Returns (rows, ptr): the rows of the column in place g are
    ``rows[ptr[g]:ptr[g + 1]]``. Only blocks with a wanted column are read: one walk counts, the next places."""
    used = np.zeros(offsets.shape[0] - 1, dtype=np.bool_)
    for t in range(used.shape[0]):
        for j in range(offsets[t], offsets[t + 1]):
            used[t] = used[t] or group[j] >= 0
    blocks = np.flatnonzero(used)
    counts = np.zeros(n_groups, dtype=np.int64)
    _walk_rows(leaves, offsets, group, blocks, counts, np.empty(0, dtype=np.int32))
    ptr = np.zeros(n_groups + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(counts)
    rows = np.empty(ptr[n_groups], dtype=np.int32)
    _walk_rows(leaves, offsets, group, blocks, ptr[:-1].copy(), rows)
    return rows, ptr


@njit(cache=True, parallel=True)
def _walk_rows(leaves, offsets, group, blocks, cursor, rows):
    """For each row i, in order, of each wanted column j of ``blocks``: ``rows[cursor[group[j]]] = i`` (skipped where
    ``rows`` is empty: the walk then counts) and ``cursor[group[j]] += 1``. Tasks of ``TREES_PER_TASK`` blocks run in
    parallel, each over every row: its blocks' columns are its own, and it writes to only their few hundred streams
    of rows, which stay in cache (a pass over all columns of all blocks at once writes to thousands)."""
    placing = rows.shape[0] > 0
    for task in prange(-(-blocks.shape[0] // TREES_PER_TASK)):
        stop = min(blocks.shape[0], (task + 1) * TREES_PER_TASK)
        for i in range(leaves.shape[0]):
            for b in range(task * TREES_PER_TASK, stop):
                j = offsets[blocks[b]] + leaves[i, blocks[b]]
                if j < offsets[blocks[b] + 1] and group[j] >= 0:
                    if placing:
                        rows[cursor[group[j]]] = i
                    cursor[group[j]] += 1


def leaf_rmatvec(leaves, offsets, values, r):
    """M.T @ r."""
    out = np.empty(values.shape[0])
    column_sums(leaves, offsets, r, out)
    return out * values


def leaf_column_sums(leaves, offsets, n_leaves, row_weight):
    """Total row_weight of the rows reaching each leaf."""
    out = np.empty(n_leaves)
    column_sums(leaves, offsets, row_weight, out)
    return out


@njit(cache=True, parallel=True)
def candidate_columns(leaves, block_trees, lookup_ptr, lookup, out):
    """``out[i, b] = lookup[lookup_ptr[b] + leaves[i, block_trees[b]]]``: each row's column in each candidate block
    (``solver.candidates``) from its forest leaves."""
    for i in prange(leaves.shape[0]):
        for b in range(block_trees.shape[0]):
            out[i, b] = lookup[lookup_ptr[b] + leaves[i, block_trees[b]]]


@njit(cache=True, parallel=True)
def leaf_output_sums(leaves, offsets, tree_outputs, leaf_values, vector_rows, leaf_vectors, n_outputs):
    """(n, K) sums over trees of what each row's leaf adds to each output: a per-output tree
    (tree_outputs[t] >= 0) adds leaf_values[j] to its output, a vector tree the row
    leaf_vectors[vector_rows[j]] to all outputs."""
    n_rows, n_trees = leaves.shape
    out = np.zeros((n_rows, n_outputs))
    for i in prange(n_rows):
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
