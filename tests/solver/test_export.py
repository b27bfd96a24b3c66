"""solver.export: the SQL expression (run by SQLite) and the Python function predict exactly as the model does,
on real rows of tests/data/abalone.csv.gz (text column Sex) in their original columns."""

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestRegressor

from solver import ForestSpec, PathSpec, TableEncoding, TreeEnsemble, fit_rules
from solver.export import export_rules, float32_cut, to_python, to_sql
from solver.rules import RuleEnsemble
from tests.support.data import ABALONE
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
