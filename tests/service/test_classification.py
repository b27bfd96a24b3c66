"""Binary classification through the service: a string-labelled CSV goes in, its task is detected, a path job
fits the logistic loss, and a promoted model scores rows with labels, probabilities and explanations that
agree with the library's ``FireClassifier`` on the same data and settings.
"""

import gzip
import io

import numpy as np
import pandas as pd
import pytest

from solver import FireClassifier, probability
from tests.support.data import DATA

pytestmark = pytest.mark.integration

FOREST = {"n_estimators": 30, "max_depth": 3, "max_features": "sqrt", "random_state": 0}
PATH = {"penalty": "mcp", "gamma": 1.1, "fusion_ratio": 0.5, "n_lambdas": 20, "max_rules": 12}
N_ROWS = 800


def credit_table() -> bytes:
    frame = pd.read_csv(DATA / "credit_data.csv.gz").iloc[:N_ROWS]
    return frame.to_csv(index=False).encode()


def upload(client, data: bytes, target: str, **query):
    params = "".join(f"&{name}={value}" for name, value in query.items())
    return client.post(f"/v1/datasets?target={target}{params}", content=data, headers={"Content-Type": "text/csv"})


def test_a_string_labelled_table_is_classified_and_agrees_with_the_library(stack):
    data = credit_table()
    frame = pd.read_csv(io.BytesIO(data))
    X, y = frame.drop(columns=["Status"]), frame["Status"]
    library = FireClassifier(**FOREST, **PATH).fit(X, y)

    client = stack.client
    response = upload(client, data, "Status")
    assert response.status_code in (200, 201), response.text
    dataset = response.json()
    assert dataset["task"] == "classification" and dataset["classes"] == ["bad", "good"]
    assert dataset["target_summary"]["mean"] == pytest.approx((y == "good").mean())

    submitted = client.post(
        "/v1/jobs",
        json={
            "dataset_id": dataset["id"],
            "forest": FOREST,
            **PATH,
            "validation": {"fraction": library.validation_fraction, "seed": FOREST["random_state"]},
        },
    )
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    assert submitted.json()["spec"]["path"]["loss"] == "logistic"  # from the dataset's task
    job = stack.wait_for(job_id, ("succeeded",), timeout=180)
    assert job["summary"]["val_auc"] is not None

    result = client.get(f"/v1/jobs/{job_id}/result").json()
    assert result["selected"] == library.selected_step_
    selected = result["steps"][result["selected"]]
    assert 0.5 < selected["val_auc"] <= 1 and 0 <= selected["val_accuracy"] <= 1
    for served, fitted in zip(result["steps"], library.path_, strict=True):
        assert {k: v for k, v in served.items() if k != "seconds"} == {
            k: v for k, v in fitted.items() if k != "seconds"
        }
    forest = client.get(f"/v1/forests/{result['forest_id']}").json()
    assert forest["source"]["loss"] == "logistic"  # a classifier forest, as the library trains

    rules = client.get(f"/v1/jobs/{job_id}/steps/{result['selected']}/rules").json()
    assert rules["rules"] == library.rule_ensemble_.to_dict()
    assert rules["rules"]["response"] == "log-odds of 'good'"

    model = client.post("/v1/models", json={"job_id": job_id, "name": "credit-status"}).json()
    assert model["loss"] == "logistic" and model["classes"] == ["bad", "good"]
    assert model["metrics"]["val_auc"] == selected["val_auc"]
    rows = X.iloc[::9]
    scored = client.post(
        f"/v1/models/{model['id']}/predict?explain=true",
        json={
            "dataframe_split": {
                "columns": list(rows.columns),
                "data": rows.astype(object).where(rows.notna(), None).to_numpy().tolist(),
            }
        },
    )
    assert scored.status_code == 200, scored.text
    answer = scored.json()
    assert set(answer["predictions"]) <= {"bad", "good"} and answer["classes"] == ["bad", "good"]
    assert answer["predictions"] == library.predict(rows).tolist()
    probabilities = np.array(answer["probabilities"])
    assert ((probabilities >= 0) & (probabilities <= 1)).all()
    np.testing.assert_allclose(probabilities, library.predict_proba(rows)[:, 1], rtol=0, atol=1e-12)
    log_odds = library.decision_function(rows)
    np.testing.assert_allclose(probability(log_odds), probabilities, rtol=0, atol=1e-12)
    assert len(answer["explanations"]) == len(rows) == len(answer["contributions"])
    # the rules that fired, then every linear term (the library's explain, entry for entry)
    fired = library.explain(rows)
    assert answer["explanations"] == [[entry["id"] for entry in row if "id" in entry] for row in fired]
    linear = [[entry["contribution"] for entry in row if "linear" in entry] for row in fired]
    assert answer.get("linear_contributions") == (linear if library.rule_ensemble_.linear else None)
    for ids, contributions, terms, score in zip(answer["explanations"], answer["contributions"], linear, log_odds):
        assert len(ids) == len(contributions)
        assert sum(contributions) + sum(terms) == pytest.approx(score - model["intercept"], abs=1e-9)


