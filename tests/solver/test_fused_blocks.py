"""Fused block updates: the weighted fusion prox and leaves held at zero."""

from fractions import Fraction

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from solver import TreeEnsemble, fit_path, leaf_matrix
from solver.losses.quadratic_steps import _block_model
from solver.penalties import (
    L1,
    MCP,
    block_penalty,
    block_penalty_change,
    fused_lasso_prox,
    weighted_fused_lasso_prox,
)


def _weighted_fused_lasso_by_qp(z, weights, lam):
    cp = pytest.importorskip("cvxpy")
    b = cp.Variable(len(z))
    cost = 0.5 * cp.sum(cp.multiply(weights, cp.square(b - z))) + lam * cp.norm1(cp.diff(b))
    cp.Problem(cp.Minimize(cost)).solve()
    return b.value


@pytest.mark.parametrize("seed", range(6))
def test_weighted_fused_lasso_prox_matches_qp(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 12))
    z, weights, lam = 2 * rng.normal(size=n), rng.uniform(0.2, 3.0, size=n), rng.uniform(0.05, 2.0)
    out = np.empty(n)
    weighted_fused_lasso_prox(z, weights, lam, out)
    np.testing.assert_allclose(out, _weighted_fused_lasso_by_qp(z, weights, lam), atol=1e-5)
    unit, plain = np.empty(n), np.empty(n)
    weighted_fused_lasso_prox(z, np.ones(n), lam, unit)
    fused_lasso_prox(z, lam, plain)
    np.testing.assert_allclose(unit, plain, atol=1e-12)


def test_a_heavy_weight_holds_its_value_and_splits_the_chain():
    z = np.array([1.0, 0.0, 1.2, -0.5, 0.1])
    weights = np.array([1.0, 1e9, 1.0, 1.0, 1.0])
    out = np.empty(5)
    weighted_fused_lasso_prox(z, weights, 0.3, out)
    assert abs(out[1]) < 1e-8
    assert out[0] == pytest.approx(0.7)  # its only fusion term is 0.3 |b_0 - 0|
    right = np.empty(4)  # the chain right of the held leaf is the chain (0 held, z_2, z_3, z_4)
    weighted_fused_lasso_prox(np.array([0.0, 1.2, -0.5, 0.1]), np.array([1e9, 1.0, 1.0, 1.0]), 0.3, right)
    np.testing.assert_allclose(out[2:], right[1:], atol=1e-8)


def _exact_block_penalty(theta, lam, gamma, penalty, lam_f):
    """``block_penalty`` in rational arithmetic (the floats' exact values)."""
    lam, gamma, lam_f = Fraction(lam), Fraction(gamma), Fraction(lam_f)
    total = Fraction(0)
    for k, x in enumerate(map(Fraction, theta)):
        a = abs(x)
        if penalty == L1:
            total += lam * a
        else:
            total += lam * a - a * a / (2 * gamma) if a <= gamma * lam else gamma * lam * lam / 2
        if k > 0:
            total += lam_f * abs(x - Fraction(theta[k - 1]))
    return total


@pytest.mark.parametrize("penalty", [L1, MCP])
@pytest.mark.parametrize("seed", range(4))
def test_block_penalty_change_is_exact_to_the_moves(penalty, seed):
    """The change of a block's penalties is summed term by term: its error scales with the move, not with the
    penalties (whose difference of totals loses eps * 300 here, far above the change itself)."""
    rng = np.random.default_rng(seed)
    n, lam, lam_f, gamma = 8, 0.7, 1.3, 3.0
    old = rng.choice([-100.0, -2.0, -1e-9, 0.0, 1e-9, 1.5, 2.1, 100.0], size=n) + rng.normal(size=n) * 1e-3
    old[3] = old[2]  # a fused pair
    old[5] = 0.0
    moves = rng.normal(size=n) * 1e-9
    moves[3] = moves[2]  # it stays fused
    new = old + moves
    old[6], new[6] = 3e-10, -4e-10  # a sign change
    settings = (lam, gamma, penalty, lam_f)
    exact = _exact_block_penalty(new, *settings) - _exact_block_penalty(old, *settings)
    ours = block_penalty_change(old, new, *settings)
    scale = (lam + 2 * lam_f) * np.abs(new - old).sum()
    assert abs(Fraction(ours) - exact) <= 1e-14 * scale
    if penalty == L1:  # the difference of the totals has no such accuracy
        totals = block_penalty(new, *settings) - block_penalty(old, *settings)
        assert abs(Fraction(totals) - exact) > 1e3 * abs(Fraction(ours) - exact)


def test_a_block_step_below_the_rounding_of_its_penalties_lowers_the_model():
    """Two leaves at +-100 (L1 1, fusion 0.5, curvature 1), the first's gradient 1e-9 past stationary: the proximal
    step moves it by 1e-9 and lowers the block model by 5e-19, under the 6e-14 rounding of its penalties' 300."""
    w = np.array([100.0, -100.0])
    gradient = np.array([-1.5 - 1e-9, 1.5])
    curvature = np.ones(2)
    point = w - gradient
    theta = np.empty(2)
    fused_lasso_prox(point, 0.5, theta)
    theta = np.sign(theta) * np.maximum(np.abs(theta) - 1.0, 0.0)
    assert theta[0] > w[0] and theta[1] == w[1]
    move, slack = theta[0] - w[0], -(gradient[0] + 1.5)  # both exact
    decrease = -_block_model(theta, w, gradient, curvature, 1.0, 0.0, L1, 0.5)
    assert decrease == pytest.approx(slack * move - 0.5 * move * move, rel=1e-9)
    # the difference of the two totals, as the model was summed before, is off by far more than the decrease: its
    # sign, which decides the step, was the rounding's
    totals = block_penalty(theta, 1.0, 0.0, L1, 0.5) - block_penalty(w, 1.0, 0.0, L1, 0.5)
    assert abs(totals + gradient @ (theta - w) + 0.5 * move * move + decrease) > 1e3 * decrease


@pytest.fixture(scope="module")
def forest_rows():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(600, 5))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * (X[:, 2] > 0) + 0.2 * rng.normal(size=600)
    forest = TreeEnsemble.from_sklearn(
        RandomForestRegressor(n_estimators=30, max_depth=4, max_features=0.6, random_state=0).fit(X, y)
    )
    return leaf_matrix(forest, X), y


def test_fused_paths_with_leaves_held_at_zero_converge(forest_rows):
    """Leaves below min_support are held at zero inside fused trees; every step converges (a fusion prox that
    fused them with their neighbours refused its own step and kept the block's measure above tol)."""
    M, y = forest_rows
    counts = M.column_counts()
    assert (counts < 15).any()
    for fusion_ratio in (0.5, 1.0, 2.0):
        result = fit_path(M, y, n_lambdas=30, min_support=15, fusion_ratio=fusion_ratio, max_iter=2000, patience=None)
        assert all(step.converged for step in result.steps), fusion_ratio
        objectives = [step.objective for step in result.steps]
        assert np.all(np.isfinite(objectives))
