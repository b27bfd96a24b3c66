"""Tests of solver.rules: rules from leaf weights predict exactly like the mapping matrix."""

import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor

from solver import TreeEnsemble, count_antecedents, leaf_matrix
from solver.rules import RuleEnsemble, RuleSchemaError, format_condition

HOUSING = Path(__file__).parent / "data" / "california_housing_3000.csv.gz"


@pytest.fixture(scope="module")
def nan_forest():
    """A random forest trained on data with NaN, and held-out rows with NaN."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(800, 5))
    y = 2 * X[:, 0] + np.sin(3 * X[:, 1]) + X[:, 2] * X[:, 3] + 0.1 * rng.normal(size=800)
    X[rng.random(X.shape) < 0.15] = np.nan
    rf = RandomForestRegressor(n_estimators=25, max_depth=5, random_state=0).fit(X[:500], y[:500])
    return TreeEnsemble.from_sklearn(rf), X[500:]


@pytest.fixture(scope="module")
def housing_forest():
    frame = pd.read_csv(HOUSING, nrows=3000)
    X, y = frame.iloc[:, :-1], frame.iloc[:, -1].to_numpy()
    gb = GradientBoostingRegressor(n_estimators=40, max_depth=3, random_state=0).fit(X[:2000], y[:2000])
    return TreeEnsemble.from_sklearn(gb), X.to_numpy()[2000:]


def sparse_weights(forest, n_nonzero, seed):
    rng = np.random.default_rng(seed)
    weights = np.zeros(forest.n_leaves)
    weights[rng.choice(forest.n_leaves, n_nonzero, replace=False)] = rng.normal(size=n_nonzero)
    return weights


@pytest.mark.parametrize("n_nonzero", [1, 15, 200])
def test_rules_predict_like_the_mapping_matrix_with_nan(nan_forest, n_nonzero):
    forest, X = nan_forest
    weights = sparse_weights(forest, n_nonzero, seed=n_nonzero)
    rules = RuleEnsemble.from_weights(forest, weights, intercept=0.7)
    expected = 0.7 + leaf_matrix(forest, X).matvec(weights)
    np.testing.assert_allclose(rules.predict(X), expected, rtol=1e-12,
                               atol=1e-12 * np.abs(expected).max())
    assert rules.n_rules == n_nonzero  # distinct leaves of a bagged forest rarely coincide


def test_rules_reproduce_a_whole_boosted_forest_on_real_data(housing_forest):
    forest, X = housing_forest
    weights = np.full(forest.n_leaves, forest.tree_weight)
    rules = RuleEnsemble.from_weights(forest, weights, forest.base_score)
    np.testing.assert_allclose(rules.predict(X), forest.predict(X), rtol=1e-12)
    assert rules.feature_names[0] == "MedInc"
    assert rules.n_antecedents == forest.n_internal_nodes


def test_rule_dicts_describe_their_leaf(nan_forest):
    forest, _ = nan_forest
    leaf = int(forest.leaf_offsets[3] + 2)
    weights = np.zeros(forest.n_leaves)
    weights[leaf] = 2.5
    rules = RuleEnsemble.from_weights(forest, weights, intercept=0.0)
    (rule,) = rules.rules
    assert rule["tree"] == 3 and rule["leaf"] == 2
    assert rule["weight"] == 2.5 and rule["value"] == forest.leaf_values[leaf]
    assert rule["contribution"] == 2.5 * forest.leaf_values[leaf]
    assert rule["support"] == forest.leaf_support[leaf] > 0
    assert rule["conditions"] == forest.leaf_conditions([leaf])[0]
    assert rule["members"] == [{"tree": 3, "leaf": 2, "weight": 2.5,
                                "value": forest.leaf_values[leaf], "support": rule["support"]}]
    ptr, ids = forest.leaf_ancestors
    assert rules.n_antecedents == ptr[leaf + 1] - ptr[leaf]


def test_identical_rules_merge_and_cancelling_ones_vanish():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = X[:, 0] - X[:, 1] ** 2
    # without bootstrap and feature sampling every tree is the same tree
    rf = RandomForestRegressor(n_estimators=3, max_depth=3, bootstrap=False, random_state=0)
    forest = TreeEnsemble.from_sklearn(rf.fit(X, y))
    per_tree = forest.leaf_offsets[1]
    weights = np.zeros(forest.n_leaves)
    weights[[0, per_tree, 2 * per_tree]] = [1.0, 0.5, 0.25]   # leaf 0 of each tree: merged
    weights[[1, per_tree + 1]] = [2.0, -2.0]                   # leaf 1: cancels exactly
    rules = RuleEnsemble.from_weights(forest, weights, intercept=0.0)
    (rule,) = rules.rules
    assert [m["tree"] for m in rule["members"]] == [0, 1, 2]
    assert rule["contribution"] == pytest.approx(1.75 * forest.leaf_values[0], rel=1e-15)
    np.testing.assert_allclose(rules.predict(X), leaf_matrix(forest, X).matvec(weights),
                               rtol=1e-12, atol=1e-14)
    ptr, ids = forest.leaf_ancestors
    assert rules.n_antecedents == count_antecedents(np.array([0, per_tree, 2 * per_tree]), ptr,
                                                    ids)


def test_explain_lists_the_rules_that_fire(nan_forest):
    forest, X = nan_forest
    rules = RuleEnsemble.from_weights(forest, sparse_weights(forest, 40, seed=3), intercept=-1.0)
    fired = rules.explain(X)
    contributions = np.array([rule["contribution"] for rule in rules.rules])
    np.testing.assert_allclose([-1.0 + contributions[ids].sum() for ids in fired],
                               rules.predict(X), rtol=1e-12, atol=1e-12)
    assert any(fired) and all(ids == sorted(ids) for ids in fired)


def test_json_round_trip_predicts_identically(nan_forest):
    forest, X = nan_forest
    rules = RuleEnsemble.from_weights(forest, sparse_weights(forest, 30, seed=5), intercept=0.3)
    document = json.loads(json.dumps(rules.to_dict()))
    restored = RuleEnsemble.from_dict(document)
    assert restored.to_dict() == rules.to_dict()
    np.testing.assert_array_equal(restored.predict(X), rules.predict(X))
    assert restored.n_antecedents == rules.n_antecedents
    minimal = RuleEnsemble.from_dict({
        "format": "fire-rules", "version": 1, "feature_names": ["a", "b"], "intercept": 1.0,
        "rules": [{"conditions": [{"feature": "b", "feature_index": 1, "operator": ">",
                                   "threshold": 0.0, "missing": True}], "contribution": 2.0}]})
    np.testing.assert_array_equal(minimal.predict([[0, 1], [0, -1], [0, np.nan]]), [3, 1, 3])
    assert minimal.n_antecedents is None


def test_to_text_is_readable_and_sorted(nan_forest):
    forest, _ = nan_forest
    rules = RuleEnsemble.from_weights(forest, sparse_weights(forest, 8, seed=7), intercept=0.5)
    lines = rules.to_text().splitlines()
    assert lines[0] == f"# 8 rules, {rules.n_antecedents} antecedents"
    assert lines[1].split() == ["+0.5", "intercept"]
    assert len(lines) == 2 + rules.n_rules
    shown = [abs(float(line.split()[0])) for line in lines[2:]]
    assert shown == sorted(shown, reverse=True)
    assert all(" if " in line and "[tree " in line for line in lines[2:])
    by_tree = rules.to_text(sort="tree").splitlines()[2:]
    trees = [int(line.split("[tree ")[1].split()[0]) for line in by_tree]
    assert trees == sorted(trees)
    assert "missing" not in rules.to_text(show_missing=False).replace("is not missing", "")


def test_condition_text():
    def condition(operator, threshold, missing):
        return {"feature": "age", "feature_index": 0, "operator": operator,
                "threshold": threshold, "missing": missing}

    assert format_condition(condition(">", 5.0299999713897705, False)) == "age > 5.03"
    assert format_condition(condition("<=", 6.1, True)) == "age <= 6.1 or missing"
    assert format_condition(condition("<=", 6.1, True), show_missing=False) == "age <= 6.1"
    largest = float(np.finfo(np.float64).max)
    assert format_condition(condition("<=", largest, False)) == "age is not missing"
    assert format_condition(condition(">", largest, True)) == "age is missing"
    rules = RuleEnsemble([{"conditions": [condition(">", 1.0, True), condition("<=", 2.0, True),
                                          condition(">", largest, True)],
                           "contribution": 1.0}], 0.0, ["age"])
    assert rules.to_text().splitlines()[2].strip() == \
        "+1  if (1 < age <= 2 or missing) and age is missing"


def test_always_rule_from_a_single_leaf_tree():
    forest = TreeEnsemble.from_dict({
        "format": "fire-forest", "version": 1, "n_features": 1, "base_score": 0.0,
        "tree_weight": 1.0, "trees": [{"children_left": [-1], "children_right": [-1],
                                       "feature": [-2], "threshold": [0.0], "value": [3.0]}]})
    rules = RuleEnsemble.from_weights(forest, np.array([2.0]), intercept=1.0)
    assert rules.rules[0]["conditions"] == [] and rules.n_antecedents == 0
    assert "if always" in rules.to_text()
    np.testing.assert_array_equal(rules.predict(np.zeros((2, 1))), [7.0, 7.0])


def test_from_weights_rejects_bad_weights(nan_forest):
    forest, _ = nan_forest
    with pytest.raises(ValueError, match="shape"):
        RuleEnsemble.from_weights(forest, np.ones(3), 0.0)
    with pytest.raises(ValueError, match="finite"):
        RuleEnsemble.from_weights(forest, np.full(forest.n_leaves, np.nan), 0.0)
    empty = RuleEnsemble.from_weights(forest, np.zeros(forest.n_leaves), 2.0)
    assert empty.n_rules == 0 and empty.n_antecedents == 0
    np.testing.assert_array_equal(empty.predict(np.zeros((2, 5))), [2.0, 2.0])


VALID = {"format": "fire-rules", "version": 1, "feature_names": ["a", "b"], "intercept": 0.0,
         "rules": [{"conditions": [{"feature": "a", "feature_index": 0, "operator": "<=",
                                    "threshold": 1.0, "missing": False}],
                    "contribution": 1.0, "tree": 0, "leaf": 0, "support": 3,
                    "members": [{"tree": 0, "leaf": 0, "weight": 1.0, "value": 1.0}]}]}


@pytest.mark.parametrize("path, value, field", [
    ("format", "fire-forest", "format"),
    ("version", 3, "version"),
    ("intercept", float("inf"), "intercept"),
    ("intercept", "0", "intercept"),
    ("feature_names", ["a", "a"], "feature_names/1"),
    ("rules", {}, "rules"),
    ("rules/0", 5, "rules/0"),
    ("rules/0/contribution", None, "rules/0/contribution"),
    ("rules/0/support", -1, "rules/0/support"),
    ("rules/0/colour", 1, "rules/0/colour"),
    ("rules/0/members/0/weight", float("nan"), "rules/0/members/0/weight"),
    ("rules/0/conditions", "a <= 1", "rules/0/conditions"),
    ("rules/0/conditions/0/feature_index", 2, "rules/0/conditions/0/feature_index"),
    ("rules/0/conditions/0/feature", "b", "rules/0/conditions/0/feature"),
    ("rules/0/conditions/0/operator", "<", "rules/0/conditions/0/operator"),
    ("rules/0/conditions/0/threshold", float("nan"), "rules/0/conditions/0/threshold"),
    ("rules/0/conditions/0/missing", 0, "rules/0/conditions/0/missing"),
])
def test_from_dict_reports_the_offending_field(path, value, field):
    document = copy.deepcopy(VALID)
    *parents, last = path.split("/")
    target = document
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[int(last) if isinstance(target, list) else last] = value
    with pytest.raises(RuleSchemaError) as error:
        RuleEnsemble.from_dict(document)
    assert error.value.field == field and isinstance(error.value, ValueError)
    missing_key = copy.deepcopy(VALID)
    del missing_key["rules"][0]["conditions"][0]["missing"]
    with pytest.raises(RuleSchemaError, match="required"):
        RuleEnsemble.from_dict(missing_key)
