"""The Poisson loss, counts or rates (log link): ``sum_i s_i [exp(eta_i) - y_i eta_i]``, ``eta = b + M w``,
``y_i >= 0``.

State (``solver.problem.State``): ``score`` = eta, ``residual = y - mu`` with ``mu = exp(eta)``, and
``residual_sum`` = ``-d loss / d b``, so a leaf's gradient is ``-v_j sum_{i in leaf j} s_i residual_i`` as for the
logistic loss.

The loss has no curvature bound (``mu`` is unbounded), so it takes no quadratic step. It does not need one: along
one leaf's weight every row of the leaf moves its score by the same ``v_j delta``, so the loss of the leaf's rows is
exactly ``a_j exp(v_j delta) - b_j v_j delta`` up to a constant, with ``a_j = sum s_i mu_i`` (from the leaf's
residual sum, which its gradient computes anyway) and ``b_j = sum s_i y_i`` (fixed: ``Problem.leaf_target``). A
leaf's update is the exact minimiser of that plus its penalty (:func:`leaf_minimum`: closed form under L1), and a
fused tree's block loss is the exact, separable sum of those functions, minimised by proximal gradient steps with
backtracking that touch no row (:func:`block_steps`). A linear term's rows do not move together as a rule's do: its
update is proximal Newton steps on its exact loss (:func:`linear_step`). The curvature scale is a reference, not a
bound: the curvature at the intercept-only model, the weighted mean of ``y``, which fixes the block MCP concavity
``gamma / L_t`` and the scale of the stationarity measures for the whole fit.

Intercept: the exact step ``log(sum s y / sum s mu)`` (:func:`fit_intercept`). Path strategy: under L1, Newton
steps around the squared-loss solver before GBCD certifies each step (``solver.losses.newton``).
"""

from functools import partial

import numpy as np
from numba import njit
from scipy.special import xlogy

from ..penalties import (
    L1,
    block_penalty,
    block_penalty_change,
    fusion_prox,
    penalty_prox,
    penalty_value,
    pinned_weights,
)
from . import newton
from .base import LOG_LINK_FIELDS, MAX_AMOUNT, LogLinkMean, column_entry

CODE = 2
INTERCEPT_STEPS = 50
# golden-section iterations of a leaf's MCP minimisation on each side of zero (interval shrinks 0.618^k)
GOLDEN_STEPS = 60
GOLDEN_RESOLUTION = 1e-9  # a golden-section minimum within this fraction of gamma lam of zero is zero
# proximal-gradient steps of a fused block update: they touch no row, so many are cheap
BLOCK_STEPS = 100
LINEAR_STEPS = 20  # proximal Newton steps of a linear term's update


@njit(cache=True, inline="always")
def move_leaf(problem, state, j, delta):
    """The scores, residuals and residual sum of leaf j's rows after ``w_j += delta``: O(S_j)."""
    moved = 0.0
    for p in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
        i = problem.leaf_rows[p]
        state.score[i] += column_entry(problem, j, p) * delta
        residual = problem.y[i] - np.exp(state.score[i])
        moved += problem.sample_weight[i] * (residual - state.residual[i])
        state.residual[i] = residual
    state.residual_sum[0] += moved


@njit(cache=True)
def loss_value(problem, state):
    """The Poisson loss at the state's scores: O(n)."""
    total = 0.0
    for i in range(state.score.shape[0]):
        total += problem.sample_weight[i] * (np.exp(state.score[i]) - problem.y[i] * state.score[i])
    return total


@njit(cache=True)
def shift_intercept(problem, state, step):
    """``b += step``, the scores, residuals and residual sum recomputed: O(n)."""
    state.intercept[0] += step
    total = 0.0
    for i in range(state.score.shape[0]):
        state.score[i] += step
        state.residual[i] = problem.y[i] - np.exp(state.score[i])
        total += problem.sample_weight[i] * state.residual[i]
    state.residual_sum[0] = total


@njit(cache=True)
def fit_intercept(problem, state, tol):
    """The exact step ``log(sum s y / sum s mu)`` on b, repeated while rounding leaves ``|d loss / d b|`` above
    ``tol``: O(n) each."""
    if abs(state.residual_sum[0]) <= tol:
        return
    target = problem.target_total  # sum_i s_i y_i > 0 (checked by the caller)
    for _ in range(INTERCEPT_STEPS):
        if abs(state.residual_sum[0]) <= tol:
            return
        shift_intercept(problem, state, np.log(target / (target - state.residual_sum[0])))


