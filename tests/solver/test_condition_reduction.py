"""Each condition said once (solver.rule_types.reduce_conditions): a rule's conditions are the fewest that fire on
the same rows, checked against brute force over every kind of row a table gives (each level of a text column, a
missing one, one the encoding never saw; numbers at and around every threshold, the largest float32s, NaN)."""

import itertools
import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from solver import TableEncoding, TreeEnsemble
from solver.encoding import ColumnSpec
from solver.export import to_python, to_sql
from solver.rule_types import FLOAT32_MAX, Condition, Rule, reduce_conditions
from solver.rules import RuleEnsemble
from tests.support.exports import python_predictions, sql_predictions

LEVELS = ("A", "B", "C", "D", "E")
ENCODING = TableEncoding(
    [
        ColumnSpec("x", "numeric", missing=True),
        ColumnSpec("protocol", "categorical", LEVELS, missing=True),
        ColumnSpec("y", "numeric", missing=True),
    ]
)
FEATURE = {name: j for j, name in enumerate(ENCODING.feature_names)}
NUMBER_THRESHOLDS = (-1.0, 0.5, 2.0, 2.00000001, 3.5, 3.5e38, -3.5e38, 1e300)
INDICATOR_THRESHOLDS = (0.5, -0.5, 1.5, 0.0, 1.0, 1e-35, 0.99999994)


def float32_values_around(thresholds) -> list[float]:
    """The float32 values on either side of each threshold's float32 cut, the largest finite ones and NaN: every
    set of rows that bounds on these thresholds tell apart has one of them."""
    values = {-FLOAT32_MAX, 0.0, FLOAT32_MAX, np.nan}
    for threshold in thresholds:
        with np.errstate(over="ignore"):
            cut = np.float32(threshold)
            if float(cut) > threshold:
                cut = np.nextafter(cut, np.float32(-np.inf))
            values.update(float(v) for v in (cut, np.nextafter(cut, np.float32(np.inf))) if np.isfinite(v))
    return sorted(values, key=lambda v: (np.isnan(v), v))


NUMBERS = float32_values_around(NUMBER_THRESHOLDS)
OUTCOMES = (*LEVELS, None)  # None: a missing level


def raw_rows(levels=OUTCOMES) -> pd.DataFrame:
    """Every combination of x, the protocol's level and y, as the table holds them."""
    return pd.DataFrame(list(itertools.product(NUMBERS, levels, NUMBERS)), columns=["x", "protocol", "y"]).astype(
        {"protocol": object}
    )


def encoded(frame: pd.DataFrame) -> np.ndarray:
    """The rows as the model reads them; a level the encoding never saw sets no indicator, as the exports read
    it (the encoding itself refuses it)."""
    known = frame.assign(protocol=frame["protocol"].where(frame["protocol"].isin(LEVELS), None))
    return ENCODING.encode_frame(known)


GRID = encoded(raw_rows())


def fires(conditions, X: np.ndarray) -> np.ndarray:
    """Brute force: the rows where every condition holds, comparing the float32 value, NaN where ``missing``."""
    holds = np.ones(len(X), dtype=bool)
    for condition in conditions:
        value = X[:, condition.feature_index].astype(np.float32).astype(np.float64)
        compared = value <= condition.threshold if condition.operator == "<=" else value > condition.threshold
        holds &= np.where(np.isnan(value), condition.missing, compared)
    return holds


def random_condition(rng) -> Condition:
    name = rng.choice(["x", "y", *(f"protocol={level}" for level in LEVELS)], p=[0.2, 0.1, *[0.14] * 5])
    thresholds = NUMBER_THRESHOLDS if "=" not in name else INDICATOR_THRESHOLDS
    return Condition(
        str(name), FEATURE[name], str(rng.choice(["<=", ">"])), float(rng.choice(thresholds)), bool(rng.random() < 0.5)
    )


def random_conditions(rng) -> list[Condition]:
    return [random_condition(rng) for _ in range(rng.integers(1, 8))]


def fewest(conditions) -> int:
    """Brute force: the fewest of ``conditions`` that fire on the rows they fire on, each with either missing flag."""
    target = fires(conditions, GRID)
    for size in range(len(conditions) + 1):
        for subset in itertools.combinations(conditions, size):
            for flags in itertools.product((False, True), repeat=size):
                chosen = [replace(c, missing=flag) for c, flag in zip(subset, flags)]
                if np.array_equal(fires(chosen, GRID), target):
                    return size
    raise AssertionError("the conditions themselves fire on their rows")


