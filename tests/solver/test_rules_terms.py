"""Rule ensembles from the new candidate terms (issue 18): rules from nodes of any depth and winsorized linear
terms score exactly like ``intercept + M @ weights``, read and write their document, print, explain and export
(SQL on SQLite, Python) exactly, on rows with missing and out-of-range values."""

import copy
import json

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestRegressor

from solver import TreeEnsemble, count_antecedents
from solver.candidates import Candidates, LinearTerms
from solver.export import to_python, to_sql
from solver.rule_types import LinearTerm, RuleSchemaError
from solver.rules import RuleEnsemble
from tests.support.documents import with_value_at
from tests.support.exports import python_predictions, sql_predictions

NAMES = ["a", "b", "c", "d"]
CLASSES = ["x", "y", "z"]


class Table:
    def __init__(self):
        rng = np.random.default_rng(3)
        X = rng.normal(size=(700, 4)) * [1.0, 10.0, 0.5, 100.0] + [0.0, 50.0, 1.0, 0.0]
        y = X[:, 0] + 0.1 * X[:, 1] + np.sin(2 * X[:, 2]) + 0.01 * X[:, 3] + 0.2 * rng.normal(size=700)
        X[rng.random(X.shape) < 0.1] = np.nan
        X[:, 1][np.isnan(X[:, 1])] = 50.0  # b has no missing values
        self.train, self.test = X[:500], X[500:].copy()
        self.test[::7] *= 5.0  # beyond the winsorization bounds
        self.test[1::9, 0] = -1e6
        model = RandomForestRegressor(n_estimators=6, max_depth=4, min_samples_leaf=40, random_state=0)
        self.forest = TreeEnsemble.from_sklearn(model.fit(pd.DataFrame(self.train, columns=NAMES), y[:500]))
        self.linear = LinearTerms.fit(self.train, np.arange(4))
        self.frame = pd.DataFrame(self.test, columns=NAMES)  # NaN: NULL in SQLite, missing in Python


@pytest.fixture(scope="module")
def table():
    return Table()


def sparse_weights(n_terms, n_linear, shape=(), seed=0):
    """Random weights on about a third of the rule columns and on every linear term."""
    rng = np.random.default_rng(seed)
    weights = rng.normal(size=(n_terms, *shape))
    weights[: n_terms - n_linear][rng.random(n_terms - n_linear) < 0.66] = 0.0
    return weights


def expected_scores(candidates, X, weights, intercept):
    matrix = candidates.matrix(candidates.forest.apply(X), X)
    if weights.ndim == 1:
        return intercept + matrix.matvec(weights)
    return np.asarray(intercept) + np.column_stack([matrix.matvec(weights[:, k]) for k in range(weights.shape[1])])


@pytest.mark.parametrize(("kind", "max_rule_length"), [("leaves", None), ("leaves", 3), ("nodes", None), ("nodes", 2)])
def test_rules_and_linear_terms_score_like_the_candidates_matrix(table, kind, max_rule_length):
    candidates = Candidates.of(table.forest, kind, max_rule_length, linear=table.linear)
    weights = sparse_weights(candidates.n_terms, candidates.n_linear, seed=len(kind))
    rules = RuleEnsemble.from_weights(candidates, weights, 0.7, X=table.train)
    np.testing.assert_allclose(
        rules.predict(table.test), expected_scores(candidates, table.test, weights, 0.7), atol=1e-10
    )
    assert rules.n_linear == 4 and rules.n_terms == rules.n_rules + 4
    if max_rule_length is not None:
        assert max(len(rule.conditions) for rule in rules.rules) <= max_rule_length
    kept = [c for c in range(candidates.n_rules) if weights[c] != 0.0]
    assert rules.n_antecedents == count_antecedents(np.array(kept), *candidates.ancestors)
    explained = rules.explain(table.test)
    totals = [sum(entry["contribution"] for entry in row) for row in explained]
    np.testing.assert_allclose(rules.intercept + np.array(totals), rules.predict(table.test), atol=1e-9)
    assert [entry["linear"] for entry in explained[0] if "linear" in entry] == [0, 1, 2, 3]


