"""Per-class rules (softmax over K classes) and counts (log link) in solver.rules, solver.rule_text and
solver.export: scores as the mapping matrix gives them, the document read back, the exports computing the
model's mean (probabilities, rates) on rows with missing values and a text column."""

import json
import sqlite3
from typing import NamedTuple

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit
from sklearn.ensemble import RandomForestRegressor

from solver import TableEncoding, TreeEnsemble, mapping_matrix
from solver.export import export_rules, to_python, to_sql
from solver.rule_types import Rule, RuleSchemaError
from solver.rules import RuleEnsemble
from tests.support.data import ABALONE
from tests.support.documents import with_value_at

CLASSES = ["young", 'mid "aged"', 3]  # a label that needs quoting in SQL, and a number


class Table(NamedTuple):
    features: pd.DataFrame  # with missing values in Sex, Length and Shell_weight
    encoding: TableEncoding
    X: np.ndarray
    forest: TreeEnsemble
    rings: np.ndarray


@pytest.fixture(scope="module")
def abalone():
    frame = pd.read_csv(ABALONE).iloc[:1500]
    features = frame.drop(columns="rings").astype({"Sex": object})
    rng = np.random.default_rng(0)
    for name in ("Sex", "Length", "Shell_weight"):
        features.loc[rng.random(len(features)) < 0.1, name] = None
    encoding = TableEncoding.infer(features)
    X = encoding.encode_frame(features)
    rf = RandomForestRegressor(n_estimators=12, max_depth=4, random_state=0).fit(X, frame["rings"])
    return Table(features, encoding, X, TreeEnsemble.from_sklearn(rf), frame["rings"].to_numpy(np.float64))


def per_class_weights(forest, n_classes, n_nonzero, seed):
    rng = np.random.default_rng(seed)
    weights = np.zeros((forest.n_leaves, n_classes))
    weights[rng.choice(forest.n_leaves, n_nonzero, replace=False)] = rng.normal(size=(n_nonzero, n_classes))
    return weights


@pytest.fixture(scope="module")
def three_classes(abalone):
    encoding, X, forest = abalone.encoding, abalone.X, abalone.forest
    weights = per_class_weights(forest, 3, 25, seed=1)
    intercept = [0.2, -0.1, 0.4]
    rules = RuleEnsemble.from_weights(forest, weights, intercept, classes=CLASSES, encoding=encoding, X=X)
    return rules, weights, intercept


@pytest.fixture(scope="module")
def counts(abalone):
    encoding, X, forest, rings = abalone.encoding, abalone.X, abalone.forest, abalone.rings
    rng = np.random.default_rng(2)
    weights = np.zeros(forest.n_leaves)
    weights[rng.choice(forest.n_leaves, 20, replace=False)] = 0.02 * rng.normal(size=20)
    intercept = float(np.log(rings.mean()))
    rules = RuleEnsemble.from_weights(
        forest, weights, intercept, link="log", encoding=encoding, X=X, response="log rate of 'rings'"
    )
    return rules, weights, intercept


