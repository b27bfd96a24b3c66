"""Binary classification: the logistic datafit against independent references, FireClassifier end to end."""

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from solver import (
    FireClassifier,
    ForestSpec,
    LeafMatrix,
    PathSpec,
    TableEncoding,
    TreeEnsemble,
    best_step,
    binary_labels,
    fit_path,
    fit_rules,
    leaf_matrix,
    train_forest,
)
from solver.formats import load_forest
from tests.support.data import DATA

# the paper's problem on M as it is: the optimizer alone, against references that solve that problem
RAW = PathSpec(loss="logistic", scaling="leaf_value", min_support=0, polish=False)


def objective(matrix, y, w, intercept, lam, penalty="l1", gamma=None, lam_f=0.0):
    """The logistic FIRE objective computed independently of the solver (dense, per-coordinate gammas)."""
    score = intercept + matrix.to_csc() @ w
    total = float(np.sum(np.logaddexp(0.0, score) - y * score))
    a = np.abs(w)
    if penalty == "l1":
        total += lam * a.sum()
    else:
        total += np.where(a <= gamma * lam, lam * a - a**2 / (2 * gamma), 0.5 * gamma * lam**2).sum()
    for start, stop in zip(matrix.offsets[:-1], matrix.offsets[1:]):
        total += lam_f * np.abs(np.diff(w[start:stop])).sum()
    return total


@pytest.fixture(scope="module")
def credit():
    """credit_data (text columns, missing values): the encoded table and 0/1 labels (bad = 0, good = 1)."""
    frame = pd.read_csv(DATA / "credit_data.csv.gz")
    features = frame.drop(columns="Status")
    X = TableEncoding.infer(features).encode_frame(features)
    classes, y = binary_labels(frame["Status"].to_numpy())
    assert list(classes) == ["bad", "good"]
    return X, y


@pytest.fixture(scope="module")
def small(credit):
    """600 rows, 12 random-forest-classifier trees of depth 3: M, y, the forest."""
    X, y = credit
    X, y = X[:600], y[:600]
    forest = TreeEnsemble.from_sklearn(RandomForestClassifier(n_estimators=12, max_depth=3, random_state=0).fit(X, y))
    return leaf_matrix(forest, X), y, forest


def test_random_forest_classifier_probability_from_M(credit):
    X, y = credit
    rf = RandomForestClassifier(n_estimators=25, max_depth=4, random_state=0).fit(X[:3000], y[:3000])
    forest = TreeEnsemble.from_sklearn(rf)
    M = leaf_matrix(forest, X[3000:])
    reproduced = forest.base_score + M.matvec(np.full(forest.n_leaves, forest.tree_weight))
    np.testing.assert_allclose(reproduced, rf.predict_proba(X[3000:])[:, 1], rtol=0, atol=1e-12)


def test_lambda_max_and_the_intercept_only_start(small):
    matrix, y, _ = small
    result = fit_path(matrix, y, RAW, n_lambdas=3)
    rate = y.mean()
    assert result.lambda_max == pytest.approx(np.abs(matrix.rmatvec(y - rate)).max(), rel=1e-12)
    assert result.steps[0].n_rules == 0
    assert result.intercepts[0] == pytest.approx(np.log(rate / (1 - rate)), abs=1e-9)


@pytest.mark.parametrize("ratio", [0.3, 0.1, 0.03])
def test_l1_logistic_matches_sklearn_saga(small, ratio):
    """No fusion: scikit-learn's L1 logistic regression (saga: its intercept is unpenalised) with C = 1/lambda."""
    matrix, y, _ = small
    lam = ratio * fit_path(matrix, y, RAW, n_lambdas=1).lambda_max
    ours = fit_path(matrix, y, RAW, penalty="l1", fusion_ratio=0, lambdas=[lam], tol=1e-10)
    reference = LogisticRegression(l1_ratio=1.0, solver="saga", C=1.0 / lam, tol=1e-12, max_iter=100_000).fit(
        matrix.to_csc(), y
    )
    f_ours = objective(matrix, y, ours.coef(0), ours.intercepts[0], lam)
    f_ref = objective(matrix, y, reference.coef_.ravel(), reference.intercept_[0], lam)
    assert ours.steps[0].objective == pytest.approx(f_ours, rel=1e-10)
    assert f_ours <= f_ref * (1 + 1e-6)
    assert f_ours == pytest.approx(f_ref, rel=1e-6)