@njit(cache=True)
def leaf_value(u, w, v, a, b, lam, gamma, penalty):
    """Leaf j's objective at weight ``u``, up to a constant: ``a exp(v (u - w)) - b v u + P(u)`` with ``w`` its
    weight now, ``a = sum s_i mu_i`` and ``b = sum s_i y_i`` over its rows (module docstring)."""
    return a * np.exp(v * (u - w)) - b * v * u + penalty_value(u, lam, gamma, penalty)


@njit(cache=True)
def _golden_minimum(lo, hi, w, v, a, b, lam, gamma, penalty):
    """A local minimiser of :func:`leaf_value` on ``[lo, hi]`` by golden-section search."""
    ratio = 0.5 * (np.sqrt(5.0) - 1.0)
    left, right = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    f_left = leaf_value(left, w, v, a, b, lam, gamma, penalty)
    f_right = leaf_value(right, w, v, a, b, lam, gamma, penalty)
    for _ in range(GOLDEN_STEPS):
        if f_left <= f_right:
            hi, right, f_right = right, left, f_left
            left = hi - ratio * (hi - lo)
            f_left = leaf_value(left, w, v, a, b, lam, gamma, penalty)
        else:
            lo, left, f_left = left, right, f_right
            right = lo + ratio * (hi - lo)
            f_right = leaf_value(right, w, v, a, b, lam, gamma, penalty)
    return left if f_left <= f_right else right


@njit(cache=True)
def exact_leaf_minimum(w, v, a, b, lam, gamma, penalty):
    """The weight minimising :func:`leaf_value` (leaf j's exact coordinate minimisation).

    L1, closed form: where ``u != 0`` with sign s, ``exp(v (u - w)) = (b - lam s / v) / a``; no consistent
    solution means 0. MCP: the best of 0, the loss's own minimiser clipped to the unpenalised region
    ``|u| >= gamma lam`` on either side, and a golden-section minimum inside ``(0, gamma lam)`` on either side
    (ties go to 0). A leaf whose rows count nothing (``b = 0``) has no minimiser in the unpenalised region (its
    weight would run to minus infinity): it stays within the region's boundary.
    """
    if v == 0.0 or a <= 0.0:
        return 0.0
    if penalty == L1:
        for sign in (1.0, -1.0):
            ratio = (b - lam * sign / v) / a
            if ratio > 0.0:
                u = w + np.log(ratio) / v
                if u * sign > 0.0:
                    return u
        return 0.0
    edge = gamma * lam
    best, best_value = 0.0, leaf_value(0.0, w, v, a, b, lam, gamma, penalty)
    free = w + np.log(b / a) / v if b > 0.0 else -np.inf * np.sign(v)
    for candidate in (
        max(free, edge),
        min(free, -edge),
        _golden_minimum(0.0, edge, w, v, a, b, lam, gamma, penalty),
        _golden_minimum(-edge, 0.0, w, v, a, b, lam, gamma, penalty),
    ):
        if abs(candidate) <= GOLDEN_RESOLUTION * edge:
            continue  # golden section's approach to an end at 0: zero itself (a rounding-sized weight is no rule)
        value = leaf_value(candidate, w, v, a, b, lam, gamma, penalty)
        if value < best_value:
            best, best_value = candidate, value
    return best


@njit(cache=True, inline="always")
def leaf_minimum(problem, j, w, gradient, lam):
    """Rule column j's exact minimiser from weight ``w`` and loss gradient ``gradient`` there."""
    v, b = problem.values[j], problem.leaf_target[j]
    a = b + gradient / v
    return exact_leaf_minimum(w, v, a, b, lam, problem.leaf_gamma[j], problem.penalty)


@njit(cache=True, inline="always")
def leaf_decrease(problem, j, w, gradient, lam, new):
    """How much rule column j's exact objective falls from weight ``w`` to ``new``."""
    v, b = problem.values[j], problem.leaf_target[j]
    a = b + gradient / v
    gamma = problem.leaf_gamma[j]
    before = leaf_value(w, w, v, a, b, lam, gamma, problem.penalty)
    return before - leaf_value(new, w, v, a, b, lam, gamma, problem.penalty)


