"""The loss registry's contract (solver.losses): every registered descriptor is complete and consistent, its code
is dispatched by the kernels, its metrics are the path's, and its target check refuses what it should."""

from typing import get_args

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from solver import TreeEnsemble, fit_path, leaf_matrix
from solver.losses import DEFAULT_LOSS, LOSSES, Loss, LossName, Metric, get_loss, loss_of_code
from solver.path import METRIC_NAMES, PathStep
from solver.rules import Link
from solver.spec import SELECTIONS, PathSpec, SpecError

TASKS = ("regression", "classification", "multiclass", "count", "amount", "survival")
LINKS = ("identity", "logit", "softmax", "log")


def test_the_typing_names_are_the_registrys():
    assert list(get_args(LossName)) == list(LOSSES)
    assert DEFAULT_LOSS in LOSSES
    assert list(LOSSES) == ["squared", "logistic", "multinomial", "poisson", "tweedie", "gamma", "cox"]  # as read


def test_an_unknown_loss_is_a_value_error_listing_the_names():
    with pytest.raises(ValueError, match="loss must be one of") as error:
        get_loss("hinge")
    assert all(name in str(error.value) for name in LOSSES)


def test_codes_are_unique_and_find_their_loss():
    codes = [loss.code for loss in LOSSES.values()]
    assert len(set(codes)) == len(codes)
    for loss in LOSSES.values():
        assert loss_of_code(loss.code) is loss


@pytest.mark.parametrize("name", list(LOSSES))
def test_every_descriptor_is_complete(name):
    loss = LOSSES[name]
    assert isinstance(loss, Loss) and loss.name == name and get_loss(name) is loss
    assert loss.task in TASKS and set(loss.other_tasks) <= set(TASKS) and loss.task not in loss.other_tasks
    assert loss.link in LINKS
    assert loss.rule_link is None or loss.rule_link in get_args(Link)
    assert loss.forest_task in ("Regressor", "Classifier")
    assert (loss.forest_task == "Classifier") == loss.classifier
    assert not loss.per_class or loss.classifier
    assert all(isinstance(metric, Metric) and metric.label for metric in loss.metrics)
    names = [metric.name for metric in loss.metrics]
    assert "loss" in names and len(set(names)) == len(names)
    assert set(names) - {"loss"} <= set(METRIC_NAMES)  # each is a PathStep field (train_* and val_*)
    assert loss.chart_metric in names
    assert "loss" in loss.selections and set(loss.selections) <= set(SELECTIONS)
    assert ("auc" in loss.selections) == loss.classifier
    assert loss.polish_allowed == (loss.polish_refusal is None)
    assert not loss.polish_default or loss.polish_allowed
    document = loss.to_document()
    assert document == {
        "name": name,
        "task": loss.task,
        "link": loss.link,
        "classifier": loss.classifier,
        "per_class": loss.per_class,
        "metrics": [{"name": metric.name, "label": metric.label} for metric in loss.metrics],
        "chart_metric": loss.chart_metric,
        "other_tasks": list(loss.other_tasks),
        "selections": list(loss.selections),
    }


@pytest.mark.parametrize("name", list(LOSSES))
def test_step_metrics_are_the_descriptors_metrics(name):
    loss = LOSSES[name]
    rng = np.random.default_rng(0)
    y = loss.warmup_target(rng.normal(size=60))
    loss.check_targets(y, "y", np.ones(len(y)))  # the warm-up target is one of the loss's
    n_outputs = int(y.max()) + 1 if loss.per_class else None
    score = rng.normal(size=(len(y), n_outputs) if n_outputs else len(y))
    metrics = loss.step_metrics(y, score)
    assert set(metrics) == {metric.name for metric in loss.metrics}
    assert metrics["loss"] == loss.mean_loss(y, score)
    weighted = loss.step_metrics(y, score, rng.uniform(0.5, 2.0, len(y)))
    assert set(weighted) == set(metrics)
    step = PathStep(0, 1.0, 0.0, 0, 0, None, metrics["loss"], None, 0.0, 0, True, 0.0, n_terms=0, n_linear=0)
    assert all(hasattr(step, f"train_{metric}") for metric in metrics if metric != "loss")