@pytest.mark.parametrize(("lam_ratio", "fusion"), [(0.2, 0.5), (0.05, 1.0)])
def test_fused_l1_logistic_matches_the_exponential_cone_reference(small, lam_ratio, fusion):
    cp = pytest.importorskip("cvxpy")
    matrix, y, _ = small
    lam_max = fit_path(matrix, y, RAW, n_lambdas=1).lambda_max
    lam, lam_f = lam_ratio * lam_max, fusion * lam_ratio * lam_max
    ours = fit_path(matrix, y, RAW, penalty="l1", lambdas=[lam], lambda_f=lam_f, tol=1e-9)
    dense = matrix.to_csc().toarray()
    w, b = cp.Variable(dense.shape[1]), cp.Variable()
    score = b + dense @ w
    fusion_terms = [cp.norm1(cp.diff(w[s:e])) for s, e in zip(matrix.offsets[:-1], matrix.offsets[1:]) if e - s > 1]
    cost = cp.sum(cp.logistic(score)) - y @ score + lam * cp.norm1(w) + lam_f * sum(fusion_terms)
    cp.Problem(cp.Minimize(cost)).solve(solver="CLARABEL")
    f_ours = objective(matrix, y, ours.coef(0), ours.intercepts[0], lam, lam_f=lam_f)
    f_ref = objective(matrix, y, w.value, float(b.value), lam, lam_f=lam_f)
    assert f_ours == pytest.approx(f_ref, rel=1e-5)


def test_mcp_logistic_path_no_worse_than_skglm(small):
    """Plain MCP (one gamma): skglm's Logistic + MCPenalty with alpha = lam/n and gamma_skglm = n*gamma (its
    datafit is the mean loss), warm-started along our path from the same point (w = 0, the log-odds)."""
    pytest.importorskip("skglm")
    from skglm.datafits import Logistic
    from skglm.penalties import MCPenalty
    from skglm.solvers import AndersonCD

    matrix, y, _ = small
    n, gamma_skglm = len(y), 3.0
    gamma = gamma_skglm / n
    ours = fit_path(
        matrix,
        y,
        RAW,
        penalty="mcp",
        gamma=gamma,
        mcp_scaling="plain",
        fusion_ratio=0,
        n_lambdas=20,
        lambda_min_ratio=0.02,
        tol=1e-6,
    )
    csc = matrix.to_csc()
    coef = np.zeros(csc.shape[1] + 1)
    coef[-1] = np.log(y.mean() / (1 - y.mean()))
    ratios = []
    for k, step in enumerate(ours.steps):
        solver = AndersonCD(fit_intercept=True, warm_start=True, tol=1e-8, max_iter=100)
        # Xw_init with the intercept: skglm otherwise starts from X w alone and the warm start is inconsistent
        coef, *_ = solver.solve(
            csc,
            2 * y - 1,
            Logistic(),
            MCPenalty(step.lambda_s / n, gamma_skglm),
            w_init=coef,
            Xw_init=csc @ coef[:-1] + coef[-1],
        )
        f_ref = objective(matrix, y, coef[:-1], coef[-1], step.lambda_s, "mcp", gamma)
        f_ours = objective(matrix, y, ours.coef(k), ours.intercepts[k], step.lambda_s, "mcp", gamma)
        assert step.objective == pytest.approx(f_ours, rel=1e-9)
        ratios.append(f_ours / f_ref)
    assert max(ratios) <= 1.01


