"""Greedy block coordinate descent (GBCD) for the FIRE objective, one tree per block.

Objective, with sample weights ``s`` (normalised by the caller to sum to n) and an unpenalised intercept b::

    loss(b + M w) + sum_j P(w_j; lam, gamma_j) + lam_f sum_t ||D_t w_t||_1

where the loss is one of ``solver.losses`` (squared, logistic, Poisson: one weight per rule; the multinomial loss has
its own solver, ``solver.losses.multinomial_gbcd``). The kernels here never name a loss: the leaf gradient, a leaf
move, the loss value, the intercept and every leaf, linear-term and fused-block step come from the dispatch by the
problem's loss code, ``solver.losses.kernels``. A loss with a curvature bound takes steps that minimise a quadratic
with ``c_j``, a bound on the loss's curvature in ``w_j`` (``solver.losses.quadratic_steps``: exact for the squared
loss, above the logistic loss, so every accepted step lowers the true objective either way); a loss without one
(Poisson) brings exact steps of its own, and its ``c_j`` only scales MCP and the stationarity measures, which are
computed from the quadratic model for every loss.

Structure used throughout (see docs/solver-api.md): every row falls in exactly one leaf per tree, so column
j of M is ``v_j`` on the rows of leaf j and zero elsewhere, and the Gram matrix of a block is diagonal,
``c_j = S_j v_j^2`` with ``S_j`` the weighted row count of leaf j. The solver keeps, per tree, the rows
sorted by leaf (``leaf_rows``; the rows of global leaf j are ``leaf_rows[leaf_ptr[j]:leaf_ptr[j + 1]]``), so
a leaf's gradient ``-v_j (sum_{i in leaf j} s_i residual_i - b S_j)`` and a change of its weight both cost
O(S_j), a block's O(n), and the full gradient O(n T).

Blocks and candidates (``solver.candidates``). A block is whatever set of columns partitions (part of) the rows:
the leaves of a tree (the paper's), the nodes of one level of a tree (rules from every node: a row that ended in a
shallower leaf is in no column of that level, and nothing here assumes every row is in some column), or one linear
term (a block of one column whose entries vary by row, ``e_ij`` in ``solver.problem``, read only for such
columns). Fusion runs between neighbouring columns of a block, left to right along a tree's leaves or a level's
nodes; a one-column block has nothing to fuse, so a linear term's update is its coordinate minimisation whatever
``lam_f``.

Bundles (``solver.problem``). The kernels take two typed named tuples, which numba passes as structs and
caches with the kernels: ``Problem``, everything fixed per training set and penalty (``leaf_rows`` and
``leaf_ptr``, v, s, S, c, ``L_t = max_{j in t} c_j``, the per-tree and per-leaf MCP concavities, the penalty
code), built once by ``Problem.from_leaf_matrix``; and ``State``, the point being optimised, updated in
place and warm-starting the next lambda: ``w`` (R,) the leaf weights, ``residual`` (n,) = ``y - M w``
(without the intercept) or the loss's own residual, ``intercept`` [b] and ``residual_sum`` [sum_i s_i residual_i]
(each loss module says what its fields hold). The entry points are ``solve_greedy`` and ``solve_cyclic`` (problem,
state, lam, lam_f, tol, max_iter, inner_iters), ``objective_value`` and ``lambda_max``; the loss gradient of a leaf
is ``solver.losses.kernels.leaf_gradient``, the only place its formula is written. Penalties are picked by code
(``solver.penalties``), and a code the kernels do not know raises. A call that takes the bundles costs a reference
count increment and decrement per array in them, so the per-leaf work runs in loops inside such calls, never one
such call per leaf: ``leaf_gradient``, called for every leaf a loop visits, is kept small and free of branches on
the loss so that LLVM inlines it (where it did not, squared-loss paths ran 1.3-1.9x slower, and a test checks it),
and the per-leaf steps of the dispatch are inlined by numba; ``move_leaf``, called only where a weight changes,
holds every loss's loop and is not inlined (a few percent on move-heavy passes).

Block updates. Without fusion a block's problem is separable, so its exact minimisation is one exact
(global, also in MCP's nonconvex regime) coordinate minimisation per leaf, and leaves whose weight is zero and
whose direction entry is zero need no visit at all. With fusion a block update runs up to ``inner_iters``
proximal-gradient steps with the isotropic step ``1 / L_t`` (``L_t = max_j c_j``), each the fused-lasso prox
followed by the sparsity threshold (suppl. C.3/C.4), accepting a step only while the block objective of the
quadratic model decreases (``solver.losses.quadratic_steps``; Poisson: on its exact block objective). Either
decrease is summed as changes from the block's weights (``solver.penalties.block_penalty_change``, Poisson's loss by
``expm1``), its rounding that of the move: a step of measure m lowers the objective by about ``m^2 / (2 L_t)``,
which the difference of two totals loses in their rounding near the tolerance (the step refused pass after pass,
the block's measure stuck above ``tol``).

Block selection. The steepest-direction vector d (paper eq. 8) needs the full gradient, O(n T): as much as
a whole sweep of block updates. So each direction computation ranks the candidates by it (blocks by
``||d_t||_2`` with fusion; leaves by ``|d_j|`` without, the block ranking restricted to the leaves that can
move) and a working set (everything already nonzero plus the steepest violators) is updated pass after pass,
with Anderson extrapolation every few passes, until its own stationarity measure falls below a fraction of
``max |d|``. A solve ends at a full-gradient check where no entry of d and no leaf's or block's own proximal
move (its stationarity measure, computed from the same full gradient in O(R)) exceeds ``tol``: with fusion,
coordinate-wise d can vanish where a fused group still has to move together, and with MCP a zero leaf can
be first-order stationary while its exact coordinate minimum lies far from zero; the measures catch both. The
state keeps that last gradient, and the next lambda's solve, which starts from the very same point, begins with it
instead of a first full pass (``solver.problem.at_last_check``): a path pays one full-gradient pass per step fewer.
Cyclic selection instead sweeps all blocks until no block moves by more than ``tol``.
"""

