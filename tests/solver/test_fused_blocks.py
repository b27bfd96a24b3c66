"""Fused block updates: the weighted fusion prox and leaves held at zero."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from solver import TreeEnsemble, fit_path, leaf_matrix
from solver.penalties import fused_lasso_prox, weighted_fused_lasso_prox


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