def test_per_class_rules_score_like_the_mapping_matrix(abalone, three_classes):
    X, forest = abalone.X, abalone.forest
    rules, weights, intercept = three_classes
    expected = np.asarray(intercept) + mapping_matrix(forest, X) @ weights  # M's column j: leaf_values[j] there
    scores = rules.predict(X)
    assert scores.shape == (len(X), 3) and rules.link == "softmax" and rules.classes == CLASSES
    np.testing.assert_allclose(scores, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
    assert rules.n_rules == 25
    for rule in rules.rules:
        (member,) = rule.members
        leaf = forest.leaf_offsets[member.tree] + member.leaf
        assert member.weight == tuple(weights[leaf]) and member.value == forest.leaf_values[leaf]
        assert rule.contribution == tuple(weights[leaf] * forest.leaf_values[leaf])


def test_per_class_probabilities_are_a_stable_softmax(abalone, three_classes):
    X = abalone.X
    rules, _, _ = three_classes
    scores, probabilities = rules.predict(X), rules.predict_mean(X)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    by_hand = np.exp(scores - scores.max(axis=1, keepdims=True))
    np.testing.assert_allclose(probabilities, by_hand / by_hand.sum(axis=1, keepdims=True), rtol=1e-12)
    huge = RuleEnsemble([Rule([], (800.0, 0.0, -800.0))], [0.0, 0.0, 0.0], ["a"], classes=["x", "y", "z"])
    np.testing.assert_array_equal(huge.predict_mean(np.zeros((1, 1))), [[1.0, 0.0, 0.0]])


def test_leaves_merge_per_class_and_vanish_only_where_every_class_cancels():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    rf = RandomForestRegressor(n_estimators=2, max_depth=3, bootstrap=False, random_state=0)
    forest = TreeEnsemble.from_sklearn(rf.fit(X, X[:, 0] - X[:, 1] ** 2))  # the same tree twice
    per_tree = forest.leaf_offsets[1]
    weights = np.zeros((forest.n_leaves, 3))
    weights[[0, per_tree]] = [[1.0, 0.5, 0.0], [0.25, -0.5, 2.0]]  # merged
    weights[[1, per_tree + 1]] = [[2.0, -1.0, 0.5], [-2.0, 1.0, -0.5]]  # cancels for every class
    weights[[2, per_tree + 2]] = [[1.0, 3.0, 0.5], [-1.0, 1.0, 0.5]]  # cancels for the first class only
    rules = RuleEnsemble.from_weights(forest, weights, [0.0, 0.0, 0.0], classes=["a", "b", "c"])
    merged, partial = rules.rules
    values = forest.leaf_values
    assert [m.tree for m in merged.members] == [0, 1] and merged.weight == (1.0, 0.5, 0.0)
    assert merged.contribution == (1.25 * values[0], 0.5 * values[0] - 0.5 * values[0], 2.0 * values[0])
    assert partial.contribution[0] == 0.0 and partial.contribution[1] != 0.0
    expected = mapping_matrix(forest, X) @ weights
    np.testing.assert_allclose(rules.predict(X), expected, rtol=1e-12, atol=1e-12)


def test_explanations_give_per_class_contributions(abalone, three_classes):
    X = abalone.X
    rules, _, intercept = three_classes
    fired = json.loads(json.dumps(rules.explain(X[:200])))
    assert any(fired) and all(len(rule["contribution"]) == 3 for row in fired for rule in row)
    summed = [sum((np.array(rule["contribution"]) for rule in row), np.zeros(3)) for row in fired]
    np.testing.assert_allclose(np.asarray(intercept) + summed, rules.predict(X[:200]), rtol=1e-12, atol=1e-12)


def test_importance_weighs_rules_by_the_norm_of_their_amounts(abalone, three_classes):
    encoding = abalone.encoding
    rules, _, _ = three_classes
    by_hand = dict.fromkeys(encoding.column_names, 0.0)
    for rule in rules.rules:
        columns = {encoding.feature_column(c.feature_index)[0].name for c in rule.conditions}
        for column in columns:
            by_hand[column] += np.linalg.norm(rule.contribution) * rule.support / len(columns)
    total = sum(by_hand.values())
    assert rules.importance == pytest.approx({name: share / total for name, share in by_hand.items()})


@pytest.mark.parametrize("model", ["three_classes", "counts"])
def test_documents_round_trip(abalone, model, request):
    X = abalone.X
    rules = request.getfixturevalue(model)[0]
    document = json.loads(json.dumps(rules.to_dict()))
    restored = RuleEnsemble.from_dict(document)
    assert restored.to_dict() == rules.to_dict() and restored.to_text() == rules.to_text()
    np.testing.assert_array_equal(restored.predict(X), rules.predict(X))
    if model == "three_classes":
        assert document["link"] == "softmax" and document["classes"] == CLASSES
        assert len(document["intercept"]) == 3 and len(document["rules"][0]["members"][0]["weight"]) == 3
    else:
        assert document["link"] == "log" and "classes" not in document


def test_counts_predict_rates(abalone, counts):
    X, forest = abalone.X, abalone.forest
    rules, weights, intercept = counts
    scores = rules.predict(X)
    np.testing.assert_allclose(scores, intercept + mapping_matrix(forest, X) @ weights, rtol=1e-12)
    np.testing.assert_array_equal(rules.predict_mean(X), np.exp(scores))


def test_binary_logistic_rules_keep_their_scores_text_and_exports(abalone):
    encoding, X, forest = abalone.encoding, abalone.X, abalone.forest
    weights = per_class_weights(forest, 1, 15, seed=4)[:, 0]
    common = dict(encoding=encoding, X=X, response="log-odds of 'yes'")
    plain = RuleEnsemble.from_weights(forest, weights, -0.3, **common)
    logit = RuleEnsemble.from_weights(forest, weights, -0.3, link="logit", classes=["no", "yes"], **common)
    np.testing.assert_array_equal(logit.predict(X), plain.predict(X))
    np.testing.assert_array_equal(logit.predict_mean(X), expit(plain.predict(X)))
    np.testing.assert_array_equal(plain.predict_mean(X), plain.predict(X))
    assert logit.to_text() == plain.to_text()
    for format in ("sql", "python"):
        assert export_rules(logit, format) == export_rules(plain, format)
    document = logit.to_dict()
    assert (document["link"], document["classes"]) == ("logit", ["no", "yes"])
    assert "link" not in plain.to_dict() and "classes" not in plain.to_dict()
    assert RuleEnsemble.from_dict(json.loads(json.dumps(document))).to_dict() == document


# -- exports ------------------------------------------------------------------------------------


def sql_outputs(select_list: str, features: pd.DataFrame) -> tuple[list[str], np.ndarray]:
    """(column names, rows) of ``SELECT select_list`` over ``features`` in SQLite."""
    with sqlite3.connect(":memory:") as connection:
        features.to_sql("abalone", connection, index=False)  # None/NaN stored as NULL
        cursor = connection.execute(f"SELECT {select_list} FROM abalone ORDER BY rowid")
        rows = cursor.fetchall()
    return [column[0] for column in cursor.description], np.array(rows, dtype=np.float64)


def python_outputs(source: str, features: pd.DataFrame) -> list:
    namespace: dict = {}
    exec(compile(source, "<export>", "exec"), namespace)
    return [namespace["predict"](row) for row in features.to_dict("records")]


def test_per_class_exports_give_the_probabilities(abalone, three_classes):
    features, X = abalone.features, abalone.X
    rules, _, _ = three_classes
    expected = rules.predict_mean(X)
    names, probabilities = sql_outputs(to_sql(rules), features)
    assert names == ["young", 'mid "aged"', "3"]
    np.testing.assert_allclose(probabilities, expected, rtol=1e-12, atol=0)
    outputs = python_outputs(to_python(rules), features)
    assert all(list(output) == CLASSES for output in outputs)
    np.testing.assert_allclose([list(output.values()) for output in outputs], expected, rtol=1e-12, atol=0)
    predicted = [max(output, key=output.get) for output in outputs]
    assert predicted == [CLASSES[k] for k in rules.predict(X).argmax(axis=1)]


def test_count_exports_give_the_rate(abalone, counts):
    features, X = abalone.features, abalone.X
    rules, _, _ = counts
    expected = rules.predict_mean(X)
    assert to_sql(rules).startswith("exp(")
    np.testing.assert_allclose(sql_outputs(to_sql(rules), features)[1][:, 0], expected, rtol=1e-12, atol=0)
    np.testing.assert_allclose(python_outputs(to_python(rules), features), expected, rtol=1e-12, atol=0)
    overflowing = RuleEnsemble([Rule([], 900.0)], 0.0, ["a"], link="log")
    assert python_outputs(to_python(overflowing), pd.DataFrame({"a": [1.0]})) == [float("inf")]


# -- text ---------------------------------------------------------------------------------------


def test_per_class_text_shows_the_classes_a_rule_moves_most():
    rules = RuleEnsemble(
        [Rule([], (0.1, -0.2, 0.0, 0.05, 0.0)), Rule([], (2.0, 0.0, -1.5, 0.25, 1e-3))],
        [0.5, 0.0, -0.25, 1.0, 2.0],
        ["a"],
        classes=["A", "B", "C", 4, True],
        response="log-odds of 'grade'",
    )
    summary, intercept, first, second = rules.to_text().splitlines()
    assert summary.startswith("# 2 rules; each rule adds to every class's score") and "log-odds of 'grade'" in summary
    assert intercept.split(": ", 1)[1] == "A +0.5, B +0, C -0.25, 4 +1, true +2"
    # the larger norm first; classes a rule adds exactly 0 to are left out
    assert first == "r1  A +2, C -1.5, 4 +0.25, 1 more  if always"
    assert second == "r0  B -0.2, A +0.1, 4 +0.05        if always"


def test_count_text_reads_as_factors_of_the_base_rate():
    rules = RuleEnsemble(
        [Rule([], float(np.log(0.5))), Rule([], float(np.log(1.8)))],
        float(np.log(2.5)),
        ["a"],
        link="log",
        response="log rate of 'visits'",
    )
    lines = rules.to_text(sort="id").splitlines()
    assert "the rate is the base rate times the factor" in lines[0] and "log rate of 'visits'" in lines[0]
    assert lines[1:] == ["     2.5  base rate", "r0  ×0.5  if always", "r1  ×1.8  if always"]
    assert [line.split()[0] for line in rules.to_text().splitlines()[2:]] == ["r0", "r1"]  # |log 0.5| > |log 1.8|


# -- checks -------------------------------------------------------------------------------------

CONDITION = {"feature": "a", "feature_index": 0, "operator": "<=", "threshold": 1.0, "missing": False}
PER_CLASS = {
    "format": "fire-rules",
    "version": 2,
    "feature_names": ["a", "b"],
    "intercept": [0.0, 0.5, -0.5],
    "link": "softmax",
    "classes": ["x", "y", "z"],
    "rules": [
        {
            "conditions": [CONDITION],
            "contribution": [1.0, -1.0, 0.0],
            "members": [{"tree": 0, "leaf": 0, "weight": [2.0, -2.0, 0.0], "value": 0.5}],
        }
    ],
}


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("classes", None, "classes"),
        ("classes", "xyz", "classes"),
        ("classes", ["x", "y"], "classes"),
        ("classes", ["x", "y", "x"], "classes/2"),
        ("classes", [1, True, "z"], "classes/1"),  # equal as Python values: one key of the export's dict
        ("classes", [1, "1", "z"], "classes/1"),  # equal as text: one SQL column name
        ("classes", ["x", {"y": 1}, "z"], "classes/1"),
        ("classes", ["x", float("nan"), "z"], "classes/1"),
        ("link", "probit", "link"),
        ("link", "identity", "intercept"),
        ("link", "log", "intercept"),
        ("intercept", 0.0, "intercept"),
        ("intercept", [0.0], "intercept"),
        ("intercept", [0.0, "1", 2.0], "intercept/1"),
        ("intercept", [0.0, 1.0], "rules/0/contribution"),
        ("rules/0", {"conditions": [CONDITION], "contribution": [1.0, 2.0]}, "rules/0/contribution"),
        ("rules/0/contribution", 1.0, "rules/0/members/0/weight"),
        ("rules/0/contribution", [1.0, float("inf"), 0.0], "rules/0/contribution/1"),
        ("rules/0/members/0/weight", [1.0, 2.0], "rules/0/members/0/weight"),
        ("rules/0/members/0/value", [1.0, 2.0, 3.0, 4.0], "rules/0/members/0/value"),
    ],
)
def test_per_class_documents_name_the_offending_field(path, value, field):
    RuleEnsemble.from_dict(PER_CLASS)  # valid as it is
    document = with_value_at(PER_CLASS, path, value)
    with pytest.raises(RuleSchemaError) as error:
        RuleEnsemble.from_dict(document)
    assert error.value.field == field


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"classes": ["no", "yes"]}, "classes"),  # classes are a classifier's: not the identity link's
        ({"link": "log", "classes": ["no", "yes"]}, "classes"),
        ({"link": "logit", "classes": ["no", "maybe", "yes"]}, "classes"),
        ({"link": "softmax"}, "intercept"),
    ],
)
def test_single_output_documents_check_link_and_classes(extra, field):
    document = {
        "format": "fire-rules",
        "version": 2,
        "feature_names": ["a"],
        "intercept": 0.0,
        "rules": [{"conditions": [CONDITION], "contribution": 1.0}],
    }
    assert RuleEnsemble.from_dict({**document, "link": "logit", "classes": [False, True]}).classes == [False, True]
    with pytest.raises(RuleSchemaError) as error:
        RuleEnsemble.from_dict({**document, **extra})
    assert error.value.field == field


def test_from_weights_checks_per_class_shapes(abalone):
    forest = abalone.forest
    weights = per_class_weights(forest, 3, 5, seed=3)
    with pytest.raises(ValueError, match="intercept must have shape"):
        RuleEnsemble.from_weights(forest, weights, 0.0, classes=CLASSES)
    with pytest.raises(RuleSchemaError) as error:
        RuleEnsemble.from_weights(forest, weights, [0.0] * 3)
    assert error.value.field == "classes"
    with pytest.raises(ValueError, match="shape"):
        RuleEnsemble.from_weights(forest, weights[:, :, None], [0.0] * 3, classes=CLASSES)
    labels = np.array(["a", "b", "c"])  # numpy labels are stored as Python's
    rules = RuleEnsemble.from_weights(forest, weights, np.zeros(3), classes=labels)
    assert rules.classes == ["a", "b", "c"] and type(rules.classes[0]) is str
    assert rules.intercept == (0.0, 0.0, 0.0)