import numpy as np
from numba import njit

from ._tree_kernels import column_sums
from .losses import quadratic_steps
from .losses.kernels import (
    block_steps,
    fit_intercept,
    gradient_of_sum,
    intercept_gradient,
    leaf_decrease,
    leaf_gradient,
    leaf_minimum,
    linear_step,
    loss_value,
    may_extrapolate,
    move_leaf,
    resync,
    sync_intercept,
)
from .penalties import penalty_subdifferential, penalty_total
from .problem import at_last_check, mark_checked

ANDERSON_MEMORY = 5
ANDERSON_REACH = 100.0  # an extrapolation may move weights this many times the span of the history it extrapolates
MIN_WORKING_SET = 32
# a working set is solved to this fraction of the largest violation before the next full-gradient check: the check
# costs O(n T), a working-set pass O(n) per tree in it, so a tight inner solve saves checks (friedman1, 1e5 rows, 500
# trees of depth 5, to 50 rules: 100 checks at 0.3, 63 at 0.01, the passes the same)
INNER_TOL_FRACTION = 0.01
SHRINK_FRACTION = 0.1


@njit(cache=True)
def full_gradient(problem, state, out):
    """Every leaf's loss gradient into ``out`` (R,): O(n T), the rule columns' sums row by row in parallel
    (``solver._tree_kernels.column_sums``), the linear terms' column by column."""
    column_sums(problem.leaves, problem.offsets, problem.sample_weight * state.residual, out[: problem.first_linear])
    for j in range(problem.first_linear):
        out[j] = gradient_of_sum(problem, state, j, out[j])
    for j in range(problem.first_linear, out.shape[0]):
        out[j] = leaf_gradient(problem, state, j)


@njit(cache=True)
def lambda_max(problem, state):
    """``max_j |grad_j|``: at ``w = 0`` the smallest lambda_s for which zero is stationary (without fusion)."""
    gradient = np.empty(problem.values.shape[0])
    full_gradient(problem, state, gradient)
    return np.abs(gradient).max()


@njit(cache=True)
def _add_fusion_subdifferential(lo, hi, difference, lam_f):
    """Add ``lam_f * d|difference|`` (an interval where the difference is zero) to ``[lo, hi]``."""
    if difference > 0.0:
        return lo + lam_f, hi + lam_f
    if difference < 0.0:
        return lo - lam_f, hi - lam_f
    return lo - lam_f, hi + lam_f


@njit(cache=True)
def _distance_to_interval(x, lo, hi):
    if x < lo:
        return lo - x
    if x > hi:
        return x - hi
    return 0.0


