"""Fused block updates: the weighted fusion prox and leaves held at zero."""

from collections import namedtuple
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from solver import TreeEnsemble, fit_path, leaf_matrix
from solver.losses import multinomial
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


def _exact_norm(row):
    """``||row||_2`` to 60 digits (a Fraction): the rows' exact sum of squares, its square root in Decimal."""
    squares = sum(Fraction(x) ** 2 for x in row)
    with localcontext() as context:
        context.prec = 60
        return Fraction((Decimal(squares.numerator) / Decimal(squares.denominator)).sqrt())


def _exact_multinomial_model(theta, start, gradient, curvature, lam, gamma, penalty, lam_f):
    """``multinomial._block_model`` in rational arithmetic (norms to 60 digits): group penalties of the rows,
    per-class fusion, the quadratic model's loss from ``start``."""
    lam, gamma, lam_f = Fraction(lam), Fraction(gamma), Fraction(lam_f)
    total = Fraction(0)
    for j in range(theta.shape[0]):
        a = _exact_norm(theta[j])
        total += (
            lam * a if penalty == L1 else (lam * a - a * a / (2 * gamma) if a <= gamma * lam else gamma * lam**2 / 2)
        )
        for k in range(theta.shape[1]):
            if j > 0:
                total += lam_f * abs(Fraction(theta[j, k]) - Fraction(theta[j - 1, k]))
            step = Fraction(theta[j, k]) - Fraction(start[j, k])
            total += Fraction(gradient[j, k]) * step + Fraction(curvature[j]) / 2 * step * step
    return total


@pytest.mark.parametrize("penalty", [L1, MCP])
@pytest.mark.parametrize("seed", range(4))
def test_multinomial_block_change_is_exact_to_the_moves(penalty, seed):
    """The multinomial block model's change (group norms, per-class fusion, the quadratic loss from the block's
    start) is summed from its current weights: its error scales with the move, not with the totals."""
    rng = np.random.default_rng(seed)
    rows, classes, lam, lam_f, gamma = 6, 3, 0.7, 1.3, 3.0
    base = rng.choice([-100.0, -2.0, -1e-9, 1e-9, 1.5, 2.1, 100.0], size=(rows, classes))
    base += rng.normal(size=base.shape) * 1e-3
    base[2] = base[1]  # a fused pair of rows
    base[4] = 0.0  # a row out of the model
    start = base + rng.normal(size=base.shape) * 1e-2
    moves = rng.normal(size=base.shape) * 1e-9
    moves[2] = moves[1]
    new = base + moves
    base[5, 0], new[5, 0] = 3e-10, -4e-10  # a sign change
    gradient, curvature = rng.normal(size=base.shape), rng.uniform(0.5, 2.0, size=rows)
    settings = (lam, gamma, penalty, lam_f)
    exact = _exact_multinomial_model(new, start, gradient, curvature, *settings) - _exact_multinomial_model(
        base, start, gradient, curvature, *settings
    )
    ours = multinomial._block_change(new, base, start, gradient, curvature, *settings)
    scale = (lam + 2 * lam_f + np.abs(gradient).max() + 1.0) * np.abs(new - base).sum()
    assert abs(Fraction(ours) - exact) <= 1e-13 * scale


Problem = namedtuple("Problem", "offsets curvature lipschitz block_gamma penalty values")


def _stationary_but_for(seed, slack, lam=1.0, lam_f=0.5):
    """A multinomial block (4 rows of 3 classes, amounts ~50, curvature 1) whose gradient is ``slack`` away from
    stationary: rows and classes apart, so its L1 group and fusion subgradients are the gradients' negatives."""
    rng = np.random.default_rng(seed)
    w = np.round(rng.normal(size=(4, 3)) * 50, 3)
    gradient = -lam * w / np.linalg.norm(w, axis=1, keepdims=True)
    signs = np.sign(np.diff(w, axis=0))
    gradient[1:] -= lam_f * signs
    gradient[:-1] += lam_f * signs
    return w, gradient + slack * rng.normal(size=w.shape)