def test_reduced_conditions_fire_on_the_same_rows_and_are_the_fewest():
    rng = np.random.default_rng(0)
    reduced_some = 0
    for _ in range(2000):
        conditions = random_conditions(rng)
        reduced = reduce_conditions(conditions, ENCODING)
        assert set(reduced) <= {replace(c, missing=flag) for c in conditions for flag in (False, True)}
        np.testing.assert_array_equal(fires(reduced, GRID), fires(conditions, GRID))
        assert reduce_conditions(reduced, ENCODING) == reduced
        if fires(conditions, GRID).any():  # a rule that fires nowhere may keep a contradiction on two columns
            assert len(reduced) == fewest(conditions), conditions
        reduced_some += len(reduced) < len(conditions)
    assert reduced_some > 500


def on(name: str, operator: str, threshold: float, missing: bool = False) -> Condition:
    return Condition(name, FEATURE[name], operator, threshold, missing)


def wording(*conditions: Condition) -> tuple[list[Condition], str]:
    """(the conditions of an ensemble of the one rule of ``conditions``, its text)."""
    ensemble = RuleEnsemble([Rule(conditions, 1.0)], 0.0, ENCODING.feature_names, encoding=ENCODING)
    return list(ensemble.rules[0].conditions), ensemble.to_text().splitlines()[2].split("  if ")[1]


def test_each_condition_is_said_once():
    is_c = on("protocol=C", ">", 0.5)
    assert wording(on("protocol=D", "<=", 0.5), on("protocol=B", "<=", 0.5), is_c) == ([is_c], "protocol is C")
    # "is not" conditions hold for a missing level: none of them is implied, and the text says them as a set
    not_a, not_b = on("protocol=A", "<=", 0.5, True), on("protocol=B", "<=", 0.5, True)
    assert wording(not_a, not_b, not_a) == ([not_a, not_b], "protocol not in {A, B} or missing")
    not_c = on("protocol=C", "<=", 0.5, True)
    assert wording(not_a, not_b, not_c) == ([not_a, not_b, not_c], "protocol in {D, E} or missing")
    assert wording(on("x", ">", 3.0), on("x", ">", 5.0)) == ([on("x", ">", 5.0)], "x > 5")
    conditions, text = wording(on("x", "<=", 7.0), on("x", ">", 2.0), on("x", "<=", 4.0))
    assert conditions == [on("x", ">", 2.0), on("x", "<=", 4.0)] and text == "2 < x <= 4"
    # a bound every present value satisfies says only "not missing", which x > 2 already says
    assert wording(on("x", ">", 2.0), on("x", "<=", 1e300)) == ([on("x", ">", 2.0)], "x > 2")
    # a NaN satisfies the kept bound where it satisfied every one
    assert wording(on("x", ">", 3.0, True), on("x", ">", 5.0, True))[1] == "x > 5 or missing"
    assert wording(on("x", ">", 3.0, False), on("x", ">", 5.0, True))[1] == "x > 5"


def random_ensemble(rng, n_rules: int = 60) -> tuple[list[Rule], float]:
    rules = [Rule(random_conditions(rng), float(rng.normal())) for _ in range(n_rules)]
    return rules, float(rng.normal())


def brute_force_scores(rules, intercept: float, X: np.ndarray) -> np.ndarray:
    """The unreduced rules' scores: intercept + (0.0 + the contributions of the rules that fire, in order)."""
    total = np.zeros(len(X))
    for rule in rules:
        total = np.where(fires(rule.conditions, X), total + rule.contribution, total)
    return intercept + total


def test_ensembles_and_their_documents_score_as_the_unreduced_rules():
    rules, intercept = random_ensemble(np.random.default_rng(1))
    ensemble = RuleEnsemble(rules, intercept, ENCODING.feature_names, encoding=ENCODING)
    expected = brute_force_scores(rules, intercept, GRID)
    assert sum(map(len, (r.conditions for r in ensemble.rules))) < sum(map(len, (r.conditions for r in rules)))
    np.testing.assert_array_equal(ensemble.predict(GRID), expected)
    document = json.loads(json.dumps(ensemble.to_dict()))
    restored = RuleEnsemble.from_dict(document)
    assert restored.to_dict() == document
    np.testing.assert_array_equal(restored.predict(GRID), expected)
    # a document written before, each rule with its conditions as the trees gave them, reads reduced
    old = json.loads(json.dumps(document))
    for entry, rule in zip(old["rules"], rules):
        entry["conditions"] = [condition.to_dict() for condition in rule.conditions]
    read = RuleEnsemble.from_dict(old)
    assert [r.conditions for r in read.rules] == [r.conditions for r in ensemble.rules]
    np.testing.assert_array_equal(read.predict(GRID), expected)