@njit(cache=True)
def _block_value(theta, start, values, a, b, usable, lam, gamma, penalty, lam_f):
    """A tree's exact objective at ``theta`` up to a constant (per leaf ``a exp(v (theta - start)) - b v theta``)
    plus its penalties."""
    total = block_penalty(theta, lam, gamma, penalty, lam_f)
    for k in range(theta.shape[0]):
        if usable[k]:
            total += a[k] * np.exp(values[k] * (theta[k] - start[k])) - b[k] * values[k] * theta[k]
    return total


@njit(cache=True)
def _block_change(theta, base, start, values, a, b, usable, lam, gamma, penalty, lam_f):
    """``_block_value(theta) - _block_value(base)`` summed as changes (``expm1`` of each leaf's move, the penalties'
    ``block_penalty_change``): its rounding is that of ``theta - base``, not of the block's objective, so a step's
    decrease stays visible near the tolerance, where the difference of the two values is rounding."""
    total = block_penalty_change(base, theta, lam, gamma, penalty, lam_f)
    for k in range(theta.shape[0]):
        if usable[k]:
            move = theta[k] - base[k]
            total += a[k] * np.exp(values[k] * (base[k] - start[k])) * np.expm1(values[k] * move)
            total -= b[k] * values[k] * move
    return total


@njit(cache=True)
def block_steps(problem, t, w, gradient, lam, lam_f, out):
    """Fused block update: proximal-gradient steps with backtracking on the tree's exact objective, which costs
    O(R_t) and touches no row; result to ``out``, returns the measure (first step's move times its step's
    curvature)."""
    first = problem.offsets[t]
    size = out.shape[0]
    start = w[first : first + size]
    values = problem.values[first : first + size]
    b = problem.leaf_target[first : first + size]
    usable = problem.curvature[first : first + size] > 0.0
    gamma = problem.block_gamma[t]
    penalty = problem.penalty
    a = np.zeros(size)
    step_curvature = 0.0
    for k in range(size):
        out[k] = start[k] if usable[k] else 0.0
        if usable[k]:
            a[k] = b[k] + gradient[k] / values[k]  # sum s mu over the leaf's rows
            step_curvature = max(step_curvature, values[k] * values[k] * a[k])
    if step_curvature <= 0.0:
        return 0.0
    current = _block_value(out, start, values, a, b, usable, lam, gamma, penalty, lam_f)
    pins = pinned_weights(usable)
    local_gradient = np.empty(size)
    point = np.empty(size)
    theta = np.empty(size)
    measure = 0.0
    for it in range(BLOCK_STEPS):
        for k in range(size):
            mean = a[k] * np.exp(values[k] * (out[k] - start[k])) if usable[k] else 0.0
            local_gradient[k] = values[k] * (mean - b[k]) if usable[k] else 0.0
        while True:  # backtracking: the quadratic model at step 1 / step_curvature must lie above the objective
            for k in range(size):
                point[k] = out[k] - local_gradient[k] / step_curvature
            fusion_prox(point, pins, lam_f / step_curvature, theta)
            largest_move = 0.0
            model = current
            for k in range(size):
                theta[k] = penalty_prox(theta[k], step_curvature, lam, gamma, penalty) if usable[k] else 0.0
                cap = MAX_AMOUNT / abs(values[k]) if usable[k] else 0.0
                theta[k] = min(max(theta[k], -cap), cap)  # a leaf whose rows count nothing would run off
                move = theta[k] - out[k]
                largest_move = max(largest_move, abs(move))
                model += local_gradient[k] * move + 0.5 * step_curvature * move * move
            model += block_penalty(theta, lam, gamma, penalty, lam_f) - block_penalty(out, lam, gamma, penalty, lam_f)
            value = _block_value(theta, start, values, a, b, usable, lam, gamma, penalty, lam_f)
            if value <= model + 1e-12 * abs(current) or largest_move == 0.0:
                break
            step_curvature *= 2.0
        if it == 0:
            measure = step_curvature * largest_move
        # kept on its change from ``out``: the difference of the two values loses a step's decrease near the
        # tolerance in their rounding (the step refused, the block's measure stuck above tol to the pass cap)
        if (
            largest_move == 0.0
            or _block_change(theta, out, start, values, a, b, usable, lam, gamma, penalty, lam_f) >= 0.0
        ):
            break
        out[:] = theta
        current = value
    return measure


@njit(cache=True)
def _linear_value(problem, state, j, delta, lam, gamma):
    """Column j's rows' loss and its penalty were ``w_j`` moved by ``delta``, up to a constant: O(n)."""
    total = penalty_value(state.w[j] + delta, lam, gamma, problem.penalty)
    for p in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
        i = problem.leaf_rows[p]
        x = column_entry(problem, j, p)
        total += problem.sample_weight[i] * (np.exp(state.score[i] + x * delta) - problem.y[i] * x * delta)
    return total


