"""Survival ensembles as rule candidates: scikit-survival's RandomSurvivalForest, ExtraSurvivalTrees and
GradientBoostingSurvivalAnalysis read by ``TreeEnsemble.from_sklearn`` (solver.sklearn_adapters), and XGBoost's
survival:cox read from its JSON and UBJ models (solver.formats.xgboost), each against the library's own
prediction. The log-link regressions (XGBoost reg:tweedie/reg:gamma, LightGBM tweedie/gamma) are checked
against their margins in tests/solver/test_forest_multiclass.py."""

import json

import numpy as np
import pytest
import xgboost as xgb
from sksurv.column import encode_categorical
from sksurv.datasets import load_whas500
from sksurv.ensemble import ExtraSurvivalTrees, GradientBoostingSurvivalAnalysis, RandomSurvivalForest

from solver import TreeEnsemble, as_tree_ensemble, leaf_matrix
from solver.formats import load_forest

N_TRAIN = 300
SMALL = {"n_estimators": 10, "max_depth": 3, "random_state": 0}
SURVIVAL_ENSEMBLES = {
    "random_survival_forest": lambda: RandomSurvivalForest(**SMALL),
    "random_survival_forest_low_memory": lambda: RandomSurvivalForest(**SMALL, low_memory=True),
    "extra_survival_trees": lambda: ExtraSurvivalTrees(**SMALL),
    "gradient_boosting_coxph": lambda: GradientBoostingSurvivalAnalysis(**SMALL, learning_rate=0.3),
    "gradient_boosting_coxph_dropout": lambda: GradientBoostingSurvivalAnalysis(
        **SMALL, dropout_rate=0.3, subsample=0.8
    ),
}
KINDS = {
    RandomSurvivalForest: "random_forest",
    ExtraSurvivalTrees: "extra_trees",
    GradientBoostingSurvivalAnalysis: "gradient_boosting",
}


@pytest.fixture(scope="module")
def whas500():
    """(training rows, test rows, training outcomes): the Worcester Heart Attack Study, its categorical columns
    one-hot encoded (a DataFrame, so the features keep their names)."""
    X, y = load_whas500()
    X = encode_categorical(X)
    return X.iloc[:N_TRAIN], X.iloc[N_TRAIN:], y[:N_TRAIN]


@pytest.fixture(scope="module")
def whas500_with_nan(whas500):
    """The same rows with 10% of the numeric entries missing (training and test rows alike)."""
    X_train, X_test, y = whas500
    rng = np.random.default_rng(0)
    with_nan = []
    for X in (X_train, X_test):
        X = X.copy()
        X[rng.random(X.shape) < 0.1] = np.nan
        with_nan.append(X)
    return with_nan[0], with_nan[1], y


def assert_predicts(forest: TreeEnsemble, expected: np.ndarray, X, rtol: float = 1e-6) -> None:
    np.testing.assert_allclose(forest.predict(X), expected, rtol=rtol, atol=rtol * np.abs(expected).max())


@pytest.mark.parametrize("make", SURVIVAL_ENSEMBLES.values(), ids=SURVIVAL_ENSEMBLES.keys())
def test_survival_ensembles_predict_their_risk_score(whas500, make):
    """The forests' risk score (the cumulative hazard summed over the event times, averaged over trees) and
    gradient boosting's log hazard ratio, on rows the model never saw; the leaves give the mapping matrix of
    that prediction, every row in exactly one leaf of each tree."""
    X_train, X_test, y = whas500
    estimator = make().fit(X_train, y)
    forest = TreeEnsemble.from_sklearn(estimator)
    assert forest.kind == KINDS[type(estimator)]
    assert forest.feature_names == list(X_train.columns)
    expected = estimator.predict(X_test)
    assert_predicts(forest, expected, X_test)
    matrix = leaf_matrix(estimator, X_test)  # the public functions take the fitted estimator as well
    leaves_per_tree = np.diff(forest.leaf_offsets)
    assert matrix.leaves.shape == (len(X_test), forest.n_trees)
    assert (matrix.leaves.astype(np.int64) < leaves_per_tree).all()
    reproduced = forest.base_score + matrix.matvec(np.full(forest.n_leaves, forest.tree_weight))
    np.testing.assert_allclose(reproduced, expected, rtol=1e-6, atol=1e-6 * np.abs(expected).max())


