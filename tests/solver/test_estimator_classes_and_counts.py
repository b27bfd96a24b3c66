"""FireClassifier with K classes and FireRegressor(loss="poisson"): the scikit-learn contract beyond two labels."""

import numpy as np
import pytest
from sklearn.datasets import load_iris

from solver import FireClassifier, FireRegressor
from solver.spec import SpecError

SMALL = {"n_estimators": 30, "n_lambdas": 20, "random_state": 0}


@pytest.fixture(scope="module")
def iris():
    X, y = load_iris(return_X_y=True)
    return X, np.array(["setosa", "versicolor", "virginica"])[y]


@pytest.fixture(scope="module")
def fitted(iris):
    X, labels = iris
    return FireClassifier(max_rules=10, **SMALL).fit(X, labels)


def test_text_labels_give_probabilities_per_class(iris, fitted):
    X, labels = iris
    assert fitted.classes_.tolist() == ["setosa", "versicolor", "virginica"]
    proba = fitted.predict_proba(X)
    assert proba.shape == (len(X), 3)
    assert np.abs(proba.sum(axis=1) - 1).max() <= 1e-12
    scores = fitted.decision_function(X)
    assert scores.shape == (len(X), 3)
    np.testing.assert_array_equal(fitted.predict(X), fitted.classes_[scores.argmax(axis=1)])
    assert (fitted.predict(X) == labels).mean() > 0.9
    assert fitted.coef_.shape[1] == 3 and fitted.intercept_.shape == (3,)
    assert fitted.selected_["n_terms"] <= 10
    assert fitted.selected_["val_accuracy"] is not None and fitted.selected_["val_auc"] is not None


def test_rules_read_per_class(fitted):
    text = fitted.to_text()
    assert "setosa" in text and "virginica" in text
    for rule in fitted.rules_:
        assert isinstance(rule.contribution, tuple) and len(rule.contribution) == 3


def test_document_round_trip_keeps_the_probabilities(iris, fitted):
    X, _ = iris
    again = FireClassifier.from_dict(fitted.to_dict())
    np.testing.assert_array_equal(again.predict_proba(X), fitted.predict_proba(X))
    np.testing.assert_array_equal(again.predict(X), fitted.predict(X))


def test_integer_labels_and_class_weights(iris):
    X, labels = iris
    codes = np.searchsorted(["setosa", "versicolor", "virginica"], labels) + 10
    model = FireClassifier(class_weight="balanced", **SMALL).fit(X, codes)
    assert model.classes_.tolist() == [10, 11, 12]
    assert set(model.predict(X)) <= {10, 11, 12}


def test_validation_labels_must_be_training_labels(iris):
    X, labels = iris
    with pytest.raises(ValueError, match="y_val has labels"):
        FireClassifier(**SMALL).fit(X[:100], labels[:100], X_val=X[100:], y_val=np.where(labels[100:] == "x", "", "?"))


@pytest.fixture(scope="module")
def counts():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    return X, rng.poisson(np.exp(0.3 + 0.7 * X[:, 0] - 0.4 * (X[:, 1] > 0))).astype(float)


def test_poisson_regressor_predicts_rates(counts):
    X, y = counts
    model = FireRegressor(loss="poisson", max_rules=10, **SMALL).fit(X, y)
    rates = model.predict(X)
    assert np.all(rates > 0)
    np.testing.assert_allclose(rates, np.exp(model.rule_ensemble_.predict(X)), rtol=1e-12)
    assert model.selected_["val_mae"] is not None
    squared = FireRegressor(max_rules=10, **SMALL).fit(X, y)
    assert squared.predict(X).min() < rates.min()  # least squares goes lower, towards negative counts
    assert "×" in model.to_text()


def test_poisson_targets_and_loss_are_checked(counts):
    X, y = counts
    with pytest.raises(ValueError, match="non-negative"):
        FireRegressor(loss="poisson", **SMALL).fit(X, y - 1)
    with pytest.raises(SpecError, match="loss"):
        FireRegressor(loss="logistic", **SMALL).fit(X, y)
