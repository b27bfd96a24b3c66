"""Multinomial FIRE: K classes, one weight per class for each rule, and a rule in or out for all classes at once.

Objective, with sample weights ``s`` (normalised by the caller to sum to n), ``y_i`` the class code of row i,
``W`` (R, K) the rules' weights and ``b`` (K,) the unpenalised intercepts, scores ``Z = 1 b^T + M W``::

    sum_i s_i [logsumexp(Z_i) - Z_{i, y_i}] + sum_j P(||W_j||_2; lam, gamma_j) + lam_f sum_t sum_k ||D_t W_{t, k}||_1

The sparsity penalty P (L1 or MCP, ``solver.penalties``) acts on the norm of a rule's K-vector: a group penalty,
so a leaf is a rule for every class or for none, and the rule count is the number of nonzero rows of W. Fusion
acts on each class's weights within a tree (leaves in left-to-right order, as for one output), so neighbouring
leaves share antecedents class by class; fusing whole vectors (``||W_{j+1} - W_j||_2``) has no exact linear-time
prox, this one has (below).

Identifiability. The loss does not change when a constant is added to every class's score of a row. The
intercepts are kept summing to zero (they start so and every intercept step is orthogonal to the ones vector).
A rule's vector: without fusion, the gradient of a leaf is orthogonal to the ones vector and every step (a group
threshold of a point on that subspace) stays on it, so each rule's amounts sum to zero; with fusion they need
not (the fused prox of each class does not keep sums), and the amounts a rule adds are then read up to a constant
shared by all classes, which no probability sees.

Curvature. The softmax loss's Hessian in one leaf's vector is at most Boehning's bound
``1/2 (I - 11^T / K) S_j v_j^2``, which is ``c_j = 1/2 S_j v_j^2`` times the identity on the subspace the
gradients live in; ``Problem.curvature`` holds it (``CURVATURE_BOUND``). So, as for one output,
every leaf and block step minimises a quadratic that lies above the loss along the step: a leaf's update is the
closed-form group threshold of ``W_j - g_j / c_j`` (radial: the scalar prox of the norm, ``solver.penalties``),
and a tree's block stays separable by leaf without fusion. With fusion a block update runs proximal-gradient
steps with step ``1 / L_t``, each the prox of (per-class fusion + group penalty), computed by Dykstra's
alternating proximal algorithm between the two exact proxes (per-class fused lasso, row-wise group threshold),
which converges to the prox of the sum for the convex penalty; a step is kept only while the block's quadratic
model decreases, so every accepted step lowers the multinomial objective. That decrease is summed as changes from
the block's current weights (``_block_change``: norms' changes as ``(new - old).(new + old) / (|new| + |old|)``,
fusion's as ``solver.penalties.fusion_change``), its rounding that of the move: a step of measure m lowers the
model by about ``m^2 / (2 L_t)``, which the difference of two penalty totals loses in their rounding near the
tolerance, and a refused first step counts the block as stationary.

Bound. Each rule's amounts are kept within ``||v_j W_j||_2 <= MAX_AMOUNT`` (20 log-odds): a nearly pure leaf has
no finite minimiser where MCP stops penalising (its loss keeps falling as its weight grows), and steps under the
curvature bound shrink with its gradient, thousands of passes per path step on a seven-class table. The bound is a
ball, so every prox above is the unbounded one clipped at it (radial); it never binds where the objective has a
minimiser with smaller amounts (the cvxpy tests). A leaf whose weights lie in MCP's flat region, where its penalty is
constant, takes Newton steps on its rows' exact loss instead of steps under the bound (``_flat_region_newton``):
nearly pure leaves live there, with a true curvature far below the bound.

Stationarity is certified on the multinomial objective itself, from its exact gradient: per leaf (no fusion)
the curvature-scaled move of its exact group minimisation, per tree (fusion) that of one proximal-gradient step,
and the intercepts' gradient. lambda_max, the largest ``||g_j||_2`` at the intercept-only model, is the smallest
lambda_s at which zero is stationary (without fusion).

The solver (``solver.losses.multinomial_gbcd``) is GBCD as in ``solver.gbcd``: full-gradient checks alternating with
passes over a working set (every nonzero unit plus the steepest violators), units being leaves without fusion and trees
with it; this module holds its kernels: the leaf and block steps, the intercept's, the measures.
"""

