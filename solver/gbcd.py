"""Greedy block coordinate descent (GBCD) for the FIRE objective, one tree per block.

Objective, with sample weights ``s`` (normalised by the caller to sum to n) and an unpenalised intercept b::

    1/2 sum_i s_i (y_i - b - (M w)_i)^2 + sum_j P(w_j; lam, gamma_j) + lam_f sum_t ||D_t w_t||_1

Structure used throughout (see docs/solver-api.md): every row falls in exactly one leaf per tree, so column
j of M is ``v_j`` on the rows of leaf j and zero elsewhere, and the Gram matrix of a block is diagonal,
``c_j = S_j v_j^2`` with ``S_j`` the weighted row count of leaf j. The solver keeps, per tree, the rows
sorted by leaf (``leaf_rows``; the rows of global leaf j are ``leaf_rows[leaf_ptr[j]:leaf_ptr[j + 1]]``), so
a leaf's gradient ``-v_j (sum_{i in leaf j} s_i residual_i - b S_j)`` and a change of its weight both cost
O(S_j), a block's O(n), and the full gradient O(n T).

State, updated in place: ``w`` (R,) the leaf weights, ``residual`` (n,) = ``y - M w`` (without the
intercept), and ``state`` = [b, sum_i s_i residual_i, sum_i s_i]: the intercept is kept at its exact
optimum (the weighted mean of the residual) by every weight change, in O(1).

Block updates. Without fusion a block's problem is separable, so its exact minimisation is one exact
(global, also in MCP's nonconvex regime) coordinate minimisation per leaf, and leaves whose weight is zero and
whose direction entry is zero need no visit at all. With fusion a block update runs up to ``inner_iters``
proximal-gradient steps with the isotropic step ``1 / L_t`` (``L_t = max_j c_j``), each the fused-lasso prox
followed by the sparsity threshold (suppl. C.3/C.4), accepting a step only while the exact block objective
decreases (the block loss is an exact diagonal quadratic, so this check costs O(R_t)).

Block selection. The steepest-direction vector d (paper eq. 8) needs the full gradient, O(n T): as much as
a whole sweep of block updates. So each direction computation ranks the candidates by it (blocks by
``||d_t||_2`` with fusion; leaves by ``|d_j|`` without, the block ranking restricted to the leaves that can
move) and a working set (everything already nonzero plus the steepest violators) is updated pass after pass,
with Anderson extrapolation every few passes, until its own stationarity measure falls below a fraction of
``max |d|``. A solve ends at a full-gradient check where no entry of d and no leaf's or block's own proximal
move (its stationarity measure, computed from the same full gradient in O(R)) exceeds ``tol``: with fusion,
coordinate-wise d can vanish where a fused group still has to move together, and with MCP a zero leaf can
be first-order stationary while its exact coordinate minimum lies far from zero; the measures catch both.
Cyclic selection instead sweeps all blocks until no block moves by more than ``tol``.
"""

import numpy as np
from numba import njit

from .penalties import (
    MCP,
    fused_lasso_prox,
    fusion_value,
    penalty_prox,
    penalty_subdifferential,
    penalty_value,
)

GREEDY = 0
CYCLIC = 1
ANDERSON_MEMORY = 5
MIN_WORKING_SET = 32
INNER_TOL_FRACTION = 0.3
SHRINK_FRACTION = 0.1


@njit(cache=True)
def sort_rows_by_leaf(leaves, offsets):
    """Per tree, the rows grouped by leaf (counting sort, stable): returns (leaf_rows (T*n,), leaf_ptr (R+1,))."""
    n, n_trees = leaves.shape
    n_leaves = offsets[n_trees]
    leaf_ptr = np.zeros(n_leaves + 1, dtype=np.int64)
    for i in range(n):
        for t in range(n_trees):
            leaf_ptr[offsets[t] + leaves[i, t] + 1] += 1
    for j in range(n_leaves):
        leaf_ptr[j + 1] += leaf_ptr[j]
    fill = leaf_ptr[:-1].copy()
    leaf_rows = np.empty(n * n_trees, dtype=np.int32)
    for i in range(n):
        for t in range(n_trees):
            j = offsets[t] + leaves[i, t]
            leaf_rows[fill[j]] = i
            fill[j] += 1
    return leaf_rows, leaf_ptr


