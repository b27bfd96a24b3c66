"""GBCD of the multinomial loss (``solver.losses.multinomial``, whose kernels it runs): K classes, one weight per
class for each rule, its own state (:class:`ClassState`).

As ``solver.gbcd`` for one output: full-gradient checks alternating with passes over a working set (every nonzero
unit plus the steepest violators), units being leaves without fusion and trees with it, with shrinking and Anderson
extrapolation; a solve ends where no unit's measure and no intercept gradient exceeds the tolerance (a fused
block's measure counts only steps whose model change, summed from its weights, is a decrease:
``multinomial._block_change``).
"""

from typing import NamedTuple

import numpy as np
from numba import njit

from ..gbcd import ANDERSON_MEMORY, INNER_TOL_FRACTION, MIN_WORKING_SET, SHRINK_FRACTION, leaves_of
from ..problem import at_last_check, mark_checked
from . import multinomial
from .base import unchecked

# the entry points a path reads, as solver.gbcd's for one output
full_gradient = multinomial.full_gradient
lambda_max = multinomial.lambda_max
objective_value = multinomial.objective_value


class ClassState(NamedTuple):
    """The point being optimised (multinomial), updated in place; every weight change keeps every field exact."""

    w: np.ndarray  # (R, K) rule weights
    residual: np.ndarray  # (n, K) onehot(y) - softmax(score): the negative loss gradient per row and class
    intercept: np.ndarray  # (K,) b, summing to zero
    residual_sum: np.ndarray  # (K,) sum_i s_i residual_i: -d loss / d b
    score: np.ndarray  # (n, K) b + M W
    gradient: np.ndarray  # (R, K) the loss gradient at the last full-gradient check (solve_greedy)
    checked: np.ndarray  # (R K + K,) W and b at that check; NaN before the first (solver.problem.at_last_check)

    @classmethod
    def initial(cls, problem, n_classes):
        """w = 0, b the centred log of the weighted class shares (every class present: checked by the caller)."""
        codes = problem.y.astype(np.int64)
        shares = np.bincount(codes, weights=problem.sample_weight, minlength=n_classes) / problem.weight_total
        intercept = np.log(shares) - np.log(shares).mean()
        n = codes.shape[0]
        residual = -np.tile(shares, (n, 1))
        residual[np.arange(n), codes] += 1.0
        w = np.zeros((problem.values.shape[0], n_classes))
        return cls(w, residual, intercept, problem.sample_weight @ residual, np.tile(intercept, (n, 1)), *unchecked(w))


@njit(cache=True)
def _active_units(problem, w, fused):
    """Whether each unit (tree with fusion, leaf without) has a nonzero weight."""
    n_units = problem.offsets.shape[0] - 1 if fused else w.shape[0]
    active = np.zeros(n_units, dtype=np.bool_)
    for j in range(w.shape[0]):
        if np.any(w[j] != 0.0):
            unit = np.searchsorted(problem.offsets, j, side="right") - 1 if fused else j
            active[unit] = True
    return active


@njit(cache=True)
def _move_leaves_to(problem, state, leaves, target):
    for k in range(leaves.shape[0]):
        delta = target[k] - state.w[leaves[k]]
        if np.any(delta != 0.0):
            multinomial.move_leaf(problem, state, leaves[k], delta)


@njit(cache=True)
def _anderson_step(problem, state, history, leaves, lam, lam_f):
    """Anderson extrapolation of the working set's last iterates (as ``solver.gbcd`` does for one output): kept
    only where the objective falls and every rule stays within its bound, otherwise undone."""
    n_steps = history.shape[0] - 1
    flat = history.reshape(history.shape[0], -1)
    diffs = flat[1:] - flat[:-1]
    gram = diffs @ diffs.T
    scale = np.trace(gram)
    if not scale > 0.0:
        return
    gram += 1e-10 * scale * np.eye(n_steps)
    z = np.linalg.solve(gram, np.ones(n_steps))
    if not np.isfinite(z.sum()) or z.sum() == 0.0:
        return
    coefficients = z / z.sum()
    extrapolated = np.zeros(history.shape[1:])
    for m in range(n_steps):
        extrapolated += coefficients[m] * history[m + 1]
    for k in range(leaves.shape[0]):
        row = extrapolated[k]
        if np.sqrt((row * row).sum()) > multinomial.leaf_cap(problem, leaves[k]) * (1.0 + 1e-12):
            return
    before = multinomial.objective_value(problem, state, lam, lam_f)
    _move_leaves_to(problem, state, leaves, extrapolated)
    if multinomial.objective_value(problem, state, lam, lam_f) >= before:
        _move_leaves_to(problem, state, leaves, history[n_steps])


