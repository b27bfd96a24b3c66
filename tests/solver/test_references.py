"""The exact references of tests/support/references.py against their own objectives, scikit-learn, their known
closed-form optima and the binary logistic problem they reduce to with two classes; and the solver against the convex
(L1, L1 + fusion) optimum of every registered loss (solver.losses.LOSSES)."""

import itertools

import numpy as np
import pytest
from scipy.special import expit, logsumexp, softmax
from sklearn.linear_model import LogisticRegression, PoissonRegressor

from solver import fit_path
from solver.losses import LOSSES
from tests.support.references import (
    CLARABEL_SETTINGS,
    multinomial_group_mcp_objective,
    multinomial_objective,
    poisson_mcp_objective,
    poisson_objective,
    solve_multinomial,
    solve_poisson,
)

cp = pytest.importorskip("cvxpy")
K = 3


def leaf_like(rng, n, n_trees, n_leaves):
    """M as a forest's would be: per tree, each row in one of n_leaves (ordered along a random direction of X),
    the entry its leaf's value. Returns X (n, 3), M (n, n_trees * n_leaves), offsets."""
    X = rng.normal(size=(n, 3))
    blocks = []
    for _ in range(n_trees):
        along = X @ rng.normal(size=3)
        leaf = np.searchsorted(np.quantile(along, np.linspace(0, 1, n_leaves + 1)[1:-1]), along)
        block = np.zeros((n, n_leaves))
        block[np.arange(n), leaf] = rng.uniform(0.5, 1.5, size=n_leaves)[leaf]
        blocks.append(block)
    return X, np.hstack(blocks), np.arange(0, n_trees * n_leaves + 1, n_leaves)


def class_draws(rng, scores):
    return np.array([rng.choice(scores.shape[1], p=p) for p in softmax(scores, axis=1)])


@pytest.fixture(scope="module")
def problem():
    """150 rows, 5 trees of 4 leaves (R = 20), weights in [0.5, 2]: M, offsets, s, 3-class y, Poisson y."""
    rng = np.random.default_rng(0)
    X, M, offsets = leaf_like(rng, 150, 5, 4)
    y = class_draws(rng, X @ rng.normal(size=(3, K)))
    counts = rng.poisson(np.exp(0.5 * X[:, 0]))
    return M, offsets, rng.uniform(0.5, 2.0, len(y)), y, counts


def gaussian(seed, n=200, R=4):
    """A dense M with a finite unpenalised optimum (no separation), for the scikit-learn comparisons."""
    rng = np.random.default_rng(seed)
    M = rng.normal(size=(n, R))
    return rng, M, np.array([0, 2, R]), rng.uniform(0.5, 2.0, n)


PENALTIES = [(0.0, 0.0), (0.5, 0.0), (2.0, 1.0), (0.2, 3.0), (6.0, 0.5)]


def perturbations(rng, x, count=20, size=1e-4):
    return [x + size * rng.normal(size=x.shape) for _ in range(count)]


@pytest.mark.parametrize(("lam", "lam_f"), PENALTIES)
def test_multinomial_value_is_the_objective_at_its_minimiser(problem, lam, lam_f):
    M, offsets, s, y, _ = problem
    W, b, value = solve_multinomial(M, y, s, offsets, lam, lam_f, K)
    assert W.shape == (M.shape[1], K) and b.shape == (K,) and abs(b.sum()) < 1e-12
    f = multinomial_objective(M, y, s, offsets, W, b, lam, lam_f)
    assert value == pytest.approx(f, rel=1e-8)
    rng = np.random.default_rng(1)
    nearby = [multinomial_objective(M, y, s, offsets, V, b, lam, lam_f) for V in perturbations(rng, W)]
    nearby += [multinomial_objective(M, y, s, offsets, W, c, lam, lam_f) for c in perturbations(rng, b)]
    assert min(nearby) >= f * (1 - 1e-10)


