"""The Poisson loss's path step under L1 (``solver.losses.poisson``): proximal Newton (IRLS) around the squared-loss
GBCD, then GBCD on the Poisson objective itself until certified stationary.

Each Newton step replaces the Poisson loss at the current scores ``eta`` by its second-order model, the weighted
least-squares problem with row weights ``s_i mu_i`` (``mu = exp(eta)``) and working response
``eta_i + (y_i - mu_i) / mu_i``, which the squared-loss kernels solve exactly (warm-started, same penalties, MCP's
concavities kept at the Poisson problem's, fixed for the fit); the step to its solution is halved until the true
objective falls. Newton steps stop once one improves the objective by less than ``NEWTON_RTOL`` relative. Then
``solver.gbcd`` runs on the Poisson problem from that point (leaf updates that minimise the exact Poisson loss of
the leaf's rows, ``solver.losses.poisson``) until no measure exceeds the tolerance: the step is certified stationary on
the Poisson objective, as every other loss's.

Why, and why L1 only, measured (``bench/results/poisson_solvers.md``: nmes1988_visits and doctor_visits, 250
trees of depth 3, 30 steps): the direct GBCD alone spends most of its passes late in a path, where many leaves
share rows and each exact leaf move costs an ``exp`` per row; the squared-loss inner solves need none and converge
in few passes. Under L1 (convex: one optimum) IRLS then certification reaches the direct solver's objectives
about 5x faster. Under MCP the inner problem's thresholds use the local curvature ``mu``, not the fit's fixed one,
and move leaves into other local minima: up to 1.7% above the direct solver's objective on a path step, and 1.7%
above proximal gradient started from the same point in ``tests/solver/test_poisson.py``, where the direct solver
stays within 1%; so MCP paths run the direct GBCD (``Poisson.step_solve``).
"""

import numpy as np

from . import squared
from .base import unchecked

MAX_NEWTON_STEPS = 100
NEWTON_RTOL = 1e-9
MAX_HALVINGS = 20


def solve(problem, state, lam, lam_f, tol, max_iter, inner_iters, *, inner_solve, objective):
    """Newton steps from ``state`` (a Poisson State, updated in place), then ``inner_solve`` (a GBCD solve) on the
    Poisson problem until stationary; ``objective`` is GBCD's objective value (both are passed in: GBCD's kernels
    import this loss's). Returns (passes, converged), as the GBCD solvers."""
    passes = newton_steps(
        problem, state, lam, lam_f, tol, max_iter, inner_iters, inner_solve=inner_solve, objective=objective
    )
    n_passes, converged = inner_solve(problem, state, lam, lam_f, tol, max(max_iter - passes, 1), inner_iters)
    return passes + n_passes, converged


def newton_steps(problem, state, lam, lam_f, tol, max_iter, inner_iters, *, inner_solve, objective):
    """The proximal Newton steps alone (module docstring), ``state`` updated in place; returns the passes of the
    inner solves."""
    passes = 0
    current = objective(problem, state, lam, lam_f)
    for _ in range(MAX_NEWTON_STEPS):
        if passes >= max_iter:
            break
        eta = state.score
        mu = np.exp(eta)
        weights = problem.sample_weight * mu
        target = eta + (problem.y - mu) / mu
        model = weighted_least_squares(problem, target, weights)
        residual = target - (eta - state.intercept[0])
        inner = type(state)(state.w.copy(), residual, np.zeros(1), np.zeros(1), np.zeros(0), *unchecked(state.w))
        n_passes, _ = inner_solve(model, inner, lam, lam_f, tol, max_iter - passes, inner_iters)
        passes += n_passes
        old_w, old_b = state.w.copy(), state.intercept[0]
        step_w, step_b = inner.w - old_w, inner.intercept[0] - old_b
        value = np.inf
        for _ in range(MAX_HALVINGS):
            move_to(problem, state, old_w + step_w, old_b + step_b)
            value = objective(problem, state, lam, lam_f)
            if value <= current:
                break
            step_w, step_b = 0.5 * step_w, 0.5 * step_b
        if value > current:
            move_to(problem, state, old_w, old_b)
            break
        improved, current = current - value, value
        if improved <= NEWTON_RTOL * abs(current):
            break
    return passes


def weighted_least_squares(problem, target, weights):
    """The squared-loss problem of ``target`` under row weights ``weights`` on the same columns and penalties."""
    n_leaves = problem.values.shape[0]
    column_of_position = np.repeat(np.arange(n_leaves), np.diff(problem.leaf_ptr))
    entries = _entries(problem)
    row_weight = weights[problem.leaf_rows] * entries
    leaf_weight = np.bincount(column_of_position, weights=row_weight, minlength=n_leaves)
    curvature = np.bincount(column_of_position, weights=row_weight * entries, minlength=n_leaves) * problem.values**2
    return problem._replace(
        y=target,
        sample_weight=weights,
        weight_total=float(weights.sum()),
        leaf_weight=leaf_weight,
        curvature=curvature,
        lipschitz=np.maximum.reduceat(curvature, problem.offsets[:-1]),
        loss=squared.CODE,
    )


def move_to(problem, state, w, intercept):
    """The Poisson state at weights ``w`` and intercept ``intercept``: scores, residuals and their sum, O(n + rows
    of the nonzero columns). The scores are recomputed, not moved: the gradient the state kept at its last check is
    forgotten even where ``w`` is the same (``solver.problem.at_last_check``)."""
    state.checked[:] = np.nan
    state.w[:] = w
    state.intercept[0] = intercept
    state.score[:] = intercept
    for j in np.flatnonzero(w):
        start, stop = problem.leaf_ptr[j], problem.leaf_ptr[j + 1]
        change = problem.values[j] * w[j]
        if j >= problem.first_linear:  # a linear term's rows move by its value: e_ij (solver.problem)
            change = change * problem.linear_values[start - problem.linear_start : stop - problem.linear_start]
        state.score[problem.leaf_rows[start:stop]] += change
    state.residual[:] = problem.y - np.exp(state.score)
    state.residual_sum[0] = problem.sample_weight @ state.residual


def _entries(problem):
    """``e_ij`` at every position (``solver.problem``): 1 for a rule's rows, the linear terms' values after."""
    entries = np.ones(problem.leaf_rows.shape[0])
    entries[problem.linear_start :] = problem.linear_values
    return entries
