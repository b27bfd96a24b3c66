"""Correctness of the FIRE optimizer: proxes, direction vector, objectives against reference solvers."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import Lasso

from solver import LeafMatrix, PathSpec, TreeEnsemble, fit_path, leaf_matrix
from solver.gbcd import direction_vector, solve_cyclic, solve_greedy
from solver.penalties import L1, MCP, fused_lasso_prox, mcp_value, penalty_prox
from solver.problem import Problem, State

# the optimizer's problem exactly as the paper states it (M's columns are the leaf values, every leaf a candidate,
# the penalized weights): what the references below solve
RAW = PathSpec(scaling="leaf_value", min_support=0, polish=False)


def objective(matrix, y, w, intercept, lam, penalty="l1", gamma=None, lam_f=0.0):
    """The FIRE objective computed independently of the solver (dense, per-coordinate gammas)."""
    residual = y - intercept - matrix.matvec(w)
    total = 0.5 * residual @ residual
    if penalty == "l1":
        total += lam * np.abs(w).sum()
    else:
        a = np.abs(w)
        total += np.where(a <= gamma * lam, lam * a - a**2 / (2 * gamma), 0.5 * gamma * lam**2).sum()
    offsets = matrix.offsets
    for t in range(len(offsets) - 1):
        total += lam_f * np.abs(np.diff(w[offsets[t] : offsets[t + 1]])).sum()
    return total


@pytest.fixture(scope="module")
def small_problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 6))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=400)
    forest = TreeEnsemble.from_sklearn(
        RandomForestRegressor(n_estimators=20, max_depth=3, max_features=0.5, random_state=0).fit(X, y)
    )
    return leaf_matrix(forest, X), y, forest


def test_fused_lasso_prox_worked_example():
    out = np.empty(5)
    fused_lasso_prox(np.array([0.0, 1.0, 5.0, 5.2, 0.0]), 0.5, out)
    np.testing.assert_allclose(out, [0.5, 1.0, 4.6, 4.6, 0.5], atol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3, 8, 40])
@pytest.mark.parametrize("lam", [0.0, 0.05, 0.7, 5.0])
def test_fused_lasso_prox_matches_qp(n, lam):
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(n)
    z = rng.normal(size=n) * 2
    z[rng.random(n) < 0.3] = 0.0
    out = np.empty(n)
    fused_lasso_prox(z, lam, out)
    b = cp.Variable(n)
    cost = 0.5 * cp.sum_squares(b - z) + (lam * cp.norm1(cp.diff(b)) if n > 1 else 0)
    cp.Problem(cp.Minimize(cost)).solve(solver="CLARABEL")

    def value(v):
        return 0.5 * np.sum((v - z) ** 2) + lam * np.abs(np.diff(v)).sum()

    assert value(out) <= value(b.value) + 1e-7
    np.testing.assert_allclose(out, b.value, atol=1e-3)  # the interior-point reference is the less accurate one


@pytest.mark.parametrize(
    ("code", "gamma", "curvature"),
    [(L1, 0.0, 1.0), (L1, 0.0, 0.3), (MCP, 3.0, 1.0), (MCP, 1.1, 2.0), (MCP, 0.5, 1.0), (MCP, 1.2, 0.4)],
)
def test_penalty_prox_is_global_minimizer(code, gamma, curvature):
    """Brute force on a fine grid, convex and nonconvex MCP regimes (curvature * gamma <= 1) included."""
    lam = 0.8
    grid = np.linspace(-8, 8, 160001)
    pen = lam * np.abs(grid) if code == L1 else np.array([mcp_value(g, lam, gamma) for g in grid])
    for z in np.linspace(-5, 5, 41):
        got = penalty_prox(z, curvature, lam, gamma, code)
        at_got = 0.5 * curvature * (got - z) ** 2 + (lam * abs(got) if code == L1 else mcp_value(got, lam, gamma))
        best = (0.5 * curvature * (grid - z) ** 2 + pen).min()
        assert at_got <= best + 1e-6


def test_mcp_value_is_even():
    for w in [0.1, 0.5, 2.0, 10.0]:
        assert mcp_value(-w, 1.0, 3.0) == mcp_value(w, 1.0, 3.0)
    assert mcp_value(-0.5, 1.0, 3.0) == pytest.approx(0.5 - 0.25 / 6)


def test_direction_vector_hand_cases_with_tree_boundaries():
    # two trees of 3 leaves: global columns 0-2 and 3-5; row k falls in leaf k of both
    matrix = LeafMatrix(np.array([[0, 0], [1, 1], [2, 2]]), np.ones(6), np.array([0, 3, 6]))
    problem = Problem.from_leaf_matrix(
        matrix, np.zeros(3), np.ones(3), "squared", "l1", gamma=10.0, mcp_scaling="plain"
    )
    w = np.array([0.0, 0.0, 1.0, 1.0, 0.0, 0.0])
    lam, lam_f = 1.0, 0.5
    gradient = np.array([-2.0, 0.2, -3.0, 0.0, 0.0, 4.0])
    d = np.empty(6)
    direction_vector(problem, w, gradient, lam, lam_f, d)
    # leaf 0 (w=0, first leaf of tree 0; its right neighbour is also 0): dh + dg = [-1.5, 1.5]; -g = 2
    assert d[0] == pytest.approx(0.5)
    # leaf 1 (w=0, left neighbour equal, right neighbour 1 > 0): [-1, 1] + [-0.5, 0.5] - 0.5 = [-2, 1]
    assert d[1] == pytest.approx(0.0)
    # leaf 2 (w=1 > left neighbour 0, LAST leaf of tree 0): sign term 1 + fusion 0.5 = 1.5; -g = 3
    assert d[2] == pytest.approx(1.5)
    # leaf 3 (w=1, FIRST leaf of tree 1: its left neighbour, leaf 2, belongs to another tree and is ignored;
    # right neighbour 0 < 1): 1 + 0.5 = 1.5; -g = 0 -> 1.5
    assert d[3] == pytest.approx(1.5)
    # leaf 5 (last of tree 1, w=0, left neighbour 0): [-1.5, 1.5]; -g = -4 -> 2.5
    assert d[5] == pytest.approx(2.5)
    # the same entry without fusion: plain soft-threshold distance
    direction_vector(problem, w, gradient, lam, 0.0, d)
    assert d[5] == pytest.approx(3.0)


def test_unknown_penalty_code_raises(small_problem):
    """An unknown code is an error everywhere, never silently one of the known penalties."""
    matrix, y, _ = small_problem
    with pytest.raises(ValueError, match="penalty"):
        Problem.from_leaf_matrix(matrix, y, np.ones(len(y)), "squared", "l0", gamma=1.1, mcp_scaling="block")
    for code in (-1, 2):
        with pytest.raises(ValueError, match="unknown penalty code"):
            penalty_prox(1.0, 1.0, 0.5, 3.0, code)
        problem = Problem.from_leaf_matrix(matrix, y, np.ones(len(y)), "squared", "mcp", 1.1, "block")
        problem = problem._replace(penalty=code)
        for solve in (solve_greedy, solve_cyclic):
            with pytest.raises(ValueError, match="unknown penalty code"):
                solve(problem, State.initial(problem), 1.0, 0.0, 1e-6, 100, 3)


@pytest.mark.parametrize("ratio", [0.5, 0.1, 0.02])
def test_l1_matches_sklearn_lasso(small_problem, ratio):
    matrix, y, _ = small_problem
    n = len(y)
    dense = matrix.to_csc().toarray()
    lam_max = fit_path(matrix, y, RAW, penalty="l1", n_lambdas=1).lambda_max
    lam = ratio * lam_max
    ours = fit_path(matrix, y, RAW, penalty="l1", fusion_ratio=0, lambdas=[lam], tol=1e-10)
    reference = Lasso(alpha=lam / n, fit_intercept=True, tol=1e-12, max_iter=200_000).fit(dense, y)
    f_ours = objective(matrix, y, ours.coef(0), ours.intercepts[0], lam)
    f_ref = objective(matrix, y, reference.coef_, reference.intercept_, lam)
    assert ours.steps[0].objective == pytest.approx(f_ours, rel=1e-10)
    assert f_ours <= f_ref * (1 + 1e-6)
    assert f_ours == pytest.approx(f_ref, rel=1e-6)


@pytest.mark.parametrize(("lam_ratio", "fusion"), [(0.2, 0.5), (0.05, 1.0), (0.02, 2.0)])
def test_l1_with_fusion_matches_convex_reference(small_problem, lam_ratio, fusion):
    cp = pytest.importorskip("cvxpy")
    matrix, y, _ = small_problem
    dense = matrix.to_csc().toarray()
    lam_max = fit_path(matrix, y, RAW, penalty="l1", n_lambdas=1).lambda_max
    lam, lam_f = lam_ratio * lam_max, fusion * lam_ratio * lam_max
    ours = fit_path(matrix, y, RAW, penalty="l1", lambdas=[lam], lambda_f=lam_f, tol=1e-9)
    w = cp.Variable(dense.shape[1])
    b = cp.Variable()
    fusion_terms = [cp.norm1(cp.diff(w[s:e])) for s, e in zip(matrix.offsets[:-1], matrix.offsets[1:]) if e - s > 1]
    cost = 0.5 * cp.sum_squares(y - b - dense @ w) + lam * cp.norm1(w) + lam_f * sum(fusion_terms)
    cp.Problem(cp.Minimize(cost)).solve(solver="CLARABEL")
    f_ours = objective(matrix, y, ours.coef(0), ours.intercepts[0], lam, lam_f=lam_f)
    f_ref = objective(matrix, y, w.value, b.value, lam, lam_f=lam_f)
    assert f_ours == pytest.approx(f_ref, rel=1e-5)


def test_greedy_and_cyclic_reach_the_same_l1_optimum(small_problem):
    matrix, y, _ = small_problem
    greedy = fit_path(matrix, y, RAW, penalty="l1", fusion_ratio=0, n_lambdas=8, lambda_min_ratio=0.01, tol=1e-9)
    cyclic = fit_path(
        matrix,
        y,
        RAW,
        penalty="l1",
        fusion_ratio=0,
        n_lambdas=8,
        lambda_min_ratio=0.01,
        tol=1e-9,
        block_selection="cyclic",
    )
    for a, b in zip(greedy.steps, cyclic.steps):
        assert a.objective == pytest.approx(b.objective, rel=1e-7)
        assert a.converged and b.converged


def test_mcp_path_no_worse_than_skglm(small_problem):
    """Plain MCP (one gamma) is skglm's MCPRegression objective with alpha = lam/n and gamma_skglm = n*gamma."""
    skglm = pytest.importorskip("skglm")
    matrix, y, _ = small_problem
    n = len(y)
    dense = matrix.to_csc().toarray()
    gamma_skglm = 3.0
    gamma = gamma_skglm / n
    ours = fit_path(
        matrix,
        y,
        RAW,
        penalty="mcp",
        gamma=gamma,
        mcp_scaling="plain",
        fusion_ratio=0,
        n_lambdas=30,
        lambda_min_ratio=0.01,
        tol=1e-8,
    )
    reference = skglm.MCPRegression(
        alpha=1.0, gamma=gamma_skglm, fit_intercept=True, tol=1e-10, max_iter=1000, warm_start=True
    )
    # both start from the same point, the path's: w = 0 and the intercept at the mean of y
    reference.coef_ = np.zeros(dense.shape[1])
    reference.intercept_ = y.mean()
    ratios = []
    for k, step in enumerate(ours.steps):
        reference.alpha = step.lambda_s / n
        reference.fit(dense, y)
        f_ref = objective(matrix, y, reference.coef_, reference.intercept_, step.lambda_s, "mcp", gamma)
        f_ours = objective(matrix, y, ours.coef(k), ours.intercepts[k], step.lambda_s, "mcp", gamma)
        assert step.objective == pytest.approx(f_ours, rel=1e-9)
        ratios.append(f_ours / f_ref)
    ratios = np.array(ratios)
    assert np.median(ratios) <= 1.0 + 1e-9
    assert ratios.max() <= 1.01