import numpy as np
from numba import njit
from scipy.special import logsumexp, softmax
from sklearn.metrics import roc_auc_score

from .._tree_kernels import column_sums
from ..penalties import MCP, fused_lasso_prox, fusion_change, norm_penalty_change, penalty_prox, penalty_value
from .base import CLASSIFIER_METRICS, MAX_AMOUNT, Loss, column_entry

CODE = 3  # no single-output kernel takes it: the multinomial loss has its own (solver.losses.kernels)
CURVATURE_BOUND = 0.5

INTERCEPT_STEPS = 50
# an intercept step that raises the loss by no more than this, relative, is rounding (a sum over 1e5 rows), not a
# rise: halving it 33 times, O(n K) each, made 1e5-row paths slower than saga (bench/results/classes_and_counts.md)
LOSS_ROUNDING = 1e-13
DYKSTRA_STEPS = 200  # alternations of the fused block prox; stops earlier once the point moves by < 1e-14 relative
MAX_BACKTRACKS = 10  # step shortenings of a fused MCP block step (_block_steps)
MAX_HALVINGS = 30  # of a leaf's Newton step in MCP's flat region (_flat_region_newton)
SNAP_FRACTION = 1e-10  # amounts below this fraction of the prox point's largest entry are zero (Dykstra's residue)


@njit(cache=True)
def _softmax_residual(problem, state, i):
    """Row i's residual ``onehot(y_i) - softmax(score_i)`` recomputed in place; returns its change weighted by
    ``s_i`` added to ``residual_sum``."""
    score = state.score[i]
    top = score.max()
    total = 0.0
    for k in range(score.shape[0]):
        total += np.exp(score[k] - top)
    label = int(problem.y[i])
    for k in range(score.shape[0]):
        new = (1.0 if k == label else 0.0) - np.exp(score[k] - top) / total
        state.residual_sum[k] += problem.sample_weight[i] * (new - state.residual[i, k])
        state.residual[i, k] = new


@njit(cache=True)
def leaf_gradient(problem, state, j, out):
    """Leaf j's loss gradient into ``out`` (K,): ``-v_j sum_{i in leaf j} s_i residual_i``, O(S_j K)."""
    out[:] = 0.0
    for p in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
        i = problem.leaf_rows[p]
        x = column_entry(problem, j, p)
        for k in range(out.shape[0]):
            out[k] -= x * problem.sample_weight[i] * state.residual[i, k]


@njit(cache=True)
def move_leaf(problem, state, j, delta):
    """``W_j += delta`` (K,), the scores and residuals of the leaf's rows kept exact: O(S_j K)."""
    for k in range(delta.shape[0]):
        state.w[j, k] += delta[k]
    for p in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
        i = problem.leaf_rows[p]
        v = column_entry(problem, j, p)
        for k in range(delta.shape[0]):
            state.score[i, k] += v * delta[k]
        _softmax_residual(problem, state, i)


@njit(cache=True)
def loss_value(problem, state):
    """``sum_i s_i [logsumexp(score_i) - score_{i, y_i}]``: O(n K)."""
    total = 0.0
    for i in range(state.score.shape[0]):
        score = state.score[i]
        top = score.max()
        total += problem.sample_weight[i] * (top + np.log(np.exp(score - top).sum()) - score[int(problem.y[i])])
    return total


@njit(cache=True)
def _shift_intercept(problem, state, step):
    """``b += step`` with every score and residual recomputed: O(n K)."""
    for k in range(step.shape[0]):
        state.intercept[k] += step[k]
    for i in range(state.score.shape[0]):
        for k in range(step.shape[0]):
            state.score[i, k] += step[k]
        _softmax_residual(problem, state, i)


