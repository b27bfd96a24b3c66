"""Proximal Newton (IRLS) around the squared-loss GBCD: the path step of the losses without a curvature bound.

A loss with a log link (Poisson, Gamma, Tweedie) or the Cox partial likelihood has no bound on its curvature in a
weight, so the quadratic steps of ``solver.losses.quadratic_steps`` would not be certain to lower it. Each Newton step
here replaces the loss at the current scores ``eta`` by its second-order model: with the loss's residual ``r`` and
curvature ``h`` per unit of row weight (``Loss.newton_terms``: ``dL / d eta_i = -s_i r_i``, ``d2L / d eta_i2 ~ s_i
h_i``), the weighted least-squares problem with row weights ``s_i h_i`` and working response ``eta_i + r_i / h_i``,
which the squared-loss kernels solve exactly (warm-started, same penalties, MCP's concavities kept at the loss's
problem's, fixed for the fit); the step to its solution is halved until the true objective falls. For Cox ``h`` is
the diagonal of the partial likelihood's Hessian (glmnet's approximation: the halving keeps every step a descent).

Two ways to end a path step:

- :func:`solve` (Poisson, under L1): Newton steps until one improves the objective by less than ``NEWTON_RTOL``
  relative, then GBCD on the loss itself (its exact leaf steps, ``solver.losses.poisson``) until certified
  stationary. Measured (``bench/results/poisson_solvers.md``: nmes1988_visits and doctor_visits, 250 trees of depth
  3, 30 steps): the direct GBCD alone spends most of its passes late in a path, where many leaves share rows and each
  exact leaf move costs an ``exp`` per row; the squared-loss inner solves need none. Under MCP the inner problem's
  thresholds use the local curvature, not the fit's fixed one, and move leaves into other local minima (up to 1.7%
  above proximal gradient from the same point), so Poisson's MCP paths run the direct GBCD (``Poisson.step_solve``).
- :func:`solve_certified` (Gamma, Tweedie, Cox: no leaf steps of their own): Newton steps until GBCD's stationarity
  measures, computed from the loss's true gradient (``solver.gbcd.stationarity``), are all within the tolerance: the
  same certificate as every other loss's steps. Under MCP this is a stationary point, not necessarily the one GBCD
  would reach (tests compare it with proximal gradient started from the same point).
"""

from functools import partial

import numpy as np
from numba import njit

from .._tree_kernels import column_sums
from ..penalties import L1, penalty_total
from . import squared
from .base import Loss, column_entry, unchecked

MAX_NEWTON_STEPS = 100
NEWTON_RTOL = 1e-9
MAX_HALVINGS = 20
ROUND_RTOL = 1e-13  # a Newton step that lowers the objective by less than this (relative) changed nothing
INNER_TOL_FLOOR = 1e-3  # the tightest inner tolerance, relative to the step's
FORCING = 0.1  # an inexact Newton step's inner solve runs to this fraction of the stationarity measure at its start
# a Newton step that lowered nothing is tried again with its curvature this many times larger, up to MAX_DAMPING (a
# step of about a millionth of the Newton step's length); measured on whas500's MCP path without fusion: doubling
# certified every step in 7.6 s, quadrupling in 14 s, ten times left steps uncertified in 22 s
DAMPING = 2.0
MAX_DAMPING = 2.0**20


def solve(problem, state, lam, lam_f, tol, max_iter, inner_iters, *, loss, inner_solve, objective):
    """Newton steps from ``state`` (updated in place), then ``inner_solve`` (a GBCD solve) on the loss's problem until
    stationary; ``objective`` is GBCD's objective value (passed in, as the solve: GBCD's kernels import the losses').
    Returns (passes, converged), as the GBCD solvers."""
    passes = newton_steps(
        problem, state, lam, lam_f, tol, max_iter, inner_iters, loss=loss, inner_solve=inner_solve, objective=objective
    )
    n_passes, converged = inner_solve(problem, state, lam, lam_f, tol, max(max_iter - passes, 1), inner_iters)
    return passes + n_passes, converged


