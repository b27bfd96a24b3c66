"""solver.export: the SQL expression (run by SQLite) and the Python function predict exactly as the model does,
on real rows of tests/data/abalone.csv.gz (text column Sex) in their original columns; log-link models (Tweedie and
Gamma on tests/data's RAND HIE sample, Cox on scikit-survival's WHAS500 with its text columns) give ``exp(score)``,
the mean or the hazard ratio, and a Cox model's Python module its survival curves."""

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestRegressor
from sksurv.datasets import load_whas500

from solver import FireRegressor, FireSurvival, ForestSpec, PathSpec, TableEncoding, TreeEnsemble, fit_rules
from solver.export import export_rules, float32_cut, log_link_quantity, to_python, to_sql
from solver.rules import RuleEnsemble
from tests.support.data import ABALONE, DATA
from tests.support.exports import python_predictions, sql_predictions


def abalone(missing_share=0.0):
    frame = pd.read_csv(ABALONE)
    features = frame.drop(columns="rings").astype({"Sex": object})
    if missing_share:
        rng = np.random.default_rng(0)
        for name in ("Sex", "Length", "Shell_weight"):
            features.loc[rng.random(len(features)) < missing_share, name] = None
    return features, frame["rings"].to_numpy(np.float64)


def whole_forest(features, y, encoding):
    X = encoding.encode_frame(features)
    forest = TreeEnsemble.from_sklearn(RandomForestRegressor(n_estimators=15, max_depth=4, random_state=0).fit(X, y))
    return RuleEnsemble.from_weights(
        forest, np.full(forest.n_leaves, forest.tree_weight), forest.base_score, encoding=encoding, X=X
    ), X


@pytest.mark.parametrize("missing_share", [0.0, 0.1])
def test_exports_predict_exactly_like_the_model(missing_share):
    features, y = abalone(missing_share)
    encoding = TableEncoding.infer(features)
    rules, X = whole_forest(features, y, encoding)
    expected = rules.predict(X)
    np.testing.assert_array_equal(sql_predictions(to_sql(rules), features), expected)
    np.testing.assert_array_equal(python_predictions(to_python(rules), features), expected)


def test_exports_of_a_fitted_rule_set_read_the_original_columns():
    features, y = abalone()
    encoding = TableEncoding.infer(features)
    X = encoding.encode_frame(features)
    fit = fit_rules(X, y, PathSpec(max_rules=12), forest=ForestSpec(n_estimators=40), encoding=encoding)
    sql, python = export_rules(fit.rules, "sql"), export_rules(fit.rules, "python")
    for rule in fit.rules.rules:
        assert f"-- r{rule.id}: " in sql and f"    # r{rule.id}: " in python
    assert "Sex=" not in sql and "Sex=" not in python and "import" not in python
    expected = fit.rules.predict(X)
    np.testing.assert_array_equal(sql_predictions(sql, features), expected)
    np.testing.assert_array_equal(python_predictions(python, features), expected)
    with pytest.raises(ValueError, match="format"):
        export_rules(fit.rules, "excel")


def test_float32_cut_separates_doubles_as_float32_rounding_does():
    rng = np.random.default_rng(0)
    for threshold in [
        0.5,
        2.5,
        1e-35,
        -3.25,
        0.06650000065565109,
        *rng.normal(size=200) * 10.0 ** rng.integers(-5, 5, 200),
    ]:
        midpoint, inclusive = float32_cut(threshold)
        cut = (
            np.float32(threshold)
            if float(np.float32(threshold)) <= threshold
            else np.nextafter(np.float32(threshold), np.float32(-np.inf))
        )
        near = [
            midpoint,
            math.nextafter(midpoint, -math.inf),
            math.nextafter(midpoint, math.inf),
            float(cut),
            float(np.nextafter(cut, np.float32(np.inf))),
        ]
        for x in near:
            model = float(np.float32(x)) <= threshold
            assert model == (x <= midpoint if inclusive else x < midpoint), (threshold, x)


def test_names_and_levels_with_line_breaks_stay_data_in_the_exports_and_the_text():
    features, y = abalone()
    escape = "\n    raise SystemExit('escaped the comment')  # \n;DROP TABLE abalone; -- '\"\u2028"
    features["Sex"] = features["Sex"].replace({"M": "M" + escape})
    features = features.rename(columns={"Length": "Length" + escape})
    encoding = TableEncoding.infer(features)
    rules, X = whole_forest(features, y, encoding)
    expected = rules.predict(X)
    np.testing.assert_array_equal(python_predictions(to_python(rules), features), expected)
    np.testing.assert_array_equal(sql_predictions(to_sql(rules), features), expected)
    text = rules.to_text()
    assert len(text.splitlines()) == rules.n_rules + 2 and "Length\\n    raise SystemExit" in text


def python_module(source: str) -> dict:
    namespace: dict = {}
    exec(compile(source, "<export>", "exec"), namespace)
    return namespace