def test_paper_mcp_scaling_uses_per_tree_concavity(small_problem):
    matrix, y, _ = small_problem
    result = fit_path(
        matrix, y, RAW, penalty="mcp", gamma=1.1, fusion_ratio=0, n_lambdas=20, lambda_min_ratio=0.01, tol=1e-8
    )
    counts = matrix.column_counts()
    curvature = counts * matrix.values**2
    lipschitz = np.maximum.reduceat(curvature, matrix.offsets[:-1])
    gammas = np.repeat(1.1 / lipschitz, np.diff(matrix.offsets))
    for k, step in enumerate(result.steps):
        assert step.converged
        w = result.coef(k)
        residual = y - result.intercepts[k] - matrix.matvec(w)
        a = np.abs(w)
        pen = np.where(
            a <= gammas * step.lambda_s, step.lambda_s * a - a**2 / (2 * gammas), 0.5 * gammas * step.lambda_s**2
        )
        assert step.objective == pytest.approx(0.5 * residual @ residual + pen.sum(), rel=1e-9)


def test_path_records_and_early_stop(small_problem):
    matrix, y, forest = small_problem
    seen = []
    result = fit_path(
        matrix,
        y,
        RAW,
        fusion_ratio=0.5,
        n_lambdas=50,
        max_rules=10,
        val_matrix=matrix,
        y_val=y,
        leaf_ancestors=forest.leaf_ancestors,
        callback=seen.append,
    )
    assert result.stop_reason == "max_rules"
    assert result.steps[-1].n_terms > 10 and all(s.n_terms <= 10 for s in result.steps[:-1])
    assert seen == result.steps
    assert result.coef_path.shape == (len(result.steps), matrix.values.shape[0])
    for step in result.steps:
        assert step.val_loss == pytest.approx(step.train_loss, rel=1e-9)
        assert step.n_antecedents is not None and step.n_trees <= step.n_rules
    assert result.steps[result.select(10)].n_terms <= 10


