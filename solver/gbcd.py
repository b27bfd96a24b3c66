"""Greedy block coordinate descent (GBCD) for the FIRE objective, one tree per block.

Objective, with sample weights ``s`` (normalised by the caller to sum to n) and an unpenalised intercept b::

    1/2 sum_i s_i (y_i - b - (M w)_i)^2 + sum_j P(w_j; lam, gamma_t) + lam_f sum_t ||D_t w_t||_1

Structure used throughout (see docs/solver-api.md): every row falls in exactly one leaf per tree, so the
Gram matrix of a block is diagonal, ``c_j = S_j v_j^2`` with ``S_j`` the weighted row count of leaf j.

State kept by the solver, all updated in place: ``w`` (R,) the leaf weights, ``residual`` (n,) = ``y - M w``
(without the intercept), and the intercept, kept at its exact optimum (the weighted mean of the residual,
updated in O(R_t) after each block update from the leaves' weighted counts). The leaf-index matrix is
tree-major, (T, n), so that one tree's column is contiguous: a block's gradient
``-v_j (sum_{i in leaf j} s_i residual_i - b S_j)`` is one O(n) pass over that column.

A block update without fusion minimises the block exactly (the block problem is separable). With fusion it
runs up to ``inner_iters`` proximal-gradient steps with the isotropic step ``1 / L_t`` (``L_t = max_j c_j``),
each the fused-lasso prox followed by the sparsity threshold (suppl. C.3/C.4), accepting a step only while
the exact block objective decreases (the block loss is an exact diagonal quadratic, so this costs O(R_t)).
"""

import numpy as np
from numba import njit

from .penalties import (
    fused_lasso_prox,
    fusion_value,
    penalty_prox,
    penalty_subdifferential,
    penalty_value,
)

GREEDY = 0
CYCLIC = 1
ANDERSON_MEMORY = 5


@njit(cache=True)
def compute_leaf_sums(leaves, offsets, sample_weight, residual, out):
    """``out_j = sum_{i in leaf j} s_i residual_i`` (M^T (s * residual) without leaf values), O(n T).

    ``leaves`` is tree-major, (T, n): each tree's column is contiguous.
    """
    out[:] = 0.0
    weighted = sample_weight * residual
    for t in range(leaves.shape[0]):
        column = leaves[t]
        first = offsets[t]
        for i in range(column.shape[0]):
            out[first + column[i]] += weighted[i]


@njit(cache=True)
def direction_entry(j, first, last, w, gradient, lam, gamma, code, lam_f):
    """Steepest-direction entry ``d_j = min_{s in dh_j + dg_j} |grad_j + s|`` (paper eq. 8).

    Fusion subgradients count only differences to neighbours within the same tree: ``first``/``last`` are
    the global indices of the block's first and last leaf.
    """
    lo, hi = penalty_subdifferential(w[j], lam, gamma, code)
    if lam_f > 0.0:
        if j > first:
            diff = w[j] - w[j - 1]
            if diff > 0.0:
                lo += lam_f
                hi += lam_f
            elif diff < 0.0:
                lo -= lam_f
                hi -= lam_f
            else:
                lo -= lam_f
                hi += lam_f
        if j < last:
            diff = w[j] - w[j + 1]
            if diff > 0.0:
                lo += lam_f
                hi += lam_f
            elif diff < 0.0:
                lo -= lam_f
                hi -= lam_f
            else:
                lo -= lam_f
                hi += lam_f
    target = -gradient
    if target < lo:
        return lo - target
    if target > hi:
        return target - hi
    return 0.0


@njit(cache=True)
def direction_vector(w, values, offsets, leaf_sums, leaf_weight, intercept, lam, block_gamma, code, lam_f,
                     out):
    """Fill ``out`` with the steepest-direction vector d (R,) for the current state."""
    for t in range(offsets.shape[0] - 1):
        first = offsets[t]
        last = offsets[t + 1] - 1
        for j in range(first, last + 1):
            gradient = -values[j] * (leaf_sums[j] - intercept * leaf_weight[j])
            out[j] = direction_entry(j, first, last, w, gradient, lam, block_gamma[t], code, lam_f)