def test_block_mcp_and_fusion_steps_are_certified_stationary(small):
    """The paper's block MCP (gamma / L_t, L_t from the 1/4 bound) with fusion: every step converges, the path's
    objective is the independent one and it only decreases as lambda does."""
    matrix, y, _ = small
    result = fit_path(matrix, y, RAW, n_lambdas=15, lambda_min_ratio=0.01)
    curvature = 0.25 * matrix.column_counts() * matrix.values**2
    gammas = np.repeat(1.1 / np.maximum.reduceat(curvature, matrix.offsets[:-1]), np.diff(matrix.offsets))
    for k, step in enumerate(result.steps):
        assert step.converged
        f = objective(matrix, y, result.coef(k), result.intercepts[k], step.lambda_s, "mcp", gammas, step.lambda_f)
        assert step.objective == pytest.approx(f, rel=1e-9)
    assert all(a.objective >= b.objective for a, b in zip(result.steps, result.steps[1:]))


def test_sample_weights_equal_duplicated_rows(small):
    matrix, y, _ = small
    weights = np.ones(len(y))
    weights[:50] = 3.0
    rows = np.concatenate([np.arange(len(y)), np.repeat(np.arange(50), 2)])
    duplicated = LeafMatrix(np.ascontiguousarray(matrix.leaves[rows]), matrix.values, matrix.offsets)
    lam = 2.0
    dup = fit_path(duplicated, y[rows], RAW, penalty="l1", fusion_ratio=0, lambdas=[lam], tol=1e-10)
    weighted = fit_path(
        matrix,
        y,
        RAW,
        penalty="l1",
        fusion_ratio=0,
        lambdas=[lam * len(y) / weights.sum()],
        tol=1e-10,
        sample_weight=weights,
    )
    np.testing.assert_allclose(weighted.coef(0), dup.coef(0), atol=1e-6)
    assert weighted.intercepts[0] == pytest.approx(dup.intercepts[0], abs=1e-7)


def test_path_records_classification_metrics_and_selects_by_auc(small):
    matrix, y, forest = small
    result = fit_path(matrix, y, RAW, n_lambdas=12, val_matrix=matrix, y_val=y, leaf_ancestors=forest.leaf_ancestors)
    for step in result.steps:
        record = json.loads(json.dumps(step.to_dict()))
        assert record["val_loss"] == pytest.approx(step.train_loss) and record["val_auc"] == pytest.approx(
            step.train_auc
        )
        assert 0.5 <= record["train_auc"] <= 1 and 0 < record["train_accuracy"] <= 1
    by_auc = best_step(result.steps, 10, selection="auc")
    assert result.steps[by_auc].val_auc == max(s.val_auc for s in result.steps if s.n_terms <= 10)
    assert fit_path(matrix, y, RAW, n_lambdas=12, val_matrix=matrix, y_val=y, selection="auc").select(10) == by_auc
    with pytest.raises(ValueError, match="0/1 labels"):
        fit_path(matrix, y + 1, RAW)
    with pytest.raises(ValueError, match="both classes"):
        fit_path(matrix, np.zeros(len(y)), RAW)


@pytest.fixture(scope="module")
def hmda():
    frame = pd.read_csv(DATA / "hmda.csv.gz").sample(frac=1.0, random_state=0)
    return frame.drop(columns="deny"), frame["deny"]


def test_classifier_end_to_end_on_a_text_table(hmda):
    X, y = hmda
    model = FireClassifier(n_estimators=60, max_rules=8, random_state=0).fit(X[:1800], y[:1800])
    assert list(model.classes_) == ["no", "yes"] and isinstance(model.estimator_, RandomForestClassifier)
    assert 0 < len(model.rules_) <= 8 and model.selected_["val_auc"] > 0.6
    score = model.decision_function(X[1800:])
    encoded = model.encoding_.encode_frame(X[1800:])
    np.testing.assert_allclose(
        score,
        model.intercept_ + model.candidates_.matrix(model.forest_.apply(encoded), encoded).matvec(model.coef_),
        rtol=0,
        atol=1e-12,
    )
    proba = model.predict_proba(X[1800:])
    np.testing.assert_allclose(proba[:, 1], 1.0 / (1.0 + np.exp(-score)), rtol=0, atol=1e-12)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert set(model.predict(X[1800:])) <= {"no", "yes"}
    assert np.array_equal(model.predict(X[1800:]), np.where(proba[:, 1] > 0.5, "yes", "no"))
    assert "log-odds of 'yes'" in model.to_text()
    restored = FireClassifier.from_dict(json.loads(json.dumps(model.to_dict())))
    np.testing.assert_array_equal(restored.predict_proba(X[1800:]), proba)
    assert list(restored.predict(X[1800:])) == list(model.predict(X[1800:]))
    assert restored.rule_ensemble_.response == "log-odds of 'yes'"