def test_a_three_class_text_target_is_multiclass(stack):
    frame = pd.read_csv(DATA / "credit_data.csv.gz").iloc[:200]
    frame["Status"] = np.array(["bad", "good", "fair"])[np.arange(len(frame)) % 3]
    response = upload(stack.client, frame.to_csv(index=False).encode(), "Status")
    assert response.status_code == 201, response.text
    dataset = response.json()
    assert dataset["task"] == "multiclass" and dataset["classes"] == ["bad", "fair", "good"]
    assert dataset["class_counts"] == [67, 66, 67]
    # declared a binary classification, it is refused naming the target and the task that fits
    refused = upload(stack.client, frame.to_csv(index=False).encode(), "Status", task="classification")
    assert refused.status_code == 422, refused.text
    problem = refused.json()
    assert "Status" in problem["detail"] and "task=multiclass" in problem["errors"][0]["fix"]
    assert [error["field"] for error in problem["errors"]] == ["body.columns.Status"]


def test_a_declared_classification_needs_two_labels_and_a_declared_regression_keeps_a_binary_number(stack):
    frame = pd.read_csv(DATA / "credit_data.csv.gz").iloc[:200].drop(columns=["Status"])
    frame["flag"] = (frame["Age"] > 35).astype(int)
    data = frame.to_csv(index=False).encode()
    assert upload(stack.client, data, "Age", task="classification").status_code == 422
    assert upload(stack.client, data, "flag").json()["task"] == "classification"
    regression = upload(stack.client, data, "flag", task="regression").json()
    assert regression["task"] == "regression" and regression["classes"] is None
    assert upload(stack.client, data, "flag", task="multiclass").status_code == 422


def test_a_logistic_loss_on_a_regression_dataset_is_refused_at_the_loss(stack):
    data = gzip.decompress((DATA / "abalone.csv.gz").read_bytes())
    dataset = upload(stack.client, data, "rings").json()
    assert dataset["task"] == "regression"
    response = stack.client.post(
        "/v1/jobs", json={"dataset_id": dataset["id"], "forest": FOREST, "loss": "logistic", **PATH}
    )
    assert response.status_code == 422, response.text
    assert [error["field"] for error in response.json()["errors"]] == ["body.loss"]


def test_a_forest_trained_for_a_classification_dataset_is_a_classifier_and_a_grid_fits_log_odds(stack):
    client = stack.client
    dataset = upload(client, credit_table(), "Status").json()
    trained = client.post(
        "/v1/forests/train", json={"dataset_id": dataset["id"], **FOREST, "validation": {"fraction": 0.2, "seed": 1}}
    )
    assert trained.status_code == 202, trained.text
    job = stack.wait_for(trained.json()["id"], ("succeeded",), timeout=120)
    forest = client.get(f"/v1/forests/{job['summary']['forest_id']}").json()
    assert forest["source"]["loss"] == "logistic"

    grid = client.post(
        "/v1/jobs",
        json={
            "dataset_id": dataset["id"],
            "forest_id": forest["id"],
            "validation": {"fraction": 0.2, "seed": 1},
            "n_lambdas": 10,
            "max_rules": 12,
            "grid": {"gamma": [1.1, 3.0], "fusion_ratio": [0.0]},
        },
    )
    assert grid.status_code == 202, grid.text
    done = stack.wait_for(grid.json()["id"], ("succeeded",), timeout=180)
    assert done["summary"]["val_auc"] is not None
    result = client.get(f"/v1/jobs/{done['id']}/result").json()
    assert result["parameters"]["path"]["loss"] == "logistic"
    assert all(step["val_auc"] is not None for step in result["steps"])
    # squared on the 0/1 target when asked for explicitly
    squared = client.post(
        "/v1/jobs",
        json={
            "dataset_id": dataset["id"],
            "forest_id": forest["id"],
            "loss": "squared",
            "validation": {"fraction": 0.2, "seed": 1},
            "n_lambdas": 5,
        },
    )
    assert squared.status_code == 202 and squared.json()["spec"]["path"]["loss"] == "squared"
    stack.wait_for(squared.json()["id"], ("succeeded",), timeout=120)