def test_callback_stops_the_path(small_problem):
    matrix, y, _ = small_problem
    result = fit_path(matrix, y, RAW, n_lambdas=50, callback=lambda step: step.index == 3)
    assert len(result.steps) == 4 and result.stop_reason == "callback"


def test_sample_weights_equal_duplicated_rows(small_problem):
    matrix, y, _ = small_problem
    n = len(y)
    weights = np.ones(n)
    weights[:50] = 3.0
    rows = np.concatenate([np.arange(n), np.repeat(np.arange(50), 2)])
    duplicated = type(matrix)(np.ascontiguousarray(matrix.leaves[rows]), matrix.values, matrix.offsets)
    lam = 20.0
    dup = fit_path(duplicated, y[rows], RAW, penalty="l1", fusion_ratio=0, lambdas=[lam], tol=1e-10)
    weighted = fit_path(
        matrix,
        y,
        RAW,
        penalty="l1",
        fusion_ratio=0,
        lambdas=[lam * n / weights.sum()],
        tol=1e-10,
        sample_weight=weights,
    )
    np.testing.assert_allclose(weighted.coef(0), dup.coef(0), atol=1e-6)
    assert weighted.intercepts[0] == pytest.approx(dup.intercepts[0], abs=1e-8)


def test_invalid_arguments_are_rejected(small_problem):
    matrix, y, _ = small_problem
    with pytest.raises(ValueError, match="penalty"):
        fit_path(matrix, y, RAW, penalty="l0")
    with pytest.raises(ValueError, match="gamma"):
        fit_path(matrix, y, RAW, penalty="mcp", gamma=1.0)
    with pytest.raises(ValueError, match="not both"):
        fit_path(matrix, y, RAW, lambda_f=0.1, fusion_ratio=0.5)
    with pytest.raises(ValueError, match="NaN"):
        fit_path(matrix, np.where(np.arange(len(y)) == 3, np.nan, y))
    with pytest.raises(ValueError, match="shape"):
        fit_path(matrix, y[:-1])