@njit(cache=True)
def direction_vector(problem, w, gradient, lam, lam_f, out):
    """Fill ``out`` with the steepest-direction vector d (R,) at ``w`` from the full ``gradient``:
    ``d_j = min_{s in dh_j + dg_j} |grad_j + s|`` (paper eq. 8), the distance of ``-grad_j`` to the
    subdifferential of the penalties. Fusion subgradients count only differences to neighbours within the
    same tree. A leaf whose column is zero (no training rows, or below min_support) is held at zero: 0 (where
    its neighbours are on one side of it, ``2 lam_f > lam`` put its fusion subgradients beyond its sparsity
    interval, and fused paths past ``fusion_ratio`` 0.5 never passed their checks)."""
    offsets = problem.offsets
    for t in range(offsets.shape[0] - 1):
        first = offsets[t]
        last = offsets[t + 1] - 1
        for j in range(first, last + 1):
            lo, hi = penalty_subdifferential(w[j], lam, problem.block_gamma[t], problem.penalty)
            if lam_f > 0.0:
                if j > first:
                    lo, hi = _add_fusion_subdifferential(lo, hi, w[j] - w[j - 1], lam_f)
                if j < last:
                    lo, hi = _add_fusion_subdifferential(lo, hi, w[j] - w[j + 1], lam_f)
            # a leaf whose column is zero is held at zero: no subgradient has to balance its gradient
            out[j] = _distance_to_interval(-gradient[j], lo, hi) if problem.curvature[j] > 0.0 else 0.0


@njit(cache=True)
def update_block(problem, state, t, lam, lam_f, inner_iters):
    """Fused block update from the current residual; returns the block's stationarity measure."""
    first = problem.offsets[t]
    if first >= problem.first_linear:  # a linear term: a block of one column, which fusion does not touch
        return _linear_update(problem, state, first, lam)
    size = problem.offsets[t + 1] - first
    gradient = np.empty(size)
    for k in range(size):
        gradient[k] = leaf_gradient(problem, state, first + k)
    new = np.empty(size)
    measure = block_steps(problem, t, state.w, gradient, lam, lam_f, inner_iters, new)
    for k in range(size):
        delta = new[k] - state.w[first + k]
        if delta != 0.0:
            move_leaf(problem, state, first + k, delta)
    return measure


@njit(cache=True)
def _linear_update(problem, state, j, lam):
    """A linear term's update (``solver.losses.kernels.linear_step``); returns its measure."""
    c = problem.curvature[j]
    if c <= 0.0:
        return 0.0
    delta = linear_step(problem, state, j, lam)
    if delta != 0.0:
        move_leaf(problem, state, j, delta)
    return c * abs(delta)


@njit(cache=True)
def block_measures(problem, w, gradient, lam, lam_f, out):
    """Every block's stationarity measure at ``w`` from the full ``gradient``: O(R)."""
    scratch = np.empty(w.shape[0])
    offsets = problem.offsets
    for t in range(offsets.shape[0] - 1):
        first, end = offsets[t], offsets[t + 1]
        out[t] = quadratic_steps.block_steps(problem, t, w, gradient[first:end], lam, lam_f, 1, scratch[first:end])


@njit(cache=True)
def leaf_measures(problem, w, gradient, lam, moves, gains):
    """Per leaf, from the full ``gradient``: the curvature-scaled move of its exact coordinate minimisation
    (its stationarity measure; unlike d it also sees MCP's nonconvex jumps away from a first-order
    stationary zero) and the objective decrease that minimisation would bring."""
    for j in range(w.shape[0]):
        c = problem.curvature[j]
        if c <= 0.0:
            moves[j] = 0.0
            gains[j] = 0.0
            continue
        new = leaf_minimum(problem, j, w[j], gradient[j], lam)
        moves[j] = c * abs(new - w[j])
        gains[j] = max(leaf_decrease(problem, j, w[j], gradient[j], lam, new), 0.0)


