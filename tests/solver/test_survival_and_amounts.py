"""The Tweedie, Gamma and Cox losses (``solver.losses.tweedie``, ``gamma``, ``cox``) against independent references:
glum's L1-penalised GLMs and scikit-survival's Coxnet on the same columns, cvxpy for a fused Cox problem with a linear
term, proximal gradient from the same point for MCP, scikit-survival's C-index, Breslow and Kaplan-Meier estimators;
integer sample weights against repeated rows; and the estimators' survival targets and target checks.

Every problem is one small forest's dense leaf matrix M (200 rows, 4 trees of depth 2: 16 columns), fitted with
``scaling="leaf_value"`` and ``min_support=0`` so that the solver's columns are M's own. The FIRE objective is the loss
as a weighted SUM over the rows (weights normalised to sum to n: ``solver.path``) plus ``lam ||w||_1`` (or MCP) plus
fusion; the references' losses are written here in numpy from their definitions, not taken from the library.
"""

import functools
import itertools
import warnings

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from solver import FireRegressor, FireSurvival, LeafMatrix, TreeEnsemble, fit_path, leaf_matrix, signed_times
from solver.losses.cox import concordance_index, kaplan_meier
from solver.problem import Problem
from solver.spec import PathSpec
from tests.support.references import mcp, mcp_prox

N = 200
POWER = 1.5  # PathSpec.power's default, glum's TweedieDistribution(1.5)
EXACT = {"scaling": "leaf_value", "min_support": 0, "tol": 1e-8, "max_iter": 100_000, "polish": False}
# Cox's certificate stalls at 1e-8 to 4e-8 of lambda_max on these problems, past 1e-7 with the linear columns (its
# Newton steps' decrease is then below the rounding of the objective, ~1e-13: test_a_cox_step_that_cannot_certify_stops
# _early), so its steps run at 1e-6: stationary to 1e-6 lambda_max, the objective is within ~1e-12 relative of its
# optimum, far inside the comparisons' 1e-6
TOL = {"tweedie": 1e-8, "gamma": 1e-8, "poisson": 1e-8, "cox": 1e-6}
L1 = {**EXACT, "penalty": "l1", "fusion_ratio": 0.0}


# --- the losses from their definitions (per row weights s; eta the scores) -------------------------------------------


def tweedie_loss(y, s, eta, p=POWER):
    """Tweedie's negative log-likelihood up to terms in y: ``sum s (-y mu^(1-p) / (1-p) + mu^(2-p) / (2-p))``, and
    its gradient in eta."""
    shrunk, grown = np.exp((1 - p) * eta), np.exp((2 - p) * eta)
    return float(s @ (-y * shrunk / (1 - p) + grown / (2 - p))), s * (grown - y * shrunk)


def poisson_loss(y, s, eta):
    """Poisson's negative log-likelihood up to terms in y: ``sum s (mu - y log mu)``, and its gradient in eta."""
    mean = np.exp(eta)
    return float(s @ (mean - y * eta)), s * (mean - y)


def gamma_loss(y, s, eta):
    """Gamma's negative log-likelihood up to terms in y: ``sum s (y / mu + log mu)``, and its gradient in eta."""
    ratio = y * np.exp(-eta)
    return float(s @ (ratio + eta)), s * (1 - ratio)


def cox_loss(y, s, eta):
    """Breslow's negative log partial likelihood of signed times ``y`` (+time event, -time censored), written with an
    explicit (event times x rows) risk-set matrix: ``sum_k d_k log sum_{t_j >= t_k} s_j exp(eta_j) - sum_i s_i
    delta_i eta_i``, ``d_k`` the weighted events at t_k; and its gradient in eta."""
    at_risk, deaths = _risk_sets(y.tobytes(), s.tobytes())
    event = y > 0
    shift = eta.max()
    risk = at_risk @ (s * np.exp(eta - shift))
    value = float(deaths @ (np.log(risk) + shift) - (s * event) @ eta)
    gradient = s * np.exp(eta - shift) * (at_risk.T @ (deaths / risk)) - s * event
    return value, gradient


@functools.lru_cache(maxsize=8)
def _risk_sets(y_bytes, s_bytes):
    """(at_risk (event times, rows): 1 where the row's time is at least the event time; the weighted events at each
    event time) of signed times and weights given as bytes (cached: the proximal gradient evaluates one y often)."""
    y, s = np.frombuffer(y_bytes), np.frombuffer(s_bytes)
    time, event = np.abs(y), y > 0
    event_times = np.unique(time[event])
    at_risk = (time[None, :] >= event_times[:, None]).astype(float)
    return at_risk, np.array([s[event & (time == t)].sum() for t in event_times])