def test_min_support_keeps_small_leaves_out_of_every_step():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 4))
    y = X[:, 0] + np.sin(2 * X[:, 1]) + 0.1 * rng.normal(size=400)
    forest = TreeEnsemble.from_sklearn(RandomForestRegressor(n_estimators=20, max_depth=5, random_state=0).fit(X, y))
    M = leaf_matrix(forest, X)
    counts = M.column_counts()
    for fusion_ratio in (0.0, 1.0):
        result = fit_path(M, y, n_lambdas=20, min_support=12, fusion_ratio=fusion_ratio)
        selected = np.flatnonzero(np.abs(result.coef_path).sum(axis=0))
        assert len(selected) and counts[selected].min() >= 12 and (counts < 12).any()
    assert PathSpec(min_support=0.03).min_support_rows(400) == 12
    same = fit_path(M, y, n_lambdas=20, min_support=0.03)
    np.testing.assert_array_equal(
        same.coef_path.toarray(), fit_path(M, y, n_lambdas=20, min_support=12).coef_path.toarray()
    )


def test_polish_refits_each_steps_rules_by_least_squares():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 4))
    y = 2 * X[:, 0] - X[:, 1] ** 2 + 0.1 * rng.normal(size=300)
    forest = TreeEnsemble.from_sklearn(RandomForestRegressor(n_estimators=15, max_depth=3, random_state=0).fit(X, y))
    M = leaf_matrix(forest, X)
    plain = fit_path(M, y, n_lambdas=15, fusion_ratio=2.0, polish=False)
    polished = fit_path(M, y, n_lambdas=15, fusion_ratio=2.0, polish=True)
    assert PathSpec().polishes() and not PathSpec(loss="logistic").polishes() and PathSpec().scaling == "unit"
    dense = M.to_csc().toarray()
    for k, step in enumerate(polished.steps):
        support = np.flatnonzero(polished.coef(k))
        np.testing.assert_array_equal(support, np.flatnonzero(plain.coef(k)))  # same rules, other amounts
        design = np.column_stack([np.ones(len(y)), dense[:, support]])
        exact = np.linalg.lstsq(design, y, rcond=None)[0]
        fitted = polished.intercepts[k] + dense[:, support] @ polished.coef(k)[support]
        # least squares up to the tiny ridge (collinear rules): the same fit, the same training loss
        np.testing.assert_allclose(fitted, design @ exact, atol=1e-2 * np.abs(y).max())
        assert step.train_loss == pytest.approx(np.mean((y - design @ exact) ** 2), rel=1e-5)
        assert step.train_loss <= plain.steps[k].train_loss + 1e-12
        assert step.objective == plain.steps[k].objective


