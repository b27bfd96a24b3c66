"""Datafits of the FIRE objective: the loss GBCD (``solver.gbcd``) minimises under the penalties.

    squared    1/2 sum_i s_i (y_i - b - (M w)_i)^2                          regression
    logistic   sum_i s_i [log(1 + exp(eta_i)) - y_i eta_i],  eta = b + M w    binary classification, y_i in {0, 1}
    poisson    sum_i s_i [exp(eta_i) - y_i eta_i],           eta = b + M w    counts or rates, y_i >= 0 (log link)

(The multinomial loss, one weight per class, has its own kernels in ``solver.multinomial``.) All are sums over
rows, so a leaf's gradient and a change of its weight touch only the rows of that leaf (O(S_j)) and a tree's
block of the Hessian is diagonal. Each datafit keeps a *residual* per row in ``State.residual``, the negative loss
derivative up to the intercept: ``y - M w`` (squared, without b), ``y - p`` with ``p = sigmoid(eta)`` (logistic)
or ``y - mu`` with ``mu = exp(eta)`` (Poisson; both also keep ``eta`` in ``State.score``), so that all have the
leaf gradient ``-v_j sum_{i in leaf j} s_i residual_i`` (minus ``b S_j`` for the squared loss).

Curvature. Every coordinate and block step of GBCD uses ``c_j = kappa S_j v_j^2`` and ``L_t = max_{j in t} c_j``
with ``kappa`` the datafit's bound on the loss's second derivative per unit row weight (:data:`CURVATURE_BOUND`):
1 for the squared loss (exact) and 1/4 for the logistic loss (``p (1 - p) <= 1/4``). These are fixed per
training set, so the paper's block MCP concavity ``gamma / L_t`` is one objective for the whole fit, and for the
logistic loss each step minimises a quadratic that lies above the loss along the step (a majorization): every
accepted step lowers the logistic objective itself, and the stationarity measures GBCD computes from the exact
logistic gradient (direction vector, leaf and block moves) certify the logistic objective, not a model of it.

The Poisson loss has no curvature bound (``mu`` is unbounded), so it takes no quadratic step. It does not need
one: along one leaf's weight every row of the leaf moves its score by the same ``v_j delta``, so the loss of the
leaf's rows is exactly ``a_j exp(v_j delta) - b_j v_j delta`` up to a constant, with ``a_j = sum s_i mu_i`` (from the
leaf's residual sum, which its gradient computes anyway) and ``b_j = sum s_i y_i`` (fixed: ``Problem.leaf_target``).
A leaf's update is the exact minimiser of that plus its penalty (:func:`poisson_leaf_minimum`: closed form under
L1), and a fused tree's block loss is the exact, separable sum of those functions, minimised by proximal gradient
steps with backtracking that touch no row (``solver.gbcd``). Its ``CURVATURE_BOUND`` is a reference, not a bound:
the curvature at the intercept-only model, the weighted mean of ``y``, which fixes the block MCP concavity
``gamma / L_t`` and the scale of the stationarity measures for the whole fit.

Intercept (unpenalised). Squared: ``b`` is kept at its exact optimum, the weighted mean of the residual, by every
move in O(1). Logistic: Newton steps on ``b`` (O(n) each, :func:`fit_intercept`) whenever ``|d loss / d b| =
|sum_i s_i residual_i|`` exceeds the tolerance: at the start of a solve, after every pass over a working set
and before every stationarity check, which therefore covers ``b`` too. At ``w = 0`` the logistic intercept is the
weighted log-odds of ``y``, and lambda_max is the largest leaf gradient there.

Why the logistic loss is minimised directly, one leaf or one tree at a time under the 1/4 bound, and not by an
outer loop around the squared-loss solver. Measured on churn (4,000 training rows, a 500-tree depth-3 random
forest classifier, 3,857 leaves, 50-step paths, tol 1e-4; scratch runs on this shared 2-core machine, so
seconds are loaded ones, compare within a row):

    path                      this (direct)      proximal Newton (IRLS)                     squared loss, same M
    L1                        14.9 s              9.6 s, 149 Newton steps                    9.1 s
    MCP (paper's scaling)     21.2 s, 50 steps    124 s for 9 steps, 8 not converged:        20.5 s
                                                  1,199 of 2,400 Newton steps raised the
                                                  objective and were rejected
    MCP + fusion 0.5          44.0 s              72.2 s, 34 Newton steps rejected           121.6 s

IRLS (inner problem: the weighted least-squares problem with weights ``p (1 - p)`` and the working response,
warm-started, a halving line search on the true objective and an MM step where that fails) is as fast on L1, but
its inner problem takes the local curvature ``p (1 - p)``, far below 1/4 on confident leaves, for the whole truth:
MCP's thresholds computed with it jump leaves to weights the logistic loss does not support. A majorization loop
that freezes the 1/4-bound gradient for a whole inner solve needed 8,163 outer iterations on the L1 path (173 s).
Applying the bound one leaf or tree at a time with a fresh gradient costs one ``exp`` per row a move touches and
is monotone and consistent with the stationarity check. Where IRLS finishes, it reaches lower objectives late on
the MCP + fusion path (2-3% median, more past 50 rules: MCP is nonconvex and the 1/4 bound moves cautiously);
up to 15 rules the two are within 2.5%. Known cost: past the rules a rule budget asks for, the logistic problem
nears separation (MCP leaves large weights unpenalised) and the bound's steps become small: those late steps take
most of a full path's time (``PathSpec.max_rules`` stops a path after the budget).
"""