@njit(cache=True)
def _block_penalty(theta, lam, gamma, code, lam_f):
    total = 0.0
    for k in range(theta.shape[0]):
        total += penalty_value(theta[k], lam, gamma, code)
        if k > 0:
            total += lam_f * abs(theta[k] - theta[k - 1])
    return total


@njit(cache=True)
def _block_model(theta, w, first, gradient, curvature, lam, gamma, code, lam_f):
    """Block objective at ``theta`` minus the loss at ``w``: exact, the block loss is a diagonal quadratic."""
    total = _block_penalty(theta, lam, gamma, code, lam_f)
    for k in range(theta.shape[0]):
        step = theta[k] - w[first + k]
        total += gradient[k] * step + 0.5 * curvature[first + k] * step * step
    return total


@njit(cache=True)
def block_gradient(t, leaves, values, offsets, sample_weight, residual, intercept, leaf_weight, out):
    """Loss gradient of block t into ``out[:R_t]`` from the residual: one pass over the tree's column, O(n)."""
    first = offsets[t]
    size = offsets[t + 1] - first
    for k in range(size):
        out[k] = 0.0
    column = leaves[t]
    for i in range(column.shape[0]):
        out[column[i]] += sample_weight[i] * residual[i]
    for k in range(size):
        out[k] = -values[first + k] * (out[k] - intercept * leaf_weight[first + k])


@njit(cache=True)
def update_block(t, w, gradient, offsets, curvature, lipschitz, lam, gamma, code, lam_f, inner_iters, delta):
    """Minimise (without fusion) or decrease (with fusion) the objective over block t.

    ``gradient[:R_t]`` is the block's loss gradient at ``w``. Writes the weight changes of the block into
    ``delta[:R_t]`` (does not touch ``w``) and returns the block's stationarity measure: the largest
    curvature-scaled move of the first proximal step (0 exactly at a fixed point of the block update).
    """
    first = offsets[t]
    size = offsets[t + 1] - first
    measure = 0.0
    if lam_f == 0.0:
        for k in range(size):
            j = first + k
            if curvature[j] > 0.0:
                z = w[j] - gradient[k] / curvature[j]
                new = penalty_prox(z, curvature[j], lam, gamma, code)
            else:
                new = 0.0
            delta[k] = new - w[j]
            measure = max(measure, max(curvature[j], 1e-300) * abs(delta[k]))
        return measure

    step_curvature = lipschitz[t]
    current = w[first:first + size].copy()
    if step_curvature <= 0.0:
        for k in range(size):
            delta[k] = -current[k]
        return 0.0
    current_value = _block_penalty(current, lam, gamma, code, lam_f)
    point = np.empty(size)
    theta = np.empty(size)
    for it in range(inner_iters):
        for k in range(size):
            j = first + k
            local_gradient = gradient[k] + curvature[j] * (current[k] - w[j])
            point[k] = current[k] - local_gradient / step_curvature
        fused_lasso_prox(point, lam_f / step_curvature, theta)
        largest_move = 0.0
        for k in range(size):
            theta[k] = penalty_prox(theta[k], step_curvature, lam, gamma, code)
            largest_move = max(largest_move, abs(theta[k] - current[k]))
        if it == 0:
            measure = step_curvature * largest_move
        value = _block_model(theta, w, first, gradient, curvature, lam, gamma, code, lam_f)
        if value > current_value or largest_move == 0.0:
            break
        current[:] = theta
        current_value = value
    for k in range(size):
        delta[k] = current[k] - w[first + k]
    return measure




@njit(cache=True)
def apply_block_delta(t, delta, w, leaves, values, offsets, leaf_weight, residual):
    """Add ``delta`` to block t of ``w``, update ``residual`` (rows in changed leaves only).

    Returns the change of ``sum_i s_i residual_i`` (O(R_t), from the leaves' weighted counts), from which
    the caller keeps the optimal intercept, or NaN when nothing changed.
    """
    first = offsets[t]
    size = offsets[t + 1] - first
    weighted_change = 0.0
    changed = False
    for k in range(size):
        if delta[k] != 0.0:
            changed = True
            w[first + k] += delta[k]
            weighted_change -= leaf_weight[first + k] * values[first + k] * delta[k]
    if not changed:
        return np.nan
    column = leaves[t]
    for i in range(column.shape[0]):
        k = column[i]
        if delta[k] != 0.0:
            residual[i] -= values[first + k] * delta[k]
    return weighted_change


