"""The steps of a loss with a curvature bound (squared, logistic, and every loss's stationarity measures): each
minimises, with the penalties, the quadratic ``g_j (u - w_j) + c_j / 2 (u - w_j)^2`` of the column's loss gradient
``g_j`` and curvature ``c_j`` (``solver.problem.Problem.curvature``), exact for the squared loss and above the
logistic loss, so every accepted step lowers the true objective either way.

A leaf's step is the penalty's prox (exact, global, also in MCP's nonconvex regime). A block's, with fusion, is up to
``n_steps`` proximal-gradient steps with the isotropic step ``1 / L_t`` (``L_t = max_j c_j``), each the fused-lasso
prox followed by the sparsity threshold (suppl. C.3/C.4), accepted only while the block's quadratic model decreases
(a diagonal quadratic, so the check costs O(R_t)).
"""

import numpy as np
from numba import njit

from ..penalties import block_penalty_change, fusion_prox, penalty_prox, penalty_value, pinned_weights, prox_is_convex


@njit(cache=True, inline="always")
def leaf_minimum(problem, j, w, gradient, lam):
    """Column j's minimiser of its quadratic model from weight ``w`` and loss gradient ``gradient`` there
    (``c_j > 0``)."""
    c = problem.curvature[j]
    z = w - gradient / c
    return penalty_prox(z, c, lam, problem.leaf_gamma[j], problem.penalty)


@njit(cache=True, inline="always")
def leaf_decrease(problem, j, w, gradient, lam, new):
    """How much column j's quadratic model plus penalty falls from weight ``w`` to ``new``."""
    c = problem.curvature[j]
    gamma = problem.leaf_gamma[j]
    z = w - gradient / c
    before = 0.5 * c * (w - z) ** 2 + penalty_value(w, lam, gamma, problem.penalty)
    return before - (0.5 * c * (new - z) ** 2 + penalty_value(new, lam, gamma, problem.penalty))


@njit(cache=True)
def _block_model(theta, w, gradient, curvature, lam, gamma, penalty, lam_f):
    """Block objective at ``theta`` minus the block objective at its weights ``w`` (``gradient`` and ``curvature``
    the block's): exact, the block loss is a diagonal quadratic. Summed as changes (``block_penalty_change``), its
    rounding scales with ``theta - w``, not with the penalties: a step's decrease, about ``L_t/2 |theta - w|^2``,
    stays visible down to moves the arithmetic allows."""
    total = block_penalty_change(w, theta, lam, gamma, penalty, lam_f)
    for k in range(theta.shape[0]):
        step = theta[k] - w[k]
        total += gradient[k] * step + 0.5 * curvature[k] * step * step
    return total


@njit(cache=True)
def block_steps(problem, t, w, gradient, lam, lam_f, n_steps, out):
    """Up to ``n_steps`` fused proximal-gradient steps on block t from ``w`` (step 1/L_t, ``gradient`` the
    block's loss gradient at ``w``), each accepted only while the exact block objective decreases; the result
    goes to ``out``. Returns the block's stationarity measure: the largest move of the first step times L_t
    (0 exactly at a fixed point). A leaf whose column is zero stays at zero: the fusion prox holds it there
    (``solver.penalties.fusion_prox``), so the step is the prox of the block's own penalty and the measure
    vanishes at its fixed points."""
    first = problem.offsets[t]
    size = out.shape[0]
    start = w[first : first + size]
    curvature = problem.curvature[first : first + size]
    step_curvature = problem.lipschitz[t]
    gamma = problem.block_gamma[t]
    penalty = problem.penalty
    for k in range(size):
        out[k] = start[k]
    if step_curvature <= 0.0:
        out[:] = 0.0
        return 0.0
    all_zero = True
    steepest = 0.0
    for k in range(size):
        all_zero = all_zero and out[k] == 0.0
        steepest = max(steepest, abs(gradient[k]))
    if all_zero and steepest <= lam and prox_is_convex(step_curvature, gamma, penalty):
        return 0.0  # zero is the block's prox point: the fused values stay within [-lam, lam] / L_t
    measure = 0.0
    current_value = 0.0  # the model at out = start
    point = np.empty(size)
    theta = np.empty(size)
    pins = pinned_weights(curvature > 0.0)
    for it in range(n_steps):
        for k in range(size):
            local_gradient = gradient[k] + curvature[k] * (out[k] - start[k])
            point[k] = out[k] - local_gradient / step_curvature
        fusion_prox(point, pins, lam_f / step_curvature, theta)
        largest_move = 0.0
        for k in range(size):
            # a leaf whose column is zero (no training rows, or below min_support) stays at zero
            theta[k] = penalty_prox(theta[k], step_curvature, lam, gamma, penalty) if curvature[k] > 0.0 else 0.0
            largest_move = max(largest_move, abs(theta[k] - out[k]))
        if it == 0:
            measure = step_curvature * largest_move
        value = _block_model(theta, start, gradient, curvature, lam, gamma, penalty, lam_f)
        if value > current_value or largest_move == 0.0:
            break
        out[:] = theta
        current_value = value
    return measure