def test_per_class_linear_terms_score_like_the_candidates_matrix(table):
    candidates = Candidates.of(table.forest, "nodes", 3, linear=table.linear)
    weights = sparse_weights(candidates.n_terms, candidates.n_linear, shape=(3,), seed=5)
    intercept = [0.1, -0.2, 0.3]
    rules = RuleEnsemble.from_weights(candidates, weights, intercept, classes=CLASSES, X=table.train)
    expected = expected_scores(candidates, table.test, weights, intercept)
    np.testing.assert_allclose(rules.predict(table.test), expected, atol=1e-10)
    assert all(len(term.coefficient) == 3 for term in rules.linear)
    restored = RuleEnsemble.from_dict(json.loads(json.dumps(rules.to_dict())))
    np.testing.assert_array_equal(restored.predict(table.test), rules.predict(table.test))
    np.testing.assert_allclose(
        python_outputs(to_python(rules), table.frame), rules.predict_mean(table.test), rtol=1e-12
    )
    with sqlite(table.frame) as connection:
        sql = np.array(connection.execute(f"SELECT {to_sql(rules)} FROM t ORDER BY rowid").fetchall())
    np.testing.assert_allclose(sql, rules.predict_mean(table.test), rtol=1e-12)
    assert "lin2  " in rules.to_text()


def test_a_linear_term_is_the_weight_in_raw_units_and_a_missing_value_adds_its_centre(table):
    linear = table.linear
    candidates = Candidates.of(table.forest, linear=linear)
    weights = np.zeros(candidates.n_terms)
    weights[candidates.n_rules + 2] = 1.5  # c, with missing values
    rules = RuleEnsemble.from_weights(candidates, weights, 2.0, X=table.train)
    (term,) = rules.linear
    assert term.feature == "c" and term.feature_index == 2 and term.weight == 1.5
    assert term.coefficient == 1.5 * linear.scale[2] and term.fill == linear.center[2]
    assert (term.lower, term.upper) == (linear.lower[2], linear.upper[2])
    assert rules.intercept == pytest.approx(2.0 - term.coefficient * term.fill, abs=1e-12)
    assert term.support == int((~np.isnan(table.train[:, 2])).sum())
    rows = np.array([[0.0, 50.0, np.nan, 0.0], [0.0, 50.0, 1e9, 0.0], [0.0, 50.0, -1e9, 0.0]])
    scores = rules.predict(rows)
    assert scores[0] == pytest.approx(2.0, abs=1e-12)  # missing: the solver's 0
    assert scores[1] == rules.intercept + term.coefficient * term.upper
    assert scores[2] == rules.intercept + term.coefficient * term.lower
    assert rules.explain(rows)[0] == [{"linear": 0, "contribution": term.coefficient * term.fill}]
    assert rules.importance == {"a": 0.0, "b": 0.0, "c": 1.0, "d": 0.0}


def test_importance_adds_a_linear_terms_moves_from_its_centre(table):
    candidates = Candidates.of(table.forest, linear=table.linear)
    weights = sparse_weights(candidates.n_terms, candidates.n_linear, seed=2)
    rules = RuleEnsemble.from_weights(candidates, weights, 0.0, X=table.train)
    by_hand = dict.fromkeys(NAMES, 0.0)
    for rule in rules.rules:
        features = {c.feature for c in rule.conditions}
        for feature in features:
            by_hand[feature] += abs(rule.contribution) * rule.support / len(features)
    for term in rules.linear:
        by_hand[term.feature] += abs(term.coefficient) * np.abs(term.values(table.train) - term.fill).sum()
    total = sum(by_hand.values())
    assert rules.importance == pytest.approx({name: share / total for name, share in by_hand.items()})


def test_text_prints_the_coefficient_and_the_clipping(table):
    candidates = Candidates.of(table.forest, linear=table.linear)
    weights = np.zeros(candidates.n_terms)
    weights[-4:] = [0.5, -0.25, 0.0, 2.0]
    rules = RuleEnsemble.from_weights(candidates, weights, 1.0, X=table.train)
    lines = [" ".join(line.split()) for line in rules.to_text().splitlines()]
    assert lines[0].startswith("# 0 rules, 3 linear terms")
    a, b, d = rules.linear
    assert lines[2:] == [
        f"lin0 {a.coefficient:+.4g} × a (clipped to [{a.lower:.6g}, {a.upper:.6g}]; missing counts as {a.fill:.6g})"
        f" [support {a.support}]",
        f"lin1 {b.coefficient:+.4g} × b (clipped to [{b.lower:.6g}, {b.upper:.6g}]) [support {b.support}]",
        f"lin2 {d.coefficient:+.4g} × d (clipped to [{d.lower:.6g}, {d.upper:.6g}]; missing counts as {d.fill:.6g})"
        f" [support {d.support}]",
    ]
    assert "missing" not in rules.to_text(show_missing="never")


