"""Tests of solver.rule_types: the typed rules write and read the fire-rules document exactly as the dicts did.

``tests/data/fire_rules_golden.json`` holds what the code before the types (commit 510611c, rules as dicts) gave
for the models built here: each document as ``to_dict`` emitted it (key order included), the text, the SQL and
Python exports and explanations. The forests are written out by hand, so the models do not depend on any
library's training."""

import copy
import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from solver import TableEncoding, TreeEnsemble
from solver.export import export_rules
from solver.rule_types import Condition, Member, Rule, RuleSchemaError
from solver.rules import RuleEnsemble
from tests.support.data import DATA

GOLDEN = DATA / "fire_rules_golden.json"
TABLE = pd.DataFrame(
    {
        "Length": [0.2, 0.35, np.nan, 0.5, 0.61, 0.3125, 0.44, 0.72, np.nan, 0.28, 0.9, 0.455],
        "Sex": ["M", "F", "I", "M", None, "F", "I", "M", "F", "I", "M", "F"],
    }
)
# leaves 0-2 and 3-5: two identical trees (leaves 0 and 3 merge, 1 and 4 cancel); 6-8 a third tree
WEIGHTS = np.array([0.5, 0.1, 0.3, 0.25, -0.1, 0.0, 0.2, -0.4, 0.7])
VERSION_1 = {
    "format": "fire-rules",
    "version": 1,
    "feature_names": ["a", "b"],
    "intercept": 0.0,
    "rules": [
        {
            "conditions": [
                {
                    "feature": "a",
                    "feature_index": 0,
                    "operator": "<=",
                    "threshold": 1.0,
                    "missing": False,
                    "display_threshold": 1,
                }
            ],
            "contribution": 1.0,
            "tree": 0,
            "leaf": None,
            "support": 3,
            "members": [{"tree": 0, "leaf": 0, "weight": 1.0, "value": 1.0}],
        },
        {"conditions": [], "contribution": -2},
    ],
}


def forest_document(n_samples=True):
    same = {
        "children_left": [1, -1, 3, -1, -1],
        "children_right": [2, -1, 4, -1, -1],
        "feature": [0, -2, 3, -2, -2],
        "threshold": [0.45, -2.0, 0.5, -2.0, -2.0],
        "value": [2.0, 1.5, 2.5, 2.0, 3.25],
        "missing_go_left": [True, False, False, False, False],
        "n_samples": [12, 6, 6, 3, 3],
    }
    other = {
        "children_left": [1, 3, -1, -1, -1],
        "children_right": [2, 4, -1, -1, -1],
        "feature": [1, 0, -2, -2, -2],
        "threshold": [0.5, 0.3125, -2.0, -2.0, -2.0],
        "value": [0.4, 0.6, -0.75, 0.5, 1.1],
        "missing_go_left": [False, False, False, False, False],
        "n_samples": [12, 8, 4, 3, 5],
    }
    trees = [copy.deepcopy(same), copy.deepcopy(same), other]
    if not n_samples:
        for tree in trees:
            del tree["n_samples"]
    return {
        "format": "fire-forest",
        "version": 1,
        "n_features": 4,
        "feature_names": ["Length", "Sex=F", "Sex=I", "Sex=M"],
        "base_score": 0.0,
        "tree_weight": 1.0,
        "trees": trees,
    }


def models():
    encoding = TableEncoding.infer(TABLE)
    X = encoding.encode_frame(TABLE)
    return {
        "from_weights_with_rows": RuleEnsemble.from_weights(
            TreeEnsemble.from_dict(forest_document()),
            WEIGHTS,
            1.25,
            encoding=encoding,
            X=X,
            response="log-odds of 'yes'",
        ),
        "from_weights_without_rows": RuleEnsemble.from_weights(
            TreeEnsemble.from_dict(forest_document(n_samples=False)), WEIGHTS, -0.5
        ),
        "version_1": RuleEnsemble.from_dict(VERSION_1),
    }


def explain_rows(model):
    if model.n_features == 4:
        return np.array([[0.3, 1, 0, 0], [np.nan, 0, 0, 1], [0.7, 0, 1, 0]])
    return np.array([[0.5, 1.0], [2, np.nan]])


@pytest.fixture(scope="module")
def golden():
    with open(GOLDEN) as file:
        return json.load(file)  # keys in the file's order


@pytest.mark.parametrize("name", ["from_weights_with_rows", "from_weights_without_rows", "version_1"])
def test_documents_text_and_exports_are_as_before_the_types(golden, name):
    model, expected = models()[name], golden[name]
    assert json.dumps(model.to_dict()) == json.dumps(expected["document"])  # byte for byte, key order too
    assert model.to_text() == expected["text"]
    assert model.to_text(sort="id", show_missing="always") == expected["text_by_id"]
    assert export_rules(model, "sql") == expected["sql"]
    assert export_rules(model, "python") == expected["python"]
    assert json.loads(json.dumps(model.explain(explain_rows(model)))) == expected["explain"]