@njit(cache=True)
def _add_row_hessian(problem, state, i, weight, p, hessian):
    """``hessian += weight (diag p_i - p_i p_i^T)``, row i's softmax curvature (``p`` scratch (K,), filled with
    its probabilities ``onehot(y_i) - residual_i``)."""
    n_classes = p.shape[0]
    for k in range(n_classes):
        p[k] = (1.0 if k == int(problem.y[i]) else 0.0) - state.residual[i, k]
    for k in range(n_classes):
        hessian[k, k] += weight * p[k]
        for m in range(n_classes):
            hessian[k, m] -= weight * p[k] * p[m]


@njit(cache=True)
def fit_intercept(problem, state, tol):
    """Newton steps on b (Hessian ``sum_i s_i (diag p_i - p_i p_i^T)``, its null direction, the ones vector,
    filled in so that every step sums to zero), each halved until the loss decreases, while the largest entry of
    ``d loss / d b = -residual_sum`` exceeds ``tol``: O(n K^2) per step."""
    n_classes = state.intercept.shape[0]
    for _ in range(INTERCEPT_STEPS):
        gradient = -state.residual_sum.copy()
        if np.abs(gradient).max() <= tol:
            return
        hessian = np.zeros((n_classes, n_classes))
        p = np.empty(n_classes)
        for i in range(state.score.shape[0]):
            _add_row_hessian(problem, state, i, problem.sample_weight[i], p, hessian)
        hessian += np.trace(hessian) / n_classes / n_classes * np.ones((n_classes, n_classes))
        step = -np.linalg.solve(hessian, gradient)
        before = loss_value(problem, state)
        _shift_intercept(problem, state, step)
        taken = 1.0
        while loss_value(problem, state) > before + LOSS_ROUNDING * abs(before) and taken > 1e-10:
            taken *= 0.5
            _shift_intercept(problem, state, -taken * step)  # back to half of the step taken


@njit(cache=True)
def group_prox(z, curvature, lam, gamma, penalty, cap, out):
    """Global minimiser of ``curvature/2 ||x - z||^2 + P(||x||)`` subject to ``||x|| <= cap`` into ``out``: ``z``
    scaled to the scalar prox of its norm, clipped at ``cap`` (P is non-decreasing in the norm, so the minimiser
    lies on the ray of ``z``, and the scalar problem is minimised over [0, cap] at the clipped prox)."""
    norm = np.sqrt((z * z).sum())
    scale = min(penalty_prox(norm, curvature, lam, gamma, penalty), cap) / norm if norm > 0.0 else 0.0
    for k in range(z.shape[0]):
        out[k] = scale * z[k]


@njit(cache=True)
def _penalty(theta, lam, gamma, penalty, lam_f):
    """The penalties of a block of rows ``theta`` (R_t, K): group sparsity plus per-class fusion."""
    total = 0.0
    for j in range(theta.shape[0]):
        norm = np.sqrt((theta[j] * theta[j]).sum())
        if norm > 0.0:
            total += penalty_value(norm, lam, gamma, penalty)
        if j > 0 and lam_f > 0.0:
            total += lam_f * np.abs(theta[j] - theta[j - 1]).sum()
    return total


@njit(cache=True)
def objective_value(problem, state, lam, lam_f):
    """The multinomial FIRE objective at ``state``."""
    total = loss_value(problem, state)
    offsets = problem.offsets
    for t in range(offsets.shape[0] - 1):
        total += _penalty(state.w[offsets[t] : offsets[t + 1]], lam, problem.block_gamma[t], problem.penalty, lam_f)
    return total


@njit(cache=True)
def full_gradient(problem, state, out):
    """Every leaf's loss gradient into ``out`` (R, K): O(n T K), the rule columns' sums row by row in parallel
    (``solver._tree_kernels.column_sums``) class by class, the linear terms' column by column."""
    sums = np.empty(problem.first_linear)
    for k in range(out.shape[1]):
        column_sums(problem.leaves, problem.offsets, problem.sample_weight * state.residual[:, k], sums)
        for j in range(problem.first_linear):
            out[j, k] = -problem.values[j] * sums[j]
    for j in range(problem.first_linear, out.shape[0]):
        leaf_gradient(problem, state, j, out[j])