@njit(cache=True)
def compute_leaf_sums(leaf_rows, leaf_ptr, sample_weight, residual, out):
    """``out_j = sum_{i in leaf j} s_i residual_i`` (M^T (s * residual) without the leaf values), O(n T)."""
    for j in range(out.shape[0]):
        total = 0.0
        for p in range(leaf_ptr[j], leaf_ptr[j + 1]):
            i = leaf_rows[p]
            total += sample_weight[i] * residual[i]
        out[j] = total


@njit(cache=True)
def leaf_gradient(j, values, leaf_rows, leaf_ptr, sample_weight, residual, leaf_weight, intercept):
    total = 0.0
    for p in range(leaf_ptr[j], leaf_ptr[j + 1]):
        i = leaf_rows[p]
        total += sample_weight[i] * residual[i]
    return -values[j] * (total - intercept * leaf_weight[j])


@njit(cache=True)
def move_leaf(j, delta, w, values, leaf_rows, leaf_ptr, leaf_weight, residual, state):
    """``w_j += delta`` keeping the residual and the optimal intercept exact: O(S_j)."""
    w[j] += delta
    change = values[j] * delta
    for p in range(leaf_ptr[j], leaf_ptr[j + 1]):
        residual[leaf_rows[p]] -= change
    state[1] -= leaf_weight[j] * change
    state[0] = state[1] / state[2]


@njit(cache=True)
def _add_fusion_subdifferential(lo, hi, difference, lam_f):
    """Add ``lam_f * d|difference|`` (an interval where the difference is zero) to ``[lo, hi]``."""
    if difference > 0.0:
        return lo + lam_f, hi + lam_f
    if difference < 0.0:
        return lo - lam_f, hi - lam_f
    return lo - lam_f, hi + lam_f


@njit(cache=True)
def direction_entry(j, first, last, w, gradient, lam, gamma, code, lam_f):
    """Steepest-direction entry ``d_j = min_{s in dh_j + dg_j} |grad_j + s|`` (paper eq. 8).

    Fusion subgradients count only differences to neighbours within the same tree: ``first``/``last`` are
    the global indices of the block's first and last leaf.
    """
    lo, hi = penalty_subdifferential(w[j], lam, gamma, code)
    if lam_f > 0.0:
        if j > first:
            lo, hi = _add_fusion_subdifferential(lo, hi, w[j] - w[j - 1], lam_f)
        if j < last:
            lo, hi = _add_fusion_subdifferential(lo, hi, w[j] - w[j + 1], lam_f)
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
def update_leaf(j, w, values, leaf_rows, leaf_ptr, sample_weight, residual, leaf_weight, curvature, state, lam,
                gamma, code):
    """Exact minimisation over one leaf weight (no fusion); returns its curvature-scaled move."""
    if curvature[j] > 0.0:
        gradient = leaf_gradient(j, values, leaf_rows, leaf_ptr, sample_weight, residual, leaf_weight, state[0])
        new = penalty_prox(w[j] - gradient / curvature[j], curvature[j], lam, gamma, code)
    else:
        new = 0.0
    delta = new - w[j]
    if delta != 0.0:
        move_leaf(j, delta, w, values, leaf_rows, leaf_ptr, leaf_weight, residual, state)
    return max(curvature[j], 1e-300) * abs(delta)


