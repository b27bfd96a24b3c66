"""Rules as their text says them, against the model on the training rows: every threshold the text prints of a
fitted model sends every training row the way the tree does, and a column that holds two values reads as the value a
rule keeps ("smoker is 1"), also in documents, while a document written before reads as it did."""

import re

import numpy as np
import pytest
from sklearn.datasets import load_diabetes

from solver import FireRegressor, TableEncoding
from solver.rule_text import kept_values, separates
from solver.rules import RuleEnsemble
from tests.support.synthetic import smokers_table

# "name <= 1.5", "name > -0.01", "0.2 < name <= 0.5" (names without spaces)
BOUND = re.compile(r"(?P<name>[A-Za-z_][\w]*) (?P<op><=|>) (?P<number>-?[\d.]+(?:e-?\d+)?)")
BETWEEN = re.compile(r"(?P<low>-?[\d.]+(?:e-?\d+)?) < (?P<name>[A-Za-z_][\w]*) <= (?P<high>-?[\d.]+(?:e-?\d+)?)")


def rule_lines(ensemble: RuleEnsemble) -> dict[int, str]:
    """Each rule's conditions as the text prints them, by rule id."""
    lines = {}
    for line in ensemble.to_text(sort="id").splitlines()[2:]:
        if line.startswith("r"):
            rule_id, conditions = re.match(r"r(\d+)\s.*? if (.*?)(?:   \[|$)", line).groups()
            lines[int(rule_id)] = conditions
    return lines


def printed_bounds(conditions: str) -> list[tuple[str, str, float]]:
    """(column, operator, number) of every threshold a rule's text prints."""
    found = []
    for part in conditions.split(" and "):
        between = BETWEEN.fullmatch(part)
        if between:
            found += [(between["name"], ">", float(between["low"])), (between["name"], "<=", float(between["high"]))]
        elif bound := BOUND.fullmatch(part):
            found.append((bound["name"], bound["op"], float(bound["number"])))
    return found


def diabetes(scaled: bool):
    frame = load_diabetes(as_frame=True, scaled=scaled).frame
    return frame.drop(columns="target"), frame["target"].to_numpy()


@pytest.mark.parametrize("scaled", [True, False])
def test_every_printed_threshold_splits_the_training_rows_as_the_tree(scaled):
    X, y = diabetes(scaled)
    train, val = slice(0, 350), slice(350, None)
    model = FireRegressor(
        n_estimators=60, max_depth=3, max_rules=30, linear_terms=False, selection="loss", patience=None, random_state=0
    ).fit(X.iloc[train], y[train], X_val=X.iloc[val], y_val=y[val])
    ensemble, rows = model.rule_ensemble_, X.iloc[train]
    lines = rule_lines(ensemble)
    checked = 0
    for rule in ensemble.rules:
        printed = printed_bounds(lines[rule.id])
        for condition in rule.conditions:
            column, _ = ensemble.encoding.feature_column(condition.feature_index)
            values = rows[column.name].to_numpy(dtype=np.float64)
            by_tree = values.astype(np.float32).astype(np.float64) <= condition.threshold
            if column.binary is not None and separates(condition, column.binary):
                kept = kept_values([condition], column.binary)
                text = f"{column.name} is {kept[0]:g}"
                assert text in lines[rule.id], (text, lines[rule.id])
                assert np.array_equal(values == kept[0], by_tree == (condition.operator == "<="))
                continue
            (number,) = [n for name, op, n in printed if name == column.name and op == condition.operator]
            assert np.array_equal(values <= number, by_tree), (rule.id, column.name, number, condition.threshold)
            checked += 1
    assert checked >= 8  # the thresholds of every rule were read off the text


def fitted_smokers():
    frame = smokers_table()
    X, y = frame.drop(columns="y"), frame["y"].to_numpy()
    return FireRegressor(n_estimators=40, max_depth=2, max_rules=12, linear_terms=False, random_state=0).fit(X, y), X


def test_two_valued_columns_read_as_the_value_a_rule_keeps():
    model, X = fitted_smokers()
    ensemble = model.rule_ensemble_
    columns = {column.name: column for column in ensemble.encoding.columns}
    assert columns["smoker"].binary == (0.0, 1.0) and columns["sex"].binary == (1.0, 2.0)
    assert columns["insured"].binary == (0.0, 1.0) and columns["age"].binary is None
    text = ensemble.to_text()
    assert re.search(r"smoker is [01]\b", text) and re.search(r"sex is [12]\b", text), text
    assert not re.search(r"(smoker|sex) (<=|>|<)|< (smoker|sex)", text), text
    # each "is" says which training rows the rule's condition keeps
    for line, rule in zip(rule_lines(ensemble).values(), sorted(ensemble.rules, key=lambda r: r.id)):
        for name in ("smoker", "sex"):
            conditions = [
                c for c in rule.conditions if ensemble.encoding.feature_column(c.feature_index)[0].name == name
            ]
            if not conditions:
                continue
            (value,) = kept_values(conditions, columns[name].binary)
            assert f"{name} is {value:g}" in line
            kept = np.all([(X[name].to_numpy() <= c.threshold) == (c.operator == "<=") for c in conditions], axis=0)
            assert np.array_equal(kept, X[name].to_numpy() == value)


def test_the_two_values_live_in_the_document_and_a_document_without_them_reads_as_before():
    model, X = fitted_smokers()
    document = model.rule_ensemble_.to_dict()
    assert {"name": "smoker", "kind": "numeric", "missing": False, "values": [0.0, 1.0]} in document["columns"]
    again = RuleEnsemble.from_dict(document)
    assert again.to_text() == model.rule_ensemble_.to_text()
    older = {**document, "columns": [{k: v for k, v in c.items() if k != "values"} for c in document["columns"]]}
    old = RuleEnsemble.from_dict(older)
    assert "smoker is" not in old.to_text() and re.search(r"smoker (<=|>) ", old.to_text())
    encoded = model.rule_ensemble_.encoding.encode_frame(X)
    np.testing.assert_array_equal(old.predict(encoded), again.predict(encoded))


def test_a_matrix_without_a_table_knows_its_two_valued_columns():
    encoding = TableEncoding.of_matrix(["a", "b", "c"], np.array([[0, 1.5, np.nan], [1, 2.5, 3], [1, 3.5, 4.0]]))
    assert [(c.binary, c.missing) for c in encoding.columns] == [((0.0, 1.0), False), (None, False), ((3.0, 4.0), True)]