@njit(cache=True)
def linear_step(problem, state, j, lam):
    """The move of a linear term's weight by proximal Newton steps on its exact objective, each halved until that
    objective falls: O(n) per evaluation."""
    gamma = problem.leaf_gamma[j]
    delta = 0.0
    current = _linear_value(problem, state, j, 0.0, lam, gamma)
    for _ in range(LINEAR_STEPS):
        gradient = 0.0
        hessian = 0.0
        for p in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
            i = problem.leaf_rows[p]
            x = column_entry(problem, j, p)
            mean = np.exp(state.score[i] + x * delta)
            gradient += problem.sample_weight[i] * x * (mean - problem.y[i])
            hessian += problem.sample_weight[i] * x * x * mean
        if not hessian > 0.0:
            break
        weight = state.w[j] + delta
        step = penalty_prox(weight - gradient / hessian, hessian, lam, gamma, problem.penalty) - weight
        while step != 0.0:
            value = _linear_value(problem, state, j, delta + step, lam, gamma)
            if value < current:
                break
            step = 0.5 * step if abs(step) > 1e-12 * (abs(weight) + 1e-300) else 0.0
        if step == 0.0:
            break
        delta += step
        current = value
    return delta


@njit(cache=True)
def within_bound(problem, leaves, weights):
    """Whether every leaf's log rate ``v_j w_j`` stays within ``MAX_AMOUNT`` (beyond it exp could overflow)."""
    for k in range(leaves.shape[0]):  # noqa: SIM110 (numba compiles no generator into all())
        if abs(weights[k] * problem.values[leaves[k]]) > MAX_AMOUNT:
            return False
    return True


class Poisson(LogLinkMean):
    variance_power = 1.0

    def check_targets(self, y, name, sample_weight=None):
        """Counts or rates: non-negative, with a positive weighted total where ``sample_weight`` is given."""
        if np.any(y < 0):
            raise ValueError(f"the Poisson loss needs non-negative {name} (counts or rates), got {y.min():g}")
        if sample_weight is not None and not np.dot(sample_weight, y) > 0:
            raise ValueError(f"the Poisson loss needs some positive {name} with positive weight: every count is 0")

    def curvature_scale(self, y, sample_weight):
        """The curvature at the intercept-only model, the weighted mean of ``y`` (a reference: module docstring)."""
        return float(np.dot(sample_weight, y) / sample_weight.sum())

    def initial_state(self, problem):
        """w = 0, b the log of the weighted mean of ``y`` (positive: checked by the caller)."""
        y, weights = problem.y, problem.sample_weight
        mean = np.dot(weights, y) / problem.weight_total
        w = np.zeros(problem.values.shape[0])
        intercept = np.log(mean)
        residual = y - mean
        return w, residual, np.array([intercept]), np.array([np.dot(weights, residual)]), np.full(y.shape[0], intercept)

    def step_solve(self, penalty, solve, kernels):
        """Under L1, Newton steps, then ``solve`` until stationary: faster, the same optimum
        (``solver.losses.newton`` says why L1 only)."""
        if penalty != "l1":
            return solve
        return partial(newton.solve, loss=self, inner_solve=solve, objective=kernels.objective_value)

    def newton_terms(self, y, score, sample_weight):
        """The residual ``y - mu`` and curvature ``mu`` per unit weight (``mu = exp(score)``)."""
        mean = np.exp(score)
        return y - mean, mean

    def loss_total(self, y, score, sample_weight):
        return float(sample_weight @ (np.exp(score) - y * score))

    def mean_loss(self, y, score, sample_weight=None):
        """The mean Poisson deviance ``2 (y log(y / mu) - y + mu)``."""
        y, score = np.asarray(y, dtype=np.float64), np.asarray(score, dtype=np.float64)
        per_row = 2.0 * (xlogy(y, y) - y * score - y + np.exp(score))
        return float(np.average(per_row, weights=sample_weight))

    def response(self, classes=None):
        return "log rate"

    def predicts(self, target, classes=None):
        return f"the rate of {target} (counts)"

    def warmup_target(self, y):
        return np.floor(np.exp(y))


LOSS = Poisson(
    name="poisson",
    code=CODE,
    task="count",
    other_tasks=("regression",),  # where the target is never negative
    **LOG_LINK_FIELDS,
)
