"""Polish (``solver.polish``) refits each step's terms by the path's own loss: the polished weights on a step's support
are an independent reference's unpenalised fit of that loss on the same columns (scikit-learn's least squares and
logistic regression, glum's Poisson, Tweedie and Gamma GLMs, scikit-survival's Breslow Cox model), and a polished
step is never worse on its training rows than the penalised weights on the same support.

The problem: 300 rows, a small forest's leaf matrix (4 trees of depth 2: 16 rule columns) beside two linear columns
(the raw features), targets of every loss from one signal, unequal sample weights (integers, so that Cox's reference,
which takes none, fits the repeated rows). Polish adds a ridge of ``POLISH_RIDGE`` (1e-6) times each column's
curvature: on the full-rank supports compared here that moves the weights by about 1e-6 relative, inside the
comparisons' tolerance.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.ensemble import RandomForestRegressor

from solver import (
    FireClassifier,
    FireRegressor,
    FireSurvival,
    LeafMatrix,
    TreeEnsemble,
    fit_path,
    leaf_matrix,
    signed_times,
)
from solver.losses import LOSSES, cox
from solver.spec import PathSpec, SpecError

N = 300
POWER = 1.5  # PathSpec.power's default
REFERENCE_RTOL = 1e-4  # weights and intercept, relative to the largest of them (the ridge moves them ~1e-6)
WELL_CONDITIONED = 10.0  # the supports whose weights are compared (measured: 1.1 to 7 here, weights within 7e-6)
SINGLE_OUTPUT = [name for name, loss in LOSSES.items() if loss.polish_allowed]


@pytest.fixture(scope="module")
def problem():
    """(LeafMatrix with two linear columns, its dense columns, integer sample weights, targets of every loss)."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(N, 3))
    signal = 0.8 * X[:, 0] + 0.6 * (X[:, 1] > 0) * (X[:, 2] > -0.5) + 0.3 * rng.normal(size=N)
    trees = RandomForestRegressor(n_estimators=4, max_depth=2, random_state=0).fit(X, signal)
    rules = leaf_matrix(TreeEnsemble.from_sklearn(trees), X)
    matrix = LeafMatrix(rules.leaves, rules.values, rules.offsets, np.ascontiguousarray(X[:, :2]))
    amounts = np.exp(0.5 * signal) * rng.gamma(2.0, 0.5, size=N)
    targets = {
        "squared": signal + 0.5 * rng.normal(size=N),
        "logistic": (rng.random(N) < 1 / (1 + np.exp(-2 * signal))).astype(float),
        "poisson": rng.poisson(np.exp(0.5 * signal)).astype(float),
        "tweedie": np.where(rng.random(N) < 0.3, 0.0, amounts),
        "gamma": amounts,
        "cox": signed_times(rng.exponential(np.exp(-signal)) + 0.01, rng.random(N) < 0.7),
    }
    weights = rng.integers(1, 4, size=N).astype(float)
    return matrix, matrix.to_csc().toarray(), weights, targets


def reference_fit(name, Z, y, weights):
    """(weights, intercept) of the reference's unpenalised fit of loss ``name`` on columns ``Z``."""
    if name == "squared":
        from sklearn.linear_model import LinearRegression

        fitted = LinearRegression().fit(Z, y, sample_weight=weights)
        return fitted.coef_, float(fitted.intercept_)
    if name == "logistic":
        from sklearn.linear_model import LogisticRegression

        fitted = LogisticRegression(C=np.inf, solver="newton-cholesky", tol=1e-12, max_iter=500)
        fitted.fit(Z, y, sample_weight=weights)
        return fitted.coef_.ravel(), float(fitted.intercept_[0])
    if name == "cox":
        from sksurv.linear_model import CoxPHSurvivalAnalysis
        from sksurv.util import Surv

        repeat = weights.astype(int)  # scikit-survival takes no sample weights: integer weights are repeated rows
        times = Surv.from_arrays(event=np.repeat(y > 0, repeat), time=np.repeat(np.abs(y), repeat))
        fitted = CoxPHSurvivalAnalysis(alpha=0.0, ties="breslow", n_iter=200, tol=1e-12)
        fitted.fit(np.repeat(Z, repeat, axis=0), times)
        return fitted.coef_, 0.0
    from glum import GammaDistribution, GeneralizedLinearRegressor, PoissonDistribution, TweedieDistribution

    family = {"poisson": PoissonDistribution(), "tweedie": TweedieDistribution(POWER), "gamma": GammaDistribution()}
    fitted = GeneralizedLinearRegressor(family=family[name], link="log", alpha=0.0, gradient_tol=1e-12, max_iter=500)
    fitted.fit(Z, y, sample_weight=weights)
    return fitted.coef_, float(fitted.intercept_)