def assert_exp_of_the_same_score(exported, expected):
    """The export's math.exp against numpy's exp of the same score: numpy's own exp with AVX-512 may differ in
    the last bit (without it numpy calls libm's: equal)."""
    np.testing.assert_array_max_ulp(np.asarray(exported, dtype=np.float64), expected, maxulp=1)


@pytest.mark.parametrize("loss", ["tweedie", "gamma"])
def test_amount_models_export_their_mean(loss):
    frame = pd.read_csv(DATA / "rand_hie_amounts.csv.gz").iloc[:800]
    if loss == "gamma":
        frame = frame[frame["meddol"] > 0]  # positive amounts
    features, y = frame.drop(columns="meddol"), frame["meddol"].to_numpy(np.float64)
    model = FireRegressor(
        loss=loss, n_estimators=30, n_lambdas=10, max_rules=10, validation_fraction=0.0, random_state=0
    ).fit(features, y)
    rules = model.rule_ensemble_
    assert rules.link == "log" and log_link_quantity(rules) == "mean" and rules.n_rules > 0
    source = to_python(rules)
    assert "The mean for ``row``" in source and "def survival" not in source
    expected = rules.predict_mean(rules.encoding.encode_frame(features))
    np.testing.assert_allclose(expected, model.predict(features), rtol=0)
    assert_exp_of_the_same_score(sql_predictions(to_sql(rules), features), expected)
    assert_exp_of_the_same_score(python_predictions(source, features), expected)


@pytest.fixture(scope="module")
def whas500():
    """scikit-survival's WHAS500 (500 rows; its 0/1 columns are text), and their time and event."""
    features, y = load_whas500()
    return features, y


@pytest.mark.parametrize("linear_terms", [False, True])
def test_a_cox_model_exports_its_hazard_ratio_and_python_its_survival_curves(whas500, linear_terms):
    features, y = whas500
    model = FireSurvival(n_estimators=30, n_lambdas=10, max_rules=12, linear_terms=linear_terms, random_state=0).fit(
        features, y
    )
    rules = model.rule_ensemble_
    assert rules.n_rules > 0 if not linear_terms else rules.n_linear > 0
    assert rules.link == "log" and log_link_quantity(rules) == "hazard ratio"
    X = rules.encoding.encode_frame(features)
    ratio = rules.predict_mean(X)
    np.testing.assert_array_equal(ratio, np.exp(model.predict(features)))  # exp of the log hazard ratio

    sql, source = to_sql(rules), to_python(rules)
    assert "The hazard ratio relative to the baseline hazard for ``row``" in source
    assert "import" not in source.replace("import bisect\nimport math\n", "")  # nothing but the standard library
    assert_exp_of_the_same_score(sql_predictions(sql, features), ratio)
    assert_exp_of_the_same_score(python_predictions(source, features), ratio)

    event_times, _ = rules.baseline_hazard  # the last: the last follow-up time, where the curves end
    times = [0.5, event_times[0], 100.0, float(event_times[len(event_times) // 2]), event_times[-1]]
    module = python_module(source)
    rows = features.to_dict("records")
    curves = np.array([module["survival"](row, times) for row in rows])
    # exp(-ratio * H0(t)) with the ratio a few bits apart at most: S to a few bits times max(1, |log S|), the
    # exponent's size (S ~ 1e-34 differed by 1.4e-14 relative with numpy 2.4)
    expected = rules.predict_survival(X, times)
    bound = 32 * np.finfo(float).eps * expected * np.maximum(1.0, -np.log(expected))
    assert np.all(np.abs(curves - expected) <= bound)
    assert np.all(curves[:, 0] == 1.0)  # before the first event time
    assert module["survival"](rows[0], []) == []
    assert module["survival"](rows[0], np.array([100])) == module["survival"](rows[0], [100.0])
    for outside in (event_times[-1] + 1, -1.0):  # past the last follow-up, or before 0: refused as by the library
        with pytest.raises(ValueError, match="last follow-up time") as library:
            rules.predict_survival(X, [outside])
        with pytest.raises(ValueError, match="last follow-up time") as exported:
            module["survival"](rows[0], [outside])
        assert str(exported.value) == str(library.value)


def test_only_a_cox_model_has_a_survival_function_whose_name_is_kept(whas500):
    features, y = whas500
    rules = FireSurvival(n_estimators=10, n_lambdas=5, max_rules=4, random_state=0).fit(features, y).rule_ensemble_
    renamed = python_module(to_python(rules, name="hazard_ratio"))
    row = features.iloc[0].to_dict()
    assert renamed["survival"](row, [1000.0]) == python_module(to_python(rules))["survival"](row, [1000.0])
    with pytest.raises(ValueError, match="survival function"):
        to_python(rules, name="survival")
    without = RuleEnsemble.from_dict({k: v for k, v in rules.to_dict().items() if k != "baseline_hazard"})
    assert "def survival" not in to_python(without) and "import bisect" not in to_python(without)