@pytest.mark.parametrize(
    "labels",
    [lambda y: y == "yes", lambda y: (y == "yes").astype(int), lambda y: np.where(y == "yes", "deny", "approve")],
)
def test_any_two_labels(hmda, labels):
    X, y = hmda
    y = labels(y.to_numpy())
    model = FireClassifier(n_estimators=20, n_lambdas=10, random_state=0).fit(X, y)
    assert list(model.classes_) == sorted(set(y.tolist()))
    assert set(model.predict(X[:50]).tolist()) <= set(y.tolist())


def test_class_and_sample_weights_change_the_fit(hmda):
    X, y = hmda
    forest = GradientBoostingClassifier(n_estimators=30, max_depth=2, random_state=0).fit(
        TableEncoding.infer(X).encode_frame(X), y
    )
    plain = FireClassifier(forest=forest, n_lambdas=15, max_rules=15, random_state=0).fit(X, y)
    balanced = FireClassifier(forest=forest, n_lambdas=15, max_rules=15, class_weight="balanced", random_state=0).fit(
        X, y
    )
    assert balanced.predict_proba(X)[:, 1].mean() > plain.predict_proba(X)[:, 1].mean() + 0.1
    as_weights = FireClassifier(forest=forest, n_lambdas=15, max_rules=15, random_state=0).fit(
        X, y, sample_weight=np.where(y == "yes", (y == "no").mean() / (y == "yes").mean(), 1.0)
    )
    # the same problem solved twice to the solver's tolerance (no polish for the logistic loss by default)
    np.testing.assert_allclose(as_weights.decision_function(X), balanced.decision_function(X), rtol=1e-6, atol=1e-6)
    three = FireClassifier(n_estimators=5, n_lambdas=5, class_weight="balanced", random_state=0).fit(
        X, np.where(y == "yes", "a", np.where(X["single"] == "yes", "b", "c"))
    )
    assert three.classes_.tolist() == ["a", "b", "c"] and three.predict_proba(X).shape == (len(X), 3)


@pytest.mark.parametrize("library", ["xgboost", "lightgbm"])
def test_boosted_binary_models_as_forests(credit, library):
    X, y = credit
    if library == "xgboost":
        xgb = pytest.importorskip("xgboost")
        booster = xgb.train({"objective": "binary:logistic", "max_depth": 3, "nthread": 1}, xgb.DMatrix(X, label=y), 40)
        forest = load_forest(bytes(booster.save_raw("json")))
    else:
        lgb = pytest.importorskip("lightgbm")
        booster = lgb.train(
            {"objective": "binary", "num_leaves": 8, "verbose": -1, "num_threads": 1}, lgb.Dataset(X, y), 40
        )
        forest = load_forest(json.dumps(booster.dump_model()).encode())
    model = FireClassifier(forest=forest, max_rules=10, random_state=0).fit(X, y)
    assert model.estimator_ is None and 0 < len(model.rules_) <= 10
    assert model.selected_["val_auc"] > 0.7


def test_fit_rules_trains_the_classifier_variant_of_a_forest_spec(credit):
    X, y = credit
    spec = PathSpec(loss="logistic", n_lambdas=10)
    fit = fit_rules(
        X[:1500],
        y[:1500],
        spec,
        forest=ForestSpec(kind="extra_trees", n_estimators=20),
        classes=np.array(["bad", "good"]),
    )
    assert type(fit.estimator).__name__ == "ExtraTreesClassifier"
    assert fit.rules.response == "log-odds of 'good'"
    estimator, forest = train_forest(
        ForestSpec(kind="gradient_boosting", n_estimators=5), np.nan_to_num(X[:500]), y[:500], loss="logistic"
    )
    np.testing.assert_allclose(
        forest.predict(np.nan_to_num(X[:500])), estimator.decision_function(np.nan_to_num(X[:500])), atol=1e-12
    )