@pytest.mark.parametrize(
    ("name", "y", "weights", "message"),
    [
        ("logistic", [0.0, 2.0, 1.0], None, "0/1 labels"),
        ("logistic", [0.0, 0.0, 1.0], [1.0, 1.0, 0.0], "both classes"),
        ("multinomial", [0.0, 1.5, 2.0], None, "class codes"),
        ("multinomial", [0.0, -1.0, 2.0], None, "class codes"),
        ("multinomial", [0.0, 2.0, 2.0], [1.0, 1.0, 1.0], "every class code 0..2"),
        ("multinomial", [0.0, 0.0], [1.0, 1.0], "every class code 0..0"),
        ("poisson", [0.0, -1.0, 2.0], None, "non-negative"),
        ("poisson", [0.0, 0.0, 2.0], [1.0, 1.0, 0.0], "every count is 0"),
    ],
)
def test_check_targets_refuses_what_the_loss_cannot_fit(name, y, weights, message):
    weights = None if weights is None else np.asarray(weights)
    with pytest.raises(ValueError, match=message):
        LOSSES[name].check_targets(np.asarray(y), "y", weights)


def test_check_targets_takes_what_the_loss_fits():
    accepted = {
        "squared": [-1.5, 0.0, 3.2],
        "logistic": [0.0, 1.0, 1.0],
        "multinomial": [0.0, 2.0, 1.0],
        "poisson": [0.0, 0.5, 3.0],
        "tweedie": [0.0, 0.0, 2.5],
        "gamma": [0.5, 1.0, 3.0],
        "cox": [2.0, -1.0, 3.0],  # signed times: +time of an event, -time censored
    }
    assert set(accepted) == set(LOSSES)
    for name, y in accepted.items():
        LOSSES[name].check_targets(np.asarray(y), "y", np.ones(3))


@pytest.mark.parametrize("name", list(LOSSES))
def test_the_spec_reads_selection_polish_and_penalty_from_the_registry(name):
    loss = LOSSES[name]
    for selection in SELECTIONS:
        folds = 5 if selection == "1se" else None  # the one-standard-error rule reads cross-validated steps
        if selection in loss.selections:
            assert PathSpec(loss=name, selection=selection, cv_folds=folds).selection == selection
        else:
            with pytest.raises(SpecError, match="selection"):
                PathSpec(loss=name, selection=selection, cv_folds=folds)
    assert PathSpec(loss=name).polishes() == loss.polish_default
    assert PathSpec(loss=name).penalty_used() == loss.penalty_default == ("l1" if name == "cox" else "mcp")
    assert PathSpec(loss=name, penalty="mcp").penalty_used() == "mcp"
    if loss.polish_allowed:
        assert PathSpec(loss=name, polish=True).polishes()
    else:
        with pytest.raises(SpecError, match="polish") as error:
            PathSpec(loss=name, polish=True)
        assert error.value.detail == loss.polish_refusal


def test_the_words_of_each_loss():
    assert get_loss("multinomial").predicts("species", ["a", "b", "c"]) == "species: one of 3 classes"
    assert get_loss("poisson").predicts("visits") == "the rate of visits (counts)"
    assert get_loss("logistic").predicts("churn", ["no", "yes"]) == "churn: no or yes"
    assert get_loss("logistic").predicts("churn") == "churn"
    assert get_loss("squared").predicts("price") == "price"
    assert get_loss("logistic").response(["no", "yes"]) == "log-odds of 'yes'"
    assert get_loss("logistic").response() == "log-odds of '1'"
    assert get_loss("multinomial").response(["a", "b", "c"]) == "log-odds per class"
    assert get_loss("poisson").response() == "log rate"
    assert get_loss("squared").response() is None


def test_every_code_is_dispatched_by_the_kernels():
    """Every single-output loss's code reaches its own kernels (a code they do not know raises: here a path of
    each loss runs and its training loss falls); the per-class loss runs its own solver."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 3))
    signal = X[:, 0] + 0.5 * X[:, 1]
    forest = TreeEnsemble.from_sklearn(
        RandomForestRegressor(n_estimators=3, max_depth=2, random_state=0).fit(X, signal)
    )
    matrix = leaf_matrix(forest, X)
    for name, loss in LOSSES.items():
        path = fit_path(matrix, loss.warmup_target(signal), loss=name, n_lambdas=4, polish=False)
        assert path.n_classes == (3 if loss.per_class else 1)
        assert path.steps[-1].n_rules > 0 and path.steps[-1].train_loss < path.steps[0].train_loss