def test_exports_score_levels_never_seen_as_the_unreduced_rules():
    rules, intercept = random_ensemble(np.random.default_rng(2), n_rules=30)
    ensemble = RuleEnsemble(rules, intercept, ENCODING.feature_names, encoding=ENCODING)
    frame = raw_rows((*LEVELS, None, "Z"))  # "Z": a level the encoding never saw
    expected = brute_force_scores(rules, intercept, encoded(frame))
    np.testing.assert_array_equal(python_predictions(to_python(ensemble), frame), expected)
    np.testing.assert_array_equal(sql_predictions(to_sql(ensemble), frame), expected)


SEVEN_CLASSES = list("abcdefg")
PROTOCOLS = ("C", "H", "I", "J", "K")


def seven_class_forest(features: list[str]) -> TreeEnsemble:
    """Tree 0 splits on "protocol is J", then "is I", then "is C"; tree 1 on "is C" alone."""
    j, i, c = (features.index(f"protocol={level}") for level in "JIC")
    leaf = -2
    trees = [
        {
            "children_left": [1, 3, -1, 5, -1, -1, -1],
            "children_right": [2, 4, -1, 6, -1, -1, -1],
            "feature": [j, i, leaf, c, leaf, leaf, leaf],
            "threshold": [0.5, 0.5, -2.0, 0.5, -2.0, -2.0, -2.0],
            "value": [0.0, 0.0, 1.0, 0.0, 2.0, 3.0, 4.0],
        },
        {
            "children_left": [1, -1, -1],
            "children_right": [2, -1, -1],
            "feature": [c, leaf, leaf],
            "threshold": [0.5, -2.0, -2.0],
            "value": [0.0, 5.0, 6.0],
        },
    ]
    return TreeEnsemble.from_dict(
        {
            "format": "fire-forest",
            "version": 1,
            "n_features": len(features),
            "feature_names": features,
            "base_score": 0.0,
            "tree_weight": 1.0,
            "trees": trees,
        }
    )


def test_the_seven_class_rule_reads_protocol_is_c():
    frame = pd.DataFrame({"bytes": np.arange(12.0), "protocol": pd.Series([*PROTOCOLS, None] * 2, dtype=object)})
    encoding = TableEncoding.infer(frame)
    X = encoding.encode_frame(frame)
    forest = seven_class_forest(encoding.feature_names)
    weights = np.random.default_rng(3).normal(size=(forest.n_leaves, len(SEVEN_CLASSES)))
    rules = RuleEnsemble.from_weights(
        forest, weights, [0.0] * len(SEVEN_CLASSES), classes=SEVEN_CLASSES, encoding=encoding, X=X
    )
    is_c = [
        rule for rule in rules.rules if any(c.feature == "protocol=C" and c.operator == ">" for c in rule.conditions)
    ]
    assert len(is_c) == 1 and len(is_c[0].members) == 2  # tree 0's "not J, not I, is C" and tree 1's "is C" merge
    (condition,) = is_c[0].conditions
    assert (condition.feature, condition.operator, condition.threshold) == ("protocol=C", ">", 0.5)
    assert len(rules.to_dict()["rules"][is_c[0].id]["conditions"]) == 1
    assert f"r{is_c[0].id} " in rules.to_text() and "if protocol is C   [support 2, 2 merged leaves]" in rules.to_text()
    assert rules.n_rules == forest.n_leaves - 1
    expected = np.zeros((len(X), len(SEVEN_CLASSES)))
    for conditions, weight, value in zip(forest.leaf_conditions(), weights, forest.leaf_values):
        expected += np.outer(fires(conditions, X), weight * value)
    np.testing.assert_allclose(rules.predict(X), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("missing", [False, True])
def test_a_document_with_repeated_bounds_exports_its_tightest(missing):
    """Before, the text and the exports of a document with two ``>`` bounds on a feature said the first one."""
    document = {
        "format": "fire-rules",
        "version": 2,
        "feature_names": ["x"],
        "intercept": 0.0,
        "rules": [
            {
                "contribution": 1.0,
                "conditions": [Condition("x", 0, ">", threshold, missing).to_dict() for threshold in (3.0, 5.0)],
            }
        ],
    }
    rules = RuleEnsemble.from_dict(document)
    assert rules.rules[0].conditions == (Condition("x", 0, ">", 5.0, missing),)
    frame = pd.DataFrame({"x": [2.0, 4.0, 6.0, np.nan]})
    expected = [0.0, 0.0, 1.0, float(missing)]
    np.testing.assert_array_equal(rules.predict(frame.to_numpy()), expected)
    np.testing.assert_array_equal(python_predictions(to_python(rules), frame), expected)
    np.testing.assert_array_equal(sql_predictions(to_sql(rules), frame), expected)