@njit(cache=True)
def lambda_max(problem, state):
    """``max_j ||g_j||_2`` at ``state`` (the intercept-only model: the smallest lambda_s with zero stationary)."""
    gradient = np.empty(state.w.shape)
    full_gradient(problem, state, gradient)
    return np.sqrt((gradient * gradient).sum(axis=1)).max()


@njit(cache=True)
def _fused_group_prox(point, curvature, lam, gamma, penalty, lam_f, caps, out):
    """Prox of (per-class fusion + group penalty) at step ``1 / curvature`` of the rows ``point`` (R_t, K), by
    Dykstra's alternating proximal algorithm, into ``out``. Rows whose column is zero are held at zero by the
    caller."""
    size, n_classes = point.shape
    x = point.copy()
    fused = np.empty_like(point)
    p = np.zeros_like(point)
    q = np.zeros_like(point)
    column = np.empty(size)
    column_out = np.empty(size)
    scale = max(np.abs(point).max(), 1e-300)
    for _ in range(DYKSTRA_STEPS):
        for k in range(n_classes):
            for j in range(size):
                column[j] = x[j, k] + p[j, k]
            fused_lasso_prox(column, lam_f / curvature, column_out)
            for j in range(size):
                fused[j, k] = column_out[j]
        p += x - fused
        largest = 0.0
        for j in range(size):
            group_prox(fused[j] + q[j], curvature, lam, gamma, penalty, caps[j], out[j])
            largest = max(largest, np.abs(out[j] - x[j]).max())
        q += fused - out
        x[:] = out
        if largest <= 1e-14 * scale:
            break
    # Dykstra approaches the entries that fusion ties to a zero neighbour only in the limit: snap its residue
    for j in range(size):
        for k in range(n_classes):
            if abs(out[j, k]) <= SNAP_FRACTION * scale:
                out[j, k] = 0.0


@njit(cache=True)
def _block_model(theta, start, gradient, curvature, lam, gamma, penalty, lam_f):
    """The block objective's quadratic model at ``theta`` minus the loss at ``start``: a total, whose differences
    lose a small step's change in its rounding (``_block_change`` sums the change instead)."""
    total = _penalty(theta, lam, gamma, penalty, lam_f)
    for j in range(theta.shape[0]):
        for k in range(theta.shape[1]):
            step = theta[j, k] - start[j, k]
            total += gradient[j, k] * step + 0.5 * curvature[j] * step * step
    return total


@njit(cache=True)
def _norm_change(new, old):
    """``||new|| - ||old||`` of two rows, as ``(new - old).(new + old) / (||new|| + ||old||)``: its rounding is that
    of the move (``|new + old| <= ||new|| + ||old||``), where the difference of the two norms loses ``eps ||old||``."""
    new_norm = np.sqrt((new * new).sum())
    old_norm = np.sqrt((old * old).sum())
    if new_norm + old_norm == 0.0:
        return 0.0
    dot = 0.0
    for k in range(new.shape[0]):
        dot += (new[k] - old[k]) * (new[k] + old[k])
    return dot / (new_norm + old_norm)


@njit(cache=True)
def _block_change(theta, base, start, gradient, curvature, lam, gamma, penalty, lam_f):
    """``_block_model(theta) - _block_model(base)`` summed as changes from ``base``: the group penalties' by
    ``_norm_change``, the fusion's by ``fusion_change``, the model's loss as ``(g + c (base - start)) d + c/2 d^2``
    with ``d = theta - base``. Its error scales with the move, not with the penalties: a step of measure
    ``m = L_t |d|`` lowers the model by about ``m^2 / (2 L_t)``, which near the tolerance is below the rounding of two
    totals of a few hundred (a refused step of a decreasing model: the block counted stationary, falsely)."""
    total = 0.0
    for j in range(theta.shape[0]):
        old_norm = np.sqrt((base[j] * base[j]).sum())
        new_norm = np.sqrt((theta[j] * theta[j]).sum())
        total += norm_penalty_change(old_norm, new_norm, _norm_change(theta[j], base[j]), lam, gamma, penalty)
        for k in range(theta.shape[1]):
            if j > 0 and lam_f > 0.0:
                total += lam_f * fusion_change(base[j - 1, k], base[j, k], theta[j - 1, k], theta[j, k])
            move = theta[j, k] - base[j, k]
            total += (gradient[j, k] + curvature[j] * (base[j, k] - start[j, k])) * move
            total += 0.5 * curvature[j] * move * move
    return total