@njit(cache=True)
def _block_proximal_steps(first, size, w, gradient, curvature, step_curvature, lam, gamma, code, lam_f, n_steps,
                          out):
    """Up to ``n_steps`` fused proximal-gradient steps on one block from ``w`` (step 1/L_t), each accepted
    only while the exact block objective decreases; the result goes to ``out``. Returns the block's
    stationarity measure: the largest move of the first step times L_t (0 exactly at a fixed point)."""
    for k in range(size):
        out[k] = w[first + k]
    if step_curvature <= 0.0:
        out[:] = 0.0
        return 0.0
    all_zero = True
    steepest = 0.0
    for k in range(size):
        all_zero = all_zero and out[k] == 0.0
        steepest = max(steepest, abs(gradient[k]))
    if all_zero and steepest <= lam and (code != MCP or step_curvature * gamma > 1.0):
        return 0.0  # zero is the block's prox point: the fused values stay within [-lam, lam] / L_t
    measure = 0.0
    current_value = _block_penalty(out, lam, gamma, code, lam_f)
    point = np.empty(size)
    theta = np.empty(size)
    for it in range(n_steps):
        for k in range(size):
            local_gradient = gradient[k] + curvature[first + k] * (out[k] - w[first + k])
            point[k] = out[k] - local_gradient / step_curvature
        fused_lasso_prox(point, lam_f / step_curvature, theta)
        largest_move = 0.0
        for k in range(size):
            theta[k] = penalty_prox(theta[k], step_curvature, lam, gamma, code)
            largest_move = max(largest_move, abs(theta[k] - out[k]))
        if it == 0:
            measure = step_curvature * largest_move
        value = _block_model(theta, w, first, gradient, curvature, lam, gamma, code, lam_f)
        if value > current_value or largest_move == 0.0:
            break
        out[:] = theta
        current_value = value
    return measure


@njit(cache=True)
def update_block(t, w, values, offsets, leaf_rows, leaf_ptr, sample_weight, residual, leaf_weight, curvature,
                 lipschitz, state, lam, gamma, code, lam_f, inner_iters):
    """Fused block update from the current residual; returns the block's stationarity measure."""
    first = offsets[t]
    size = offsets[t + 1] - first
    gradient = np.empty(size)
    for k in range(size):
        gradient[k] = leaf_gradient(first + k, values, leaf_rows, leaf_ptr, sample_weight, residual, leaf_weight,
                                    state[0])
    new = np.empty(size)
    measure = _block_proximal_steps(first, size, w, gradient, curvature, lipschitz[t], lam, gamma, code, lam_f,
                                    inner_iters, new)
    for k in range(size):
        delta = new[k] - w[first + k]
        if delta != 0.0:
            move_leaf(first + k, delta, w, values, leaf_rows, leaf_ptr, leaf_weight, residual, state)
    return measure


@njit(cache=True)
def block_measures(w, values, offsets, leaf_sums, leaf_weight, curvature, lipschitz, intercept, lam,
                   block_gamma, code, lam_f, out):
    """Every block's stationarity measure at the current point, from the full gradient: O(R)."""
    scratch = np.empty(values.shape[0])
    for t in range(offsets.shape[0] - 1):
        first = offsets[t]
        size = offsets[t + 1] - first
        gradient = np.empty(size)
        for k in range(size):
            j = first + k
            gradient[k] = -values[j] * (leaf_sums[j] - intercept * leaf_weight[j])
        out[t] = _block_proximal_steps(first, size, w, gradient, curvature, lipschitz[t], lam, block_gamma[t],
                                       code, lam_f, 1, scratch[first:first + size])


@njit(cache=True)
def objective_value(w, residual, sample_weight, intercept, offsets, lam, leaf_gamma, code, lam_f):
    loss = 0.0
    for i in range(residual.shape[0]):
        r = residual[i] - intercept
        loss += sample_weight[i] * r * r
    total = 0.5 * loss
    for j in range(w.shape[0]):
        if w[j] != 0.0:
            total += penalty_value(w[j], lam, leaf_gamma[j], code)
    return total + fusion_value(w, offsets, lam_f)


@njit(cache=True)
def _pass(units, visit, fused, w, values, offsets, leaf_rows, leaf_ptr, sample_weight, residual, leaf_weight,
          curvature, lipschitz, state, lam, leaf_gamma, block_gamma, code, lam_f, inner_iters, keep_above):
    """One pass of updates over the ``units`` (blocks when fused, else leaves) still marked in ``visit``;
    returns the largest measure. A unit whose measure is at most ``keep_above`` is unmarked: it sits out
    the rest of this working set's passes (the next full-gradient check looks at every unit again)."""
    worst = 0.0
    for k in range(units.shape[0]):
        if not visit[k]:
            continue
        u = units[k]
        if fused:
            measure = update_block(u, w, values, offsets, leaf_rows, leaf_ptr, sample_weight, residual,
                                   leaf_weight, curvature, lipschitz, state, lam, block_gamma[u], code, lam_f,
                                   inner_iters)
        else:
            measure = update_leaf(u, w, values, leaf_rows, leaf_ptr, sample_weight, residual, leaf_weight,
                                  curvature, state, lam, leaf_gamma[u], code)
        visit[k] = measure > keep_above
        worst = max(worst, measure)
    return worst


