"""PathSpec and ForestSpec: each default written once, each check naming its setting."""

import inspect

import numpy as np
import pytest

from solver import FireClassifier, FireRegressor, fit_path
from solver.spec import DEFAULT_FUSION_RATIO, ForestSpec, PathSpec, SpecError


@pytest.mark.parametrize(("estimator", "loss"), [(FireRegressor, "squared"), (FireClassifier, "logistic")])
def test_the_estimators_take_every_default_from_the_specs(estimator, loss):
    params = estimator().get_params()
    for name, default in PathSpec.defaults().items():
        if name == "random_state":  # scikit-learn's convention: None draws fresh seeds; an int is used as given
            assert params[name] is None
        elif name == "loss":  # the regressor's parameter (squared or poisson); the classifier's from its labels
            if estimator is FireRegressor:
                assert params[name] == default == loss
            else:
                assert name not in params
                fitted = estimator(n_estimators=3, n_lambdas=3).fit(np.arange(20.0)[:, None], np.arange(20) % 2)
                assert fitted.path_spec(0).loss == loss
        else:
            assert params[name] == default, name
    for name, default in ForestSpec.defaults().items():
        estimator_name = {"kind": "forest_kind", "random_state": "random_state"}.get(name, name)
        if name != "random_state":
            assert params[estimator_name] == default, name
    assert set(params) - set(PathSpec.defaults()) - {"forest", "forest_kind"} - set(ForestSpec.defaults()) == (
        {"class_weight", "stability_resamples", "n_jobs"}
        if estimator is FireClassifier
        else {"stability_resamples", "n_jobs"}
    )
    assert params["stability_resamples"] is None  # no half-sample fits unless asked: each is a whole fit
    assert params["n_jobs"] is None  # FIRE_NUM_THREADS or every core (solver.threads): not a setting of the fit


def test_fit_path_has_no_defaults_of_its_own():
    parameters = inspect.signature(fit_path).parameters
    assert parameters["spec"].default is None  # None: PathSpec()'s defaults
    settings = set(PathSpec.defaults())
    assert not settings & set(parameters), "path settings belong to PathSpec, not to fit_path's signature"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"loss": "hinge"}, "loss"),
        ({"selection": "r2"}, "selection"),
        ({"selection": "auc"}, "selection"),  # AUC ranks classifiers: loss='logistic' only
        ({"penalty": "l0"}, "penalty"),
        ({"gamma": 1.0}, "gamma"),
        ({"gamma": float("nan")}, "gamma"),
        ({"mcp_scaling": "tree"}, "mcp_scaling"),
        ({"lambda_f": 1.0, "fusion_ratio": 0.5}, "lambda_f"),
        ({"fusion_ratio": -1.0}, "fusion_ratio"),
        ({"lambdas": []}, "lambdas"),
        ({"lambdas": [1.0, 0.0]}, "lambdas"),
        ({"n_lambdas": 0}, "n_lambdas"),
        ({"n_lambdas": 2.5}, "n_lambdas"),
        ({"lambda_min_ratio": 1.0}, "lambda_min_ratio"),
        ({"max_rules": -1}, "max_rules"),
        ({"tol": 0}, "tol"),
        ({"max_iter": 0}, "max_iter"),
        ({"block_selection": "random"}, "block_selection"),
        ({"inner_iters": 0}, "inner_iters"),
        ({"min_support": -1}, "min_support"),
        ({"min_support": 1.5}, "min_support"),
        ({"min_support": True}, "min_support"),
        ({"polish": 1}, "polish"),
        ({"validation_fraction": 1.0}, "validation_fraction"),
        ({"random_state": -1}, "random_state"),
        ({"gamma_typo": 2.0}, "gamma_typo"),
    ],
)
def test_each_bad_path_setting_is_named(changes, field):
    with pytest.raises(SpecError) as raised:
        PathSpec.from_dict(changes)
    assert raised.value.field == field


