"""The Poisson loss (counts, log link) against exact references: cvxpy for L1 with and without fusion,
proximal gradient from the same start for MCP; target checks; exposure as sample weights."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from solver import TreeEnsemble
from solver.fitting import fit_rules
from solver.leaf_matrix import leaf_matrix
from solver.path import fit_path
from solver.problem import Problem
from solver.spec import ForestSpec, PathSpec
from tests.support.references import mcp_prox, poisson_mcp_objective, poisson_objective, solve_poisson

EXACT = {"scaling": "leaf_value", "min_support": 0, "tol": 1e-7, "max_iter": 100_000, "polish": False}


def _problem(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = rng.poisson(np.exp(0.5 * X[:, 0] - 0.3 * X[:, 1])).astype(float)
    forest = TreeEnsemble.from_sklearn(RandomForestRegressor(n_estimators=4, max_depth=2, random_state=0).fit(X, y))
    return leaf_matrix(forest, X), y, forest.leaf_offsets


@pytest.mark.parametrize("lam_f", [0.0, 2.0])
def test_l1_poisson_matches_cvxpy(lam_f):
    matrix, y, offsets = _problem()
    dense, weights = matrix.to_csc().toarray(), np.ones(len(y))
    lambdas = (5.0, 2.0, 0.5)
    path = fit_path(matrix, y, loss="poisson", penalty="l1", lambdas=lambdas, lambda_f=lam_f, **EXACT)
    for k, lam in enumerate(lambdas):
        _, _, optimum = solve_poisson(dense, y, weights, offsets, lam, lam_f)
        ours = poisson_objective(dense, y, weights, offsets, path.coef(k), path.intercepts[k], lam, lam_f)
        assert ours == pytest.approx(path.steps[k].objective, rel=1e-10)
        assert abs(ours - optimum) <= 1e-5 * abs(optimum)
        assert path.steps[k].converged


def _proximal_gradient_mcp(dense, y, gammas, lam, w, b, n_iter=400):
    """Reference: proximal gradient with backtracking on the Poisson MCP objective (no fusion) from (w, b)."""

    def objective(w, b):
        eta = np.minimum(b + dense @ w, 700.0)  # a trial step far too long: a huge value, not an overflow
        a = np.abs(w)
        penalty = np.where(a <= gammas * lam, lam * a - a**2 / (2 * gammas), gammas * lam**2 / 2).sum()
        return float((np.exp(eta) - y * eta).sum() + penalty)

    step = 1.0
    for _ in range(n_iter):
        mu = np.exp(b + dense @ w)
        g, g0 = dense.T @ (mu - y), (mu - y).sum()
        current = objective(w, b)
        while True:
            new = mcp_prox(w - step * g, step, lam, gammas)
            new_b = b - step * g0
            if objective(new, new_b) <= current - 1e-12 * abs(current) or step < 1e-12:
                break
            step *= 0.5
        w, b = new, new_b
        step *= 1.5
    return objective(w, b)


def test_mcp_poisson_no_worse_than_proximal_gradient_from_the_same_point():
    matrix, y, offsets = _problem()
    dense, weights = matrix.to_csc().toarray(), np.ones(len(y))
    path = fit_path(matrix, y, loss="poisson", penalty="mcp", fusion_ratio=0, n_lambdas=12, **EXACT)
    problem = Problem.from_leaf_matrix(matrix, y, weights, "poisson", "mcp", 1.1, "block")
    for k in range(1, len(path.steps)):
        lam = path.steps[k].lambda_s
        ours = poisson_mcp_objective(
            dense, y, weights, offsets, path.coef(k), path.intercepts[k], lam, problem.leaf_gamma, 0.0
        )
        assert ours == pytest.approx(path.steps[k].objective, rel=1e-9)
        reference = _proximal_gradient_mcp(dense, y, problem.leaf_gamma, lam, path.coef(k - 1), path.intercepts[k - 1])
        assert ours <= reference * 1.01


def test_fused_mcp_poisson_path_converges_and_records_deviance():
    matrix, y, _ = _problem()
    path = fit_path(matrix, y, loss="poisson", n_lambdas=15, min_support=0)
    assert all(step.converged for step in path.steps)
    assert path.steps[0].n_rules == 0 and path.steps[-1].n_rules > 0
    mean = y.mean()
    deviance = 2 * np.mean(np.where(y > 0, y * np.log(np.where(y > 0, y, 1) / mean), 0) - (y - mean))
    assert path.steps[0].train_loss == pytest.approx(deviance, rel=1e-9)
    assert path.steps[-1].train_loss < path.steps[0].train_loss
    assert path.steps[0].train_mae == pytest.approx(np.mean(np.abs(y - mean)), rel=1e-9)


def test_exposure_as_sample_weight_equals_repeated_rows():
    """scikit-learn's convention: y = count / exposure, sample_weight = exposure. Integer exposures give the
    fit of each row repeated exposure times with its rate as target. Under L1, whose optimum is unique: MCP's
    paths may part at a step where two local minima are near-ties and the rounding of the two problems differs."""
    matrix, y, _ = _problem(n=120)
    exposure = np.random.default_rng(1).integers(1, 4, size=len(y)).astype(float)
    settings = dict(EXACT, loss="poisson", penalty="l1", n_lambdas=8)
    weighted = fit_path(matrix, y / exposure, sample_weight=exposure, **settings)
    repeat = np.repeat(np.arange(len(y)), exposure.astype(int))
    repeated_matrix = type(matrix)(np.ascontiguousarray(matrix.leaves[repeat]), matrix.values, matrix.offsets)
    repeated = fit_path(repeated_matrix, (y / exposure)[repeat], **settings)
    for k in range(8):
        np.testing.assert_allclose(weighted.coef(k), repeated.coef(k), atol=1e-6)


def test_targets_are_checked():
    matrix, y, _ = _problem()
    with pytest.raises(ValueError, match="non-negative"):
        fit_path(matrix, y - 1, loss="poisson")
    with pytest.raises(ValueError, match="every count is 0"):
        fit_path(matrix, np.zeros_like(y), loss="poisson")


def test_fused_mcp_leaf_of_zero_counts_stays_finite():
    """A leaf whose rows count nothing has no finite minimiser in MCP's flat region: its steps stop at the bound
    (solver.losses.base.MAX_AMOUNT) and a tried-and-undone Anderson step leaves no drift in the residual sum (this fit,
    the service worker's warm-up, ran log rates to 50 and its intercept step into the log of a negative number)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3))
    y = np.floor(np.exp(X[:, 0] + 0.1 * rng.normal(size=64)))
    spec = PathSpec(loss="poisson", penalty="mcp", fusion_ratio=1.0, n_lambdas=3)
    fit = fit_rules(X, y, spec, forest=ForestSpec(n_estimators=3, max_depth=2, max_features=None))
    assert all(np.isfinite(step.train_loss) and np.isfinite(step.val_loss) for step in fit.path.steps)
    assert np.all(np.isfinite(fit.rules.predict(X)))