@njit(cache=True)
def _anderson_step(history, leaves, w, values, offsets, leaf_rows, leaf_ptr, sample_weight, residual,
                   leaf_weight, state, lam, leaf_gamma, code, lam_f):
    """Anderson extrapolation of the last iterates of the working set's leaves (as in skglm); kept only if
    the objective decreases, otherwise undone."""
    n_steps = history.shape[0] - 1
    diffs = history[1:] - history[:-1]
    gram = diffs @ diffs.T
    scale = np.trace(gram)
    if not scale > 0.0:
        return False
    gram += 1e-10 * scale * np.eye(n_steps)
    z = np.linalg.solve(gram, np.ones(n_steps))
    if not np.isfinite(z.sum()) or z.sum() == 0.0:
        return False
    extrapolated = (z / z.sum()) @ history[1:]
    before = objective_value(w, residual, sample_weight, state[0], offsets, lam, leaf_gamma, code, lam_f)
    for k in range(leaves.shape[0]):
        j = leaves[k]
        if extrapolated[k] != w[j]:
            move_leaf(j, extrapolated[k] - w[j], w, values, leaf_rows, leaf_ptr, leaf_weight, residual, state)
    after = objective_value(w, residual, sample_weight, state[0], offsets, lam, leaf_gamma, code, lam_f)
    if after < before:
        return True
    for k in range(leaves.shape[0]):
        j = leaves[k]
        if history[n_steps, k] != w[j]:
            move_leaf(j, history[n_steps, k] - w[j], w, values, leaf_rows, leaf_ptr, leaf_weight, residual,
                      state)
    return False


@njit(cache=True)
def leaf_measures(w, values, leaf_sums, leaf_weight, curvature, intercept, lam, leaf_gamma, code, moves, gains):
    """Per leaf, from the full gradient: the curvature-scaled move of its exact coordinate minimisation
    (its stationarity measure; unlike d it also sees MCP's nonconvex jumps away from a first-order
    stationary zero) and the objective decrease that minimisation would bring."""
    for j in range(w.shape[0]):
        c = curvature[j]
        if c <= 0.0:
            moves[j] = 0.0
            gains[j] = 0.0
            continue
        gradient = -values[j] * (leaf_sums[j] - intercept * leaf_weight[j])
        z = w[j] - gradient / c
        new = penalty_prox(z, c, lam, leaf_gamma[j], code)
        before = 0.5 * c * (w[j] - z) ** 2 + penalty_value(w[j], lam, leaf_gamma[j], code)
        after = 0.5 * c * (new - z) ** 2 + penalty_value(new, lam, leaf_gamma[j], code)
        moves[j] = c * abs(new - w[j])
        gains[j] = max(before - after, 0.0)


@njit(cache=True)
def _working_set(direction, measures, gains, w, offsets, fused, n_nonzero):
    """Units to update until the next direction computation: all nonzero ones plus the steepest violators.

    Blocks (fused) are ranked by ``||d_t||_2``, leaves by ``|d_j|``, either raised to its own stationarity
    measure where that is larger. Leaves are visited in order of the objective decrease their own exact
    minimisation would bring, largest first (with MCP the first leaves to enter shape which others follow).
    """
    n_trees = offsets.shape[0] - 1
    if fused:
        scores = np.zeros(n_trees)
        n_active = 0
        for t in range(n_trees):
            active = False
            for j in range(offsets[t], offsets[t + 1]):
                scores[t] += direction[j] * direction[j]
                active = active or w[j] != 0.0
            scores[t] = max(np.sqrt(scores[t]), measures[t])
            if active:
                scores[t] = np.inf
                n_active += 1
        size = max(10, 2 * n_active)
    else:
        scores = np.maximum(direction, measures)
        for j in range(w.shape[0]):
            if w[j] != 0.0:
                scores[j] = np.inf
        size = max(MIN_WORKING_SET, 2 * n_nonzero)
    order = np.argsort(-scores)
    size = min(size, order.shape[0])
    while size > 0 and scores[order[size - 1]] == 0.0:
        size -= 1
    chosen = order[:size]
    if fused:
        return np.sort(chosen)
    return chosen[np.argsort(-gains[chosen], kind="mergesort")]