@njit(cache=True)
def objective_value(w, residual, sample_weight, intercept, offsets, lam, block_gamma, code, lam_f):
    loss = 0.0
    for i in range(residual.shape[0]):
        r = residual[i] - intercept
        loss += sample_weight[i] * r * r
    total = 0.5 * loss
    for t in range(offsets.shape[0] - 1):
        for j in range(offsets[t], offsets[t + 1]):
            if w[j] != 0.0:
                total += penalty_value(w[j], lam, block_gamma[t], code)
    return total + fusion_value(w, offsets, lam_f)


@njit(cache=True)
def _update_blocks(blocks, w, state, leaves, values, offsets, sample_weight, residual, leaf_weight, curvature,
                   lipschitz, lam, block_gamma, code, lam_f, inner_iters, gradient, delta):
    """One pass of block updates over ``blocks`` in the given order; returns the largest block measure.

    ``state`` holds [intercept, sum_i s_i residual_i, total weight]; the intercept stays optimal.
    """
    worst = 0.0
    for t in blocks:
        block_gradient(t, leaves, values, offsets, sample_weight, residual, state[0], leaf_weight, gradient)
        measure = update_block(t, w, gradient, offsets, curvature, lipschitz, lam, block_gamma[t], code, lam_f,
                               inner_iters, delta)
        worst = max(worst, measure)
        change = apply_block_delta(t, delta, w, leaves, values, offsets, leaf_weight, residual)
        if not np.isnan(change):
            state[1] += change
            state[0] = state[1] / state[2]
    return worst


@njit(cache=True)
def _gather(w, blocks, offsets, out):
    position = 0
    for t in blocks:
        for j in range(offsets[t], offsets[t + 1]):
            out[position] = w[j]
            position += 1


@njit(cache=True)
def _move_blocks(target, blocks, w, leaves, values, offsets, leaf_weight, residual, delta):
    """Set the weights of ``blocks`` to ``target`` (their concatenation), keeping ``residual`` exact."""
    position = 0
    for t in blocks:
        size = offsets[t + 1] - offsets[t]
        for k in range(size):
            delta[k] = target[position + k] - w[offsets[t] + k]
        position += size
        apply_block_delta(t, delta, w, leaves, values, offsets, leaf_weight, residual)


@njit(cache=True)
def _anderson_step(history, blocks, w, state, leaves, values, offsets, sample_weight, residual, leaf_weight,
                   lam, block_gamma, code, lam_f, delta):
    """Anderson extrapolation of the last iterates of the working set (as in skglm); kept only if the
    objective decreases, otherwise undone."""
    n_steps = history.shape[0] - 1
    diffs = history[1:] - history[:-1]
    gram = diffs @ diffs.T
    gram += 1e-10 * (np.trace(gram) + 1e-300) * np.eye(n_steps)
    try:
        z = np.linalg.solve(gram, np.ones(n_steps))
    except Exception:  # singular system: skip this extrapolation
        return False
    if not np.isfinite(z.sum()) or z.sum() == 0.0:
        return False
    coefs = z / z.sum()
    extrapolated = coefs @ history[1:]
    before = objective_value(w, residual, sample_weight, state[0], offsets, lam, block_gamma, code, lam_f)
    current = history[n_steps].copy()
    _move_blocks(extrapolated, blocks, w, leaves, values, offsets, leaf_weight, residual, delta)
    weighted_total = np.dot(sample_weight, residual)
    after = objective_value(w, residual, sample_weight, weighted_total / state[2], offsets, lam, block_gamma,
                            code, lam_f)
    if after < before:
        state[1] = weighted_total
        state[0] = weighted_total / state[2]
        return True
    _move_blocks(current, blocks, w, leaves, values, offsets, leaf_weight, residual, delta)
    return False


