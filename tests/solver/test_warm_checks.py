"""A solve that starts where the last one's final check left the state reuses that check's gradient
(``solver.problem.at_last_check``): the path's warm start skips a pass over every row of every tree, and changes
no bit of the result."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from solver import TreeEnsemble, gbcd, leaf_matrix
from solver.losses import multinomial_gbcd
from solver.losses.kernels import move_leaf
from solver.losses.multinomial_gbcd import ClassState
from solver.problem import Problem, State

RELATIVE_TOL, MAX_ITER, INNER_ITERS = 1e-5, 10_000, 3  # the path default is 1e-4


def _targets(loss, X, rng):
    signal = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2]
    if loss == "squared":
        return signal + 0.3 * rng.normal(size=len(X))
    if loss == "logistic":
        return (signal + 0.5 * rng.normal(size=len(X)) > 0).astype(float)
    if loss == "poisson":
        return rng.poisson(np.exp(0.5 * signal)).astype(float)
    return np.digitize(signal + 0.3 * rng.normal(size=len(X)), [-0.5, 0.5]).astype(float)


def _setup(loss):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 5))
    y = _targets(loss, X, rng)
    forest = TreeEnsemble.from_sklearn(
        RandomForestRegressor(n_estimators=12, max_depth=3, max_features=0.6, random_state=0).fit(X, y)
    )
    problem = Problem.from_leaf_matrix(leaf_matrix(forest, X), y, np.ones(len(y)), loss, "mcp", 3.0, "block")
    if loss == "multinomial":
        return problem, ClassState.initial(problem, 3), multinomial_gbcd
    return problem, State.initial(problem), gbcd


def _copy(state):
    return type(state)(*(field.copy() for field in state))


@pytest.mark.parametrize(
    ("loss", "fusion"), [("squared", 0.0), ("squared", 0.5), ("logistic", 0.0), ("poisson", 0.3), ("multinomial", 0.0)]
)
def test_a_warm_start_reuses_the_last_checks_gradient_and_changes_nothing(loss, fusion):
    problem, state, kernels = _setup(loss)
    lam_max = kernels.lambda_max(problem, state)
    lam, tol = 0.3 * lam_max, RELATIVE_TOL * lam_max
    passes, converged = kernels.solve_greedy(problem, state, lam, fusion * lam, tol, MAX_ITER, INNER_ITERS)
    assert converged, passes
    assert passes > 0 and np.count_nonzero(state.w)

    fresh = np.empty_like(state.gradient)
    kernels.full_gradient(problem, state, fresh)
    assert np.array_equal(state.gradient, fresh)  # the kept gradient is the state's, bit for bit

    # the same lambda again: stationary at its first check, which costs no pass
    w = state.w.copy()
    assert kernels.solve_greedy(problem, state, lam, fusion * lam, tol, MAX_ITER, INNER_ITERS) == (0, True)
    assert np.array_equal(state.w, w)

    # the next lambda from the kept gradient, and from a state that forgot it: the same bits, one pass fewer
    reused, forgot = state, _copy(state)
    forgot.checked[:] = np.nan
    lam = 0.15 * lam_max
    reused_passes, converged = kernels.solve_greedy(problem, reused, lam, fusion * lam, tol, MAX_ITER, INNER_ITERS)
    forgot_passes, _ = kernels.solve_greedy(problem, forgot, lam, fusion * lam, tol, MAX_ITER, INNER_ITERS)
    assert converged
    assert reused_passes == forgot_passes - 1
    for kept, computed in zip(reused, forgot):
        assert np.array_equal(kept, computed)


def test_a_state_moved_since_its_check_computes_the_gradient_afresh():
    problem, state, _ = _setup("squared")
    lam_max = gbcd.lambda_max(problem, state)
    lam, tol = 0.3 * lam_max, RELATIVE_TOL * lam_max
    gbcd.solve_greedy(problem, state, lam, 0.0, tol, MAX_ITER, INNER_ITERS)
    moved = _copy(state)
    j = int(np.flatnonzero(moved.w)[0])
    move_leaf(problem, moved, j, 0.5)  # a leaf moved from outside the solver: the kept gradient is stale
    passes, converged = gbcd.solve_greedy(problem, moved, lam, 0.0, tol, MAX_ITER, INNER_ITERS)
    assert converged and passes > 0
    assert np.abs(moved.w - state.w).max() < 1e-5  # both stationary within tol
    moved_value, value = (gbcd.objective_value(problem, s, lam, 0.0) for s in (moved, state))
    assert moved_value == pytest.approx(value, rel=1e-9)