@njit(cache=True)
def _passes(problem, state, units, lam, lam_f, inner_iters, inner_tol, max_passes):
    """Passes over ``units`` until the largest measure is at most ``inner_tol``; a unit whose measure falls to a
    small fraction of it sits out the rest (shrinking), and every ``ANDERSON_MEMORY`` passes an Anderson step
    extrapolates the working set's weights (coupled rules, e.g. nearly pure leaves of several trees on the same
    rows, otherwise crawl along their shared direction). Returns the passes."""
    leaves = leaves_of(problem, units) if lam_f > 0.0 else units.copy()
    history = np.empty((ANDERSON_MEMORY + 1, leaves.shape[0], state.w.shape[1]))
    for k in range(leaves.shape[0]):
        history[0, k] = state.w[leaves[k]]
    n_history = 1
    visit = np.ones(units.shape[0], dtype=np.bool_)
    passes = 0
    while passes < max_passes:
        worst = 0.0
        for k in range(units.shape[0]):
            if visit[k]:
                measure = multinomial.update(problem, state, units[k], lam, lam_f, inner_iters)
                visit[k] = measure > SHRINK_FRACTION * inner_tol
                worst = max(worst, measure)
        multinomial.fit_intercept(problem, state, inner_tol)
        passes += 1
        if worst <= inner_tol:
            break
        for k in range(leaves.shape[0]):
            history[n_history, k] = state.w[leaves[k]]
        n_history += 1
        if n_history == ANDERSON_MEMORY + 1:
            _anderson_step(problem, state, history, leaves, lam, lam_f)
            for k in range(leaves.shape[0]):
                history[0, k] = state.w[leaves[k]]
            n_history = 1
    return passes


@njit(cache=True)
def solve_greedy(problem, state, lam, lam_f, tol, max_iter, inner_iters):
    """GBCD from ``state`` until stationary: full-gradient checks alternating with working-set passes (every
    nonzero unit plus the steepest violators, steepest first). Returns (passes, converged). The first check
    reuses the gradient the state kept where it starts from the point of its last check, and counts no pass
    (``solver.problem.at_last_check``)."""
    fused = lam_f > 0.0
    gradient = state.gradient
    n_units = problem.offsets.shape[0] - 1 if fused else state.w.shape[0]
    measures = np.empty(n_units)
    passes = 0
    first = True
    while passes < max_iter:
        multinomial.fit_intercept(problem, state, tol)
        if not (first and at_last_check(state)):  # a warm start from the last step's final check: its gradient
            multinomial.full_gradient(problem, state, gradient)
            mark_checked(state)
            passes += 1
        first = False
        multinomial.measures(problem, state, gradient, lam, lam_f, measures)
        largest = max(measures.max(), np.abs(state.residual_sum).max())
        if largest <= tol:
            return passes, True
        active = _active_units(problem, state.w, fused)
        scores = np.where(active, np.inf, measures)
        size = max(MIN_WORKING_SET, 2 * int(active.sum()))
        order = np.argsort(-scores)[:size]
        units = order[scores[order] > 0.0]
        inner_tol = max(tol, INNER_TOL_FRACTION * largest)
        passes += _passes(problem, state, units, lam, lam_f, inner_iters, inner_tol, max_iter - passes)
    return passes, False


@njit(cache=True)
def solve_cyclic(problem, state, lam, lam_f, tol, max_iter, inner_iters):
    """Cyclic BCD: sweep every unit until none moves by more than ``tol``. Returns (passes, converged)."""
    n_units = problem.offsets.shape[0] - 1 if lam_f > 0.0 else state.w.shape[0]
    everything = np.arange(n_units)
    for passes in range(1, max_iter + 1):
        worst = 0.0
        for unit in everything:
            worst = max(worst, multinomial.update(problem, state, unit, lam, lam_f, inner_iters))
        multinomial.fit_intercept(problem, state, tol)
        if worst <= tol:
            return passes, True
    return max_iter, False
