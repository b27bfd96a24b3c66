"""The metrics people read that every path step records (R², RMSE, MAE, Brier score) against scikit-learn's, on
the training rows (weighted and not) and the validation rows of small real paths of each loss."""

import gzip
import io

import numpy as np
import pandas as pd
import pytest
from pydantic import TypeAdapter
from scipy.special import expit, softmax
from sklearn.metrics import (
    brier_score_loss,
    mean_absolute_error,
    mean_poisson_deviance,
    mean_squared_error,
    r2_score,
)

from solver import ForestSpec, PathSpec, TableEncoding, binary_labels, fit_rules
from solver.fitting import class_labels
from solver.path import METRICS, PathStep, class_scores
from tests.support.data import DATA, KIN8NM
from tests.support.synthetic import grades_table, visits_table

FOREST = ForestSpec(n_estimators=8, max_depth=3)
N_ROWS = 500


def _table(loss):
    """(X encoded, y) of a small table the tests already use, for ``loss``."""
    if loss == "squared":
        frame, target = pd.read_csv(io.BytesIO(gzip.decompress(KIN8NM.read_bytes()))), "y"
    elif loss == "logistic":
        frame, target = pd.read_csv(DATA / "credit_data.csv.gz"), "Status"
    elif loss == "multinomial":
        frame, target = grades_table(N_ROWS), "grade"
    else:
        frame, target = visits_table(N_ROWS), "visits"
    frame = frame.head(N_ROWS)
    features = frame.drop(columns=target)
    X = TableEncoding.infer(features).encode_frame(features)
    labels = {"logistic": binary_labels, "multinomial": class_labels}.get(loss)
    y = labels(frame[target].to_numpy())[1] if labels else frame[target].to_numpy(dtype=np.float64)
    return X, y


def _expected(loss, y, score, weight):
    """The metrics of PathStep's definition computed by scikit-learn from the rows' scores."""
    if loss == "squared":
        return {
            "r2": r2_score(y, score, sample_weight=weight),
            "rmse": np.sqrt(mean_squared_error(y, score, sample_weight=weight)),
            "mae": mean_absolute_error(y, score, sample_weight=weight),
        }
    if loss == "logistic":
        return {"brier": brier_score_loss(y, expit(score), sample_weight=weight)}
    if loss == "multinomial":
        labels = np.arange(score.shape[1])
        return {"brier": brier_score_loss(y, softmax(score, axis=1), labels=labels, sample_weight=weight)}
    rate = np.exp(score)
    return {
        "mae": mean_absolute_error(y, rate, sample_weight=weight),
        "loss": mean_poisson_deviance(y, rate, sample_weight=weight),
    }


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("loss", ["squared", "logistic", "multinomial", "poisson"])
def test_recorded_metrics_equal_scikit_learns(loss, weighted):
    X, y = _table(loss)
    weight = np.random.default_rng(0).uniform(0.2, 3.0, len(y)) if weighted else None
    spec = PathSpec(loss=loss, n_lambdas=6, max_rules=12, tol=1e-3)  # loose: the metrics need no optimum
    fit = fit_rules(X, y, spec, forest=FOREST, sample_weight=weight)
    leaves = fit.forest.apply(X)
    rows = {"train": fit.train_rows, "val": fit.val_rows}
    matrices = {name: fit.candidates.matrix(leaves[part], X[part]) for name, part in rows.items()}
    for k, step in enumerate(fit.path.steps):
        for name, part in rows.items():
            w, b = fit.path.coef(k), fit.path.intercepts[k]
            score = class_scores(matrices[name], w, b) if w.ndim == 2 else b + matrices[name].matvec(w)
            row_weight = weight[part] if weighted else None  # validation rows weigh as their sample_weight
            for metric, value in _expected(loss, y[part], score, row_weight).items():
                assert getattr(step, f"{name}_{metric}") == pytest.approx(value, rel=1e-6, abs=1e-12), (k, metric)
    expected = {"squared": {"r2", "rmse", "mae"}, "poisson": {"mae"}}.get(loss, {"auc", "accuracy", "brier"})
    recorded = {metric.split("_", 1)[1] for metric in METRICS if getattr(fit.path.steps[-1], metric) is not None}
    assert recorded == expected  # the other losses' metrics are None


def test_a_regression_steps_rmse_is_the_root_of_its_loss():
    """The squared loss's recorded loss is the mean squared error, not half of it."""
    X, y = _table("squared")
    fit = fit_rules(X, y, PathSpec(n_lambdas=4), forest=FOREST)
    for step in fit.path.steps:
        assert step.val_rmse**2 == pytest.approx(step.val_loss, rel=1e-12)
        assert step.train_rmse**2 == pytest.approx(step.train_loss, rel=1e-12)
    assert fit.path.steps[0].train_r2 == pytest.approx(0.0, abs=1e-9)  # the intercept alone: the mean


def test_records_written_before_the_metrics_read_back_without_them():
    X, y = _table("squared")
    step = fit_rules(X, y, PathSpec(n_lambdas=2), forest=FOREST).path.steps[-1]
    old = {key: value for key, value in step.to_dict().items() if key not in METRICS}
    read = PathStep.from_dict(old)
    assert read.val_r2 is None and read.val_loss == step.val_loss
    assert PathStep.from_dict(step.to_dict()) == step
    # the service reads stored results through pydantic, which takes the metrics' defaults as well
    assert TypeAdapter(PathStep).validate_python(old) == read