import numpy as np
from numba import njit
from scipy.special import expit, logsumexp, xlogy

from .penalties import L1, penalty_value

SQUARED = 0
LOGISTIC = 1
POISSON = 2
MULTINOMIAL = 3  # its kernels are solver.multinomial's (one weight per class)
LOSS_CODES = {"squared": SQUARED, "logistic": LOGISTIC, "poisson": POISSON, "multinomial": MULTINOMIAL}
# the loss's second derivative per unit of row weight is at most this, everywhere (squared, logistic; multinomial:
# Boehning's bound on the subspace its gradients live in, solver.multinomial)
CURVATURE_BOUND = {SQUARED: 1.0, LOGISTIC: 0.25, MULTINOMIAL: 0.5}
INTERCEPT_NEWTON_STEPS = 50
# the most a rule may add to a score (multinomial: the norm of its amounts; Poisson, in a fused tree's steps: its
# log rate): odds or a rate factor of e^20 (5e8) say certainty; without a bound a nearly pure leaf (or one whose
# rows count nothing) in MCP's flat region has no finite minimiser and its weight never settles
MAX_AMOUNT = 20.0
# golden-section iterations of a Poisson leaf's MCP minimisation on each side of zero (interval shrinks 0.618^k)
GOLDEN_STEPS = 60
GOLDEN_RESOLUTION = 1e-9  # a golden-section minimum within this fraction of gamma lam of zero is zero


def curvature_scale(loss, y, sample_weight):
    """kappa of ``c_j = kappa S_j v_j^2``: the loss's curvature bound (squared, logistic), or for the Poisson loss
    its curvature at the intercept-only model, the weighted mean of ``y`` (a reference, see the module docstring)."""
    if loss == POISSON:
        return float(np.dot(sample_weight, y) / sample_weight.sum())
    return CURVATURE_BOUND[loss]


def loss_code(name):
    """The kernels' code of a loss name; an unknown name is a ValueError."""
    if name not in LOSS_CODES:
        raise ValueError(f"loss must be one of {sorted(LOSS_CODES)}, got {name!r}")
    return LOSS_CODES[name]


@njit(cache=True)
def sigmoid(eta):
    """``1 / (1 + exp(-eta))``: 0 and 1 in the limits, never NaN."""
    return 1.0 / (1.0 + np.exp(-eta))