def test_min_support_is_rows_or_a_fraction_of_the_training_rows():
    assert PathSpec(min_support=30).min_support_rows(1000) == 30
    assert PathSpec(min_support=0.011).min_support_rows(1000) == 11
    assert PathSpec(min_support=0).min_support_rows(1000) == 0


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"kind": "svm"}, "kind"),
        ({"n_estimators": 0}, "n_estimators"),
        ({"max_depth": True}, "max_depth"),
        ({"max_features": 1.5}, "max_features"),
        ({"max_features": "all"}, "max_features"),
        ({"learning_rate": 0.0}, "learning_rate"),
    ],
)
def test_each_bad_forest_setting_is_named(changes, field):
    with pytest.raises(SpecError) as raised:
        ForestSpec.from_dict(changes)
    assert raised.value.field == field


def test_forest_checks_that_need_the_table():
    with pytest.raises(SpecError, match="missing values") as raised:
        ForestSpec(kind="gradient_boosting").check_data(5, has_missing=True)
    assert raised.value.field == "kind"
    with pytest.raises(SpecError) as raised:
        ForestSpec(max_features=6).check_data(5, has_missing=False)
    assert raised.value.field == "max_features"


def test_fusion_strength():
    assert PathSpec().fusion_strength(2.0) == DEFAULT_FUSION_RATIO * 2.0
    assert PathSpec(fusion_ratio=0).fusion_strength(2.0) == 0.0
    assert PathSpec(fusion_ratio=1.5).fusion_strength(2.0) == 3.0
    assert PathSpec(lambda_f=0.7).fusion_strength(2.0) == 0.7


def test_lambdas_are_kept_in_decreasing_order_and_round_trip():
    spec = PathSpec(lambdas=[0.1, 1.0, 0.5])
    assert spec.lambdas == (1.0, 0.5, 0.1)
    assert PathSpec.from_dict(spec.to_dict()) == spec
    assert spec.replace(gamma=3.0).gamma == 3.0 and spec.replace(gamma=3.0).lambdas == spec.lambdas


def test_every_bad_setting_is_named_at_once():
    with pytest.raises(SpecError) as raised:
        PathSpec.from_dict({"n_lambdas": 0, "gamma": 0.5, "tol": 2.0, "max_rules": -1})
    assert [field for field, _ in raised.value.faults] == ["gamma", "n_lambdas", "max_rules", "tol"]
    assert (raised.value.field, raised.value.detail) == raised.value.faults[0]
    assert all(f"{field}: {detail}" in str(raised.value) for field, detail in raised.value.faults)
    with pytest.raises(SpecError) as raised:
        ForestSpec(n_estimators=0, max_depth=0, max_features="abc")
    assert [field for field, _ in raised.value.faults] == ["n_estimators", "max_depth", "max_features"]
    with pytest.raises(SpecError) as raised:
        ForestSpec(kind="gradient_boosting", max_features=6).check_data(5, has_missing=True)
    assert [field for field, _ in raised.value.faults] == ["kind", "max_features"]


def test_a_check_that_reads_a_bad_setting_is_not_made():
    # an unknown loss: neither the selection it allows nor its polish refusal is asked of it
    with pytest.raises(SpecError) as raised:
        PathSpec(loss="hinge", selection="auc", polish=True)
    assert raised.value.faults == (("loss", raised.value.detail),)


def test_unknown_settings_are_each_named():
    with pytest.raises(SpecError) as raised:
        ForestSpec.from_dict({"depth": 3, "trees": 100})
    assert [field for field, _ in raised.value.faults] == ["depth", "trees"]


def test_estimator_names_each_bad_setting_as_its_parameter():
    with pytest.raises(SpecError) as raised:
        FireRegressor(forest_kind="svm", max_depth=0).forest_spec(0)
    assert [field for field, _ in raised.value.faults] == ["forest_kind", "max_depth"]