def test_unit_scaling_solves_on_unit_norm_columns_and_records_leaf_value_weights():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 4))
    y = X[:, 0] + np.abs(X[:, 2]) + 0.1 * rng.normal(size=300)
    forest = TreeEnsemble.from_sklearn(RandomForestRegressor(n_estimators=10, max_depth=3, random_state=0).fit(X, y))
    M = leaf_matrix(forest, X)
    unit, scale = M.unit_columns()
    np.testing.assert_allclose(np.sqrt(unit.column_counts()) * unit.values, 1.0)
    ours = fit_path(M, y, RAW, scaling="unit", fusion_ratio=1.0, n_lambdas=12)
    by_hand = fit_path(unit, y, RAW, fusion_ratio=1.0, n_lambdas=12)
    np.testing.assert_allclose(ours.coef_path.toarray(), by_hand.coef_path.toarray() * scale, rtol=1e-12, atol=1e-15)
    for k, step in enumerate(ours.steps):
        assert step.train_loss == pytest.approx(np.mean((y - ours.intercepts[k] - M.matvec(ours.coef(k))) ** 2))


INLINING_PROBE = """
import re
import numpy as np
from sklearn.ensemble import RandomForestRegressor
from solver import TreeEnsemble, gbcd, leaf_matrix
from solver.problem import Problem, State

rng = np.random.default_rng(0)
X = rng.normal(size=(200, 4))
y = X[:, 0] + rng.normal(size=200)
forest = TreeEnsemble.from_sklearn(RandomForestRegressor(n_estimators=5, max_depth=3, random_state=0).fit(X, y))
problem = Problem.from_leaf_matrix(leaf_matrix(forest, X), y, np.ones(200), "squared", "mcp", 1.1, "block")
state = State.initial(problem)
n_leaves, n_trees = problem.values.shape[0], problem.offsets.shape[0] - 1
gbcd.full_gradient(problem, state, np.empty(n_leaves))
gbcd._pass(problem, state, np.arange(n_leaves), np.ones(n_leaves, dtype=np.bool_), 0.1, 0.0, 3, -1.0)
gbcd._pass(problem, state, np.arange(n_trees), np.ones(n_trees, dtype=np.bool_), 0.1, 0.1, 3, -1.0)
for kernel in (gbcd.full_gradient, gbcd._pass):
    for ir in kernel.inspect_llvm().values():
        print(*sorted(set(re.findall(r"call [^@]*@(\\S+?)\\(", ir))), sep="\\n")
"""


def test_the_leaf_gradient_is_inlined_into_the_solver_loops(tmp_path):
    """leaf_gradient runs for every leaf the solver's loops visit: where LLVM did not inline it (a branch on
    the loss made it too big), every call cost a reference count change per array of the bundles and
    squared-loss paths ran 1.3-1.9x slower (bench/results/solver_since_3f76ca6.md). Compiled afresh (an
    empty numba cache: cached code cannot be inspected), the loops do not call it."""
    import os
    import subprocess
    import sys

    probe = subprocess.run(
        [sys.executable, "-c", INLINING_PROBE],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path)),
    )
    called = probe.stdout.split()
    assert any("4gbcd12update_block" in name for name in called)  # the probe sees the loops' code
    assert not [name for name in called if "7kernels13leaf_gradient" in name]
    assert not [name for name in called if "7kernels12leaf_minimum" in name]  # the dispatched leaf step, too
