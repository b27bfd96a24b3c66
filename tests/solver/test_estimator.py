"""FireRegressor: scikit-learn contract, reproducibility, exports, real data."""

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import (
    ExtraTreesRegressor,
    GradientBoostingRegressor,
    RandomForestRegressor,
)
from sklearn.utils.estimator_checks import parametrize_with_checks

from solver import FireClassifier, FireRegressor, TreeEnsemble
from solver.fitting import holdout_split
from tests.support.data import DATA

EXPECTED_FAILED_CHECKS = {
    "check_sample_weight_equivalence_on_dense_data": "a bootstrapped forest and the random validation hold-out see "
    "duplicated rows differently from weighted rows; the path itself honours weights exactly "
    "(tests/solver/test_solver.py, tests/solver/test_logistic.py)",
    "check_sample_weight_equivalence_on_sparse_data": "sparse input is not accepted",
}


@parametrize_with_checks(
    [
        FireRegressor(n_estimators=15, n_lambdas=15, random_state=0),
        FireRegressor(loss="poisson", n_estimators=15, n_lambdas=15, random_state=0),
        FireClassifier(n_estimators=15, n_lambdas=15, random_state=0),
    ],
    expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS,
)
def test_sklearn_contract(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def housing():
    frame = pd.read_csv(DATA / "california_housing_3000.csv.gz").sample(frac=1.0, random_state=0)
    return frame.iloc[:, :-1], frame.iloc[:, -1].to_numpy()


def test_fit_on_real_data_respects_budget_and_beats_the_mean(housing):
    X, y = housing
    model = FireRegressor(n_estimators=100, max_rules=14, random_state=0).fit(X[:2000], y[:2000])
    assert 0 < len(model.rules_) <= 14
    assert model.selected_["n_terms"] <= 14
    mse = np.mean((model.predict(X[2000:]) - y[2000:]) ** 2)
    assert mse < 0.6 * np.var(y[2000:])
    assert list(model.feature_names_in_) == list(X.columns)
    assert all(c.feature in X.columns for rule in model.rules_ for c in rule.conditions)
    assert model.coef_path_.shape[0] == len(model.path_)


def test_paths_are_reproducible_with_a_seed(housing):
    X, y = housing
    a = FireRegressor(n_estimators=30, n_lambdas=30, random_state=3).fit(X, y)
    b = FireRegressor(n_estimators=30, n_lambdas=30, random_state=3).fit(X, y)
    assert [s["n_rules"] for s in a.path_] == [s["n_rules"] for s in b.path_]
    assert [s["objective"] for s in a.path_] == [s["objective"] for s in b.path_]
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_json_round_trip_predicts_identically(housing):
    X, y = housing
    model = FireRegressor(n_estimators=30, max_rules=10, random_state=0).fit(X, y)
    restored = FireRegressor.from_dict(json.loads(json.dumps(model.to_dict())))
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))
    assert restored.to_text() == model.to_text()
    assert restored.explain(X[:5]) == model.explain(X[:5])


def test_given_forest_is_used_as_is_and_predictions_are_rule_sums(housing):
    X, y = housing
    forest = GradientBoostingRegressor(n_estimators=40, max_depth=2, random_state=0).fit(X, y)
    model = FireRegressor(forest=forest, penalty="l1", fusion_ratio=0, max_rules=20).fit(
        X[:2000], y[:2000], X_val=X[2000:], y_val=y[2000:]
    )
    assert model.estimator_ is forest
    ensemble = TreeEnsemble.from_sklearn(forest)
    expected = model.intercept_ + model.candidates_.matrix(ensemble.apply(X), X.to_numpy()).matvec(model.coef_)
    np.testing.assert_allclose(model.predict(X), expected, rtol=1e-12, atol=1e-12)
    fired = model.explain(X[:20])
    for row, rules in zip(model.predict(X[:20]), fired):
        assert row == pytest.approx(model.rule_ensemble_.intercept + sum(hit["contribution"] for hit in rules))