@njit(cache=True)
def _block_steps(problem, t, w, gradient, lam, lam_f, n_steps, out):
    """Up to ``n_steps`` fused proximal-gradient steps on tree t from ``w`` (``gradient`` the block's), each kept
    only where the block's quadratic model does not rise; result to ``out``. Returns the block's stationarity
    measure, the largest row move of the first step times its step's curvature (L_t).

    Under L1 the first trial always passes (a proximal step on a model above the loss). Under MCP the prox of
    fusion plus group MCP computed by Dykstra's alternation is not always the model's minimiser and can raise it:
    the step is then shortened (curvature doubled) up to ``MAX_BACKTRACKS`` times; a block no step of this form
    improves counts as stationary (measure 0), where an unmet measure stalled paths for 10,000 passes. "Improves"
    is decided on the model's change summed from ``out`` (``_block_change``), not on the difference of two totals,
    whose rounding near the tolerance refused decreasing steps and so certified blocks that were not stationary."""
    first = problem.offsets[t]
    size = out.shape[0]
    start = w[first : first + size]
    curvature = problem.curvature[first : first + size]
    step_curvature = problem.lipschitz[t]
    gamma = problem.block_gamma[t]
    out[:] = start
    if step_curvature <= 0.0:
        out[:] = 0.0
        return 0.0
    point = np.empty_like(out)
    theta = np.empty_like(out)
    caps = np.empty(size)
    for j in range(size):
        caps[j] = leaf_cap(problem, first + j)
    measure = 0.0
    for it in range(n_steps):
        trial_curvature = step_curvature
        accepted = False
        largest = 0.0
        for _ in range(MAX_BACKTRACKS):
            for j in range(size):
                for k in range(out.shape[1]):
                    local = gradient[j, k] + curvature[j] * (out[j, k] - start[j, k])
                    point[j, k] = out[j, k] - local / trial_curvature
            _fused_group_prox(point, trial_curvature, lam, gamma, problem.penalty, lam_f, caps, theta)
            largest = 0.0
            for j in range(size):
                if curvature[j] <= 0.0:
                    theta[j] = 0.0  # no training rows (or below min_support): never a rule
                largest = max(largest, np.sqrt(((theta[j] - out[j]) ** 2).sum()))
            if largest == 0.0:
                accepted = True
                break
            if _block_change(theta, out, start, gradient, curvature, lam, gamma, problem.penalty, lam_f) <= 0.0:
                accepted = True
                break
            trial_curvature *= 2.0  # MCP: the composed prox is not the model's minimiser; a shorter step is
        if it == 0:
            measure = trial_curvature * largest if accepted else 0.0
        if not accepted or largest == 0.0:
            break
        out[:] = theta
    return measure


@njit(cache=True)
def leaf_cap(problem, j):
    """The largest norm of leaf j's weights: amounts of at most ``MAX_AMOUNT`` per class where it fires."""
    v = abs(problem.values[j])
    return MAX_AMOUNT / v if v > 0.0 else 0.0


@njit(cache=True)
def _leaf_step(problem, j, w, gradient, lam, out):
    """Leaf j's exact group minimisation of its quadratic bound into ``out``; returns its measure
    ``c_j ||out - w_j||``."""
    c = problem.curvature[j]
    if c <= 0.0:
        out[:] = 0.0
        return 0.0
    group_prox(w[j] - gradient / c, c, lam, problem.leaf_gamma[j], problem.penalty, leaf_cap(problem, j), out)
    return c * np.sqrt(((out - w[j]) ** 2).sum())