@njit(cache=True)
def log_loss(eta, y):
    """``log(1 + exp(eta)) - y eta`` without overflow."""
    return max(eta, 0.0) + np.log1p(np.exp(-abs(eta))) - y * eta


@njit(cache=True)
def mean_response(eta, loss):
    """The mean a score ``eta`` stands for: ``sigmoid(eta)`` (logistic), ``exp(eta)`` (Poisson)."""
    if loss == POISSON:
        return np.exp(eta)
    return sigmoid(eta)


@njit(cache=True, inline="always")
def column_entry(problem, j, p):
    """``v_j e_ij`` of column j at its position p (``solver.problem.Problem``): ``v_j`` for a rule."""
    if j < problem.first_linear:
        return problem.values[j]
    return problem.values[j] * problem.linear_values[p - problem.linear_start]


@njit(cache=True, inline="always")
def leaf_gradient(problem, state, j):
    """The loss gradient of column j, ``-v_j (sum_{i in j} s_i e_ij residual_i - b S_j)`` (squared) or
    ``-v_j sum_{i in j} s_i e_ij residual_i`` (logistic, Poisson), ``e_ij = 1`` for a rule (``solver.problem``):
    O(S_j)."""
    total = 0.0
    if j < problem.first_linear:
        for p in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
            i = problem.leaf_rows[p]
            total += problem.sample_weight[i] * state.residual[i]
    else:
        for p in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
            i = problem.leaf_rows[p]
            total += problem.sample_weight[i] * state.residual[i] * problem.linear_values[p - problem.linear_start]
    return gradient_of_sum(problem, state, j, total)


@njit(cache=True, inline="always")
def gradient_of_sum(problem, state, j, total):
    """Column j's loss gradient from ``total = sum_{i in j} s_i e_ij residual_i`` (:func:`leaf_gradient`)."""
    # arithmetic, not an `if`: a branch on the loss here kept LLVM from inlining this function into the
    # solver's per-leaf loops, and each call then cost a reference count change per array of the bundles
    # (1.3-1.9x slower squared-loss paths, bench/results/solver_since_3f76ca6.md); the linear terms' loop made
    # it too large for LLVM's choice, so numba inlines it (inline="always")
    total -= (problem.loss == SQUARED) * state.intercept[0] * problem.leaf_weight[j]
    return -problem.values[j] * total


@njit(cache=True)
def move_leaf(problem, state, j, delta):
    """``w_j += delta`` keeping the residual and its weighted sum exact (and the squared loss's optimal
    intercept; the logistic and Poisson score): O(S_j)."""
    state.w[j] += delta
    if problem.loss == SQUARED:
        for p in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
            state.residual[problem.leaf_rows[p]] -= column_entry(problem, j, p) * delta
        state.residual_sum[0] -= problem.leaf_weight[j] * problem.values[j] * delta
        state.intercept[0] = state.residual_sum[0] / problem.weight_total
    elif problem.loss == LOGISTIC or problem.loss == POISSON:
        moved = 0.0
        for p in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
            i = problem.leaf_rows[p]
            state.score[i] += column_entry(problem, j, p) * delta
            residual = problem.y[i] - mean_response(state.score[i], problem.loss)
            moved += problem.sample_weight[i] * (residual - state.residual[i])
            state.residual[i] = residual
        state.residual_sum[0] += moved
    else:
        raise ValueError("unknown loss code")


@njit(cache=True)
def loss_value(problem, state):
    """The datafit's value at ``state``: O(n)."""
    total = 0.0
    if problem.loss == SQUARED:
        for i in range(state.residual.shape[0]):
            r = state.residual[i] - state.intercept[0]
            total += problem.sample_weight[i] * r * r
        return 0.5 * total
    if problem.loss == LOGISTIC:
        for i in range(state.score.shape[0]):
            total += problem.sample_weight[i] * log_loss(state.score[i], problem.y[i])
        return total
    if problem.loss == POISSON:
        for i in range(state.score.shape[0]):
            total += problem.sample_weight[i] * (np.exp(state.score[i]) - problem.y[i] * state.score[i])
        return total
    raise ValueError("unknown loss code")