def test_missing_values_are_routed_and_rendered():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = 2.0 * (X[:, 0] > 0) + rng.normal(scale=0.1, size=600)
    X[rng.random(600) < 0.2, 0] = np.nan
    y[np.isnan(X[:, 0])] = 5.0
    model = FireRegressor(n_estimators=20, max_depth=2, max_features=1.0, max_rules=6, random_state=0).fit(X, y)
    assert "missing" in model.to_text()
    prediction = model.predict(np.array([[np.nan, 0.0, 0.0]]))
    assert prediction[0] == pytest.approx(5.0, abs=0.5)


def test_sample_weight_changes_the_fit():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(500, 4))
    y = X[:, 0] + rng.normal(scale=0.1, size=500)
    weights = np.where(X[:, 0] > 0, 10.0, 0.1)
    forest = RandomForestRegressor(n_estimators=20, max_depth=3, random_state=0).fit(X, y)
    plain = FireRegressor(forest=forest, random_state=0).fit(X, y)
    weighted = FireRegressor(forest=forest, random_state=0).fit(X, y, sample_weight=weights)
    assert not np.allclose(plain.coef_, weighted.coef_)


def test_bad_parameters_have_clear_messages():
    X = np.random.default_rng(0).normal(size=(50, 3))
    y = X[:, 0]
    with pytest.raises(ValueError, match="forest_kind"):
        FireRegressor(forest_kind="svm").fit(X, y)
    with pytest.raises(ValueError, match="gamma"):
        FireRegressor(n_estimators=5, gamma=0.5).fit(X, y)
    with pytest.raises(ValueError, match="X_val"):
        FireRegressor(n_estimators=5).fit(X, y, X_val=X)
    with pytest.raises(ValueError, match="features"):
        FireRegressor(forest=RandomForestRegressor(n_estimators=3).fit(X[:, :2], y)).fit(X, y)


@pytest.fixture(scope="module")
def abalone():
    frame = pd.read_csv(DATA / "abalone.csv.gz")
    return frame.drop(columns="rings"), frame["rings"].to_numpy(dtype=float)


def test_text_columns_are_one_hot_encoded_and_scored_in_the_original_columns(abalone):
    X, y = abalone
    model = FireRegressor(n_estimators=40, max_rules=8, random_state=0).fit(X, y)
    assert list(model.feature_names_in_) == list(X.columns) and model.n_features_in_ == X.shape[1]
    assert model.forest_.feature_names[:3] == ["Sex=F", "Sex=I", "Sex=M"]
    expected = model.rule_ensemble_.predict(model.encoding_.encode_frame(X.head(50)))
    np.testing.assert_array_equal(model.predict(X.head(50)), expected)
    with pytest.raises(ValueError, match="Sex"):
        model.predict(X.head(5).assign(Sex="unknown"))
    with pytest.raises(ValueError, match="DataFrame"):
        model.predict(X.head(5).to_numpy())
    restored = FireRegressor.from_dict(json.loads(json.dumps(model.to_dict())))
    np.testing.assert_array_equal(restored.predict(X.head(50)), expected)


def test_forest_is_trained_on_the_training_rows_only(abalone):
    X, y = abalone
    model = FireRegressor(forest_kind="extra_trees", n_estimators=10, max_depth=2, random_state=4).fit(X, y)
    train_rows, val_rows = holdout_split(len(y), model.validation_fraction, 4)
    assert len(val_rows) == round(0.2 * len(y)) and not set(train_rows) & set(val_rows)
    # extra trees draw no bootstrap sample: every root holds exactly the rows the forest was fitted on
    assert {int(tree.n_samples[0]) for tree in model.forest_.trees} == {len(train_rows)}
    # and those are the training rows: refitting on them alone gives the same trees
    alone = ExtraTreesRegressor(n_estimators=10, max_depth=2, max_features="sqrt", random_state=4, n_jobs=1)
    alone.fit(model.encoding_.encode_frame(X.iloc[train_rows]), y[train_rows])
    np.testing.assert_array_equal(
        alone.predict(model.encoding_.encode_frame(X)), model.estimator_.predict(model.encoding_.encode_frame(X))
    )