@pytest.mark.parametrize("name", ["from_weights_with_rows", "from_weights_without_rows", "version_1"])
def test_a_document_reads_back_to_the_same_bytes(golden, name):
    document = golden[name]["document"]
    restored = RuleEnsemble.from_dict(document)
    assert json.dumps(restored.to_dict()) == json.dumps(document)
    assert restored.to_text() == golden[name]["text"]


def test_entries_round_trip_through_the_types():
    names = ["a", "b"]
    condition = {"feature": "b", "feature_index": 1, "operator": ">", "threshold": 0.5, "missing": True}
    assert Condition.from_dict(condition, "c", names) == Condition("b", 1, ">", 0.5, True)
    assert Condition.from_dict(condition, "c", names).to_dict() == condition
    shown = {**condition, "display_threshold": 0.5}
    assert Condition.from_dict(shown, "c", names).to_dict() == shown
    for member in (
        {"tree": 1, "leaf": 4, "weight": 0.5, "value": 2.0, "support": None},
        {"weight": 0.5},
        {"tree": None, "support": 7},
        {},
    ):
        assert json.dumps(Member.from_dict(member, "m").to_dict()) == json.dumps(member)
    rule = {
        "tree": 1,
        "leaf": 4,
        "weight": 0.5,
        "value": 2.0,
        "support": 9,
        "contribution": 1.0,
        "conditions": [condition],
        "members": [{"tree": 1, "leaf": 4, "weight": 0.5, "value": 2.0, "support": None}],
    }
    typed = Rule.from_dict(rule, "r", names)
    assert typed.id is None and typed.conditions == (Condition("b", 1, ">", 0.5, True),)
    assert json.dumps(typed.to_dict()) == json.dumps(rule)
    assert RuleEnsemble([typed], 0.0, names).rules[0].to_dict() == {**rule, "id": 0}
    # a rule built in code writes the keys a document needs, and no null weight or value
    assert Rule([], 2.0).to_dict() == {
        "tree": None,
        "leaf": None,
        "support": None,
        "contribution": 2.0,
        "conditions": [],
    }


def test_the_types_are_frozen_and_hold_tuples():
    rule = Rule([Condition("a", 0, "<=", 1.0, False)], 1.0, members=[Member(0, 0, 1.0, 1.0, None)])
    assert isinstance(rule.conditions, tuple) and isinstance(rule.members, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rule.contribution = 2.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        rule.conditions[0].threshold = 2.0
    assert not hasattr(rule, "__dict__")  # slots


def test_merged_rules_sum_their_members_in_order():
    members = [Member(0, 1, 0.1, 3.0, 5), Member(1, 1, 0.2, 3.0, None)]
    rule = Rule.merged((Condition("a", 0, ">", 0.0, False),), members)
    assert rule.contribution == 0.1 * 3.0 + 0.2 * 3.0
    assert (rule.tree, rule.leaf, rule.weight, rule.value, rule.support) == (0, 1, 0.1, 3.0, 5)
    assert rule.members == tuple(members)


def test_per_class_amounts_read_and_write_as_lists():
    rule = {
        "weight": [0.5, -0.5],
        "value": 2.0,
        "contribution": [1.0, -1.0],
        "conditions": [],
        "members": [{"weight": [0.5, -0.5], "value": 2.0}],
    }
    typed = Rule.from_dict(rule, "r", ["a"])
    assert typed.contribution == (1.0, -1.0) and typed.weight == typed.members[0].weight == (0.5, -0.5)
    assert json.dumps(typed.to_dict()) == json.dumps(rule)
    members = [Member(0, 1, (0.1, 0.2, 0.0), 3.0, None), Member(1, 1, (0.2, -0.2, 0.0), 3.0, None)]
    merged = Rule.merged((), members)
    assert merged.contribution == (0.1 * 3.0 + 0.2 * 3.0, 0.2 * 3.0 + -0.2 * 3.0, 0.0)
    assert merged.weight == (0.1, 0.2, 0.0)


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("contribution", [1.0, -1.0], "rules/0/contribution"),  # a single-output ensemble
        ("contribution", [1.0], "rules/0/contribution"),
        ("contribution", [1.0, None], "rules/0/contribution/1"),
        ("members/0/weight", [1.0, -1.0], "rules/0/members/0/weight"),  # a number's contribution
        ("weight", [1.0, -1.0], "rules/0/weight"),
    ],
)
def test_per_class_amounts_must_fit_the_rule_and_the_ensemble(path, value, field):
    document = copy.deepcopy(VERSION_1)
    *parents, last = path.split("/")
    target = document["rules"][0]
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[last] = value
    with pytest.raises(RuleSchemaError) as error:
        RuleEnsemble.from_dict(document)
    assert error.value.field == field
    with pytest.raises(RuleSchemaError) as error:
        RuleEnsemble([Rule([], 1.0), Rule([], (1.0, -1.0))], 0.0, ["a"])
    assert error.value.field == "rules/1/contribution"