LOSS_OF = {"tweedie": tweedie_loss, "gamma": gamma_loss, "cox": cox_loss}


def l1_objective(name, M, y, s, w, b, lam):
    """The FIRE objective under L1 without fusion: the loss at ``b + M w`` plus ``lam ||w||_1``."""
    return LOSS_OF[name](y, s, b + M @ w)[0] + lam * float(np.abs(w).sum())


# --- the problems ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def forest_problem():
    """200 rows, 4 depth-2 trees: X, the LeafMatrix, dense M, leaf offsets, and targets of every loss from one signal
    (Tweedie: 30% zeros; Cox: times rounded to give ties, 30% censored)."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(N, 3))
    signal = X[:, 0] + 0.5 * X[:, 1] * (X[:, 2] > 0) + 0.3 * rng.normal(size=N)
    trees = RandomForestRegressor(n_estimators=4, max_depth=2, random_state=0).fit(X, signal)
    forest = TreeEnsemble.from_sklearn(trees)
    matrix = leaf_matrix(forest, X)
    amounts = np.exp(0.5 * signal) * rng.gamma(2.0, 0.5, size=N)
    times = np.round(20 * rng.exponential(np.exp(-signal))) + 1
    targets = {
        "gamma": amounts,
        "tweedie": np.where(rng.random(N) < 0.3, 0.0, amounts),
        "cox": signed_times(times, rng.random(N) < 0.7),
        "poisson": rng.poisson(np.exp(0.5 * signal)).astype(float),
    }
    return X, matrix, matrix.to_csc().toarray(), forest.leaf_offsets, targets


def l1_path(matrix, y, name, fractions=(0.3, 0.05, 0.01)):
    """Our L1 path (no fusion) at ``fractions`` of its lambda_max: (path, lambdas)."""
    settings = {**L1, "loss": name, "tol": TOL[name]}
    lambda_max = fit_path(matrix, y, n_lambdas=1, **settings).lambda_max
    lambdas = tuple(f * lambda_max for f in fractions)
    return fit_path(matrix, y, lambdas=lambdas, **settings), lambdas


# --- 1. L1-Tweedie and L1-Gamma against glum -------------------------------------------------------------------------


def glum_objective_scaling(name, M, y, w, b, lam):
    """glum's objective at (w, b) (its mean half unit deviance plus ``alpha ||w||_1``, alpha = lam / n), from
    scikit-learn's unit deviances, mapped to ours: ``n * glum's - sum_i c(y_i)``, c the terms in y alone of the half
    deviance (Tweedie: ``y^(2-p) / ((1-p)(2-p))``; Gamma: ``-log y - 1``)."""
    from sklearn.metrics import mean_gamma_deviance, mean_tweedie_deviance

    mu, n = np.exp(b + M @ w), len(y)
    if name == "tweedie":
        half = mean_tweedie_deviance(y, mu, power=POWER) / 2
        constant = (y ** (2 - POWER) / ((1 - POWER) * (2 - POWER))).sum()
    else:
        half = mean_gamma_deviance(y, mu) / 2
        constant = (-np.log(y) - 1).sum()
    return n * (half + lam / n * np.abs(w).sum()) - constant


@pytest.mark.parametrize("name", ["tweedie", "gamma"])
def test_l1_tweedie_and_gamma_equal_glum_on_the_same_columns(forest_problem, name):
    """glum's ``GeneralizedLinearRegressor`` (log link, ``l1_ratio=1``, P1 ones, intercept unpenalised) minimises the
    mean half unit deviance plus ``alpha ||w||_1`` (its sample weights normalised to sum to 1); ours the sum of the
    negative log-likelihood (the half deviance less terms in y alone) plus ``lam ||w||_1``: the same problem at
    ``alpha = lam / n``. The scaling is checked at both solutions (glum's objective, from scikit-learn's deviances,
    times n less the constant is ours), then each solution is scored on OUR objective: ours is no worse than glum's by
    more than 1e-6 relative and glum's within 1e-6 of ours (both are the unique optimum's value)."""
    from glum import GeneralizedLinearRegressor, TweedieDistribution

    _, matrix, M, _, targets = forest_problem
    y, ones = targets[name], np.ones(N)
    path, lambdas = l1_path(matrix, y, name)
    family = TweedieDistribution(POWER) if name == "tweedie" else "gamma"
    glm = GeneralizedLinearRegressor(
        family=family,
        link="log",
        alpha=[lam / N for lam in lambdas],
        alpha_search=True,  # the path, warm-started: glum's own grid is not used where alpha is given
        l1_ratio=1.0,
        P1=np.ones(M.shape[1]),
        fit_intercept=True,
        gradient_tol=1e-8,
        max_iter=10_000,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "line search failed" near the optimum: the objectives below judge
        glm.fit(M, y)
    for k, lam in enumerate(lambdas):
        w, b = path.coef(k), path.intercepts[k]
        w_glum, b_glum = glm.coef_path_[k], glm.intercept_path_[k]
        ours, theirs = l1_objective(name, M, y, ones, w, b, lam), l1_objective(name, M, y, ones, w_glum, b_glum, lam)
        assert path.steps[k].converged
        assert path.steps[k].objective == pytest.approx(ours, rel=1e-10)
        for point in ((w, b), (w_glum, b_glum)):
            assert glum_objective_scaling(name, M, y, *point, lam) == pytest.approx(
                l1_objective(name, M, y, ones, *point, lam), rel=1e-10
            )
        assert ours <= theirs + 1e-6 * abs(theirs)
        assert abs(theirs - ours) <= 1e-6 * abs(ours)
        assert np.count_nonzero(w) > 0


# --- 2. L1-Cox against Coxnet ----------------------------------------------------------------------------------------


def test_l1_cox_equals_coxnet_on_the_same_columns(forest_problem):
    """scikit-survival's ``CoxnetSurvivalAnalysis(l1_ratio=1)`` minimises Breslow's negative log partial likelihood
    over n plus ``alpha ||w||_1`` (no intercept: the partial likelihood ignores a shift of every score); ours the
    sum plus ``lam ||w||_1``: the same problem at ``alpha = lam / n``. Coxnet with ``tol=1e-12`` reaches it to ~1e-13
    (measured), so the comparison is with Coxnet itself, both ways at 1e-6 relative on OUR objective, along a path of
    three lambdas on data with tied times and censoring."""
    from sksurv.linear_model import CoxnetSurvivalAnalysis
    from sksurv.util import Surv

    _, matrix, M, _, targets = forest_problem
    y, ones = targets["cox"], np.ones(N)
    path, lambdas = l1_path(matrix, y, "cox")
    coxnet = CoxnetSurvivalAnalysis(
        l1_ratio=1.0,
        alphas=[lam / N for lam in lambdas],
        fit_baseline_model=False,
        normalize=False,
        tol=1e-12,
        max_iter=1_000_000,
    ).fit(M, Surv.from_arrays(y > 0, np.abs(y)))
    for k, lam in enumerate(lambdas):
        w, w_coxnet = path.coef(k), coxnet.coef_[:, k]
        ours, theirs = l1_objective("cox", M, y, ones, w, 0.0, lam), l1_objective("cox", M, y, ones, w_coxnet, 0.0, lam)
        assert path.steps[k].converged and path.intercepts[k] == 0.0
        assert path.steps[k].objective == pytest.approx(ours, rel=1e-10)
        assert ours <= theirs + 1e-6 * abs(theirs)
        assert abs(theirs - ours) <= 1e-6 * abs(ours)
        assert np.count_nonzero(w) > 0


# --- 3. a fused Cox problem with a linear term against cvxpy ---------------------------------------------------------


def test_fused_l1_cox_with_linear_terms_equals_cvxpy(forest_problem):
    """M's leaf columns plus two linear columns (X's first two features; each a block of its own, not fused) under
    L1 + fusion of neighbouring leaves: the last step of a two-step path (0.3 and 0.05 of lambda_max) has cvxpy's
    optimum (Breslow's partial likelihood as one log-sum-exp per event time, Clarabel) within 1e-6 relative, with a
    linear term among its terms. (One cvxpy solve: ~2 s.)"""
    cp = pytest.importorskip("cvxpy")
    from tests.support.references import CLARABEL_SETTINGS

    X, matrix, _, offsets, targets = forest_problem
    y = targets["cox"]
    with_linear = LeafMatrix(matrix.leaves, matrix.values, matrix.offsets, np.ascontiguousarray(X[:, :2]))
    dense = with_linear.to_csc().toarray()
    settings = {**EXACT, "penalty": "l1", "fusion_ratio": 0.5, "tol": TOL["cox"]}
    lambda_max = fit_path(with_linear, y, loss="cox", n_lambdas=1, **settings).lambda_max
    lam = 0.05 * lambda_max
    path = fit_path(with_linear, y, loss="cox", lambdas=(0.3 * lambda_max, lam), **settings)
    time, event = np.abs(y), y > 0
    w = cp.Variable(dense.shape[1])
    score = dense @ w
    loss = -(event.astype(float) @ score)
    for t in np.unique(time[event]):
        loss = loss + float((event & (time == t)).sum()) * cp.log_sum_exp(score[np.flatnonzero(time >= t)])
    fused = sum(cp.norm1(cp.diff(w[start:stop])) for start, stop in itertools.pairwise(offsets) if stop - start > 1)
    problem = cp.Problem(cp.Minimize(loss + lam * cp.norm1(w) + 0.5 * lam * fused))
    for solver_settings in CLARABEL_SETTINGS:
        problem.solve(solver="CLARABEL", **solver_settings)
        if problem.status == cp.OPTIMAL:
            break
    assert problem.status == cp.OPTIMAL
    assert path.steps[1].converged
    assert path.steps[1].objective == pytest.approx(problem.value, rel=1e-6)
    assert np.count_nonzero(path.coef(1)[-2:]) > 0


# --- 4. MCP against proximal gradient from the same point ------------------------------------------------------------


def proximal_gradient_mcp(name, M, y, s, gammas, lam, w, b, intercept, n_iter=400):
    """Reference: proximal gradient with backtracking on the loss ``name`` plus ``sum_j MCP(|w_j|; lam, gamma_j)``
    (no fusion) from (w, b), b unpenalised (kept at 0 without an intercept); each coordinate's prox the global
    minimiser of ``(w - z)^2 / (2 step) + MCP(|w|)`` (firm thresholding where ``step < gamma_j``, else hard). Returns
    the objective where it stops."""

    def objective(w, b):
        with np.errstate(over="ignore", invalid="ignore"):
            value = LOSS_OF[name](y, s, np.clip(b + M @ w, -300.0, 300.0))[0]  # a far step: a huge value, no overflow
        return value + float(mcp(np.abs(w), lam, gammas).sum()) if np.isfinite(value) else np.inf

    step, current = 1.0, objective(w, b)
    for _ in range(n_iter):
        gradient = LOSS_OF[name](y, s, b + M @ w)[1]
        g, g0 = M.T @ gradient, gradient.sum() if intercept else 0.0
        while True:
            new = mcp_prox(w - step * g, step, lam, gammas)
            new_b = b - step * g0
            value = objective(new, new_b)
            if value <= current - 1e-12 * abs(current) or step < 1e-12:
                break
            step *= 0.5
        if value > current:  # no descent left at any step length
            break
        w, b, current = new, new_b, value
        step *= 1.5
    return current


@pytest.mark.parametrize("name", ["tweedie", "gamma", "cox"])
def test_mcp_steps_are_no_worse_than_proximal_gradient_from_the_same_point(forest_problem, name):
    """MCP is not convex: a Newton step certified stationary (``solver.losses.newton.solve_certified``) is a
    stationary point, not necessarily the global minimum. Each step k of an MCP path (no fusion, 12 lambdas) is
    compared with proximal gradient started from step k-1's weights (the warm start the solver had) on the same
    objective (the concavities ``gamma_j`` of the path's own problem): ours no worse than 1% above it, the allowance
    of the Poisson test (tests/solver/test_poisson.py). Measured: at most 0 (Tweedie), 2.3e-3 (Gamma) and 2.9e-4 (Cox)
    above it, and below it at 3 or 4 of the 11 steps of each (by up to 8e-4, 9e-4, 4e-3)."""
    _, matrix, M, _, targets = forest_problem
    y, ones = targets[name], np.ones(N)
    spec = PathSpec(loss=name, penalty="mcp", fusion_ratio=0.0, n_lambdas=12, **{**EXACT, "tol": TOL[name]})
    path = fit_path(matrix, y, spec)
    problem = Problem.from_leaf_matrix(matrix, y, ones, spec.path_loss(), "mcp", spec.gamma, spec.mcp_scaling)
    gammas, intercept = problem.leaf_gamma, name != "cox"
    excess = []
    for k in range(1, len(path.steps)):
        lam = path.steps[k].lambda_s
        w, b = path.coef(k), path.intercepts[k]
        ours = LOSS_OF[name](y, ones, b + M @ w)[0] + float(mcp(np.abs(w), lam, gammas).sum())
        assert ours == pytest.approx(path.steps[k].objective, rel=1e-9)
        assert path.steps[k].converged
        reference = proximal_gradient_mcp(
            name, M, y, ones, gammas, lam, path.coef(k - 1), path.intercepts[k - 1], intercept
        )
        excess.append((ours - reference) / abs(reference))
    assert max(excess) <= 0.01, f"ours above proximal gradient by {max(excess):.3g} relative"
    assert path.steps[-1].n_rules > 0


# --- 5. the C-index against scikit-survival --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_cindex_equals_sksurvs_concordance_index_censored(seed):
    """Harrell's C-index (``solver.losses.cox.concordance_index``, O(n log n)) is scikit-survival's
    ``concordance_index_censored`` to 1e-12 on random data with tied times (8 distinct), tied scores (5 distinct,
    plus pairs 1e-9 apart, tied within scikit-survival's 1e-8, and 1e-7 apart, not tied) and 20-80% censoring."""
    from sksurv.metrics import concordance_index_censored

    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 300))
    time = rng.integers(1, 9, size=n).astype(float)
    event = rng.random(n) < rng.uniform(0.2, 0.8)
    event[0] = True
    score = rng.integers(0, 5, size=n).astype(float)
    score[1::7] += 1e-9
    score[2::11] += 1e-7
    expected = concordance_index_censored(event, time, score)[0]
    assert concordance_index(signed_times(time, event), score) == pytest.approx(expected, rel=0, abs=1e-12)
    continuous = rng.normal(size=n)  # and with no tied scores
    expected = concordance_index_censored(event, time, continuous)[0]
    assert concordance_index(signed_times(time, event), continuous) == pytest.approx(expected, rel=0, abs=1e-12)


@pytest.fixture(scope="module")
def survival_fit():
    """A FireSurvival (rules only: 4 selected) fitted on 240 rows with tied times and censoring, validated on 80
    others: (model, X, time, event) of its training rows and (X, time, event) of new rows."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 3))
    time = np.round(10 * rng.exponential(np.exp(-X[:, 0] - 0.5 * (X[:, 1] > 0)))) + 1
    event = rng.random(400) < 0.7
    settings = {"n_estimators": 20, "max_depth": 2, "n_lambdas": 20, "lambda_min_ratio": 0.01, "linear_terms": False}
    model = FireSurvival(**settings, random_state=0)
    model.fit(X[:240], signed_times(time[:240], event[:240]), X[240:320], signed_times(time[240:320], event[240:320]))
    return model, (X[:240], time[:240], event[:240]), (X[320:], time[320:], event[320:])


def test_a_fitted_model_s_score_is_sksurvs_cindex_of_its_predictions(survival_fit):
    """``FireSurvival.score`` is the C-index of ``predict`` (the risk score): scikit-survival's on new rows."""
    from sksurv.metrics import concordance_index_censored

    model, _, (X, time, event) = survival_fit
    expected = concordance_index_censored(event, time, model.predict(X))[0]
    assert model.score(X, signed_times(time, event)) == pytest.approx(expected, rel=0, abs=1e-12)
    assert len(model.rule_ensemble_.rules) > 1 and expected > 0.7  # the rules carry the signal


# --- 6. integer sample weights equal repeated rows -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["poisson", "tweedie", "gamma", "cox"])
def test_integer_sample_weights_equal_repeated_rows(forest_problem, name):
    """Weights k_i (1 to 3) against each row repeated k_i times (Cox: under Breslow's ties a row of weight k is k
    rows at one time). ``fit_path`` normalises weights to sum to n, so the weighted problem is the repeated one scaled
    by c = n / sum k: its lambda_max and lambdas are c times the repeated path's, its weights and intercepts the same
    (to 1e-6) and its objective c times the repeated one's (Cox: plus ``c log(c) D``, D the events of the repeated
    rows, from the log of the risk sets' weights). Under L1, whose optimum is unique."""
    _, matrix, _, _, targets = forest_problem
    y = targets[name]
    k = np.random.default_rng(1).integers(1, 4, size=N)
    repeat = np.repeat(np.arange(N), k)
    repeated_matrix = LeafMatrix(np.ascontiguousarray(matrix.leaves[repeat]), matrix.values, matrix.offsets)
    # two solutions each within tol of stationary differ by up to ~tol / curvature: 1e-7 keeps Cox's within 1e-6
    settings = {**L1, "loss": name, "tol": min(TOL[name], 1e-7), "n_lambdas": 8, "lambda_min_ratio": 0.01}
    weighted = fit_path(matrix, y, sample_weight=k.astype(float), **settings)
    repeated = fit_path(repeated_matrix, y[repeat], **settings)
    c = N / k.sum()
    shift = c * np.log(c) * (y[repeat] > 0).sum() if name == "cox" else 0.0
    assert weighted.lambda_max == pytest.approx(c * repeated.lambda_max, rel=1e-10)
    assert len(weighted.steps) == len(repeated.steps) == 8
    for step in range(8):
        np.testing.assert_allclose(weighted.coef(step), repeated.coef(step), rtol=0, atol=1e-6)
        assert weighted.intercepts[step] == pytest.approx(repeated.intercepts[step], abs=1e-6)
        assert weighted.steps[step].objective == pytest.approx(c * repeated.steps[step].objective + shift, rel=1e-6)
    assert np.count_nonzero(weighted.coef(7)) > 0


# --- 7. survival curves: Breslow and Kaplan-Meier --------------------------------------------------------------------


def test_survival_curves_are_breslows_estimate_at_the_rules_scores(survival_fit):
    """``predict_survival_function`` is ``exp(-H0(t) exp(eta(x)))`` with Breslow's baseline cumulative hazard of the
    training rows at the model's scores: ``H0(t) = sum_{event times t_k <= t} d_k / sum_{t_j >= t_k} exp(eta_j)``,
    computed here from that definition and by scikit-survival's ``BreslowEstimator`` on the same linear predictor;
    both to 1e-10 on new rows at event times and between them; by hand also before the first time and up to the last
    follow-up (where scikit-survival's step functions are not defined before the first time). Past the last
    follow-up time, or before 0, a ValueError naming it, as scikit-survival's step functions raise outside their
    domain."""
    from sksurv.linear_model.coxph import BreslowEstimator

    model, (X, time, event), (X_new, _, _) = survival_fit
    eta = model.predict(X)
    event_times = np.unique(time[event])
    H0 = np.cumsum([(event & (time == t)).sum() / np.exp(eta[time >= t]).sum() for t in event_times])
    at = np.sort(np.concatenate([[0.0, 0.5], event_times, event_times[:-1] + 0.5, [time.max()]]))
    hazard_at = np.concatenate([[0.0], H0])[np.searchsorted(event_times, at, side="right")]
    expected = np.exp(-np.outer(np.exp(model.predict(X_new)), hazard_at))
    curves = model.predict_survival_function(X_new, at)
    np.testing.assert_allclose(curves, expected, rtol=1e-10, atol=1e-12)
    breslow = BreslowEstimator().fit(eta, event, time)
    # scikit-survival's curves are defined up to the last time, and read before the first time as at it
    inside = (at >= time.min()) & (at <= time.max())
    sksurv_curves = np.vstack([f(at[inside]) for f in breslow.get_survival_function(model.predict(X_new))])
    np.testing.assert_allclose(curves[:, inside], sksurv_curves, rtol=1e-10, atol=1e-12)
    # the event times, then the last follow-up time (H0 stays at its last event's value up to it)
    last = time.max()
    np.testing.assert_array_equal(model.baseline_hazard_[0], np.union1d(event_times, [last]))
    np.testing.assert_allclose(
        model.baseline_hazard_[1], H0 if last in event_times else np.append(H0, H0[-1]), rtol=1e-10
    )
    assert np.all(curves[:, 0] == 1.0) and np.all(np.diff(curves, axis=1) <= 0.0)
    for outside in (last + 10, last * (1 + 1e-12), -1.0, np.nan):
        with pytest.raises(ValueError, match=f"outside \\[0, {last:g}\\].*last follow-up time"):
            model.predict_survival_function(X_new, [1.0, outside])
    with pytest.raises(ValueError, match="last follow-up time"):
        model.rule_ensemble_.predict_survival(model._table(X_new, reset=False), [last + 1])


@pytest.mark.parametrize("seed", range(3))
def test_kaplan_meier_equals_sksurvs_estimator(seed):
    """``solver.losses.cox.kaplan_meier`` is scikit-survival's ``kaplan_meier_estimator`` (read as a right-continuous
    step function, 1 before the first event) to 1e-12 on tied, censored times, including a censored last time."""
    from sksurv.nonparametric import kaplan_meier_estimator

    rng = np.random.default_rng(seed)
    time = rng.integers(1, 15, size=150).astype(float)
    event = rng.random(150) < 0.6
    event[np.argmax(time)] = False
    times, survival = kaplan_meier_estimator(event, time)
    at = np.concatenate([[0.5], np.unique(time), np.unique(time) + 0.5])
    expected = np.concatenate([[1.0], survival])[np.searchsorted(times, at, side="right")]
    np.testing.assert_allclose(kaplan_meier(signed_times(time, event), at), expected, rtol=0, atol=1e-12)


# --- 8. the estimators' targets --------------------------------------------------------------------------------------


def test_fire_survival_takes_structured_y_and_signed_times_alike(survival_fit):
    """scikit-survival's structured ``y`` (``Surv.from_arrays``) and signed times give the same model (the same
    predictions), and ``score`` takes those and (n, 2) arrays of (time, event) alike: the same C-index."""
    from sksurv.util import Surv

    model, (X, time, event), (X_new, time_new, event_new) = survival_fit
    settings = model.get_params()
    structured = FireSurvival(**settings).fit(X, Surv.from_arrays(event, time)).predict(X_new)
    signed = FireSurvival(**settings).fit(X, signed_times(time, event)).predict(X_new)
    np.testing.assert_array_equal(structured, signed)
    forms = (Surv.from_arrays(event_new, time_new), np.column_stack([time_new, event_new]))
    expected = model.score(X_new, signed_times(time_new, event_new))
    assert [model.score(X_new, y) for y in forms] == [expected, expected]


def test_fire_survival_fits_time_event_pairs(survival_fit):
    """FireSurvival's docstring (and ``solver.estimator.survival_target``) takes an (n, 2) array of (time, event) as
    ``y``; ``score`` does, but ``fit`` passes y to scikit-learn's ``validate_data`` first, which refuses it ("y should
    be a 1d array, got an array of shape (240, 2) instead"): ``_fit`` should read the target before validating."""
    model, (X, time, event), (X_new, _, _) = survival_fit
    settings = model.get_params()
    pairs = FireSurvival(**settings).fit(X, np.column_stack([time, event])).predict(X_new)
    np.testing.assert_array_equal(pairs, FireSurvival(**settings).fit(X, signed_times(time, event)).predict(X_new))


def _amounts_with_a_zero_at_row_17():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    y = np.exp(X[:, 0])
    y[17] = 0.0
    return X, y


def test_amount_targets_are_checked():
    """A Gamma target with a zero is a ValueError naming its row (with the validation rows given, so that the
    training rows are the user's); a Tweedie target of zeros only, a ValueError saying so."""
    X, y = _amounts_with_a_zero_at_row_17()
    regressor = {"n_estimators": 3, "max_depth": 2, "random_state": 0}
    with pytest.raises(ValueError, match=r"Gamma loss needs positive y .* row 17 \(0\); use loss='tweedie'"):
        FireRegressor(loss="gamma", **regressor).fit(X[:40], y[:40], X[40:], y[40:])
    with pytest.raises(ValueError, match="Gamma loss needs positive y"):
        FireRegressor(loss="gamma", **regressor).fit(X, y)
    with pytest.raises(ValueError, match=r"Tweedie loss needs some positive y .* every amount is 0"):
        FireRegressor(loss="tweedie", **regressor).fit(X, np.zeros(60))


def test_a_gamma_zero_is_named_by_its_row_in_the_users_y():
    """With the default hold-out (``validation_fraction=0.2``) the estimator splits the rows before ``fit_path`` checks
    the target, so the message names the zero's row in the training part ("the first at row 12") for the user's row
    17 (or a row of ``y_val`` where the zero is held out): the check should run on the user's ``y`` before the split."""
    X, y = _amounts_with_a_zero_at_row_17()
    with pytest.raises(ValueError, match=r"row 17 \(0\)"):
        FireRegressor(loss="gamma", n_estimators=3, max_depth=2, random_state=0).fit(X, y)


def test_a_cox_step_that_cannot_certify_stops_early(forest_problem):
    """At ``tol=1e-8`` (of lambda_max) the L1-Cox steps above reach stationarity measures of 1e-8 to 4e-8 of
    lambda_max (objective at Coxnet's to ~1e-15) and no further: the Newton step that would go on lowers the objective
    by ~1e-13, the rounding of its value (~600), so the halvings reject it and the state stays where it is. Such a
    step cannot certify, and ``PathStep.converged`` rightly says False; but ``solve_certified`` tightens its inner
    tolerance and starts another round while any inner pass moved the inner (quadratic) model, whether or not the
    Newton step was kept, so the step spends all of ``max_iter`` (here 20,000 passes) going nowhere. A step should
    stop once a round leaves the weights unchanged."""
    _, matrix, _, _, targets = forest_problem
    settings = {**L1, "loss": "cox", "tol": 1e-8, "max_iter": 20_000}
    lambda_max = fit_path(matrix, targets["cox"], n_lambdas=1, **settings).lambda_max
    path = fit_path(matrix, targets["cox"], lambdas=(0.3 * lambda_max, 0.05 * lambda_max), **settings)
    assert all(step.converged or step.n_iter < 2_000 for step in path.steps)


# --- offsets ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["poisson", "tweedie", "gamma"])
def test_an_offset_is_the_fit_with_the_offset_in_every_score(forest_problem, name):
    """``Loss.offset_target`` turns (y, weights, offset) into a target and weights whose fit is the fit with the offset
    added to every row's score: the L1 weights of its path (weights normalised to sum to n, so its lambda is the
    direct problem's times c = n / sum w') minimise the direct objective ``sum s l(y, offset + b + M w) +
    lam / c ||w||_1``, which scipy minimises here from the definitions (smooth in (b, w+, w-) >= 0)."""
    from scipy.optimize import minimize

    _, matrix, dense, _, targets = forest_problem
    y = targets[name]
    offset = np.random.default_rng(2).normal(0.0, 0.5, N)
    spec = PathSpec(loss=name, **L1)
    target, weights = spec.path_loss().offset_target(y, None, offset)
    lambda_max = fit_path(matrix, target, spec, sample_weight=weights, n_lambdas=1).lambda_max
    lam = 0.1 * lambda_max
    path = fit_path(matrix, target, spec, sample_weight=weights, lambdas=(lam,))
    c = N / weights.sum()
    row_loss = {"poisson": poisson_loss, "tweedie": tweedie_loss, "gamma": gamma_loss}[name]
    R = dense.shape[1]

    def objective(v):
        b, w = v[0], v[1 : R + 1] - v[R + 1 :]
        value, gradient = row_loss(y, np.ones(N), offset + b + dense @ w)
        slope = dense.T @ gradient
        return value + lam / c * v[1:].sum(), np.concatenate([[gradient.sum()], slope + lam / c, -slope + lam / c])

    start = np.concatenate([[path.intercepts[0]], np.maximum(path.coef(0), 0), np.maximum(-path.coef(0), 0)])
    bounds = [(None, None)] + [(0, None)] * (2 * R)
    settings = {"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000}
    reference = minimize(objective, np.zeros(2 * R + 1), jac=True, bounds=bounds, method="L-BFGS-B", options=settings)
    ours = objective(start)[0]
    assert ours <= reference.fun + 1e-7 * abs(reference.fun)
    assert ours == pytest.approx(reference.fun, rel=1e-6)


def test_a_poisson_offset_of_log_exposure_is_the_exposure_fit():
    """The estimators' ``offset``: Poisson with ``offset = log(exposure)`` is the rate fit ``y / exposure`` weighted by
    the exposure (the same rules and weights), and ``predict(X, offset)`` is that rate times the exposure; a Cox
    model takes no offset."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 3))
    exposure = rng.uniform(0.2, 3.0, 600)
    y = rng.poisson(exposure * np.exp(0.6 * (X[:, 0] > 0))).astype(float)
    settings = {"loss": "poisson", "n_estimators": 10, "max_depth": 2, "random_state": 0, "max_rules": 8}
    with_offset = FireRegressor(**settings).fit(X, y, offset=np.log(exposure))
    as_rates = FireRegressor(**settings).fit(X, y / exposure, sample_weight=exposure)
    np.testing.assert_allclose(with_offset.coef_, as_rates.coef_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(
        with_offset.predict(X[:20], offset=np.log(exposure[:20])), as_rates.predict(X[:20]) * exposure[:20], rtol=1e-12
    )
    with pytest.raises(ValueError, match="takes no offset"):
        PathSpec(loss="cox").path_loss().offset_target(signed_times(np.ones(3), np.ones(3)), None, np.zeros(3))