def test_a_forest_leaf_without_events_is_no_zero_column(whas500):
    """Deep trees have leaves of censored rows only, whose cumulative hazard is 0 everywhere: centred at their
    tree's root (the mean root risk in base_score) they still are candidate rules."""
    X_train, X_test, y = whas500
    estimator = ExtraSurvivalTrees(n_estimators=5, max_depth=8, min_samples_leaf=1, random_state=0).fit(X_train, y)
    forest = TreeEnsemble.from_sklearn(estimator)
    without_events = [
        (member.tree_.value[nodes][:, member.is_event_time_, 0].sum(axis=1) == 0).sum()
        for member, nodes in zip(estimator.estimators_, forest.leaf_nodes)
    ]
    assert sum(without_events) > 0
    assert (forest.leaf_values != 0).all()
    assert_predicts(forest, estimator.predict(X_test), X_test)


@pytest.mark.parametrize("make", [RandomSurvivalForest, ExtraSurvivalTrees], ids=["random", "extra"])
def test_survival_forests_fitted_with_missing_values_route_them_as_scikit_survival(whas500_with_nan, make):
    X_train, X_test, y = whas500_with_nan
    estimator = make(**SMALL).fit(X_train, y)
    forest = as_tree_ensemble(estimator)
    assert_predicts(forest, estimator.predict(X_test), X_test)
    leaves = forest.apply(X_test)
    ours = np.column_stack([forest.leaf_nodes[t][leaves[:, t]] for t in range(forest.n_trees)])
    X32 = X_test.to_numpy(np.float32)
    np.testing.assert_array_equal(ours, np.column_stack([m.tree_.apply(X32) for m in estimator.estimators_]))


def test_gradient_boosting_survival_other_than_coxph_is_refused(whas500):
    X_train, _, y = whas500
    estimator = GradientBoostingSurvivalAnalysis(**SMALL, loss="squared").fit(X_train, y)
    with pytest.raises(ValueError, match="loss='coxph'"):
        TreeEnsemble.from_sklearn(estimator)


@pytest.mark.parametrize("base_score", [None, 2.0], ids=["estimated", "given"])
def test_xgboost_cox_predicts_its_margin_the_log_hazard_ratio(whas500_with_nan, base_score):
    """XGBoost's survival:cox label is the time, negative when censored; base_score, given or estimated, is a
    hazard ratio (its log is the margin the trees add to), predict's value exp(margin)."""
    X_train, X_test, y = whas500_with_nan
    label = np.where(y["fstat"], y["lenfol"], -y["lenfol"])
    params = {"objective": "survival:cox", "max_depth": 3, "eta": 0.3, "nthread": 1}
    if base_score is not None:
        params["base_score"] = base_score
    booster = xgb.train(params, xgb.DMatrix(X_train, label=label), 10)
    test_rows = xgb.DMatrix(X_test)
    margin = booster.predict(test_rows, output_margin=True)
    saved = json.loads(bytes(booster.save_raw("json")))["learner"]["learner_model_param"]["base_score"]
    hazard_ratio = float(saved.strip("[]"))
    assert base_score is None or hazard_ratio == base_score
    for raw_format in ("json", "ubj"):
        forest = load_forest(bytes(booster.save_raw(raw_format)))
        assert forest.feature_names == list(X_train.columns)
        assert forest.base_score == pytest.approx(np.log(hazard_ratio), rel=1e-6, abs=1e-7)
        assert_predicts(forest, margin, X_test, rtol=1e-5)
        np.testing.assert_allclose(np.exp(forest.predict(X_test)), booster.predict(test_rows), rtol=1e-5)
