"""Tests of solver.rules: rules from leaf weights predict exactly like the mapping matrix."""

import copy
import json

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor

from solver import TableEncoding, TreeEnsemble, count_antecedents, leaf_matrix
from solver.rule_types import Condition, Member, Rule, RuleSchemaError
from solver.rules import RuleEnsemble
from tests.support.data import DATA
from tests.support.documents import with_value_at

HOUSING = DATA / "california_housing_3000.csv.gz"


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
    np.testing.assert_allclose(rules.predict(X), expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
    assert rules.n_rules == n_nonzero  # distinct leaves of a bagged forest rarely coincide


def test_rules_reproduce_a_whole_boosted_forest_on_real_data(housing_forest):
    forest, X = housing_forest
    weights = np.full(forest.n_leaves, forest.tree_weight)
    rules = RuleEnsemble.from_weights(forest, weights, forest.base_score)
    np.testing.assert_allclose(rules.predict(X), forest.predict(X), rtol=1e-12)
    assert rules.feature_names[0] == "MedInc"
    assert rules.n_antecedents == forest.n_internal_nodes


def test_rules_describe_their_leaf(nan_forest):
    forest, _ = nan_forest
    leaf = int(forest.leaf_offsets[3] + 2)
    weights = np.zeros(forest.n_leaves)
    weights[leaf] = 2.5
    rules = RuleEnsemble.from_weights(forest, weights, intercept=0.0)
    (rule,) = rules.rules
    assert rule.tree == 3 and rule.leaf == 2
    assert rule.weight == 2.5 and rule.value == forest.leaf_values[leaf]
    assert rule.contribution == 2.5 * forest.leaf_values[leaf]
    assert rule.support == forest.leaf_support[leaf] > 0
    assert rule.conditions == forest.leaf_conditions([leaf])[0]
    assert rule.members == (Member(tree=3, leaf=2, weight=2.5, value=forest.leaf_values[leaf], support=rule.support),)
    ptr, _ids = forest.leaf_ancestors
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
    weights[[0, per_tree, 2 * per_tree]] = [1.0, 0.5, 0.25]  # leaf 0 of each tree: merged
    weights[[1, per_tree + 1]] = [2.0, -2.0]  # leaf 1: cancels exactly
    rules = RuleEnsemble.from_weights(forest, weights, intercept=0.0)
    (rule,) = rules.rules
    assert [m.tree for m in rule.members] == [0, 1, 2]
    assert rule.contribution == pytest.approx(1.75 * forest.leaf_values[0], rel=1e-15)
    np.testing.assert_allclose(rules.predict(X), leaf_matrix(forest, X).matvec(weights), rtol=1e-12, atol=1e-14)
    ptr, ids = forest.leaf_ancestors
    assert rules.n_antecedents == count_antecedents(np.array([0, per_tree, 2 * per_tree]), ptr, ids)


def test_explain_gives_the_ids_and_contributions_that_make_each_prediction(nan_forest):
    forest, X = nan_forest
    rules = RuleEnsemble.from_weights(forest, sparse_weights(forest, 40, seed=3), intercept=-1.0)
    fired = rules.explain(X)
    np.testing.assert_allclose(
        [-1.0 + sum(rule["contribution"] for rule in row) for row in fired], rules.predict(X), rtol=1e-12, atol=1e-12
    )
    assert any(fired)
    for row in fired:
        ids = [rule["id"] for rule in row]
        assert ids == sorted(ids)
        assert all(rules.rules[rule["id"]].contribution == rule["contribution"] for rule in row)
    assert [rule.id for rule in rules.rules] == list(range(rules.n_rules))


def test_json_round_trip_predicts_identically(nan_forest):
    forest, X = nan_forest
    rules = RuleEnsemble.from_weights(forest, sparse_weights(forest, 30, seed=5), intercept=0.3)
    document = json.loads(json.dumps(rules.to_dict()))
    restored = RuleEnsemble.from_dict(document)
    assert restored.to_dict() == rules.to_dict()
    np.testing.assert_array_equal(restored.predict(X), rules.predict(X))
    assert restored.n_antecedents == rules.n_antecedents
    minimal = RuleEnsemble.from_dict(
        {
            "format": "fire-rules",
            "version": 1,
            "feature_names": ["a", "b"],
            "intercept": 1.0,
            "rules": [
                {
                    "conditions": [
                        {"feature": "b", "feature_index": 1, "operator": ">", "threshold": 0.0, "missing": True}
                    ],
                    "contribution": 2.0,
                }
            ],
        }
    )
    np.testing.assert_array_equal(minimal.predict([[0, 1], [0, -1], [0, np.nan]]), [3, 1, 3])
    assert minimal.n_antecedents is None


def test_to_text_lines_start_with_the_rule_id_and_are_sorted(nan_forest):
    forest, X = nan_forest
    rules = RuleEnsemble.from_weights(forest, sparse_weights(forest, 8, seed=7), intercept=0.5, X=X)
    lines = rules.to_text().splitlines()
    assert lines[0] == f"# 8 rules, {rules.n_antecedents} antecedents"
    assert lines[1].split() == ["+0.5", "intercept"]
    assert len(lines) == 2 + rules.n_rules
    ids = [int(line.split()[0].removeprefix("r")) for line in lines[2:]]
    shown = [abs(rules.rules[r].contribution) for r in ids]
    assert sorted(ids) == list(range(8)) and shown == sorted(shown, reverse=True)
    assert all(line.startswith(f"r{r} ") and " if " in line for r, line in zip(ids, lines[2:]))
    by_id = [line.split()[0] for line in rules.to_text(sort="id").splitlines()[2:]]
    assert by_id == [f"r{r}" for r in range(8)]
    # X has NaN in every column: a condition a NaN satisfies says so, unless asked not to
    assert "or missing" in rules.to_text()
    assert "or missing" not in rules.to_text(show_missing="never")
    with pytest.raises(ValueError, match="show_missing"):
        rules.to_text(show_missing=True)


def condition(operator, threshold, missing, **extra):
    return Condition("age", 0, operator, threshold, missing, **extra)


def rule_text(*conditions, encoding=None, show_missing="auto"):
    rules = RuleEnsemble(
        [Rule(conditions, 1.0)],
        0.0,
        [c.feature for c in conditions][:1] if encoding is None else encoding.feature_names,
        encoding=encoding,
    )
    return rules.to_text(show_missing=show_missing).splitlines()[2].split("  if ")[1]


def test_numeric_condition_text():
    assert rule_text(condition(">", float(np.float32(5.03)), False)) == "age > 5.03"
    assert rule_text(condition(">", 0.99999994, False)) == "age > 0.99999994"  # the float32 cut, exactly
    assert rule_text(condition(">", 0.99999994, False, display_threshold=0.0)) == "age > 0"
    assert rule_text(condition("<=", 6.1, True)) == "age <= 6.1 or missing"  # missing values: unknown
    assert rule_text(condition("<=", 6.1, True), show_missing="never") == "age <= 6.1"
    known = TableEncoding.numeric(["age"], missing=[False])
    assert rule_text(condition("<=", 6.1, True), encoding=known) == "age <= 6.1"
    assert rule_text(condition("<=", 6.1, True), encoding=known, show_missing="always") == "age <= 6.1 or missing"
    largest = float(np.finfo(np.float64).max)
    assert rule_text(condition("<=", largest, False)) == "age is not missing"
    assert rule_text(condition(">", largest, True)) == "age is missing"
    assert rule_text(condition(">", 1.0, True), condition("<=", 2.0, True)) == "1 < age <= 2 or missing"


def test_one_hot_conditions_read_as_levels():
    encoding = TableEncoding.infer(
        pd.DataFrame({"clarity": ["I1", "SI2", "SI1", "VS2", "IF"], "Sex": ["F", "I", "M", "F", None]})
    )
    index = {name: j for j, name in enumerate(encoding.feature_names)}

    def on(name, operator, threshold):
        return Condition(name, index[name], operator, threshold, missing=operator == "<=")

    def text(*conditions):
        return rule_text(*conditions, encoding=encoding)

    assert text(on("clarity=I1", ">", 0.5)) == "clarity is I1"
    assert text(on("clarity=I1", "<=", 0.5)) == "clarity is not I1"
    assert text(on("clarity=I1", "<=", 1e-35), on("clarity=SI2", "<=", 0.99999994)) == "clarity not in {I1, SI2}"
    assert (
        text(on("clarity=I1", "<=", 0.5), on("clarity=SI2", "<=", 0.5), on("clarity=SI1", "<=", 0.5))
        == "clarity in {IF, VS2}"
    )
    assert text(on("clarity=IF", ">", 0.5), on("clarity=I1", "<=", 0.5)) == "clarity is IF"  # implied: dropped
    # Sex had a missing value: a missing level satisfies "is not" conditions, and the text says so
    assert text(on("Sex=M", "<=", 0.5)) == "Sex in {F, I} or missing"
    assert text(on("Sex=M", ">", 0.5)) == "Sex is M"
    assert text(on("Sex=M", "<=", 0.5), on("clarity=IF", ">", 0.5)) == "(Sex in {F, I} or missing) and clarity is IF"


def test_always_rule_from_a_single_leaf_tree():
    forest = TreeEnsemble.from_dict(
        {
            "format": "fire-forest",
            "version": 1,
            "n_features": 1,
            "base_score": 0.0,
            "tree_weight": 1.0,
            "trees": [
                {"children_left": [-1], "children_right": [-1], "feature": [-2], "threshold": [0.0], "value": [3.0]}
            ],
        }
    )
    rules = RuleEnsemble.from_weights(forest, np.array([2.0]), intercept=1.0)
    assert rules.rules[0].conditions == () and rules.n_antecedents == 0
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


VALID = {
    "format": "fire-rules",
    "version": 1,
    "feature_names": ["a", "b"],
    "intercept": 0.0,
    "rules": [
        {
            "conditions": [{"feature": "a", "feature_index": 0, "operator": "<=", "threshold": 1.0, "missing": False}],
            "contribution": 1.0,
            "tree": 0,
            "leaf": 0,
            "support": 3,
            "members": [{"tree": 0, "leaf": 0, "weight": 1.0, "value": 1.0}],
        }
    ],
}


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("format", "fire-forest", "format"),
        ("version", 4, "version"),
        ("intercept", float("inf"), "intercept"),
        ("intercept", "0", "intercept"),
        ("feature_names", ["a", "a"], "feature_names/1"),
        ("feature_names", ["a", "b" * 1025], "feature_names/1"),
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
    ],
)
def test_from_dict_reports_the_offending_field(path, value, field):
    document = with_value_at(VALID, path, value)
    with pytest.raises(RuleSchemaError) as error:
        RuleEnsemble.from_dict(document)
    assert error.value.field == field and isinstance(error.value, ValueError)
    missing_key = copy.deepcopy(VALID)
    del missing_key["rules"][0]["conditions"][0]["missing"]
    with pytest.raises(RuleSchemaError, match="required"):
        RuleEnsemble.from_dict(missing_key)