@njit(cache=True)
def update(problem, state, unit, lam, lam_f, inner_iters):
    """One unit's update (a tree with fusion, a leaf without) from the current residual; returns its measure."""
    n_classes = state.w.shape[1]
    if lam_f > 0.0:
        first, end = problem.offsets[unit], problem.offsets[unit + 1]
        gradient = np.empty((end - first, n_classes))
        for j in range(first, end):
            leaf_gradient(problem, state, j, gradient[j - first])
        new = np.empty((end - first, n_classes))
        measure = _block_steps(problem, unit, state.w, gradient, lam, lam_f, inner_iters, new)
        for j in range(first, end):
            delta = new[j - first] - state.w[j]
            if np.any(delta != 0.0):
                move_leaf(problem, state, j, delta)
        return measure
    gradient = np.empty(n_classes)
    leaf_gradient(problem, state, unit, gradient)
    new = np.empty(n_classes)
    measure = _leaf_step(problem, unit, state.w, gradient, lam, new)
    gamma = problem.leaf_gamma[unit]
    weight = state.w[unit]
    delta = new - weight
    if problem.penalty == MCP and np.sqrt((weight * weight).sum()) > gamma * lam:
        newton = _flat_region_newton(problem, state, unit, gradient, lam, gamma)
        if np.any(newton != 0.0):
            delta = newton
    if np.any(delta != 0.0):
        move_leaf(problem, state, unit, delta)
    return measure


@njit(cache=True)
def _leaf_rows_value(problem, state, j, delta, lam, gamma):
    """Leaf j's rows' loss plus its penalty were its weights moved by ``delta``: O(S_j K)."""
    total = 0.0
    for p in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
        i = problem.leaf_rows[p]
        score = state.score[i] + column_entry(problem, j, p) * delta
        top = score.max()
        total += problem.sample_weight[i] * (top + np.log(np.exp(score - top).sum()) - score[int(problem.y[i])])
    moved = state.w[j] + delta
    return total + penalty_value(np.sqrt((moved * moved).sum()), lam, gamma, problem.penalty)


@njit(cache=True)
def _flat_region_newton(problem, state, j, gradient, lam, gamma):
    """The step of a leaf whose weights lie in MCP's flat region (where its penalty is constant): a Newton step on
    its rows' exact loss (Hessian ``v_j^2 sum s_i (diag p_i - p_i p_i^T)``, its null direction, the ones vector,
    filled in), halved until the leaf's exact objective falls; zero where it fails or would cross the bound (the
    caller then takes the bound's clipped step). Nearly pure leaves live here:
    their true curvature is far below Boehning's bound, and steps under the bound would shrink with the gradient
    (thousands of passes per path step on a seven-class table). O(S_j K^2)."""
    n_classes = gradient.shape[0]
    hessian = np.zeros((n_classes, n_classes))
    p = np.empty(n_classes)
    for q in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
        i = problem.leaf_rows[q]
        v = column_entry(problem, j, q)
        _add_row_hessian(problem, state, i, problem.sample_weight[i] * v * v, p, hessian)
    scale = max(np.trace(hessian), 1e-300)
    hessian += scale / n_classes / n_classes * np.ones((n_classes, n_classes)) + 1e-12 * scale * np.eye(n_classes)
    step = -np.linalg.solve(hessian, gradient)
    cap = leaf_cap(problem, j)
    current = _leaf_rows_value(problem, state, j, np.zeros(n_classes), lam, gamma)
    moved = state.w[j] + step
    if np.sqrt((moved * moved).sum()) > cap:
        return np.zeros(n_classes)  # at the bound: the bound's clipped step moves along it
    for _ in range(MAX_HALVINGS):
        if _leaf_rows_value(problem, state, j, step, lam, gamma) < current:
            return step
        step *= 0.5
    return np.zeros(n_classes)