@pytest.mark.parametrize(("lam", "lam_f"), PENALTIES)
def test_poisson_value_is_the_objective_at_its_minimiser(problem, lam, lam_f):
    M, offsets, s, _, counts = problem
    w, b, value = solve_poisson(M, counts, s, offsets, lam, lam_f)
    f = poisson_objective(M, counts, s, offsets, w, b, lam, lam_f)
    assert value == pytest.approx(f, rel=1e-8)
    rng = np.random.default_rng(1)
    nearby = [poisson_objective(M, counts, s, offsets, v, b, lam, lam_f) for v in perturbations(rng, w)]
    nearby += [poisson_objective(M, counts, s, offsets, w, b + d, lam, lam_f) for d in (-1e-4, 1e-4)]
    assert min(nearby) >= f * (1 - 1e-10)


def test_unpenalised_multinomial_is_sklearns_weighted_maximum_likelihood():
    rng, M, offsets, s = gaussian(2)
    y = class_draws(rng, M @ rng.normal(scale=0.5, size=(M.shape[1], K)))
    W, b, value = solve_multinomial(M, y, s, offsets, 0.0, 0.0, K)
    reference = LogisticRegression(C=np.inf, solver="lbfgs", tol=1e-10, max_iter=10_000).fit(M, y, sample_weight=s)
    f_ref = multinomial_objective(M, y, s, offsets, reference.coef_.T, reference.intercept_, 0.0, 0.0)
    assert value <= f_ref * (1 + 1e-12)
    assert value == pytest.approx(f_ref, rel=1e-10)
    np.testing.assert_allclose(softmax(b + M @ W, axis=1), reference.predict_proba(M), rtol=0, atol=1e-7)


def test_unpenalised_poisson_is_sklearns_weighted_maximum_likelihood():
    rng, M, offsets, s = gaussian(3)
    counts = rng.poisson(np.exp(0.3 + M @ rng.normal(scale=0.3, size=M.shape[1])))
    w, b, value = solve_poisson(M, counts, s, offsets, 0.0, 0.0)
    reference = PoissonRegressor(alpha=0, tol=1e-10, max_iter=10_000).fit(M, counts, sample_weight=s)
    f_ref = poisson_objective(M, counts, s, offsets, reference.coef_, reference.intercept_, 0.0, 0.0)
    assert value <= f_ref * (1 + 1e-12)
    np.testing.assert_allclose(np.exp(b + M @ w), reference.predict(M), rtol=1e-7)


def test_from_lambda_max_on_everything_is_zero_and_the_intercepts_fit_the_weighted_frequencies(problem):
    """At W = 0 the loss's gradient in W_j is M_j^T (s * (p - Y)), p the weighted class frequencies (Poisson:
    M_j^T (s * (mu - y)), mu the weighted mean): the group norm (|.|) of the largest is lambda_max, beyond which
    (fusion or not) 0 is optimal; just below it (no fusion) that rule enters."""
    M, offsets, s, y, counts = problem
    Y = np.eye(K)[y]
    frequencies = s @ Y / s.sum()
    lam_max = np.linalg.norm(M.T @ (s[:, None] * (frequencies - Y)), axis=1).max()
    for lam_f in (0.0, 2.0):
        W, b, _ = solve_multinomial(M, y, s, offsets, 1.001 * lam_max, lam_f, K)
        np.testing.assert_allclose(W, 0, atol=1e-7)
        np.testing.assert_allclose(b, np.log(frequencies) - np.log(frequencies).mean(), atol=1e-7)
    W, *_ = solve_multinomial(M, y, s, offsets, 0.98 * lam_max, 0.0, K)
    assert np.linalg.norm(W, axis=1).max() > 1e-4
    mean = s @ counts / s.sum()
    lam_max = np.abs(M.T @ (s * (mean - counts))).max()
    for lam_f in (0.0, 2.0):
        w, b, _ = solve_poisson(M, counts, s, offsets, 1.001 * lam_max, lam_f)
        np.testing.assert_allclose(w, 0, atol=1e-7)
        assert b == pytest.approx(np.log(mean), abs=1e-7)
    w, *_ = solve_poisson(M, counts, s, offsets, 0.98 * lam_max, 0.0)
    assert np.abs(w).max() > 1e-4