@pytest.fixture(scope="module")
def abalone():
    """The abalone table (text column Sex, no missing values) encoded as the library encodes it."""
    frame = pd.read_csv(DATA / "abalone.csv.gz")
    features = frame.drop(columns="rings")
    encoding = TableEncoding.infer(features)
    return encoding, encoding.encode_frame(features), frame["rings"].to_numpy(np.float64)


def boosters(encoding, X, y):
    """The same table as an XGBoost and a LightGBM forest, loaded from their files."""
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    from solver.formats import load_forest, match_feature_names

    frame = pd.DataFrame(X, columns=encoding.feature_names)
    booster = xgb.train({"max_depth": 3, "eta": 0.3}, xgb.DMatrix(frame, y), num_boost_round=20)
    xgboost = load_forest(bytes(booster.save_raw("json")))
    lightgbm = load_forest(
        json.dumps(
            lgb.train({"verbose": -1, "num_leaves": 8}, lgb.Dataset(frame, y), num_boost_round=20).dump_model()
        ).encode()
    )
    return {
        name: match_feature_names(forest, encoding.feature_names)[0]
        for name, forest in (("xgboost", xgboost), ("lightgbm", lightgbm))
    }


def whole_forest_rules(forest, encoding, X):
    return RuleEnsemble.from_weights(
        forest, np.full(forest.n_leaves, forest.tree_weight), forest.base_score, encoding=encoding, X=X
    )