@njit(cache=True)
def measures(problem, state, gradient, lam, lam_f, out):
    """Every unit's stationarity measure from the full ``gradient`` (R, K)."""
    scratch = np.empty(state.w.shape)
    offsets = problem.offsets
    if lam_f > 0.0:
        for t in range(offsets.shape[0] - 1):
            first, end = offsets[t], offsets[t + 1]
            out[t] = _block_steps(problem, t, state.w, gradient[first:end], lam, lam_f, 1, scratch[first:end])
        return
    for j in range(out.shape[0]):
        out[j] = _leaf_step(problem, j, state.w, gradient[j], lam, scratch[j])


def multinomial_log_loss(y, score, sample_weight=None):
    """The mean (weighted where ``sample_weight`` is given) of ``logsumexp(score_i) - score_{i, y_i}`` over rows
    of class codes ``y`` and per-class scores ``score`` (n, K)."""
    score = np.asarray(score, dtype=np.float64)
    codes = np.asarray(y).astype(np.int64)
    per_row = logsumexp(score, axis=1) - score[np.arange(len(codes)), codes]
    return float(np.average(per_row, weights=sample_weight))


def macro_auc(y, score, sample_weight=None):
    """The mean over classes of the one-vs-rest AUC of each class's score, over the classes that ``y`` (class
    codes) holds and does not hold everywhere; None where there is none."""
    aucs = [
        roc_auc_score(y == k, score[:, k], sample_weight=sample_weight)
        for k in range(score.shape[1])
        if 0 < np.count_nonzero(y == k) < len(y)
    ]
    return float(np.mean(aucs)) if aucs else None


class Multinomial(Loss):
    def check_targets(self, y, name, sample_weight=None):
        """Class codes 0..K-1, every one with positive weight where ``sample_weight`` is given."""
        if not np.all((y >= 0) & (y == np.round(y))):
            raise ValueError(f"the multinomial loss needs {name} of class codes 0..K-1, got {np.unique(y)[:5]}")
        if sample_weight is not None:
            present = np.bincount(y.astype(np.int64), weights=sample_weight) > 0
            if len(present) < 2 or not present.all():
                raise ValueError(
                    f"the multinomial loss needs every class code 0..{len(present) - 1} in {name} with positive weight"
                )

    def curvature_scale(self, y, sample_weight):
        return CURVATURE_BOUND

    def mean_loss(self, y, score, sample_weight=None):
        """The mean log loss of the class scores ``score`` (n, K)."""
        return multinomial_log_loss(y, score, sample_weight)

    def step_metrics(self, y, score, sample_weight=None):
        """The loss, ``auc`` (macro one-vs-rest), ``accuracy`` (the most probable class) and ``brier``, the mean over
        rows of sum_k (p_k - 1[y = k])^2, in [0, 2] (Brier's definition; scikit-learn's ``brier_score_loss``)."""
        indicator = y[:, None] == np.arange(score.shape[1])
        return {
            "loss": self.mean_loss(y, score, sample_weight),
            "auc": macro_auc(y, score, sample_weight),
            "accuracy": float(np.average(score.argmax(axis=1) == y, weights=sample_weight)),
            "brier": float(np.average(((softmax(score, axis=1) - indicator) ** 2).sum(axis=1), weights=sample_weight)),
        }

    def response(self, classes=None):
        return "log-odds per class"

    def predicts(self, target, classes=None):
        return f"{target}: one of {len(classes)} classes"

    def warmup_target(self, y):
        return np.digitize(y, [-0.5, 0.5]).astype(np.float64)  # three classes


LOSS = Multinomial(
    name="multinomial",
    code=CODE,
    task="multiclass",
    other_tasks=(),
    link="softmax",
    rule_link="softmax",
    classifier=True,
    per_class=True,
    forest_task="Classifier",
    nonnegative_target=False,
    metrics=CLASSIFIER_METRICS,
    chart_metric="loss",
    selections=("loss", "auc", "1se"),
    polish_default=False,
    polish_refusal=(
        "is not available for the multinomial loss (its refits of nearly pure leaves overfit as the logistic "
        "loss's do): leave it null or false"
    ),
)
