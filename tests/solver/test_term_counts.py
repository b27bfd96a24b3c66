"""Issue 37, item 5: a path step counts its rules (``n_rules``), its linear terms (``n_linear``) and both
(``n_terms``, what the rule budget ``max_rules`` bounds), each checked against the step's weights and against an
independent count of the terms of its rules (a rule has conditions, each selected rule column one member of the rule
that says them; a linear term has none); records written before the split read their count as terms."""

import numpy as np
import pytest
from sklearn.datasets import load_diabetes

from solver import FireRegressor
from solver.fitting import fit_rules
from solver.path import PathStep
from solver.spec import ForestSpec, PathSpec

FOREST = ForestSpec(n_estimators=20, max_depth=3, max_features=1.0, random_state=0)


@pytest.fixture(scope="module")
def diabetes():
    return load_diabetes(return_X_y=True)


def test_every_step_counts_its_rules_and_linear_terms_apart(diabetes):
    X, y = diabetes
    fit = fit_rules(X, y, PathSpec(n_lambdas=25, patience=None, max_rules=40, random_state=0), forest=FOREST)
    n_rule_columns = fit.candidates.n_rules
    for k, step in enumerate(fit.path.steps):
        selected = np.flatnonzero(fit.path.coef(k))
        assert step.n_terms == len(selected) == step.n_rules + step.n_linear
        assert step.n_linear == np.count_nonzero(selected >= n_rule_columns)
        rules = fit.rules_at(k)
        assert all(rule.conditions for rule in rules.rules)
        assert step.n_rules == sum(len(rule.members) for rule in rules.rules)
        assert step.n_linear == len(rules.linear) == rules.n_linear
    assert any(step.n_rules and step.n_linear for step in fit.path.steps)  # both kinds, on this table


def test_the_rule_budget_counts_linear_terms_as_terms(diabetes):
    """On this table the path selects linear terms first: a budget of 2 stops it at its first step of 3 terms,
    rules or not, and the step chosen holds at most 2 terms."""
    X, y = diabetes
    fit = fit_rules(X, y, PathSpec(n_lambdas=25, max_rules=2, random_state=0), forest=FOREST)
    last = fit.path.steps[-1]
    assert fit.path.stop_reason == "max_rules" and last.n_terms > 2 >= last.n_rules
    assert all(step.n_terms <= 2 for step in fit.path.steps[:-1])
    assert fit.path.steps[fit.selected].n_terms <= 2


def test_a_step_record_from_before_the_split_reads_its_count_as_terms(diabetes):
    X, y = diabetes
    step = fit_rules(X, y, PathSpec(n_lambdas=12, random_state=0), forest=FOREST).path.steps[-1]
    old = {**{k: v for k, v in step.to_dict().items() if k not in ("n_terms", "n_linear")}, "n_rules": step.n_terms}
    unknown = PathStep.from_dict(old)
    assert (unknown.n_terms, unknown.n_rules, unknown.n_linear) == (step.n_terms, None, None)
    assert PathStep.from_dict(old, n_linear=step.n_linear) == step
    assert PathStep.from_dict(step.to_dict()) == step


@pytest.mark.parametrize("linear_terms", [True, False])
def test_a_model_document_from_before_the_split_reads_back(diabetes, linear_terms):
    """An estimator's document whose path records counted every term as n_rules: the selected step's split comes
    from its rules, every step's where the path had no linear candidates; elsewhere it is unknown."""
    X, y = diabetes
    model = FireRegressor(n_estimators=8, max_depth=3, n_lambdas=10, linear_terms=linear_terms, random_state=0)
    model.fit(X, y)
    document = model.to_dict()
    document["path"] = [
        {**{k: v for k, v in record.items() if k not in ("n_terms", "n_linear")}, "n_rules": record["n_terms"]}
        for record in document["path"]
    ]
    read = FireRegressor.from_dict(document)
    assert read.selected_ == model.selected_
    for k, (ours, theirs) in enumerate(zip(read.path_, model.path_, strict=True)):
        known = k == model.selected_step_ or not linear_terms
        assert ours == (theirs if known else {**theirs, "n_rules": None, "n_linear": None})