@njit(cache=True)
def solve(w, intercept, residual, leaves, values, offsets, sample_weight, leaf_weight, curvature, lipschitz,
          lam, block_gamma, code, lam_f, tol, max_iter, selection, inner_iters):
    """Run GBCD (or cyclic BCD) from the given state until stationary; returns (block updates, converged).

    ``leaves`` is tree-major (T, n); ``residual`` is ``y - M w`` and stays so; ``intercept[0]`` is kept at
    its exact optimum.

    Greedy: computing the steepest-direction vector d needs the full gradient, O(n T), as much as T block
    updates, so each direction computation ranks the blocks by ``||d_t||_2`` and then updates a working set:
    the blocks already holding rules plus the steepest violators (at least 10, twice the active blocks),
    in rank order, pass after pass until their own stationarity measure falls below a fraction of the
    current ``max |d_j|``. The solve ends when ``max |d_j| <= tol`` and a full cyclic sweep confirms that no
    block's proximal move exceeds ``tol`` (with fusion, coordinate-wise d can vanish at points where a fused
    group still has to move together; the sweep's block prox catches that).
    """
    n_trees = offsets.shape[0] - 1
    n_leaves = values.shape[0]
    max_block = 0
    for t in range(n_trees):
        max_block = max(max_block, offsets[t + 1] - offsets[t])
    delta = np.empty(max_block)
    gradient = np.empty(max_block)
    leaf_sums = np.empty(n_leaves)
    direction = np.empty(n_leaves)
    scores = np.empty(n_trees)
    state = np.empty(3)
    state[2] = sample_weight.sum()
    state[1] = np.dot(sample_weight, residual)
    state[0] = state[1] / state[2]
    all_blocks = np.arange(n_trees)

    iterations = 0
    converged = False
    while iterations < max_iter:
        if selection == CYCLIC:
            worst = _update_blocks(all_blocks, w, state, leaves, values, offsets, sample_weight, residual,
                                   leaf_weight, curvature, lipschitz, lam, block_gamma, code, lam_f, inner_iters,
                                   gradient, delta)
            iterations += n_trees
            if worst <= tol:
                converged = True
                break
            continue

        compute_leaf_sums(leaves, offsets, sample_weight, residual, leaf_sums)
        direction_vector(w, values, offsets, leaf_sums, leaf_weight, state[0], lam, block_gamma, code, lam_f,
                         direction)
        largest = 0.0
        n_active = 0
        for t in range(n_trees):
            score = 0.0
            active = False
            for j in range(offsets[t], offsets[t + 1]):
                score += direction[j] * direction[j]
                largest = max(largest, direction[j])
                active = active or w[j] != 0.0
            if active:
                n_active += 1
                score = np.inf
            scores[t] = score
        if largest <= tol:
            worst = _update_blocks(all_blocks, w, state, leaves, values, offsets, sample_weight, residual,
                                   leaf_weight, curvature, lipschitz, lam, block_gamma, code, lam_f, inner_iters,
                                   gradient, delta)
            iterations += n_trees
            if worst <= tol:
                converged = True
                break
            continue
        order = np.argsort(-scores)
        size = min(n_trees, max(10, 2 * n_active))
        while size > 0 and scores[order[size - 1]] == 0.0:
            size -= 1
        working_set = order[:size]
        inner_tol = max(tol, 0.3 * largest)
        working_size = 0
        for t in working_set:
            working_size += offsets[t + 1] - offsets[t]
        history = np.empty((ANDERSON_MEMORY + 1, working_size))
        _gather(w, working_set, offsets, history[0])
        n_history = 1
        while iterations < max_iter:
            worst = _update_blocks(working_set, w, state, leaves, values, offsets, sample_weight, residual,
                                   leaf_weight, curvature, lipschitz, lam, block_gamma, code, lam_f, inner_iters,
                                   gradient, delta)
            iterations += size
            if worst <= inner_tol:
                break
            _gather(w, working_set, offsets, history[n_history])
            n_history += 1
            if n_history == ANDERSON_MEMORY + 1:
                _anderson_step(history, working_set, w, state, leaves, values, offsets, sample_weight, residual,
                               leaf_weight, lam, block_gamma, code, lam_f, delta)
                _gather(w, working_set, offsets, history[0])
                n_history = 1
    intercept[0] = state[0]
    return iterations, converged