@pytest.mark.parametrize(("lam", "lam_f"), [(0.5, 0.0), (1.5, 0.7), (0.3, 2.0)])
def test_two_class_group_l1_is_the_binary_l1_logistic_problem(problem, lam, lam_f):
    """With K = 2 the loss depends on the class difference d_j = W_j1 - W_j0 only (binary score b1 - b0 + M d).
    For any W, ||W_j||_2 >= |d_j| / sqrt(2) and sum_k |W_{j+1,k} - W_jk| >= |d_{j+1} - d_j| (triangle inequality),
    with equality at the centered W_j = (-d_j/2, d_j/2). So the multinomial problem at (lam * sqrt(2), lam_f) has
    the optimal value of the binary L1 + fusion logistic problem at (lam, lam_f), the same scores, and a centered
    solution W = (-a/2, a/2) with a the binary solution."""
    M, offsets, s, y, _ = problem
    y = (y == 2).astype(int)
    a, a0 = cp.Variable(M.shape[1]), cp.Variable()
    score = a0 + M @ a
    fused = sum(cp.norm1(cp.diff(a[start:stop])) for start, stop in itertools.pairwise(offsets))
    binary = cp.Problem(cp.Minimize(s @ cp.logistic(score) - (s * y) @ score + lam * cp.norm1(a) + lam_f * fused))
    binary.solve(solver="CLARABEL", **CLARABEL_SETTINGS[0])
    assert binary.status == cp.OPTIMAL
    W, b, value = solve_multinomial(M, y, s, offsets, lam * np.sqrt(2), lam_f, 2)
    assert value == pytest.approx(binary.value, rel=1e-10)
    np.testing.assert_allclose(softmax(b + M @ W, axis=1)[:, 1], expit(score.value), rtol=0, atol=1e-7)
    np.testing.assert_allclose(W, np.column_stack([-a.value / 2, a.value / 2]), rtol=0, atol=1e-7)


def test_mcp_objectives(problem):
    """MCP(a) = lam a - a^2 / (2 gamma) up to gamma lam, then gamma lam^2 / 2: the L1 objective as gamma grows,
    the loss plus the constant per nonzero coefficient once every |w_j| (||W_j||) passes gamma_j lam."""
    M, offsets, s, y, counts = problem
    rng = np.random.default_rng(4)
    R, lam, lam_f = M.shape[1], 0.7, 0.3
    W, b = rng.normal(size=(R, K)), rng.normal(size=K)
    w, c = rng.normal(size=R), 0.2
    huge, gammas = np.full(R, 1e12), rng.uniform(1.0, 3.0, R)
    assert multinomial_group_mcp_objective(M, y, s, offsets, W, b, lam, huge, lam_f) == pytest.approx(
        multinomial_objective(M, y, s, offsets, W, b, lam, lam_f), rel=1e-9
    )
    assert poisson_mcp_objective(M, counts, s, offsets, w, c, lam, huge, lam_f) == pytest.approx(
        poisson_objective(M, counts, s, offsets, w, c, lam, lam_f), rel=1e-9
    )
    big = W * (3 * lam * gammas / np.linalg.norm(W, axis=1))[:, None]  # every ||W_j|| = 3 gamma_j lam
    loss = multinomial_objective(M, y, s, offsets, big, b, 0.0, lam_f)
    assert multinomial_group_mcp_objective(M, y, s, offsets, big, b, lam, gammas, lam_f) == pytest.approx(
        loss + (gammas * lam**2 / 2).sum(), rel=1e-12
    )
    small = w * 0.5 * lam * gammas / np.abs(w)  # every |w_j| = gamma_j lam / 2
    loss = poisson_objective(M, counts, s, offsets, small, c, 0.0, lam_f)
    a = np.abs(small)
    assert poisson_mcp_objective(M, counts, s, offsets, small, c, lam, gammas, lam_f) == pytest.approx(
        loss + (lam * a - a**2 / (2 * gammas)).sum(), rel=1e-12
    )
    assert multinomial_objective(M, y, s, offsets, 0 * W, b, 0.0, 0.0) == pytest.approx(
        s @ (logsumexp(b) - b[y]), rel=1e-12
    )


def _fused(offsets, w):
    return sum(cp.norm1(cp.diff(w[start:stop])) for start, stop in itertools.pairwise(offsets) if stop - start > 1)


def cox_partial_likelihood(score, y, s):
    """Breslow's negative log partial likelihood (solver.losses.cox) of signed times ``y`` as cvxpy writes it: one
    log-sum-exp over the risk set of each distinct event time."""
    time, event = np.abs(y), y > 0
    total = -((s * event) @ score)
    for t in np.unique(time[event]):
        at_risk = np.flatnonzero(time >= t)
        events = float(s[event & (time == t)].sum())
        total = total + events * cp.log_sum_exp(score[at_risk] + np.log(s[at_risk]))
    return total