@njit(cache=True)
def solve(w, intercept, residual, leaf_rows, leaf_ptr, values, offsets, sample_weight, leaf_weight, curvature,
          lipschitz, lam, block_gamma, leaf_gamma, code, lam_f, tol, max_iter, selection, inner_iters):
    """Run GBCD (or cyclic BCD) from the given state until stationary; returns (passes, converged).

    ``residual`` is ``y - M w`` and stays so; ``intercept[0]`` ends at its exact optimum. ``max_iter`` caps
    the passes of this solve: working-set passes, full-gradient checks and (cyclic) full sweeps.
    """
    n_trees = offsets.shape[0] - 1
    n_leaves = values.shape[0]
    fused = lam_f > 0.0
    leaf_sums = np.empty(n_leaves)
    direction = np.empty(n_leaves)
    gains = np.zeros(n_leaves)
    measures = np.empty(n_trees if fused else n_leaves)
    state = np.empty(3)
    state[2] = sample_weight.sum()
    state[1] = np.dot(sample_weight, residual)
    state[0] = state[1] / state[2]
    everything = np.arange(n_trees if fused else n_leaves)

    passes = 0
    converged = False
    while passes < max_iter:
        if selection == CYCLIC:
            worst = _pass(everything, np.ones(everything.shape[0], dtype=np.bool_), fused, w, values, offsets,
                          leaf_rows, leaf_ptr, sample_weight, residual, leaf_weight, curvature, lipschitz, state, lam,
                          leaf_gamma, block_gamma, code, lam_f, inner_iters, -1.0)
            passes += 1
            if worst <= tol:
                converged = True
                break
            continue

        compute_leaf_sums(leaf_rows, leaf_ptr, sample_weight, residual, leaf_sums)
        passes += 1
        direction_vector(w, values, offsets, leaf_sums, leaf_weight, state[0], lam, block_gamma, code, lam_f,
                         direction)
        if fused:
            block_measures(w, values, offsets, leaf_sums, leaf_weight, curvature, lipschitz, state[0], lam,
                           block_gamma, code, lam_f, measures)
        else:
            leaf_measures(w, values, leaf_sums, leaf_weight, curvature, state[0], lam, leaf_gamma, code,
                          measures, gains)
        largest = max(direction.max(), measures.max())
        if largest <= tol:
            converged = True
            break
        units = _working_set(direction, measures, gains, w, offsets, fused, np.count_nonzero(w))
        if fused:
            n_units_leaves = 0
            for t in units:
                n_units_leaves += offsets[t + 1] - offsets[t]
            unit_leaves = np.empty(n_units_leaves, dtype=np.int64)
            position = 0
            for t in units:
                for j in range(offsets[t], offsets[t + 1]):
                    unit_leaves[position] = j
                    position += 1
        else:
            unit_leaves = units
        inner_tol = max(tol, INNER_TOL_FRACTION * largest)
        history = np.empty((ANDERSON_MEMORY + 1, unit_leaves.shape[0]))
        history[0] = w[unit_leaves]
        n_history = 1
        visit = np.ones(units.shape[0], dtype=np.bool_)
        while passes < max_iter:
            worst = _pass(units, visit, fused, w, values, offsets, leaf_rows, leaf_ptr, sample_weight, residual,
                          leaf_weight, curvature, lipschitz, state, lam, leaf_gamma, block_gamma, code, lam_f,
                          inner_iters, SHRINK_FRACTION * inner_tol)
            passes += 1
            if worst <= inner_tol:
                break
            history[n_history] = w[unit_leaves]
            n_history += 1
            if n_history == ANDERSON_MEMORY + 1:
                _anderson_step(history, unit_leaves, w, values, offsets, leaf_rows, leaf_ptr, sample_weight,
                               residual, leaf_weight, state, lam, leaf_gamma, code, lam_f)
                history[0] = w[unit_leaves]
                n_history = 1
    intercept[0] = state[0]
    return passes, converged
