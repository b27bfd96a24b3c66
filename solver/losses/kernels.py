"""The single-output losses' kernels dispatched by code: the one place ``solver.gbcd`` learns which loss it runs.

``Problem.loss`` holds the code of a registered loss (``Loss.code``); each function below switches on it and calls
that loss module's kernel, and raises on a code it does not know (as ``solver.penalties`` does for penalties). A loss
with a curvature bound takes the quadratic steps of ``solver.losses.quadratic_steps``; one without (Poisson) brings
its own exact steps. The multinomial loss, one weight per class, has its own state and solver
(``solver.losses.multinomial_gbcd``) and no code here.

Performance (``solver.gbcd``'s docstring): a call that takes the bundles costs a reference count change per array in
them, so the functions the solver calls per leaf are inlined by numba (``inline="always"``), and the leaf gradient
tells the squared loss by arithmetic, not by a branch (:func:`gradient_of_sum`); :func:`move_leaf`, called only
where a weight changes, is not inlined.
"""

from numba import njit

from . import logistic, poisson, quadratic_steps, squared


@njit(cache=True, inline="always")
def leaf_gradient(problem, state, j):
    """The loss gradient of column j, ``-v_j (sum_{i in j} s_i e_ij residual_i - b S_j)`` (squared) or
    ``-v_j sum_{i in j} s_i e_ij residual_i`` (the others), ``e_ij = 1`` for a rule (``solver.problem``): O(S_j)."""
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
    total -= (problem.loss == squared.CODE) * state.intercept[0] * problem.leaf_weight[j]
    return -problem.values[j] * total


@njit(cache=True)
def move_leaf(problem, state, j, delta):
    """``w_j += delta`` keeping every field of the state exact (``solver.problem.State``): O(S_j)."""
    state.w[j] += delta
    if problem.loss == squared.CODE:
        squared.move_leaf(problem, state, j, delta)
    elif problem.loss == logistic.CODE:
        logistic.move_leaf(problem, state, j, delta)
    elif problem.loss == poisson.CODE:
        poisson.move_leaf(problem, state, j, delta)
    else:
        raise ValueError("unknown loss code")


@njit(cache=True)
def loss_value(problem, state):
    """The loss at ``state``: O(n)."""
    if problem.loss == squared.CODE:
        return squared.loss_value(problem, state)
    if problem.loss == logistic.CODE:
        return logistic.loss_value(problem, state)
    if problem.loss == poisson.CODE:
        return poisson.loss_value(problem, state)
    raise ValueError("unknown loss code")


@njit(cache=True)
def intercept_gradient(problem, state):
    """``d loss / d b``: 0 for the squared loss (every move keeps b at its optimum), ``-sum_i s_i residual_i``
    for the others (each keeps ``residual = -d loss / d score`` per unit weight)."""
    if problem.loss == squared.CODE:
        return 0.0
    return -state.residual_sum[0]


@njit(cache=True)
def resync(problem, state):
    """The residual sum (and the squared loss's exact intercept; the others' residuals, from the score)
    recomputed: O(n). Moves keep them by increments, whose rounding grows with the largest values they passed
    through: a move that is tried and taken back (an Anderson step) may have passed through ``exp(50)``."""
    if problem.loss == squared.CODE:
        squared.resync(problem, state)
    elif problem.loss == logistic.CODE:
        logistic.shift_intercept(problem, state, 0.0)
    elif problem.loss == poisson.CODE:
        poisson.shift_intercept(problem, state, 0.0)
    else:
        raise ValueError("unknown loss code")


@njit(cache=True)
def fit_intercept(problem, state, tol):
    """Bring ``|d loss / d b|`` within ``tol`` (the squared loss's is always 0)."""
    if problem.loss == squared.CODE:
        return
    if problem.loss == logistic.CODE:
        logistic.fit_intercept(problem, state, tol)
    elif problem.loss == poisson.CODE:
        poisson.fit_intercept(problem, state, tol)
    else:
        raise ValueError("unknown loss code")


@njit(cache=True)
def sync_intercept(problem, state, tol):
    """At the start of a solve: the residual sum recomputed (:func:`resync`: no drift across solves), the
    intercept fitted within ``tol`` (:func:`fit_intercept`)."""
    resync(problem, state)
    fit_intercept(problem, state, tol)


@njit(cache=True, inline="always")
def leaf_minimum(problem, j, w, gradient, lam):
    """Column j's coordinate minimisation from weight ``w`` and loss gradient ``gradient`` there (``c_j > 0``):
    exact for a Poisson rule, of the quadratic model otherwise."""
    if problem.loss == poisson.CODE and j < problem.first_linear:
        return poisson.leaf_minimum(problem, j, w, gradient, lam)
    return quadratic_steps.leaf_minimum(problem, j, w, gradient, lam)


@njit(cache=True, inline="always")
def leaf_decrease(problem, j, w, gradient, lam, new):
    """How much the objective :func:`leaf_minimum` minimises falls from ``w`` to ``new``."""
    if problem.loss == poisson.CODE and j < problem.first_linear:
        return poisson.leaf_decrease(problem, j, w, gradient, lam, new)
    return quadratic_steps.leaf_decrease(problem, j, w, gradient, lam, new)


@njit(cache=True, inline="always")
def linear_step(problem, state, j, lam):
    """The move of linear term j's weight (``c_j > 0``): its coordinate minimisation under the curvature bound, or
    the Poisson loss's proximal Newton steps on its exact loss."""
    if problem.loss == poisson.CODE:
        return poisson.linear_step(problem, state, j, lam)
    return quadratic_steps.leaf_minimum(problem, j, state.w[j], leaf_gradient(problem, state, j), lam) - state.w[j]


@njit(cache=True, inline="always")
def block_steps(problem, t, w, gradient, lam, lam_f, inner_iters, out):
    """A fused block's update from ``w`` (``gradient`` the block's) into ``out``; returns its measure."""
    if problem.loss == poisson.CODE:
        return poisson.block_steps(problem, t, w, gradient, lam, lam_f, out)
    return quadratic_steps.block_steps(problem, t, w, gradient, lam, lam_f, inner_iters, out)


@njit(cache=True)
def may_extrapolate(problem, leaves, weights):
    """Whether an Anderson step may try ``weights`` on ``leaves``: the Poisson loss's log rates past
    ``MAX_AMOUNT`` could overflow exp."""
    if problem.loss == poisson.CODE:
        return poisson.within_bound(problem, leaves, weights)
    return True