def _single_output(loss_of_score):
    """The cvxpy optimum of a one-weight-per-rule loss (``loss_of_score(score, y, s)``) under L1 and fusion."""

    def optimum(M, y, s, offsets, lam, lam_f):
        w, b = cp.Variable(M.shape[1]), cp.Variable()
        problem = cp.Problem(
            cp.Minimize(loss_of_score(b + M @ w, y, s) + lam * cp.norm1(w) + lam_f * _fused(offsets, w))
        )
        for settings in CLARABEL_SETTINGS:
            problem.solve(solver="CLARABEL", **settings)
            if problem.status == cp.OPTIMAL:
                return problem.value
        raise RuntimeError(f"the reference solve ended {problem.status}")

    return optimum


# Every registered loss's convex problem (L1, L1 + fusion) as cvxpy solves it, by name: a loss that registers adds its
# own here, so that the test below checks the solver on it (None: a loss with no convex reference).
CONVEX_OPTIMA = {
    "squared": _single_output(lambda score, y, s: 0.5 * s @ cp.square(y - score)),
    "logistic": _single_output(lambda score, y, s: s @ cp.logistic(score) - (s * y) @ score),
    "multinomial": lambda M, y, s, offsets, lam, lam_f: solve_multinomial(
        M, y.astype(int), s, offsets, lam, lam_f, int(y.max()) + 1
    )[2],
    "poisson": _single_output(lambda score, y, s: s @ cp.exp(score) - (s * y) @ score),
    # power 1.5 (PathSpec's default): -y mu^(1-p) / (1-p) + mu^(2-p) / (2-p)
    "tweedie": _single_output(lambda score, y, s: (2 * s * y) @ cp.exp(-0.5 * score) + (2 * s) @ cp.exp(0.5 * score)),
    "gamma": _single_output(lambda score, y, s: (s * y) @ cp.exp(-score) + s @ score),
    "cox": _single_output(lambda score, y, s: cox_partial_likelihood(score, y, s)),
}


@pytest.fixture(scope="module")
def forest_problem():
    """200 rows, a forest of 4 depth-2 trees: its LeafMatrix, dense M, leaf offsets and a continuous signal."""
    from sklearn.ensemble import RandomForestRegressor

    from solver import TreeEnsemble, leaf_matrix

    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 3))
    signal = X[:, 0] + 0.5 * X[:, 1] * (X[:, 2] > 0) + 0.3 * rng.normal(size=200)
    trees = RandomForestRegressor(n_estimators=4, max_depth=2, random_state=0).fit(X, signal)
    forest = TreeEnsemble.from_sklearn(trees)
    matrix = leaf_matrix(forest, X)
    return matrix, matrix.to_csc().toarray(), forest.leaf_offsets, signal


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("fusion_ratio", [0.0, 0.5])
def test_every_registered_loss_reaches_the_convex_optimum(forest_problem, name, fusion_ratio):
    """The solver's L1 (and L1 + fusion) path steps of every registered loss at cvxpy's optimum, within 1e-6."""
    assert name in CONVEX_OPTIMA, f"the loss {name!r} registers its convex reference in CONVEX_OPTIMA"
    if CONVEX_OPTIMA[name] is None:
        pytest.skip(f"the {name} loss has no convex reference")
    matrix, dense, offsets, signal = forest_problem
    y = LOSSES[name].warmup_target(signal)
    exact = dict(penalty="l1", scaling="leaf_value", min_support=0, tol=1e-7, max_iter=100_000, polish=False)
    lambda_max = fit_path(matrix, y, loss=name, n_lambdas=1, **exact).lambda_max
    lambdas = (0.3 * lambda_max, 0.05 * lambda_max)
    path = fit_path(matrix, y, loss=name, lambdas=lambdas, fusion_ratio=fusion_ratio, **exact)
    for step, lam in zip(path.steps, lambdas, strict=True):
        optimum = CONVEX_OPTIMA[name](dense, y, np.ones(len(y)), offsets, lam, fusion_ratio * lam)
        assert step.objective == pytest.approx(optimum, rel=1e-6)