@njit(cache=True)
def _shift_intercept(problem, state, step):
    """Logistic, Poisson: ``b += step``, the score, residual and residual sum recomputed; returns the new hessian
    ``sum_i s_i p_i (1 - p_i)`` (logistic; Poisson's is not needed)."""
    state.intercept[0] += step
    total = 0.0
    hessian = 0.0
    for i in range(state.score.shape[0]):
        state.score[i] += step
        p = mean_response(state.score[i], problem.loss)
        state.residual[i] = problem.y[i] - p
        total += problem.sample_weight[i] * state.residual[i]
        hessian += problem.sample_weight[i] * p * (1.0 - p)
    state.residual_sum[0] = total
    return hessian


@njit(cache=True)
def intercept_gradient(problem, state):
    """``d loss / d b``: 0 for the squared loss (every move keeps b at its optimum), ``-sum_i s_i residual_i``
    for the logistic and Poisson losses."""
    if problem.loss == SQUARED:
        return 0.0
    return -state.residual_sum[0]


@njit(cache=True)
def resync(problem, state):
    """The residual sum (and the squared loss's exact intercept; the logistic and Poisson residuals, from the score)
    recomputed: O(n). Moves keep them by increments, whose rounding grows with the largest values they passed
    through: a move that is tried and taken back (an Anderson step) may have passed through ``exp(50)``."""
    if problem.loss == SQUARED:
        state.residual_sum[0] = np.dot(problem.sample_weight, state.residual)
        state.intercept[0] = state.residual_sum[0] / problem.weight_total
    else:
        _shift_intercept(problem, state, 0.0)


@njit(cache=True)
def sync_intercept(problem, state, tol):
    """At the start of a solve: the residual sum recomputed (:func:`resync`: no drift across solves); the logistic
    and Poisson intercept fitted within ``tol`` (:func:`fit_intercept`)."""
    resync(problem, state)
    fit_intercept(problem, state, tol)


@njit(cache=True)
def fit_intercept(problem, state, tol):
    """Bring ``|d loss / d b|`` within ``tol``. Squared: nothing to do. Logistic: safeguarded Newton steps on b
    (half of a step that does not shrink ``|d loss / d b|`` is taken back) while ``|sum_i s_i residual_i| > tol``,
    O(n) each. Poisson: the exact step ``log(sum s y / sum s mu)`` (repeated while rounding leaves it above tol)."""
    if problem.loss == SQUARED:
        return
    gradient = -state.residual_sum[0]
    if abs(gradient) <= tol:
        return
    if problem.loss == POISSON:
        target = problem.target_total  # sum_i s_i y_i > 0 (checked by the caller)
        for _ in range(INTERCEPT_NEWTON_STEPS):
            if abs(state.residual_sum[0]) <= tol:
                return
            _shift_intercept(problem, state, np.log(target / (target - state.residual_sum[0])))
        return
    if problem.loss != LOGISTIC:
        raise ValueError("unknown loss code")
    hessian = _shift_intercept(problem, state, 0.0)
    for _ in range(INTERCEPT_NEWTON_STEPS):
        if abs(gradient) <= tol or hessian <= 0.0:
            return
        taken = -gradient / hessian
        new_hessian = _shift_intercept(problem, state, taken)
        while abs(state.residual_sum[0]) >= abs(gradient) and abs(taken) > 1e-12:
            taken *= 0.5  # take back half of the step
            new_hessian = _shift_intercept(problem, state, -taken)
        gradient = -state.residual_sum[0]
        hessian = new_hessian