def assert_readable(rules, X):
    """Levels in words, no missing values mentioned, thresholds that split the training rows as the model."""
    text = rules.to_text()
    assert "Sex=" not in text and "or missing" not in text and "e-" not in text and "99999" not in text
    phrases = [part for line in text.splitlines()[2:] for part in line.split(" if ")[1].split(" and ") if "Sex" in part]
    assert phrases and all(
        part.split("   [")[0] in {"Sex is F", "Sex is I", "Sex is M", "Sex in {F, I}", "Sex in {F, M}", "Sex in {I, M}"}
        for part in phrases
    )
    for rule in rules.rules:
        for condition in rule.conditions:
            if condition.display_threshold is not None:
                values = X[:, condition.feature_index]
                np.testing.assert_array_equal(
                    values.astype(np.float32).astype(np.float64) <= condition.threshold,
                    values <= condition.display_threshold,
                )


def test_abalone_rules_read_in_the_tables_words(abalone):
    encoding, X, y = abalone
    rf = RandomForestRegressor(n_estimators=30, max_depth=3, random_state=0).fit(X, y)
    forests = {"random_forest": TreeEnsemble.from_sklearn(rf), **boosters(encoding, X, y)}
    for name, forest in forests.items():
        rules = whole_forest_rules(forest, encoding, X)
        np.testing.assert_allclose(rules.predict(X), forest.predict(X), rtol=1e-9, err_msg=name)
        assert_readable(rules, X)