def training_loss(name, y, weights, score):
    """The mean loss of scores ``score`` from its definition (scikit-learn's deviances; Breslow's negative log
    partial likelihood written with every row's risk set), not the library's."""
    from sklearn.metrics import log_loss, mean_gamma_deviance, mean_poisson_deviance, mean_tweedie_deviance

    if name == "cox":
        time, event = np.abs(y), y > 0
        risk = (time[None, :] >= time[:, None]) @ (weights * np.exp(score))
        return float(-(weights * event) @ (score - np.log(risk)) / weights.sum())
    deviance = {
        "squared": lambda: np.average((y - score) ** 2, weights=weights),
        "logistic": lambda: log_loss(y, 1 / (1 + np.exp(-score)), sample_weight=weights),
        "poisson": lambda: mean_poisson_deviance(y, np.exp(score), sample_weight=weights),
        "tweedie": lambda: mean_tweedie_deviance(y, np.exp(score), sample_weight=weights, power=POWER),
        "gamma": lambda: mean_gamma_deviance(y, np.exp(score), sample_weight=weights),
    }
    return float(deviance[name]())


def independent_columns(design, first):
    """The positions of ``design``'s columns from ``first`` on that are independent of the columns before them."""
    kept = list(range(first))
    for j in range(first, design.shape[1]):
        if np.linalg.matrix_rank(design[:, [*kept, j]]) == len(kept) + 1:
            kept.append(j)
    return np.array(kept[first:], dtype=np.int64) - first


def condition(design, weights):
    """The condition number of ``design`` with rows weighted by the square roots of ``weights``, columns unit-norm."""
    weighted = design * np.sqrt(weights)[:, None]
    return float(np.linalg.cond(weighted / np.linalg.norm(weighted, axis=0)))