def test_text_and_document_of_a_hand_made_linear_term():
    term = LinearTerm("Gr_Liv_Area", 0, 0.031, 834.0, 2850.0, 1500.0)
    rules = RuleEnsemble([], 10.0, ["Gr_Liv_Area"], linear=[term])
    assert (
        rules.to_text().splitlines()[2] == "lin0  +0.031 × Gr_Liv_Area (clipped to [834, 2850]; missing counts as 1500)"
    )
    document = rules.to_dict()
    assert document["version"] == 3
    assert document["linear"] == [
        {
            "id": 0,
            "feature": "Gr_Liv_Area",
            "feature_index": 0,
            "coefficient": 0.031,
            "lower": 834.0,
            "upper": 2850.0,
            "fill": 1500.0,
            "support": None,
        }
    ]
    assert RuleEnsemble.from_dict(document).to_dict() == document
    np.testing.assert_array_equal(
        rules.predict(np.array([[0.0], [2000.0], [1e5], [np.nan]])),
        [10.0 + 0.031 * 834.0, 10.0 + 0.031 * 2000.0, 10.0 + 0.031 * 2850.0, 10.0 + 0.031 * 1500.0],
    )


@pytest.mark.parametrize("kind", ["leaves", "nodes"])
@pytest.mark.parametrize("link", ["identity", "log"])
def test_exports_score_exactly_like_the_model(table, kind, link):
    candidates = Candidates.of(table.forest, kind, 2 if kind == "nodes" else None, linear=table.linear)
    weights = 0.1 * sparse_weights(candidates.n_terms, candidates.n_linear, seed=7)
    rules = RuleEnsemble.from_weights(candidates, weights, 0.5, link=link, X=table.train)
    sql, python = to_sql(rules), to_python(rules)
    for term in rules.linear:
        assert f"-- lin{term.id}: " in sql and f"    # lin{term.id}: " in python
    if link == "identity":
        expected = rules.predict(table.test)
        np.testing.assert_array_equal(sql_predictions(sql, table.frame), expected)
        np.testing.assert_array_equal(python_predictions(python, table.frame), expected)
    else:
        expected = rules.predict_mean(table.test)
        np.testing.assert_allclose(sql_predictions(sql, table.frame), expected, rtol=1e-12, atol=0)
        np.testing.assert_allclose(python_predictions(python, table.frame), expected, rtol=1e-12, atol=0)


def test_node_rules_record_their_nodes_and_round_trip(table):
    candidates = Candidates.of(table.forest, "nodes", max_rule_length=2)
    weights = sparse_weights(candidates.n_terms, 0, seed=11)
    rules = RuleEnsemble.from_weights(candidates, weights, -0.3, X=table.train)
    np.testing.assert_allclose(
        rules.predict(table.test), expected_scores(candidates, table.test, weights, -0.3), atol=1e-10
    )
    assert rules.n_linear == 0 and max(len(rule.conditions) for rule in rules.rules) <= 2
    for rule in rules.rules:
        for member in rule.members:
            tree = table.forest.trees[member.tree]
            assert member.node is not None and member.value == 1.0
            is_leaf = tree.children_left[member.node] < 0
            assert (member.leaf is not None) == is_leaf
        assert rule.node == rule.members[0].node
    document = json.loads(json.dumps(rules.to_dict()))
    assert document["version"] == 3 and "linear" not in document
    assert "node" in document["rules"][0] and "node" in document["rules"][0]["members"][0]
    restored = RuleEnsemble.from_dict(document)
    assert restored.to_dict() == document and restored.to_text() == rules.to_text()
    np.testing.assert_array_equal(sql_predictions(to_sql(rules), table.frame), rules.predict(table.test))
    np.testing.assert_array_equal(python_predictions(to_python(rules), table.frame), rules.predict(table.test))