def test_support_and_importance_come_from_the_training_rows(abalone):
    encoding, X, y = abalone
    rf = RandomForestRegressor(n_estimators=10, max_depth=3, random_state=0).fit(X, y)
    forest = TreeEnsemble.from_sklearn(rf)
    rules = RuleEnsemble.from_weights(forest, sparse_weights(forest, 12, seed=1), 9.0, encoding=encoding, X=X)
    fired = rules.explain(X)
    for rule in rules.rules:
        assert rule.support == sum(rule.id in {f["id"] for f in row} for row in fired)
    assert list(rules.importance) == encoding.column_names
    assert sum(rules.importance.values()) == pytest.approx(1.0)
    by_hand = dict.fromkeys(encoding.column_names, 0.0)
    for rule in rules.rules:
        columns = {encoding.feature_column(c.feature_index)[0].name for c in rule.conditions}
        for column in columns:
            by_hand[column] += abs(rule.contribution) * rule.support / len(columns)
    total = sum(by_hand.values())
    assert rules.importance == pytest.approx({name: share / total for name, share in by_hand.items()})
    restored = RuleEnsemble.from_dict(json.loads(json.dumps(rules.to_dict())))
    assert restored.importance == rules.importance and restored.to_text() == rules.to_text()
    assert restored.encoding.to_dict() == encoding.to_dict()


def test_version_1_documents_are_read_with_ids_by_position():
    document = copy.deepcopy(VALID)
    document["rules"].append(copy.deepcopy(document["rules"][0]))
    rules = RuleEnsemble.from_dict(document)
    assert [rule.id for rule in rules.rules] == [0, 1] and rules.importance is None
    assert rules.to_dict()["version"] == 2
    renumbered = rules.to_dict()
    renumbered["rules"][1]["id"] = 5
    with pytest.raises(RuleSchemaError) as error:
        RuleEnsemble.from_dict(renumbered)
    assert error.value.field == "rules/1/id"