@pytest.mark.parametrize("name", SINGLE_OUTPUT)
def test_polished_weights_are_the_references_unpenalised_fit_on_the_same_columns(problem, name):
    """At every step with terms, the training loss of the polished weights is the minimum the reference reaches on a
    basis of the step's columns (its columns independent of the constant and of one another: a tree's leaves together
    are the constant), to 1e-9 relative; where the step's columns are a well-conditioned basis (condition number
    below ``WELL_CONDITIONED``, where the ridge moves the weights ~1e-6), the polished weights and intercept equal the
    reference's. Cox's intercept is 0: its partial likelihood ignores a constant."""
    matrix, dense, weights, targets = problem
    y, loss = targets[name], LOSSES[name]
    path = fit_path(
        matrix, y, loss=name, penalty="l1", fusion_ratio=0.0, n_lambdas=15, lambda_min_ratio=0.01,
        sample_weight=weights, polish=True,
    )  # fmt: skip
    compared_weights = compared_losses = 0
    for k in range(1, len(path.steps)):
        coef, intercept = path.coef(k), path.intercepts[k]
        support = np.flatnonzero(coef)
        Z = dense[:, support]
        design = np.column_stack([np.ones(N), Z])
        basis = independent_columns(design, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs, their_intercept = reference_fit(name, Z[:, basis], y, weights)
        ours_loss = training_loss(name, y, weights, intercept + Z @ coef[support])
        their_loss = training_loss(name, y, weights, their_intercept + Z[:, basis] @ theirs)
        assert ours_loss == pytest.approx(their_loss, rel=1e-9), k
        compared_losses += 1
        if not loss.has_intercept:
            assert intercept == 0.0
        if len(basis) == len(support) and condition(design, weights) < WELL_CONDITIONED:
            ours, expected = np.append(coef[support], intercept), np.append(theirs, their_intercept)
            np.testing.assert_allclose(ours, expected, rtol=0, atol=REFERENCE_RTOL * np.abs(expected).max())
            compared_weights += 1
    assert compared_weights >= 3 and compared_losses >= 10


# --- every loss against every setting it accepts -----------------------------------------------------------------

ROWS = 240
FOREST = {"n_estimators": 8, "max_depth": 3}
QUICK = {"n_lambdas": 8, "lambda_min_ratio": 0.02}
SHORT = {"n_lambdas": 5, "lambda_min_ratio": 0.1}  # the fast tier's paths (a multinomial path to 0.02: 7 s)
LOSS_RTOL = 1e-4  # the ridge's share of a training loss: ~1e-6 times the terms' explained curvature over the loss
# the candidates: (candidates, max_rule_length) ("leaves" with a cap below the forest's depth 3 leaves none)
TERMS = {"leaves": ("leaves", None), "nodes": ("nodes", None), "nodes<=2": ("nodes", 2), "<=1": (None, 1)}


def polishing_values(name):
    """The values of PathSpec.polish that polish a path of loss ``name`` (True where allowed, None where on by
    default)."""
    allowed = [True, None] if LOSSES[name].polish_allowed else [None]
    return [value for value in allowed if PathSpec(loss=name, polish=value).polishes()]


def settings_table(name):
    """The settings a path of loss ``name`` accepts, each with every value it may take here; ``polish``: the values
    that polish (False, or None where it means False, is the twin every fit is compared with)."""
    return {
        "penalty": ["l1", "mcp"],
        "fusion_ratio": [0.0, None],
        "terms": list(TERMS),
        "linear_terms": [True, False],
        "scaling": ["unit", "leaf_value"],
        "selection": list(LOSSES[name].selections),
        "polish": polishing_values(name),
        "weighted": [False, True],  # sample weights, not a PathSpec setting: the refit reads them
    }


def pairwise(table):
    """Settings (dicts) in which every pair of values of two settings of ``table`` occurs at least once: greedy, each
    new one begun from the first pair not yet covered and filled with the values that cover the most new pairs."""
    names = list(table)
    uncovered = {
        (a, x, b, y) for i, a in enumerate(names) for b in names[i + 1 :] for x in table[a] for y in table[b]
    }  # fmt: skip

    def covers(row, name, value):
        return sum(
            ((a, row[a], name, value) if names.index(a) < names.index(name) else (name, value, a, row[a])) in uncovered
            for a in row
        )

    rows = []
    while uncovered:
        a, x, b, y = min(uncovered, key=lambda pair: (names.index(pair[0]), names.index(pair[2]), repr(pair)))
        row = {a: x, b: y}
        for name in names:
            if name not in row:
                row[name] = max(table[name], key=lambda value: covers(row, name, value))
        uncovered -= {(p, row[p], q, row[q]) for i, p in enumerate(names) for q in names[i + 1 :]}
        rows.append(dict(sorted(row.items(), key=lambda item: names.index(item[0]))))
    return rows


# every polishing loss (not multinomial, which refuses polish: test_a_loss_s_polish_default_and_refusal_hold) by a
# pairwise covering set of its settings: 10 fits each
COVERING = [(name, row) for name in LOSSES if polishing_values(name) for row in pairwise(settings_table(name))]


def covering_id(case):
    name, row = case
    return name + "-" + "-".join(f"{key}={value}" for key, value in row.items())


@pytest.fixture(scope="module")
def tables():
    """(X, X_val, targets, validation targets, sample weights summing to the rows) from one signal: every loss's
    target."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2 * ROWS, 4))
    signal = 1.2 * (X[:, 0] > 0) + 0.8 * X[:, 1] - 0.6 * (X[:, 2] > 0.5) * (X[:, 3] < 0)
    amounts = np.exp(signal) * rng.gamma(4.0, 0.25, size=2 * ROWS)
    targets = {
        "squared": signal + 0.5 * rng.normal(size=2 * ROWS),
        "logistic": (rng.random(2 * ROWS) < 1 / (1 + np.exp(-2 * (signal - 0.6)))).astype(float),
        "multinomial": np.digitize(signal + 0.4 * rng.normal(size=2 * ROWS), [0.2, 1.2]).astype(float),
        "poisson": rng.poisson(np.exp(signal)).astype(float),
        "tweedie": np.where(rng.random(2 * ROWS) < 0.3, 0.0, amounts),
        "gamma": amounts,
        "cox": signed_times(rng.exponential(np.exp(-2 * signal)) + 0.01, rng.random(2 * ROWS) < 0.7),
    }
    weights = rng.uniform(0.5, 2.0, size=ROWS)
    train = {name: y[:ROWS] for name, y in targets.items()}
    return X[:ROWS], X[ROWS:], train, {name: y[ROWS:] for name, y in targets.items()}, weights * ROWS / weights.sum()


def estimator(name, **params):
    """The scikit-learn estimator that fits loss ``name``."""
    loss = LOSSES[name]
    if loss.task == "survival":
        return FireSurvival(**params)
    if loss.classifier:
        return FireClassifier(**params)
    return FireRegressor(loss=name, **params)


def fitted(name, row, tables, polish, grid=QUICK):
    """The model of loss ``name`` fitted with ``row``'s settings, ``polish`` and the lambda ``grid``, validated on
    X_val (on the folds of cross-validation where the selection is '1se')."""
    X, X_val, targets, val_targets, weights = tables
    candidates, max_rule_length = TERMS[row["terms"]]
    settings = {key: value for key, value in row.items() if key not in ("terms", "weighted", "polish")}
    settings.update(candidates=candidates, max_rule_length=max_rule_length, polish=polish)
    if settings["selection"] == "1se":
        settings["cv_folds"], validation = 2, {}
    else:
        validation = {"X_val": X_val, "y_val": val_targets[name]}
    model = estimator(name, **FOREST, **grid, **settings, random_state=0)
    return model.fit(X, targets[name], sample_weight=weights if row["weighted"] else None, **validation)


def training_score(model, X):
    """The model's score (the rules' sum: log-odds, log mean, log hazard ratio; (n, K) for K classes) on ``X``."""
    return model.decision_function(X) if hasattr(model, "decision_function") else model.rule_ensemble_.predict(X)


def assert_polish_keeps_the_terms_and_fits_no_worse(name, row, tables, grid=QUICK):
    """The model fitted with ``row`` (whose polish polishes) against its twin with polish=False: its path has the
    twin's terms at every step and no higher training loss (the unpenalised refit of the same terms, up to its ridge:
    ``LOSS_RTOL``), so at the twin's selected step it is empty only where the twin is and fits its training rows at
    least as well; its own selected step's training loss is what its path says (the training rows are every row of
    X: validation is X_val or cross-validation, which refits on every row). Validated on X_val, it is empty only where
    the twin is too (this table's signal is strong). Not so by '1se' on this table: cross-validated on two folds of
    120 rows, an unpenalised refit can validate worse than no rule (a Cox case: every polished step above the empty
    one, within one standard error of the lowest), and the selection says so."""
    X, _, targets, _, weights = tables
    polished, plain = fitted(name, row, tables, row["polish"], grid), fitted(name, row, tables, False, grid)
    assert len(polished.path_) == len(plain.path_) and plain.path_[-1]["n_terms"] > 0
    for k, (ours, theirs) in enumerate(zip(polished.path_, plain.path_, strict=True)):
        assert polished.coef_path_[k].indices.tolist() == plain.coef_path_[k].indices.tolist(), k
        assert ours["n_terms"] == theirs["n_terms"], k
        assert ours["train_loss"] <= theirs["train_loss"] + LOSS_RTOL * abs(theirs["train_loss"]), k
    if plain.path_[plain.selected_step_]["n_terms"]:
        assert polished.path_[plain.selected_step_]["n_terms"] > 0
        if row["selection"] != "1se":
            assert polished.rule_ensemble_.n_terms > 0
    loss = LOSSES[name]
    y = polished.classes_.searchsorted(targets[name]).astype(float) if loss.classifier else targets[name]
    shown = polished.path_[polished.selected_step_]["train_loss"]
    score = training_score(polished, X)
    assert loss.mean_loss(y, score, weights if row["weighted"] else None) == pytest.approx(shown, rel=1e-9)


@pytest.mark.parametrize("case", COVERING, ids=covering_id)
def test_every_loss_and_setting_polishes_without_losing_its_terms_or_fit(tables, case):
    assert_polish_keeps_the_terms_and_fits_no_worse(*case, tables)


DEFAULTS = {"penalty": "mcp", "fusion_ratio": None, "terms": "leaves", "linear_terms": True, "scaling": "unit"}


@pytest.mark.parametrize("name", LOSSES)
def test_a_loss_s_polish_default_and_refusal_hold(tables, name):
    """With the default settings: polish=None fits what the loss's default (``polish_default``) fits; polish=True
    is refused with a SpecError naming ``polish`` where the loss refuses it, and otherwise polishes without losing
    the terms or the fit (as each setting of the covering test)."""
    loss = LOSSES[name]
    row = {**DEFAULTS, "selection": "loss", "weighted": True, "polish": True}
    default, resolved = fitted(name, row, tables, None, SHORT), fitted(name, row, tables, loss.polish_default, SHORT)
    for k, (ours, theirs) in enumerate(zip(default.path_, resolved.path_, strict=True)):
        assert {**ours, "seconds": 0} == {**theirs, "seconds": 0}, k
    assert (default.coef_path_ != resolved.coef_path_).nnz == 0
    if loss.polish_allowed:
        assert_polish_keeps_the_terms_and_fits_no_worse(name, row, tables, SHORT)
    else:
        with pytest.raises(SpecError, match="polish") as refused:
            fitted(name, row, tables, True, SHORT)
        assert refused.value.field == "polish" and refused.value.detail == loss.polish_refusal


# --- the pieces of a likelihood refit ------------------------------------------------------------------------------


def derivative_problem(name, rng):
    """(loss, y, weights, sparse design (n, 4), scores): 60 rows, Cox's times with ties."""
    n = 60
    design = sp.random(n, 4, density=0.5, random_state=np.random.RandomState(0), format="csc")
    y = {
        "squared": rng.normal(size=n),
        "logistic": (rng.random(n) < 0.4).astype(float),
        "poisson": rng.poisson(2.0, size=n).astype(float),
        "tweedie": np.where(rng.random(n) < 0.3, 0.0, rng.gamma(2.0, size=n)),
        "gamma": rng.gamma(2.0, size=n),
        "cox": signed_times(rng.integers(1, 15, size=n).astype(float), rng.random(n) < 0.7),
    }[name]
    return PathSpec(loss=name).path_loss(), y, rng.uniform(0.5, 2.0, size=n), design, rng.normal(size=n)


@pytest.mark.parametrize(
    ("name", "block"), [(name, None) for name in SINGLE_OUTPUT if name != "squared"] + [("cox", 3)]
)
def test_weight_derivatives_are_the_derivatives_of_the_loss_total(name, block, monkeypatch):
    """The gradient and Hessian a likelihood refit steps with are central differences of ``loss_total`` in the
    weights (Cox's full Hessian, its risk sets' sums also in blocks of 3 distinct times)."""
    if block is not None:
        monkeypatch.setattr(cox, "RISK_SET_BLOCK", block)
    loss, y, weights, design, score = derivative_problem(name, np.random.default_rng(4))
    beta = np.random.default_rng(5).normal(scale=0.3, size=4)

    def total(coef):
        return loss.loss_total(y, score + design @ coef, weights)

    def gradient(coef):
        return loss.weight_derivatives(y, score + design @ coef, weights, design)[0]

    h = 1e-5
    steps = h * np.eye(4)
    numeric_gradient = np.array([(total(beta + e) - total(beta - e)) / (2 * h) for e in steps])
    numeric_hessian = np.array([(gradient(beta + e) - gradient(beta - e)) / (2 * h) for e in steps])
    exact_gradient, exact_hessian = loss.weight_derivatives(y, score + design @ beta, weights, design)
    np.testing.assert_allclose(exact_gradient, numeric_gradient, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(exact_hessian, numeric_hessian, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(exact_hessian, exact_hessian.T, rtol=1e-12, atol=1e-12)


def test_the_cox_loss_of_scores_far_apart_is_summed_in_logs():
    """Scores 2,000 apart underflow a late risk set's shifted sum: the loss is then each risk set's log-sum-exp
    (scipy's), finite, as it is for scores close together (a refit's trial step once read -inf there and took it)."""
    from scipy.special import logsumexp

    loss, y, weights, _, score = derivative_problem("cox", np.random.default_rng(6))
    time, event = np.abs(y), y > 0
    for spread in (1.0, 2000.0):
        eta = spread * score
        log_risk = [logsumexp(eta[time >= time[i]], b=weights[time >= time[i]]) for i in range(len(y))]
        expected = float((weights * event) @ (np.array(log_risk) - eta))
        assert loss.loss_total(y, eta, weights) == pytest.approx(expected, rel=1e-12)