@njit(cache=True)
def stationarity(problem, state, lam, lam_f):
    """The largest first-order stationarity measure at ``state`` from a full gradient (O(n T)): the steepest
    direction, the blocks' proximal moves where fused, the intercept's gradient. The losses that take no GBCD steps of
    their own certify their steps with it (``solver.losses.newton``). Unlike a greedy solve's check it leaves out the
    leaves' measures of their exact coordinate minimisation: under MCP those jump to the minimiser of a quadratic with
    curvature ``c_j``, which bounds the loss's curvature for the losses GBCD steps on, but not for these (a point the
    measure would move may be a minimum of the true loss along that coordinate)."""
    n_leaves = problem.values.shape[0]
    gradient = np.empty(n_leaves)
    full_gradient(problem, state, gradient)
    direction = np.empty(n_leaves)
    direction_vector(problem, state.w, gradient, lam, lam_f, direction)
    largest = max(direction.max(), abs(intercept_gradient(problem, state)))
    if lam_f > 0.0:
        measures = np.empty(problem.offsets.shape[0] - 1)
        block_measures(problem, state.w, gradient, lam, lam_f, measures)
        largest = max(largest, measures.max())
    return largest


@njit(cache=True)
def objective_value(problem, state, lam, lam_f):
    """The FIRE objective at ``state``."""
    return loss_value(problem, state) + penalty_total(problem, state.w, lam, lam_f)


@njit(cache=True)
def _pass(problem, state, units, visit, lam, lam_f, inner_iters, keep_above):
    """One pass of updates over the ``units`` (blocks when fused, ``lam_f > 0``, else leaves) still marked in
    ``visit``; returns the largest measure. A unit whose measure is at most ``keep_above`` is unmarked: it
    sits out the rest of this working set's passes (the next full-gradient check looks at every unit again).

    A leaf's update is the exact minimisation over its weight, its measure the curvature-scaled move. It is
    written out here rather than called per leaf: a call that takes the bundles costs a reference count
    increment and decrement per array in them, more than a leaf's own work on deep forests."""
    worst = 0.0
    for k in range(units.shape[0]):
        if not visit[k]:
            continue
        if lam_f > 0.0:
            measure = update_block(problem, state, units[k], lam, lam_f, inner_iters)
        elif units[k] >= problem.first_linear:
            measure = _linear_update(problem, state, units[k], lam)
        else:
            j = units[k]
            c = problem.curvature[j]
            new = leaf_minimum(problem, j, state.w[j], leaf_gradient(problem, state, j), lam) if c > 0.0 else 0.0
            delta = new - state.w[j]
            if delta != 0.0:
                move_leaf(problem, state, j, delta)
            measure = max(c, 1e-300) * abs(delta)
        visit[k] = measure > keep_above
        worst = max(worst, measure)
    return worst


@njit(cache=True)
def solve_cyclic(problem, state, lam, lam_f, tol, max_iter, inner_iters):
    """Cyclic BCD: sweep all blocks (all leaves without fusion) until none moves by more than ``tol``.

    Returns (passes, converged); ``max_iter`` caps the sweeps.
    """
    sync_intercept(problem, state, tol)
    n_units = problem.offsets.shape[0] - 1 if lam_f > 0.0 else problem.values.shape[0]
    everything = np.arange(n_units)
    visit = np.ones(n_units, dtype=np.bool_)  # keep_above = -1 below: every unit stays in every sweep
    for passes in range(1, max_iter + 1):
        worst = _pass(problem, state, everything, visit, lam, lam_f, inner_iters, -1.0)
        fit_intercept(problem, state, tol)
        if worst <= tol:
            return passes, True
    return max_iter, False


@njit(cache=True)
def _anderson_step(problem, state, history, leaves, lam, lam_f):
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
    reach = np.abs(history[n_steps] - history[0]).max()
    if not np.abs(extrapolated - history[n_steps]).max() <= ANDERSON_REACH * reach:
        # a nearly singular history extrapolates far off (or to inf): a move there and back would leave the
        # residual to rounding (or NaN), so it is not tried
        return False
    if not may_extrapolate(problem, leaves, extrapolated):
        return False
    before = objective_value(problem, state, lam, lam_f)
    for k in range(leaves.shape[0]):
        j = leaves[k]
        if extrapolated[k] != state.w[j]:
            move_leaf(problem, state, j, extrapolated[k] - state.w[j])
    if objective_value(problem, state, lam, lam_f) < before:
        return True
    for k in range(leaves.shape[0]):
        j = leaves[k]
        if history[n_steps, k] != state.w[j]:
            move_leaf(problem, state, j, history[n_steps, k] - state.w[j])
    resync(problem, state)
    return False