def solve_certified(problem, state, lam, lam_f, tol, max_iter, inner_iters, *, loss, inner_solve, stationarity):
    """Inexact Newton from ``state`` until ``stationarity`` (``solver.gbcd.stationarity``: the largest first-order
    measure from the loss's true gradient, one full gradient) is within ``tol``: each step's inner solve runs to
    ``FORCING`` times the measure at its start (a step far from the solution needs no exact model solution: Eisenstat
    and Walker's forcing term), not below ``INNER_TOL_FLOOR * tol``. A step that lowers the objective by no more than
    its rounding tightens the forcing first. Under L1 (convex: a Newton step with halving lowers the objective wherever
    the point is not stationary) a step that still lowers nothing means the point is as good as the loss's precision
    allows: the solve ends, not converged. Under MCP the model's minimiser, whose thresholds read the local
    curvature, need not lower the true objective: the next steps are damped (their curvature multiplied by
    ``DAMPING`` each time, up to ``MAX_DAMPING``), tending to the proximal gradient step, which lowers it wherever the
    point is not stationary. Returns (passes, converged); the objective is the loss's own (:func:`loss_objective`)."""
    objective = loss_objective(loss)
    current = objective(problem, state, lam, lam_f)
    measure, passes, forcing, damping = stationarity(problem, state, lam, lam_f), 1, FORCING, 1.0
    while measure > tol and passes < max_iter:
        inner_tol = max(forcing * measure, INNER_TOL_FLOOR * tol)
        n_passes, value = newton_step(
            problem, state, lam, lam_f, inner_tol, max_iter - passes, inner_iters,
            loss=loss, inner_solve=inner_solve, objective=objective, current=current, damping=damping,
        )  # fmt: skip
        passes += n_passes + 1  # + the check below
        if current - value <= ROUND_RTOL * abs(current):
            if inner_tol > INNER_TOL_FLOOR * tol:
                forcing *= 0.1
            elif problem.penalty != L1 and damping < MAX_DAMPING:
                damping *= DAMPING
            else:
                break
        else:
            damping = max(1.0, damping / DAMPING)
        current = value
        measure = stationarity(problem, state, lam, lam_f)
    return passes, bool(measure <= tol)


def loss_objective(loss):
    """The FIRE objective of a loss whose value the kernels do not compute: ``objective(problem, state, lam,
    lam_f)``, the loss's total at the state's scores plus the penalties."""

    def objective(problem, state, lam, lam_f):
        return loss.loss_total(problem.y, state.score, problem.sample_weight) + penalty_total(
            problem, state.w, lam, lam_f
        )

    return objective


def newton_steps(problem, state, lam, lam_f, tol, max_iter, inner_iters, *, loss, inner_solve, objective):
    """Proximal Newton steps (module docstring), ``state`` updated in place, until a step improves the objective by
    less than ``NEWTON_RTOL`` relative; returns the passes of the inner solves."""
    passes = 0
    current = objective(problem, state, lam, lam_f)
    for _ in range(MAX_NEWTON_STEPS):
        if passes >= max_iter:
            break
        n_passes, value = newton_step(
            problem, state, lam, lam_f, tol, max_iter - passes, inner_iters,
            loss=loss, inner_solve=inner_solve, objective=objective, current=current,
        )  # fmt: skip
        passes += n_passes
        improved, current = current - value, value
        if improved <= NEWTON_RTOL * abs(current):
            break
    return passes


def newton_step(
    problem, state, lam, lam_f, tol, max_iter, inner_iters, *, loss, inner_solve, objective, current, damping=1.0
):
    """One proximal Newton step from ``state`` (objective ``current`` there): the squared-loss model (its curvature
    times ``damping``) solved to ``tol`` by ``inner_solve``, the step to its solution halved until the objective falls
    (or taken back); returns (the passes of the inner solve, the objective after the step)."""
    eta = state.score
    residual, curvature = loss.newton_terms(problem.y, eta, problem.sample_weight)
    curvature = damping * curvature
    curved = curvature > 0.0
    target = eta + np.divide(residual, curvature, out=np.zeros_like(eta), where=curved)
    model = weighted_least_squares(problem, target, problem.sample_weight * np.where(curved, curvature, 0.0))
    inner_residual = target - (eta - state.intercept[0])
    inner = type(state)(state.w.copy(), inner_residual, np.zeros(1), np.zeros(1), np.zeros(0), *unchecked(state.w))
    n_passes, _ = inner_solve(model, inner, lam, lam_f, tol, max_iter, inner_iters)
    old_w, old_b = state.w.copy(), state.intercept[0]
    step_w = inner.w - old_w
    step_b = inner.intercept[0] - old_b if loss.has_intercept else 0.0
    for _ in range(MAX_HALVINGS):
        move_to(problem, state, old_w + step_w, old_b + step_b, loss)
        value = objective(problem, state, lam, lam_f)
        if value <= current:
            return n_passes, value
        step_w, step_b = 0.5 * step_w, 0.5 * step_b
    move_to(problem, state, old_w, old_b, loss)
    return n_passes, current