def test_a_multinomial_block_step_below_the_rounding_of_its_penalties_is_kept():
    """Blocks 1e-10 to 1e-8 from stationary (penalties 320 to 830, L1 1, fusion 0.5): the proximal step moves
    by 2e-10 to 1e-8 and lowers the model by 1e-19 to 1e-16, under the 6e-14 to 1e-13 rounding of the penalties'
    totals. Decided on the totals, 3 of these 12 first trials (63 of 200 such blocks) were refused; a step refused
    at every shortening counted the block as stationary (measure 0): a certificate of a point that is not. Summed
    from the weights (``multinomial._block_change``), every step is kept and measured."""
    lam, lam_f = 1.0, 0.5
    curvature = np.ones(4)
    problem = Problem(np.array([0, 4]), curvature, np.ones(1), np.zeros(1), L1, np.full(4, 1e-3))
    refused_by_totals = 0
    for seed in range(12):
        w, gradient = _stationary_but_for(seed, 10.0 ** (-10 + seed / 6))
        theta = np.empty_like(w)
        multinomial._fused_group_prox(w - gradient, 1.0, lam, 0.0, L1, lam_f, np.full(4, 1e300), theta)
        move = np.abs(theta - w).max()
        assert 0.0 < move < 1e-7
        settings = (lam, 0.0, L1, lam_f)
        exact = _exact_multinomial_model(theta, w, gradient, curvature, *settings) - _exact_multinomial_model(
            w, w, gradient, curvature, *settings
        )
        assert exact < 0.0  # the step lowers the model
        ours = multinomial._block_change(theta, w, w, gradient, curvature, *settings)
        assert float(exact) == pytest.approx(ours, rel=1e-4)
        refused_by_totals += multinomial._block_model(theta, w, gradient, curvature, *settings) > multinomial._penalty(
            w, *settings
        )
        out = np.empty_like(w)
        measure = multinomial._block_steps(problem, 0, w, gradient, lam, lam_f, 1, out)
        np.testing.assert_array_equal(out, theta)
        assert measure == np.sqrt(((theta - w) ** 2).sum(axis=1)).max() > 0.0
    assert refused_by_totals >= 2


def test_no_multinomial_block_near_stationary_is_measured_stationary():
    """1000 blocks 1e-13 to 1e-8 from stationary (amounts 10 to 1000): each one's first proximal step is kept and
    measured. Decided on the difference of two penalty totals, three were refused at every one of the 10 step
    shortenings and measured 0 where their step's measure was 1.6e-12, 1.5e-12 and 1.5e-9: a block certified
    stationary that was not (penalties 3359, 2036, 1525)."""
    problem = Problem(np.array([0, 4]), np.ones(4), np.ones(1), np.zeros(1), L1, np.full(4, 1e-5))
    rng = np.random.default_rng(1)
    out, theta = np.empty((4, 3)), np.empty((4, 3))
    for _ in range(1000):
        scale, slack = 10.0 ** rng.uniform(1, 3), 10.0 ** rng.uniform(-13, -8)
        w = np.round(rng.normal(size=(4, 3)) * scale, 3)
        gradient = -w / np.linalg.norm(w, axis=1, keepdims=True)
        signs = np.sign(np.diff(w, axis=0))
        gradient[1:] -= 0.5 * signs
        gradient[:-1] += 0.5 * signs
        gradient += slack * rng.normal(size=w.shape)
        measure = multinomial._block_steps(problem, 0, w, gradient, 1.0, 0.5, 1, out)
        multinomial._fused_group_prox(w - gradient, 1.0, 1.0, 0.0, L1, 0.5, np.full(4, 1e300), theta)
        assert measure > 0.0 or np.array_equal(theta, w)


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