@njit(cache=True)
def _working_set(problem, w, direction, measures, gains, fused):
    """Units to update until the next direction computation: all nonzero ones plus the steepest violators.

    Blocks (fused) are ranked by ``||d_t||_2``, leaves by ``|d_j|``, either raised to its own stationarity
    measure where that is larger. Leaves are visited in order of the objective decrease their own exact
    minimisation would bring, largest first (with MCP the first leaves to enter shape which others follow).
    """
    offsets = problem.offsets
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
        size = max(MIN_WORKING_SET, 2 * np.count_nonzero(w))
    order = np.argsort(-scores)
    size = min(size, order.shape[0])
    while size > 0 and scores[order[size - 1]] == 0.0:
        size -= 1
    chosen = order[:size]
    if fused:
        return np.sort(chosen)
    return chosen[np.argsort(-gains[chosen], kind="mergesort")]


@njit(cache=True)
def leaves_of(problem, blocks):
    """The global leaf indices of ``blocks``, block after block."""
    offsets = problem.offsets
    n_leaves = 0
    for t in blocks:
        n_leaves += offsets[t + 1] - offsets[t]
    leaves = np.empty(n_leaves, dtype=np.int64)
    position = 0
    for t in blocks:
        for j in range(offsets[t], offsets[t + 1]):
            leaves[position] = j
            position += 1
    return leaves


@njit(cache=True)
def _solve_working_set(problem, state, units, lam, lam_f, inner_iters, inner_tol, max_passes):
    """Passes over the working set ``units`` until its largest measure is at most ``inner_tol`` (or
    ``max_passes``), with shrinking and an Anderson step every ``ANDERSON_MEMORY`` passes; returns the passes."""
    leaves = leaves_of(problem, units) if lam_f > 0.0 else units
    history = np.empty((ANDERSON_MEMORY + 1, leaves.shape[0]))
    history[0] = state.w[leaves]
    n_history = 1
    visit = np.ones(units.shape[0], dtype=np.bool_)
    passes = 0
    while passes < max_passes:
        worst = _pass(problem, state, units, visit, lam, lam_f, inner_iters, SHRINK_FRACTION * inner_tol)
        fit_intercept(problem, state, inner_tol)
        passes += 1
        if worst <= inner_tol:
            break
        history[n_history] = state.w[leaves]
        n_history += 1
        if n_history == ANDERSON_MEMORY + 1:
            _anderson_step(problem, state, history, leaves, lam, lam_f)
            history[0] = state.w[leaves]
            n_history = 1
    return passes


@njit(cache=True)
def solve_greedy(problem, state, lam, lam_f, tol, max_iter, inner_iters):
    """GBCD from ``state`` until stationary: full-gradient checks alternating with working-set solves.

    Returns (passes, converged); ``max_iter`` caps the passes: working-set passes and full-gradient checks. The
    first check reuses the gradient the state kept where it starts from the point of its last check
    (``solver.problem.at_last_check``: a path's warm start), and counts no pass.
    """
    fused = lam_f > 0.0
    n_leaves = problem.values.shape[0]
    gradient = state.gradient
    direction = np.empty(n_leaves)
    gains = np.zeros(n_leaves)
    measures = np.empty(problem.offsets.shape[0] - 1 if fused else n_leaves)
    passes = 0
    first = True
    while passes < max_iter:
        sync_intercept(problem, state, tol)
        if not (first and at_last_check(state)):  # a warm start from the last step's final check: its gradient
            full_gradient(problem, state, gradient)
            mark_checked(state)
            passes += 1
        first = False
        direction_vector(problem, state.w, gradient, lam, lam_f, direction)
        if fused:
            block_measures(problem, state.w, gradient, lam, lam_f, measures)
        else:
            leaf_measures(problem, state.w, gradient, lam, measures, gains)
        largest = max(direction.max(), measures.max(), abs(intercept_gradient(problem, state)))
        if largest <= tol:
            return passes, True
        units = _working_set(problem, state.w, direction, measures, gains, fused)
        inner_tol = max(tol, INNER_TOL_FRACTION * largest)
        passes += _solve_working_set(problem, state, units, lam, lam_f, inner_iters, inner_tol, max_iter - passes)
    return passes, False
