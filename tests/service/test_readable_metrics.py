"""The metrics people read, through the service: a regression job's steps, progress, summary and promoted model
carry R², RMSE and MAE, equal to scikit-learn's on the validation rows scored by the promoted model."""

import numpy as np
import pytest
from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score

from solver.fitting import holdout_split
from tests.support.data import abalone_frame
from tests.support.jobs import submit

pytestmark = pytest.mark.integration

READABLE = ("val_r2", "val_rmse", "val_mae")
CLASSIFIER_ONLY = ("train_auc", "val_auc", "train_accuracy", "val_accuracy", "train_brier", "val_brier")


def test_a_regression_job_carries_r2_rmse_and_mae(stack, abalone):
    dataset, forest_id = abalone
    client = stack.client
    holdout = {"fraction": 0.2, "seed": 0}  # the split the fixture's forest was trained on
    body = {"dataset_id": dataset["id"], "forest_id": forest_id, "n_lambdas": 12, "max_rules": 12}
    job = stack.wait_for(submit(stack, {**body, "validation": holdout})["id"], ("succeeded",))
    result = client.get(f"/v1/jobs/{job['id']}/result").json()
    steps, selected = result["steps"], result["steps"][result["selected"]]

    for step in steps:  # the squared loss's val_loss is the mean squared error, not half of it
        assert step["val_rmse"] ** 2 == pytest.approx(step["val_loss"], rel=1e-12)
        assert step["train_rmse"] ** 2 == pytest.approx(step["train_loss"], rel=1e-12)
        assert step["val_r2"] <= 1 and step["val_mae"] > 0
        assert all(step[name] is None for name in CLASSIFIER_ONLY)
    assert steps[-1]["val_r2"] > steps[0]["val_r2"]

    summary, progress = job["summary"], job["progress"]
    assert {name: summary[name] for name in READABLE} == {name: selected[name] for name in READABLE}
    assert summary["val_brier"] is None and summary["val_auc"] is None
    assert {name: progress["best"][name] for name in READABLE} == {name: selected[name] for name in READABLE}
    assert all(progress[name] == steps[-1][name] for name in ("train_r2", "val_r2", "train_rmse", "val_rmse"))
    assert not set(CLASSIFIER_ONLY) & set(progress)  # a loss's missing metrics are left out of the progress

    model = client.post("/v1/models", json={"job_id": job["id"], "name": "abalone-readable"}).json()
    metrics = model["metrics"]
    assert {name: metrics[name] for name in READABLE} == {name: selected[name] for name in READABLE}
    assert metrics["train_r2"] == selected["train_r2"] and metrics["val_brier"] is None

    frame = abalone_frame()
    validation = frame.iloc[holdout_split(len(frame), holdout["fraction"], holdout["seed"])[1]]
    features = validation.drop(columns="rings")
    split = {"columns": list(features.columns), "data": features.to_numpy().tolist()}
    scored = client.post(f"/v1/models/{model['id']}/predict", json={"dataframe_split": split})
    assert scored.status_code == 200, scored.text
    y, predictions = validation["rings"].to_numpy(dtype=float), np.asarray(scored.json()["predictions"])
    assert len(y) == result["n_val"]
    assert metrics["val_r2"] == pytest.approx(r2_score(y, predictions), rel=1e-9)
    assert metrics["val_rmse"] == pytest.approx(np.sqrt(mean_squared_error(y, predictions)), rel=1e-9)
    assert metrics["val_mae"] == pytest.approx(mean_absolute_error(y, predictions), rel=1e-9)