@njit(cache=True)
def poisson_leaf_value(u, w, v, a, b, lam, gamma, penalty):
    """Leaf j's Poisson objective at weight ``u``, up to a constant: ``a exp(v (u - w)) - b v u + P(u)`` with
    ``w`` its weight now, ``a = sum s_i mu_i`` and ``b = sum s_i y_i`` over its rows (module docstring)."""
    return a * np.exp(v * (u - w)) - b * v * u + penalty_value(u, lam, gamma, penalty)


@njit(cache=True)
def _golden_minimum(lo, hi, w, v, a, b, lam, gamma, penalty):
    """A local minimiser of :func:`poisson_leaf_value` on ``[lo, hi]`` by golden-section search."""
    ratio = 0.5 * (np.sqrt(5.0) - 1.0)
    left, right = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    f_left = poisson_leaf_value(left, w, v, a, b, lam, gamma, penalty)
    f_right = poisson_leaf_value(right, w, v, a, b, lam, gamma, penalty)
    for _ in range(GOLDEN_STEPS):
        if f_left <= f_right:
            hi, right, f_right = right, left, f_left
            left = hi - ratio * (hi - lo)
            f_left = poisson_leaf_value(left, w, v, a, b, lam, gamma, penalty)
        else:
            lo, left, f_left = left, right, f_right
            right = lo + ratio * (hi - lo)
            f_right = poisson_leaf_value(right, w, v, a, b, lam, gamma, penalty)
    return left if f_left <= f_right else right


@njit(cache=True)
def poisson_leaf_minimum(w, v, a, b, lam, gamma, penalty):
    """The weight minimising :func:`poisson_leaf_value` (leaf j's exact coordinate minimisation).

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
    best, best_value = 0.0, poisson_leaf_value(0.0, w, v, a, b, lam, gamma, penalty)
    free = w + np.log(b / a) / v if b > 0.0 else -np.inf * np.sign(v)
    for candidate in (
        max(free, edge),
        min(free, -edge),
        _golden_minimum(0.0, edge, w, v, a, b, lam, gamma, penalty),
        _golden_minimum(-edge, 0.0, w, v, a, b, lam, gamma, penalty),
    ):
        if abs(candidate) <= GOLDEN_RESOLUTION * edge:
            continue  # golden section's approach to an end at 0: zero itself (a rounding-sized weight is no rule)
        value = poisson_leaf_value(candidate, w, v, a, b, lam, gamma, penalty)
        if value < best_value:
            best, best_value = candidate, value
    return best


def mean_loss(loss, y, score, sample_weight=None):
    """The per-row loss of scores ``score`` (``b + M w``) against ``y`` averaged over the rows (weighted where
    ``sample_weight`` is given): squared error, log loss for the logistic loss, the Poisson deviance
    ``2 (y log(y / mu) - y + mu)`` for the Poisson loss (``loss``: a code)."""
    y, score = np.asarray(y, dtype=np.float64), np.asarray(score, dtype=np.float64)
    if loss == SQUARED:
        per_row = (y - score) ** 2
    elif loss == LOGISTIC:
        per_row = np.logaddexp(0.0, score) - y * score
    elif loss == POISSON:
        per_row = 2.0 * (xlogy(y, y) - y * score - y + np.exp(score))
    else:
        raise ValueError("unknown loss code")
    return float(np.average(per_row, weights=sample_weight))


def multinomial_log_loss(y, score, sample_weight=None):
    """The mean (weighted where ``sample_weight`` is given) of ``logsumexp(score_i) - score_{i, y_i}`` over rows
    of class codes ``y`` and per-class scores ``score`` (n, K)."""
    score = np.asarray(score, dtype=np.float64)
    codes = np.asarray(y).astype(np.int64)
    per_row = logsumexp(score, axis=1) - score[np.arange(len(codes)), codes]
    return float(np.average(per_row, weights=sample_weight))


def probability(score):
    """The logistic loss's probability of label 1 at scores ``b + M w`` (a rule ensemble's prediction):
    ``1 / (1 + exp(-score))``, elementwise."""
    return expit(np.asarray(score, dtype=np.float64))
