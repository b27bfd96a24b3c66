"""Datafits of the FIRE objective: the loss GBCD (``solver.gbcd``) minimises under the penalties.

    squared    1/2 sum_i s_i (y_i - b - (M w)_i)^2                          regression
    logistic   sum_i s_i [log(1 + exp(eta_i)) - y_i eta_i],  eta = b + M w    binary classification, y_i in {0, 1}

Both are sums over rows, so a leaf's gradient and a change of its weight touch only the rows of that leaf
(O(S_j)) and a tree's block of the Hessian is diagonal. Each datafit keeps a *residual* per row in
``State.residual``, the negative loss derivative up to the intercept: ``y - M w`` (squared, without b) and
``y - p`` with ``p = sigmoid(eta)`` (logistic, which also keeps ``eta`` in ``State.score``), so that both have
the leaf gradient ``-v_j sum_{i in leaf j} s_i residual_i`` (minus ``b S_j`` for the squared loss).

Curvature. Every coordinate and block step of GBCD uses ``c_j = kappa S_j v_j^2`` and ``L_t = max_{j in t} c_j``
with ``kappa`` the datafit's bound on the loss's second derivative per unit row weight (:data:`CURVATURE_BOUND`):
1 for the squared loss (exact) and 1/4 for the logistic loss (``p (1 - p) <= 1/4``). These are fixed per
training set, so the paper's block MCP concavity ``gamma / L_t`` is one objective for the whole fit, and for the
logistic loss each step minimises a quadratic that lies above the loss along the step (a majorization): every
accepted step lowers the logistic objective itself, and the stationarity measures GBCD computes from the exact
logistic gradient (direction vector, leaf and block moves) certify the logistic objective, not a model of it.

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
from scipy.special import expit

SQUARED = 0
LOGISTIC = 1
LOSS_CODES = {"squared": SQUARED, "logistic": LOGISTIC}
# the loss's second derivative per unit of row weight is at most this, everywhere
CURVATURE_BOUND = {SQUARED: 1.0, LOGISTIC: 0.25}
INTERCEPT_NEWTON_STEPS = 50


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
def leaf_gradient(problem, state, j):
    """The loss gradient of leaf j, ``-v_j (sum_{i in leaf j} s_i residual_i - b S_j)`` (squared) or
    ``-v_j sum_{i in leaf j} s_i residual_i`` (logistic): O(S_j)."""
    total = 0.0
    for p in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
        i = problem.leaf_rows[p]
        total += problem.sample_weight[i] * state.residual[i]
    # arithmetic, not an `if`: a branch on the loss here kept LLVM from inlining this function into the
    # solver's per-leaf loops, and each call then cost a reference count change per array of the bundles
    # (1.3-1.9x slower squared-loss paths, bench/results/solver_since_3f76ca6.md)
    total -= (problem.loss == SQUARED) * state.intercept[0] * problem.leaf_weight[j]
    return -problem.values[j] * total


@njit(cache=True)
def move_leaf(problem, state, j, delta):
    """``w_j += delta`` keeping the residual and its weighted sum exact (and the squared loss's optimal
    intercept; the logistic score): O(S_j)."""
    state.w[j] += delta
    change = problem.values[j] * delta
    if problem.loss == SQUARED:
        for p in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
            state.residual[problem.leaf_rows[p]] -= change
        state.residual_sum[0] -= problem.leaf_weight[j] * change
        state.intercept[0] = state.residual_sum[0] / problem.weight_total
    elif problem.loss == LOGISTIC:
        moved = 0.0
        for p in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
            i = problem.leaf_rows[p]
            state.score[i] += change
            residual = problem.y[i] - sigmoid(state.score[i])
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
    raise ValueError("unknown loss code")


@njit(cache=True)
def _shift_intercept(problem, state, step):
    """Logistic: ``b += step``, the score, residual and residual sum recomputed; returns the new hessian
    ``sum_i s_i p_i (1 - p_i)``."""
    state.intercept[0] += step
    total = 0.0
    hessian = 0.0
    for i in range(state.score.shape[0]):
        state.score[i] += step
        p = sigmoid(state.score[i])
        state.residual[i] = problem.y[i] - p
        total += problem.sample_weight[i] * state.residual[i]
        hessian += problem.sample_weight[i] * p * (1.0 - p)
    state.residual_sum[0] = total
    return hessian


@njit(cache=True)
def intercept_gradient(problem, state):
    """``d loss / d b``: 0 for the squared loss (every move keeps b at its optimum), ``-sum_i s_i residual_i``
    for the logistic loss."""
    if problem.loss == SQUARED:
        return 0.0
    return -state.residual_sum[0]


@njit(cache=True)
def sync_intercept(problem, state, tol):
    """At the start of a solve: the squared loss's residual sum and exact intercept recomputed from the
    residual (no drift across solves); the logistic intercept fitted within ``tol`` (:func:`fit_intercept`)."""
    if problem.loss == SQUARED:
        state.residual_sum[0] = np.dot(problem.sample_weight, state.residual)
        state.intercept[0] = state.residual_sum[0] / problem.weight_total
    else:
        fit_intercept(problem, state, tol)


@njit(cache=True)
def fit_intercept(problem, state, tol):
    """Bring ``|d loss / d b|`` within ``tol``. Squared: nothing to do. Logistic: safeguarded Newton steps on b
    (half of a step that does not shrink ``|d loss / d b|`` is taken back) while ``|sum_i s_i residual_i| > tol``,
    O(n) each."""
    if problem.loss == SQUARED:
        return
    if problem.loss != LOGISTIC:
        raise ValueError("unknown loss code")
    gradient = -state.residual_sum[0]
    if abs(gradient) <= tol:
        return
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


def mean_loss(loss, y, score, sample_weight=None):
    """The per-row loss of scores ``score`` (``b + M w``) against ``y`` averaged over the rows (weighted where
    ``sample_weight`` is given): squared error, or log loss for the logistic loss (``loss``: a code)."""
    y, score = np.asarray(y, dtype=np.float64), np.asarray(score, dtype=np.float64)
    if loss == SQUARED:
        per_row = (y - score) ** 2
    elif loss == LOGISTIC:
        per_row = np.logaddexp(0.0, score) - y * score
    else:
        raise ValueError("unknown loss code")
    return float(np.average(per_row, weights=sample_weight))


def probability(score):
    """The logistic loss's probability of label 1 at scores ``b + M w`` (a rule ensemble's prediction):
    ``1 / (1 + exp(-score))``, elementwise."""
    return expit(np.asarray(score, dtype=np.float64))
