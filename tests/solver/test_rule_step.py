"""Issue 39, item 5: a rule model has rules. Where the selected step holds only linear terms (or nothing), the fit
names the best step with a rule and what choosing it costs (solver.path.best_rule_step), checked here against an
independent scan of the recorded steps: on scikit-learn's diabetes table, where FIRE's defaults select linear terms
alone (the issue's finding), with a holdout and with five folds and the one standard error rule; and on steps made
up to reach each branch (the intercept alone, no step with a rule, no validation rows, a selected step with rules).
"""

import pytest
from sklearn.datasets import load_diabetes

from solver import FireRegressor, PathStep, best_rule_step, best_step


@pytest.fixture(scope="module")
def diabetes():
    return load_diabetes(return_X_y=True)


def with_rules_within(path: list[dict], budget: int | None) -> list[dict]:
    return [s for s in path if s["n_rules"] >= 1 and (budget is None or s["n_terms"] <= budget)]


def lowest_loss(steps: list[dict]) -> dict:
    return min(steps, key=lambda s: (s["val_loss"], s["index"]))


def check_costs(model: FireRegressor, step: int) -> None:
    """The cost figures are those of the two steps' recorded validation losses."""
    chosen, named = model.path_[model.selected_step_], model.path_[step]
    cost = model.rule_step_
    assert cost.loss_rows == "validation"
    assert cost.loss_difference == named["val_loss"] - chosen["val_loss"]
    assert cost.loss_ratio == named["val_loss"] / chosen["val_loss"]
    assert cost.loss_se == named["val_loss_se"]


def test_the_default_regressor_on_diabetes_selects_linear_terms_only_and_names_the_best_step_with_a_rule(diabetes):
    X, y = diabetes
    model = FireRegressor(random_state=0, max_rules=14).fit(X, y)
    chosen = model.selected_
    assert chosen["n_rules"] == 0 and chosen["n_linear"] >= 1  # the case: linear terms alone

    expected = lowest_loss(with_rules_within(model.path_, 14))  # the holdout's selection: the lowest loss
    cost = model.rule_step_
    assert (cost.selected, cost.step) == (model.selected_step_, expected["index"])
    check_costs(model, cost.step)
    assert cost.loss_difference > 0 and cost.loss_se is None  # the lowest loss of all was the selected step's
    assert cost.reason == (
        f"The best step within 14 terms, step {model.selected_step_}, uses only linear terms: step {cost.step}, the "
        f"best with a rule ({expected['n_terms']} terms: {expected['n_rules']} rule"
        f"{'' if expected['n_rules'] == 1 else 's'}, {expected['n_linear']} linear terms), costs "
        f"+{cost.loss_difference:.4g} validation loss (+{100 * (cost.loss_ratio - 1):.1f}%)."
    )
    assert FireRegressor.from_dict(model.to_dict()).rule_step_ == cost  # a model read back says the same


def test_five_folds_and_the_one_standard_error_rule_name_the_sparsest_rule_step_within_one_se(diabetes):
    X, y = diabetes
    model = FireRegressor(random_state=0, max_rules=14, cv_folds=5, selection="1se").fit(X, y)
    assert model.selected_["n_rules"] == 0  # the case: two linear terms, no rule

    candidates = with_rules_within(model.path_, 14)
    lowest = lowest_loss(candidates)
    threshold = lowest["val_loss"] + lowest["val_loss_se"]
    expected = next(s for s in candidates if s["val_loss"] <= threshold)  # steps run sparsest first
    cost = model.rule_step_
    assert cost.step == expected["index"]
    check_costs(model, cost.step)
    assert cost.loss_se is not None and f"standard error of its validation loss {cost.loss_se:.4g}." in cost.reason


def step(index, n_rules, n_linear, val_loss, train_loss=1.0, val_loss_se=None) -> PathStep:
    return PathStep(
        index, 1.0, 0.0, n_rules, 1, None, train_loss, val_loss, 0.0, 1, True, 0.0,
        n_terms=n_rules + n_linear, n_linear=n_linear, val_loss_se=val_loss_se,
    )  # fmt: skip


def test_a_selected_step_with_a_rule_is_its_own_best_rule_step():
    steps = [step(0, 0, 0, 2.0), step(1, 0, 1, 1.5), step(2, 1, 1, 1.0)]
    assert best_step(steps) == 2
    cost = best_rule_step(steps, 2)
    assert (cost.step, cost.loss_difference, cost.loss_ratio, cost.reason) == (2, 0.0, 1.0, None)


def test_the_intercept_alone_and_the_training_loss_where_there_are_no_validation_rows():
    steps = [step(0, 0, 0, None, train_loss=1.0), step(1, 2, 0, None, train_loss=1.25)]
    cost = best_rule_step(steps, 0)
    assert (cost.step, cost.loss_rows, cost.loss_difference, cost.loss_ratio) == (1, "training", 0.25, 1.25)
    assert cost.reason == (
        "The best step, step 0, has no term (the intercept alone): step 1, the best with a rule (2 rules), costs "
        "+0.25 training loss (+25.0%)."
    )


def test_no_step_with_a_rule_within_the_budget_is_said_so():
    steps = [step(0, 0, 1, 2.0), step(1, 0, 2, 1.0), step(2, 3, 2, 0.5)]  # the rule step is past the budget
    cost = best_rule_step(steps, 1, max_rules=2)
    assert (cost.step, cost.loss_difference, cost.loss_ratio, cost.loss_se) == (None, None, None, None)
    assert cost.reason == (
        "The best step within 2 terms, step 1, uses only linear terms, and no step of the path within 2 terms has a "
        "rule with a condition."
    )


def test_a_rule_step_of_lower_loss_is_said_to_have_less_loss():
    # the one standard error rule chose the sparse linear step; the rules' own one-SE choice has a lower loss
    steps = [
        step(0, 0, 2, 1.1, val_loss_se=0.2),
        step(1, 1, 2, 1.0, val_loss_se=0.2),
        step(2, 3, 2, 0.95, val_loss_se=0.2),
    ]
    assert best_step(steps, selection="1se") == 0
    cost = best_rule_step(steps, 0, selection="1se")
    assert cost.step == 1 and cost.loss_difference == pytest.approx(-0.1)
    assert cost.reason.endswith("has 0.1 less validation loss (-9.1%), standard error of its validation loss 0.2.")