def weighted_least_squares(problem, target, weights):
    """The squared-loss problem of ``target`` under row weights ``weights`` on the same columns and penalties."""
    leaf_weight, second_moment = _column_moments(problem, weights)
    curvature = second_moment * problem.values**2
    return problem._replace(
        y=target,
        sample_weight=weights,
        weight_total=float(weights.sum()),
        leaf_weight=leaf_weight,
        curvature=curvature,
        lipschitz=np.maximum.reduceat(curvature, problem.offsets[:-1]),
        loss=squared.CODE,
    )


def move_to(problem, state, w, intercept, loss):
    """The state at weights ``w`` and intercept ``intercept``: scores, the loss's residuals and their sum, O(n + rows
    of the nonzero columns). The scores are recomputed, not moved: the gradient the state kept at its last check is
    forgotten even where ``w`` is the same (``solver.problem.at_last_check``)."""
    state.checked[:] = np.nan
    state.w[:] = w
    state.intercept[0] = intercept
    _scores(problem, w, intercept, state.score)
    state.residual[:] = loss.newton_terms(problem.y, state.score, problem.sample_weight)[0]
    state.residual_sum[0] = problem.sample_weight @ state.residual


def _column_moments(problem, weights):
    """Per column j, ``sum_i weights_i e_ij`` and ``sum_i weights_i e_ij^2`` over its rows: the rule columns' (e = 1)
    row by row in parallel (``solver._tree_kernels.column_sums``, as GBCD's full gradient), the linear terms' by
    position."""
    first = np.zeros(problem.values.shape[0])
    column_sums(problem.leaves, problem.offsets, weights, first[: problem.first_linear])
    second = first.copy()
    _linear_moments(problem, weights, first, second)
    return first, second


@njit(cache=True)
def _linear_moments(problem, weights, first, second):
    """The linear terms' part of :func:`_column_moments` (each holds every row, its entries in ``linear_values``)."""
    for j in range(problem.first_linear, problem.values.shape[0]):
        first[j], second[j] = 0.0, 0.0
        for p in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
            entry = problem.linear_values[p - problem.linear_start]
            weight = weights[problem.leaf_rows[p]]
            first[j] += weight * entry
            second[j] += weight * entry * entry


@njit(cache=True)
def _scores(problem, w, intercept, out):
    """``intercept + M w`` into ``out``: O(n + rows of the nonzero columns)."""
    out[:] = intercept
    for j in range(w.shape[0]):
        if w[j] != 0.0:
            for p in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
                out[problem.leaf_rows[p]] += column_entry(problem, j, p) * w[j]


class NewtonLoss(Loss):
    """A loss whose path steps are all proximal Newton steps certified by GBCD's measures (:func:`solve_certified`):
    it provides ``newton_terms``, ``loss_total`` and ``initial_intercept``, and no kernels of its own."""

    def initial_state(self, problem):
        """w = 0, b = :meth:`initial_intercept`, the loss's residuals there."""
        y, weights = problem.y, problem.sample_weight
        intercept = self.initial_intercept(y, weights) if self.has_intercept else 0.0
        score = np.full(y.shape[0], intercept)
        residual = self.newton_terms(y, score, weights)[0]
        w = np.zeros(problem.values.shape[0])
        return w, residual, np.array([intercept]), np.array([np.dot(weights, residual)]), score

    def curvature_scale(self, y, sample_weight):
        """The weighted mean curvature of the intercept-only model (it scales MCP and the measures only)."""
        intercept = self.initial_intercept(y, sample_weight) if self.has_intercept else 0.0
        curvature = self.newton_terms(y, np.full(y.shape[0], intercept), sample_weight)[1]
        return float(np.dot(sample_weight, curvature) / sample_weight.sum())

    def step_solve(self, penalty, solve, kernels):
        return partial(solve_certified, loss=self, inner_solve=solve, stationarity=kernels.stationarity)

    def path_objective(self, kernels):
        return loss_objective(self)