def test_leaf_candidates_give_the_document_of_the_forests_leaves(table):
    weights = sparse_weights(table.forest.n_leaves, 0, seed=4)
    from_forest = RuleEnsemble.from_weights(table.forest, weights, 0.2, X=table.train)
    from_candidates = RuleEnsemble.from_weights(Candidates.of(table.forest), weights, 0.2, X=table.train)
    assert from_candidates.to_dict() == from_forest.to_dict()
    assert from_forest.to_dict()["version"] == 2  # nothing of version 3: older readers read it
    capped = Candidates.of(table.forest, max_rule_length=3)
    rules = RuleEnsemble.from_weights(capped, np.ones(capped.n_terms), 0.2, X=table.train)
    assert rules.n_rules > 0 and rules.to_dict()["version"] == 2
    assert all(member.node is None and member.leaf is not None for rule in rules.rules for member in rule.members)
    np.testing.assert_allclose(
        rules.predict(table.test), expected_scores(capped, table.test, np.ones(capped.n_terms), 0.2)
    )


def test_from_weights_checks_the_number_of_terms(table):
    candidates = Candidates.of(table.forest, "nodes", linear=table.linear)
    with pytest.raises(ValueError, match=rf"\({candidates.n_terms},\)"):
        RuleEnsemble.from_weights(candidates, np.zeros(candidates.n_rules), 0.0)


LINEAR = {
    "format": "fire-rules",
    "version": 3,
    "feature_names": ["a", "b"],
    "intercept": 1.0,
    "rules": [],
    "linear": [
        {"id": 0, "feature": "b", "feature_index": 1, "coefficient": 0.5, "lower": -1.0, "upper": 2.0, "fill": 0.3}
    ],
}


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("linear", {}, "linear"),
        ("linear/0", [], "linear/0"),
        ("linear/0/feature", "a", "linear/0/feature"),
        ("linear/0/feature_index", 2, "linear/0/feature_index"),
        ("linear/0/coefficient", "0.5", "linear/0/coefficient"),
        ("linear/0/coefficient", [0.5, 0.1], "linear/0/coefficient"),
        ("linear/0/lower", 3.0, "linear/0/upper"),
        ("linear/0/upper", float("inf"), "linear/0/upper"),
        ("linear/0/fill", None, "linear/0/fill"),
        ("linear/0/id", 1, "linear/0/id"),
        ("linear/0/support", -1, "linear/0/support"),
        ("linear/0/weight", [1.0, 2.0], "linear/0/weight"),
        ("linear/0/slope", 1.0, "linear/0/slope"),
        ("version", 2, "linear"),
        ("rules", [{"conditions": [], "contribution": 1.0, "node": -1}], "rules/0/node"),
    ],
)
def test_linear_documents_name_the_offending_field(path, value, field):
    document = with_value_at(LINEAR, path, value)
    with pytest.raises(RuleSchemaError) as error:
        RuleEnsemble.from_dict(document)
    assert error.value.field == field


def test_a_linear_term_on_a_text_columns_level_is_refused():
    from solver import TableEncoding

    encoding = TableEncoding.infer(pd.DataFrame({"s": ["p", "q", "p"], "n": [1.0, 2.0, 3.0]}))
    document = copy.deepcopy(LINEAR)
    document["feature_names"] = encoding.feature_names
    document["columns"] = encoding.to_dict()
    level = next(j for j in range(len(encoding.feature_names)) if encoding.feature_column(j)[1] is not None)
    document["linear"][0].update(feature=encoding.feature_names[level], feature_index=level)
    with pytest.raises(RuleSchemaError) as error:
        RuleEnsemble.from_dict(document)
    assert error.value.field == "linear/0/feature_index"


# -- helpers -------------------------------------------------------------------------------------


class sqlite:
    def __init__(self, frame):
        import sqlite3

        self.connection = sqlite3.connect(":memory:")
        frame.to_sql("t", self.connection, index=False)

    def __enter__(self):
        return self.connection

    def __exit__(self, *exc):
        self.connection.close()


def python_outputs(source, frame):
    namespace: dict = {}
    exec(compile(source, "<export>", "exec"), namespace)
    return np.array([list(namespace["predict"](row).values()) for row in frame.to_dict("records")])
